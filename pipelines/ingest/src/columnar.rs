//! The fast path of canonical CSV: a chunk's fields are located first and then converted column
//! by column, with column-wide checks, instead of record by record.
//!
//! Fields are located by one of two means. A chunk without a quote character (the common case)
//! is cut at its commas and line feeds by [`Split`], one vectorised scan. A chunk with quotes is
//! decoded by `arrow-csv` into text columns ([`Decoded`]). Either way the conversions that follow
//! are the same code.
//!
//! It is optimistic. It returns `None`, and the caller parses the chunk with the exact
//! record-by-record path of [`crate::parse`], whenever the chunk holds anything that path might
//! treat specially: a value that fails to parse or breaks a row rule, a field with surrounding
//! blanks, a record with the wrong number of fields, a blank line or a line break inside a
//! quoted field (line numbers would no longer follow from record positions), unknown columns
//! (the `extra` object), invalid UTF-8, or a cut-off last record. So the fast path never
//! quarantines anything and never decides a row the exact path would decide differently: on the
//! chunks it accepts, its rows are the exact path's rows, value for value (the tests compare the
//! two on random chunks, clean and damaged, and the two means of locating fields with each
//! other).
//!
//! Every value is read by the same [`crate::fields`] functions as the exact path, except the
//! integer counts (`team`, `kills`, ...), which [`count`] reads: it accepts up to nine ASCII
//! digits with ASCII blanks around them, a subset of what [`crate::fields::int`] accepts, with
//! the same value, and anything else makes the chunk fall back.

use std::sync::Arc;

use arrow_array::builder::BooleanBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, TimestampMillisecondType};
use arrow_array::{
    Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, PrimitiveArray,
    RecordBatch, StringArray, UInt8Array, UInt32Array, new_null_array,
};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Schema};
use mm_lake::rows::{MAX_START_MS, MIN_START_MS, internal};
use mm_lake::schema::{Outcome, col, timestamp_type};
use mm_lake::staging_schema;

use crate::canonical::{C, CanonMap};
use crate::fields;

/// The fields of a chunk, before conversion.
trait Fields {
    /// The field of column `c` (its position in the header) in record `r`; `None` when empty.
    fn get(&self, c: usize, r: usize) -> Option<&str>;
}

/// The fields of a chunk without quote characters, located by one scan for commas and line
/// feeds: field `c` of record `r` is `data[pos[k]..pos[k + 1] - 1]` with `k = r * (width + 1) + c`.
struct Split<'a> {
    data: &'a str,
    pos: Vec<u32>,
    stride: usize,
}

