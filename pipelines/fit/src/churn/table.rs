//! The churn feature table and the player state table as Delta tables, written by shards.
//!
//! ```text
//! <tables>/                         a local directory or an object-store prefix
//!   features/                       Delta table, partitioned by build and shard
//!     build=<key>/shard=K-of-N/part-<run>-<bucket>.parquet
//!   state/                          the same layout: per player, the last matches (export)
//! ```
//!
//! A build's key is a digest of everything its rows depend on (the lake's location and
//! version, the mode, the cutoff, the horizon, the feature options, the skill input), so that
//! builds with other options live side by side and a rerun with the same options finds its
//! rows. Each shard replaces its own partition of both tables (state first, then features), one
//! Delta commit each; a build is complete when one shard count `N` has all of its shards in
//! both tables. Nothing else coordinates the shards.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arrow_schema::Schema as ArrowSchema;
use mm_lake::Lake;
use mm_lake::derived::{DerivedFile, DerivedTable};
use serde::{Deserialize, Serialize};

use crate::churn::build::{BuildStats, Shard};
use crate::churn::features::FeatureQuery;
use crate::error::FitError;

pub const FEATURES: &str = "features";
pub const STATE: &str = "state";
const PARTITIONS: [&str; 2] = ["build", "shard"];

/// What a shard records in its commits (and what a reader checks the shards agree on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub build: String,
    pub shard: String,
    pub rows: u64,
    pub rows_read: u64,
    pub data_start_ms: i64,
    pub data_end_ms: i64,
    /// The options the key digests, for people reading the log.
    pub options: serde_json::Value,
}

/// A complete build: every shard of one shard count, in both tables.
#[derive(Debug, Clone)]
pub struct CompleteBuild {
    pub key: String,
    pub shards: u32,
    /// Local paths (cached copies for a remote table) of the features files, by shard and
    /// bucket.
    pub features: Vec<PathBuf>,
    pub state: Vec<PathBuf>,
    pub rows: u64,
    pub data_start_ms: i64,
    pub data_end_ms: i64,
    pub features_version: Option<i64>,
    pub state_version: Option<i64>,
}

fn table_path(root: &Path, name: &str) -> PathBuf {
    // A URL survives as the path's text; `join` would not add a `/` to it.
    PathBuf::from(format!(
        "{}/{name}",
        root.to_string_lossy().trim_end_matches('/')
    ))
}

/// The options a build's rows depend on, and their digest (the build key).
pub fn build_key(
    lake: &Lake,
    q: &FeatureQuery,
    truth_column: Option<&str>,
) -> Result<(String, serde_json::Value), FitError> {
    let skill = match &q.skill {
        Some(p) => {
            // The file's length and footer (its schema, row groups and statistics).
            use std::io::{Read, Seek, SeekFrom};
            let mut f = std::fs::File::open(p).map_err(|e| FitError::Input {
                path: p.clone(),
                reason: e.to_string(),
            })?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let tail = len.min(64 << 10);
            let mut buf = vec![0u8; usize::try_from(tail).unwrap_or(0)];
            f.seek(SeekFrom::End(-i64::try_from(tail).unwrap_or(0)))
                .and_then(|_| f.read_exact(&mut buf))
                .map_err(|e| FitError::Input {
                    path: p.clone(),
                    reason: e.to_string(),
                })?;
            Some(format!("{len}:{:016x}", xxhash_rust::xxh3::xxh3_64(&buf)))
        }
        None => None,
    };
    let options = serde_json::json!({
        "lake": lake.root().to_string(),
        "lake_version": lake.version(),
        "mode": q.mode,
        "until_ms": q.until_ms,
        "history": q.history,
        "outcome_interactions": q.outcome_interactions,
        "outcome_pattern": q.outcome_pattern,
        "horizon_ms": q.horizon_ms,
        "blowout_margin": q.blowout_margin,
        "censor_windows": q.censor_windows,
        "skill": skill,
        "truth": truth_column,
        "past_churn": q.past_churn,
        // 2: the state table's `churned_gaps`; 3: the features' `now_blowout_loss`.
        "table_format": 3,
    });
    let key = format!(
        "{:016x}",
        xxhash_rust::xxh3::xxh3_64(options.to_string().as_bytes())
    );
    Ok((key, options))
}

fn arrow_schema_of(file: &Path) -> Result<ArrowSchema, FitError> {
    let f = std::fs::File::open(file).map_err(|e| FitError::Input {
        path: file.to_path_buf(),
        reason: e.to_string(),
    })?;
    let b =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| {
            FitError::Input {
                path: file.to_path_buf(),
                reason: e.to_string(),
            }
        })?;
    Ok(b.schema().as_ref().clone())
}

