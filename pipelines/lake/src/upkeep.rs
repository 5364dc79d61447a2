//! Upkeep of the tables: compaction (`optimize`), `vacuum` and the log's checkpoint and
//! cleanup, as Delta defines them.

use std::path::PathBuf;

use serde::Serialize;

use crate::delta::{self};
use crate::error::{LakeError, Result};
use crate::parquet_io::read_parquet_columns;
use crate::schema::day_dir_name;
use crate::store::{FileEntry, Lake};

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

/// Versions between the checkpoints a frequent writer (`mm serve`'s flushes) writes: Delta's
/// `delta.checkpointInterval` default in delta-rs.
pub const CHECKPOINT_INTERVAL: i64 = 100;

/// What [`Lake::checkpoint`] did, per table: the version checkpointed and the log entries
/// deleted.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckpointReport {
    pub matches: Option<(i64, usize)>,
    pub quarantine: Option<(i64, usize)>,
}

impl Lake {
    /// Writes a checkpoint of each table at the version this lake was opened at, then deletes
    /// the log entries before the newest checkpoint that are older than `expire_hours`, as
    /// delta-rs's log cleanup does (Delta's `logRetentionDuration` is 30 days, 720 hours). A
    /// log written by a service's flushes gains a commit per flush: this keeps it short. A
    /// reader that continues from a version whose commits are gone (a continued `mm retrain`,
    /// a replica of `mm serve`) is told so and reads the table whole instead.
    pub fn checkpoint(&self, expire_hours: u64) -> Result<CheckpointReport> {
        use deltalake_core::checkpoints::cleanup_expired_logs_for;
        let mut report = CheckpointReport::default();
        let cutoff = chrono::Utc::now().timestamp_millis()
            - i64::try_from(expire_hours)
                .unwrap_or(i64::MAX / 3_600_000)
                .saturating_mul(3_600_000);
        for (view, out) in [
            (&self.matches, &mut report.matches),
            (&self.quarantine, &mut report.quarantine),
        ] {
            let Some(version) = checkpoint_table(view)? else {
                continue;
            };
            let Some(t) = &view.table else { continue };
            let deleted = delta::block_on(cleanup_expired_logs_for(
                version,
                t.log_store().as_ref(),
                cutoff,
                None,
            ))
            .map_err(delta::delta_err(&view.loc))?;
            *out = Some((i64::try_from(version).unwrap_or(i64::MAX), deleted));
        }
        Ok(report)
    }

    /// Writes a checkpoint of the matches table at the version this lake was opened at, and
    /// nothing else (no log entry is deleted): what a writer that commits often does every
    /// [`CHECKPOINT_INTERVAL`] versions, as Delta writers do, so that opening the table reads
    /// one Parquet file and a few log entries instead of every commit since the last one.
    ///
    /// # Errors
    /// The checkpoint cannot be written.
    pub fn checkpoint_matches(&self) -> Result<Option<i64>> {
        Ok(checkpoint_table(&self.matches)?.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
    }

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

/// Writes a checkpoint of `view`'s table at the version it was opened at; returns that version
/// (`None`: no table).
fn checkpoint_table(view: &crate::store::TableView) -> Result<Option<u64>> {
    let Some(t) = &view.table else {
        return Ok(None);
    };
    delta::check_protocol(&view.loc, t, true)?;
    let version = t.snapshot().map_err(delta::delta_err(&view.loc))?.version();
    delta::block_on(deltalake_core::checkpoints::create_checkpoint(t, None))
        .map_err(delta::delta_err(&view.loc))?;
    Ok(Some(version))
}
