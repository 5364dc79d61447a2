//! The per-player snapshot (`players.parquet`): what a service needs to score a search without
//! the lake. One row per player, flat columns (documented in `models/README.md`):
//!
//! - `player_id` (string), `raw_skill`, `percentile` (in [0, 1]), `games` (matches played),
//!   `last_seen_ms`;
//! - `matches_8h`, `matches_1d`, `matches_1w`, `matches_1m`: matches in the windows before the
//!   manifest's `snapshot_as_of_ms`;
//! - `before_recent_ms`: the start of the match before the oldest recent one (null if none);
//! - `first_seen_ms`: the start of the player's first match in the data (null if none; format
//!   2 on: a format-1 snapshot lacks the column and loads with it null);
//! - for `k` in 1..=history (1 is the most recent): `last{k}_start_ms`, `last{k}_outcome`
//!   (2 win, 1 draw, 0 loss), `last{k}_score_diff`, `last{k}_perf_rank`, `last{k}_blowout_loss`;
//!   all null when the player has fewer than `k` matches; score difference and performance rank
//!   also null when unknown.
//!
//! It is written with parquet's own column API (no arrow), zstd, in row groups of
//! [`ROW_GROUP`] rows that load in parallel.

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

use crate::error::{ArtifactError, Problem};
use crate::features::{FeatureSpec, Outcome3, PastSummary, Played, Upcoming, WINDOWS_MS};

/// Rows per row group.
pub const ROW_GROUP: usize = 131_072;

/// One player's state, as of the snapshot or as updated by a service since.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerState {
    pub player_id: String,
    pub raw_skill: f64,
    /// In [0, 1].
    pub percentile: f64,
    /// Matches played.
    pub games: u64,
    pub last_seen_ms: i64,
    /// The start of the player's first match in the data (`None`: none yet).
    pub first_seen_ms: Option<i64>,
    /// `window_counts` are the matches in the 8h, 1d, 1w and 1m before this time.
    pub counts_as_of_ms: i64,
    pub window_counts: [u32; 4],
    /// The most recent matches, oldest first (at most the artifact's history).
    pub recent: Vec<Played>,
    /// The start of the match before `recent[0]`, if any.
    pub before_recent_ms: Option<i64>,
}

impl PlayerState {
    /// A player the artifact has never seen.
    #[must_use]
    pub fn new_player(player_id: &str, as_of_ms: i64, percentile: f64, raw_skill: f64) -> Self {
        PlayerState {
            player_id: player_id.to_string(),
            raw_skill,
            percentile,
            games: 0,
            last_seen_ms: i64::MIN,
            first_seen_ms: None,
            counts_as_of_ms: as_of_ms,
            window_counts: [0; 4],
            recent: Vec::new(),
            before_recent_ms: None,
        }
    }

    /// Matches in the 8h, 1d, 1w and 1m before `now_ms` (not before `counts_as_of_ms`).
    ///
    /// Exact while a window holds no more matches than `recent` keeps: the counts as of the
    /// snapshot, minus the recent matches that have left the window since, plus those played
    /// since. A match older than `recent` that leaves a window is not seen leaving it, so with
    /// more matches in a window than the history keeps, the count can be high by those.
    #[must_use]
    pub fn window_counts_at(&self, now_ms: i64) -> [u32; 4] {
        let asof = self.counts_as_of_ms;
        let now = now_ms.max(asof);
        let mut out = self.window_counts;
        for (c, w) in out.iter_mut().zip(WINDOWS_MS) {
            let left = self
                .recent
                .iter()
                .filter(|p| p.start_ms < asof && p.start_ms >= asof - w && p.start_ms < now - w)
                .count();
            let since = self
                .recent
                .iter()
                .filter(|p| p.start_ms >= asof && p.start_ms < now && p.start_ms >= now - w)
                .count();
            *c = (u64::from(*c).saturating_sub(left as u64) + since as u64) as u32;
        }
        out
    }

