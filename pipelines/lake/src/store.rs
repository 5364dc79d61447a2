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
//! committed are invisible, and `mm lake vacuum --uncommitted` removes them.
//!
//! Writers never lock. A commit is put-if-absent on the next log entry (delta-rs; on S3 a
//! conditional write). When another run committed first, the loser re-reads what the winner
//! added and checks its own keys against it: (match_id, player_id) for matches, (file content,
//! line) for quarantine. Disjoint runs then both commit; overlapping ones are refused with
//! [`LakeError::Conflict`] and commit nothing, and a rerun adds exactly what is missing.
//!
//! [`Lake::open`] pins one snapshot of each table (latest, or [`AsOf`] a version or time), and
//! every list it returns comes from that snapshot's log, never from a directory listing.

pub const MATCHES_DIR: &str = "matches";
pub const QUARANTINE_DIR: &str = "quarantine";
pub const TXN_DIR: &str = "_txn";
/// The partition column of the matches table: the UTC day of the match start (Delta `date`).
pub const DAY: &str = "day";
pub(crate) const OWNER_FILE: &str = "owner";

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use crate::delta::RUN_KEY;
use crate::delta::{self, AsOf};
pub use crate::error::{LakeError, Result, io_err};
use crate::location::{Location, cache_root};
use crate::schema::{day_dir_name, parse_day_dir_name};

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
    /// The smallest and largest `mode` and the rows without `kills`, from the file's
    /// statistics in the log, when present (files written before they were recorded have
    /// none).
    pub mode_range: Option<(String, String)>,
    pub rows_without_kills: Option<u64>,
    /// The earliest and latest `start_time` (ms), from the file's statistics in the log, when
    /// present.
    pub start_range: Option<(i64, i64)>,
}

impl FileEntry {
    /// The statistics a file's add action records beyond its row count (see
    /// [`FileEntry::mode_range`]), from the log's JSON.
    pub(crate) fn with_stats(mut self, stats: Option<&str>) -> FileEntry {
        let Some(v) = stats.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) else {
            return self;
        };
        if let (Some(a), Some(b)) = (
            v["minValues"]["mode"].as_str(),
            v["maxValues"]["mode"].as_str(),
        ) && v["nullCount"]["mode"].as_u64() == Some(0)
        {
            self.mode_range = Some((a.to_string(), b.to_string()));
        }
        self.rows_without_kills = v["nullCount"]["kills"].as_u64();
        let ms = |t: &serde_json::Value| {
            t.as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.timestamp_millis())
        };
        if let (Some(a), Some(b)) = (
            ms(&v["minValues"]["start_time"]),
            ms(&v["maxValues"]["start_time"]),
        ) {
            self.start_range = Some((a, b));
        }
        self
    }
}

/// One table of the lake, at the snapshot the [`Lake`] pinned.
#[derive(Clone)]
pub(crate) struct TableView {
    pub(crate) loc: Location,
    pub(crate) table: Option<deltalake_core::DeltaTable>,
    pub(crate) files: Vec<FileEntry>,
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
    pub(crate) fn open(loc: Location, as_of: AsOf) -> Result<TableView> {
        let table = delta::open_table(&loc, as_of)?;
        let files = files_of(&loc, table.as_ref())?;
        Ok(TableView { loc, table, files })
    }

    /// Moves to the table's latest version, reading only the log entries after the one held
    /// (a table that did not exist yet is opened).
    fn refresh(&mut self) -> Result<()> {
        match &mut self.table {
            None => *self = TableView::open(self.loc.clone(), AsOf::Latest)?,
            Some(t) => {
                let before = delta::version_of(t);
                delta::block_on(t.update_incremental(None)).map_err(delta::delta_err(&self.loc))?;
                if delta::version_of(t) != before {
                    delta::check_protocol(&self.loc, t, false)?;
                    self.files = files_of(&self.loc, Some(t))?;
                }
            }
        }
        Ok(())
    }
}

