//! One start time per match. The lake is partitioned by the day a match starts, and pass 2
//! checks duplicates one day at a time, so every row of a match must carry the same start time.
//! The first row of a match in input order (file, then line) fixes its start; a row that
//! disagrees is quarantined, with its whole source record.
//!
//! The check keeps no index of every match in memory, which would grow with the input (24 bytes
//! a match in the version before this one). It runs in two steps instead:
//! 1. While pass 1 reads, [`StartLog::record`] writes one 40-byte record per run of rows of one
//!    match at one start (a time-ordered export has one run a match) into bucket files on local
//!    scratch disk, by a 128-bit hash of the match id. (Two match ids with the same hash would
//!    count as one match and could have a row refused wrongly, with both times named; the odds
//!    are about 1e-21 among a billion matches.)
//! 2. [`StartLog::finish`] reads one bucket at a time, sorts it by (match, file, line), and keeps
//!    the (match, start) pairs that differ from their match's first start. Those are few (they
//!    are bad rows), and they make the [`StartCheck`] that pass 2 applies to the staged rows.
//!
//! A bucket holds about `STARTS_BUCKET_BYTES` of input, so its sort needs memory bounded by that
//! size, not by the input. Rows that the check refuses are only known after the whole input has
//! been read; a day finalised before that (when the staged rows passed the memory budget) may
//! already hold one, and then the run reads its input again with the verdicts known (see
//! [`crate::ingest`]).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType, UInt8Type, UInt32Type};
use arrow_array::{
    Array, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
    UInt8Array, UInt32Array,
};
use arrow_select::filter::filter_record_batch;
use hashbrown::{HashMap, HashSet};
use mm_lake::rows::internal;
use mm_lake::schema::{col, day_of};
use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_128;

use crate::IngestError;
use crate::parse::QEntry;

/// Input bytes (uncompressed, estimated) a bucket of the start log stands for.
pub const STARTS_BUCKET_BYTES: u64 = 64 << 20;
/// Fewest and most bucket files (the most stays well under the usual 1024 open files).
const MIN_BUCKETS: usize = 16;
const MAX_BUCKETS: usize = 512;
/// Bytes of one record: the match hash (two words), start ms, file index, line.
const RECORD: usize = 40;

fn internal_err(e: impl std::fmt::Display) -> IngestError {
    IngestError::Internal {
        path: "<staging>".into(),
        reason: e.to_string(),
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> IngestError + '_ {
    move |e| IngestError::Internal {
        path: path.to_path_buf(),
        reason: format!("match start log: {e}"),
    }
}

fn show_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
    )
}

fn match_hash(m: &str) -> [u64; 2] {
    let h = xxh3_128(m.as_bytes());
    [h as u64, (h >> 64) as u64]
}

/// The columns the check reads from a staged batch.
struct Cols<'a> {
    match_id: &'a StringArray,
    player: &'a StringArray,
    start: &'a TimestampMillisecondArray,
    line: &'a Int64Array,
    file_idx: &'a UInt32Array,
    record_rows: &'a UInt8Array,
}

impl<'a> Cols<'a> {
    fn of(batch: &'a RecordBatch) -> Result<Cols<'a>, IngestError> {
        let c = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| internal_err(format!("no column {name}")))
        };
        Ok(Cols {
            match_id: c(col::MATCH_ID)?.as_string::<i32>(),
            player: c(col::PLAYER_ID)?.as_string::<i32>(),
            start: c(col::START_TIME)?.as_primitive::<TimestampMillisecondType>(),
            line: c(col::SOURCE_LINE)?.as_primitive::<Int64Type>(),
            file_idx: c(internal::FILE_IDX)?.as_primitive::<UInt32Type>(),
            record_rows: c(internal::RECORD_ROWS)?.as_primitive::<UInt8Type>(),
        })
    }

    /// Where each run of rows of one match at one start begins, with the row count at the end.
    fn runs(&self) -> Vec<usize> {
        let n = self.match_id.len();
        let mut bounds = Vec::with_capacity(n / 4 + 2);
        bounds.push(0);
        for i in 1..n {
            if self.start.value(i) != self.start.value(i - 1)
                || self.match_id.value(i) != self.match_id.value(i - 1)
            {
                bounds.push(i);
            }
        }
        if n > 0 {
            bounds.push(n);
        }
        bounds
    }
}

