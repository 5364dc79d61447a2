//! One tick's working state: per-search views, the nearest-candidate index, the taken flags
//! and the maximum-wait rule's exact lobby search.

use std::time::{Duration, Instant};

use mm_artifact::team::PartyAdjustment;
use serde::{Deserialize, Serialize};

use super::Queue;
use super::member::{Input, Search};
use crate::geo::{great_circle_km, unit_xyz};
use crate::knn::{IndexPoint, KdIndex};

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
    /// Sum of the skill the team win model reads ([`crate::queue::Member::outcome_skill`]).
    pub outcome_sum: f64,
    /// Players in a party of two or more, and the sum over them of the standard deviation of
    /// their party's outcome skills (the win model's party spread).
    pub party_members: f64,
    pub party_spread: f64,
    /// Mean experience, `ln(1 + games)` (the Dota 2 post's logarithmic experience).
    pub exp: f64,
    /// Sums of churn after a win, a draw, a loss, a close loss and a blowout loss (the last two
    /// the loss's for a member whose churn does not tell them apart).
    pub churn: [f64; 5],
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
            outcome_sum: 0.0,
            party_members: 0.0,
            party_spread: 0.0,
            exp: s
                .members
                .iter()
                .map(|m| (m.games as f64).ln_1p())
                .sum::<f64>()
                / n,
            churn: [0.0; 5],
            age_s: ((now_ms - s.start_ms) as f64 / 1000.0).max(0.0),
            xyz: unit_xyz(s.lat, s.lon),
        };
        for m in &s.members {
            v.pct_min = v.pct_min.min(m.percentile);
            v.pct_max = v.pct_max.max(m.percentile);
            v.raw_sum += m.raw_skill;
            v.outcome_sum += m.outcome_skill;
            let [close, blowout] = m.churn_after_losses();
            for (k, c) in m.churn.iter().chain(&[close, blowout]).enumerate() {
                v.churn[k] += c;
            }
        }
        v.adj_sum = v.raw_sum;
        if s.members.len() >= 2 {
            let sd = |x: &dyn Fn(&super::Member) -> f64, sum: f64| {
                let mean = sum / n;
                let var = s.members.iter().map(|m| (x(m) - mean).powi(2)).sum::<f64>() / n;
                var.max(0.0).sqrt()
            };
            v.party_members = n;
            v.party_spread = n * sd(&|m| m.outcome_skill, v.outcome_sum);
            if let Some(adj) = party {
                // The adjustment is in raw-skill units, per unit of the raw skills' spread.
                v.adj_sum += n * adj.for_spread(sd(&|m| m.raw_skill, v.raw_sum));
            }
        }
        v
    }

    pub(crate) fn disparity(&self) -> f64 {
        self.pct_max - self.pct_min
    }
}

fn input_slot(i: Input) -> u8 {
    match i {
        Input::Controller => 0,
        Input::KeyboardMouse => 1,
        Input::Touch => 2,
    }
}

/// A search's point in the nearest-candidate index: `xyz` on the sphere (km) and the skill
/// percentile `skill` weighted by `dist`, with `s`'s input device and platform.
pub(crate) fn index_point(xyz: [f64; 3], skill: f64, s: &Search, dist: &Distance) -> IndexPoint {
    IndexPoint {
        coords: [xyz[0], xyz[1], xyz[2], dist.skill_km * skill],
        device: input_slot(s.input),
        platform: s.platform,
        crossplay: s.crossplay,
    }
}

/// Whether two searches may share a lobby: same platform, or both accept cross-play.
#[must_use]
pub fn platforms_compatible(a: &Search, b: &Search) -> bool {
    crate::geo::compatible(a.platform, a.crossplay, b.platform, b.crossplay)
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
        let mut st = TickState::for_scoring(queue, now_ms, party, dist);
        // The index coordinates of a search: the point on the sphere (km) and the weighted
        // skill.
        st.index = KdIndex::new(
            st.views
                .iter()
                .zip(st.searches)
                .map(|(v, s)| index_point(v.xyz, v.skill, s, &dist))
                .collect(),
            dist.input_km,
        );
        st
    }

    /// The views of `queue`'s searches at `now_ms` for scoring a lobby of them, without the
    /// nearest-candidate index (its nearest-candidate queries find nothing).
    pub(crate) fn for_scoring(
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
        TickState {
            searches,
            taken: vec![false; views.len()],
            index: KdIndex::new(Vec::new(), dist.input_km),
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
