//! Live queues of party searches, and what every queue policy shares.
//!
//! A [`Search`] is a party waiting for a lobby: its members (raw skill, percentile, games played
//! and churn after each outcome, from the artifact snapshot via [`Member::from_state`] or from
//! the service), when it started, where it is, its input device and platform, and its pings to
//! data centres where known. A [`Queue`] holds the searches of one mode (two teams of
//! `team_size`). A [`Policy`] turns the queue into lobbies, tick by tick:
//! `tick(now, queue) -> lobbies` removes the searches it placed and leaves the rest queued.
//!
//! Shared here:
//! - [`Backoff`]: piecewise-linear curves of search age, for rules that loosen as searches wait.
//! - [`LobbyModels`]: the exported team win model and party adjustment, which score a split.
//! - [`Quality`]: the weighted quality score of a lobby (Dota 2 post, Awesomenauts post),
//!   reported for every lobby whatever formed it, and the threshold policy's objective.
//! - Candidate selection: the top K searches by the Call of Duty paper's N-dimensional distance
//!   (great-circle km + weight x skill-percentile difference + input-device penalty), exact, from
//!   an R*-tree.
//! - The maximum-wait rule: a search that has waited `max_wait` is placed in any lobby that fits
//!   the mode (full, equal teams, parties intact, platforms compatible), by an exact search over
//!   the whole queue, so no search waits past the maximum while a feasible lobby exists.
//! - [`Explanation`]: for a queued search, which rule blocks it and when backoff relaxes it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use mm_artifact::Artifact;
use mm_artifact::snapshot::{PlayerState, features_of};
use mm_artifact::team::{PartyAdjustment, TeamSample, TeamWinModel};
use serde::{Deserialize, Serialize};

use crate::Outcome;
use crate::knn::{IndexPoint, KdIndex};
use crate::teams::{Party, Split, best_split};

/// A search's id, unique within a queue.
pub type SearchId = u64;

/// Earth's mean radius, km.
pub const EARTH_RADIUS_KM: f64 = 6371.0;

/// The most players per team a queue accepts (the exhaustive split's limit, 12v12).
pub const MAX_TEAM_SIZE: usize = 12;

/// A player's input device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Input {
    Controller,
    KeyboardMouse,
    Touch,
}

/// One player of a search, as the policies need it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// Raw skill in [-1, 1] (team balance, win probability).
    pub raw_skill: f64,
    /// Skill percentile in [0, 1] (skill rules, candidate distance).
    pub percentile: f64,
    /// Matches played (experience).
    pub games: u64,
    /// Probability of churning after a win, a draw and a loss.
    pub churn: [f64; 3],
}

impl Member {
    /// A member from the artifact: skill and percentile from the snapshot, churn from the churn
    /// model on the player's state at `now_ms` for each hypothetical outcome.
    #[must_use]
    pub fn from_state(art: &Artifact, state: &PlayerState, now_ms: i64, in_party: bool) -> Member {
        let spec = art.churn.model.spec;
        let row = features_of(&spec, state, now_ms, in_party, Outcome::Win);
        Member {
            raw_skill: state.raw_skill,
            percentile: state.percentile,
            games: state.games,
            churn: art.churn.model.counterfactual(&row),
        }
    }

    /// A member the snapshot does not hold: a new player at raw skill 0.
    #[must_use]
    pub fn new_player(art: &Artifact, player_id: &str, now_ms: i64, in_party: bool) -> Member {
        let state = PlayerState::new_player(
            player_id,
            art.manifest.snapshot_as_of_ms,
            art.percentiles.percentile(0.0),
            0.0,
        );
        Member::from_state(art, &state, now_ms, in_party)
    }
}

/// A party searching for a lobby.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Search {
    pub id: SearchId,
    pub members: Vec<Member>,
    /// When the search started, ms since the epoch.
    pub start_ms: i64,
    /// Degrees.
    pub lat: f64,
    pub lon: f64,
    pub input: Input,
    pub platform: u8,
    /// Whether the party accepts players of other platforms (who also accept cross-play).
    pub crossplay: bool,
    /// Round-trip ping to data centres, `(data centre, ms)`; empty when unknown.
    pub pings: Vec<(u16, f32)>,
}

/// A game mode: two teams of `team_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mode {
    pub team_size: usize,
}

impl Mode {
    #[must_use]
    pub fn lobby_players(&self) -> usize {
        2 * self.team_size
    }
}

/// Why a search or a mode was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueueError {
    #[error("team size {0} is outside 1..={MAX_TEAM_SIZE}")]
    BadMode(usize),
    #[error("search {0} is already queued")]
    DuplicateId(SearchId),
    #[error("search {0} has no members")]
    EmptyParty(SearchId),
    #[error("search {id} has {size} players, more than a team of {team_size}")]
    PartyTooLarge {
        id: SearchId,
        size: usize,
        team_size: usize,
    },
    #[error("search {id}: {field} = {value} is not allowed ({why})")]
    BadValue {
        id: SearchId,
        field: &'static str,
        value: f64,
        why: &'static str,
    },
    #[error("search {0} is not queued")]
    Unknown(SearchId),
}

/// The searches of one mode, in arrival order.
#[derive(Debug, Clone)]
pub struct Queue {
    mode: Mode,
    searches: Vec<Search>,
    ids: HashSet<SearchId>,
}

impl Queue {
    /// # Errors
    /// The team size is 0 or above [`MAX_TEAM_SIZE`].
    pub fn new(mode: Mode) -> Result<Queue, QueueError> {
        if mode.team_size == 0 || mode.team_size > MAX_TEAM_SIZE {
            return Err(QueueError::BadMode(mode.team_size));
        }
        Ok(Queue {
            mode,
            searches: Vec::new(),
            ids: HashSet::new(),
        })
    }

    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Adds a search after checking it.
    ///
    /// # Errors
    /// A duplicate id, an empty or oversized party, or a value out of range (percentile outside
    /// [0, 1], churn outside [0, 1], a non-finite skill, latitude or longitude out of range, a
    /// negative or non-finite ping).
    pub fn push(&mut self, s: Search) -> Result<(), QueueError> {
        validate_search(&s, self.mode)?;
        if !self.ids.insert(s.id) {
            return Err(QueueError::DuplicateId(s.id));
        }
        self.searches.push(s);
        Ok(())
    }