impl<'a> Split<'a> {
    /// `None` if the chunk is not UTF-8, too large for 32-bit offsets, or a record (a line) does
    /// not have `width` fields. `data` holds no quote character, every carriage return in it
    /// starts a CRLF, and it ends with a line feed; it holds `lines` line feeds.
    fn new(data: &'a [u8], width: usize, lines: usize) -> Option<Split<'a>> {
        if data.len() >= i32::MAX as usize || width == 0 {
            return None;
        }
        let data = std::str::from_utf8(data).ok()?;
        let bytes = data.as_bytes();
        let mut pos = Vec::with_capacity(lines * (width + 1) + 1);
        pos.push(0_u32);
        let mut fields = 1;
        let mut line_start = 0;
        let mut widths_ok = true;
        delimiters(bytes, |i| {
            if bytes[i] == b',' {
                pos.push(i as u32 + 1);
                fields += 1;
                return;
            }
            widths_ok &= fields == width;
            // The last field ends before the line feed, or before the CR of a CRLF.
            let end = if i > line_start && bytes[i - 1] == b'\r' {
                i
            } else {
                i + 1
            };
            pos.push(end as u32);
            fields = 1;
            line_start = i + 1;
            if line_start < bytes.len() {
                pos.push(line_start as u32);
            }
        });
        if !widths_ok {
            return None;
        }
        (line_start == bytes.len()).then_some(Split {
            data,
            pos,
            stride: width + 1,
        })
    }

    fn rows(&self) -> usize {
        self.pos.len() / self.stride
    }
}

/// Calls `f` with the position of every comma and line feed in `bytes`, in order. Eight bytes
/// at a time (SWAR): the branch per delimiter is taken from a bit mask, not from each byte,
/// which on the benchmark's CSV is twice as fast as a byte loop or `memchr2`.
fn delimiters(bytes: &[u8], mut f: impl FnMut(usize)) {
    const LOW: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // The high bit of each byte of `x` that equals `c` (exact: no carry crosses a byte).
    let equal = |x: u64, c: u8| {
        let y = x ^ (LOW * u64::from(c));
        !(((y & !HIGH).wrapping_add(!HIGH)) | y) & HIGH
    };
    let mut words = bytes.chunks_exact(8);
    let mut base = 0;
    for w in &mut words {
        let x = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        let mut m = equal(x, b',') | equal(x, b'\n');
        while m != 0 {
            f(base + (m.trailing_zeros() / 8) as usize);
            m &= m - 1;
        }
        base += 8;
    }
    for (j, &b) in words.remainder().iter().enumerate() {
        if b == b',' || b == b'\n' {
            f(base + j);
        }
    }
}

impl Fields for Split<'_> {
    #[inline]
    fn get(&self, c: usize, r: usize) -> Option<&str> {
        let k = r * self.stride + c;
        let (a, b) = (self.pos[k] as usize, self.pos[k + 1] as usize - 1);
        (b > a).then(|| &self.data[a..b])
    }
}

/// The fields of a chunk with quotes, decoded by `arrow-csv` as text columns.
struct Decoded {
    cols: Vec<StringArray>,
}

impl Decoded {
    /// `None` if arrow refuses the chunk or finds other than `lines` records in it (a blank line).
    fn new(data: &[u8], width: usize, lines: usize) -> Option<Decoded> {
        let schema = Arc::new(Schema::new(
            (0..width)
                .map(|i| Field::new(format!("c{i}"), DataType::Utf8, true))
                .collect::<Vec<_>>(),
        ));
        let mut decoder = arrow_csv::ReaderBuilder::new(schema)
            .with_header(false)
            .with_batch_size(lines + 1)
            .build_decoder();
        let mut at = 0;
        while at < data.len() {
            let n = decoder.decode(&data[at..]).ok()?;
            if n == 0 {
                break;
            }
            at += n;
        }
        decoder.decode(&[]).ok()?;
        let batch = decoder.flush().ok()??;
        if at != data.len() || batch.num_rows() != lines {
            return None;
        }
        Some(Decoded {
            cols: batch
                .columns()
                .iter()
                .map(|a| a.as_string().clone())
                .collect(),
        })
    }
}

impl Fields for Decoded {
    #[inline]
    fn get(&self, c: usize, r: usize) -> Option<&str> {
        let a = &self.cols[c];
        a.is_valid(r).then(|| a.value(r)).filter(|s| !s.is_empty())
    }
}

/// The count columns and their lake names: not negative, read by [`count`].
const COUNTS: [(C, &str); 5] = [
    (C::Kills, col::KILLS),
    (C::Deaths, col::DEATHS),
    (C::DeathsByEnemy, col::DEATHS_BY_ENEMY),
    (C::SelfKills, col::SELF_KILLS),
    (C::Assists, col::ASSISTS),
];

/// A text value as the exact path reads it (`present`, then UTF-8 and trimmed): `Some(None)` for
/// a blank, `Some(Some(s))` when the stored value `s` is the field as written, `None` when the
/// value has blanks around it (the exact path would store it trimmed: fall back).
#[inline]
fn clean_text(s: &str) -> Option<Option<&str>> {
    let solid = |b: u8| b.is_ascii_graphic();
    if let (Some(&a), Some(&z)) = (s.as_bytes().first(), s.as_bytes().last())
        && solid(a)
        && solid(z)
    {
        return Some(Some(s)); // the common case: no blank at either end
    }
    if fields::present(Some(s.as_bytes())).is_none() {
        return Some(None);
    }
    (s.trim().len() == s.len()).then_some(Some(s))
}

