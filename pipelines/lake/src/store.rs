//! The lake: two Delta Lake tables under one root, and the runs that add to them.
//!
//! ```text
//! <root>/                                   a local directory or an object-store prefix
//!   matches/                                Delta table, partitioned by `day` (UTC date)
//!     _delta_log/00000000000000000000.json  the log: the only truth about which files count
//!     day=YYYY-MM-DD/part-<run>….parquet    data files (zstd Parquet, written by mm)
//!   quarantine/                             Delta table of rejected records (not partitioned)
//!   truth/                                  (simulated lakes only) the simulator's ground truth
//!   _txn/<run_id>/                          a local lake's runs in progress (never read)
//! ```
//!
//! A run ([`Txn`]) stages its files on local disk, fsyncs them, then publishes them into the
//! tables' directories under names no other run uses, and commits them to the Delta log: first
//! the quarantine table's entries, then the matches table's files together with the run record
//! (in the commit's `commitInfo`, key `mm_run`). Readers see only committed files, so a crash at
//! any point leaves every table at a committed version; published files of a run that never
//! committed are invisible, and `mm lake vacuum --full` removes them.
//!
//! Writers never lock. A commit is put-if-absent on the next log entry (delta-rs; on S3 a
//! conditional write). When another run committed first, the loser re-reads what the winner
//! added and checks its own keys against it: (match_id, player_id) for matches, (file content,
//! line) for quarantine. Disjoint runs then both commit; overlapping ones are refused with
//! [`LakeError::Conflict`] and commit nothing, and a rerun adds exactly what is missing.
//!
//! [`Lake::open`] pins one snapshot of each table (latest, or [`AsOf`] a version or time), and
//! every list it returns comes from that snapshot's log, never from a directory listing.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File};
use std::future::IntoFuture;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow_array::{Array, RecordBatch};
use object_store::ObjectStoreExt as _;
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde::Serialize;

use crate::delta::{self, AsOf, WinnerCommit};
use crate::location::{Location, cache_root};
use crate::schema::{day_dir_name, parse_day_dir_name};
use crate::syncer::Syncer;

pub const MATCHES_DIR: &str = "matches";
pub const QUARANTINE_DIR: &str = "quarantine";
pub const TXN_DIR: &str = "_txn";
/// The partition column of the matches table: the UTC day of the match start (Delta `date`).
pub const DAY: &str = "day";
/// The key of the run record in a commit's `commitInfo`.
pub const RUN_KEY: &str = "mm_run";
const OWNER_FILE: &str = "owner";

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
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// The location cannot be used: a malformed URL, an unreachable or missing bucket, missing
    /// or refused credentials, or a version or time the table does not have.
    #[error("{location}: {reason}")]
    Location { location: String, reason: String },
    /// The table's Delta protocol asks for features `mm` does not implement.
    #[error("{location}: {reason}")]
    Protocol { location: String, reason: String },
    /// A concurrent run committed rows this run also holds; this run committed nothing.
    #[error("{location}: {reason}")]
    Conflict { location: String, reason: String },
    #[error("{location}: Delta Lake error: {source}")]
    Delta {
        location: String,
        source: Box<deltalake_core::DeltaTableError>,
    },
}

impl LakeError {
    /// Whether the error is the input's or the configuration's fault (exit code 2 in `mm`):
    /// a location that cannot be used, a table of a newer protocol, a corrupt file.
    #[must_use]
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            LakeError::Location { .. } | LakeError::Protocol { .. } | LakeError::Corrupt { .. }
        )
    }

    /// Classifies a delta-rs error: storage that cannot be reached or read, and versions that
    /// do not exist, are the location's fault; anything else is reported as a Delta error.
    pub(crate) fn from_delta(loc: &Location, e: deltalake_core::DeltaTableError) -> LakeError {
        use deltalake_core::DeltaTableError as E;
        let location = loc.to_string();
        match e {
            E::ObjectStore { source } => LakeError::Location {
                location,
                reason: crate::location::store_reason(&source),
            },
            E::InvalidVersion(v) => LakeError::Location {
                location,
                reason: format!("the table has no version {v}"),
            },
            E::InvalidTableLocation(r) | E::NotATable(r) => LakeError::Location {
                location,
                reason: r,
            },
            E::MissingFeature { feature, url } => LakeError::Location {
                location,
                reason: format!("{feature} is needed for {url}"),
            },
            other => {
                let text = other.to_string();
                if text.contains("Unsupported") || text.contains("unsupported") {
                    LakeError::Protocol {
                        location,
                        reason: text,
                    }
                } else {
                    LakeError::Delta {
                        location,
                        source: Box::new(other),
                    }
                }
            }
        }
    }
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

pub(crate) fn sync_dir(path: &Path) -> Result<()> {
    mm_artifact::fsio::sync_dir(path).map_err(io_err(path))
}

/// Writes `bytes` to `path` atomically and durably ([`mm_artifact::fsio::write_atomic`], with
/// the lake's error).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    mm_artifact::fsio::write_atomic(path, bytes).map_err(io_err(path))
}

/// Row keys by partition value (`None`: an unpartitioned table): (match_id and player_id, 0)
/// for matches, (file content hash, line) for quarantine.
/// A run's staged files of one table, by partition (`None` for the unpartitioned quarantine).
type StagedByPartition = HashMap<Option<String>, Vec<PathBuf>>;

/// One data file of a table snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileEntry {
    /// Path relative to the table root, as the log records it (decoded).
    pub path: String,
    /// The `day` partition, for the matches table.
    pub day: Option<i32>,
    pub bytes: u64,
    /// `numRecords` from the file's statistics in the log, when present.
    pub rows: Option<u64>,
}

/// One table of the lake, at the snapshot the [`Lake`] pinned.
#[derive(Clone)]
struct TableView {
    loc: Location,
    table: Option<deltalake_core::DeltaTable>,
    files: Vec<FileEntry>,
}

