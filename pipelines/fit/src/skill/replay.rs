//! Replays of the match history through our raw skill and through the baselines, under one
//! evaluation protocol: every match is predicted before the model learns from it; predictions
//! in the tuning window `[tune_from, tune_to)` choose hyperparameters, and predictions in the
//! later scoring window `[score_from, score_to]` are the reported figures.

use std::time::Instant;

use mm_artifact::team::party_sd;
use mm_trainer::skill::baselines::{Baseline, BaselineParams};
use mm_trainer::skill::raw::{RawSkill, ValidRawSkillParams};
use mm_trainer::skill::team::{PartyAdjustment, TeamSample};
use mm_trainer::stats::{BinaryScore, sigmoid};
use serde::Serialize;

use crate::skill::history::{History, MatchRef};

/// Time windows in ms since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Windows {
    pub tune_from: i64,
    pub tune_to: i64,
    pub score_from: i64,
    pub score_to: i64,
}

impl Windows {
    #[must_use]
    pub fn in_tune(&self, t: i64) -> bool {
        (self.tune_from..self.tune_to).contains(&t)
    }

    #[must_use]
    pub fn in_score(&self, t: i64) -> bool {
        (self.score_from..=self.score_to).contains(&t)
    }
}

/// Quantiles of the raw skill of the players seen in one stretch of time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistPoint {
    pub end_ms: i64,
    pub players: usize,
    /// The 5th, 25th, 50th, 75th and 95th percentiles.
    pub q: [f64; 5],
}

/// What a replay of our model collected.
#[derive(Debug)]
pub struct OursRun {
    pub model: RawSkill,
    /// Two-team matches in the tuning and in the scoring window, seen before they were played.
    pub tune: Vec<TeamSample>,
    pub score: Vec<TeamSample>,
    /// "i outperforms j" on the metric, every pair of the lobbies of the tuning and of the
    /// scoring window.
    pub pairwise_tune: BinaryScore,
    pub pairwise: BinaryScore,
    pub last_seen: Vec<i64>,
    pub updates: u64,
    pub seconds: f64,
    pub dist: Vec<DistPoint>,
    /// Each row's raw skill just before its match (`NaN` for rows not replayed): what the churn
    /// model reads as the player's skill at the time.
    pub pre_skill: Vec<f32>,
}

/// Pre-match team features of a two-team match from the players' skills (`skill(player)`).
#[must_use]
pub fn team_sample(h: &History, m: &MatchRef, skill: &impl Fn(u32) -> f64) -> TeamSample {
    let (lo, hi) = (m.lo as usize, m.hi as usize);
    let values: Vec<f64> = h.player[lo..hi].iter().map(|&p| skill(p)).collect();
    let mut s = sample_of(
        &values,
        &h.party[lo..hi],
        (m.split - m.lo) as usize,
        m.score_a,
    );
    s.margin = f64::from(m.margin_a);
    s
}

/// Team A's features of one match from its rows' skills `values` and parties `parties` (team A
/// the first `split` rows): the skill sums' difference, and per team its party members and the
/// sum over them of their party's skill standard deviation.
#[must_use]
pub fn sample_of(values: &[f64], parties: &[u16], split: usize, outcome: f64) -> TeamSample {
    let side = |lo: usize, hi: usize| {
        let (vals, pars) = (&values[lo..hi], &parties[lo..hi]);
        let (mut sum, mut members, mut spread) = (0.0, 0.0, 0.0);
        for (&x, &p) in vals.iter().zip(pars) {
            sum += x;
            if p != 0 {
                members += 1.0;
                spread += party_sd(vals, pars, p);
            }
        }
        (sum, members, spread)
    };
    let (a, b) = (side(0, split), side(split, values.len()));
    TeamSample {
        skill_diff: a.0 - b.0,
        party_members_diff: a.1 - b.1,
        party_spread_diff: a.2 - b.2,
        outcome,
        margin: f64::NAN,
    }
}

