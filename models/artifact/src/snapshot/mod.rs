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
//!   also null when unknown;
//! - `churned_gaps`: of the player's matches in the data, how many were followed by the
//!   next more than the churn horizon later (format 3 on: an older snapshot loads it as 0; only
//!   a churn model with the churn history features reads it);
//! - `win_skill`, last and only when the team win model reads it (format 5 on): the player's
//!   whole-history strength (`mm-trainer`'s `skill::win` on the outcomes, in log-odds, or
//!   `skill::perf` on the in-match metric, as `mm fit skill` chose);
//! - `win_mass`, after it, when the artifact updates the win skill after a match (format 7
//!   on, with `skill.json`'s `win_update`): the data's weight behind the player's win skill as
//!   of `last_seen_ms` ([`crate::skill::win`]).
//!
//! It is written with parquet's own column API (no arrow), zstd, in row groups of
//! [`ROW_GROUP`] rows that load in parallel.

use crate::features::{FeatureSpec, Outcome3, PastSummary, Played, Upcoming, WINDOWS_MS};

mod file;

pub use file::{WinColumns, parse_snapshot, write_snapshot};

/// Rows per row group.
pub const ROW_GROUP: usize = 131_072;

/// One player's state, as of the snapshot or as updated by a service since.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerState {
    pub player_id: String,
    pub raw_skill: f64,
    /// The whole-history win skill, log-odds (0 for a new player, and for every player of a
    /// snapshot without the column: only a team model that reads it needs it).
    pub win_skill: f64,
    /// The win skill's mass as of `last_seen_ms` (the data's weight behind it,
    /// [`crate::skill::win`]; 0 for a new player, and without the snapshot's `win_mass`).
    pub win_mass: f64,
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
    /// Consecutive matches more than the churn horizon apart
    /// ([`PastSummary::churned_gaps`]).
    pub churned_gaps: u64,
}

impl PlayerState {
    /// A player the artifact has never seen.
    #[must_use]
    pub fn new_player(player_id: &str, as_of_ms: i64, percentile: f64, raw_skill: f64) -> Self {
        PlayerState {
            player_id: player_id.to_string(),
            raw_skill,
            win_skill: 0.0,
            win_mass: 0.0,
            percentile,
            games: 0,
            last_seen_ms: i64::MIN,
            first_seen_ms: None,
            counts_as_of_ms: as_of_ms,
            window_counts: [0; 4],
            recent: Vec::new(),
            before_recent_ms: None,
            churned_gaps: 0,
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

    /// Records a match the player has just played (services call this between retrains), for
    /// the features of `spec`.
    pub fn record(&mut self, played: Played, spec: &FeatureSpec) {
        let history = spec.history;
        if let (Some(h), Some(last)) = (spec.past_churn_horizon_ms, self.recent.last())
            && played.start_ms - last.start_ms > h
        {
            self.churned_gaps += 1;
        }
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
            churned_gaps: self.churned_gaps,
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
    /// Empty when the snapshot has no `win_skill` column (`win_column` false).
    win_skill: Vec<f64>,
    win_column: bool,
    /// Empty when the snapshot has no `win_mass` column.
    win_mass: Vec<f64>,
    mass_column: bool,
    percentile: Vec<f64>,
    games: Vec<u64>,
    last_seen_ms: Vec<i64>,
    window_counts: Vec<[u32; 4]>,
    /// `i64::MIN` for none.
    before_recent_ms: Vec<i64>,
    /// `i64::MIN` for none (and for every player of a format-1 snapshot).
    first_seen_ms: Vec<i64>,
    /// 0 for every player of a snapshot before format 3.
    churned_gaps: Vec<u64>,
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
        s.win_column = true;
        s.mass_column = true;
        for p in &players {
            s.ids.push_str(&p.player_id);
            s.id_end.push(s.ids.len());
            s.raw_skill.push(p.raw_skill);
            s.win_skill.push(p.win_skill);
            s.win_mass.push(p.win_mass);
            s.percentile.push(p.percentile);
            s.games.push(p.games);
            s.last_seen_ms.push(p.last_seen_ms);
            s.window_counts.push(p.window_counts);
            s.before_recent_ms.push(p.before_recent_ms.unwrap_or(NONE));
            s.first_seen_ms.push(p.first_seen_ms.unwrap_or(NONE));
            s.churned_gaps.push(p.churned_gaps);
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

    /// Whether the snapshot holds the players' win skill (the `win_skill` column).
    #[must_use]
    pub fn has_win_skill(&self) -> bool {
        self.win_column
    }

    /// Whether the snapshot holds the win skill's masses (the `win_mass` column, format 7 on).
    #[must_use]
    pub fn has_win_mass(&self) -> bool {
        self.mass_column
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
            win_skill: self.win_skill.get(i).copied().unwrap_or(0.0),
            win_mass: self.win_mass.get(i).copied().unwrap_or(0.0),
            percentile: self.percentile[i],
            games: self.games[i],
            last_seen_ms: self.last_seen_ms[i],
            counts_as_of_ms: self.as_of_ms,
            window_counts: self.window_counts[i],
            recent,
            first_seen_ms: (self.first_seen_ms[i] != NONE).then_some(self.first_seen_ms[i]),
            before_recent_ms: (self.before_recent_ms[i] != NONE)
                .then_some(self.before_recent_ms[i]),
            churned_gaps: self.churned_gaps[i],
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
        self.win_skill.append(&mut o.win_skill);
        self.win_mass.append(&mut o.win_mass);
        self.percentile.append(&mut o.percentile);
        self.games.append(&mut o.games);
        self.last_seen_ms.append(&mut o.last_seen_ms);
        self.window_counts.append(&mut o.window_counts);
        self.before_recent_ms.append(&mut o.before_recent_ms);
        self.first_seen_ms.append(&mut o.first_seen_ms);
        self.churned_gaps.append(&mut o.churned_gaps);
        for k in 0..self.history {
            self.start[k].append(&mut o.start[k]);
            self.outcome[k].append(&mut o.outcome[k]);
            self.score_diff[k].append(&mut o.score_diff[k]);
            self.perf_rank[k].append(&mut o.perf_rank[k]);
            self.blowout[k].append(&mut o.blowout[k]);
        }
    }
}

fn outcome_code(o: Outcome3) -> i32 {
    match o {
        Outcome3::Win => 2,
        Outcome3::Draw => 1,
        Outcome3::Loss => 0,
    }
}

/// The `k`-th most recent match (1-based) of a player.
fn slot(p: &PlayerState, k: usize) -> Option<&Played> {
    p.recent.len().checked_sub(k).map(|i| &p.recent[i])
}

fn decode_outcome(code: i32) -> Option<Outcome3> {
    match code {
        2 => Some(Outcome3::Win),
        1 => Some(Outcome3::Draw),
        0 => Some(Outcome3::Loss),
        _ => None,
    }
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
    let mut row = Vec::with_capacity(spec.width());
    let now = Upcoming {
        start_ms: now_ms,
        party,
        skill_percentile: p.percentile,
    };
    p.push_features(spec, &now, outcome, &mut row);
    row
}
