//! Derived tables: Delta tables that jobs compute from the lake (the churn feature table and the
//! players' state), written in parts by independent processes.
//!
//! A derived table is partitioned by string columns (for the churn tables `build`, a digest of
//! everything the rows depend on, and `shard`, `K-of-N`). A writer replaces one partition in one
//! commit: it adds its new files and removes the files the partition held before (an earlier
//! attempt of the same shard), so a retried shard never duplicates rows. Writers of different
//! partitions never conflict; two writers of the same partition at once are refused (the loser
//! commits nothing). The Delta log is the only coordination: a reader lists the snapshot's files
//! by partition and decides whether a build is complete.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow_schema::Schema as ArrowSchema;
use deltalake_core::DeltaTable;
use deltalake_core::kernel::{Action, DataType, Remove};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use object_store::ObjectStoreExt as _;

use crate::delta::{self, AsOf, WinnerCommit};
use crate::error::{LakeError, Result, io_err};
use crate::location::{Location, cache_root};

/// The key of the writer's record in a commit's `commitInfo`.
pub const DERIVED_KEY: &str = "mm_derived";

/// One data file of a derived table's snapshot.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DerivedFile {
    /// Path relative to the table root, as the log records it.
    pub path: String,
    pub partition: BTreeMap<String, String>,
    pub bytes: u64,
    pub rows: Option<u64>,
}

/// A derived table at its latest snapshot.
pub struct DerivedTable {
    loc: Location,
    table: DeltaTable,
    partitions: Vec<String>,
}

impl std::fmt::Debug for DerivedTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DerivedTable")
            .field("loc", &self.loc)
            .field("version", &self.version())
            .finish_non_exhaustive()
    }
}

impl DerivedTable {
    /// Opens the table at `at` (a path or URL), creating it with the columns of `schema` and the
    /// string partition columns `partitions` if it does not exist. An existing table must have
    /// the same partition columns.
    pub fn open_or_create(
        at: &Path,
        name: &str,
        schema: &ArrowSchema,
        partitions: &[&str],
    ) -> Result<DerivedTable> {
        let loc = Location::from_path(at)?;
        let table = match delta::open_table(&loc, AsOf::Latest)? {
            Some(t) => t,
            None => {
                let parts: Vec<(&str, DataType)> =
                    partitions.iter().map(|p| (*p, DataType::STRING)).collect();
                delta::create_table(&loc, name, schema, &parts)?
            }
        };
        let t = DerivedTable::from_table(loc, table)?;
        if t.partitions != partitions {
            return Err(LakeError::Location {
                location: t.loc.to_string(),
                reason: format!(
                    "the table is partitioned by {:?}, not {partitions:?}: not a table this job \
                     writes",
                    t.partitions
                ),
            });
        }
        Ok(t)
    }

    /// Opens the table at `at` at its latest version; `None` when there is no table there.
    pub fn open(at: &Path) -> Result<Option<DerivedTable>> {
        let loc = Location::from_path(at)?;
        match delta::open_table(&loc, AsOf::Latest)? {
            Some(t) => DerivedTable::from_table(loc, t).map(Some),
            None => Ok(None),
        }
    }

    fn from_table(loc: Location, table: DeltaTable) -> Result<DerivedTable> {
        let snap = table.snapshot().map_err(delta::delta_err(&loc))?;
        let partitions = snap.metadata().partition_columns().to_vec();
        Ok(DerivedTable {
            loc,
            table,
            partitions,
        })
    }

    #[must_use]
    pub fn location(&self) -> &Location {
        &self.loc
    }

    #[must_use]
    pub fn version(&self) -> Option<i64> {
        delta::version_of(&self.table)
    }

    /// The names of the table's columns, partition columns included.
    pub fn column_names(&self) -> Result<Vec<String>> {
        let snap = self.table.snapshot().map_err(delta::delta_err(&self.loc))?;
        Ok(snap.schema().fields().map(|f| f.name().clone()).collect())
    }

