//! # mm-lake: the match-history lake
//!
//! Every job of the pipeline reads or writes one table of match history: **one row per player per
//! match**, a [Delta Lake](https://delta.io) table of zstd Parquet files partitioned by the UTC
//! day of the match start (`matches/day=YYYY-MM-DD/part-<run>.parquet` plus its `_delta_log/`),
//! on a local disk or in an object store, so Spark, DuckDB, Trino and polars open it with their
//! Delta readers and their transactional guarantees. This crate owns the lake's tables and their
//! transactions:
//!
//! - the schema ([`schema::matches_schema`], documented column by column in `data/README.md`),
//!   the typed row that producers fill ([`PlayerRow`], with its row-level [`PlayerRow::validate`])
//!   and the match-level rules ([`rules`]) that every writer (ingest, the service) applies;
//! - the columnar [`RowsBuilder`] that turns rows into Arrow batches;
//! - where a lake lives ([`Location`]: a path or an `s3://`, `gs://`, `az://`, `file://` URL);
//! - the store ([`Lake`]): snapshots pinned at a version or time ([`AsOf`]), and multi-file runs
//!   committed through the Delta log with optimistic concurrency ([`Txn`]), on top of delta-rs;
//!   the derived tables the jobs write beside it ([`derived`]), the service's results
//!   ([`results`], [`syncer`]) and the table's upkeep ([`upkeep`]).
//!
//! One thing here is not a table: [`mirror`], the local copy of an artifact store in a bucket. It
//! lives with the lake because it is the same object-store access (the [`Location`], its
//! credentials, conditional uploads) and `mm-artifact` stays free of network code. What every
//! job's run shares besides (run ids, peak memory, progress meters) is in `mm-run`.
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

pub use delta::AsOf;
pub use error::LakeError;
pub use location::Location;
pub use store::{FileEntry, Lake, Recovery};
pub use txn::{Committed, Txn};
