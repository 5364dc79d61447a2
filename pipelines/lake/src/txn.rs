//! A run's additions to the lake ([`Txn`]): staged on local disk, published under names no other
//! run uses, committed to the Delta log with a re-check of concurrent winners' keys.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use object_store::ObjectStoreExt as _;
use serde::Serialize;

use crate::delta::RUN_KEY;
use crate::delta::upload;
use crate::delta::{self, WinnerCommit};
use crate::error::{LakeError, Result, io_err};
use crate::location::Location;
use crate::parquet_io::{read_parquet_columns, sync_dir, write_parquet_unsynced};
use crate::schema::day_dir_name;
use crate::store::{
    DAY, FileEntry, Lake, MATCHES_DIR, OWNER_FILE, QUARANTINE_DIR, TableView, root_table,
    staging_root,
};
use crate::syncer::Syncer;

impl Lake {
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
            app_transaction: None,
            _owner: owner,
        })
    }
}

/// Row keys by partition value (`None`: an unpartitioned table): (match_id and player_id, 0)
/// for matches, (file content hash, line) for quarantine.
/// A run's staged files of one table, by partition (`None` for the unpartitioned quarantine).
type StagedByPartition = HashMap<Option<String>, Vec<PathBuf>>;

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
    /// The application transaction the matches commit records (an idempotent writer's app id
    /// and sequence number), if any.
    app_transaction: Option<(String, i64)>,
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
pub(crate) struct Published {
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

    /// Records Delta's application transaction `(app_id, version)` with the matches commit, as
    /// an idempotent writer does (kafka-delta-ingest's way): readers find the last version of
    /// an app with [`Lake::app_transaction`]. If a concurrent commit recorded the same app at
    /// this version or a later one, the commit is refused with
    /// [`LakeError::AlreadyCommitted`] and nothing is committed: the writer's earlier attempt
    /// landed.
    pub fn set_app_transaction(&mut self, app_id: &str, version: i64) {
        self.app_transaction = Some((app_id.to_string(), version));
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

    /// A local directory for the run's temporary files (created on first call): it is removed
    /// with the run's staging, whether the run commits, fails or crashes (see [`Lake::recover`]).
    pub fn scratch_dir(&self) -> Result<PathBuf> {
        let dir = self.dir.join("scratch");
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(dir)
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
        let mut m_adds = adds(MATCHES_DIR)?;
        if let Some((app, v)) = &self.app_transaction {
            m_adds.push(deltalake_core::kernel::Action::Txn(
                deltalake_core::kernel::Transaction::new_with_last_update(
                    app,
                    *v,
                    Some(chrono::Utc::now().timestamp_millis()),
                ),
            ));
        }
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
        let app = self.app_transaction.clone();
        let mut recheck = |w: &WinnerCommit| {
            if let Some((app_id, version)) = &app
                && let Some(&(_, committed)) = w
                    .app_transactions
                    .iter()
                    .find(|(a, v)| a == app_id && v >= version)
            {
                return Err(LakeError::AlreadyCommitted {
                    location: loc.to_string(),
                    app_id: app_id.clone(),
                    version: *version,
                    committed,
                });
            }
            recheck_keys(&loc, &view, w, &ours, MATCHES_DIR)
        };
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
                    reason: crate::error::store_reason(&e),
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
    for f in &w.added {
        let part = f.partition_values.get(DAY).cloned().flatten();
        if ours.contains_key(&part) {
            let keys = file_keys(&view.local_file(&f.path)?, table)?;
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

/// The add action of a file published into the matches or quarantine table: its day partition
/// from its path (see [`delta::add_action`]).
pub(crate) fn add_action(staged: &Path, rel: &str) -> Result<deltalake_core::kernel::Add> {
    let mut partition_values = HashMap::new();
    if let Some(d) = partition_of(rel) {
        partition_values.insert(DAY.to_string(), Some(d));
    }
    delta::add_action(staged, rel, partition_values)
}

impl Txn {
    /// Commits the staged compacted files in place of `removed` (see [`Lake::optimize`]).
    pub(crate) fn commit_compaction(mut self, removed: &[FileEntry]) -> Result<i64> {
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

#[cfg(test)]
#[path = "txn_tests.rs"]
mod tests;