impl std::fmt::Debug for TableView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableView")
            .field("loc", &self.loc)
            .field("version", &self.version())
            .field("files", &self.files.len())
            .finish()
    }
}

impl TableView {
    fn open(loc: Location, as_of: AsOf) -> Result<TableView> {
        let table = delta::open_table(&loc, as_of)?;
        let mut files = Vec::new();
        if let Some(t) = &table {
            let snap = t.snapshot().map_err(delta::delta_err(&loc))?;
            for f in snap.log_data().iter() {
                let day = f
                    .partition_values_map()
                    .get(DAY)
                    .cloned()
                    .flatten()
                    .and_then(|d| parse_day_dir_name(&format!("day={d}")));
                files.push(FileEntry {
                    path: f.path().into_owned(),
                    day,
                    bytes: u64::try_from(f.size()).unwrap_or(0),
                    rows: f.num_records().map(|n| n as u64),
                });
            }
        }
        // Lake order: by day, then by name (a run's files carry its sortable run id).
        files.sort_by(|a, b| (a.day, &a.path).cmp(&(b.day, &b.path)));
        Ok(TableView { loc, table, files })
    }

    fn version(&self) -> Option<i64> {
        self.table.as_ref().and_then(delta::version_of)
    }

    /// The local path of a file of this table: the file itself for a local table, a cached
    /// copy (downloaded once) for a remote one.
    fn local_file(&self, rel: &str) -> Result<PathBuf> {
        crate::mirror::local_copy(&self.loc, "lakes", rel, || {
            let table = self.table.as_ref().ok_or_else(|| LakeError::Location {
                location: self.loc.to_string(),
                reason: "no table".into(),
            })?;
            Ok(table.log_store().object_store(None))
        })
    }
}

/// A lake: the `matches` and `quarantine` tables under one root, each pinned at one snapshot.
#[derive(Debug, Clone)]
pub struct Lake {
    root: Location,
    matches: TableView,
    quarantine: TableView,
}

/// What [`Lake::recover`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// Staging directories of runs that died before committing, removed.
    pub removed: Vec<String>,
}

/// One commit of the matches table, for `mm lake show`.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryEntry {
    pub version: i64,
    pub timestamp_ms: Option<i64>,
    pub operation: Option<String>,
    pub run_id: Option<String>,
    /// Rows the commit added (from the run record), when it was an `mm` run.
    pub rows_added: Option<u64>,
}

impl Lake {
    /// Opens the lake at `root` (a path or URL) at its latest committed versions. A location
    /// with no tables yet is an empty lake.
    pub fn open(root: impl AsRef<Path>) -> Result<Lake> {
        Lake::open_as_of(root, AsOf::Latest)
    }

    /// Opens the lake with its matches table as of a version or time (the quarantine table at
    /// its latest version).
    pub fn open_as_of(root: impl AsRef<Path>, as_of: AsOf) -> Result<Lake> {
        let root = Location::from_path(root.as_ref())?;
        Lake::at(root, as_of)
    }

    /// Opens the lake at `root`, creating its tables first if they do not exist (writers).
    pub fn open_or_create(root: impl AsRef<Path>) -> Result<Lake> {
        let root = Location::from_path(root.as_ref())?;
        if is_legacy(&root) {
            return Err(legacy_error(&root));
        }
        let m = root.join(MATCHES_DIR);
        if delta::open_table(&m, AsOf::Latest)?.is_none() {
            delta::create_table(
                &m,
                MATCHES_DIR,
                &crate::schema::matches_schema(),
                &[(DAY, deltalake_core::kernel::DataType::DATE)],
            )?;
        }
        let q = root.join(QUARANTINE_DIR);
        if delta::open_table(&q, AsOf::Latest)?.is_none() {
            delta::create_table(&q, QUARANTINE_DIR, &crate::schema::quarantine_schema(), &[])?;
        }
        Lake::at(root, AsOf::Latest)
    }

    fn at(root: Location, as_of: AsOf) -> Result<Lake> {
        if is_legacy(&root) {
            return Err(legacy_error(&root));
        }
        let matches = TableView::open(root.join(MATCHES_DIR), as_of)?;
        let quarantine = TableView::open(root.join(QUARANTINE_DIR), AsOf::Latest)?;
        Ok(Lake {
            root,
            matches,
            quarantine,
        })
    }

    pub fn root(&self) -> &Location {
        &self.root
    }

    /// The version of the matches table this lake was opened at (`None`: no table yet). Fits,
    /// exports and evaluations record it, and `--as-of` reads it back.
    #[must_use]
    pub fn version(&self) -> Option<i64> {
        self.matches.version()
    }

    /// The version of the quarantine table this lake was opened at.
    #[must_use]
    pub fn quarantine_version(&self) -> Option<i64> {
        self.quarantine.version()
    }

    /// The partition directory of a day, relative to the root.
    pub fn partition_rel(day: i32) -> PathBuf {
        Path::new(MATCHES_DIR).join(day_dir_name(day))
    }

    /// Days present in the snapshot of the `matches` table, sorted.
    pub fn days(&self) -> Result<Vec<i32>> {
        let days: BTreeSet<i32> = self.matches.files.iter().filter_map(|f| f.day).collect();
        Ok(days.into_iter().collect())
    }

    /// The files of the matches snapshot, with their sizes and row counts.
    #[must_use]
    pub fn match_entries(&self) -> &[FileEntry] {
        &self.matches.files
    }

    /// The files of the quarantine snapshot.
    #[must_use]
    pub fn quarantine_entries(&self) -> &[FileEntry] {
        &self.quarantine.files
    }

    /// Local paths of one day's Parquet files in the snapshot, by name (that is, by run).
    pub fn partition_files(&self, day: i32) -> Result<Vec<PathBuf>> {
        self.matches
            .files
            .iter()
            .filter(|f| f.day == Some(day))
            .map(|f| self.matches.local_file(&f.path))
            .collect()
    }