/// A text column whose every value is stored as written (no blank-only values, no blanks
/// around values); `required` refuses empty values. `None` otherwise.
fn text_column(f: &impl Fields, c: usize, n: usize, required: bool) -> Option<ArrayRef> {
    let mut values = Vec::with_capacity(n * 8);
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0_i32);
    let mut nulls = NullBufferBuilder::new(n);
    for r in 0..n {
        match f.get(c, r) {
            Some(v) => {
                if clean_text(v)? != Some(v) {
                    return None;
                }
                values.extend_from_slice(v.as_bytes());
                nulls.append_non_null();
            }
            None if required => return None,
            None => nulls.append_null(),
        }
        offsets.push(i32::try_from(values.len()).ok()?);
    }
    let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
    let a = StringArray::try_new(offsets, Buffer::from(values), nulls.finish()).ok()?;
    Some(Arc::new(a))
}

/// A count: up to nine ASCII digits with ASCII blanks around them. What
/// [`crate::fields::int`] reads the same way; `None` for anything else (the chunk falls back).
#[inline]
fn count(s: &str) -> Option<i32> {
    let d = s.as_bytes().trim_ascii();
    if d.is_empty() || d.len() > 9 {
        return None;
    }
    d.iter().try_fold(0_i32, |acc, &b| {
        b.is_ascii_digit().then(|| acc * 10 + i32::from(b - b'0'))
    })
}

/// A column of counts (see [`count`]); `required` refuses empty values.
fn count_column(f: &impl Fields, c: usize, n: usize, required: bool) -> Option<Int32Array> {
    let mut values = Vec::with_capacity(n);
    let mut nulls = NullBufferBuilder::new(n);
    for r in 0..n {
        match f.get(c, r) {
            Some(v) => {
                values.push(count(v)?);
                nulls.append_non_null();
            }
            None if required => return None,
            None => {
                values.push(0);
                nulls.append_null();
            }
        }
    }
    Some(Int32Array::new(values.into(), nulls.finish()))
}

/// Times in milliseconds by [`fields::time_ms`]; `required` refuses blanks.
fn time_column(
    f: &impl Fields,
    c: usize,
    n: usize,
    name: &str,
    required: bool,
) -> Option<Vec<Option<i64>>> {
    let mut out = Vec::with_capacity(n);
    for r in 0..n {
        let raw = f.get(c, r);
        // The common case, epoch seconds or milliseconds, as `fields::time_ms` reads it.
        if let Some(v) = raw.and_then(|s| fields::digits(s.as_bytes())) {
            out.push(Some(fields::epoch_ms(v as i64)));
            continue;
        }
        match raw.and_then(|s| fields::present(Some(s.as_bytes()))) {
            Some(b) => out.push(Some(fields::time_ms(name, b).ok()?)),
            None if required => return None,
            None => out.push(None),
        }
    }
    Some(out)
}

fn float_column(f: &impl Fields, c: usize, n: usize, name: &str) -> Option<Vec<Option<f64>>> {
    (0..n)
        .map(|r| fields::opt_f64(name, f.get(c, r).map(str::as_bytes)).ok())
        .collect()
}

fn bool_column(f: &impl Fields, c: usize, n: usize, name: &str) -> Option<Vec<Option<bool>>> {
    (0..n)
        .map(|r| fields::opt_bool(name, f.get(c, r).map(str::as_bytes)).ok())
        .collect()
}

/// Every line break in `data` ends a record: each carriage return starts a CRLF, and no line
/// feed sits inside a quoted field. With as many records as line feeds (no blank lines), record
/// `i` is then on line `first_line + i`. Also says whether `data` holds a quote character.
fn breaks_end_records(data: &[u8]) -> Option<bool> {
    if memchr::memchr_iter(b'\r', data).any(|i| data.get(i + 1) != Some(&b'\n')) {
        return None;
    }
    if memchr::memchr(b'"', data).is_none() {
        return Some(false);
    }
    let mut quoted = false;
    for i in memchr::memchr2_iter(b'"', b'\n', data) {
        if data[i] == b'"' {
            quoted = !quoted;
        } else if quoted {
            return None;
        }
    }
    Some(true)
}