    #[must_use]
    pub fn searches(&self) -> &[Search] {
        &self.searches
    }

    #[must_use]
    pub fn get(&self, id: SearchId) -> Option<&Search> {
        self.searches.iter().find(|s| s.id == id)
    }

    /// The index of search `id` in [`Queue::searches`].
    ///
    /// # Errors
    /// The search is not queued.
    pub fn position(&self, id: SearchId) -> Result<usize, QueueError> {
        self.searches
            .iter()
            .position(|s| s.id == id)
            .ok_or(QueueError::Unknown(id))
    }

    /// Removes the searches of these lobbies (the end of a tick).
    pub fn remove_placed(&mut self, lobbies: &[Lobby]) {
        let placed: Vec<SearchId> = lobbies.iter().flat_map(Lobby::search_ids).collect();
        self.remove(&placed);
    }

    /// Removes the searches with these ids (a player cancelled, or a lobby formed).
    pub fn remove(&mut self, ids: &[SearchId]) {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        self.searches
            .retain(|s| sorted.binary_search(&s.id).is_err());
        for id in &sorted {
            self.ids.remove(id);
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.searches.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.searches.is_empty()
    }

    /// Players queued.
    #[must_use]
    pub fn players(&self) -> usize {
        self.searches.iter().map(|s| s.members.len()).sum()
    }
}

fn validate_search(s: &Search, mode: Mode) -> Result<(), QueueError> {
    let bad = |field, value: f64, why| QueueError::BadValue {
        id: s.id,
        field,
        value,
        why,
    };
    if s.members.is_empty() {
        return Err(QueueError::EmptyParty(s.id));
    }
    if s.members.len() > mode.team_size {
        return Err(QueueError::PartyTooLarge {
            id: s.id,
            size: s.members.len(),
            team_size: mode.team_size,
        });
    }
    if !(-90.0..=90.0).contains(&s.lat) {
        return Err(bad("lat", s.lat, "must be within [-90, 90]"));
    }
    if !(-180.0..=180.0).contains(&s.lon) {
        return Err(bad("lon", s.lon, "must be within [-180, 180]"));
    }
    for m in &s.members {
        if !(0.0..=1.0).contains(&m.percentile) {
            return Err(bad("percentile", m.percentile, "must be within [0, 1]"));
        }
        if !m.raw_skill.is_finite() {
            return Err(bad("raw_skill", m.raw_skill, "must be finite"));
        }
        for &c in &m.churn {
            if !(0.0..=1.0).contains(&c) {
                return Err(bad("churn", c, "must be a probability"));
            }
        }
    }
    for &(_, p) in &s.pings {
        if !(p.is_finite() && p >= 0.0) {
            return Err(bad("ping", f64::from(p), "must be finite and >= 0"));
        }
    }
    Ok(())
}

/// A piecewise-linear curve of search age (seconds): flat before the first point and after the
/// last. Rules read their allowance from it, so they loosen (or, for a quality threshold,
/// fall) as a search waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Backoff {
    /// `(age_s, value)`, ages strictly increasing.
    pub points: Vec<(f64, f64)>,
}

impl Backoff {
    /// # Panics
    /// When `points` is empty, not finite, or its ages do not increase: curves are configuration,
    /// checked where they are built.
    #[must_use]
    pub fn new(points: &[(f64, f64)]) -> Backoff {
        assert!(!points.is_empty(), "a backoff curve needs a point");
        assert!(
            points.iter().all(|p| p.0.is_finite() && p.1.is_finite()),
            "backoff points must be finite"
        );
        assert!(
            points.windows(2).all(|w| w[0].0 < w[1].0),
            "backoff ages must increase"
        );
        Backoff {
            points: points.to_vec(),
        }
    }

    /// The value at `age_s`.
    #[must_use]
    pub fn at(&self, age_s: f64) -> f64 {
        let p = &self.points;
        if age_s <= p[0].0 {
            return p[0].1;
        }
        for w in p.windows(2) {
            let ((a0, v0), (a1, v1)) = (w[0], w[1]);
            if age_s <= a1 {
                return v0 + (v1 - v0) * (age_s - a0) / (a1 - a0);
            }
        }
        p[p.len() - 1].1
    }

    /// The first age at which the value reaches at least `v` (rising curves), `None` if never.
    #[must_use]
    pub fn age_at_least(&self, v: f64) -> Option<f64> {
        self.first_age(|x| x >= v, v)
    }

    /// The first age at which the value falls to at most `v` (falling curves), `None` if never.
    #[must_use]
    pub fn age_at_most(&self, v: f64) -> Option<f64> {
        self.first_age(|x| x <= v, v)
    }

    fn first_age(&self, ok: impl Fn(f64) -> bool, v: f64) -> Option<f64> {
        let p = &self.points;
        if ok(p[0].1) {
            return Some(0.0);
        }
        for w in p.windows(2) {
            let ((a0, v0), (a1, v1)) = (w[0], w[1]);
            if ok(v1) {
                // Linear between the points: solve v0 + (v1 - v0) t = v.
                let t = if v1 == v0 { 0.0 } else { (v - v0) / (v1 - v0) };
                return Some(a0 + t.clamp(0.0, 1.0) * (a1 - a0));
            }
        }
        None
    }

    /// The fraction of its total change the curve has made by `age_s` (0 at the start, 1 at the
    /// last point): how far a rule has loosened, comparable across rules.
    #[must_use]
    pub fn progress(&self, age_s: f64) -> f64 {
        let (first, last) = (self.points[0].1, self.points[self.points.len() - 1].1);
        if first == last {
            return 1.0;
        }
        ((self.at(age_s) - first) / (last - first)).clamp(0.0, 1.0)
    }
}

/// The models that score a lobby: the team win model (P(win/draw/loss) of a split) and the party
/// adjustment (the Dota 2 post's effective MMR of party members, used to balance teams).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LobbyModels {
    pub win: TeamWinModel,
    pub party: Option<PartyAdjustment>,
}

impl LobbyModels {
    /// The artifact's models; `None` when it has no team win model.
    #[must_use]
    pub fn from_artifact(art: &Artifact) -> Option<LobbyModels> {
        art.team_win.map(|win| LobbyModels {
            win,
            party: art.party_adjustment,
        })
    }

