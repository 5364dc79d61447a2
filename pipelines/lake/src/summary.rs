//! A lake at a glance, from the Delta log only (no data file is read).

use std::fmt;

use serde::Serialize;

use crate::schema::day_dir_name;
use crate::store::{HistoryEntry, Lake, Result};

/// Counts of a lake's tables at the snapshot it was opened at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LakeSummary {
    pub root: String,
    /// The matches table's version (`None`: no table yet).
    pub version: Option<i64>,
    pub quarantine_version: Option<i64>,
    pub days: usize,
    pub first_day: Option<String>,
    pub last_day: Option<String>,
    pub match_files: usize,
    pub match_rows: u64,
    pub match_bytes: u64,
    pub quarantine_rows: u64,
    pub runs: usize,
    /// The newest commits of the matches table, newest first.
    pub history: Vec<HistoryEntry>,
}

/// Summarises `lake`, with up to `history` of its newest commits.
pub fn summarize(lake: &Lake, history: usize) -> Result<LakeSummary> {
    let days = lake.days()?;
    let rows = |files: &[crate::store::FileEntry]| -> Result<u64> {
        Ok(files.iter().map(|f| f.rows.unwrap_or(0)).sum())
    };
    Ok(LakeSummary {
        root: lake.root().to_string(),
        version: lake.version(),
        quarantine_version: lake.quarantine_version(),
        days: days.len(),
        first_day: days.first().map(|d| day_dir_name(*d)[4..].to_string()),
        last_day: days.last().map(|d| day_dir_name(*d)[4..].to_string()),
        match_files: lake.match_entries().len(),
        match_rows: rows(lake.match_entries())?,
        match_bytes: lake.match_entries().iter().map(|f| f.bytes).sum(),
        quarantine_rows: rows(lake.quarantine_entries())?,
        runs: lake.runs()?.len(),
        history: lake.history(history)?,
    })
}

impl fmt::Display for LakeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = |v: Option<i64>| v.map_or("-".to_string(), |v| v.to_string());
        writeln!(f, "lake {} (Delta Lake)", self.root)?;
        writeln!(
            f,
            "  matches:    version {}: {} player-match rows in {} files over {} days ({} .. {}), {:.1} MiB",
            v(self.version),
            self.match_rows,
            self.match_files,
            self.days,
            self.first_day.as_deref().unwrap_or("-"),
            self.last_day.as_deref().unwrap_or("-"),
            self.match_bytes as f64 / 1048576.0
        )?;
        writeln!(
            f,
            "  quarantine: version {}: {} records",
            v(self.quarantine_version),
            self.quarantine_rows
        )?;
        writeln!(f, "  runs:       {}", self.runs)?;
        if !self.history.is_empty() {
            writeln!(f, "  history (newest first):")?;
            for h in &self.history {
                let when = h
                    .timestamp_ms
                    .and_then(chrono::DateTime::from_timestamp_millis)
                    .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                    .unwrap_or_default();
                writeln!(
                    f,
                    "    v{:<5} {}  {:<12} {}{}",
                    h.version,
                    when,
                    h.operation.as_deref().unwrap_or("-"),
                    h.run_id.as_deref().unwrap_or(""),
                    h.rows_added
                        .map(|r| format!(" (+{r} rows)"))
                        .unwrap_or_default()
                )?;
            }
        }
        Ok(())
    }
}
