//! The snapshot as a Parquet file: its schema, and writing and reading it with parquet's own
//! column API, row groups read in parallel.

use std::path::Path;
use std::sync::Arc;

use parquet::basic::Compression;
use parquet::column::reader::ColumnReader;
use parquet::column::writer::ColumnWriter;
use parquet::data_type::ByteArray;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

use super::{NONE, PlayerState, ROW_GROUP, Snapshot, decode_outcome, outcome_code, slot};
use crate::error::{ArtifactError, Problem};

/// Which columns a snapshot file has: format 1 had no `first_seen_ms`, formats 1 and 2 no
/// `churned_gaps`; from format 5, `win_skill` when the team win model reads it; from format 7,
/// `win_mass` when the artifact updates the win skill after a match.
#[derive(Debug, Clone, Copy)]
struct Format {
    first_seen: bool,
    churned_gaps: bool,
    win_skill: bool,
    win_mass: bool,
}

/// The win-skill columns a snapshot is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WinColumns {
    /// The team win model reads raw skill.
    None,
    /// `win_skill`: the team win model reads it, and it stays the snapshot's between fits.
    Skill,
    /// `win_skill` and `win_mass`: it is also updated after each match (`skill.json`'s
    /// `win_update`).
    SkillAndMass,
}

impl WinColumns {
    /// The columns a snapshot with these flags has.
    #[must_use]
    pub fn of(win_skill: bool, win_mass: bool) -> WinColumns {
        match (win_skill, win_mass) {
            (true, true) => WinColumns::SkillAndMass,
            (true, false) => WinColumns::Skill,
            (false, _) => WinColumns::None,
        }
    }
}

const fn current(win: WinColumns) -> Format {
    Format {
        first_seen: true,
        churned_gaps: true,
        win_skill: !matches!(win, WinColumns::None),
        win_mass: matches!(win, WinColumns::SkillAndMass),
    }
}

/// The snapshot's columns in a format.
fn schema(history: usize, format: Format) -> String {
    let mut s = String::from(
        "message players {
  required binary player_id (UTF8);
  required double raw_skill;
  required double percentile;
  required int64 games;
  required int64 last_seen_ms;
  required int32 matches_8h;
  required int32 matches_1d;
  required int32 matches_1w;
  required int32 matches_1m;
  optional int64 before_recent_ms;
",
    );
    if format.first_seen {
        s.push_str("  optional int64 first_seen_ms;\n");
    }
    for k in 1..=history {
        s.push_str(&format!(
            "  optional int64 last{k}_start_ms;
  optional int32 last{k}_outcome;
  optional double last{k}_score_diff;
  optional double last{k}_perf_rank;
  optional boolean last{k}_blowout_loss;
"
        ));
    }
    if format.churned_gaps {
        s.push_str("  required int64 churned_gaps;\n");
    }
    if format.win_skill {
        s.push_str("  required double win_skill;\n");
    }
    if format.win_mass {
        s.push_str("  required double win_mass;\n");
    }
    s.push('}');
    s
}