    /// A win model on raw-skill sums only, no draws, no party terms: for tests and benchmarks.
    #[must_use]
    pub fn skill_only(skill_coef: f64) -> LobbyModels {
        LobbyModels {
            win: TeamWinModel {
                skill_coef,
                party_members_coef: 0.0,
                party_spread_coef: 0.0,
                draw: None,
                samples: 0,
                draws: 0,
            },
            party: None,
        }
    }
}

/// Per-search figures the policies read many times, computed once per tick.
#[derive(Debug, Clone, Copy)]
pub(crate) struct View {
    pub size: usize,
    /// Mean skill percentile of the party (the CoD paper's search skill).
    pub skill: f64,
    pub pct_min: f64,
    pub pct_max: f64,
    pub raw_sum: f64,
    /// Raw-skill sum plus the party adjustment (team balance).
    pub adj_sum: f64,
    /// Players in a party of two or more, and the sum over them of their party's raw-skill sd.
    pub party_members: f64,
    pub party_spread: f64,
    /// Mean experience, `ln(1 + games)` (the Dota 2 post's logarithmic experience).
    pub exp: f64,
    /// Sums of churn after a win, a draw and a loss.
    pub churn: [f64; 3],
    pub age_s: f64,
    /// Unit vector times the Earth's radius (km).
    pub xyz: [f64; 3],
}

impl View {
    pub(crate) fn of(s: &Search, now_ms: i64, party: Option<PartyAdjustment>) -> View {
        let n = s.members.len() as f64;
        let mut v = View {
            size: s.members.len(),
            skill: s.members.iter().map(|m| m.percentile).sum::<f64>() / n,
            pct_min: f64::INFINITY,
            pct_max: f64::NEG_INFINITY,
            raw_sum: 0.0,
            adj_sum: 0.0,
            party_members: 0.0,
            party_spread: 0.0,
            exp: s
                .members
                .iter()
                .map(|m| (m.games as f64).ln_1p())
                .sum::<f64>()
                / n,
            churn: [0.0; 3],
            age_s: ((now_ms - s.start_ms) as f64 / 1000.0).max(0.0),
            xyz: unit_xyz(s.lat, s.lon),
        };
        for m in &s.members {
            v.pct_min = v.pct_min.min(m.percentile);
            v.pct_max = v.pct_max.max(m.percentile);
            v.raw_sum += m.raw_skill;
            for k in 0..3 {
                v.churn[k] += m.churn[k];
            }
        }
        v.adj_sum = v.raw_sum;
        if s.members.len() >= 2 {
            let mean = v.raw_sum / n;
            let var = s
                .members
                .iter()
                .map(|m| (m.raw_skill - mean).powi(2))
                .sum::<f64>()
                / n;
            let sd = var.max(0.0).sqrt();
            v.party_members = n;
            v.party_spread = n * sd;
            if let Some(adj) = party {
                v.adj_sum += n * adj.for_spread(sd);
            }
        }
        v
    }

    pub(crate) fn disparity(&self) -> f64 {
        self.pct_max - self.pct_min
    }
}

/// `(x, y, z)` on a sphere of the Earth's radius, km.
#[must_use]
pub fn unit_xyz(lat: f64, lon: f64) -> [f64; 3] {
    let (la, lo) = (lat.to_radians(), lon.to_radians());
    [
        EARTH_RADIUS_KM * la.cos() * lo.cos(),
        EARTH_RADIUS_KM * la.cos() * lo.sin(),
        EARTH_RADIUS_KM * la.sin(),
    ]
}

/// Great-circle distance (km) between two points given by [`unit_xyz`].
#[must_use]
pub fn great_circle_km(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    let chord = ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt();
    2.0 * EARTH_RADIUS_KM * (chord / (2.0 * EARTH_RADIUS_KM)).min(1.0).asin()
}

fn input_slot(i: Input) -> u8 {
    match i {
        Input::Controller => 0,
        Input::KeyboardMouse => 1,
        Input::Touch => 2,
    }
}

/// Whether two searches may share a lobby: same platform, or both accept cross-play.
#[must_use]
pub fn platforms_compatible(a: &Search, b: &Search) -> bool {
    compatible(a.platform, a.crossplay, b.platform, b.crossplay)
}

/// [`platforms_compatible`] on the platform and cross-play fields of the two searches.
pub(crate) fn compatible(pa: u8, ca: bool, pb: u8, cb: bool) -> bool {
    pa == pb || (ca && cb)
}

/// The CoD paper's N-dimensional distance between searches.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Distance {
    /// km added per unit of skill-percentile difference.
    pub skill_km: f64,
    /// km added when the input devices differ.
    pub input_km: f64,
}

impl Default for Distance {
    /// Skill "slightly weighted": a tenth of the percentile range counts as 150 km; a different
    /// input device as 500 km.
    fn default() -> Self {
        Distance {
            skill_km: 1500.0,
            input_km: 500.0,
        }
    }
}

impl Distance {
    pub(crate) fn between(&self, a: &View, sa: &Search, b: &View, sb: &Search) -> f64 {
        // The skill term as the index computes it (the gap of the weighted skills).
        great_circle_km(&a.xyz, &b.xyz)
            + (self.skill_km * a.skill - self.skill_km * b.skill).abs()
            + if sa.input == sb.input {
                0.0
            } else {
                self.input_km
            }
    }
}

/// Searches of one tick with their views, the nearest-candidate index and the taken flags.
pub(crate) struct TickState<'q> {
    pub searches: &'q [Search],
    pub views: Vec<View>,
    pub taken: Vec<bool>,
    /// The nearest-candidate index (see [`crate::knn`]).
    index: KdIndex,
    pub dist: Distance,
}

