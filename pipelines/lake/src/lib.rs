//! # mm-lake: the match-history lake
//!
//! Every job of the pipeline reads or writes one table of match history: **one row per player per
//! match**, a [Delta Lake](https://delta.io) table of zstd Parquet files partitioned by the UTC
//! day of the match start (`matches/day=YYYY-MM-DD/part-<run>.parquet` plus its `_delta_log/`),
//! on a local disk or in an object store, so Spark, DuckDB, Trino and polars open it with their
//! Delta readers and their transactional guarantees. This crate owns four things and nothing else:
//!
//! - the schema ([`schema::matches_schema`], documented column by column in `data/README.md`),
//!   the typed row that producers fill ([`PlayerRow`], with its row-level [`PlayerRow::validate`])
//!   and the match-level rules ([`rules`]) that every writer (ingest, the service) applies;
//! - the columnar [`RowsBuilder`] that turns rows into Arrow batches;
//! - where a lake lives ([`Location`]: a path or an `s3://`, `gs://`, `az://`, `file://` URL);
//! - the store ([`Lake`]): snapshots pinned at a version or time ([`AsOf`]), and multi-file runs
//!   committed through the Delta log with optimistic concurrency ([`Txn`]), on top of delta-rs.
//!
//! Producers (ingest, the simulator) decide *what* rows to write; the lake decides *how* they
//! land. A run stages its files, then commits them all or none.
//!
//! ```
//! use mm_lake::{Lake, PlayerRow, RowsBuilder, schema::Outcome, to_lake_batch};
//! let dir = tempfile::tempdir().unwrap();
//! let lake = Lake::open_or_create(dir.path()).unwrap();
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
//! let mut txn = lake.begin("run-1").unwrap();
//! let rel = Lake::partition_rel(mm_lake::schema::day_of(1_704_067_200_000)).join("part-run-1.parquet");
//! txn.write_parquet(&rel, &[batch]).unwrap();
//! let done = txn.commit(&serde_json::json!({"run_id": "run-1"})).unwrap();
//!
//! // Readers see committed versions only, and can go back to any of them.
//! let now = Lake::open(dir.path()).unwrap();
//! assert_eq!((now.version(), now.matches_files().unwrap().len()), (Some(done.version), 1));
//! let before = Lake::open_as_of(dir.path(), mm_lake::AsOf::Version(done.version - 1)).unwrap();
//! assert!(before.matches_files().unwrap().is_empty());
//! ```

pub mod changes;
pub mod convert;
pub mod delta;
pub mod derived;
pub mod error;
mod ids;
pub mod inputs;
pub mod location;
pub mod mirror;
pub mod parquet_io;
pub mod progress;
pub mod results;
pub mod rows;
pub mod rules;
pub mod schema;
pub mod store;
pub mod summary;
pub mod syncer;
pub mod txn;
pub mod upkeep;

pub use rows::{PlayerRow, RowError, RowsBuilder, staging_schema, to_lake_batch};

/// A run id that sorts by time and is unique across processes and machines in practice:
/// `YYYYMMDDTHHMMSSmmmZ-<pid><nanos>` (letters, digits and `-` only, so it can name files and
/// partitions).
#[must_use]
pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!(
        "{}-{:05x}{:05x}",
        now.format("%Y%m%dT%H%M%S%3fZ"),
        std::process::id() & 0xfffff,
        now.timestamp_subsec_nanos() & 0xfffff
    )
}

/// The peak resident memory of this process so far (Linux `VmHWM`), for run reports; `None`
/// where `/proc` is not available.
#[must_use]
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The CPU time this process has used so far, user and system, all threads (Linux
/// `/proc/self/stat`), for run reports; `None` where `/proc` is not available.
#[must_use]
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces, inside parentheses): the state is
    // field 3, utime and stime are fields 14 and 15, in USER_HZ ticks (100 a second: the
    // kernel's fixed unit for these files).
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

pub use delta::AsOf;
pub use error::LakeError;
pub use location::Location;
pub use store::{FileEntry, Lake, Recovery};
pub use txn::{Committed, Txn};
