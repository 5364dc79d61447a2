//! Pass 1: source records to staging batches by day, with row-level quarantine.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::TimestampMillisecondType;
use arrow_array::{Array, RecordBatch, StringArray, UInt32Array};
use arrow_schema::DataType;
use arrow_select::take::take_record_batch;
use csv::ByteRecord;
use mm_lake::schema::day_of;
use mm_lake::{PlayerRow, RowError, RowsBuilder};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::IngestError;
use crate::adapters::{CsvAdapter, Reject};
use crate::canonical::CanonMap;
use crate::source::Chunk;

/// A quarantined record (or, from pass 2, lake row) before it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct QEntry {
    pub file_idx: u32,
    pub line: u64,
    pub stage: &'static str,
    pub field: Option<String>,
    pub reason: String,
    pub match_id: Option<String>,
    pub player_id: Option<String>,
    pub raw: Option<String>,
}

impl QEntry {
    /// The key under which the report groups this entry.
    pub fn category(&self) -> String {
        match (&self.field, self.stage) {
            (Some(f), "row") => format!("bad {f}"),
            (None, "row") => self
                .reason
                .split(':')
                .next()
                .unwrap_or_default()
                .to_string(),
            _ => self.field.clone().unwrap_or_else(|| "match".into()),
        }
    }
}

/// What pass 1 made of one chunk.
#[derive(Debug, Default)]
pub struct Parsed {
    pub days: Vec<(i32, RecordBatch)>,
    pub quarantine: Vec<QEntry>,
    pub read: u64,
    pub skipped: BTreeMap<&'static str, u64>,
}

/// Per-file context of pass 1.
#[derive(Debug)]
pub struct FileCtx<'a> {
    pub file_idx: u32,
    pub name: &'a str,
    pub header_len: usize,
    pub adapter: Option<&'a dyn CsvAdapter>,
    pub default_mode: &'a str,
}

/// The rows of one chunk, in one pre-sized builder, split into days when finished.
#[derive(Debug)]
struct ChunkRows {
    rows: RowsBuilder,
}

impl ChunkRows {
    /// Room for `records` records of `per_record` rows from `bytes` bytes of input. Ids are
    /// short: 24 bytes a row covers them with room to spare (a longer id grows the buffer once),
    /// and a tight reservation keeps the heap, and so the resident memory, small.
    fn new(records: usize, per_record: usize, bytes: usize) -> ChunkRows {
        let rows = records * per_record + 1;
        ChunkRows {
            rows: RowsBuilder::with_capacities(rows, (rows * 24).min(bytes * per_record + 64)),
        }
    }

    fn push(&mut self, row: &PlayerRow<'_>, ctx: &FileCtx<'_>, line: u64, rows_in_record: u8) {
        self.rows
            .push(row, ctx.name, line, ctx.file_idx, rows_in_record);
    }

    /// The rows by day.
    fn finish(mut self) -> Result<Vec<(i32, RecordBatch)>, IngestError> {
        split_days(self.rows.finish())
    }
}

/// A batch's rows by day: zero-copy slices when each day's rows are contiguous (time-ordered
/// input), gathered copies otherwise.
pub fn split_days(batch: RecordBatch) -> Result<Vec<(i32, RecordBatch)>, IngestError> {
    let n = batch.num_rows();
    if n == 0 {
        return Ok(Vec::new());
    }
    let start = batch
        .column_by_name(mm_lake::schema::col::START_TIME)
        .map(|c| c.as_primitive::<TimestampMillisecondType>().clone())
        .ok_or_else(|| IngestError::Internal {
            path: "<chunk>".into(),
            reason: "no start_time column".into(),
        })?;
    let days: Vec<i32> = (0..n).map(|i| day_of(start.value(i))).collect();
    let mut runs: Vec<(i32, usize, usize)> = Vec::new();
    for (i, d) in days.iter().enumerate() {
        match runs.last_mut() {
            Some((rd, _, len)) if rd == d => *len += 1,
            _ => runs.push((*d, i, 1)),
        }
    }
    let mut distinct: Vec<i32> = runs.iter().map(|r| r.0).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() == runs.len() {
        return Ok(runs
            .into_iter()
            .map(|(d, off, len)| (d, batch.slice(off, len)))
            .collect());
    }
    let mut out = Vec::with_capacity(distinct.len());
    for d in distinct {
        let idx: UInt32Array = (0..n).filter(|&i| days[i] == d).map(|i| i as u32).collect();
        let part = take_record_batch(&batch, &idx).map_err(|e| IngestError::Internal {
            path: "<chunk>".into(),
            reason: e.to_string(),
        })?;
        out.push((d, part));
    }
    Ok(out)
}

