//! Replays of the match history through our raw skill and through the baselines, under one
//! evaluation protocol: every match is predicted before the model learns from it; predictions
//! in the tuning window `[tune_from, tune_to)` choose hyperparameters, and predictions in the
//! later scoring window `[score_from, score_to]` are the reported figures.

use std::time::Instant;

use mm_trainer::skill::baselines::{Baseline, BaselineParams};
use mm_trainer::skill::raw::{RawSkill, ValidRawSkillParams};
use mm_trainer::skill::team::{PartyAdjustment, TeamSample};
use mm_trainer::stats::{BinaryScore, sigmoid};
use serde::Serialize;

use crate::history::{History, MatchRef};

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
    let side = |lo: u32, hi: u32| {
        let (mut sum, mut members, mut spread) = (0.0, 0.0, 0.0);
        for r in lo..hi {
            let r = r as usize;
            sum += skill(h.player[r]);
            if h.party[r] != 0 {
                members += 1.0;
                spread += party_sd(h, lo, hi, h.party[r], skill);
            }
        }
        (sum, members, spread)
    };
    let (a, b) = (side(m.lo, m.split), side(m.split, m.hi));
    TeamSample {
        skill_diff: a.0 - b.0,
        party_members_diff: a.1 - b.1,
        party_spread_diff: a.2 - b.2,
        outcome: m.score_a,
    }
}

/// Standard deviation of the skills of party `p` among rows `lo..hi`.
fn party_sd(h: &History, lo: u32, hi: u32, p: u16, skill: &impl Fn(u32) -> f64) -> f64 {
    let (mut n, mut s, mut s2) = (0.0, 0.0, 0.0);
    for r in lo..hi {
        if h.party[r as usize] == p {
            let x = skill(h.player[r as usize]);
            n += 1.0;
            s += x;
            s2 += x * x;
        }
    }
    let mean = s / n;
    (s2 / n - mean * mean).max(0.0).sqrt()
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
    let t0 = Instant::now();
    let mut model = RawSkill::new(params);
    let mut run = OursRun {
        model: RawSkill::new(params),
        tune: Vec::new(),
        score: Vec::new(),
        pairwise_tune: BinaryScore::default(),
        pairwise: BinaryScore::default(),
        last_seen: vec![i64::MIN; h.ids.len()],
        updates: 0,
        seconds: 0.0,
        dist: Vec::new(),
        pre_skill: vec![f32::NAN; h.rows()],
    };
    let scale = params.params().scale;
    let mut lobby: Vec<(usize, f64)> = Vec::new();
    let mut offs: Vec<f64> = Vec::new();
    let mut seen: Vec<u32> = Vec::new();
    let mut values: Vec<f64> = Vec::new();
    let mut bucket_end = h
        .matches
        .first()
        .zip(dist_bucket_ms)
        .map(|(m, b)| m.start_ms + b);
    for m in h.matches.iter().take_while(|m| m.start_ms < until) {
        if let (Some(end), Some(b)) = (bucket_end, dist_bucket_ms)
            && m.start_ms >= end
        {
            run.dist.push(dist_point(&model, &mut seen, end));
            bucket_end = Some(end + b * ((m.start_ms - end) / b + 1));
        }
        let rows = m.lo as usize..m.hi as usize;
        let roles = h.role.get(rows.clone()).unwrap_or(&[]);
        lobby.clear();
        lobby.extend(rows.clone().map(|r| (h.player[r] as usize, h.metric[r])));
        let skill = |p: u32| model.skill(p as usize);
        for r in rows.clone() {
            run.pre_skill[r] = skill(h.player[r]) as f32;
        }
        if m.two_teams() && (win.in_tune(m.start_ms) || win.in_score(m.start_ms)) {
            let s = team_sample(h, m, &skill);
            if win.in_tune(m.start_ms) {
                run.tune.push(s);
            } else {
                run.score.push(s);
            }
        }
        let pairs = if win.in_score(m.start_ms) {
            Some(&mut run.pairwise)
        } else if win.in_tune(m.start_ms) {
            Some(&mut run.pairwise_tune)
        } else {
            None
        };
        if let Some(acc) = pairs {
            // The pairs the model compares, on the values it compares (see `RoleComparison`).
            model.compared_values(&lobby, roles, &mut values);
            let role = |k: usize| roles.get(k).copied().unwrap_or(0);
            for (a, &(i, _)) in lobby.iter().enumerate() {
                for (b, &(j, _)) in lobby.iter().enumerate().skip(a + 1) {
                    let (xi, xj) = (values[a], values[b]);
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
        offs.clear();
        if let Some(adj) = offsets {
            offs.extend(rows.clone().map(|r| match h.party[r] {
                0 => 0.0,
                p => adj.for_spread(party_sd(h, m.lo, m.hi, p, &skill)),
            }));
        }
        model.update_with_roles(&lobby, &offs, roles);
        for &(i, _) in &lobby {
            run.last_seen[i] = m.start_ms;
        }
        if dist_bucket_ms.is_some() {
            seen.extend(lobby.iter().map(|&(i, _)| i as u32));
        }
        run.updates += lobby.len() as u64;
    }
    if let Some(end) = bucket_end
        && !seen.is_empty()
    {
        // The last, partial stretch only when it is not a thin tail of a few players.
        let p = dist_point(&model, &mut seen, end);
        if run.dist.last().is_none_or(|q| 2 * p.players >= q.players) {
            run.dist.push(p);
        }
    }
    run.model = model;
    run.seconds = t0.elapsed().as_secs_f64();
    run
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
