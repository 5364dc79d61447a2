//! # mm-lake: the match-history lake
//!
//! Every job of the pipeline reads or writes one table of match history: **one row per player per
//! match**, stored as zstd Parquet partitioned by the UTC day of the match start
//! (`matches/day=YYYY-MM-DD/part-<run>.parquet`), so polars, DuckDB or pandas can open it with a
//! glob. This crate owns three things and nothing else:
//!
//! - the schema ([`schema::matches_schema`], documented column by column in `data/README.md`)
//!   and the typed row that producers fill ([`PlayerRow`], with its row-level [`PlayerRow::validate`]);
//! - the columnar [`RowsBuilder`] that turns rows into Arrow batches;
//! - the store ([`Lake`]): one writer at a time ([`Lake::lock`]), and multi-file commits that are
//!   atomic across a crash ([`Txn`], [`Lake::recover`]).
//!
//! Producers (ingest, the simulator) decide *what* rows to write; the lake decides *how* they
//! land. A run stages its files, then commits them all or none.
//!
//! ```
//! use mm_lake::{Lake, PlayerRow, RowsBuilder, schema::Outcome, to_lake_batch};
//! let dir = tempfile::tempdir().unwrap();
//! let lake = Lake::open(dir.path()).unwrap();
//! let lock = lake.lock().unwrap();
//! lake.recover(&lock).unwrap();
//!
//! let mut rows = RowsBuilder::with_capacity(2);
//! for (team, player, outcome) in [(0, "ann", Outcome::Win), (1, "bob", Outcome::Loss)] {
//!     let row = PlayerRow {
//!         match_id: "m1".into(), mode: "duel".into(), start_ms: 1_704_067_200_000,
//!         team, player_id: player.into(), outcome: Some(outcome), ..Default::default()
//!     };
//!     row.validate().unwrap();
//!     rows.push(&row, "example", 1, 0, 1);
//! }
//! let batch = to_lake_batch(&rows.finish()).unwrap();
//!
//! let mut txn = lake.begin(&lock, "run-1").unwrap();
//! let rel = Lake::partition_rel(mm_lake::schema::day_of(1_704_067_200_000)).join("part-run-1.parquet");
//! txn.write_parquet(&rel, &[batch]).unwrap();
//! txn.commit(&serde_json::json!({"run_id": "run-1"})).unwrap();
//! assert_eq!(lake.matches_files().unwrap().len(), 1);
//! ```

pub mod rows;
pub mod schema;
pub mod store;
pub mod summary;
pub mod syncer;

pub use rows::{PlayerRow, RowError, RowsBuilder, staging_schema, to_lake_batch};

/// The peak resident memory of this process so far (Linux `VmHWM`), for run reports; `None`
/// where `/proc` is not available.
#[must_use]
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
pub use store::{Lake, LakeError, LakeLock, Recovery, Txn};