fn render_record(rec: &ByteRecord) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let _ = w.write_byte_record(rec);
    let bytes = w.into_inner().unwrap_or_default();
    String::from_utf8_lossy(bytes.strip_suffix(b"\n").unwrap_or(&bytes)).into_owned()
}

fn row_q(ctx: &FileCtx<'_>, line: u64, e: RowError, raw: String) -> QEntry {
    QEntry {
        file_idx: ctx.file_idx,
        line,
        stage: "row",
        field: e.field,
        reason: e.reason,
        match_id: None,
        player_id: None,
        raw: Some(raw),
    }
}

/// Parses one CSV chunk with the file's adapter: canonical chunks try the columnar fast path
/// first ([`crate::columnar`]), and any chunk it declines goes record by record.
pub fn parse_csv_chunk(
    ctx: &FileCtx<'_>,
    chunk: &Chunk,
    path: &Path,
) -> Result<Parsed, IngestError> {
    let adapter = ctx
        .adapter
        .ok_or_else(|| IngestError::input(path, "internal: CSV chunk without an adapter"))?;
    if let Some((map, mode)) = adapter.canonical() {
        let data = chunk.data();
        let fast = crate::columnar::decode_chunk(
            map,
            ctx.header_len,
            mode,
            data,
            chunk.first_line,
            ctx.name,
            ctx.file_idx,
        );
        if let Some(batch) = fast {
            return Ok(Parsed {
                read: batch.num_rows() as u64,
                days: split_days(batch)?,
                ..Parsed::default()
            });
        }
    }
    parse_csv_records(ctx, chunk, path)
}

/// Parses one CSV chunk record by record with the file's adapter: the exact path, which
/// quarantines each bad record with its reason.
pub(crate) fn parse_csv_records(
    ctx: &FileCtx<'_>,
    chunk: &Chunk,
    path: &Path,
) -> Result<Parsed, IngestError> {
    let adapter = ctx
        .adapter
        .ok_or_else(|| IngestError::input(path, "internal: CSV chunk without an adapter"))?;
    let data = chunk.data();
    let per_record = adapter.rows_per_record();
    let lines = memchr::memchr_iter(b'\n', data).count() + 1;
    let mut out = Parsed::default();
    let mut days = ChunkRows::new(lines, usize::from(per_record), data.len());
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(data);
    let mut rec = ByteRecord::new();
    // A record with the wrong number of fields, held back one step: if it is the file's last
    // record and the file does not end in a newline, the file is truncated.
    let mut held: Option<QEntry> = None;
    // Physical line of the current record: newlines counted up to its first byte (the csv
    // crate's own line count skips newlines inside quoted fields).
    let (mut at_byte, mut at_line) = (0_usize, chunk.first_line);
    loop {
        let more = rdr.read_byte_record(&mut rec).map_err(|e| {
            IngestError::input(
                path,
                format!("CSV error near line {}: {e}", chunk.first_line),
            )
        })?;
        if !more {
            break;
        }
        if let Some(q) = held.take() {
            out.quarantine.push(q);
        }
        let mut begin = rec
            .position()
            .map_or(at_byte, |p| usize::try_from(p.byte()).unwrap_or(at_byte))
            .clamp(at_byte, data.len());
        // After a CRLF the reported start sits before the '\n'; no record starts with a line break.
        while matches!(data.get(begin), Some(b'\r' | b'\n')) {
            begin += 1;
        }
        at_line += memchr::memchr_iter(b'\n', &data[at_byte..begin]).count() as u64;
        at_byte = begin;
        let line = at_line;
        out.read += 1;
        if rec.len() != ctx.header_len {
            let e = RowError::record(format!(
                "wrong number of fields: expected {}, found {}",
                ctx.header_len,
                rec.len()
            ));
            held = Some(row_q(ctx, line, e, render_record(&rec)));
            continue;
        }
        let mut emitted = 0;
        let res = adapter.convert(&rec, &mut |row: &PlayerRow<'_>| {
            days.push(row, ctx, line, per_record);
            emitted += 1;
        });
        match res {
            Ok(()) => debug_assert_eq!(emitted, per_record),
            Err(Reject::Bad(e)) => out
                .quarantine
                .push(row_q(ctx, line, e, render_record(&rec))),
            Err(Reject::Skip(why)) => *out.skipped.entry(why).or_default() += 1,
        }
    }
    if let Some(q) = held {
        if chunk.unterminated() {
            return Err(IngestError::input(
                path,
                format!(
                    "file is truncated: the last record (line {}) is cut off: {}",
                    q.line, q.reason
                ),
            ));
        }
        out.quarantine.push(q);
    }
    out.days = days.finish()?;
    Ok(out)
}

