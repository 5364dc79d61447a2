//! The lake's match history in time order, in flat arrays: what every skill replay reads.

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, TimestampMillisecondType};
use arrow_array::{Array, Float64Array, Int32Array, RecordBatch, StringArray};
use hashbrown::HashMap;
use mm_artifact::Outcome;
use mm_artifact::skill::PerfColumns;
use mm_lake::Lake;

use crate::error::FitError;

/// One match: its rows are `lo..hi` of the history's row arrays, ordered by team. When the
/// match has exactly two teams, rows `lo..split` are team A (the smaller team number) and
/// `split..hi` team B, and `score_a` is A's result (1 win, 1/2 draw, 0 loss); otherwise
/// `score_a` is `NaN` and the match only feeds the raw skill. `margin_a` is A's team score
/// minus B's, `NaN` when either is unknown or the match has not two teams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatchRef {
    pub start_ms: i64,
    pub lo: u32,
    pub split: u32,
    pub hi: u32,
    pub score_a: f64,
    pub margin_a: f32,
}

impl MatchRef {
    #[must_use]
    pub fn two_teams(&self) -> bool {
        !self.score_a.is_nan()
    }
}

/// Match history: players by first appearance, matches in time order, rows in flat arrays.
#[derive(Debug, Default)]
pub struct History {
    pub ids: Vec<String>,
    pub matches: Vec<MatchRef>,
    pub player: Vec<u32>,
    pub metric: Vec<f64>,
    /// The row's party within its match and team (1, 2, ...), 0 when solo or alone in its
    /// party in this match.
    pub party: Vec<u16>,
    /// The row's role (the lake's `role` column): `k` is `role_names[k - 1]`, 0 none.
    pub role: Vec<u16>,
    pub role_names: Vec<String>,
}

impl History {
    #[must_use]
    pub fn rows(&self) -> usize {
        self.player.len()
    }

    /// The number of role `name` (1, 2, ...; see `role`), added to `role_names` when new.
    pub fn role_number(&mut self, name: &str) -> u16 {
        role_number(&mut self.role_names, name)
    }

    /// Drops every match starting at `until_ms` or later, with the players seen only in them.
    /// Matches are in time order and their rows laid out in that order, and players are
    /// numbered by first appearance, so what is dropped is a suffix of each array.
    pub fn truncate_from(&mut self, until_ms: i64) {
        let keep = self.matches.partition_point(|m| m.start_ms < until_ms);
        self.matches.truncate(keep);
        let rows = self.matches.last().map_or(0, |m| m.hi as usize);
        self.player.truncate(rows);
        self.metric.truncate(rows);
        self.party.truncate(rows);
        self.role.truncate(rows);
        let players = self.player.iter().max().map_or(0, |&p| p as usize + 1);
        self.ids.truncate(players);
    }
}

const COLS: [&str; 15] = [
    "match_id",
    "mode",
    "start_time",
    "team",
    "player_id",
    "outcome",
    "party_id",
    "role",
    "seconds_played",
    "kills",
    "deaths_by_enemy",
    "deaths",
    "score",
    "perf",
    "team_score",
];

/// The columns of one batch that the replay needs.
struct Cols {
    mid: StringArray,
    pid: StringArray,
    start: Vec<i64>,
    team: Int32Array,
    party: Option<StringArray>,
    role: Option<StringArray>,
    team_score: Option<Float64Array>,
}

/// A kept row: batch, row in the batch, metric, outcome code (2 win, 1 draw, 0 loss, 3 other).
type RowRef = (u32, u32, f64, u8);

/// One day's matches with day-local player numbers; the day's player ids are concatenated in
/// one buffer (`id_ends[k]` ends id `k`), so a day costs no allocation per player.
#[derive(Debug, Default)]
struct DayChunk {
    h: History,
    id_bytes: String,
    id_ends: Vec<usize>,
}

/// Reads the lake's matches (of `mode` when given) with each player's `metric`, every day of
/// [`DayStream`] joined into one history; players are numbered by first appearance.
pub fn read_history(lake: &Lake, mode: Option<&str>, metric: Metric) -> Result<History, FitError> {
    let mut days = DayStream::new(lake, mode, metric)?;
    let mut h = History::default();
    while let Some(day) = days.next_day()? {
        h.append(&day);
    }
    h.ids = days.ids;
    h.role_names = days.role_names;
    Ok(h)
}