impl<'q> TickState<'q> {
    pub(crate) fn new(
        queue: &'q Queue,
        now_ms: i64,
        party: Option<PartyAdjustment>,
        dist: Distance,
    ) -> TickState<'q> {
        let searches = queue.searches();
        let views: Vec<View> = searches
            .iter()
            .map(|s| View::of(s, now_ms, party))
            .collect();
        // The index coordinates of a search: the point on the sphere (km) and the weighted
        // skill.
        let index = KdIndex::new(
            views
                .iter()
                .zip(searches)
                .map(|(v, s)| IndexPoint {
                    coords: [v.xyz[0], v.xyz[1], v.xyz[2], dist.skill_km * v.skill],
                    device: input_slot(s.input),
                    platform: s.platform,
                    crossplay: s.crossplay,
                })
                .collect(),
            dist.input_km,
        );
        TickState {
            searches,
            taken: vec![false; views.len()],
            index,
            views,
            dist,
        }
    }

    pub(crate) fn distance(&self, a: usize, b: usize) -> f64 {
        self.dist.between(
            &self.views[a],
            &self.searches[a],
            &self.views[b],
            &self.searches[b],
        )
    }

    /// Marks searches as placed and drops them from the index.
    pub(crate) fn take(&mut self, ids: &[usize]) {
        for &i in ids {
            self.taken[i] = true;
            self.index.remove(i);
        }
    }

    /// Search indices in the order the policies visit them: oldest first, then by id.
    pub(crate) fn age_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.searches.len()).collect();
        order.sort_by_key(|&i| (self.searches[i].start_ms, self.searches[i].id));
        order
    }

    /// The `k` untaken searches nearest to `anchor` by the N-dimensional distance, nearest
    /// first (ties by index), platform-compatible with it.
    pub(crate) fn nearest(&self, anchor: usize, k: usize) -> Vec<(f64, usize)> {
        self.nearest_iter(anchor).take(k).collect()
    }

    /// The untaken searches platform-compatible with `anchor`, nearest first by the
    /// N-dimensional distance (ties by index), produced lazily so that a caller that stops after
    /// a few candidates pays for a few. Exact: see [`crate::knn`].
    pub(crate) fn nearest_iter(&self, anchor: usize) -> impl Iterator<Item = (f64, usize)> + '_ {
        self.index.walk(anchor)
    }

    /// Splits candidates of `anchor` into groups compatible with each other and with it: those
    /// of the anchor's platform and, when the anchor accepts cross-play, those that accept it
    /// too (a set is compatible exactly when it lies in one of the two). Order is kept.
    pub(crate) fn platform_groups(&self, anchor: usize, pool: &[usize]) -> Vec<Vec<usize>> {
        let a = &self.searches[anchor];
        let same: Vec<usize> = pool
            .iter()
            .copied()
            .filter(|&j| self.searches[j].platform == a.platform)
            .collect();
        let mut groups = vec![same];
        if a.crossplay {
            let cross: Vec<usize> = pool
                .iter()
                .copied()
                .filter(|&j| self.searches[j].crossplay)
                .collect();
            if cross != groups[0] {
                groups.push(cross);
            }
        }
        groups
    }

    /// Untaken searches platform-compatible with `anchor` and with each other (the pool the
    /// maximum-wait rule searches), nearest first. Two pools: the anchor's platform, and when the
    /// anchor accepts cross-play, every cross-play search.
    fn compatible_pools(&self, anchor: usize) -> Vec<Vec<usize>> {
        let a = &self.searches[anchor];
        let mut pools = Vec::new();
        let by_dist = |keep: &dyn Fn(&Search) -> bool| {
            let mut v: Vec<(f64, usize)> = (0..self.searches.len())
                .filter(|&j| j != anchor && !self.taken[j] && keep(&self.searches[j]))
                .map(|j| (self.distance(anchor, j), j))
                .collect();
            v.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            v.into_iter().map(|x| x.1).collect::<Vec<_>>()
        };
        pools.push(by_dist(&|s: &Search| s.platform == a.platform));
        if a.crossplay {
            pools.push(by_dist(&|s: &Search| s.crossplay));
        }
        pools
    }

    /// The maximum-wait rule: the nearest-first lobby of exactly two full teams that contains
    /// `anchor`, when one exists among the untaken searches. Exact: a suffix table of reachable
    /// (team A, team B) player counts says, at each candidate, whether taking it still leaves a
    /// way to fill both teams.
    pub(crate) fn rescue(&self, anchor: usize, team_size: usize) -> Option<Vec<usize>> {
        let t = team_size;
        let a0 = self.views[anchor].size;
        for pool in self.compatible_pools(anchor) {
            if let Some(mut picked) = fill_exact(&pool, |j| self.views[j].size, t, (a0, 0)) {
                picked.insert(0, anchor);
                return Some(picked);
            }
        }
        None
    }
}

/// Chooses candidates (in order, greedily) so that the parties already placed (`start` =
/// players on team A, team B) plus the chosen ones fill two teams of exactly `t`, taking a
/// candidate whenever the rest can still complete the teams. `None` when no choice completes
/// them.
pub(crate) fn fill_exact(
    cands: &[usize],
    size: impl Fn(usize) -> usize,
    t: usize,
    start: (usize, usize),
) -> Option<Vec<usize>> {
    let w = t + 1;
    let n = cands.len();
    // reach[i][a * w + b]: from counts (a, b), candidates i.. can complete (t, t).
    let mut reach = vec![false; (n + 1) * w * w];
    reach[n * w * w + t * w + t] = true;
    for i in (0..n).rev() {
        let s = size(cands[i]);
        for a in 0..=t {
            for b in 0..=t {
                let next = |aa: usize, bb: usize| reach[(i + 1) * w * w + aa * w + bb];
                let ok =
                    next(a, b) || (a + s <= t && next(a + s, b)) || (b + s <= t && next(a, b + s));
                reach[i * w * w + a * w + b] = ok;
            }
        }
    }
    let (mut a, mut b) = start;
    if a > t || b > t || !reach[a * w + b] {
        return None;
    }
    let mut picked = Vec::new();
    for i in 0..n {
        if a == t && b == t {
            break;
        }
        let s = size(cands[i]);
        let next = |aa: usize, bb: usize| reach[(i + 1) * w * w + aa * w + bb];
        if a + s <= t && next(a + s, b) {
            a += s;
            picked.push(cands[i]);
        } else if b + s <= t && next(a, b + s) {
            b += s;
            picked.push(cands[i]);
        }
    }
    (a == t && b == t).then_some(picked)
}