    /// Local paths of every Parquet file of the matches snapshot, by day and then by run.
    pub fn matches_files(&self) -> Result<Vec<PathBuf>> {
        self.matches
            .files
            .iter()
            .map(|f| self.matches.local_file(&f.path))
            .collect()
    }

    /// Local paths of every Parquet file of the quarantine snapshot.
    pub fn quarantine_files(&self) -> Result<Vec<PathBuf>> {
        self.quarantine
            .files
            .iter()
            .map(|f| self.quarantine.local_file(&f.path))
            .collect()
    }

    /// A local copy of a file of the lake that is not in a table (the simulator's `truth/`).
    pub fn side_file(&self, rel: &str) -> Result<PathBuf> {
        match &self.root {
            Location::Local(dir) => Ok(dir.join(rel)),
            Location::Remote(_) => {
                let view = TableView {
                    loc: self.root.clone(),
                    table: Some(root_table(&self.root)?),
                    files: Vec::new(),
                };
                view.local_file(rel)
            }
        }
    }

    /// The run records of every `mm` commit to the matches table up to the pinned version,
    /// oldest first.
    pub fn runs(&self) -> Result<Vec<serde_json::Value>> {
        Ok(self
            .commit_infos()?
            .into_iter()
            .filter_map(|(_, mut info)| info.info.remove(RUN_KEY))
            .collect())
    }

    fn commit_infos(&self) -> Result<Vec<(i64, deltalake_core::kernel::CommitInfo)>> {
        use futures::TryStreamExt;
        let Some(t) = &self.matches.table else {
            return Ok(Vec::new());
        };
        let loc = &self.matches.loc;
        let infos: Vec<deltalake_core::kernel::CommitInfo> =
            delta::block_on(t.history(None).try_collect()).map_err(delta::delta_err(loc))?;
        // Newest first, one per version down from the pinned one.
        let top = self.version().unwrap_or(0);
        let mut out: Vec<(i64, _)> = infos
            .into_iter()
            .enumerate()
            .map(|(k, i)| (top - k as i64, i))
            .collect();
        out.reverse();
        Ok(out)
    }

    /// The commits of the matches table up to the pinned version, newest first.
    pub fn history(&self, limit: usize) -> Result<Vec<HistoryEntry>> {
        let mut out: Vec<HistoryEntry> = self
            .commit_infos()?
            .into_iter()
            .map(|(version, info)| {
                let run = info.info.get(RUN_KEY);
                HistoryEntry {
                    version,
                    timestamp_ms: info.timestamp,
                    operation: info.operation.clone(),
                    run_id: run
                        .and_then(|r| r.get("run_id"))
                        .and_then(|v| v.as_str())
                        .map(str::to_string),
                    rows_added: run
                        .and_then(|r| r.get("lake_rows_written").or_else(|| r.get("rows")))
                        .and_then(serde_json::Value::as_u64),
                }
            })
            .collect();
        out.reverse();
        out.truncate(limit);
        Ok(out)
    }

    /// Removes the staging directories of runs whose process has died (a local lake's
    /// `_txn/`, or the cache's staging area for remote lakes). Live runs are left alone: each
    /// holds an OS lock on its staging directory's owner file while it runs.
    pub fn recover(&self) -> Result<Recovery> {
        let root = staging_root(&self.root);
        let mut report = Recovery::default();
        let Ok(rd) = fs::read_dir(&root) else {
            return Ok(report);
        };
        let mut dirs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            let owner = dir.join(OWNER_FILE);
            let old_enough = || {
                fs::metadata(&dir)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|e| e.as_secs() > 60))
            };
            let dead = match File::options().read(true).write(true).open(&owner) {
                // The owner writes its pid only once it holds the lock, so a pid under a lock
                // we could take means the owner has died. An empty file is a run still
                // starting (between creating the file and locking it) unless it is old.
                // A file with no links left was removed by its own run as it ended.
                Ok(f) => {
                    f.try_lock().is_ok()
                        && f.metadata().is_ok_and(|m| {
                            std::os::unix::fs::MetadataExt::nlink(&m) > 0
                                && (m.len() > 0 || old_enough())
                        })
                }
                // No owner file: created by a process that died before taking its lock, or by
                // an older mm. Left for a minute in case its owner is still starting.
                Err(_) => old_enough(),
            };
            if dead {
                match fs::remove_dir_all(&dir) {
                    // Removed meanwhile by its own run, or by another recovery.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    r => r.map_err(io_err(&dir))?,
                }
                report.removed.push(
                    dir.file_name()
                        .and_then(|n| n.to_str())
                        .unwrap_or_default()
                        .to_string(),
                );
            }
        }
        Ok(report)
    }

    /// Starts a run that adds files to this lake's tables, on top of the snapshot this lake was
    /// opened at (which must be the latest: open it with [`Lake::open_or_create`]).
    pub fn begin(&self, run_id: &str) -> Result<Txn> {
        let (Some(m), Some(q)) = (&self.matches.table, &self.quarantine.table) else {
            return Err(LakeError::Location {
                location: self.root.to_string(),
                reason: "the lake has no tables yet (open it with Lake::open_or_create)".into(),
            });
        };
        let dir = staging_root(&self.root).join(run_id);
        fs::create_dir_all(dir.parent().unwrap_or(&dir)).map_err(io_err(&dir))?;
        fs::create_dir(&dir).map_err(io_err(&dir))?;
        let owner_path = dir.join(OWNER_FILE);
        let owner = File::create_new(&owner_path).map_err(io_err(&owner_path))?;
        // Blocking: a concurrent [`Lake::recover`] may hold the lock for an instant while it
        // looks at this (still empty, hence live) file.
        owner.lock().map_err(io_err(&owner_path))?;
        writeln!(&owner, "{}", std::process::id()).map_err(io_err(&owner_path))?;
        let data = dir.join("data");
        fs::create_dir(&data).map_err(io_err(&data))?;
        Ok(Txn {
            lake: self.clone(),
            matches: m.clone(),
            quarantine: q.clone(),
            dir,
            run_id: run_id.to_string(),
            files: Vec::new(),
            published: Vec::new(),
            done: false,
            syncer: Syncer::default(),
            new_entries: BTreeSet::new(),
            _owner: owner,
        })
    }
}

