//! The lake on disk: layout, the writer lock, atomic multi-file commits and crash recovery.
//!
//! ```text
//! <root>/
//!   matches/day=YYYY-MM-DD/part-<run_id>.parquet   the match-history table (zstd Parquet)
//!   quarantine/part-<run_id>.parquet                 rejected records with file, line and reason
//!   _runs/<run_id>.json                               one record per committed run (accounting)
//!   _txn/<run_id>/                                    a run in progress (never read by readers)
//!   _lock                                             held by the one writer at a time
//! ```
//!
//! A run stages every file it will add under `_txn/<run_id>/data/`, fsyncs them, and then commits:
//! it writes `_txn/<run_id>/COMMIT.json` (the commit point, itself written to a temporary name,
//! fsynced and renamed), moves each staged file into place with a rename, writes the run record
//! and removes the transaction directory. A run never modifies or deletes a file it did not add.
//! On open, [`Lake::recover`] rolls forward every transaction that reached its commit point and
//! deletes every one that did not, so after any crash the lake holds either all of a run's files
//! or none of them.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow_array::{Array, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde::{Deserialize, Serialize};

use crate::schema::{day_dir_name, parse_day_dir_name};
use crate::syncer::Syncer;

pub const MATCHES_DIR: &str = "matches";
pub const QUARANTINE_DIR: &str = "quarantine";
pub const RUNS_DIR: &str = "_runs";
pub const TXN_DIR: &str = "_txn";
pub const LOCK_FILE: &str = "_lock";
const COMMIT_FILE: &str = "COMMIT.json";

/// Errors of the lake store. Every variant names the path it concerns.
#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: Parquet error: {source}")]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    #[error("{path}: Arrow error: {source}")]
    Arrow {
        path: PathBuf,
        source: arrow_schema::ArrowError,
    },
    #[error("{path}: another run holds the lake lock; wait for it to finish")]
    Locked { path: PathBuf },
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
}

pub type Result<T, E = LakeError> = std::result::Result<T, E>;

pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LakeError + '_ {
    move |source| LakeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The zstd level of every Parquet file the lake writes. Level 1: on the 10M-row benchmark's
/// day partitions it is about 15% faster than level 3 (the polars peer's) and its files are no
/// larger (94 MB against 101 MB with level 3).
pub const ZSTD_LEVEL: i32 = 1;

/// Low-cardinality text columns, dictionary-encoded. Every other column is written plain:
/// dictionary building costs more time than it saves bytes once zstd has done its work.
const DICTIONARY: [&str; 9] = [
    "mode",
    "outcome",
    "team_name",
    "input_device",
    "platform",
    "region",
    "source_file",
    "stage",
    "field",
];

/// Writer properties of one lake file: zstd, statistics, our name as the writer. Columns that
/// are null in every row, and those in [`UNCOMPRESSED`], are left uncompressed: they encode to
/// a few bytes a row or less either way, and a compressed column costs a zstd compressor and
/// decompressor per file. Creating those runs the `cpuid` instruction, which traps to the
/// hypervisor on a virtual machine: on the 10M-row benchmark (688 day files) the contexts of 14
/// compressed columns took 4.5% of the run's CPU time.
fn properties_for(batches: &[RecordBatch]) -> WriterProperties {
    let mut b = properties_builder();
    for c in UNCOMPRESSED {
        b = b.set_column_compression(c.into(), Compression::UNCOMPRESSED);
    }
    if let Some(first) = batches.first() {
        for (k, field) in first.schema().fields().iter().enumerate() {
            if batches
                .iter()
                .all(|x| x.column(k).null_count() == x.num_rows())
            {
                b = b.set_column_compression(
                    field.name().as_str().into(),
                    Compression::UNCOMPRESSED,
                );
            }
        }
    }
    b.build()
}