/// Whether parties of these sizes can be split into two teams of at most `t` (exactly `t` each
/// when `full`): some subset (team A) holds between `total - t` and `t` players.
///
/// The CoD paper's grouping phase runs Karmarkar–Karp; its yes implies this one (its two teams
/// are such a subset), and where it says no this exact check still finds the balanceable sets it
/// misses ({3, 3, 2, 2, 2} in teams of 6: it pairs the threes against each other). So the exact
/// check alone gives the same answer: it runs on every candidate a forming lobby considers, as
/// a bit set of reachable subset sums (one shift per party), without allocating.
#[must_use]
pub fn groupable(sizes: &[usize], t: usize, full: bool) -> bool {
    let total: usize = sizes.iter().sum();
    if total > 2 * t || (full && total != 2 * t) {
        return false;
    }
    let (lo, hi) = (total.saturating_sub(t), t.min(total));
    if total < 64 {
        let mut can: u64 = 1;
        for &s in sizes {
            can |= can << s;
        }
        let window = (u64::MAX >> (63 - (hi - lo))) << lo;
        return can & window != 0;
    }
    let mut can = vec![false; total + 1];
    can[0] = true;
    for &s in sizes {
        for a in (s..=total).rev() {
            if can[a - s] {
                can[a] = true;
            }
        }
    }
    (lo..=hi).any(|a| can[a])
}

/// The quality criteria of a lobby, each in [0, 1] (1 is best), and their weighted mean.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Quality {
    /// `1 - |2 P(A wins | decisive) - 1|`: each team has an even chance.
    pub balance: f64,
    /// One minus the spread of party skill percentiles (most minus least skilled party).
    pub skill_spread: f64,
    /// One minus the spread of party experience, `ln(1 + games)`, over `experience_scale`.
    pub experience: f64,
    /// One minus the gap between the two teams' best players' percentiles, over `top_scale`.
    pub top_player: f64,
    /// Party parity: one minus the L1 distance between the teams' sorted party sizes over its
    /// maximum `2 (team_size - 1)` (3 v 2+1 scores 0.5, 3 v 1+1+1 scores 0, as the Awesomenauts
    /// post grades them).
    pub parties: f64,
    /// One at `good_ping_ms` or better, zero at `bad_ping_ms`, on the worst member's ping to the
    /// lobby's data centre (or, without pings, a fibre estimate from the lobby's span).
    pub ping: f64,
    /// The oldest search's wait over the maximum wait.
    pub wait: f64,
    /// The weighted mean.
    pub total: f64,
}

/// Weights and scales of [`Quality`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QualityWeights {
    pub balance: f64,
    pub skill_spread: f64,
    pub experience: f64,
    pub top_player: f64,
    pub parties: f64,
    pub ping: f64,
    pub wait: f64,
    pub experience_scale: f64,
    pub top_scale: f64,
    pub good_ping_ms: f64,
    pub bad_ping_ms: f64,
}

impl Default for QualityWeights {
    /// Balance and skill first, ping close behind; party parity low because it reacts sharply
    /// (the Awesomenauts post's advice); wait small, so that it tips close calls only.
    fn default() -> Self {
        QualityWeights {
            balance: 3.0,
            skill_spread: 2.0,
            experience: 1.0,
            top_player: 1.0,
            parties: 0.5,
            ping: 2.0,
            wait: 0.5,
            experience_scale: 3.0,
            top_scale: 0.5,
            good_ping_ms: 30.0,
            bad_ping_ms: 150.0,
        }
    }
}

/// A formed lobby.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lobby {
    pub formed_ms: i64,
    /// Search ids of each team.
    pub teams: [Vec<SearchId>; 2],
    pub players: [usize; 2],
    /// Raw-skill sums with the party adjustment.
    pub skill: [f64; 2],
    /// Team A's P(win), P(draw), P(loss).
    pub p: [f64; 3],
    /// Expected number of the lobby's players who churn after it.
    pub expected_churn: f64,
    pub quality: Quality,
    /// The data centre chosen and the worst member ping to it, when pings are known.
    pub data_centre: Option<u16>,
    pub worst_ping_ms: Option<f64>,
    /// The longest wait among its searches, ms.
    pub max_wait_ms: i64,
    /// Formed by the maximum-wait rule rather than the policy's own rules.
    pub rescued: bool,
}

impl Lobby {
    /// Every search id of the lobby.
    pub fn search_ids(&self) -> impl Iterator<Item = SearchId> + '_ {
        self.teams[0].iter().chain(&self.teams[1]).copied()
    }
}

/// The data centre where the lobby's worst extra ping (over each search's best) is least, with
/// that extra ping and the worst ping there. `Ok(None)` when no search knows its pings; `Err(())`
/// when searches with pings share no data centre.
pub(crate) fn best_data_centre(
    searches: &[Search],
    ids: &[usize],
) -> Result<Option<(u16, f64, f64)>, ()> {
    let known: Vec<usize> = ids
        .iter()
        .copied()
        .filter(|&i| !searches[i].pings.is_empty())
        .collect();
    if known.is_empty() {
        return Ok(None);
    }
    let mut best: Option<(u16, f64, f64)> = None;
    for &(dc, _) in &searches[known[0]].pings {
        let mut worst_delta = 0.0f64;
        let mut worst = 0.0f64;
        let mut all = true;
        for &i in &known {
            let s = &searches[i];
            let Some(&(_, p)) = s.pings.iter().find(|x| x.0 == dc) else {
                all = false;
                break;
            };
            let own_best = s.pings.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
            worst_delta = worst_delta.max(f64::from(p - own_best));
            worst = worst.max(f64::from(p));
        }
        if all && best.is_none_or(|b| (worst_delta, worst, dc) < (b.1, b.2, b.0)) {
            best = Some((dc, worst_delta, worst));
        }
    }
    best.map(Some).ok_or(())
}

/// Scores a split lobby: outcome probabilities, expected churn and quality.
pub(crate) struct Scored {
    pub p: [f64; 3],
    pub churn: f64,
    pub quality: Quality,
    pub dc: Option<(u16, f64, f64)>,
}

pub(crate) fn team_sample(views: &[View], teams: &[Vec<usize>; 2]) -> TeamSample {
    let sum =
        |t: usize, f: &dyn Fn(&View) -> f64| teams[t].iter().map(|&i| f(&views[i])).sum::<f64>();
    TeamSample {
        skill_diff: sum(0, &|v| v.raw_sum) - sum(1, &|v| v.raw_sum),
        party_members_diff: sum(0, &|v| v.party_members) - sum(1, &|v| v.party_members),
        party_spread_diff: sum(0, &|v| v.party_spread) - sum(1, &|v| v.party_spread),
        outcome: 0.0,
    }
}

