//! A lake at a glance, from Parquet footers only (no data is read).

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::file::reader::{FileReader, SerializedFileReader};
use serde::Serialize;

use crate::schema::day_dir_name;
use crate::store::{Lake, LakeError, Result};

/// Counts of a lake's tables.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LakeSummary {
    pub root: PathBuf,
    pub days: usize,
    pub first_day: Option<String>,
    pub last_day: Option<String>,
    pub match_files: usize,
    pub match_rows: u64,
    pub match_bytes: u64,
    pub quarantine_rows: u64,
    pub runs: usize,
}

fn rows_and_bytes(path: &Path) -> Result<(u64, u64)> {
    let file = File::open(path).map_err(crate::store::io_err(path))?;
    let bytes = file.metadata().map_err(crate::store::io_err(path))?.len();
    let reader = SerializedFileReader::new(file).map_err(|source| LakeError::Parquet {
        path: path.to_path_buf(),
        source,
    })?;
    let rows = u64::try_from(reader.metadata().file_metadata().num_rows()).unwrap_or(0);
    Ok((rows, bytes))
}

/// Summarises the lake at `root` (which must exist).
pub fn summarize(root: &Path) -> Result<LakeSummary> {
    if !root.is_dir() {
        return Err(LakeError::Corrupt {
            path: root.to_path_buf(),
            reason: "no lake here (not a directory)".into(),
        });
    }
    let lake = Lake::open(root)?;
    let days = lake.days()?;
    let mut s = LakeSummary {
        root: root.to_path_buf(),
        days: days.len(),
        first_day: days.first().map(|d| day_dir_name(*d)[4..].to_string()),
        last_day: days.last().map(|d| day_dir_name(*d)[4..].to_string()),
        runs: lake.runs()?.len(),
        ..Default::default()
    };
    for f in lake.matches_files()? {
        let (rows, bytes) = rows_and_bytes(&f)?;
        s.match_files += 1;
        s.match_rows += rows;
        s.match_bytes += bytes;
    }
    for f in lake.quarantine_files()? {
        s.quarantine_rows += rows_and_bytes(&f)?.0;
    }
    Ok(s)
}

impl fmt::Display for LakeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "lake {}", self.root.display())?;
        writeln!(
            f,
            "  matches:    {} player-match rows in {} files over {} days ({} .. {}), {:.1} MiB",
            self.match_rows,
            self.match_files,
            self.days,
            self.first_day.as_deref().unwrap_or("-"),
            self.last_day.as_deref().unwrap_or("-"),
            self.match_bytes as f64 / 1048576.0
        )?;
        writeln!(f, "  quarantine: {} records", self.quarantine_rows)?;
        writeln!(f, "  runs:       {}", self.runs)
    }
}