/// Replays matches that start before `until` through the raw skill. With `offsets`, a party
/// member is compared as `r + adjustment` (see `RawSkill::update_adjusted`). With
/// `dist_bucket_ms`, records the skill distribution of the players seen in each stretch.
pub fn run_ours(
    h: &History,
    params: ValidRawSkillParams,
    offsets: Option<PartyAdjustment>,
    until: i64,
    win: &Windows,
    dist_bucket_ms: Option<i64>,
) -> OursRun {
    let mut replay = OursReplay::new(params, offsets, until, *win, dist_bucket_ms, usize::MAX);
    let mut pre = vec![f32::NAN; h.rows()];
    replay.feed(h, &mut pre);
    let mut run = replay.finish();
    run.last_seen.resize(h.ids.len(), i64::MIN);
    run.pre_skill = pre;
    run
}

/// Keeps every `stride`-th item pushed, doubling the stride (and dropping every other item
/// kept) whenever `cap` would be passed: a systematic sample of between `cap / 2` and `cap`
/// items spread evenly over everything pushed, in bounded memory. With no cap, every item.
#[derive(Debug)]
pub struct Thinned<T> {
    pub items: Vec<T>,
    cap: usize,
    stride: u64,
    pushed: u64,
}

impl<T> Thinned<T> {
    #[must_use]
    pub fn new(cap: usize) -> Self {
        Thinned {
            items: Vec::new(),
            cap: cap.max(2),
            stride: 1,
            pushed: 0,
        }
    }

    pub fn push(&mut self, x: T) {
        if self.pushed.is_multiple_of(self.stride) {
            if self.items.len() == self.cap {
                let mut k = 0;
                self.items.retain(|_| {
                    k += 1;
                    k % 2 == 1
                });
                self.stride *= 2;
            }
            if self.pushed.is_multiple_of(self.stride) {
                self.items.push(x);
            }
        }
        self.pushed += 1;
    }
}

/// A replay of our raw skill fed one stretch of history at a time (a whole history, or a
/// lake's days in order with shared player numbers), so its memory is the players' state.
#[derive(Debug)]
pub struct OursReplay {
    model: RawSkill,
    scale: f64,
    offsets: Option<PartyAdjustment>,
    until: i64,
    win: Windows,
    dist_bucket_ms: Option<i64>,
    bucket_end: Option<i64>,
    tune: Thinned<TeamSample>,
    score: Thinned<TeamSample>,
    pairwise_tune: BinaryScore,
    pairwise: BinaryScore,
    last_seen: Vec<i64>,
    updates: u64,
    seconds: f64,
    dist: Vec<DistPoint>,
    seen: Vec<u32>,
    lobby: Vec<(usize, f64)>,
    offs: Vec<f64>,
    values: Vec<f64>,
}

impl OursReplay {
    /// A replay of matches starting before `until`; at most `max_samples` team samples are kept
    /// per window (a systematic sample, see [`Thinned`]).
    #[must_use]
    pub fn new(
        params: ValidRawSkillParams,
        offsets: Option<PartyAdjustment>,
        until: i64,
        win: Windows,
        dist_bucket_ms: Option<i64>,
        max_samples: usize,
    ) -> Self {
        OursReplay {
            model: RawSkill::new(params),
            scale: params.params().scale,
            offsets,
            until,
            win,
            dist_bucket_ms,
            bucket_end: None,
            tune: Thinned::new(max_samples),
            score: Thinned::new(max_samples),
            pairwise_tune: BinaryScore::default(),
            pairwise: BinaryScore::default(),
            last_seen: Vec::new(),
            updates: 0,
            seconds: 0.0,
            dist: Vec::new(),
            seen: Vec::new(),
            lobby: Vec::new(),
            offs: Vec::new(),
            values: Vec::new(),
        }
    }

    /// The replay continued from known states: player `i` of the histories fed starts at
    /// `start[i]` (an artifact's snapshot, say) instead of a new player's 0 skill and 0 games.
    #[must_use]
    pub fn resume(mut self, start: Vec<mm_trainer::skill::raw::PlayerSkill>) -> Self {
        self.model.set_players(start);
        self
    }