/// Expected churn of a split: each team's churn sums weighted by its outcome probabilities.
pub(crate) fn split_churn(views: &[View], teams: &[Vec<usize>; 2], p: [f64; 3]) -> f64 {
    let mut c = 0.0;
    for (t, pr) in [(0, p), (1, [p[2], p[1], p[0]])] {
        for &i in &teams[t] {
            let v = &views[i];
            c += pr[0] * v.churn[0] + pr[1] * v.churn[1] + pr[2] * v.churn[2];
        }
    }
    c
}

pub(crate) fn score_split(
    st: &TickState<'_>,
    models: &LobbyModels,
    w: &QualityWeights,
    teams: &[Vec<usize>; 2],
    team_size: usize,
    max_wait_s: f64,
) -> Scored {
    let views = &st.views;
    let sample = team_sample(views, teams);
    let (pw, pd, pl) = models.win.probs(&sample);
    let p = [pw, pd, pl];
    let decisive = mm_artifact::team::sigmoid(models.win.logit(&sample));
    let all: Vec<usize> = teams[0].iter().chain(&teams[1]).copied().collect();
    let spread = |f: &dyn Fn(&View) -> f64| {
        let (lo, hi) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &i| {
                let x = f(&views[i]);
                (lo.min(x), hi.max(x))
            });
        hi - lo
    };
    let top = |t: usize| {
        teams[t]
            .iter()
            .map(|&i| views[i].pct_max)
            .fold(0.0f64, f64::max)
    };
    let mut sizes: [Vec<usize>; 2] = [
        teams[0].iter().map(|&i| views[i].size).collect(),
        teams[1].iter().map(|&i| views[i].size).collect(),
    ];
    for s in &mut sizes {
        s.sort_unstable_by(|a, b| b.cmp(a));
    }
    let len = sizes[0].len().max(sizes[1].len());
    let l1: usize = (0..len)
        .map(|k| {
            sizes[0]
                .get(k)
                .copied()
                .unwrap_or(0)
                .abs_diff(sizes[1].get(k).copied().unwrap_or(0))
        })
        .sum();
    let parties = if team_size <= 1 {
        1.0
    } else {
        1.0 - (l1 as f64 / (2 * (team_size - 1)) as f64).min(1.0)
    };
    let dc = best_data_centre(st.searches, &all);
    let worst_ping = match dc {
        Ok(Some((_, _, worst))) => worst,
        Ok(None) => {
            // Fibre round trip: about 1 ms per 100 km of the lobby's widest span, plus 10 ms.
            let mut span = 0.0f64;
            for (x, &i) in all.iter().enumerate() {
                for &j in &all[x + 1..] {
                    span = span.max(great_circle_km(&views[i].xyz, &views[j].xyz));
                }
            }
            10.0 + span / 100.0
        }
        Err(()) => f64::INFINITY,
    };
    let ping = 1.0
        - ((worst_ping - w.good_ping_ms) / (w.bad_ping_ms - w.good_ping_ms).max(1e-9))
            .clamp(0.0, 1.0);
    let oldest = all.iter().map(|&i| views[i].age_s).fold(0.0f64, f64::max);
    let mut q = Quality {
        balance: 1.0 - (2.0 * decisive - 1.0).abs(),
        skill_spread: 1.0 - spread(&|v| v.skill).clamp(0.0, 1.0),
        experience: 1.0 - (spread(&|v| v.exp) / w.experience_scale).clamp(0.0, 1.0),
        top_player: 1.0 - ((top(0) - top(1)).abs() / w.top_scale).clamp(0.0, 1.0),
        parties,
        ping,
        wait: (oldest / max_wait_s.max(1e-9)).clamp(0.0, 1.0),
        total: 0.0,
    };
    let wsum =
        w.balance + w.skill_spread + w.experience + w.top_player + w.parties + w.ping + w.wait;
    q.total = (w.balance * q.balance
        + w.skill_spread * q.skill_spread
        + w.experience * q.experience
        + w.top_player * q.top_player
        + w.parties * q.parties
        + w.ping * q.ping
        + w.wait * q.wait)
        / wsum.max(1e-12);
    Scored {
        p,
        churn: split_churn(views, teams, p),
        quality: q,
        dc: dc.ok().flatten(),
    }
}

/// The CoD lobby-phase split of the searches `ids` (exhaustive: fewest size difference, then the
/// least difference of adjusted skill sums), as search indices per team.
pub(crate) fn balanced_split(
    views: &[View],
    ids: &[usize],
    team_size: usize,
) -> Option<[Vec<usize>; 2]> {
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party {
            size: views[i].size,
            skill: views[i].adj_sum,
        })
        .collect();
    let split: Split = best_split(&parties, team_size).ok()?;
    if split.sizes != [team_size, team_size] {
        return None;
    }
    Some([
        split.teams[0].iter().map(|&k| ids[k]).collect(),
        split.teams[1].iter().map(|&k| ids[k]).collect(),
    ])
}

/// Builds the [`Lobby`] record of a split.
pub(crate) fn make_lobby(
    st: &TickState<'_>,
    teams: [Vec<usize>; 2],
    scored: &Scored,
    now_ms: i64,
    rescued: bool,
) -> Lobby {
    let v = &st.views;
    let sum = |t: usize, f: &dyn Fn(&View) -> f64| teams[t].iter().map(|&i| f(&v[i])).sum::<f64>();
    let max_wait_ms = teams[0]
        .iter()
        .chain(&teams[1])
        .map(|&i| now_ms - st.searches[i].start_ms)
        .max()
        .unwrap_or(0)
        .max(0);
    Lobby {
        formed_ms: now_ms,
        players: [
            teams[0].iter().map(|&i| v[i].size).sum(),
            teams[1].iter().map(|&i| v[i].size).sum(),
        ],
        skill: [sum(0, &|x| x.adj_sum), sum(1, &|x| x.adj_sum)],
        p: scored.p,
        expected_churn: scored.churn,
        quality: scored.quality,
        data_centre: scored.dc.map(|d| d.0),
        worst_ping_ms: scored.dc.map(|d| d.2),
        max_wait_ms,
        rescued,
        teams: [
            teams[0].iter().map(|&i| st.searches[i].id).collect(),
            teams[1].iter().map(|&i| st.searches[i].id).collect(),
        ],
    }
}