/// A table handle at the lake root itself, for the files beside the tables (`truth/`).
fn root_table(root: &Location) -> Result<deltalake_core::DeltaTable> {
    delta::register_stores();
    deltalake_core::DeltaTableBuilder::from_url(root.url()?)
        .and_then(deltalake_core::DeltaTableBuilder::build)
        .map_err(delta::delta_err(root))
}

/// Where runs stage their files: inside a local lake (so publishing is a link on the same file
/// system), in the cache for a remote one.
fn staging_root(root: &Location) -> PathBuf {
    match root {
        Location::Local(dir) => dir.join(TXN_DIR),
        Location::Remote(_) => cache_root().join("txn"),
    }
}

/// Where a commit stops when a test simulates a crash (see [`Txn::commit_crashing_at`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Files staged and synced, nothing published.
    BeforePublish,
    /// The first data file published into its table, the rest not, nothing in the log.
    AfterFirstPublish,
    /// Every file published and the quarantine table committed; the matches commit not made.
    BeforeMatchesCommit,
}

/// What a committed run produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Committed {
    /// The version of the matches table that holds the run.
    pub version: i64,
    /// The version of the quarantine table after the run (unchanged if it quarantined nothing).
    pub quarantine_version: Option<i64>,
}

/// A run's pending additions to the lake. Dropping it without [`Txn::commit`] removes them.
pub struct Txn {
    lake: Lake,
    matches: deltalake_core::DeltaTable,
    quarantine: deltalake_core::DeltaTable,
    dir: PathBuf,
    run_id: String,
    files: Vec<PathBuf>,
    /// Files already published into a table's directory (removed again if the run fails).
    published: Vec<Published>,
    done: bool,
    /// Syncs the files staged by [`Txn::write_staged`]; the commit waits for it.
    syncer: Syncer,
    /// Local directories that gained entries by publishing; each is fsynced once before the
    /// log commit that makes the entries part of a version.
    new_entries: BTreeSet<PathBuf>,
    /// Locked while the run lives, so that [`Lake::recover`] leaves its staging alone.
    _owner: File,
}

impl std::fmt::Debug for Txn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Txn")
            .field("run_id", &self.run_id)
            .field("dir", &self.dir)
            .field("files", &self.files.len())
            .finish()
    }
}

#[derive(Debug, Clone)]
struct Published {
    /// Which table (`None`: a side file at the lake root).
    table: Option<&'static str>,
    /// Path relative to the table (or the root).
    rel: String,
    /// The staged copy (kept until the run ends, for the re-check of keys).
    staged: PathBuf,
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

    /// The staging path of a file that will be placed at `rel`.
    pub fn staged_path(&self, rel: &Path) -> Result<PathBuf> {
        Ok(self.staged_file(rel))
    }

    /// Staged files sit in one flat directory, named by their escaped relative path: a run
    /// touching hundreds of days creates no directory per day until it publishes.
    fn staged_file(&self, rel: &Path) -> PathBuf {
        let name = rel
            .to_string_lossy()
            .replace('%', "%25")
            .replace(['/', '\\'], "%2F");
        self.dir.join("data").join(name)
    }

    /// Commits the staged files and the run record `run` (kept in the matches table's log).
    pub fn commit(self, run: &serde_json::Value) -> Result<Committed> {
        self.commit_inner(run, None)
    }

    /// Commits up to `crash` and then stops as if the process had died there (test support).
    #[doc(hidden)]
    pub fn commit_crashing_at(self, run: &serde_json::Value, crash: CrashPoint) -> Result<()> {
        self.commit_inner(run, Some(crash)).map(|_| ())
    }

    fn commit_inner(
        mut self,
        run: &serde_json::Value,
        crash: Option<CrashPoint>,
    ) -> Result<Committed> {
        // Every staged file is durable before anything is published.
        self.syncer.finish()?;
        if crash == Some(CrashPoint::BeforePublish) {
            self.done = true; // a dead process cleans nothing up
            return Ok(Committed {
                version: -1,
                quarantine_version: None,
            });
        }
        let result = self.publish_and_commit(run, crash);
        if result.is_err() && crash.is_none() {
            self.unpublish();
        }
        self.done = true;
        if crash.is_some() {
            // A dead process leaves its staging for `recover` (its lock is released on drop).
            return result;
        }
        let _ = fs::remove_dir_all(&self.dir);
        result
    }

