//! What every team replay is built from: the policies by name, the searches' arrivals, and the
//! simulator's truth of a lobby (its outcome and each seat's churn). The replay without
//! leavers ([`crate::replay`]) and the one with them ([`crate::leavers`]) both read it.

use std::sync::Arc;

use mm_matcher::cod::{CodConfig, CodRules};
use mm_matcher::eomm_teams::{EommTeams, EommTeamsConfig, Objective};
use mm_matcher::queue::{Input, Lobby, LobbyModels, Policy, Search};
use mm_matcher::threshold::{ThresholdConfig, ThresholdPolicy};

use crate::config::EvalConfig;
use crate::history::EvalHistory;
use crate::measures::Scored;
use crate::truth::{TeamTruth, TruthSearches};

/// The team-queue policies, in report order; on a simulated lake the [`ORACLES`] follow.
pub const TEAM_POLICIES: [&str; 3] = ["cod", "threshold", "eomm"];

/// On a simulated lake, after the policies: the team oracle (team EOMM choosing by the
/// simulator's true churn and outcome probabilities, under the same rules and bound), then the
/// half-oracles with the true churn and our win model, and with our churn and the true outcomes.
pub const ORACLES: [&str; 3] = ["oracle", "oracle-churn", "oracle-outcomes"];

/// A search of the replay with the searchers (indices into the history) of its seats.
pub(crate) struct Arrival {
    pub start_ms: i64,
    pub seats: Vec<u32>,
}

impl Arrival {
    /// The queue's search `id` for this arrival, started at `start_ms`: the members' states
    /// from `sc`, all at one location with one input and platform.
    pub fn search(&self, id: usize, start_ms: i64, sc: &Scored) -> Search {
        Search {
            id: id as u64,
            members: self.seats.iter().map(|&k| sc.members[k as usize]).collect(),
            start_ms,
            lat: 0.0,
            lon: 0.0,
            input: Input::Controller,
            platform: 0,
            crossplay: true,
            pings: Vec::new(),
        }
    }
}

/// The most common team size among the real two-team matches with equal teams.
pub(crate) fn team_size(h: &EvalHistory) -> Option<usize> {
    let mut counts = [0usize; mm_matcher::queue::MAX_TEAM_SIZE + 1];
    for m in &h.matches {
        let (a, b) = (m.split - m.lo, m.hi - m.split);
        if a == b && a >= 1 && (a as usize) < counts.len() {
            counts[a as usize] += 1;
        }
    }
    let (t, &n) = counts.iter().enumerate().max_by_key(|&(t, &n)| (n, t))?;
    (n > 0).then_some(t)
}

pub(crate) fn policy(
    name: &str,
    team_size: usize,
    models: LobbyModels,
    eomm: EommTeamsConfig,
) -> Box<dyn Policy> {
    match name {
        "cod" => Box::new(CodRules::new(CodConfig::new(team_size), models)),
        "threshold" => Box::new(ThresholdPolicy::new(
            ThresholdConfig::new(team_size),
            models,
        )),
        _ => Box::new(EommTeams::new(eomm, models)),
    }
}

/// The simulator's truth for the team replay: the race's outcome model and each searcher's
/// true skill, party bonus and churn by outcome.
pub(crate) struct Truth<'a> {
    pub game: TeamTruth,
    pub t: &'a TruthSearches,
    pub loss: &'a [[f64; 2]],
}

impl Truth<'_> {
    /// The lobby's outcome under the truth ([A wins, draw, A by a blowout, B by a blowout]),
    /// from the effective-skill sums of its seats.
    pub fn lobby(&self, lobby: &Lobby, arr: &[Arrival]) -> [f64; 4] {
        let mut d = 0.0;
        for (side, team) in lobby.teams.iter().enumerate() {
            let sign = if side == 0 { 1.0 } else { -1.0 };
            for &id in team {
                for &k in &arr[id as usize].seats {
                    d += sign * (self.t.skill[k as usize] + self.t.party_bonus[k as usize]);
                }
            }
        }
        self.game.probs(d)
    }

    /// Seat `k`'s true churn after a win, a draw, a close and a blowout loss.
    pub fn churn_if(&self, k: u32) -> [f64; 4] {
        let c = self.t.churn_if[k as usize];
        let [close, blowout] = self.loss[k as usize];
        [c[0], c[1], close, blowout]
    }

    /// Seat `k`'s true churn after a played-out result `o` (0 win, 1 draw, 2 loss) of their
    /// team, a blowout or not.
    pub fn churn_by_result(&self, k: u32, o: u8, blowout: bool) -> f64 {
        let c = self.churn_if(k);
        match (o, blowout) {
            (0, _) => c[0],
            (1, _) => c[1],
            (_, false) => c[2],
            (_, true) => c[3],
        }
    }

    /// Seat `k`'s true expected churn on side `side` of a lobby with outcome `o`.
    pub fn churn(&self, k: u32, side: usize, o: [f64; 4]) -> f64 {
        expected_churn(self.churn_if(k), side, o)
    }

    /// The team oracle's objective: a split's true expected churn, from each arrival's seats'
    /// effective skills and churn by outcome.
    pub fn objective(&self, arr: &[Arrival]) -> Objective {
        self.objective_with(arr, |k| self.churn_if(k))
    }

    /// A split's expected churn under the true outcome probabilities (from the seats' effective
    /// skills) with seat `k`'s churn after a win, a draw, a close and a blowout loss from
    /// `churn(k)`.
    pub fn objective_with(&self, arr: &[Arrival], churn: impl Fn(u32) -> [f64; 4]) -> Objective {
        let seats: Vec<Vec<(f64, [f64; 4])>> = arr
            .iter()
            .map(|a| {
                a.seats
                    .iter()
                    .map(|&k| {
                        let i = k as usize;
                        (self.t.skill[i] + self.t.party_bonus[i], churn(k))
                    })
                    .collect()
            })
            .collect();
        let game = self.game.clone();
        Objective(Arc::new(move |a: &[u64], b: &[u64]| {
            let sum = |x: &[u64]| -> f64 {
                x.iter()
                    .flat_map(|&id| &seats[id as usize])
                    .map(|s| s.0)
                    .sum()
            };
            let o = game.probs(sum(a) - sum(b));
            let mut c = 0.0;
            for (side, ids) in [a, b].into_iter().enumerate() {
                for &id in ids {
                    for s in &seats[id as usize] {
                        c += expected_churn(s.1, side, o);
                    }
                }
            }
            c
        }))
    }
}

/// A player's expected churn on side `side` of a lobby with outcome `o` ([A wins, draw, A by a
/// blowout, B by a blowout]), from their churn after a win, a draw, a close and a blowout loss.
fn expected_churn(c: [f64; 4], side: usize, o: [f64; 4]) -> f64 {
    let [a_win, draw, a_blow, b_blow] = o;
    let b_win = (1.0 - a_win - draw).max(0.0);
    let (win, loss, blown) = if side == 0 {
        (a_win, b_win, b_blow)
    } else {
        (b_win, a_win, a_blow)
    };
    win * c[0] + draw * c[1] + (loss - blown).max(0.0) * c[2] + blown * c[3]
}

/// Team EOMM's configuration for `models`, with `--eomm-balance` when given.
pub(crate) fn eomm_config(
    team_size: usize,
    models: &LobbyModels,
    cfg: &EvalConfig,
) -> EommTeamsConfig {
    let base = EommTeamsConfig::for_models(team_size, models);
    EommTeamsConfig {
        balance: cfg
            .eomm_balance
            .clone()
            .unwrap_or_else(|| base.balance.clone()),
        ..base
    }
}