/// Places every search that has waited `max_wait_s` or more and is still unplaced, oldest
/// first, in the nearest feasible lobby (see [`TickState::rescue`]), split by the CoD
/// lobby-phase rule.
pub(crate) fn rescue_overdue(
    st: &mut TickState<'_>,
    models: &LobbyModels,
    w: &QualityWeights,
    team_size: usize,
    max_wait_s: f64,
    now_ms: i64,
) -> Vec<Lobby> {
    let mut out = Vec::new();
    for a in st.age_order() {
        if st.taken[a] || st.views[a].age_s < max_wait_s {
            continue;
        }
        let Some(ids) = st.rescue(a, team_size) else {
            continue;
        };
        let Some(teams) = balanced_split(&st.views, &ids, team_size) else {
            continue;
        };
        let scored = score_split(st, models, w, &teams, team_size, max_wait_s);
        out.push(make_lobby(st, teams, &scored, now_ms, true));
        st.take(&ids);
    }
    out
}

/// A rule of a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The candidate's party does not fit the players still needed.
    LobbyFull,
    /// Different platforms, not both accepting cross-play.
    Platform,
    /// CoD skill similarity: intersection of skill ranges.
    SkillSimilarity,
    /// CoD skill disparity bound.
    SkillDisparity,
    /// Extra ping over each search's best data centre.
    Ping,
    /// The parties could not be split into two teams.
    TeamBalance,
    /// The best lobby found scores below the threshold.
    Quality,
    /// EOMM: the lobby would be too unbalanced (`max_imbalance`).
    Imbalance,
    /// Not enough compatible players nearby.
    NotEnoughPlayers,
}

/// What holds one rule against a queued search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Blocker {
    pub rule: Rule,
    /// Candidates this rule refused.
    pub candidates: usize,
    /// When backoff will have loosened the rule enough for the nearest refused candidate (or,
    /// for the quality threshold, for the best lobby found), ms since the epoch; `None` if never.
    pub relaxes_at_ms: Option<i64>,
    pub detail: String,
}

/// Why a search is still queued.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub search: SearchId,
    pub wait_ms: i64,
    /// Players gathered for a lobby around it now, and the players a lobby needs.
    pub players_found: usize,
    pub players_needed: usize,
    /// Rules in the order of the candidates they refused, most first.
    pub blockers: Vec<Blocker>,
    /// When the maximum-wait rule places it in any feasible lobby.
    pub max_wait_at_ms: i64,
}

/// A matchmaking policy for a live queue. Deterministic for a seed when no time budget is set.
pub trait Policy {
    fn name(&self) -> &'static str;

    /// Forms lobbies from the queue at `now_ms`, removes their searches from it and returns them.
    fn tick(&mut self, now_ms: i64, queue: &mut Queue) -> Vec<Lobby>;

    /// Why the search `id` is still queued.
    ///
    /// # Errors
    /// The search is not in the queue.
    fn explain(&self, now_ms: i64, queue: &Queue, id: SearchId) -> Result<Explanation, QueueError>;

    /// The policy's own rules for a lobby formed at `now_ms` from `queue` (the queue as it was
    /// before the tick); `Err` names the rule the lobby breaks. Rescued lobbies are checked
    /// against the maximum-wait rule instead.
    ///
    /// # Errors
    /// The rule the lobby breaks.
    fn check(&self, now_ms: i64, queue: &Queue, lobby: &Lobby) -> Result<(), Rule>;
}

/// A deadline from an optional budget.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Option<Instant>);

impl Deadline {
    pub(crate) fn after(budget: Option<Duration>) -> Deadline {
        Deadline(budget.map(|b| Instant::now() + b))
    }

    pub(crate) fn passed(&self) -> bool {
        self.0.is_some_and(|d| Instant::now() >= d)
    }
}