    fn publish_and_commit(
        &mut self,
        run: &serde_json::Value,
        crash: Option<CrashPoint>,
    ) -> Result<Committed> {
        let mut files = std::mem::take(&mut self.files);
        files.sort();
        for rel in &files {
            let text = rel.to_string_lossy().replace('\\', "/");
            let (table, inner) = match text.split_once('/') {
                Some((MATCHES_DIR, r)) => (Some(MATCHES_DIR), r.to_string()),
                Some((QUARANTINE_DIR, r)) => (Some(QUARANTINE_DIR), r.to_string()),
                _ => (None, text.clone()),
            };
            let staged = self.staged_file(rel);
            self.publish(table, &inner, &staged)?;
            self.published.push(Published {
                table,
                rel: inner,
                staged,
            });
            if crash == Some(CrashPoint::AfterFirstPublish) {
                return Ok(Committed {
                    version: -1,
                    quarantine_version: None,
                });
            }
        }
        self.sync_published()?;
        let adds = |table: &str| -> Result<Vec<deltalake_core::kernel::Action>> {
            self.published
                .iter()
                .filter(|p| p.table == Some(table))
                .map(|p| add_action(&p.staged, &p.rel).map(deltalake_core::kernel::Action::Add))
                .collect()
        };
        let q_adds = adds(QUARANTINE_DIR)?;
        let m_adds = adds(MATCHES_DIR)?;
        let write = || deltalake_core::protocol::DeltaOperation::Write {
            mode: deltalake_core::protocol::SaveMode::Append,
            partition_by: None,
            predicate: None,
        };
        let mut meta = HashMap::new();
        meta.insert(RUN_KEY.to_string(), run.clone());
        let mut quarantine_version = delta::version_of(&self.quarantine);
        if !q_adds.is_empty() {
            let ours = self.staged_by_partition(QUARANTINE_DIR);
            let loc = self.lake.quarantine.loc.clone();
            let mut quarantine = self.quarantine.clone();
            let view = self.lake.quarantine.clone();
            let mut recheck =
                |w: &WinnerCommit| recheck_keys(&loc, &view, w, &ours, QUARANTINE_DIR);
            let mut qmeta = HashMap::new();
            qmeta.insert(
                RUN_KEY.to_string(),
                serde_json::json!({"run_id": self.run_id}),
            );
            quarantine_version = Some(delta::commit(
                &loc,
                &mut quarantine,
                q_adds,
                write(),
                qmeta,
                &mut recheck,
            )?);
        }
        if crash == Some(CrashPoint::BeforeMatchesCommit) {
            return Ok(Committed {
                version: -1,
                quarantine_version,
            });
        }
        let ours = self.staged_by_partition(MATCHES_DIR);
        let loc = self.lake.matches.loc.clone();
        let view = self.lake.matches.clone();
        let mut matches = self.matches.clone();
        let mut recheck = |w: &WinnerCommit| recheck_keys(&loc, &view, w, &ours, MATCHES_DIR);
        let op = deltalake_core::protocol::DeltaOperation::Write {
            mode: deltalake_core::protocol::SaveMode::Append,
            partition_by: Some(vec![DAY.to_string()]),
            predicate: None,
        };
        let version = delta::commit(&loc, &mut matches, m_adds, op, meta, &mut recheck)?;
        Ok(Committed {
            version,
            quarantine_version,
        })
    }

    /// This run's staged files of `table`, by partition. Their keys are read only when a
    /// winner's commit touches the same partition, one file at a time, so a run that meets no
    /// conflict never holds its keys in memory.
    fn staged_by_partition(&self, table: &str) -> StagedByPartition {
        let mut out: StagedByPartition = HashMap::new();
        for p in self.published.iter().filter(|p| p.table == Some(table)) {
            out.entry(partition_of(&p.rel))
                .or_default()
                .push(p.staged.clone());
        }
        out
    }

    /// Places one staged file at its final name, never replacing a file that is there.
    fn publish(&mut self, table: Option<&str>, rel: &str, staged: &Path) -> Result<()> {
        match &self.lake.root {
            Location::Local(root) => {
                let dst = match table {
                    Some(t) => root.join(t).join(rel),
                    None => root.join(rel),
                };
                let parent = dst.parent().unwrap_or(root).to_path_buf();
                fs::create_dir_all(&parent).map_err(io_err(&parent))?;
                if table.is_none() {
                    // Side files (the simulator's truth) are rewritten whole by their one writer.
                    fs::copy(staged, &dst).map_err(io_err(&dst))?;
                } else {
                    fs::hard_link(staged, &dst).map_err(|e| match e.kind() {
                        std::io::ErrorKind::AlreadyExists => LakeError::Corrupt {
                            path: dst.clone(),
                            reason: "refusing to overwrite an existing lake file".into(),
                        },
                        _ => LakeError::Io {
                            path: dst.clone(),
                            source: e,
                        },
                    })?;
                }
                // The new entry, and any directory create_dir_all made on the way down.
                for dir in parent.ancestors().take_while(|d| d.starts_with(root)) {
                    self.new_entries.insert(dir.to_path_buf());
                }
                Ok(())
            }
            Location::Remote(_) => {
                let store = match table {
                    Some(MATCHES_DIR) => self.matches.log_store().object_store(None),
                    Some(_) => self.quarantine.log_store().object_store(None),
                    None => root_table(&self.lake.root)?.log_store().object_store(None),
                };
                upload(store, staged, rel, table.is_some()).map_err(|e| LakeError::Location {
                    location: format!(
                        "{}/{}{rel}",
                        self.lake.root,
                        table.map(|t| format!("{t}/")).unwrap_or_default()
                    ),
                    reason: crate::location::store_reason(&e),
                })
            }
        }
    }

    /// Makes the published entries durable: one fsync per directory that gained any.
    fn sync_published(&mut self) -> Result<()> {
        for dir in std::mem::take(&mut self.new_entries) {
            sync_dir(&dir)?;
        }
        Ok(())
    }

    /// Best effort: removes the data files this run published (it committed nothing).
    fn unpublish(&mut self) {
        for p in std::mem::take(&mut self.published) {
            let Some(table) = p.table else { continue };
            match &self.lake.root {
                Location::Local(root) => {
                    let _ = fs::remove_file(root.join(table).join(&p.rel));
                }
                Location::Remote(_) => {
                    let t = if table == MATCHES_DIR {
                        &self.matches
                    } else {
                        &self.quarantine
                    };
                    let store = t.log_store().object_store(None);
                    let path = object_store::path::Path::from(p.rel.as_str());
                    let _ = delta::block_on(async move { store.delete(&path).await });
                }
            }
        }
    }
}

