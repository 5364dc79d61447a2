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
/// id: 24 bytes a match (the key as two words, so that no 16-byte alignment pads the entry),
/// and a collision (which would wrongly quarantine a row, naming both times) has odds of about
/// 1e-26 among a million matches. The index is split into [`SHARDS`] tables by hash, so that a
/// table that grows copies a 64th of the index, not all of it (a single table holds its old and
/// its new copy while it doubles).
#[derive(Debug)]
pub struct MatchStarts {
    shards: Vec<HashMap<[u64; 2], i64>>,
}

/// Tables of the match index.
const SHARDS: usize = 64;

impl Default for MatchStarts {
    fn default() -> Self {
        MatchStarts {
            shards: (0..SHARDS).map(|_| HashMap::new()).collect(),
        }
    }
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
            let h = xxh3_128(m.as_bytes());
            let shard = &mut self.shards[(h >> 122) as usize % SHARDS];
            let first_s = *shard.entry([h as u64, (h >> 64) as u64]).or_insert(s);
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, Int64Array, StringArray, TimestampMillisecondArray, UInt8Array, UInt32Array,
        new_null_array,
    };
    use mm_lake::staging_schema;

    use super::*;

    /// A staging batch of (match, player, start ms, line, rows of its record).
    fn batch(rows: &[(&str, &str, i64, i64, u8)]) -> RecordBatch {
        let n = rows.len();
        let schema = staging_schema();
        let cols: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .map(|f| -> ArrayRef {
                match f.name().as_str() {
                    col::MATCH_ID => {
                        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0)))
                    }
                    col::PLAYER_ID => {
                        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1)))
                    }
                    col::START_TIME => Arc::new(
                        TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.2))
                            .with_data_type(f.data_type().clone()),
                    ),
                    col::SOURCE_LINE => {
                        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3)))
                    }
                    internal::FILE_IDX => Arc::new(UInt32Array::from(vec![0; n])),
                    internal::RECORD_ROWS => {
                        Arc::new(UInt8Array::from_iter_values(rows.iter().map(|r| r.4)))
                    }
                    _ => new_null_array(f.data_type(), n),
                }
            })
            .collect();
        RecordBatch::try_new(schema, cols).unwrap()
    }

    fn players(b: &RecordBatch) -> Vec<String> {
        let p = b.column_by_name(col::PLAYER_ID).unwrap().as_string::<i32>();
        (0..b.num_rows()).map(|i| p.value(i).to_string()).collect()
    }

    #[test]
    fn the_first_row_of_a_match_fixes_its_start_across_batches() {
        let mut s = MatchStarts::default();
        let (kept, q) = s
            .check(batch(&[
                ("m1", "a", 1000, 2, 1),
                ("m1", "b", 1000, 3, 1),
                ("m2", "c", 5000, 4, 1),
            ]))
            .unwrap();
        assert_eq!(players(&kept), ["a", "b", "c"]);
        assert!(q.is_empty());
        // Later batches: m1 again at another time is refused, at its own time accepted; a record
        // of two rows (a one-row-per-match source) goes whole when one of its rows is refused.
        let (kept, q) = s
            .check(batch(&[
                ("m1", "d", 2000, 5, 1),
                ("m1", "e", 1000, 6, 1),
                ("m2", "f", 6000, 7, 2),
                ("m3", "g", 6000, 7, 2),
                ("m3", "h", 7000, 8, 1),
            ]))
            .unwrap();
        assert_eq!(players(&kept), ["e"]);
        let lines: Vec<u64> = q.iter().map(|e| e.line).collect();
        assert_eq!(lines, [5, 7, 8], "one entry per refused record");
        assert!(
            q[0].reason.contains("match m1 starts at"),
            "{}",
            q[0].reason
        );
        assert!(
            q[0].reason.contains("1970-01-01 00:00:02.000 UTC"),
            "{}",
            q[0].reason
        );
    }

    #[test]
    fn many_matches_over_every_shard_keep_their_first_start() {
        let mut s = MatchStarts::default();
        let ids: Vec<String> = (0..20_000).map(|m| format!("match-{m}")).collect();
        let first: Vec<(&str, &str, i64, i64, u8)> = ids
            .iter()
            .enumerate()
            .map(|(k, m)| (m.as_str(), "p", k as i64, k as i64, 1))
            .collect();
        assert_eq!(s.check(batch(&first)).unwrap().0.num_rows(), ids.len());
        assert!(
            s.shards.iter().all(|t| !t.is_empty()),
            "every shard holds matches"
        );
        // Every match again: even ones at their first start, odd ones a millisecond later.
        let again: Vec<(&str, &str, i64, i64, u8)> = ids
            .iter()
            .enumerate()
            .map(|(k, m)| (m.as_str(), "q", k as i64 + (k % 2) as i64, k as i64, 1))
            .collect();
        let (kept, q) = s.check(batch(&again)).unwrap();
        assert_eq!(kept.num_rows(), ids.len() / 2);
        assert_eq!(q.len(), ids.len() / 2);
    }
}
