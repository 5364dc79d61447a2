//! Accounting: every source record read is accepted, quarantined, a duplicate, or skipped by a
//! source rule, and the counts say which, per file and for the run.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Source records by fate. Invariant: `read == accepted + quarantined + duplicates + skipped`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub read: u64,
    pub accepted: u64,
    pub quarantined: u64,
    pub duplicates: u64,
    pub skipped: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.read += o.read;
        self.accepted += o.accepted;
        self.quarantined += o.quarantined;
        self.duplicates += o.duplicates;
        self.skipped += o.skipped;
    }

    /// Whether every record read is accounted for.
    pub fn balanced(&self) -> bool {
        self.read == self.accepted + self.quarantined + self.duplicates + self.skipped
    }
}

/// One quarantined record, as an example in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Example {
    pub line: u64,
    pub reason: String,
}

/// What happened to one input file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FileReport {
    pub path: String,
    pub format: String,
    pub sha256: String,
    pub bytes: u64,
    #[serde(flatten)]
    pub counts: Counts,
    /// Lake rows the accepted records became (two per record for one-row-per-match sources).
    pub lake_rows: u64,
    /// Quarantined records by rule or field.
    pub quarantine_by_reason: BTreeMap<String, u64>,
    /// The first few quarantined records, with line and reason.
    pub quarantine_examples: Vec<Example>,
    /// Skipped records by source rule.
    pub skipped_by_reason: BTreeMap<String, u64>,
}

/// What one ingest run did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub run_id: String,
    pub lake: String,
    pub files: Vec<FileReport>,
    pub totals: Counts,
    pub lake_rows_written: u64,
    pub partitions_written: u64,
    /// New quarantine entries stored (a re-ingested bad record is counted above but not stored twice).
    pub quarantine_entries_written: u64,
    pub seconds: f64,
    /// Wall-clock seconds of each stage: read (pass 1), finalize (pass 2), commit.
    pub stage_seconds: BTreeMap<String, f64>,
    pub records_per_second: f64,
    pub peak_rss_bytes: Option<u64>,
    /// Staging directories of runs that died before committing, found at start and removed.
    pub recovered: Vec<String>,
    /// The matches table's version this run read (and deduplicated against).
    #[serde(default)]
    pub read_version: Option<i64>,
    /// The matches table's version that holds this run (set once committed).
    #[serde(default)]
    pub lake_version: Option<i64>,
    /// Whether the input was read twice: a match start was refused in a day that had already
    /// been written under the memory budget (see [`crate::starts`]).
    #[serde(default)]
    pub read_twice: bool,
}

impl RunReport {
    /// A human-readable summary: one line per file and a total.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "run {} into {}", self.run_id, self.lake);
        let _ = writeln!(
            s,
            "{:>10} {:>10} {:>11} {:>10} {:>8}  file",
            "read", "accepted", "quarantined", "duplicates", "skipped"
        );
        let line = |s: &mut String, c: &Counts, name: &str| {
            let _ = writeln!(
                s,
                "{:>10} {:>10} {:>11} {:>10} {:>8}  {name}",
                c.read, c.accepted, c.quarantined, c.duplicates, c.skipped
            );
        };
        for f in &self.files {
            line(&mut s, &f.counts, &format!("{} ({})", f.path, f.format));
            for (why, n) in &f.quarantine_by_reason {
                let _ = writeln!(s, "{:>45}  quarantined {n}: {why}", "");
            }
            for (why, n) in &f.skipped_by_reason {
                let _ = writeln!(s, "{:>45}  skipped {n}: {why}", "");
            }
        }
        line(&mut s, &self.totals, "total");
        if self.read_twice {
            let _ = writeln!(
                s,
                "the input was read twice: a row refused for its match's start was in a day \
                 already written under the memory budget (--stage-rows)"
            );
        }
        let _ = writeln!(
            s,
            "read = accepted + quarantined + duplicates + skipped: {}",
            if self.totals.balanced() {
                "ok"
            } else {
                "MISMATCH"
            }
        );
        let _ = writeln!(
            s,
            "{} lake rows in {} partitions, {} new quarantine entries{}; {:.2} s, {:.0} records/s{}",
            self.lake_rows_written,
            self.partitions_written,
            self.quarantine_entries_written,
            self.lake_version
                .map(|v| format!("; lake version {v}"))
                .unwrap_or_default(),
            self.seconds,
            self.records_per_second,
            self.peak_rss_bytes
                .map(|b| format!(", peak RSS {:.0} MiB", b as f64 / 1048576.0))
                .unwrap_or_default()
        );
        s
    }
}