/// One run of the log: a match, a start, and the input position of the run's first row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    hash: [u64; 2],
    start: i64,
    file: u64,
    line: i64,
}

impl Run {
    fn to_bytes(self) -> [u8; RECORD] {
        let mut b = [0_u8; RECORD];
        b[0..8].copy_from_slice(&self.hash[0].to_le_bytes());
        b[8..16].copy_from_slice(&self.hash[1].to_le_bytes());
        b[16..24].copy_from_slice(&self.start.to_le_bytes());
        b[24..32].copy_from_slice(&self.file.to_le_bytes());
        b[32..40].copy_from_slice(&self.line.to_le_bytes());
        b
    }

    fn from_bytes(b: &[u8]) -> Run {
        let word = |k: usize| {
            let mut w = [0_u8; 8];
            w.copy_from_slice(&b[k..k + 8]);
            w
        };
        Run {
            hash: [u64::from_le_bytes(word(0)), u64::from_le_bytes(word(8))],
            start: i64::from_le_bytes(word(16)),
            file: u64::from_le_bytes(word(24)),
            line: i64::from_le_bytes(word(32)),
        }
    }
}

/// Pass 1's log of match starts, in bucket files by match hash (see the module notes).
#[derive(Debug)]
pub struct StartLog {
    /// Each bucket's file and its writer.
    buckets: Vec<(PathBuf, BufWriter<File>)>,
}

impl StartLog {
    /// The number of buckets for `input_bytes` of (uncompressed, estimated) input: one per
    /// [`STARTS_BUCKET_BYTES`], a power of two between 16 and 512.
    #[must_use]
    pub fn buckets_for(input_bytes: u64) -> usize {
        let want = usize::try_from(input_bytes / STARTS_BUCKET_BYTES).unwrap_or(MAX_BUCKETS);
        want.next_power_of_two().clamp(MIN_BUCKETS, MAX_BUCKETS)
    }

    /// A log of `buckets` files in `dir` (created; it should be the run's scratch directory).
    pub fn create(dir: &Path, buckets: usize) -> Result<StartLog, IngestError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let buckets = (0..buckets.max(1))
            .map(|b| {
                let p = dir.join(format!("starts-{b:04}.bin"));
                let w = File::create(&p)
                    .map(|f| BufWriter::with_capacity(32 << 10, f))
                    .map_err(io_err(&p))?;
                Ok((p, w))
            })
            .collect::<Result<_, IngestError>>()?;
        Ok(StartLog { buckets })
    }

    /// Logs the runs of a staged batch (rows in input order).
    pub fn record(&mut self, batch: &RecordBatch) -> Result<(), IngestError> {
        let c = Cols::of(batch)?;
        let n_buckets = self.buckets.len() as u64;
        for w in c.runs().windows(2) {
            let i = w[0];
            let run = Run {
                hash: match_hash(c.match_id.value(i)),
                start: c.start.value(i),
                file: u64::from(c.file_idx.value(i)),
                line: (w[0]..w[1]).map(|k| c.line.value(k)).min().unwrap_or(0),
            };
            let (path, writer) =
                &mut self.buckets[usize::try_from(run.hash[1] % n_buckets).unwrap_or(0)];
            writer.write_all(&run.to_bytes()).map_err(io_err(path))?;
        }
        Ok(())
    }

    /// Reads the buckets back (one per core, in parallel) and returns the verdicts. The
    /// bucket files are removed.
    pub fn finish(self) -> Result<StartCheck, IngestError> {
        let mut paths = Vec::with_capacity(self.buckets.len());
        for (p, w) in self.buckets {
            w.into_inner().map_err(|e| io_err(&p)(e.into_error()))?;
            paths.push(p);
        }
        let bad: Vec<Vec<Verdict>> = paths
            .par_iter()
            .map(|p| {
                let runs = read_bucket(p)?;
                let _ = std::fs::remove_file(p);
                Ok(disagreements(runs))
            })
            .collect::<Result<_, IngestError>>()?;
        Ok(StartCheck {
            bad: bad.into_iter().flatten().collect(),
        })
    }
}