impl Drop for Txn {
    fn drop(&mut self) {
        // Join the sync threads before the files they hold are removed.
        let _ = self.syncer.finish();
        if !self.done {
            self.unpublish();
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// Uploads a staged file: one request up to 32 MiB, a multipart upload above. Data files are
/// created only if absent (`create_only`), so no run ever replaces another's file.
pub(crate) fn upload(
    store: std::sync::Arc<dyn object_store::ObjectStore>,
    staged: &Path,
    rel: &str,
    create_only: bool,
) -> std::result::Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use object_store::{PutMode, PutOptions, PutPayload, WriteMultipart};
    const ONE_REQUEST: u64 = 32 << 20;
    let path = object_store::path::Path::from(rel);
    let len = fs::metadata(staged)?.len();
    if len <= ONE_REQUEST {
        let bytes = bytes::Bytes::from(fs::read(staged)?);
        let opts = PutOptions {
            mode: if create_only {
                PutMode::Create
            } else {
                PutMode::Overwrite
            },
            ..Default::default()
        };
        delta::block_on(async move { store.put_opts(&path, PutPayload::from(bytes), opts).await })?;
        return Ok(());
    }
    let staged = staged.to_path_buf();
    delta::block_on(async move {
        use std::io::Read;
        let upload = store.put_multipart(&path).await?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, 16 << 20);
        let mut f = File::open(&staged)?;
        let mut buf = vec![0u8; 8 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            w.wait_for_capacity(4).await?;
            w.write(&buf[..n]);
        }
        w.finish().await?;
        Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
    })
}

/// The partition value of a table-relative path (`day=2024-01-01/part-x.parquet` → the day).
fn partition_of(rel: &str) -> Option<String> {
    rel.split('/')
        .find_map(|seg| seg.strip_prefix("day="))
        .map(str::to_string)
}

/// The keys of a table file: (match_id, player_id hash) pairs for matches (the player id is
/// folded into the string), (source content hash, line) for quarantine.
fn file_keys(path: &Path, table: &str) -> Result<HashSet<(String, i64)>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    let mut out = HashSet::new();
    if table == MATCHES_DIR {
        for b in read_parquet_columns(path, Some(&["match_id", "player_id"]))? {
            let (Some(m), Some(p)) = (b.column_by_name("match_id"), b.column_by_name("player_id"))
            else {
                continue;
            };
            let (m, p) = (m.as_string::<i32>(), p.as_string::<i32>());
            for i in 0..b.num_rows() {
                out.insert((format!("{}\u{1f}{}", m.value(i), p.value(i)), 0));
            }
        }
    } else {
        for b in read_parquet_columns(path, Some(&["source_sha256", "line"]))? {
            let (Some(s), Some(l)) = (b.column_by_name("source_sha256"), b.column_by_name("line"))
            else {
                continue;
            };
            let (s, l) = (s.as_string::<i32>(), l.as_primitive::<Int64Type>());
            for i in 0..b.num_rows() {
                out.insert((s.value(i).to_string(), l.value(i)));
            }
        }
    }
    Ok(out)
}

/// Refuses our commit if a winner added a row we hold: for matches, the same (match_id,
/// player_id) on the same day; for quarantine, the same (file content, line).
fn recheck_keys(
    loc: &Location,
    view: &TableView,
    w: &WinnerCommit,
    ours: &StagedByPartition,
    table: &str,
) -> Result<()> {
    // The winner's keys per partition we also wrote to, so that each of our staged files is
    // read once however many files the winner added to its partition.
    let mut theirs_by_part: std::collections::BTreeMap<Option<String>, HashSet<(String, i64)>> =
        std::collections::BTreeMap::new();
    for (path, pv) in &w.added {
        let part = pv.get(DAY).cloned().flatten();
        if ours.contains_key(&part) {
            let keys = file_keys(&view.local_file(path)?, table)?;
            theirs_by_part.entry(part).or_default().extend(keys);
        }
    }
    for (part, theirs) in theirs_by_part {
        let Some(mine) = ours.get(&part) else {
            continue;
        };
        let mut clash = None;
        for staged in mine {
            clash = file_keys(staged, table)?
                .into_iter()
                .filter(|k| theirs.contains(k))
                .min();
            if clash.is_some() {
                break;
            }
        }
        if let Some(k) = clash {
            let what = if table == MATCHES_DIR {
                let (m, p) = k.0.split_once('\u{1f}').unwrap_or((&k.0, ""));
                format!("match {m}, player {p}")
            } else {
                format!(
                    "source line {} of file content {}",
                    k.1,
                    &k.0[..k.0.len().min(12)]
                )
            };
            return Err(LakeError::Conflict {
                location: loc.to_string(),
                reason: format!(
                    "another run ({}) committed version {} with rows this run also holds \
                     ({what}{}); this run committed nothing: run it again to add what is still \
                     missing",
                    w.run_id.as_deref().unwrap_or("not an mm run"),
                    w.version,
                    part.map(|d| format!(", day {d}")).unwrap_or_default(),
                ),
            });
        }
    }
    Ok(())
}

/// The add action of a published file, with its row count and start-time range as statistics
/// (read from the staged file's footer), so engines can skip files by time.
fn add_action(staged: &Path, rel: &str) -> Result<deltalake_core::kernel::Add> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::statistics::Statistics;
    let file = File::open(staged).map_err(io_err(staged))?;
    let size = file.metadata().map_err(io_err(staged))?.len();
    let reader = SerializedFileReader::new(file).map_err(|source| LakeError::Parquet {
        path: staged.to_path_buf(),
        source,
    })?;
    let meta = reader.metadata();
    let rows = meta.file_metadata().num_rows();
    let mut stats = serde_json::json!({ "numRecords": rows });
    let schema = meta.file_metadata().schema_descr();
    if let Some(k) = (0..schema.num_columns()).find(|&k| schema.column(k).name() == "start_time") {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let mut complete = meta.num_row_groups() > 0;
        for rg in meta.row_groups() {
            match rg.column(k).statistics() {
                Some(Statistics::Int64(s)) => match (s.min_opt(), s.max_opt()) {
                    (Some(a), Some(b)) => {
                        lo = lo.min(*a);
                        hi = hi.max(*b);
                    }
                    _ => complete = false,
                },
                _ => complete = false,
            }
        }
        let iso = |ms: i64| {
            chrono::DateTime::from_timestamp_millis(ms)
                .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        };
        if complete && let (Some(a), Some(b)) = (iso(lo), iso(hi)) {
            stats["minValues"] = serde_json::json!({ "start_time": a });
            stats["maxValues"] = serde_json::json!({ "start_time": b });
            stats["nullCount"] = serde_json::json!({ "start_time": 0 });
        }
    }
    let mut partition_values = HashMap::new();
    if let Some(d) = partition_of(rel) {
        partition_values.insert(DAY.to_string(), Some(d));
    }
    Ok(deltalake_core::kernel::Add {
        path: rel.to_string(),
        partition_values,
        size: i64::try_from(size).unwrap_or(i64::MAX),
        modification_time: chrono::Utc::now().timestamp_millis(),
        data_change: true,
        stats: Some(stats.to_string()),
        ..Default::default()
    })
}