/// Values and definition levels of an optional column (null = NaN or absent).
fn optional<T: Copy>(vals: impl Iterator<Item = Option<T>>) -> (Vec<T>, Vec<i16>) {
    let mut v = Vec::new();
    let mut d = Vec::new();
    for x in vals {
        match x {
            Some(x) => {
                v.push(x);
                d.push(1);
            }
            None => d.push(0),
        }
    }
    (v, d)
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Writes the players (sorted by id) as Parquet bytes (deterministic: same players, same
/// bytes), with the win-skill columns `win`.
///
/// # Errors
/// Parquet's, as text.
pub fn write_snapshot(
    history: usize,
    players: &[PlayerState],
    win: WinColumns,
) -> Result<Vec<u8>, String> {
    if let Some(w) = players
        .windows(2)
        .find(|w| w[0].player_id >= w[1].player_id)
    {
        return Err(format!(
            "players must be sorted by id, each once ({} before {})",
            w[0].player_id, w[1].player_id
        ));
    }
    let h = history;
    let schema = Arc::new(parse_message_type(&schema(h, current(win))).map_err(|e| e.to_string())?);
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                parquet::basic::ZstdLevel::try_new(1).map_err(|e| e.to_string())?,
            ))
            .set_max_row_group_row_count(Some(ROW_GROUP))
            .set_created_by("mm-artifact".to_string())
            .set_dictionary_enabled(false)
            .build(),
    );
    let mut buf = Vec::new();
    let mut w = SerializedFileWriter::new(&mut buf, schema, props).map_err(|e| e.to_string())?;
    for chunk in players.chunks(ROW_GROUP) {
        let mut rg = w.next_row_group().map_err(|e| e.to_string())?;
        let mut col = 0usize;
        while let Some(mut c) = rg.next_column().map_err(|e| e.to_string())? {
            write_column(c.untyped(), col, h, chunk).map_err(|e| e.to_string())?;
            c.close().map_err(|e| e.to_string())?;
            col += 1;
        }
        rg.close().map_err(|e| e.to_string())?;
    }
    w.close().map_err(|e| e.to_string())?;
    Ok(buf)
}

fn write_column(
    w: &mut ColumnWriter<'_>,
    col: usize,
    history: usize,
    rows: &[PlayerState],
) -> parquet::errors::Result<usize> {
    const FIXED: usize = 11;
    match (col, w) {
        (c, ColumnWriter::DoubleColumnWriter(w)) if c == FIXED + 5 * history + 2 => {
            let v: Vec<f64> = rows.iter().map(|p| p.win_mass).collect();
            w.write_batch(&v, None, None)
        }
        (c, ColumnWriter::DoubleColumnWriter(w)) if c == FIXED + 5 * history + 1 => {
            let v: Vec<f64> = rows.iter().map(|p| p.win_skill).collect();
            w.write_batch(&v, None, None)
        }
        (c, ColumnWriter::Int64ColumnWriter(w)) if c == FIXED + 5 * history => {
            let v: Vec<i64> = rows.iter().map(|p| p.churned_gaps as i64).collect();
            w.write_batch(&v, None, None)
        }
        (0, ColumnWriter::ByteArrayColumnWriter(w)) => {
            let v: Vec<ByteArray> = rows
                .iter()
                .map(|p| ByteArray::from(p.player_id.as_str()))
                .collect();
            w.write_batch(&v, None, None)
        }
        (1 | 2, ColumnWriter::DoubleColumnWriter(w)) => {
            let v: Vec<f64> = rows
                .iter()
                .map(|p| if col == 1 { p.raw_skill } else { p.percentile })
                .collect();
            w.write_batch(&v, None, None)
        }
        (3 | 4, ColumnWriter::Int64ColumnWriter(w)) => {
            let v: Vec<i64> = rows
                .iter()
                .map(|p| {
                    if col == 3 {
                        p.games as i64
                    } else {
                        p.last_seen_ms
                    }
                })
                .collect();
            w.write_batch(&v, None, None)
        }
        (5..=8, ColumnWriter::Int32ColumnWriter(w)) => {
            let v: Vec<i32> = rows
                .iter()
                .map(|p| p.window_counts[col - 5] as i32)
                .collect();
            w.write_batch(&v, None, None)
        }
        (9, ColumnWriter::Int64ColumnWriter(w)) => {
            let (v, d) = optional(rows.iter().map(|p| p.before_recent_ms));
            w.write_batch(&v, Some(&d), None)
        }
        (10, ColumnWriter::Int64ColumnWriter(w)) => {
            let (v, d) = optional(rows.iter().map(|p| p.first_seen_ms));
            w.write_batch(&v, Some(&d), None)
        }
        (c, w) => {
            let k = (c - FIXED) / 5 + 1;
            match ((c - FIXED) % 5, w) {
                (0, ColumnWriter::Int64ColumnWriter(w)) => {
                    let (v, d) = optional(rows.iter().map(|p| slot(p, k).map(|m| m.start_ms)));
                    w.write_batch(&v, Some(&d), None)
                }
                (1, ColumnWriter::Int32ColumnWriter(w)) => {
                    let (v, d) = optional(
                        rows.iter()
                            .map(|p| slot(p, k).map(|m| outcome_code(m.outcome))),
                    );
                    w.write_batch(&v, Some(&d), None)
                }
                (2, ColumnWriter::DoubleColumnWriter(w)) => {
                    let (v, d) = optional(
                        rows.iter()
                            .map(|p| slot(p, k).and_then(|m| finite(m.score_diff))),
                    );
                    w.write_batch(&v, Some(&d), None)
                }
                (3, ColumnWriter::DoubleColumnWriter(w)) => {
                    let (v, d) = optional(
                        rows.iter()
                            .map(|p| slot(p, k).and_then(|m| finite(m.perf_rank))),
                    );
                    w.write_batch(&v, Some(&d), None)
                }
                (4, ColumnWriter::BoolColumnWriter(w)) => {
                    let (v, d) = optional(rows.iter().map(|p| slot(p, k).map(|m| m.blowout_loss)));
                    w.write_batch(&v, Some(&d), None)
                }
                _ => Err(parquet::errors::ParquetError::General(format!(
                    "column {c} has an unexpected type"
                ))),
            }
        }
    }
}