fn json_text(v: &serde_json::Value) -> Option<Cow<'_, str>> {
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(Cow::Borrowed(s.as_str())),
        serde_json::Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        other => Some(Cow::Owned(other.to_string())),
    }
}

/// Parses one chunk of canonical JSON lines (one object per line).
pub fn parse_jsonl_chunk(
    ctx: &FileCtx<'_>,
    chunk: &Chunk,
    path: &Path,
) -> Result<Parsed, IngestError> {
    let data = chunk.data();
    let lines = memchr::memchr_iter(b'\n', data).count() + 1;
    let mut out = Parsed::default();
    let mut days = ChunkRows::new(lines, 1, data.len());
    let mut cache: Option<(Vec<String>, Result<CanonMap, String>)> = None;
    let pieces: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    let n = pieces.len();
    for (i, piece) in pieces.into_iter().enumerate() {
        let line = chunk.first_line + i as u64;
        let text = piece.trim_ascii();
        if text.is_empty() {
            continue;
        }
        out.read += 1;
        let raw = || String::from_utf8_lossy(text).into_owned();
        let obj = match serde_json::from_slice::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(m)) => m,
            Ok(_) => {
                out.quarantine.push(row_q(
                    ctx,
                    line,
                    RowError::record("not a JSON object"),
                    raw(),
                ));
                continue;
            }
            Err(e) => {
                if i + 1 == n && chunk.unterminated() {
                    return Err(IngestError::input(
                        path,
                        format!("file is truncated: the last line ({line}) is cut off: {e}"),
                    ));
                }
                out.quarantine.push(row_q(
                    ctx,
                    line,
                    RowError::record(format!("invalid JSON: {e}")),
                    raw(),
                ));
                continue;
            }
        };
        let keys_match = cache.as_ref().is_some_and(|(k, _)| {
            k.len() == obj.len() && k.iter().zip(obj.keys()).all(|(a, b)| a == b)
        });
        if !keys_match {
            let keys: Vec<String> = obj.keys().cloned().collect();
            let map = CanonMap::from_header(&keys);
            cache = Some((keys, map));
        }
        let Some((_, map)) = &cache else { continue };
        let map = match map {
            Ok(m) => m,
            Err(msg) => {
                out.quarantine
                    .push(row_q(ctx, line, RowError::record(msg.clone()), raw()));
                continue;
            }
        };
        let vals: Vec<Option<Cow<'_, str>>> = obj.values().map(json_text).collect();
        let mut row = match map.row(
            |k| vals.get(k).and_then(|v| v.as_deref()).map(str::as_bytes),
            ctx.default_mode,
        ) {
            Ok(r) => r,
            Err(e) => {
                out.quarantine.push(row_q(ctx, line, e, raw()));
                continue;
            }
        };
        let values: Vec<&serde_json::Value> = obj.values().collect();
        let mut extra = match map.get(crate::canonical::C::Extra).map(|k| values[k]) {
            Some(serde_json::Value::Object(m)) => m.clone(),
            Some(serde_json::Value::Null) | None => serde_json::Map::new(),
            Some(_) => {
                out.quarantine.push(row_q(
                    ctx,
                    line,
                    RowError::field("extra", "is not a JSON object"),
                    raw(),
                ));
                continue;
            }
        };
        for (k, name) in &map.extras {
            if !values[*k].is_null() {
                extra.insert(name.clone(), values[*k].clone());
            }
        }
        if !extra.is_empty() {
            row.extra = Some(serde_json::Value::Object(extra).to_string());
        }
        days.push(&row, ctx, line, 1);
    }
    out.days = days.finish()?;
    Ok(out)
}