/// What [`Lake::optimize`] did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OptimizeReport {
    /// The matches table's version after compaction (unchanged when there was nothing to do).
    pub version: Option<i64>,
    pub days_compacted: usize,
    pub files_removed: usize,
    pub files_added: usize,
    pub rows: u64,
}

/// What [`Lake::vacuum`] did (or would do, in a dry run).
#[derive(Debug, Clone, Default, Serialize)]
pub struct VacuumReport {
    pub dry_run: bool,
    /// Files deleted (or to delete), per table, relative to the table root.
    pub matches: Vec<String>,
    pub quarantine: Vec<String>,
}

impl Lake {
    /// Compacts every day of the matches table that has at least `min_files` files into one
    /// file in lake order, as Delta's OPTIMIZE does: one commit of `remove` and `add` actions
    /// with `dataChange: false`, so readers of any version see the same rows and streaming
    /// readers see no new data. The removed files stay for time travel until [`Lake::vacuum`].
    /// A concurrent compaction of the same day makes this one commit nothing.
    pub fn optimize(&self, min_files: usize) -> Result<OptimizeReport> {
        let mut by_day: std::collections::BTreeMap<i32, Vec<&FileEntry>> = Default::default();
        for f in &self.matches.files {
            if let Some(d) = f.day {
                by_day.entry(d).or_default().push(f);
            }
        }
        by_day.retain(|_, v| v.len() >= min_files.max(2));
        let mut report = OptimizeReport {
            version: self.version(),
            ..Default::default()
        };
        if by_day.is_empty() {
            return Ok(report);
        }
        let run_id = format!(
            "optimize-{}-{:05x}",
            chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ"),
            std::process::id() & 0xfffff
        );
        let mut txn = self.begin(&run_id)?;
        let mut removed: Vec<FileEntry> = Vec::new();
        for (day, files) in &by_day {
            let mut batches = Vec::new();
            for f in files {
                batches.extend(read_parquet_columns(
                    &self.matches.local_file(&f.path)?,
                    None,
                )?);
            }
            let batch =
                crate::rows::sort_lake_order(&batches).map_err(|source| LakeError::Arrow {
                    path: PathBuf::from(format!("{}/day={}", self.matches.loc, day_dir_name(*day))),
                    source,
                })?;
            report.rows += batch.num_rows() as u64;
            let rel = Lake::partition_rel(*day).join(format!("part-{run_id}.parquet"));
            txn.write_parquet(&rel, &[batch])?;
            report.days_compacted += 1;
            report.files_added += 1;
            report.files_removed += files.len();
            removed.extend(files.iter().map(|f| (*f).clone()));
        }
        report.version = Some(txn.commit_compaction(&removed)?);
        Ok(report)
    }

    /// Deletes the files no retained version needs, in both tables, as delta-rs's VACUUM does:
    /// files removed from the table more than `retention_hours` ago and, with `full`, files in
    /// the table directories that no version ever committed (published by runs that died or
    /// were refused) and older than the retention. Delta's default and minimum retention is 7
    /// days (168 hours); below it time travel to older versions may break, and delta-rs refuses
    /// unless `force` is set.
    pub fn vacuum(
        &self,
        retention_hours: u64,
        full: bool,
        dry_run: bool,
        force: bool,
    ) -> Result<VacuumReport> {
        use deltalake_core::operations::vacuum::VacuumMode;
        let mut report = VacuumReport {
            dry_run,
            ..Default::default()
        };
        for (view, out) in [
            (&self.matches, &mut report.matches),
            (&self.quarantine, &mut report.quarantine),
        ] {
            let Some(t) = &view.table else { continue };
            delta::check_protocol(&view.loc, t, true)?;
            let builder = t
                .clone()
                .vacuum()
                .with_retention_period(chrono::Duration::hours(
                    i64::try_from(retention_hours).unwrap_or(i64::MAX / 3_600_000),
                ))
                .with_enforce_retention_duration(!force)
                .with_dry_run(dry_run)
                .with_mode(if full {
                    VacuumMode::Full
                } else {
                    VacuumMode::Lite
                });
            let (_, metrics) =
                delta::block_on(builder.into_future()).map_err(delta::delta_err(&view.loc))?;
            *out = metrics.files_deleted;
        }
        Ok(report)
    }
}