/// The chunk's rows as one staging batch (see [`mm_lake::staging_schema`]), or `None` when the
/// exact path must decide (see the module notes). `data` starts at a record boundary; its
/// first record is on physical line `first_line`.
pub fn decode_chunk(
    map: &CanonMap,
    header_len: usize,
    default_mode: &str,
    data: &[u8],
    first_line: u64,
    source_name: &str,
    file_idx: u32,
) -> Option<RecordBatch> {
    if !map.extras.is_empty() || map.get(C::Extra).is_some() || data.last() != Some(&b'\n') {
        return None;
    }
    if C::ALL
        .iter()
        .any(|&c| map.get(c).is_some_and(|i| i >= header_len))
    {
        return None;
    }
    let quoted = breaks_end_records(data)?;
    let lines = memchr::memchr_iter(b'\n', data).count();
    let ctx = Ctx {
        map,
        default_mode,
        n: lines,
        first_line,
        source_name,
        file_idx,
    };
    if quoted {
        convert(&Decoded::new(data, header_len, lines)?, &ctx)
    } else {
        let split = Split::new(data, header_len, lines)?;
        if split.rows() != lines {
            return None;
        }
        convert(&split, &ctx)
    }
}

/// What [`convert`] needs besides the fields.
struct Ctx<'a> {
    map: &'a CanonMap,
    default_mode: &'a str,
    /// Records in the chunk.
    n: usize,
    first_line: u64,
    source_name: &'a str,
    file_idx: u32,
}

/// Converts and checks located fields into a staging batch; `None`: the exact path decides.
fn convert(f: &impl Fields, ctx: &Ctx<'_>) -> Option<RecordBatch> {
    let Ctx {
        map,
        default_mode,
        n,
        ..
    } = *ctx;

    // Required columns (a blank default mode is a row error of the exact path).
    fields::present(Some(default_mode.as_bytes()))?;
    let match_id = text_column(f, map.get(C::MatchId)?, n, true)?;
    let player_id = text_column(f, map.get(C::PlayerId)?, n, true)?;
    let start = time_column(f, map.get(C::StartTime)?, n, "start_time", true)?;
    if !start
        .iter()
        .flatten()
        .all(|s| (MIN_START_MS..MAX_START_MS).contains(s))
    {
        return None;
    }
    let team = count_column(f, map.get(C::Team)?, n, true)?;
    let mode = mode_column(f, map, default_mode, n)?;
    let team_score = match map.get(C::TeamScore) {
        Some(c) => Some(float_column(f, c, n, "team_score")?),
        None => None,
    };
    let outcome = outcome_column(f, map, n, team_score.as_deref())?;
    let end = match map.get(C::EndTime) {
        Some(c) => Some(time_column(f, c, n, "end_time", false)?),
        None => None,
    };
    if let Some(end) = &end
        && end
            .iter()
            .zip(&start)
            .any(|(e, s)| e.is_some_and(|e| Some(e) < *s))
    {
        return None;
    }
    let counts = count_columns(f, map, n)?;
    let floats = float_columns(f, map, n, team_score)?;

    let ts = timestamp_type();
    let times = |v: Vec<Option<i64>>| -> ArrayRef {
        Arc::new(PrimitiveArray::<TimestampMillisecondType>::from(v).with_data_type(ts.clone()))
    };
    let mut named: Vec<(&str, ArrayRef)> = vec![
        (col::MATCH_ID, match_id),
        (col::MODE, mode),
        (col::START_TIME, times(start)),
        (col::TEAM, Arc::new(team)),
        (col::PLAYER_ID, player_id),
        (col::OUTCOME, Arc::new(StringArray::from(outcome))),
    ];
    if let Some(end) = end {
        named.push((col::END_TIME, times(end)));
    }
    for (c, name) in [
        (C::PartyId, col::PARTY_ID),
        (C::TeamName, col::TEAM_NAME),
        (C::Role, col::ROLE),
        (C::InputDevice, col::INPUT_DEVICE),
        (C::Platform, col::PLATFORM),
        (C::Region, col::REGION),
    ] {
        if let Some(i) = map.get(c) {
            named.push((name, text_column(f, i, n, false)?));
        }
    }
    for (_, name, a) in counts {
        named.push((name, Arc::new(a)));
    }
    if let Some(c) = map.get(C::QuitEarly) {
        let mut b = BooleanBuilder::with_capacity(n);
        b.extend(bool_column(f, c, n, "quit_early")?);
        named.push((col::QUIT_EARLY, Arc::new(b.finish())));
    }
    named.extend(floats);
    push_source(&mut named, ctx);
    staging_batch(&named, n)
}