    /// Replays the matches of `h`, which follow every match fed before (players numbered
    /// alike), and writes each replayed row's pre-match raw skill into `pre` (`h.rows()` long;
    /// rows not replayed are left as they are). Returns false once `until` is reached.
    pub fn feed(&mut self, h: &History, pre: &mut [f32]) -> bool {
        let t0 = Instant::now();
        let scale = self.scale;
        if self.bucket_end.is_none() {
            self.bucket_end = h
                .matches
                .first()
                .zip(self.dist_bucket_ms)
                .map(|(m, b)| m.start_ms + b);
        }
        let mut more = true;
        for m in &h.matches {
            if m.start_ms >= self.until {
                more = false;
                break;
            }
            if let (Some(end), Some(b)) = (self.bucket_end, self.dist_bucket_ms)
                && m.start_ms >= end
            {
                self.dist.push(dist_point(&self.model, &mut self.seen, end));
                self.bucket_end = Some(end + b * ((m.start_ms - end) / b + 1));
            }
            let rows = m.lo as usize..m.hi as usize;
            let roles = h.role.get(rows.clone()).unwrap_or(&[]);
            self.lobby.clear();
            self.lobby
                .extend(rows.clone().map(|r| (h.player[r] as usize, h.metric[r])));
            let model = &self.model;
            let skill = |p: u32| model.skill(p as usize);
            for r in rows.clone() {
                pre[r] = skill(h.player[r]) as f32;
            }
            let (tune, score) = (self.win.in_tune(m.start_ms), self.win.in_score(m.start_ms));
            if m.two_teams() && (tune || score) {
                let s = team_sample(h, m, &skill);
                if tune {
                    self.tune.push(s);
                } else {
                    self.score.push(s);
                }
            }
            let pairs = if score {
                Some(&mut self.pairwise)
            } else if tune {
                Some(&mut self.pairwise_tune)
            } else {
                None
            };
            if let Some(acc) = pairs {
                // The pairs the model compares, on the values it compares (see
                // `RoleComparison`).
                model.compared_values(&self.lobby, roles, &mut self.values);
                let role = |k: usize| roles.get(k).copied().unwrap_or(0);
                for (a, &(i, _)) in self.lobby.iter().enumerate() {
                    for (b, &(j, _)) in self.lobby.iter().enumerate().skip(a + 1) {
                        let (xi, xj) = (self.values[a], self.values[b]);
                        if xi.is_finite()
                            && xj.is_finite()
                            && xi != xj
                            && model.compares(role(a), role(b))
                        {
                            let p = sigmoid(scale * (skill(i as u32) - skill(j as u32)));
                            acc.add(p, f64::from(u8::from(xi > xj)));
                        }
                    }
                }
            }
            self.offs.clear();
            if let Some(adj) = self.offsets {
                let parties = &h.party[rows.clone()];
                let values: Vec<f64> = rows.clone().map(|r| skill(h.player[r])).collect();
                self.offs.extend(parties.iter().map(|&p| match p {
                    0 => 0.0,
                    p => adj.for_spread(party_sd(&values, parties, p)),
                }));
            }
            self.model.update_with_roles(&self.lobby, &self.offs, roles);
            for &(i, _) in &self.lobby {
                if i >= self.last_seen.len() {
                    self.last_seen.resize(i + 1, i64::MIN);
                }
                self.last_seen[i] = m.start_ms;
            }
            if self.dist_bucket_ms.is_some() {
                self.seen.extend(self.lobby.iter().map(|&(i, _)| i as u32));
            }
            self.updates += self.lobby.len() as u64;
        }
        self.seconds += t0.elapsed().as_secs_f64();
        more
    }