/// The lake's days in time order, a few decoded in parallel at a time, with players numbered by
/// first appearance over every day read so far (so the numbering is the whole history's), and
/// roles numbered the same way. Memory: the players' ids and the days in flight.
#[derive(Debug)]
pub struct DayStream<'a> {
    lake: &'a Lake,
    mode: Option<String>,
    metric: Metric,
    days: Vec<i32>,
    next: usize,
    ready: std::collections::VecDeque<History>,
    index: HashMap<String, u32>,
    /// Every player seen so far; the days' player numbers index it.
    pub ids: Vec<String>,
    /// Every role seen so far (role `k` is `role_names[k - 1]`).
    pub role_names: Vec<String>,
}

/// Role `name`'s number in `names` (1-based; 0 is "no role"), adding it when new.
fn role_number(names: &mut Vec<String>, name: &str) -> u16 {
    match names.iter().position(|n| n == name) {
        Some(k) => k as u16 + 1,
        None => {
            names.push(name.to_string());
            names.len() as u16
        }
    }
}

impl<'a> DayStream<'a> {
    pub fn new(lake: &'a Lake, mode: Option<&str>, metric: Metric) -> Result<Self, FitError> {
        Ok(DayStream {
            lake,
            mode: mode.map(str::to_string),
            metric,
            days: lake.days()?,
            next: 0,
            ready: std::collections::VecDeque::new(),
            index: HashMap::new(),
            ids: Vec::new(),
            role_names: Vec::new(),
        })
    }

    /// The next day with matches: its `matches` index its own rows (from 0), its player and
    /// role numbers are the stream's (its `ids` and `role_names` are empty). `None` at the end.
    pub fn next_day(&mut self) -> Result<Option<History>, FitError> {
        use rayon::prelude::*;
        while self.ready.is_empty() && self.next < self.days.len() {
            let n = rayon::current_num_threads().max(1);
            let batch = &self.days[self.next..(self.next + n).min(self.days.len())];
            self.next += batch.len();
            let (lake, mode, metric) = (self.lake, self.mode.as_deref(), self.metric);
            let chunks: Vec<Result<DayChunk, FitError>> = batch
                .par_iter()
                .map(|&day| read_day(lake, day, mode, metric))
                .collect();
            for c in chunks {
                let day = self.numbered(c?);
                if !day.matches.is_empty() {
                    self.ready.push_back(day);
                }
            }
        }
        Ok(self.ready.pop_front())
    }

    /// Like [`DayStream::next_day`], with each day cut at `until_ms` (matches starting then or
    /// later dropped): `None` at the first day with nothing before it, as at the end.
    pub fn next_day_before(&mut self, until_ms: Option<i64>) -> Result<Option<History>, FitError> {
        let Some(mut day) = self.next_day()? else {
            return Ok(None);
        };
        if let Some(t) = until_ms {
            day.truncate_from(t);
        }
        if day.matches.is_empty() {
            // Every later day starts later still.
            self.next = self.days.len();
            self.ready.clear();
            return Ok(None);
        }
        Ok(Some(day))
    }

    /// The lake's days (days since the epoch), in time order.
    pub fn days(&self) -> &[i32] {
        &self.days
    }

    /// A day chunk with the stream's player and role numbers.
    fn numbered(&mut self, c: DayChunk) -> History {
        let mut global = Vec::with_capacity(c.id_ends.len());
        let mut from = 0;
        for &end in &c.id_ends {
            let id = &c.id_bytes[from..end];
            from = end;
            let k = match self.index.get(id) {
                Some(&k) => k,
                None => {
                    let k = self.ids.len() as u32;
                    self.ids.push(id.to_string());
                    self.index.insert(id.to_string(), k);
                    k
                }
            };
            global.push(k);
        }
        let mut h = c.h;
        for p in &mut h.player {
            *p = global[*p as usize];
        }
        // Day-local role numbers to the stream's, by name.
        let roles: Vec<u16> = std::iter::once(0)
            .chain(
                h.role_names
                    .iter()
                    .map(|name| role_number(&mut self.role_names, name)),
            )
            .collect();
        for r in &mut h.role {
            *r = roles[*r as usize];
        }
        h.role_names.clear();
        h
    }
}