/// Decodes one column of a row group into `out`, `fill` standing for null.
fn read_into<T: parquet::data_type::DataType>(
    mut r: parquet::column::reader::ColumnReaderImpl<T>,
    rows: usize,
    required: bool,
    fill: T::T,
    out: &mut Vec<T::T>,
) -> Result<(), String>
where
    T::T: Copy,
{
    let mut vals: Vec<T::T> = Vec::with_capacity(rows);
    let mut def: Vec<i16> = Vec::with_capacity(if required { 0 } else { rows });
    let mut done = 0;
    while done < rows {
        let (n, _, _) = r
            .read_records(
                rows - done,
                (!required).then_some(&mut def),
                None,
                &mut vals,
            )
            .map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        done += n;
    }
    if done != rows {
        return Err(format!("{done} values for {rows} rows"));
    }
    if required {
        out.extend_from_slice(&vals);
    } else {
        let mut it = vals.iter();
        out.extend(def.iter().map(|&d| {
            if d > 0 {
                it.next().copied().unwrap_or(fill)
            } else {
                fill
            }
        }));
    }
    Ok(())
}

/// Decodes a column of the physical type `$variant` into `$out`.
macro_rules! column {
    ($reader:expr, $variant:ident, $rows:expr, $req:expr, $fill:expr, $out:expr, $name:expr) => {
        match $reader {
            ColumnReader::$variant(r) => read_into(r, $rows, $req, $fill, $out),
            _ => Err(format!("{} has an unexpected type", $name)),
        }
    };
}

/// A row group, whose columns are read by index.
type Group<'a> = &'a dyn parquet::file::reader::RowGroupReader;

fn col(rg: Group<'_>, c: usize) -> Result<ColumnReader, String> {
    rg.get_column_reader(c).map_err(|e| e.to_string())
}

/// Decodes one row group into a columnar part.
fn read_group(
    rg: Group<'_>,
    history: usize,
    as_of_ms: i64,
    format: Format,
) -> Result<Snapshot, String> {
    let rows =
        usize::try_from(rg.metadata().num_rows()).map_err(|_| "negative row count".to_string())?;
    let mut s = Snapshot::empty(history, as_of_ms);
    read_ids(rg, rows, &mut s)?;
    let (games, counts, fixed) = read_fixed(rg, rows, format, &mut s)?;
    read_slots(rg, rows, fixed, &mut s)?;
    read_tail(rg, rows, fixed + 5 * history, format, &mut s)?;
    check_rows(&mut s, rows, &games, &counts)?;
    Ok(s)
}

