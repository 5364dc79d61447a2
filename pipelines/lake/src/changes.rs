//! What the matches table gained after a version: the Delta log's commits read one by one, so
//! that a job or a service continues from where it left off instead of re-reading the table.
//!
//! A commit's new data is its `add` actions with `dataChange: true`; compaction (`mm lake
//! optimize`) rewrites files with `dataChange: false` and adds no match. Each commit's
//! application transactions (`txn` actions: an app id and its own sequence number) say which
//! writer it came from, so a service skips its own flushes and a flush retried after a crash is
//! recognised.

use serde::Serialize;

use crate::delta;
use crate::error::{LakeError, Result};
use crate::schema::parse_day_dir_name;
use crate::store::{DAY, FileEntry, Lake};

/// One commit of the matches table after the version asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub version: i64,
    /// Files added with new data (`dataChange: true`), in the order the commit lists them.
    pub added: Vec<FileEntry>,
    /// The application transactions the commit recorded: (app id, its version).
    pub app_transactions: Vec<(String, i64)>,
    /// The commit's operation (`WRITE`, `OPTIMIZE`, ...).
    pub operation: Option<String>,
    /// The `mm` run id the commit recorded, if any.
    pub run_id: Option<String>,
}

impl Lake {
    /// The commits of the matches table after `version`, up to the version this lake was
    /// opened at, oldest first (empty when `version` is that one or later).
    ///
    /// # Errors
    /// [`LakeError::LogTruncated`] when the log no longer holds one of those commits (cleaned up
    /// after a checkpoint): the caller must then read the table whole. Storage errors.
    pub fn changes_since(&self, version: i64) -> Result<Vec<Change>> {
        let (Some(t), Some(top)) = (&self.matches.table, self.version()) else {
            return Ok(Vec::new());
        };
        let loc = &self.matches.loc;
        let store = t.log_store();
        let mut out = Vec::new();
        for v in (version + 1).max(0)..=top {
            let bytes = delta::block_on(store.read_commit_entry(u64::try_from(v).unwrap_or(0)))
                .map_err(delta::delta_err(loc))?
                .ok_or_else(|| LakeError::LogTruncated {
                    location: loc.to_string(),
                    version: v,
                })?;
            out.push(parse_change(v, &bytes));
        }
        Ok(out)
    }

    /// The last version the application `app_id` recorded in the matches table (a `txn`
    /// action), as of the version this lake was opened at; `None` if it never committed.
    ///
    /// # Errors
    /// The log cannot be read.
    pub fn app_transaction(&self, app_id: &str) -> Result<Option<i64>> {
        let Some(t) = &self.matches.table else {
            return Ok(None);
        };
        let loc = &self.matches.loc;
        let snap = t.snapshot().map_err(delta::delta_err(loc))?;
        let store = t.log_store();
        delta::block_on(snap.transaction_version(store.as_ref(), app_id))
            .map_err(delta::delta_err(loc))
    }

    /// The local path of a file of the matches table (a cached copy for a remote lake).
    ///
    /// # Errors
    /// The file cannot be read or downloaded.
    pub fn matches_file(&self, f: &FileEntry) -> Result<std::path::PathBuf> {
        self.matches.local_file(&f.path)
    }
}

/// A commit's entry in the log, read by the one parser of log entries
/// ([`delta::parse_commit`]), as a [`Change`]: paths decoded, days parsed.
fn parse_change(version: i64, bytes: &[u8]) -> Change {
    let w = delta::parse_commit(version, bytes);
    Change {
        version,
        added: w
            .added
            .into_iter()
            .map(|f| FileEntry {
                day: f
                    .partition_values
                    .get(DAY)
                    .cloned()
                    .flatten()
                    .and_then(|d| parse_day_dir_name(&format!("{DAY}={d}"))),
                path: decode(&f.path),
                bytes: f.size,
                rows: f.rows,
                mode_range: None,
                rows_without_kills: None,
                start_range: None,
            })
            .collect(),
        app_transactions: w.app_transactions,
        operation: w.operation,
        run_id: w.run_id,
    }
}

/// A log path is URL-encoded (`day=2024-01-01/part-%3A.parquet`); the snapshot's listing gives
/// it decoded, and so does this.
fn decode(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_or_else(|_| path.to_string(), std::borrow::Cow::into_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_parse_into_a_change() {
        let entry = br#"{"commitInfo":{"operation":"WRITE","mm_run":{"run_id":"r1"}}}
{"txn":{"appId":"serve-a","version":7,"lastUpdated":1}}
{"add":{"path":"day=2024-01-02/part-a%3Ab.parquet","partitionValues":{"day":"2024-01-02"},"size":10,"modificationTime":0,"dataChange":true,"stats":"{\"numRecords\":12}"}}
{"add":{"path":"day=2024-01-02/part-c.parquet","partitionValues":{"day":"2024-01-02"},"size":10,"modificationTime":0,"dataChange":false}}
"#;
        let c = parse_change(3, entry);
        assert_eq!(c.version, 3);
        assert_eq!(c.run_id.as_deref(), Some("r1"));
        assert_eq!(c.app_transactions, [("serve-a".to_string(), 7)]);
        assert_eq!(c.added.len(), 1, "the compaction's file is not new data");
        assert_eq!(c.added[0].path, "day=2024-01-02/part-a:b.parquet");
        assert_eq!(c.added[0].rows, Some(12));
        assert_eq!(
            c.added[0].day,
            parse_day_dir_name("day=2024-01-02"),
            "{:?}",
            c.added[0]
        );
    }
}