impl History {
    /// Appends the matches of `day` (numbered like this history's players and roles) after
    /// this history's.
    pub fn append(&mut self, day: &History) {
        let base = self.player.len() as u32;
        self.player.extend_from_slice(&day.player);
        self.metric.extend_from_slice(&day.metric);
        self.party.extend_from_slice(&day.party);
        self.role.extend_from_slice(&day.role);
        self.matches.extend(day.matches.iter().map(|m| MatchRef {
            lo: m.lo + base,
            split: m.split + base,
            hi: m.hi + base,
            ..*m
        }));
    }
}

fn read_day(
    lake: &Lake,
    day: i32,
    mode: Option<&str>,
    metric: Metric,
) -> Result<DayChunk, FitError> {
    let mut cols: Vec<Cols> = Vec::new();
    let mut rows: Vec<RowRef> = Vec::new();
    let names: Vec<&str> = COLS.iter().copied().filter(|c| metric.needs(c)).collect();
    for file in lake.partition_files(day)? {
        for b in mm_lake::parquet_io::read_parquet_columns(&file, Some(&names))? {
            let bi = cols.len() as u32;
            if let Some(c) = batch_rows(&b, bi, mode, metric, &mut rows) {
                cols.push(c);
            }
        }
    }
    let key = |r: &RowRef| {
        let c = &cols[r.0 as usize];
        let i = r.1 as usize;
        (c.start[i], c.mid.value(i), c.team.value(i))
    };
    // Lakes are usually written in this order already: check before sorting.
    if !rows.is_sorted_by(|a, b| key(a) <= key(b)) {
        rows.sort_by(|a, b| key(a).cmp(&key(b)));
    }
    // Day-local player numbers, by first appearance.
    let mut chunk = DayChunk::default();
    let mut local: HashMap<&str, u32> = HashMap::with_capacity(rows.len());
    let players: Vec<u32> = rows
        .iter()
        .map(|r| {
            let id = cols[r.0 as usize].pid.value(r.1 as usize);
            *local.entry(id).or_insert_with(|| {
                chunk.id_bytes.push_str(id);
                chunk.id_ends.push(chunk.id_bytes.len());
                (chunk.id_ends.len() - 1) as u32
            })
        })
        .collect();
    let mut k = 0;
    while k < rows.len() {
        let (start, mid) = (key(&rows[k]).0, key(&rows[k]).1);
        let mut e = k + 1;
        while e < rows.len() && {
            let (s, m, _) = key(&rows[e]);
            s == start && m == mid
        } {
            e += 1;
        }
        push_match(&mut chunk.h, &cols, &rows[k..e], &players[k..e]);
        k = e;
    }
    Ok(chunk)
}

fn batch_rows(
    b: &RecordBatch,
    bi: u32,
    mode: Option<&str>,
    metric: Metric,
    rows: &mut Vec<RowRef>,
) -> Option<Cols> {
    let col = |n: &str| b.column_by_name(n).cloned();
    let (mid, modes, start, team, pid, outcome) = (
        col("match_id")?,
        col("mode")?,
        col("start_time")?,
        col("team")?,
        col("player_id")?,
        col("outcome")?,
    );
    let (modes, outcome) = (modes.as_string::<i32>(), outcome.as_string::<i32>());
    let i32col = |n: &str| col(n).map(|a| a.as_primitive::<Int32Type>().clone());
    let f64col = |n: &str| col(n).map(|a| a.as_primitive::<Float64Type>().clone());
    let (kills, dbe, deaths) = (i32col("kills"), i32col("deaths_by_enemy"), i32col("deaths"));
    let (secs, score, perf) = (f64col("seconds_played"), f64col("score"), f64col("perf"));
    let val_i = |a: &Option<Int32Array>, i: usize| {
        a.as_ref()
            .filter(|a| a.is_valid(i))
            .map(|a| f64::from(a.value(i)))
    };
    let val_f = |a: &Option<Float64Array>, i: usize| {
        a.as_ref().filter(|a| a.is_valid(i)).map(|a| a.value(i))
    };
    for i in 0..b.num_rows() {
        if mode.is_some_and(|m| m != modes.value(i)) {
            continue;
        }
        let code = match outcome.value(i) {
            "win" => 2,
            "draw" => 1,
            "loss" => 0,
            _ => 3,
        };
        let x = metric.value(&PerfColumns {
            kills: val_i(&kills, i),
            deaths_by_enemy: val_i(&dbe, i),
            deaths: val_i(&deaths, i),
            score: val_f(&score, i),
            seconds_played: val_f(&secs, i),
            perf: val_f(&perf, i),
            outcome: match code {
                2 => Some(Outcome::Win),
                1 => Some(Outcome::Draw),
                0 => Some(Outcome::Loss),
                _ => None,
            },
        });
        rows.push((bi, i as u32, x, code));
    }
    Some(Cols {
        mid: mid.as_string::<i32>().clone(),
        pid: pid.as_string::<i32>().clone(),
        start: start
            .as_primitive::<TimestampMillisecondType>()
            .values()
            .to_vec(),
        team: team.as_primitive::<Int32Type>().clone(),
        party: col("party_id").map(|a| a.as_string::<i32>().clone()),
        role: col("role").map(|a| a.as_string::<i32>().clone()),
        team_score: f64col("team_score"),
    })
}