    /// The snapshot's files, by partition and then by name.
    pub fn files(&self) -> Result<Vec<DerivedFile>> {
        let snap = self.table.snapshot().map_err(delta::delta_err(&self.loc))?;
        let mut out: Vec<DerivedFile> = snap
            .log_data()
            .iter()
            .map(|f| DerivedFile {
                path: f.path().into_owned(),
                partition: f
                    .partition_values_map()
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k, v)))
                    .collect(),
                bytes: u64::try_from(f.size()).unwrap_or(0),
                rows: f.num_records().map(|n| n as u64),
            })
            .collect();
        out.sort_by(|a, b| (&a.partition, &a.path).cmp(&(&b.partition, &b.path)));
        Ok(out)
    }

    /// The writers' records ([`DERIVED_KEY`] of each commit's `commitInfo`), newest first.
    pub fn commit_infos(&self) -> Result<Vec<serde_json::Value>> {
        use futures::TryStreamExt;
        let infos: Vec<deltalake_core::kernel::CommitInfo> =
            delta::block_on(self.table.history(None).try_collect())
                .map_err(delta::delta_err(&self.loc))?;
        Ok(infos
            .into_iter()
            .filter_map(|mut i| i.info.remove(DERIVED_KEY))
            .collect())
    }

    /// A local path of one of the table's files: the file itself for a local table, a cached
    /// copy (downloaded once) for a remote one.
    pub fn local_file(&self, rel: &str) -> Result<PathBuf> {
        crate::mirror::local_copy(&self.loc, "derived", rel, || {
            Ok(self.table.log_store().object_store(None))
        })
    }

    /// A fresh local directory for a writer's files before [`DerivedTable::replace_partition`]
    /// publishes them (inside a local table, so that publishing is a rename; in the cache for a
    /// remote one). Directories starting with `_` are not data to Delta readers.
    pub fn scratch_dir(&self, run_id: &str) -> Result<PathBuf> {
        let dir = match &self.loc {
            Location::Local(d) => d.join("_mm_scratch").join(run_id),
            Location::Remote(url) => cache_root()
                .join("derived-scratch")
                .join(url.host_str().unwrap_or(""))
                .join(url.path().trim_matches('/').replace('/', "%2F"))
                .join(run_id),
        };
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(dir)
    }

    /// Replaces the partition `values` (one per partition column, in order) with `files` (local
    /// Parquet files, typically in [`DerivedTable::scratch_dir`]) in one commit recording `info`.
    /// The files are moved (local table) or uploaded (remote) under names no other writer uses;
    /// a concurrent commit that touched the same partition refuses this one (nothing committed,
    /// the published files removed). Returns the committed version.
    pub fn replace_partition(
        &mut self,
        values: &[&str],
        files: &[PathBuf],
        run_id: &str,
        info: serde_json::Value,
    ) -> Result<i64> {
        if values.len() != self.partitions.len() {
            return Err(LakeError::Location {
                location: self.loc.to_string(),
                reason: format!(
                    "{} partition values for the partition columns {:?}",
                    values.len(),
                    self.partitions
                ),
            });
        }
        for v in values {
            if v.is_empty() || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                return Err(LakeError::Location {
                    location: self.loc.to_string(),
                    reason: format!("partition value {v:?}: only letters, digits and '-'"),
                });
            }
        }
        let pv: HashMap<String, Option<String>> = self
            .partitions
            .iter()
            .zip(values)
            .map(|(k, v)| (k.clone(), Some((*v).to_string())))
            .collect();
        let dir: Vec<String> = self
            .partitions
            .iter()
            .zip(values)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let dir = dir.join("/");
        let mut published = Vec::new();
        let result = (|| {
            let mut actions = Vec::new();
            for (i, f) in files.iter().enumerate() {
                let rel = format!("{dir}/part-{run_id}-{i:05}.parquet");
                let add = delta::add_action(f, &rel, pv.clone())?;
                self.publish(f, &rel)?;
                published.push(rel);
                actions.push(Action::Add(add));
            }
            if let Some(d) = self.loc.local() {
                crate::parquet_io::sync_dir(&d.join(&dir))?;
            }
            let snap = self.table.snapshot().map_err(delta::delta_err(&self.loc))?;
            let now = chrono::Utc::now().timestamp_millis();
            for f in snap.log_data().iter() {
                let same = self.partitions.iter().zip(values).all(|(k, v)| {
                    f.partition_values_map()
                        .get(k)
                        .cloned()
                        .flatten()
                        .as_deref()
                        == Some(*v)
                });
                if same {
                    actions.push(Action::Remove(Remove {
                        path: f.path().into_owned(),
                        data_change: true,
                        deletion_timestamp: Some(now),
                        extended_file_metadata: Some(true),
                        partition_values: Some(pv.clone()),
                        size: Some(f.size()),
                        ..Default::default()
                    }));
                }
            }
            let mut meta = HashMap::new();
            meta.insert(DERIVED_KEY.to_string(), info.clone());
            let prefix = format!("{dir}/");
            let loc = self.loc.clone();
            let mut recheck = |w: &WinnerCommit| -> Result<()> {
                let touched = w
                    .added
                    .iter()
                    .map(|f| &f.path)
                    .chain(&w.removed)
                    .any(|p| p.starts_with(&prefix));
                if touched {
                    return Err(LakeError::Conflict {
                        location: loc.to_string(),
                        reason: format!(
                            "version {} ({}) wrote partition {dir} at the same time as this \
                             run; this run committed nothing (two runs of one shard at once)",
                            w.version,
                            w.run_id.as_deref().unwrap_or("another writer")
                        ),
                    });
                }
                Ok(())
            };
            let op = DeltaOperation::Write {
                mode: SaveMode::Append,
                partition_by: Some(self.partitions.clone()),
                predicate: None,
            };
            let loc = self.loc.clone();
            delta::commit(&loc, &mut self.table, actions, op, meta, &mut recheck)
        })();
        if result.is_err() {
            for rel in &published {
                self.unpublish(rel);
            }
        }
        result
    }

    fn publish(&self, staged: &Path, rel: &str) -> Result<()> {
        match &self.loc {
            Location::Local(root) => {
                let dst = root.join(rel);
                if let Some(p) = dst.parent() {
                    fs::create_dir_all(p).map_err(io_err(p))?;
                }
                File::open(staged)
                    .and_then(|f| f.sync_all())
                    .map_err(io_err(staged))?;
                fs::rename(staged, &dst)
                    .or_else(|_| fs::copy(staged, &dst).map(|_| ()))
                    .map_err(io_err(&dst))
            }
            Location::Remote(_) => {
                let store = self.table.log_store().object_store(None);
                crate::delta::upload(store, staged, rel, true).map_err(|e| LakeError::Location {
                    location: self.loc.join(rel).to_string(),
                    reason: e.to_string(),
                })
            }
        }
    }

    fn unpublish(&self, rel: &str) {
        match &self.loc {
            Location::Local(root) => {
                let _ = fs::remove_file(root.join(rel));
            }
            Location::Remote(_) => {
                let store = self.table.log_store().object_store(None);
                let path = object_store::path::Path::from(rel);
                let _ = delta::block_on(async move { store.delete(&path).await });
            }
        }
    }
}