fn read_bucket(p: &Path) -> Result<Vec<Run>, IngestError> {
    let f = File::open(p).map_err(io_err(p))?;
    let len = f.metadata().map_err(io_err(p))?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    BufReader::new(f)
        .read_to_end(&mut bytes)
        .map_err(io_err(p))?;
    if bytes.len() % RECORD != 0 {
        return Err(internal_err(format!(
            "{}: {} bytes is not a whole number of records",
            p.display(),
            bytes.len()
        )));
    }
    Ok(bytes.chunks_exact(RECORD).map(Run::from_bytes).collect())
}

/// A refused (match hash, start) pair and its match's first start.
type Verdict = (([u64; 2], i64), i64);

/// The verdict on every run whose start is not its match's first (by file, then line).
fn disagreements(mut runs: Vec<Run>) -> Vec<Verdict> {
    runs.sort_unstable_by_key(|r| (r.hash, r.file, r.line));
    let mut out = Vec::new();
    for same in runs.chunk_by(|a, b| a.hash == b.hash) {
        let first = same[0].start;
        for r in &same[1..] {
            if r.start != first {
                out.push(((r.hash, r.start), first));
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The (match, start) pairs that disagree with their match's first start.
#[derive(Debug, Default)]
pub struct StartCheck {
    /// (match hash, start) -> the match's first start.
    bad: HashMap<([u64; 2], i64), i64>,
}

impl StartCheck {
    /// Whether every match kept one start.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bad.is_empty()
    }

    /// The days of the refused rows: a day finalised before the check may hold some only if it
    /// is one of these.
    #[must_use]
    pub fn days(&self) -> BTreeSet<i32> {
        self.bad.keys().map(|(_, s)| day_of(*s)).collect()
    }

    /// Returns `batch` without the rows whose match started at another time in an earlier row,
    /// and one quarantine entry per rejected source record.
    pub fn filter(&self, batch: RecordBatch) -> Result<(RecordBatch, Vec<QEntry>), IngestError> {
        if self.bad.is_empty() || batch.num_rows() == 0 {
            return Ok((batch, Vec::new()));
        }
        let c = Cols::of(&batch)?;
        let mut bad: Vec<(usize, i64)> = Vec::new();
        for w in c.runs().windows(2) {
            let key = (match_hash(c.match_id.value(w[0])), c.start.value(w[0]));
            if let Some(&first) = self.bad.get(&key) {
                bad.extend((w[0]..w[1]).map(|i| (i, first)));
            }
        }
        if bad.is_empty() {
            return Ok((batch, Vec::new()));
        }
        // A record that became several rows goes whole.
        let record = |i: usize| (c.file_idx.value(i), c.line.value(i));
        let bad_records: HashSet<(u32, i64)> = bad.iter().map(|(i, _)| record(*i)).collect();
        let bad_rows: HashSet<usize> = bad.iter().map(|(i, _)| *i).collect();
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|i| {
                let whole_record = c.record_rows.value(i) > 1 && bad_records.contains(&record(i));
                Some(!(bad_rows.contains(&i) || whole_record))
            })
            .collect();
        let mut seen: HashSet<(u32, i64)> = HashSet::new();
        let entries = bad
            .into_iter()
            .filter(|(i, _)| seen.insert(record(*i)))
            .map(|(i, first)| {
                let m = c.match_id.value(i);
                QEntry {
                    file_idx: c.file_idx.value(i),
                    line: u64::try_from(c.line.value(i)).unwrap_or_default(),
                    stage: "match",
                    field: Some("match: start time".into()),
                    reason: format!(
                        "match {m} starts at {} here but at {} in an earlier row; all rows of a match share its start",
                        show_ms(c.start.value(i)),
                        show_ms(first)
                    ),
                    match_id: Some(m.to_string()),
                    player_id: Some(c.player.value(i).to_string()),
                    raw: None,
                }
            })
            .collect();
        let kept = filter_record_batch(&batch, &keep).map_err(internal_err)?;
        Ok((kept, entries))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, new_null_array};
    use mm_lake::staging_schema;
    use proptest::prelude::*;

    use super::*;

    /// One staged row: match, player, start ms, file, line, rows of its record.
    type Row = (String, String, i64, u32, i64, u8);

    fn batch(rows: &[Row]) -> RecordBatch {
        let n = rows.len();
        let schema = staging_schema();
        let cols: Vec<ArrayRef> = schema
            .fields()
            .iter()
            .map(|f| -> ArrayRef {
                match f.name().as_str() {
                    col::MATCH_ID => Arc::new(StringArray::from_iter_values(
                        rows.iter().map(|r| r.0.as_str()),
                    )),
                    col::PLAYER_ID => Arc::new(StringArray::from_iter_values(
                        rows.iter().map(|r| r.1.as_str()),
                    )),
                    col::START_TIME => Arc::new(
                        TimestampMillisecondArray::from_iter_values(rows.iter().map(|r| r.2))
                            .with_data_type(f.data_type().clone()),
                    ),
                    internal::FILE_IDX => {
                        Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.3)))
                    }
                    col::SOURCE_LINE => {
                        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.4)))
                    }
                    internal::RECORD_ROWS => {
                        Arc::new(UInt8Array::from_iter_values(rows.iter().map(|r| r.5)))
                    }
                    _ => new_null_array(f.data_type(), n),
                }
            })
            .collect();
        RecordBatch::try_new(schema, cols).unwrap()
    }

    fn row(m: &str, p: &str, start: i64, file: u32, line: i64, rr: u8) -> Row {
        (m.into(), p.into(), start, file, line, rr)
    }

    fn players(b: &RecordBatch) -> Vec<String> {
        let p = b.column_by_name(col::PLAYER_ID).unwrap().as_string::<i32>();
        (0..b.num_rows()).map(|i| p.value(i).to_string()).collect()
    }

    /// Logs the batches in the given order, then filters each: (kept players, entries).
    fn check(buckets: usize, batches: &[Vec<Row>]) -> (Vec<Vec<String>>, Vec<QEntry>) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = StartLog::create(dir.path(), buckets).unwrap();
        for b in batches {
            log.record(&batch(b)).unwrap();
        }
        let verdicts = log.finish().unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the bucket files are removed"
        );
        let mut kept = Vec::new();
        let mut entries = Vec::new();
        for b in batches {
            let (k, q) = verdicts.filter(batch(b)).unwrap();
            kept.push(players(&k));
            entries.extend(q);
        }
        (kept, entries)
    }

    #[test]
    fn the_first_row_in_input_order_fixes_a_match_start() {
        // Batches in the order pass 1 hands them over: a chunk's later day can come first, so
        // the row of m1 at line 4 is logged before the one at line 2, which still fixes m1.
        let batches = vec![
            vec![row("m1", "d", 2000, 0, 4, 1), row("m2", "x", 9000, 0, 5, 1)],
            vec![row("m1", "a", 1000, 0, 2, 1), row("m1", "b", 1000, 0, 3, 1)],
            // A later file: m1 at its own start is kept, at another refused; a record of two
            // rows (a one-row-per-match source) goes whole, with one entry.
            vec![
                row("m1", "e", 1000, 1, 2, 1),
                row("m2", "f", 6000, 1, 3, 2),
                row("m2", "g", 6000, 1, 3, 2),
                row("m3", "h", 7000, 1, 4, 1),
            ],
        ];
        let (kept, q) = check(16, &batches);
        assert_eq!(kept, [vec!["x"], vec!["a", "b"], vec!["e", "h"]]);
        let at: Vec<(u32, u64)> = q.iter().map(|e| (e.file_idx, e.line)).collect();
        assert_eq!(at, [(0, 4), (1, 3)], "one entry per refused record");
        assert!(q[0].reason.contains("match m1 starts at 1970-01-01 00:00:02.000 UTC here but at 1970-01-01 00:00:01.000 UTC"), "{}", q[0].reason);
        assert_eq!(q[1].field.as_deref(), Some("match: start time"));
    }

    #[test]
    fn many_matches_over_every_bucket_keep_their_first_start() {
        let ids: Vec<String> = (0..20_000).map(|m| format!("match-{m}")).collect();
        let first: Vec<Row> = ids
            .iter()
            .enumerate()
            .map(|(k, m)| row(m, "p", k as i64, 0, k as i64, 1))
            .collect();
        // Every match again: even ones at their first start, odd ones a millisecond later.
        let again: Vec<Row> = ids
            .iter()
            .enumerate()
            .map(|(k, m)| row(m, "q", k as i64 + (k % 2) as i64, 1, k as i64, 1))
            .collect();
        let (kept, q) = check(64, &[first, again]);
        assert_eq!(kept[0].len(), ids.len());
        assert_eq!(kept[1].len(), ids.len() / 2);
        assert_eq!(q.len(), ids.len() / 2);
        assert!(q.iter().all(|e| e.file_idx == 1 && e.line % 2 == 1));
    }

    #[test]
    fn the_bucket_count_follows_the_input_size() {
        assert_eq!(StartLog::buckets_for(0), 16);
        assert_eq!(StartLog::buckets_for(20 * STARTS_BUCKET_BYTES), 32);
        assert_eq!(StartLog::buckets_for(5000 * STARTS_BUCKET_BYTES), 512);
    }

    /// Rows over two files and few matches and starts, with some two-row records; each file
    /// cut into chunks, each chunk into day batches handed over in a shuffled order.
    fn input() -> impl Strategy<Value = (Vec<Row>, Vec<Vec<Row>>, usize)> {
        let rec = (0..6_u8, 0..3_i64, 0..2_u32, prop::bool::weighted(0.2));
        (
            prop::collection::vec(rec, 1..120),
            prop::collection::vec(1..8_usize, 1..40),
            any::<u64>(),
            prop::sample::select(vec![1_usize, 2, 16]),
        )
            .prop_map(|(recs, cuts, seed, buckets)| {
                let mut rows: Vec<Row> = Vec::new();
                let mut lines = [0_i64; 2];
                for (k, (m, s, file, pair)) in recs.into_iter().enumerate() {
                    lines[file as usize] += 1;
                    let line = lines[file as usize];
                    let n: u8 = if pair { 2 } else { 1 };
                    for j in 0..n {
                        let player = format!("p{k}-{j}");
                        rows.push(row(
                            &format!("m{m}"),
                            &player,
                            s * 86_400_000,
                            file,
                            line,
                            n,
                        ));
                    }
                }
                // Files in order; records within a file in line order.
                rows.sort_by_key(|r| (r.3, r.4));
                let mut batches: Vec<Vec<Row>> = Vec::new();
                let mut rng = seed;
                let mut at = 0;
                let mut cut = cuts.iter().cycle();
                while at < rows.len() {
                    // A chunk ends at a record boundary and never spans two files.
                    let mut end = (at + cut.next().copied().unwrap_or(1)).min(rows.len());
                    while end < rows.len()
                        && (rows[end].3, rows[end].4) == (rows[end - 1].3, rows[end - 1].4)
                    {
                        end += 1;
                    }
                    if let Some(e) = (at..end).find(|&e| rows[e].3 != rows[at].3) {
                        end = e;
                    }
                    let mut days: Vec<Vec<Row>> = Vec::new();
                    for r in &rows[at..end] {
                        match days.iter_mut().find(|d| d[0].2 == r.2) {
                            Some(d) => d.push(r.clone()),
                            None => days.push(vec![r.clone()]),
                        }
                    }
                    // The day batches of a chunk in any order.
                    while !days.is_empty() {
                        rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        let k = usize::try_from((rng >> 33) % days.len() as u64).unwrap();
                        batches.push(days.swap_remove(k));
                    }
                    at = end;
                }
                (rows, batches, buckets)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Against the rule applied directly: walk every row in (file, line) order, the first
        /// row of a match fixes its start, and a record with a refused row goes whole.
        #[test]
        fn the_log_refuses_exactly_what_the_rule_refuses((rows, batches, buckets) in input()) {
            let mut first: std::collections::HashMap<&str, i64> = Default::default();
            let mut refused: BTreeSet<(u32, i64)> = BTreeSet::new();
            for r in &rows {
                let f = *first.entry(r.0.as_str()).or_insert(r.2);
                if f != r.2 {
                    refused.insert((r.3, r.4));
                }
            }
            let want_kept: BTreeSet<String> = rows
                .iter()
                .filter(|r| !refused.contains(&(r.3, r.4)))
                .map(|r| r.1.clone())
                .collect();

            let (kept, q) = check(buckets, &batches);
            let got_kept: BTreeSet<String> = kept.into_iter().flatten().collect();
            prop_assert_eq!(got_kept, want_kept);
            let got: Vec<(u32, i64)> = q.iter().map(|e| (e.file_idx, e.line as i64)).collect();
            let got_set: BTreeSet<(u32, i64)> = got.iter().copied().collect();
            prop_assert_eq!(got.len(), got_set.len(), "one entry per record");
            prop_assert_eq!(got_set, refused);
        }
    }
}