    /// Records a match the player has just played (services call this between retrains).
    pub fn record(&mut self, played: Played, history: usize) {
        self.window_counts = self.window_counts_at(played.start_ms);
        self.counts_as_of_ms = self.counts_as_of_ms.max(played.start_ms);
        self.recent.push(played);
        self.games += 1;
        self.last_seen_ms = self.last_seen_ms.max(played.start_ms);
        self.first_seen_ms.get_or_insert(played.start_ms);
        if self.recent.len() > history {
            let drop = self.recent.len() - history;
            self.before_recent_ms = Some(self.recent[drop - 1].start_ms);
            self.recent.drain(..drop);
        }
    }

    /// Appends the churn model's feature row for a search at `now` with a hypothetical
    /// `outcome`.
    pub fn push_features(
        &self,
        spec: &FeatureSpec,
        now: &Upcoming,
        outcome: Outcome3,
        out: &mut Vec<f64>,
    ) {
        let summary = PastSummary {
            recent: &self.recent,
            before_recent_ms: self.before_recent_ms,
            first_seen_ms: self.first_seen_ms,
            games: self.games,
            window_counts: self.window_counts_at(now.start_ms),
        };
        spec.push_row_from(&summary, now, outcome, out);
    }
}

/// The snapshot of every player, sorted by id, held as columns: loading a million players
/// decodes straight into them, with no per-player allocation. [`Snapshot::get`] finds a
/// player by binary search and materialises their [`PlayerState`].
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub history: usize,
    as_of_ms: i64,
    /// Player ids, concatenated; id `i` is `ids[id_end[i - 1]..id_end[i]]`.
    ids: String,
    id_end: Vec<usize>,
    raw_skill: Vec<f64>,
    percentile: Vec<f64>,
    games: Vec<u64>,
    last_seen_ms: Vec<i64>,
    window_counts: Vec<[u32; 4]>,
    /// `i64::MIN` for none.
    before_recent_ms: Vec<i64>,
    /// `i64::MIN` for none (and for every player of a format-1 snapshot).
    first_seen_ms: Vec<i64>,
    /// Slot columns, one vector per slot (index 0 is slot 1, the most recent) with one value
    /// per player: start (`i64::MIN` when absent), outcome code, score difference and rank
    /// (`NaN` when unknown), blowout.
    start: Vec<Vec<i64>>,
    outcome: Vec<Vec<u8>>,
    score_diff: Vec<Vec<f64>>,
    perf_rank: Vec<Vec<f64>>,
    blowout: Vec<Vec<bool>>,
}

const NONE: i64 = i64::MIN;

impl Snapshot {
    /// From players (the exporter's side).
    ///
    /// # Errors
    /// Ids not in strictly increasing order (a player twice, or unsorted).
    pub fn new(history: usize, players: Vec<PlayerState>) -> Result<Snapshot, String> {
        if let Some(w) = players
            .windows(2)
            .find(|w| w[0].player_id >= w[1].player_id)
        {
            return Err(if w[0].player_id == w[1].player_id {
                format!("player {} twice", w[0].player_id)
            } else {
                format!(
                    "players are not sorted by id ({} before {})",
                    w[0].player_id, w[1].player_id
                )
            });
        }
        let mut s = Snapshot::empty(history, players.first().map_or(0, |p| p.counts_as_of_ms));
        for p in &players {
            s.ids.push_str(&p.player_id);
            s.id_end.push(s.ids.len());
            s.raw_skill.push(p.raw_skill);
            s.percentile.push(p.percentile);
            s.games.push(p.games);
            s.last_seen_ms.push(p.last_seen_ms);
            s.window_counts.push(p.window_counts);
            s.before_recent_ms.push(p.before_recent_ms.unwrap_or(NONE));
            s.first_seen_ms.push(p.first_seen_ms.unwrap_or(NONE));
            for k in 0..history {
                let m = slot(p, k + 1);
                s.start[k].push(m.map_or(NONE, |m| m.start_ms));
                s.outcome[k].push(m.map_or(0, |m| outcome_code(m.outcome) as u8));
                s.score_diff[k].push(m.map_or(f64::NAN, |m| m.score_diff));
                s.perf_rank[k].push(m.map_or(f64::NAN, |m| m.perf_rank));
                s.blowout[k].push(m.is_some_and(|m| m.blowout_loss));
            }
        }
        Ok(s)
    }