impl Txn {
    /// Commits the staged compacted files in place of `removed` (see [`Lake::optimize`]).
    fn commit_compaction(mut self, removed: &[FileEntry]) -> Result<i64> {
        self.syncer.finish()?;
        let result = (|| {
            let mut files = std::mem::take(&mut self.files);
            files.sort();
            let mut actions = Vec::new();
            for rel in &files {
                let text = rel.to_string_lossy().replace('\\', "/");
                let inner = text.strip_prefix("matches/").unwrap_or(&text).to_string();
                let staged = self.staged_file(rel);
                self.publish(Some(MATCHES_DIR), &inner, &staged)?;
                self.published.push(Published {
                    table: Some(MATCHES_DIR),
                    rel: inner.clone(),
                    staged: staged.clone(),
                });
                let mut add = add_action(&staged, &inner)?;
                add.data_change = false;
                actions.push(deltalake_core::kernel::Action::Add(add));
            }
            self.sync_published()?;
            let now = chrono::Utc::now().timestamp_millis();
            for f in removed {
                let mut pv = HashMap::new();
                if let Some(d) = f.day {
                    pv.insert(DAY.to_string(), Some(day_dir_name(d)[4..].to_string()));
                }
                actions.push(deltalake_core::kernel::Action::Remove(
                    deltalake_core::kernel::Remove {
                        path: f.path.clone(),
                        data_change: false,
                        deletion_timestamp: Some(now),
                        extended_file_metadata: Some(true),
                        partition_values: Some(pv),
                        size: Some(i64::try_from(f.bytes).unwrap_or(i64::MAX)),
                        ..Default::default()
                    },
                ));
            }
            let gone: HashSet<&str> = removed.iter().map(|f| f.path.as_str()).collect();
            let loc = self.lake.matches.loc.clone();
            let mut recheck = |w: &WinnerCommit| -> Result<()> {
                match w.removed.iter().find(|p| gone.contains(p.as_str())) {
                    Some(p) => Err(LakeError::Conflict {
                        location: loc.to_string(),
                        reason: format!(
                            "version {} removed {p}, which this compaction replaces; nothing \
                             was committed (run it again)",
                            w.version
                        ),
                    }),
                    None => Ok(()),
                }
            };
            let mut meta = HashMap::new();
            meta.insert(
                RUN_KEY.to_string(),
                serde_json::json!({"run_id": self.run_id, "kind": "optimize", "files_removed": removed.len()}),
            );
            let op = deltalake_core::protocol::DeltaOperation::Optimize {
                predicate: None,
                target_size: 0,
            };
            let mut table = self.matches.clone();
            delta::commit(
                &self.lake.matches.loc.clone(),
                &mut table,
                actions,
                op,
                meta,
                &mut recheck,
            )
        })();
        if result.is_err() {
            self.unpublish();
        }
        self.done = true;
        let _ = fs::remove_dir_all(&self.dir);
        result
    }
}

/// Whether `dir` is the root of a Delta table (it has a `_delta_log/`).
#[must_use]
pub fn is_delta_table(dir: &Path) -> bool {
    dir.join("_delta_log").is_dir()
}

/// Local paths of the data files of the Delta table at `loc` (its latest snapshot), in
/// partition and name order: what an engine reads, never a directory listing.
pub fn table_files(loc: &Path) -> Result<Vec<PathBuf>> {
    let view = TableView::open(Location::from_path(loc)?, AsOf::Latest)?;
    view.files
        .iter()
        .map(|f| view.local_file(&f.path))
        .collect()
}

/// Whether `root` holds a lake of the layout before Delta (`matches/day=*/` files and a
/// `_runs/` log, no `_delta_log/`).
fn is_legacy(root: &Location) -> bool {
    root.local()
        .is_some_and(|r| r.join("_runs").is_dir() && !is_delta_table(&r.join(MATCHES_DIR)))
}

fn legacy_error(root: &Location) -> LakeError {
    LakeError::Location {
        location: root.to_string(),
        reason: "a lake of the layout before Delta Lake (matches/day=*/ and _runs/); convert it \
                 once with `mm lake convert`"
            .into(),
    }
}

impl Lake {
    /// Converts a lake of the layout before Delta in place: its Parquet files become the first
    /// version of the `matches` and `quarantine` tables (as Delta's CONVERT TO DELTA does), one
    /// commit each, and its `_runs/` records go into the matches commit. No data file is
    /// rewritten or moved. Returns the converted lake.
    pub fn convert_legacy(root: impl AsRef<Path>) -> Result<Lake> {
        let loc = Location::from_path(root.as_ref())?;
        if !is_legacy(&loc) {
            return Err(LakeError::Location {
                location: loc.to_string(),
                reason: "not a lake of the layout before Delta Lake (no _runs/, or already a \
                         Delta table)"
                    .into(),
            });
        }
        let dir = loc.local().unwrap_or(Path::new(".")).to_path_buf();
        let mut runs = Vec::new();
        if let Ok(rd) = fs::read_dir(dir.join("_runs")) {
            let mut paths: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
            paths.sort();
            for p in paths {
                let text = fs::read_to_string(&p).map_err(io_err(&p))?;
                runs.push(
                    serde_json::from_str::<serde_json::Value>(&text).map_err(|e| {
                        LakeError::Corrupt {
                            path: p.clone(),
                            reason: e.to_string(),
                        }
                    })?,
                );
            }
        }
        for (table, schema, partition) in [
            (
                MATCHES_DIR,
                crate::schema::matches_schema(),
                vec![(DAY, deltalake_core::kernel::DataType::DATE)],
            ),
            (QUARANTINE_DIR, crate::schema::quarantine_schema(), vec![]),
        ] {
            let tdir = dir.join(table);
            let mut files = Vec::new();
            crate::mirror::walk(&tdir, &tdir, &mut files)?;
            files.retain(|f| f.ends_with(".parquet"));
            files.sort();
            let tloc = loc.join(table);
            let mut t = delta::create_table(&tloc, table, &schema, &partition)?;
            let actions = files
                .iter()
                .map(|rel| {
                    add_action(&tdir.join(rel), rel).map(deltalake_core::kernel::Action::Add)
                })
                .collect::<Result<Vec<_>>>()?;
            let mut meta = HashMap::new();
            meta.insert(
                RUN_KEY.to_string(),
                serde_json::json!({"run_id": "convert", "kind": "convert", "runs_before": runs}),
            );
            let op = deltalake_core::protocol::DeltaOperation::Write {
                mode: deltalake_core::protocol::SaveMode::Append,
                partition_by: (!partition.is_empty())
                    .then(|| partition.iter().map(|(p, _)| (*p).to_string()).collect()),
                predicate: None,
            };
            delta::commit(&tloc, &mut t, actions, op, meta, &mut |_| Ok(()))?;
        }
        let old = dir.join("_runs");
        fs::rename(&old, dir.join("_runs.converted")).map_err(io_err(&old))?;
        let _ = fs::remove_file(dir.join("_lock"));
        Lake::open(&dir)
    }
}