/// Column 0, the player ids.
fn read_ids(rg: Group<'_>, rows: usize, s: &mut Snapshot) -> Result<(), String> {
    match col(rg, 0)? {
        ColumnReader::ByteArrayColumnReader(mut r) => {
            let mut v: Vec<ByteArray> = Vec::with_capacity(rows);
            let (n, _, _) = r
                .read_records(rows, None, None, &mut v)
                .map_err(|e| e.to_string())?;
            if n != rows {
                return Err(format!("{n} player ids for {rows} rows"));
            }
            for b in &v {
                let id = std::str::from_utf8(b.data())
                    .map_err(|_| "a player id is not UTF-8".to_string())?;
                s.ids.push_str(id);
                s.id_end.push(s.ids.len());
            }
        }
        _ => return Err("player_id is not a string column".into()),
    }
    Ok(())
}

/// The games and window counts as read, and the first slot column's index.
type FixedRead = (Vec<i64>, [Vec<i32>; 4], usize);

/// The fixed columns after the id: raw skill, percentile, games, last seen, the window
/// counts, before-recent and (in the formats that have it) first seen. Returns the games and
/// window counts as read (checked in `check_rows`) and the first slot column's index.
fn read_fixed(
    rg: Group<'_>,
    rows: usize,
    format: Format,
    s: &mut Snapshot,
) -> Result<FixedRead, String> {
    column!(
        col(rg, 1)?,
        DoubleColumnReader,
        rows,
        true,
        f64::NAN,
        &mut s.raw_skill,
        "raw_skill"
    )?;
    column!(
        col(rg, 2)?,
        DoubleColumnReader,
        rows,
        true,
        f64::NAN,
        &mut s.percentile,
        "percentile"
    )?;
    let mut games: Vec<i64> = Vec::with_capacity(rows);
    column!(
        col(rg, 3)?,
        Int64ColumnReader,
        rows,
        true,
        -1,
        &mut games,
        "games"
    )?;
    column!(
        col(rg, 4)?,
        Int64ColumnReader,
        rows,
        true,
        NONE,
        &mut s.last_seen_ms,
        "last_seen_ms"
    )?;
    let mut counts: [Vec<i32>; 4] = Default::default();
    for (w, c) in counts.iter_mut().enumerate() {
        column!(
            col(rg, 5 + w)?,
            Int32ColumnReader,
            rows,
            true,
            -1,
            c,
            "a window count"
        )?;
    }
    column!(
        col(rg, 9)?,
        Int64ColumnReader,
        rows,
        false,
        NONE,
        &mut s.before_recent_ms,
        "before_recent_ms"
    )?;
    let fixed = if format.first_seen {
        column!(
            col(rg, 10)?,
            Int64ColumnReader,
            rows,
            false,
            NONE,
            &mut s.first_seen_ms,
            "first_seen_ms"
        )?;
        11
    } else {
        s.first_seen_ms = vec![NONE; rows];
        10
    };
    Ok((games, counts, fixed))
}