/// The mode column, blank or absent values as the default mode.
fn mode_column(f: &impl Fields, map: &CanonMap, default_mode: &str, n: usize) -> Option<ArrayRef> {
    Some(match map.get(C::Mode) {
        Some(c) => {
            let mut b = arrow_array::builder::StringBuilder::with_capacity(n, n * 8);
            for r in 0..n {
                match f.get(c, r).map(clean_text) {
                    None | Some(Some(None)) => b.append_value(default_mode),
                    Some(Some(Some(s))) => b.append_value(s),
                    Some(None) => return None,
                }
            }
            Arc::new(b.finish())
        }
        None => Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
            default_mode,
            n,
        ))),
    })
}

/// Outcome: the `outcome` column, else `won`, else pending on `team_score`.
fn outcome_column(
    f: &impl Fields,
    map: &CanonMap,
    n: usize,
    team_score: Option<&[Option<f64>]>,
) -> Option<Vec<Option<&'static str>>> {
    let outcome_col = map.get(C::Outcome);
    let won = match map.get(C::Won) {
        Some(c) => Some(bool_column(f, c, n, "won")?),
        None => None,
    };
    let mut outcome = Vec::with_capacity(n);
    for i in 0..n {
        let o = match outcome_col.and_then(|c| f.get(c, i)) {
            Some(s) if fields::present(Some(s.as_bytes())).is_some() => {
                Some(Outcome::parse(fields::text("outcome", s.as_bytes()).ok()?)?)
            }
            _ => match won.as_ref().and_then(|w| w[i]) {
                Some(true) => Some(Outcome::Win),
                Some(false) => Some(Outcome::Loss),
                None => None,
            },
        };
        if o.is_none() && team_score.is_none_or(|t| t[i].is_none()) {
            return None;
        }
        outcome.push(o.map(Outcome::as_str));
    }
    Some(outcome)
}

/// Counts (never negative: `count` reads digits only); deaths by enemies and self kills
/// within deaths.
fn count_columns(
    f: &impl Fields,
    map: &CanonMap,
    n: usize,
) -> Option<Vec<(C, &'static str, Int32Array)>> {
    let mut counts: Vec<(C, &str, Int32Array)> = Vec::new();
    for (c, name) in COUNTS {
        if let Some(i) = map.get(c) {
            counts.push((c, name, count_column(f, i, n, false)?));
        }
    }
    let counted = |c: C| counts.iter().find(|x| x.0 == c).map(|x| &x.2);
    if let Some(d) = counted(C::Deaths) {
        for c in [C::DeathsByEnemy, C::SelfKills] {
            if let Some(x) = counted(c)
                && x.iter()
                    .zip(d.iter())
                    .any(|(x, d)| matches!((x, d), (Some(x), Some(d)) if x > d))
            {
                return None;
            }
        }
    }
    Some(counts)
}