fn properties_builder() -> parquet::file::properties::WriterPropertiesBuilder {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(ZSTD_LEVEL).unwrap_or_default(),
        ))
        .set_dictionary_enabled(false)
        .set_created_by(concat!("mm ", env!("CARGO_PKG_VERSION")).to_string());
    for c in DICTIONARY {
        b = b.set_column_dictionary_enabled(c.into(), true);
    }
    // Identifiers are looked up, never filtered by range: min/max statistics would cost a string
    // comparison per value and prune nothing (nor would they for the outcome or source file).
    for c in NO_STATISTICS {
        b = b.set_column_statistics_enabled(c.into(), EnabledStatistics::None);
    }
    // Sorted or nearly sorted integers: deltas are small, so zstd has far less to do.
    for c in DELTA {
        b = b.set_column_encoding(c.into(), Encoding::DELTA_BINARY_PACKED);
    }
    b
}

/// Identifier and free-text columns, and the outcome and source file (three values, one value),
/// written without min/max statistics.
const NO_STATISTICS: [&str; 7] = [
    "match_id",
    "player_id",
    "party_id",
    "extra",
    "raw",
    "outcome",
    "source_file",
];

/// Columns written without compression: bit-packed counts, which zstd shrinks by about 3%
/// (kills, deaths, deaths by enemy on the 10M-row benchmark), and columns whose encoding leaves
/// almost nothing (a dictionary of one mode or one source file, consecutive line numbers).
const UNCOMPRESSED: [&str; 8] = [
    "kills",
    "deaths",
    "deaths_by_enemy",
    "self_kills",
    "assists",
    "mode",
    "source_file",
    "source_line",
];

/// Integer columns written with delta encoding: times and line numbers are sorted or nearly so
/// within a file, and the counts are small, so the encoding packs them into a few bits a value
/// and zstd has far less to do (on the 10M-row benchmark: 7% smaller, and less CPU).
const DELTA: [&str; 10] = [
    "start_time",
    "end_time",
    "source_line",
    "line",
    "team",
    "kills",
    "deaths",
    "deaths_by_enemy",
    "self_kills",
    "assists",
];

/// Writes `batches` to a new Parquet file at `path` and fsyncs it. Returns the size in bytes.
pub fn write_parquet_file(path: &Path, batches: &[RecordBatch]) -> Result<u64> {
    let file = write_parquet_unsynced(path, batches)?;
    file.sync_all().map_err(io_err(path))?;
    Ok(file.metadata().map_err(io_err(path))?.len())
}

/// Writes `batches` to a new Parquet file at `path` and returns it open, not yet synced.
fn write_parquet_unsynced(path: &Path, batches: &[RecordBatch]) -> Result<File> {
    let schema = batches
        .first()
        .map(RecordBatch::schema)
        .ok_or_else(|| LakeError::Corrupt {
            path: path.to_path_buf(),
            reason: "refusing to write a Parquet file with no batches".into(),
        })?;
    let file = File::create_new(path).map_err(io_err(path))?;
    let pq = |source| LakeError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let mut w = ArrowWriter::try_new(
        BufWriter::with_capacity(1 << 20, file),
        schema,
        Some(properties_for(batches)),
    )
    .map_err(pq)?;
    for b in batches {
        w.write(b).map_err(pq)?;
    }
    let buf = w.into_inner().map_err(pq)?;
    buf.into_inner().map_err(|e| LakeError::Io {
        path: path.to_path_buf(),
        source: e.into_error(),
    })
}

/// Reads the named columns of a Parquet file (all of them when `columns` is `None`).
pub fn read_parquet_columns(path: &Path, columns: Option<&[&str]>) -> Result<Vec<RecordBatch>> {
    let file = File::open(path).map_err(io_err(path))?;
    let pq = |source| LakeError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    let mut builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(pq)?;
    if let Some(cols) = columns {
        let mask = ProjectionMask::columns(builder.parquet_schema(), cols.iter().copied());
        builder = builder.with_projection(mask);
    }
    let reader = builder.with_batch_size(64 * 1024).build().map_err(pq)?;
    reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| LakeError::Arrow {
            path: path.to_path_buf(),
            source,
        })
}