/// The recent-match slots, five columns each from `fixed`, straight into their vectors.
fn read_slots(rg: Group<'_>, rows: usize, fixed: usize, s: &mut Snapshot) -> Result<(), String> {
    let h = s.start.len();
    let mut codes: Vec<i32> = Vec::with_capacity(rows);
    for k in 0..h {
        let base = fixed + 5 * k;
        column!(
            col(rg, base)?,
            Int64ColumnReader,
            rows,
            false,
            NONE,
            &mut s.start[k],
            "a start column"
        )?;
        codes.clear();
        column!(
            col(rg, base + 1)?,
            Int32ColumnReader,
            rows,
            false,
            0,
            &mut codes,
            "an outcome column"
        )?;
        for (r, (&t, &o)) in s.start[k].iter().zip(&codes).enumerate() {
            if t != NONE && decode_outcome(o).is_none() {
                return Err(format!(
                    "player {}: last{}_outcome {o} is not 0, 1 or 2",
                    s.id(r),
                    k + 1
                ));
            }
        }
        s.outcome[k] = codes.iter().map(|&o| o as u8).collect();
        column!(
            col(rg, base + 2)?,
            DoubleColumnReader,
            rows,
            false,
            f64::NAN,
            &mut s.score_diff[k],
            "a score column"
        )?;
        column!(
            col(rg, base + 3)?,
            DoubleColumnReader,
            rows,
            false,
            f64::NAN,
            &mut s.perf_rank[k],
            "a rank column"
        )?;
        column!(
            col(rg, base + 4)?,
            BoolColumnReader,
            rows,
            false,
            false,
            &mut s.blowout[k],
            "a blowout column"
        )?;
    }
    Ok(())
}

/// The columns after the slots, from `at`: churned gaps and the win skill, in the formats
/// that have them (an older format's churned gaps read as 0).
fn read_tail(
    rg: Group<'_>,
    rows: usize,
    at: usize,
    format: Format,
    s: &mut Snapshot,
) -> Result<(), String> {
    if format.churned_gaps {
        let mut gaps: Vec<i64> = Vec::with_capacity(rows);
        column!(
            col(rg, at)?,
            Int64ColumnReader,
            rows,
            true,
            0,
            &mut gaps,
            "churned_gaps"
        )?;
        if let Some(r) = gaps.iter().position(|&g| g < 0) {
            return Err(format!("player {}: churned_gaps is negative", s.id(r)));
        }
        s.churned_gaps = gaps.iter().map(|&g| g as u64).collect();
    } else {
        s.churned_gaps = vec![0; rows];
    }
    let c = at + usize::from(format.churned_gaps);
    if format.win_skill {
        s.win_skill = checked_doubles(rg, c, rows, "win_skill", "a finite number", s, |x| {
            x.is_finite()
        })?;
        s.win_column = true;
    }
    if format.win_mass {
        let want = "a finite number of at least 0";
        s.win_mass = checked_doubles(rg, c + 1, rows, "win_mass", want, s, |x| {
            x.is_finite() && x >= 0.0
        })?;
        s.mass_column = true;
    }
    Ok(())
}

/// The required double column `name` at index `c`, every value passing `ok`; otherwise the
/// first player whose value does not is named, with `want`.
fn checked_doubles(
    rg: Group<'_>,
    c: usize,
    rows: usize,
    name: &str,
    want: &str,
    s: &Snapshot,
    ok: impl Fn(f64) -> bool,
) -> Result<Vec<f64>, String> {
    let mut v = Vec::with_capacity(rows);
    column!(
        col(rg, c)?,
        DoubleColumnReader,
        rows,
        true,
        f64::NAN,
        &mut v,
        name
    )?;
    match v.iter().position(|&x| !ok(x)) {
        Some(r) => Err(format!("player {}: {name} {} is not {want}", s.id(r), v[r])),
        None => Ok(v),
    }
}

/// Checks every player's row and sets the games and window counts from their columns.
fn check_rows(
    s: &mut Snapshot,
    rows: usize,
    games: &[i64],
    counts: &[Vec<i32>; 4],
) -> Result<(), String> {
    let h = s.start.len();
    let mut games_ok = Vec::with_capacity(rows);
    let mut counts_ok = Vec::with_capacity(rows);
    for r in 0..rows {
        let id = || s.id(r).to_string();
        if !s.raw_skill[r].is_finite() {
            return Err(format!("player {}: raw_skill is not a finite number", id()));
        }
        let p = s.percentile[r];
        if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
            return Err(format!("player {}: percentile {p} is not in [0, 1]", id()));
        }
        let g = u64::try_from(games[r])
            .map_err(|_| format!("player {}: games {} is negative", id(), games[r]))?;
        games_ok.push(g);
        let mut wc = [0u32; 4];
        for (w, c) in wc.iter_mut().zip(counts) {
            *w = u32::try_from(c[r])
                .map_err(|_| format!("player {}: a window count is negative", id()))?;
        }
        counts_ok.push(wc);
        // Slot 1 is the most recent: present slots must be a prefix, in reverse time order.
        let present = (0..h).take_while(|&k| s.start[k][r] != NONE).count();
        if (present..h).any(|k| s.start[k][r] != NONE)
            || (1..present).any(|k| s.start[k][r] > s.start[k - 1][r])
        {
            return Err(format!(
                "player {}: recent matches are not in time order",
                id()
            ));
        }
    }
    s.games = games_ok;
    s.window_counts = counts_ok;
    Ok(())
}