/// Numbers: finite (the parser refuses the rest), some not negative, coordinates on the globe;
/// `team_score` (already read) last.
fn float_columns(
    f: &impl Fields,
    map: &CanonMap,
    n: usize,
    team_score: Option<Vec<Option<f64>>>,
) -> Option<Vec<(&'static str, ArrayRef)>> {
    let range = |c: C| -> Option<(f64, f64)> {
        Some(match c {
            C::SecondsPlayed | C::PingMs => (0.0, f64::INFINITY),
            C::Lat => (-90.0, 90.0),
            C::Lon => (-180.0, 180.0),
            _ => return None,
        })
    };
    let mut floats: Vec<(&'static str, ArrayRef)> = Vec::new();
    for (c, name) in [
        (C::SecondsPlayed, col::SECONDS_PLAYED),
        (C::Score, col::SCORE),
        (C::Perf, col::PERF),
        (C::Lat, col::LAT),
        (C::Lon, col::LON),
        (C::PingMs, col::PING_MS),
        (C::Rating, col::RATING),
    ] {
        if let Some(i) = map.get(c) {
            let v = float_column(f, i, n, name)?;
            if let Some((lo, hi)) = range(c)
                && v.iter().flatten().any(|x| !(lo..=hi).contains(x))
            {
                return None;
            }
            floats.push((name, Arc::new(Float64Array::from(v))));
        }
    }
    if let Some(t) = team_score {
        floats.push((col::TEAM_SCORE, Arc::new(Float64Array::from(t))));
    }
    Some(floats)
}

/// Where each row came from: the file (a one-value dictionary), the line, the file's index
/// and the rows of its record (always one here).
fn push_source(named: &mut Vec<(&str, ArrayRef)>, ctx: &Ctx<'_>) {
    let n = ctx.n;
    let files = DictionaryArray::<Int32Type>::new(
        Int32Array::from(vec![0; n]),
        Arc::new(StringArray::from(vec![ctx.source_name])),
    );
    named.push((col::SOURCE_FILE, Arc::new(files)));
    named.push((
        col::SOURCE_LINE,
        Arc::new(Int64Array::from_iter_values(
            (0..n as i64).map(|i| ctx.first_line as i64 + i),
        )),
    ));
    named.push((
        internal::FILE_IDX,
        Arc::new(UInt32Array::from(vec![ctx.file_idx; n])),
    ));
    named.push((
        internal::RECORD_ROWS,
        Arc::new(UInt8Array::from(vec![1_u8; n])),
    ));
}

/// The staging schema's columns from `named`; an absent column is all null: a slice of one
/// all-null array per type, shared by every column of that type in every chunk (see
/// [`null_column`]).
fn staging_batch(named: &[(&str, ArrayRef)], n: usize) -> Option<RecordBatch> {
    let schema = staging_schema();
    let out: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .map(|f| {
            named
                .iter()
                .find(|(name, _)| *name == f.name())
                .map_or_else(|| null_column(f.data_type(), n), |(_, a)| a.clone())
        })
        .collect();
    RecordBatch::try_new(schema, out).ok()
}

/// An all-null array of type `t` and length `n`, sliced from one kept for the type (made
/// anew, twice as long, when a longer one is asked for). The staged chunks of a run share its
/// buffers instead of each holding zeroed ones of its own: on the 10M-row benchmark, whose
/// input has no value in several optional columns, those were 20 MB of the heap's peak
/// (heaptrack).
fn null_column(t: &DataType, n: usize) -> ArrayRef {
    static KEPT: std::sync::Mutex<Vec<ArrayRef>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut kept) = KEPT.lock() else {
        return new_null_array(t, n);
    };
    match kept.iter_mut().find(|a| a.data_type() == t) {
        Some(a) if a.len() >= n => a.slice(0, n),
        Some(a) => {
            *a = new_null_array(t, n.saturating_mul(2));
            a.slice(0, n)
        }
        None => {
            let a = new_null_array(t, n.saturating_mul(2).max(1024));
            let out = a.slice(0, n);
            kept.push(a);
            out
        }
    }
}

#[cfg(test)]
#[path = "columnar_tests.rs"]
mod tests;