/// Appends one match's rows (sorted by team) with their day-local player numbers.
fn push_match(h: &mut History, cols: &[Cols], rows: &[RowRef], players: &[u32]) {
    let lo = h.player.len() as u32;
    let team = |r: &RowRef| cols[r.0 as usize].team.value(r.1 as usize);
    let party_of = |r: &RowRef| {
        let c = &cols[r.0 as usize];
        c.party
            .as_ref()
            .filter(|p| p.is_valid(r.1 as usize))
            .map(|p| p.value(r.1 as usize))
    };
    // Parties: (team, party id) with two or more rows in this match.
    let mut parties: Vec<(i32, &str)> = rows
        .iter()
        .filter_map(|r| party_of(r).map(|p| (team(r), p)))
        .collect();
    parties.sort_unstable();
    let mut numbered: Vec<((i32, &str), u16)> = Vec::new();
    let mut k = 0;
    while k < parties.len() {
        let mut e = k + 1;
        while e < parties.len() && parties[e] == parties[k] {
            e += 1;
        }
        if e - k >= 2 {
            numbered.push((parties[k], numbered.len() as u16 + 1));
        }
        k = e;
    }
    let mut teams = 0;
    let mut split = None;
    let score_a = match rows.first().map(|r| r.3) {
        Some(2) => 1.0,
        Some(1) => 0.5,
        Some(0) => 0.0,
        _ => f64::NAN,
    };
    for (n, r) in rows.iter().enumerate() {
        if n == 0 || team(r) != team(&rows[n - 1]) {
            teams += 1;
            if teams == 2 {
                split = Some(lo + n as u32);
            }
        }
        h.player.push(players[n]);
        h.metric.push(r.2);
        let party = party_of(r)
            .and_then(|p| {
                numbered
                    .iter()
                    .find(|(key, _)| *key == (team(r), p))
                    .map(|x| x.1)
            })
            .unwrap_or(0);
        h.party.push(party);
        let c = &cols[r.0 as usize];
        let role = c
            .role
            .as_ref()
            .filter(|a| a.is_valid(r.1 as usize))
            .map_or(0, |a| h.role_number(a.value(r.1 as usize)));
        h.role.push(role);
    }
    let hi = h.player.len() as u32;
    // Each team's score is its first row's (every row of a team carries it).
    let team_score = |r: &RowRef| {
        cols[r.0 as usize]
            .team_score
            .as_ref()
            .filter(|a| a.is_valid(r.1 as usize))
            .map_or(f64::NAN, |a| a.value(r.1 as usize))
    };
    let margin_a = match split {
        Some(b) if teams == 2 => team_score(&rows[0]) - team_score(&rows[(b - lo) as usize]),
        _ => f64::NAN,
    };
    h.matches.push(MatchRef {
        start_ms: cols[rows[0].0 as usize].start[rows[0].1 as usize],
        lo,
        split: split.unwrap_or(hi),
        hi,
        score_a: if teams == 2 { score_a } else { f64::NAN },
        margin_a: margin_a as f32,
    });
}

pub use mm_artifact::skill::Metric;
