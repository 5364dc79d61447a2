//! The match ids of the matches table by start time: what a writer that must not write a match
//! twice (`mm serve`'s results) reads to learn which recent matches the lake holds, and asks of
//! an older one. Only the `match_id` and `start_time` columns are read, and only the files whose
//! statistics in the log reach the time asked for.

use std::ops::ControlFlow;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_schema::DataType;

use crate::error::{LakeError, Result};
use crate::parquet_io::for_each_batch;
use crate::schema::{col, day_of};
use crate::store::{FileEntry, Lake};

impl Lake {
    /// The latest match start (ms) of the matches snapshot (`None`: no rows), from the files'
    /// statistics in the log; a file without them is read.
    ///
    /// # Errors
    /// A file without statistics cannot be read.
    pub fn latest_start(&self) -> Result<Option<i64>> {
        let mut latest = None;
        for f in self.match_entries() {
            match f.start_range {
                Some((_, hi)) => latest = latest.max(Some(hi)),
                None => self.scan_ids(f, |_, t| {
                    latest = latest.max(Some(t));
                    ControlFlow::Continue(())
                })?,
            }
        }
        Ok(latest)
    }

    /// Calls `f` with the match id and start (ms) of every row of the matches snapshot that
    /// started at `from_ms` or later (a match's id once per player row).
    ///
    /// # Errors
    /// A file cannot be read.
    pub fn for_each_match_since(&self, from_ms: i64, mut f: impl FnMut(&str, i64)) -> Result<()> {
        let first_day = day_of(from_ms);
        for e in self.match_entries() {
            let reaches = e.start_range.is_none_or(|(_, hi)| hi >= from_ms);
            if e.day.is_some_and(|d| d < first_day) || !reaches {
                continue;
            }
            self.scan_ids(e, |id, t| {
                if t >= from_ms {
                    f(id, t);
                }
                ControlFlow::Continue(())
            })?;
        }
        Ok(())
    }

    /// Whether the matches snapshot holds a row of match `match_id` that started at
    /// `start_ms`: the files of that day whose statistics cover that time are read.
    ///
    /// # Errors
    /// A file cannot be read.
    pub fn holds_match(&self, match_id: &str, start_ms: i64) -> Result<bool> {
        let day = day_of(start_ms);
        for e in self.match_entries() {
            let covers = e
                .start_range
                .is_none_or(|(lo, hi)| (lo..=hi).contains(&start_ms));
            if e.day.is_some_and(|d| d != day) || !covers {
                continue;
            }
            let mut found = false;
            self.scan_ids(e, |id, t| {
                if t == start_ms && id == match_id {
                    found = true;
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            })?;
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Calls `f` with (match id, start ms) of each row of one file of the matches snapshot,
    /// until it breaks.
    fn scan_ids(
        &self,
        e: &FileEntry,
        mut f: impl FnMut(&str, i64) -> ControlFlow<()>,
    ) -> Result<()> {
        let path = self.match_file(&e.path)?;
        let cols = [col::MATCH_ID, col::START_TIME];
        let mut done = false;
        for_each_batch(&path, Some(&cols), |b| {
            if done {
                return Ok::<(), LakeError>(());
            }
            let column = |name: &str, to: &DataType| {
                let c = b.column_by_name(name).ok_or_else(|| LakeError::Corrupt {
                    path: path.clone(),
                    reason: format!("no column {name}"),
                })?;
                arrow_cast::cast(c, to).map_err(|source| LakeError::Arrow {
                    path: path.clone(),
                    source,
                })
            };
            let ids = column(col::MATCH_ID, &DataType::Utf8)?;
            let starts = column(col::START_TIME, &DataType::Int64)?;
            let (ids, starts) = (ids.as_string::<i32>(), starts.as_primitive::<Int64Type>());
            for k in 0..b.num_rows() {
                if ids.is_null(k) || starts.is_null(k) {
                    continue;
                }
                if f(ids.value(k), starts.value(k)).is_break() {
                    done = true;
                    break;
                }
            }
            Ok(())
        })
    }
}