/// Parses `players.parquet` from its bytes, already in memory (the loader has read them to
/// check the checksum), row groups in parallel on `threads` threads. Threads share the
/// buffer; a shared `File` would share its offset.
///
/// # Errors
/// Names the file and the problem: not Parquet, a column missing or of the wrong type, a
/// non-finite skill, an unknown outcome code, a player twice.
pub fn parse_snapshot(
    path: &Path,
    bytes: bytes::Bytes,
    history: usize,
    as_of_ms: i64,
    threads: usize,
) -> Result<Snapshot, ArtifactError> {
    let bad = |m: String| ArtifactError::new(path, Problem::Parse(m));
    let reader = SerializedFileReader::new(bytes).map_err(|e| bad(e.to_string()))?;
    let got = reader.metadata().file_metadata().schema();
    // Format 2 added `first_seen_ms`, format 3 `churned_gaps`, format 5 the optional
    // `win_skill` and format 7 the optional `win_mass` (only after `win_skill`); an older
    // snapshot has every other column.
    let has = |name: &str| got.get_fields().iter().any(|f| f.name() == name);
    let format = Format {
        first_seen: has("first_seen_ms"),
        churned_gaps: has("churned_gaps"),
        win_skill: has("win_skill"),
        win_mass: has("win_skill") && has("win_mass"),
    };
    let expected = parse_message_type(&schema(history, format)).map_err(|e| bad(e.to_string()))?;
    if got.get_fields().len() != expected.get_fields().len()
        || got
            .get_fields()
            .iter()
            .zip(expected.get_fields())
            .any(|(a, b)| {
                a.name() != b.name()
                    || a.get_basic_info().repetition() != b.get_basic_info().repetition()
            })
    {
        return Err(bad(format!(
            "the columns are not those of a snapshot with a history of {history}"
        )));
    }
    let groups = reader.num_row_groups();
    let threads = threads.clamp(1, groups.max(1));
    let results: Vec<Result<Vec<(usize, Snapshot)>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let reader = &reader;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for g in (t..groups).step_by(threads) {
                        let rg = reader.get_row_group(g).map_err(|e| e.to_string())?;
                        mine.push((g, read_group(rg.as_ref(), history, as_of_ms, format)?));
                    }
                    Ok(mine)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a reader thread panicked".into()))
            })
            .collect()
    });
    let mut parts = Vec::with_capacity(groups);
    for r in results {
        parts.extend(r.map_err(bad)?);
    }
    parts.sort_by_key(|(g, _)| *g);
    let mut snap = Snapshot::empty(history, as_of_ms);
    snap.win_column = format.win_skill;
    snap.mass_column = format.win_mass;
    for (_, p) in parts {
        snap.append(p);
    }
    if let Some(i) = (1..snap.len()).find(|&i| snap.id(i - 1) >= snap.id(i)) {
        return Err(bad(if snap.id(i - 1) == snap.id(i) {
            format!("player {} twice", snap.id(i))
        } else {
            format!(
                "players are not sorted by id ({} before {})",
                snap.id(i - 1),
                snap.id(i)
            )
        }));
    }
    Ok(snap)
}