    fn empty(history: usize, as_of_ms: i64) -> Snapshot {
        Snapshot {
            history,
            as_of_ms,
            start: vec![Vec::new(); history],
            outcome: vec![Vec::new(); history],
            score_diff: vec![Vec::new(); history],
            perf_rank: vec![Vec::new(); history],
            blowout: vec![Vec::new(); history],
            ..Snapshot::default()
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.id_end.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.id_end.is_empty()
    }

    /// The id of player `i` (in id order).
    #[must_use]
    pub fn id(&self, i: usize) -> &str {
        let from = if i == 0 { 0 } else { self.id_end[i - 1] };
        &self.ids[from..self.id_end[i]]
    }

    /// The index of a player, by binary search.
    #[must_use]
    pub fn position(&self, player_id: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.id(mid).cmp(player_id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Player `i`'s state.
    #[must_use]
    pub fn player(&self, i: usize) -> PlayerState {
        let h = self.history;
        let mut recent = Vec::with_capacity(h);
        for k in (0..h).rev() {
            if self.start[k][i] != NONE {
                recent.push(Played {
                    start_ms: self.start[k][i],
                    outcome: decode_outcome(i32::from(self.outcome[k][i]))
                        .unwrap_or(Outcome3::Loss),
                    score_diff: self.score_diff[k][i],
                    perf_rank: self.perf_rank[k][i],
                    blowout_loss: self.blowout[k][i],
                });
            }
        }
        PlayerState {
            player_id: self.id(i).to_string(),
            raw_skill: self.raw_skill[i],
            percentile: self.percentile[i],
            games: self.games[i],
            last_seen_ms: self.last_seen_ms[i],
            counts_as_of_ms: self.as_of_ms,
            window_counts: self.window_counts[i],
            recent,
            first_seen_ms: (self.first_seen_ms[i] != NONE).then_some(self.first_seen_ms[i]),
            before_recent_ms: (self.before_recent_ms[i] != NONE)
                .then_some(self.before_recent_ms[i]),
        }
    }

    /// A player's state, by id.
    #[must_use]
    pub fn get(&self, player_id: &str) -> Option<PlayerState> {
        self.position(player_id).map(|i| self.player(i))
    }

    /// Every player, in id order.
    pub fn iter(&self) -> impl Iterator<Item = PlayerState> + '_ {
        (0..self.len()).map(|i| self.player(i))
    }

    /// Appends another part (the next row group, ids following this part's).
    fn append(&mut self, mut o: Snapshot) {
        let base = self.ids.len();
        self.ids.push_str(&o.ids);
        self.id_end.extend(o.id_end.iter().map(|e| e + base));
        self.raw_skill.append(&mut o.raw_skill);
        self.percentile.append(&mut o.percentile);
        self.games.append(&mut o.games);
        self.last_seen_ms.append(&mut o.last_seen_ms);
        self.window_counts.append(&mut o.window_counts);
        self.before_recent_ms.append(&mut o.before_recent_ms);
        self.first_seen_ms.append(&mut o.first_seen_ms);
        for k in 0..self.history {
            self.start[k].append(&mut o.start[k]);
            self.outcome[k].append(&mut o.outcome[k]);
            self.score_diff[k].append(&mut o.score_diff[k]);
            self.perf_rank[k].append(&mut o.perf_rank[k]);
            self.blowout[k].append(&mut o.blowout[k]);
        }
    }
}

/// The snapshot's columns; format 1 had no `first_seen_ms`.
fn schema(history: usize, first_seen: bool) -> String {
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
    if first_seen {
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
    s.push('}');
    s
}

fn outcome_code(o: Outcome3) -> i32 {
    match o {
        Outcome3::Win => 2,
        Outcome3::Draw => 1,
        Outcome3::Loss => 0,
    }
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
/// bytes).
///
/// # Errors
/// Parquet's, as text.
pub fn write_snapshot(history: usize, players: &[PlayerState]) -> Result<Vec<u8>, String> {
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
    let schema = Arc::new(parse_message_type(&schema(h, true)).map_err(|e| e.to_string())?);
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
            write_column(c.untyped(), col, chunk).map_err(|e| e.to_string())?;
            c.close().map_err(|e| e.to_string())?;
            col += 1;
        }
        rg.close().map_err(|e| e.to_string())?;
    }
    w.close().map_err(|e| e.to_string())?;
    Ok(buf)
}

/// The `k`-th most recent match (1-based) of a player.
fn slot(p: &PlayerState, k: usize) -> Option<&Played> {
    p.recent.len().checked_sub(k).map(|i| &p.recent[i])
}

fn write_column(
    w: &mut ColumnWriter<'_>,
    col: usize,
    rows: &[PlayerState],
) -> parquet::errors::Result<usize> {
    const FIXED: usize = 11;
    match (col, w) {
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

fn decode_outcome(code: i32) -> Option<Outcome3> {
    match code {
        2 => Some(Outcome3::Win),
        1 => Some(Outcome3::Draw),
        0 => Some(Outcome3::Loss),
        _ => None,
    }
}

/// Decodes one row group into a columnar part.
fn read_group(
    rg: &dyn parquet::file::reader::RowGroupReader,
    history: usize,
    as_of_ms: i64,
    first_seen: bool,
) -> Result<Snapshot, String> {
    let rows =
        usize::try_from(rg.metadata().num_rows()).map_err(|_| "negative row count".to_string())?;
    let col = |c: usize| rg.get_column_reader(c).map_err(|e| e.to_string());
    let mut s = Snapshot::empty(history, as_of_ms);
    match col(0)? {
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
    column!(
        col(1)?,
        DoubleColumnReader,
        rows,
        true,
        f64::NAN,
        &mut s.raw_skill,
        "raw_skill"
    )?;
    column!(
        col(2)?,
        DoubleColumnReader,
        rows,
        true,
        f64::NAN,
        &mut s.percentile,
        "percentile"
    )?;
    let mut games: Vec<i64> = Vec::with_capacity(rows);
    column!(
        col(3)?,
        Int64ColumnReader,
        rows,
        true,
        -1,
        &mut games,
        "games"
    )?;
    column!(
        col(4)?,
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
            col(5 + w)?,
            Int32ColumnReader,
            rows,
            true,
            -1,
            c,
            "a window count"
        )?;
    }
    column!(
        col(9)?,
        Int64ColumnReader,
        rows,
        false,
        NONE,
        &mut s.before_recent_ms,
        "before_recent_ms"
    )?;
    let fixed = if first_seen {
        column!(
            col(10)?,
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
    // Slot columns, straight into their vectors.
    let h = history;
    let mut codes: Vec<i32> = Vec::with_capacity(rows);
    for k in 0..h {
        let base = fixed + 5 * k;
        column!(
            col(base)?,
            Int64ColumnReader,
            rows,
            false,
            NONE,
            &mut s.start[k],
            "a start column"
        )?;
        codes.clear();
        column!(
            col(base + 1)?,
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
            col(base + 2)?,
            DoubleColumnReader,
            rows,
            false,
            f64::NAN,
            &mut s.score_diff[k],
            "a score column"
        )?;
        column!(
            col(base + 3)?,
            DoubleColumnReader,
            rows,
            false,
            f64::NAN,
            &mut s.perf_rank[k],
            "a rank column"
        )?;
        column!(
            col(base + 4)?,
            BoolColumnReader,
            rows,
            false,
            false,
            &mut s.blowout[k],
            "a blowout column"
        )?;
    }
    // Checks, per player.
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
        for (w, c) in wc.iter_mut().zip(&counts) {
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
    Ok(s)
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
    // Format 2 added `first_seen_ms`; a format-1 snapshot has every other column.
    let first_seen = got.get_fields().iter().any(|f| f.name() == "first_seen_ms");
    let expected =
        parse_message_type(&schema(history, first_seen)).map_err(|e| bad(e.to_string()))?;
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
                        mine.push((g, read_group(rg.as_ref(), history, as_of_ms, first_seen)?));
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

/// The row a search for player `p` at `now` would produce with a hypothetical outcome: a
/// convenience over [`PlayerState::push_features`].
#[must_use]
pub fn features_of(
    spec: &FeatureSpec,
    p: &PlayerState,
    now_ms: i64,
    party: bool,
    outcome: Outcome3,
) -> Vec<f64> {
    let mut row = Vec::with_capacity(spec.names().len());
    let now = Upcoming {
        start_ms: now_ms,
        party,
        skill_percentile: p.percentile,
    };
    p.push_features(spec, &now, outcome, &mut row);
    row
}