/// Timestamps as RFC 3339 text in UTC, whatever their unit or time zone (the instant is stored
/// in UTC either way), without needing a time-zone database.
fn timestamps_as_text(
    c: &arrow_array::ArrayRef,
    unit: arrow_schema::TimeUnit,
) -> Result<StringArray, arrow_schema::ArrowError> {
    use arrow_schema::TimeUnit;
    let raw = arrow_cast::cast(c, &DataType::Int64)?;
    let raw = raw.as_primitive::<arrow_array::types::Int64Type>();
    let to_ms = |v: i64| match unit {
        TimeUnit::Second => v.saturating_mul(1000),
        TimeUnit::Millisecond => v,
        TimeUnit::Microsecond => v.div_euclid(1000),
        TimeUnit::Nanosecond => v.div_euclid(1_000_000),
    };
    Ok(raw
        .iter()
        .map(|v| {
            v.and_then(|v| chrono::DateTime::from_timestamp_millis(to_ms(v)))
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        })
        .collect())
}

/// Reads a canonical Parquet file batch by batch; `line` is the 1-based row number.
pub fn parse_parquet(
    ctx: &FileCtx<'_>,
    path: &Path,
    sink: &mut dyn FnMut(Parsed) -> Result<(), IngestError>,
    progress: &dyn Fn(u64),
) -> Result<(), IngestError> {
    let file =
        File::open(path).map_err(|e| IngestError::input(path, format!("cannot open: {e}")))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        IngestError::input(
            path,
            format!("not a readable Parquet file (truncated or corrupt?): {e}"),
        )
    })?;
    let names: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let map = CanonMap::from_header(&names).map_err(|e| IngestError::input(path, e))?;
    let total_rows = builder.metadata().file_metadata().num_rows().max(1) as u64;
    let file_bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let reader = builder
        .with_batch_size(64 * 1024)
        .build()
        .map_err(|e| IngestError::input(path, format!("cannot read Parquet: {e}")))?;
    let mut row0 = 0_u64;
    for batch in reader {
        let batch = batch.map_err(|e| {
            IngestError::input(path, format!("corrupt or truncated Parquet data: {e}"))
        })?;
        let mut cols: Vec<StringArray> = Vec::with_capacity(batch.num_columns());
        for (k, c) in batch.columns().iter().enumerate() {
            if let DataType::Timestamp(unit, _) = c.data_type() {
                cols.push(timestamps_as_text(c, *unit).map_err(|e| {
                    IngestError::input(path, format!("column '{}': {e}", names[k]))
                })?);
                continue;
            }
            let s = arrow_cast::cast(c, &DataType::Utf8).map_err(|e| {
                IngestError::input(
                    path,
                    format!("column '{}' cannot be read as text: {e}", names[k]),
                )
            })?;
            let s = s
                .as_any()
                .downcast_ref::<StringArray>()
                .cloned()
                .ok_or_else(|| {
                    IngestError::input(path, format!("column '{}' did not cast to text", names[k]))
                })?;
            cols.push(s);
        }
        let mut out = Parsed::default();
        let text_bytes: usize = cols.iter().map(|c| c.values().len()).sum();
        let mut days = ChunkRows::new(batch.num_rows(), 1, text_bytes);
        for r in 0..batch.num_rows() {
            let line = row0 + r as u64 + 1;
            out.read += 1;
            let get = |k: usize| (!cols[k].is_null(r)).then(|| cols[k].value(r).as_bytes());
            let converted = map.row(get, ctx.default_mode).and_then(|mut row| {
                if !map.extras.is_empty() || map.get(crate::canonical::C::Extra).is_some() {
                    row.extra = map.extra_from_text(get)?;
                }
                Ok(row)
            });
            match converted {
                Ok(row) => days.push(&row, ctx, line, 1),
                Err(e) => {
                    let raw = (0..cols.len())
                        .map(|k| {
                            format!(
                                "{}={}",
                                names[k],
                                get(k).map(String::from_utf8_lossy).unwrap_or_default()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(",");
                    out.quarantine.push(row_q(ctx, line, e, raw));
                }
            }
        }
        row0 += batch.num_rows() as u64;
        out.days = days.finish()?;
        progress(file_bytes * batch.num_rows() as u64 / total_rows);
        sink(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use arrow_array::types::Int64Type;
    use arrow_array::{ArrayRef, Int64Array, TimestampMillisecondArray};

    use super::*;

    const DAY: i64 = 86_400_000;

    /// Rows at the given days (ms at noon), with their position in column `k`.
    fn batch(days: &[i64]) -> RecordBatch {
        let start: ArrayRef = Arc::new(TimestampMillisecondArray::from(
            days.iter().map(|d| d * DAY + DAY / 2).collect::<Vec<_>>(),
        ));
        let k: ArrayRef = Arc::new(Int64Array::from((0..days.len() as i64).collect::<Vec<_>>()));
        RecordBatch::try_from_iter([(mm_lake::schema::col::START_TIME, start), ("k", k)]).unwrap()
    }

    fn positions(b: &RecordBatch) -> Vec<i64> {
        let k = b.column_by_name("k").unwrap().as_primitive::<Int64Type>();
        k.values().to_vec()
    }

    /// Time-ordered rows: one zero-copy slice per day (the slice's values are the batch's own
    /// buffer, at the day's first row).
    #[test]
    fn contiguous_days_are_slices_of_the_batch() {
        let b = batch(&[3, 3, 4, 4, 4, 6]);
        let parts = split_days(b.clone()).unwrap();
        let days: Vec<i32> = parts.iter().map(|p| p.0).collect();
        assert_eq!(days, [3, 4, 6]);
        let rows: Vec<Vec<i64>> = parts.iter().map(|p| positions(&p.1)).collect();
        assert_eq!(rows, [vec![0, 1], vec![2, 3, 4], vec![5]]);
        let base = b.column_by_name("k").unwrap().to_data().buffers()[0].as_ptr();
        for (p, first) in parts.iter().zip([0usize, 2, 5]) {
            let data = p.1.column_by_name("k").unwrap().to_data();
            let at = data.buffers()[0].as_ptr().wrapping_add(8 * data.offset());
            assert_eq!(at, base.wrapping_add(8 * first), "day {} is a copy", p.0);
        }
    }

    /// A day that comes back later in the batch: each day once, its rows in batch order.
    #[test]
    fn interleaved_days_are_gathered_once_each() {
        let parts = split_days(batch(&[5, 2, 5, 5, 2, 9])).unwrap();
        let got: Vec<(i32, Vec<i64>)> = parts.iter().map(|p| (p.0, positions(&p.1))).collect();
        assert_eq!(got, [(2, vec![1, 4]), (5, vec![0, 2, 3]), (9, vec![5])]);
        assert!(split_days(batch(&[])).unwrap().is_empty());
    }

    /// A quarantined record's raw text is the record as CSV: fields that need it quoted, quotes
    /// doubled, no line terminator.
    #[test]
    fn a_record_renders_as_its_csv_line() {
        let rec = ByteRecord::from(vec!["m1", "a,b", "say \"hi\"", ""]);
        assert_eq!(render_record(&rec), r#"m1,"a,b","say ""hi""","#);
    }

    /// The report's group of an entry: a bad field by name, a record-level reason up to its
    /// first colon, a match rule by its own name.
    #[test]
    fn entries_group_by_field_reason_or_rule() {
        let q = |stage: &'static str, field: Option<&str>, reason: &str| QEntry {
            file_idx: 0,
            line: 1,
            stage,
            field: field.map(str::to_string),
            reason: reason.into(),
            match_id: None,
            player_id: None,
            raw: None,
        };
        assert_eq!(
            q("row", Some("kills"), "not a number: x").category(),
            "bad kills"
        );
        assert_eq!(
            q("row", None, "invalid JSON: EOF at 1").category(),
            "invalid JSON"
        );
        assert_eq!(
            q("row", None, "not a JSON object").category(),
            "not a JSON object"
        );
        assert_eq!(
            q("match", Some("match: one team"), "only team 1").category(),
            "match: one team"
        );
        assert_eq!(q("match", None, "no rule").category(), "match");
    }
}