/// Shared structural checks of a lobby: each search once, full equal teams, parties intact,
/// platforms compatible; returns the search indices per team.
pub(crate) fn check_structure(queue: &Queue, lobby: &Lobby) -> Result<[Vec<usize>; 2], Rule> {
    let t = queue.mode().team_size;
    let idx = |id: SearchId| queue.searches().iter().position(|s| s.id == id);
    let mut teams: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for (team, ids) in teams.iter_mut().zip(&lobby.teams) {
        for &id in ids {
            team.push(idx(id).ok_or(Rule::TeamBalance)?);
        }
    }
    let mut all: Vec<usize> = teams[0].iter().chain(&teams[1]).copied().collect();
    let size = |i: usize| queue.searches()[i].members.len();
    for team in &teams {
        if team.iter().map(|&i| size(i)).sum::<usize>() != t {
            return Err(Rule::TeamBalance);
        }
    }
    all.sort_unstable();
    if all.windows(2).any(|w| w[0] == w[1]) {
        return Err(Rule::TeamBalance);
    }
    let s = queue.searches();
    for (x, &i) in all.iter().enumerate() {
        for &j in &all[x + 1..] {
            if !platforms_compatible(&s[i], &s[j]) {
                return Err(Rule::Platform);
            }
        }
    }
    Ok(teams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_interpolates_and_inverts() {
        let b = Backoff::new(&[(0.0, 0.05), (10.0, 0.1), (30.0, 0.2)]);
        assert!((b.at(-5.0) - 0.05).abs() < 1e-12);
        assert!((b.at(5.0) - 0.075).abs() < 1e-12);
        assert!((b.at(20.0) - 0.15).abs() < 1e-12);
        assert!((b.at(99.0) - 0.2).abs() < 1e-12);
        assert_eq!(b.age_at_least(0.04), Some(0.0));
        assert!((b.age_at_least(0.15).expect("reached") - 20.0).abs() < 1e-9);
        assert_eq!(b.age_at_least(0.3), None);
        let t = Backoff::new(&[(0.0, 0.9), (60.0, 0.6)]);
        assert!((t.age_at_most(0.75).expect("falls") - 30.0).abs() < 1e-9);
        assert_eq!(t.age_at_most(0.5), None);
        assert!((t.progress(30.0) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn grouping_accepts_what_karmarkar_karp_refuses() {
        // The CoD paper's 6v6 examples.
        assert!(groupable(&[3, 2, 2, 1], 6, false));
        assert!(!groupable(&[4, 4, 3], 6, false));
        assert!(groupable(&[3, 2, 2, 2, 1], 6, false));
        // Full lobby of 12: {3,3} v {2,2,2}. Largest differencing alone pairs 3 against 3.
        assert!(crate::teams::balanceable(&[3, 3, 2, 2, 2], 6, 2, true).is_none());
        assert!(groupable(&[3, 3, 2, 2, 2], 6, true));
        assert!(!groupable(&[5, 5, 2], 6, true));
    }

    /// Against brute force over every team assignment, on every multiset of up to 7 parties of
    /// 1 to 5 players, for teams of 3 to 8; Karmarkar–Karp's yes is always a yes here.
    #[test]
    fn grouping_is_exact() {
        fn all(prefix: &mut Vec<usize>, left: usize, out: &mut Vec<Vec<usize>>) {
            out.push(prefix.clone());
            if left == 0 {
                return;
            }
            let from = prefix.last().copied().unwrap_or(1);
            for s in from..=5 {
                prefix.push(s);
                all(prefix, left - 1, out);
                prefix.pop();
            }
        }
        let mut sets = Vec::new();
        all(&mut Vec::new(), 7, &mut sets);
        for t in 3..=8 {
            for sizes in &sets {
                let total: usize = sizes.iter().sum();
                for full in [false, true] {
                    let brute = (0u32..1 << sizes.len()).any(|m| {
                        let a: usize = (0..sizes.len())
                            .filter(|&i| m >> i & 1 == 1)
                            .map(|i| sizes[i])
                            .sum();
                        let b = total - a;
                        a <= t && b <= t && (!full || a + b == 2 * t)
                    });
                    assert_eq!(groupable(sizes, t, full), brute, "{sizes:?} t={t} {full}");
                    // (groupable asks Karmarkar–Karp only of a full lobby's exact size.)
                    if (!full || total == 2 * t)
                        && crate::teams::balanceable(sizes, t, 2, full).is_some()
                    {
                        assert!(brute, "{sizes:?}");
                    }
                }
            }
        }
    }

    /// The index walk gives exactly the brute-force order (distance, then index) of the
    /// untaken, platform-compatible searches, on realistic queues with searches being placed.
    #[test]
    fn nearest_walk_equals_brute_force() {
        let now = 1_700_000_000_000;
        for seed in 0..6u64 {
            let q = crate::sim_queue::realistic_queue(400, 6, now, 90.0, 0, seed);
            let dist = if seed % 2 == 0 {
                Distance::default()
            } else {
                // Heavier skill and input terms change which bound binds.
                Distance {
                    skill_km: 20_000.0,
                    input_km: 3_000.0,
                }
            };
            let mut st = TickState::new(&q, now, None, dist);
            let n = st.searches.len();
            let mut rng = seed * 7 + 1;
            for round in 0..8 {
                for a in (round..n).step_by(37) {
                    let brute = {
                        let mut v: Vec<(f64, usize)> = (0..n)
                            .filter(|&j| {
                                j != a
                                    && !st.taken[j]
                                    && platforms_compatible(&st.searches[a], &st.searches[j])
                            })
                            .map(|j| (st.distance(a, j), j))
                            .collect();
                        v.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
                        v
                    };
                    let walk: Vec<(f64, usize)> = st.nearest_iter(a).collect();
                    assert_eq!(walk, brute, "seed {seed}, round {round}, anchor {a}");
                }
                // Place a random tenth of the searches.
                let ids: Vec<usize> = (0..n / 10)
                    .map(|_| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        (rng % n as u64) as usize
                    })
                    .collect();
                st.take(&ids);
            }
        }
    }

    #[test]
    fn fill_exact_finds_a_fill_whenever_one_exists() {
        // Brute force over all subsets of small candidate lists.
        let mut rng = 12345u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for _ in 0..2000 {
            let t = 1 + (next() % 6) as usize;
            let n = (next() % 9) as usize;
            let sizes: Vec<usize> = (0..n).map(|_| 1 + (next() % t as u64) as usize).collect();
            let a0 = 1 + (next() % t as u64) as usize;
            let got = fill_exact(&(0..n).collect::<Vec<_>>(), |i| sizes[i], t, (a0, 0));
            let mut exists = false;
            for m in 0u32..1 << n {
                let mut s = vec![a0];
                s.extend((0..n).filter(|i| m >> i & 1 == 1).map(|i| sizes[i]));
                if s.iter().sum::<usize>() == 2 * t && groupable(&s, t, true) {
                    exists = true;
                    break;
                }
            }
            assert_eq!(got.is_some(), exists, "t={t} a0={a0} sizes={sizes:?}");
            if let Some(p) = got {
                let mut s = vec![a0];
                s.extend(p.iter().map(|&i| sizes[i]));
                assert!(groupable(&s, t, true));
            }
        }
    }

    /// A service builds members from the artifact: the same churn by outcome and skill as the
    /// 1v1 scoring path (`from_artifact`) gives for a solo player, and a new player at raw
    /// skill 0; the lobby models are the artifact's.
    #[test]
    fn members_from_an_artifact_agree_with_the_pool_scoring() {
        let dir = std::env::temp_dir().join(format!("mm-queue-art-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = mm_artifact::Store::new(&dir);
        let (m, files) = mm_artifact::synthetic::artifact(100, 9);
        store.publish("v1", m, &files, true, None).expect("publish");
        let art = store.open_latest().expect("load");
        let now = art.manifest.snapshot_as_of_ms + 600_000;
        let ids: Vec<String> = (0..10)
            .map(|i| art.snapshot.id(i * 7).to_string())
            .collect();
        let pool = crate::from_artifact::ArtifactPool::new(&art, &ids, now).expect("pool");
        for (k, id) in ids.iter().enumerate() {
            let state = art.snapshot.get(id).expect("held");
            let m = Member::from_state(&art, &state, now, false);
            assert_eq!(m.churn, pool.churn.by_outcome[k]);
            assert_eq!(m.raw_skill, pool.skills[k]);
            assert!(m.churn[0] <= 1.0 && m.churn[2] >= 0.0);
        }
        let fresh = Member::new_player(&art, "newcomer", now, true);
        assert_eq!(fresh.raw_skill, 0.0);
        assert_eq!(fresh.games, 0);
        let models = LobbyModels::from_artifact(&art).expect("a win model");
        assert_eq!(Some(models.win), art.team_win);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn great_circle_matches_the_haversine_formula() {
        // London to New York, about 5,570 km.
        let a = unit_xyz(51.5074, -0.1278);
        let b = unit_xyz(40.7128, -74.0060);
        let d = great_circle_km(&a, &b);
        assert!((d - 5570.0).abs() < 10.0, "{d}");
        assert!(great_circle_km(&a, &a).abs() < 1e-9);
    }
}
