//! One start time per match. The lake is partitioned by the day a match starts, and pass 2
//! checks duplicates one day at a time, so every row of a match must carry the same start time.
//! This check runs on the stream, in input order: the first row of a match fixes its start, and
//! a later row that disagrees is quarantined (with its whole source record).

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType, UInt8Type, UInt32Type};
use arrow_array::{BooleanArray, RecordBatch};
use arrow_select::filter::filter_record_batch;
use hashbrown::{HashMap, HashSet};
use mm_lake::rows::internal;
use mm_lake::schema::col;
use xxhash_rust::xxh3::xxh3_128;

use crate::IngestError;
use crate::parse::QEntry;

/// The start time of every match seen so far in the run, keyed by a 128-bit hash of the match
/// id: 24 bytes a match, and a collision (which would wrongly quarantine a row, naming both
/// times) has odds of about 1e-26 among a million matches.
#[derive(Debug, Default)]
pub struct MatchStarts {
    first: HashMap<u128, i64>,
}

fn internal_err(e: impl std::fmt::Display) -> IngestError {
    IngestError::Internal {
        path: "<staging>".into(),
        reason: e.to_string(),
    }
}

fn show_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
    )
}

impl MatchStarts {
    /// Returns `batch` without the rows whose match started at another time in an earlier row,
    /// and one quarantine entry per rejected source record.
    pub fn check(&mut self, batch: RecordBatch) -> Result<(RecordBatch, Vec<QEntry>), IngestError> {
        let c = |name: &str| {
            batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| internal_err(format!("no column {name}")))
        };
        let (m_col, s_col, l_col) = (c(col::MATCH_ID)?, c(col::START_TIME)?, c(col::SOURCE_LINE)?);
        let (f_col, r_col, p_col) = (
            c(internal::FILE_IDX)?,
            c(internal::RECORD_ROWS)?,
            c(col::PLAYER_ID)?,
        );
        let (match_id, start, line) = (
            m_col.as_string::<i32>(),
            s_col.as_primitive::<TimestampMillisecondType>(),
            l_col.as_primitive::<Int64Type>(),
        );
        let (file_idx, record_rows, player) = (
            f_col.as_primitive::<UInt32Type>(),
            r_col.as_primitive::<UInt8Type>(),
            p_col.as_string::<i32>(),
        );
        let mut bad: Vec<(usize, String)> = Vec::new();
        let mut last: Option<(&str, i64)> = None;
        for i in 0..batch.num_rows() {
            let (m, s) = (match_id.value(i), start.value(i));
            if last == Some((m, s)) {
                continue; // the common case: the next player of the same match
            }
            let first_s = *self.first.entry(xxh3_128(m.as_bytes())).or_insert(s);
            if first_s == s {
                last = Some((m, s));
            } else {
                let reason = format!(
                    "match {m} starts at {} here but at {} in an earlier row; all rows of a match share its start",
                    show_ms(s),
                    show_ms(first_s)
                );
                bad.push((i, reason));
            }
        }
        if bad.is_empty() {
            return Ok((batch, Vec::new()));
        }
        // A record that became several rows goes whole.
        let bad_records: HashSet<(u32, i64)> = bad
            .iter()
            .map(|(i, _)| (file_idx.value(*i), line.value(*i)))
            .collect();
        let bad_rows: HashSet<usize> = bad.iter().map(|(i, _)| *i).collect();
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|i| {
                let whole_record = record_rows.value(i) > 1
                    && bad_records.contains(&(file_idx.value(i), line.value(i)));
                Some(!(bad_rows.contains(&i) || whole_record))
            })
            .collect();
        let mut seen: HashSet<(u32, i64)> = HashSet::new();
        let entries = bad
            .into_iter()
            .filter(|(i, _)| seen.insert((file_idx.value(*i), line.value(*i))))
            .map(|(i, reason)| QEntry {
                file_idx: file_idx.value(i),
                line: u64::try_from(line.value(i)).unwrap_or_default(),
                stage: "match",
                field: Some("match: start time".into()),
                reason,
                match_id: Some(match_id.value(i).to_string()),
                player_id: Some(player.value(i).to_string()),
                raw: None,
            })
            .collect();
        let kept = filter_record_batch(&batch, &keep).map_err(internal_err)?;
        Ok((kept, entries))
    }
}