/// The data files of `table`'s snapshot, in lake order.
fn files_of(loc: &Location, table: Option<&deltalake_core::DeltaTable>) -> Result<Vec<FileEntry>> {
    let mut files = Vec::new();
    if let Some(t) = table {
        let snap = t.snapshot().map_err(delta::delta_err(loc))?;
        for f in snap.log_data().iter() {
            let day = f
                .partition_values_map()
                .get(DAY)
                .cloned()
                .flatten()
                .and_then(|d| parse_day_dir_name(&format!("day={d}")));
            files.push(
                FileEntry {
                    path: f.path().into_owned(),
                    day,
                    bytes: u64::try_from(f.size()).unwrap_or(0),
                    rows: f.num_records().map(|n| n as u64),
                    mode_range: None,
                    rows_without_kills: None,
                    start_range: None,
                }
                .with_stats(f.stats().as_deref()),
            );
        }
    }
    // Lake order: by day, then by name (a run's files carry its sortable run id).
    files.sort_by(|a, b| (a.day, &a.path).cmp(&(b.day, &b.path)));
    Ok(files)
}

impl TableView {
    pub(crate) fn version(&self) -> Option<i64> {
        self.table.as_ref().and_then(delta::version_of)
    }

    /// The local path of a file of this table: the file itself for a local table, a cached
    /// copy (downloaded once) for a remote one.
    pub(crate) fn local_file(&self, rel: &str) -> Result<PathBuf> {
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
    pub(crate) root: Location,
    pub(crate) matches: TableView,
    pub(crate) quarantine: TableView,
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
        } else {
            delta::add_missing_columns(&m, &crate::schema::matches_schema())?;
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

    /// Moves both tables to their latest versions, reading only the log entries after the
    /// ones held (what a long-running reader does instead of opening the lake again).
    ///
    /// # Errors
    /// The log cannot be read, or a table's protocol asks for more than `mm` provides.
    pub fn refresh(&mut self) -> Result<()> {
        self.matches.refresh()?;
        self.quarantine.refresh()
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

    /// A local path of one file of the matches snapshot (a [`FileEntry::path`]): the file itself
    /// for a local lake, a cached copy for a remote one.
    pub fn match_file(&self, rel: &str) -> Result<PathBuf> {
        self.matches.local_file(rel)
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

    /// Local paths of the Parquet files of the matches snapshot for day `first_day` and later
    /// (and any file without a day), by day and then by run.
    pub fn matches_files_from(&self, first_day: i32) -> Result<Vec<PathBuf>> {
        self.matches
            .files
            .iter()
            .filter(|f| f.day.is_none_or(|d| d >= first_day))
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
}

/// A table handle at the lake root itself, for the files beside the tables (`truth/`).
pub(crate) fn root_table(root: &Location) -> Result<deltalake_core::DeltaTable> {
    delta::register_stores();
    deltalake_core::DeltaTableBuilder::from_url(root.url()?)
        .and_then(deltalake_core::DeltaTableBuilder::build)
        .map_err(delta::delta_err(root))
}

/// Where runs stage their files: inside a local lake (so publishing is a link on the same file
/// system), in the cache for a remote one.
pub(crate) fn staging_root(root: &Location) -> PathBuf {
    match root {
        Location::Local(dir) => dir.join(TXN_DIR),
        Location::Remote(_) => cache_root().join("txn"),
    }
}

/// Whether `dir` is the root of a Delta table (it has a `_delta_log/`).
#[must_use]
pub fn is_delta_table(dir: &Path) -> bool {
    dir.join("_delta_log").is_dir()
}

/// Whether `root` holds a lake of the layout before Delta (`matches/day=*/` files and a
/// `_runs/` log, no `_delta_log/`).
pub(crate) fn is_legacy(root: &Location) -> bool {
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

#[cfg(test)]
#[path = "evolve_tests.rs"]
mod evolve_tests;