    /// What the replay collected (`pre_skill` empty: the rows' skills went to `feed`'s `pre`;
    /// `last_seen` as long as the highest player number replayed).
    #[must_use]
    pub fn finish(mut self) -> OursRun {
        if let Some(end) = self.bucket_end
            && !self.seen.is_empty()
        {
            // The last, partial stretch only when it is not a thin tail of a few players.
            let p = dist_point(&self.model, &mut self.seen, end);
            if self.dist.last().is_none_or(|q| 2 * p.players >= q.players) {
                self.dist.push(p);
            }
        }
        OursRun {
            model: self.model,
            tune: self.tune.items,
            score: self.score.items,
            pairwise_tune: self.pairwise_tune,
            pairwise: self.pairwise,
            last_seen: self.last_seen,
            updates: self.updates,
            seconds: self.seconds,
            dist: self.dist,
            pre_skill: Vec::new(),
        }
    }
}

fn dist_point(model: &RawSkill, seen: &mut Vec<u32>, end_ms: i64) -> DistPoint {
    seen.sort_unstable();
    seen.dedup();
    let mut v: Vec<f64> = seen.iter().map(|&i| model.skill(i as usize)).collect();
    v.sort_by(f64::total_cmp);
    let q = |f: f64| {
        if v.is_empty() {
            f64::NAN
        } else {
            v[((v.len() - 1) as f64 * f).round() as usize]
        }
    };
    let p = DistPoint {
        end_ms,
        players: v.len(),
        q: [q(0.05), q(0.25), q(0.5), q(0.75), q(0.95)],
    };
    seen.clear();
    p
}

/// What a baseline's replay scored.
#[derive(Debug, Clone)]
pub struct BaselineRun {
    pub tune: BinaryScore,
    pub score: BinaryScore,
    pub updates: u64,
    pub seconds: f64,
}

/// Replays the two-team matches that start before `until` through a baseline, each predicted
/// (A's expected score) before its update.
#[must_use]
pub fn run_baseline(h: &History, params: BaselineParams, until: i64, win: &Windows) -> BaselineRun {
    let t0 = Instant::now();
    let mut model = Baseline::new(params);
    let (mut a, mut b): (Vec<usize>, Vec<usize>) = (Vec::new(), Vec::new());
    let mut run = BaselineRun {
        tune: BinaryScore::default(),
        score: BinaryScore::default(),
        updates: 0,
        seconds: 0.0,
    };
    for m in h.matches.iter().take_while(|m| m.start_ms < until) {
        if !m.two_teams() {
            continue;
        }
        a.clear();
        a.extend((m.lo..m.split).map(|r| h.player[r as usize] as usize));
        b.clear();
        b.extend((m.split..m.hi).map(|r| h.player[r as usize] as usize));
        let (tune, score) = (win.in_tune(m.start_ms), win.in_score(m.start_ms));
        if tune || score {
            let p = model.expected_score(&a, &b);
            if tune {
                run.tune.add(p, m.score_a);
            } else {
                run.score.add(p, m.score_a);
            }
        }
        model.update(&a, &b, m.score_a);
        run.updates += (a.len() + b.len()) as u64;
    }
    run.seconds = t0.elapsed().as_secs_f64();
    run
}

#[cfg(test)]
mod tests {
    use super::Thinned;

    /// The thinned sample is every `stride`-th item from the first, between half the cap and
    /// the cap once the cap is passed, and everything before.
    #[test]
    fn thinned_keeps_an_even_bounded_sample() {
        for cap in [2usize, 3, 10, 64] {
            for n in [0u64, 1, 5, 10, 11, 100, 1_000, 10_007] {
                let mut t = Thinned::new(cap);
                for x in 0..n {
                    t.push(x);
                }
                let stride = t.stride;
                let want: Vec<u64> = (0..n).step_by(stride as usize).collect();
                assert_eq!(t.items, want, "cap {cap}, n {n}");
                assert!(t.items.len() <= cap);
                if n as usize > cap {
                    assert!(t.items.len() >= cap / 2, "cap {cap}, n {n}");
                } else {
                    assert_eq!(stride, 1);
                }
            }
        }
    }
}