fn sync_dir(path: &Path) -> Result<()> {
    File::open(path)
        .and_then(|d| d.sync_all())
        .map_err(io_err(path))
}

/// Writes `bytes` to `path` atomically: a temporary sibling, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file")
    ));
    {
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(bytes).map_err(io_err(&tmp))?;
        f.sync_all().map_err(io_err(&tmp))?;
    }
    fs::rename(&tmp, path).map_err(io_err(path))?;
    sync_dir(dir)
}

/// A match-history lake rooted at a directory.
#[derive(Debug, Clone)]
pub struct Lake {
    root: PathBuf,
}

/// The exclusive writer lock of a lake; released on drop.
#[derive(Debug)]
pub struct LakeLock {
    _file: File,
}

/// What [`Lake::recover`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// Runs that had reached their commit point and were completed.
    pub rolled_forward: Vec<String>,
    /// Runs that had not, and were removed.
    pub rolled_back: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct CommitRecord {
    run_id: String,
    files: Vec<PathBuf>,
    run: serde_json::Value,
}

impl Lake {
    /// Opens the lake at `root`, creating its directories if needed. Does not take the lock.
    pub fn open(root: impl Into<PathBuf>) -> Result<Lake> {
        let root = root.into();
        for d in [MATCHES_DIR, QUARANTINE_DIR, RUNS_DIR, TXN_DIR] {
            let p = root.join(d);
            fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        Ok(Lake { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Takes the writer lock, failing at once if another process holds it.
    pub fn lock(&self) -> Result<LakeLock> {
        let path = self.root.join(LOCK_FILE);
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        match file.try_lock() {
            Ok(()) => Ok(LakeLock { _file: file }),
            Err(fs::TryLockError::WouldBlock) => Err(LakeError::Locked { path }),
            Err(fs::TryLockError::Error(e)) => Err(LakeError::Io { path, source: e }),
        }
    }

    /// Completes or removes every unfinished transaction (see the module docs).
    pub fn recover(&self, _lock: &LakeLock) -> Result<Recovery> {
        let txn_root = self.root.join(TXN_DIR);
        let mut report = Recovery::default();
        let mut dirs: Vec<PathBuf> = fs::read_dir(&txn_root)
            .map_err(io_err(&txn_root))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let name = dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            if dir.join(COMMIT_FILE).exists() {
                self.roll_forward(&dir)?;
                report.rolled_forward.push(name);
            } else {
                fs::remove_dir_all(&dir).map_err(io_err(&dir))?;
                report.rolled_back.push(name);
            }
        }
        Ok(report)
    }

    /// Starts a transaction for `run_id` (which must be new). Requires the lock.
    pub fn begin(&self, _lock: &LakeLock, run_id: &str) -> Result<Txn> {
        let dir = self.root.join(TXN_DIR).join(run_id);
        fs::create_dir(&dir).map_err(io_err(&dir))?;
        let data = dir.join("data");
        fs::create_dir(&data).map_err(io_err(&data))?;
        Ok(Txn {
            lake: self.clone(),
            dir,
            run_id: run_id.to_string(),
            files: Vec::new(),
            done: false,
            syncer: Syncer::default(),
        })
    }

    /// The partition directory of a day, relative to the root.
    pub fn partition_rel(day: i32) -> PathBuf {
        Path::new(MATCHES_DIR).join(day_dir_name(day))
    }

    /// Days present in the `matches` table, sorted.
    pub fn days(&self) -> Result<Vec<i32>> {
        let dir = self.root.join(MATCHES_DIR);
        let mut days: Vec<i32> = fs::read_dir(&dir)
            .map_err(io_err(&dir))?
            .filter_map(|e| e.ok())
            .filter_map(|e| parse_day_dir_name(e.file_name().to_str()?))
            .collect();
        days.sort_unstable();
        Ok(days)
    }

    /// The Parquet files of one day's partition, sorted by name (that is, by run).
    pub fn partition_files(&self, day: i32) -> Result<Vec<PathBuf>> {
        parquet_files_in(&self.root.join(Self::partition_rel(day)))
    }

    /// Every Parquet file of the `matches` table, by day and then by run.
    pub fn matches_files(&self) -> Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for day in self.days()? {
            out.extend(self.partition_files(day)?);
        }
        Ok(out)
    }

    /// Every Parquet file of the `quarantine` table.
    pub fn quarantine_files(&self) -> Result<Vec<PathBuf>> {
        parquet_files_in(&self.root.join(QUARANTINE_DIR))
    }

    /// The run records of every committed run, oldest first.
    pub fn runs(&self) -> Result<Vec<serde_json::Value>> {
        let dir = self.root.join(RUNS_DIR);
        let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
            .map_err(io_err(&dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        paths
            .iter()
            .map(|p| {
                let text = fs::read_to_string(p).map_err(io_err(p))?;
                serde_json::from_str(&text).map_err(|e| LakeError::Corrupt {
                    path: p.clone(),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    fn roll_forward(&self, dir: &Path) -> Result<()> {
        let commit_path = dir.join(COMMIT_FILE);
        let text = fs::read_to_string(&commit_path).map_err(io_err(&commit_path))?;
        let rec: CommitRecord = serde_json::from_str(&text).map_err(|e| LakeError::Corrupt {
            path: commit_path.clone(),
            reason: e.to_string(),
        })?;
        let mut touched: Vec<PathBuf> = Vec::new();
        // A staged directory the lake does not have yet (a new day) moves in one rename.
        let mut parents: Vec<&Path> = rec.files.iter().filter_map(|r| r.parent()).collect();
        parents.sort();
        parents.dedup();
        for rel_dir in parents {
            let (src, dst) = (dir.join("data").join(rel_dir), self.root.join(rel_dir));
            if src.is_dir() && !dst.exists() {
                let up = dst.parent().unwrap_or(&self.root).to_path_buf();
                fs::create_dir_all(&up).map_err(io_err(&up))?;
                fs::rename(&src, &dst).map_err(io_err(&dst))?;
                if !touched.contains(&up) {
                    touched.push(up);
                }
            }
        }
        for rel in &rec.files {
            let src = dir.join("data").join(rel);
            let dst = self.root.join(rel);
            if !src.exists() {
                if dst.exists() {
                    continue; // moved before a crash
                }
                return Err(LakeError::Corrupt {
                    path: src,
                    reason: format!("committed run {} lost a staged file", rec.run_id),
                });
            }
            let parent = dst.parent().unwrap_or(&self.root).to_path_buf();
            fs::create_dir_all(&parent).map_err(io_err(&parent))?;
            if dst.exists() {
                return Err(LakeError::Corrupt {
                    path: dst,
                    reason: "refusing to overwrite an existing lake file".into(),
                });
            }
            fs::rename(&src, &dst).map_err(io_err(&dst))?;
            if !touched.contains(&parent) {
                touched.push(parent);
            }
        }
        for d in &touched {
            sync_dir(d)?;
        }
        sync_dir(&self.root.join(MATCHES_DIR))?;
        let run_path = self
            .root
            .join(RUNS_DIR)
            .join(format!("{}.json", rec.run_id));
        let body = serde_json::to_vec_pretty(&rec.run).map_err(|e| LakeError::Corrupt {
            path: run_path.clone(),
            reason: e.to_string(),
        })?;
        write_atomic(&run_path, &body)?;
        fs::remove_dir_all(dir).map_err(io_err(dir))?;
        sync_dir(&self.root.join(TXN_DIR))
    }
}

fn parquet_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(io_err(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
        .collect();
    files.sort();
    Ok(files)
}

/// Where a commit stops when a test simulates a crash (see [`Txn::commit_crashing_at`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Files staged, commit record not written.
    BeforeCommitRecord,
    /// Commit record written, no file moved.
    AfterCommitRecord,
    /// Commit record written, the first staged file moved, the rest not.
    AfterFirstMove,
}

/// A run's pending additions to the lake. Dropping it without [`Txn::commit`] removes them.
#[derive(Debug)]
pub struct Txn {
    lake: Lake,
    dir: PathBuf,
    run_id: String,
    files: Vec<PathBuf>,
    done: bool,
    /// Syncs the files staged by [`Txn::write_staged`]; the commit waits for it.
    syncer: Syncer,
}

impl Txn {
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Stages a Parquet file that the commit will place at `rel` (relative to the lake root).
    pub fn write_parquet(&mut self, rel: &Path, batches: &[RecordBatch]) -> Result<u64> {
        let bytes = self.write_staged(rel, batches)?;
        self.files.push(rel.to_path_buf());
        Ok(bytes)
    }

    /// Writes a Parquet file that the commit will place at `rel`, from any thread; the caller
    /// registers it with [`Txn::add_staged`]. Its fsync runs in the background (see
    /// [`crate::syncer`]) and the commit waits for it. Returns the size in bytes.
    pub fn write_staged(&self, rel: &Path, batches: &[RecordBatch]) -> Result<u64> {
        let path = self.staged_path(rel)?;
        let file = write_parquet_unsynced(&path, batches)?;
        let bytes = file.metadata().map_err(io_err(&path))?.len();
        self.syncer.sync_later(path, file)?;
        Ok(bytes)
    }

    /// Registers a file written by the caller at [`Txn::staged_path`] (already fsynced) or by
    /// [`Txn::write_staged`].
    pub fn add_staged(&mut self, rel: &Path) {
        self.files.push(rel.to_path_buf());
    }

    /// The staging path of a file that will be placed at `rel`; parent directories are created.
    pub fn staged_path(&self, rel: &Path) -> Result<PathBuf> {
        let path = self.dir.join("data").join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        Ok(path)
    }

    /// Commits the staged files and the run record `run` (stored as `_runs/<run_id>.json`).
    pub fn commit(self, run: &serde_json::Value) -> Result<()> {
        self.commit_inner(run, None)
    }

    /// Commits up to `crash` and then stops as if the process had died there (test support).
    #[doc(hidden)]
    pub fn commit_crashing_at(self, run: &serde_json::Value, crash: CrashPoint) -> Result<()> {
        self.commit_inner(run, Some(crash))
    }

    fn commit_inner(mut self, run: &serde_json::Value, crash: Option<CrashPoint>) -> Result<()> {
        // Every staged file is durable before the commit point.
        self.syncer.finish()?;
        if crash == Some(CrashPoint::BeforeCommitRecord) {
            self.done = true; // a dead process cleans nothing up
            return Ok(());
        }
        let rec = CommitRecord {
            run_id: self.run_id.clone(),
            files: self.files.clone(),
            run: run.clone(),
        };
        let commit_path = self.dir.join(COMMIT_FILE);
        let body = serde_json::to_vec_pretty(&rec).map_err(|e| LakeError::Corrupt {
            path: commit_path.clone(),
            reason: e.to_string(),
        })?;
        write_atomic(&commit_path, &body)?;
        self.done = true;
        match crash {
            Some(CrashPoint::AfterCommitRecord) => Ok(()),
            Some(CrashPoint::AfterFirstMove) => {
                if let Some(rel) = self.files.first() {
                    let dst = self.lake.root.join(rel);
                    if let Some(p) = dst.parent() {
                        fs::create_dir_all(p).map_err(io_err(p))?;
                    }
                    fs::rename(self.dir.join("data").join(rel), &dst).map_err(io_err(&dst))?;
                }
                Ok(())
            }
            _ => self.lake.roll_forward(&self.dir),
        }
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        // Join the sync threads before the files they hold are removed.
        let _ = self.syncer.finish();
        if !self.done {
            // Best effort: anything left behind is removed by the next `recover`.
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}