/// Commits a shard's parts (from [`crate::churn::build::build`]) to the tables under `root`:
/// the state table first, then the features table, each replacing the shard's partition of
/// this build. Returns the two versions.
pub fn commit_shard(
    root: &Path,
    key: &str,
    options: &serde_json::Value,
    shard: Shard,
    stats: &BuildStats,
    run_id: &str,
) -> Result<(i64, i64), FitError> {
    let first = stats.parts.first().ok_or_else(|| FitError::Config {
        field: "shard",
        reason: "the shard built no part".into(),
    })?;
    let record = ShardRecord {
        build: key.to_string(),
        shard: shard.label(),
        rows: stats.rows,
        rows_read: stats.rows_read,
        data_start_ms: stats.data_start_ms,
        data_end_ms: stats.data_end_ms,
        options: options.clone(),
    };
    let info = serde_json::to_value(&record).unwrap_or_default();
    let label = shard.label();
    let mut versions = [0i64; 2];
    for (k, (name, files)) in [
        (
            STATE,
            stats
                .parts
                .iter()
                .map(|p| p.state.clone())
                .collect::<Vec<_>>(),
        ),
        (
            FEATURES,
            stats.parts.iter().map(|p| p.features.clone()).collect(),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let sample = if name == STATE {
            &first.state
        } else {
            &first.features
        };
        let mut t = DerivedTable::open_or_create(
            &table_path(root, name),
            &format!("churn_{name}"),
            &arrow_schema_of(sample)?,
            &PARTITIONS,
        )?;
        // Files go through the table's own scratch area, so that publishing is a rename.
        let scratch = t.scratch_dir(run_id)?;
        let mut staged = Vec::new();
        for (i, f) in files.iter().enumerate() {
            let dst = scratch.join(format!("{i:05}.parquet"));
            std::fs::rename(f, &dst)
                .or_else(|_| std::fs::copy(f, &dst).map(|_| ()))
                .map_err(|e| FitError::Output {
                    path: dst.clone(),
                    reason: e.to_string(),
                })?;
            staged.push(dst);
        }
        let v = t.replace_partition(&[key, &label], &staged, run_id, info.clone());
        let _ = std::fs::remove_dir_all(&scratch);
        versions[k] = v?;
    }
    Ok((versions[0], versions[1]))
}

/// The shards of `key` present in a table's snapshot: by shard count, the files of each shard.
type ShardFiles = BTreeMap<u32, BTreeMap<u32, Vec<DerivedFile>>>;

fn shards_of(t: &DerivedTable, key: &str) -> Result<ShardFiles, FitError> {
    let mut out: ShardFiles = BTreeMap::new();
    for f in t.files()? {
        if f.partition.get("build").map(String::as_str) != Some(key) {
            continue;
        }
        if let Some(s) = f.partition.get("shard").and_then(|s| Shard::from_label(s)) {
            out.entry(s.n).or_default().entry(s.k).or_default().push(f);
        }
    }
    Ok(out)
}

/// The complete build `key` under `root`, if there is one; when shards of it are present but
/// not all, `Ok(None)` with the missing ones named in the second value.
pub fn complete_build(
    root: &Path,
    key: &str,
) -> Result<(Option<CompleteBuild>, Option<String>), FitError> {
    let (Some(ft), Some(st)) = (
        DerivedTable::open(&table_path(root, FEATURES))?,
        DerivedTable::open(&table_path(root, STATE))?,
    ) else {
        return Ok((None, None));
    };
    let (fs, ss) = (shards_of(&ft, key)?, shards_of(&st, key)?);
    let mut missing = None;
    // The largest shard count that is complete in both tables.
    for (&n, fparts) in fs.iter().rev() {
        let sparts = ss.get(&n).cloned().unwrap_or_default();
        let absent: Vec<u32> = (0..n)
            .filter(|k| !fparts.contains_key(k) || !sparts.contains_key(k))
            .collect();
        if !absent.is_empty() {
            missing.get_or_insert_with(|| {
                format!(
                    "build {key}: shards {} of {n} not committed yet",
                    absent
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
            continue;
        }
        let (mut features, mut state, mut rows) = (Vec::new(), Vec::new(), 0);
        for files in fparts.values() {
            for f in files {
                rows += f.rows.unwrap_or(0);
                features.push(ft.local_file(&f.path)?);
            }
        }
        for files in sparts.values() {
            for f in files {
                state.push(st.local_file(&f.path)?);
            }
        }
        let (start, end) = bounds(&ft, key, n)?;
        return Ok((
            Some(CompleteBuild {
                key: key.to_string(),
                shards: n,
                features,
                state,
                rows,
                data_start_ms: start,
                data_end_ms: end,
                features_version: ft.version(),
                state_version: st.version(),
            }),
            None,
        ));
    }
    Ok((None, missing))
}

/// The data's bounds as the shards of `key` recorded them (every shard reads every day, so
/// they agree; a disagreement is refused).
fn bounds(t: &DerivedTable, key: &str, n: u32) -> Result<(i64, i64), FitError> {
    let mut seen: Option<(i64, i64)> = None;
    for info in t.commit_infos()? {
        let Ok(r) = serde_json::from_value::<ShardRecord>(info) else {
            continue;
        };
        if r.build != key || Shard::from_label(&r.shard).is_none_or(|s| s.n != n) {
            continue;
        }
        let b = (r.data_start_ms, r.data_end_ms);
        match seen {
            None => seen = Some(b),
            Some(s) if s == b => {}
            Some(s) => {
                return Err(FitError::Input {
                    path: PathBuf::from(t.location().to_string()),
                    reason: format!(
                        "build {key}: shards recorded different data bounds ({s:?} and {b:?}): \
                         they read different lake versions"
                    ),
                });
            }
        }
    }
    seen.ok_or_else(|| FitError::Input {
        path: PathBuf::from(t.location().to_string()),
        reason: format!("build {key}: no shard record in the log"),
    })
}
