//! Raw skill as the Call of Duty paper describes it ("How is Skill Calculated?"): after each
//! match every player is compared with every other player in the lobby, regardless of team, on
//! an in-match performance metric, and each moves by an amount that grows with how unlikely the
//! observed ordering was.
//!
//! For players i and j with skills `r_i`, `r_j` in [-1, 1], the model expects i to outperform j
//! with probability `p_ij = sigmoid(scale * (r_i - r_j))`. The observed result `s_ij` is 1, 1/2
//! or 0. Player i then moves by
//! `rate_i * sum over j of w_j (s_ij - p_ij) / (sum over j of w_j)`, and the value is clamped to
//! [-1, 1]. The surprise `s_ij - p_ij` is large when the ordering was unlikely.
//!
//! - `rate_i` is set by `half_life_matches`: the number of matches in which an established
//!   player moves halfway to a new level of play. A lobby's expected surprise is about
//!   `scale / 4` times the gap, so `rate = 4 (1 - 2^(-1 / half_life)) / scale`. Provisional
//!   players (fewer than `provisional_matches`) learn faster, up to `1 + provisional_boost`
//!   times.
//! - `w_j` is the weight of opponent j's evidence: `min(1, games_j / provisional_matches)`, with
//!   a floor. A wave of new players, whose skill is not known yet, barely moves the established
//!   players they meet. This is the "resilient" property: the population does not shift,
//!   inflate or collapse with influxes.
//! - Roles ([`RoleComparison`]): in games whose rows carry a role, `WithinRole` compares only
//!   players of the same role, and `Normalised` compares everyone on the metric standardised
//!   within each role by the role's running mean and standard deviation over earlier matches.
//!   `All` (the default) is the paper's rule.
//! - Bounded: values stay in [-1, 1]. With `scale` about 6, the population sits well inside
//!   the range (a standard deviation of about 0.12, the CoD scale where 80th minus 50th
//!   percentile is 0.1).

use serde::{Deserialize, Serialize};

use crate::stats::sigmoid;

pub use mm_artifact::skill::{
    ParamError, ROLE_MIN_ROWS, RawSkillParams, RoleComparison, ValidRawSkillParams,
};

/// One player's state.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PlayerSkill {
    pub skill: f64,
    pub games: u32,
}

/// The model: every player's state, indexed by a dense player index.
#[derive(Debug, Clone)]
pub struct RawSkill {
    p: ValidRawSkillParams,
    players: Vec<PlayerSkill>,
    // Scratch buffer of the last lobby, reused.
    scratch: Vec<Slot>,
    values: Vec<f64>,
    // Running metric statistics per role (index 0: rows without a role) and pooled, for
    // `RoleComparison::Normalised`.
    role_stats: Vec<Running>,
    pooled: Running,
}

/// Count, mean and sum of squared deviations of a stream (Welford's method).
#[derive(Debug, Clone, Copy, Default)]
struct Running {
    n: u64,
    mean: f64,
    m2: f64,
}

impl Running {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    fn sd(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / (self.n - 1) as f64).sqrt()
        }
    }
}

impl RawSkill {
    #[must_use]
    pub fn new(p: ValidRawSkillParams) -> Self {
        RawSkill {
            p,
            players: Vec::new(),
            scratch: Vec::new(),
            values: Vec::new(),
            role_stats: Vec::new(),
            pooled: Running::default(),
        }
    }

    /// The state of every player seen (unseen indices below the largest are at 0, 0 games).
    #[must_use]
    pub fn players(&self) -> &[PlayerSkill] {
        &self.players
    }

    #[must_use]
    pub fn skill(&self, player: usize) -> f64 {
        self.players.get(player).map_or(0.0, |s| s.skill)
    }

    /// P(player i outperforms player j) under the current skills.
    #[must_use]
    pub fn p_outperform(&self, i: usize, j: usize) -> f64 {
        sigmoid(self.p.params().scale * (self.skill(i) - self.skill(j)))
    }

    fn weight(&self, games: u32) -> f64 {
        let prov = f64::from(self.p.params().provisional_matches.max(1));
        (f64::from(games) / prov).clamp(self.p.params().min_opponent_weight, 1.0)
    }

    fn rate(&self, games: u32) -> f64 {
        let prov = f64::from(self.p.params().provisional_matches.max(1));
        let left = (1.0 - f64::from(games) / prov).max(0.0);
        self.p.rate() * (1.0 + self.p.params().provisional_boost * left)
    }

    /// Updates the players of one lobby from their performance metric (higher is better; equal
    /// values tie). Non-finite metrics are skipped (that player neither moves nor counts).
    pub fn update(&mut self, lobby: &[(usize, f64)]) {
        self.update_adjusted(lobby, &[]);
    }

    /// [`RawSkill::update`] with a known per-player offset in raw-skill units for this match
    /// (`offsets[k]` for `lobby[k]`; empty means none): the expected ordering uses
    /// `r_i + o_i`, so a known advantage, such as playing in a party, is not credited to the
    /// player's own skill.
    pub fn update_adjusted(&mut self, lobby: &[(usize, f64)], offsets: &[f64]) {
        self.update_with_roles(lobby, offsets, &[]);
    }

    /// The values players are compared on in a lobby whose members have roles `roles`
    /// (`roles[k]` for `lobby[k]`, 0 for no role; empty means none): the metrics as they are,
    /// or with [`RoleComparison::Normalised`] standardised within each role by the statistics
    /// of earlier matches. Non-finite metrics stay non-finite.
    pub fn compared_values(&self, lobby: &[(usize, f64)], roles: &[u16], out: &mut Vec<f64>) {
        out.clear();
        let normalise = self.p.params().roles == RoleComparison::Normalised;
        for (k, &(_, m)) in lobby.iter().enumerate() {
            if !normalise || !m.is_finite() {
                out.push(m);
                continue;
            }
            let role = roles.get(k).copied().unwrap_or(0) as usize;
            let own = self.role_stats.get(role).copied().unwrap_or_default();
            let s = if own.n >= ROLE_MIN_ROWS {
                own
            } else {
                self.pooled
            };
            let sd = s.sd();
            out.push(if sd > 0.0 { (m - s.mean) / sd } else { 0.0 });
        }
    }

    /// Whether lobby members of roles `a` and `b` are compared.
    #[must_use]
    pub fn compares(&self, a: u16, b: u16) -> bool {
        self.p.params().roles != RoleComparison::WithinRole || a == b
    }

    /// [`RawSkill::update_adjusted`] for a lobby whose members have roles (`roles[k]` for
    /// `lobby[k]`, 0 for none; empty means nobody has one), compared as the parameters'
    /// [`RoleComparison`] says.
    pub fn update_with_roles(&mut self, lobby: &[(usize, f64)], offsets: &[f64], roles: &[u16]) {
        let mut values = std::mem::take(&mut self.values);
        self.compared_values(lobby, roles, &mut values);
        if self.p.params().roles == RoleComparison::Normalised {
            for (k, &(_, m)) in lobby.iter().enumerate() {
                if m.is_finite() {
                    let role = roles.get(k).copied().unwrap_or(0) as usize;
                    if self.role_stats.len() <= role {
                        self.role_stats.resize(role + 1, Running::default());
                    }
                    self.role_stats[role].add(m);
                    self.pooled.add(m);
                }
            }
        }
        if let Some(m) = lobby.iter().map(|&(i, _)| i).max()
            && self.players.len() <= m
        {
            self.players.resize(m + 1, PlayerSkill::default());
        }
        // The players with a metric, their skill in log-odds units (offset included), weight
        // and metric; then per player the weighted surprise and the weight sum. Each unordered
        // pair is evaluated once (p_ji = 1 - p_ij, s_ji = 1 - s_ij).
        let (scale, margin) = (self.p.params().scale, self.p.params().margin);
        self.scratch.clear();
        let within = self.p.params().roles == RoleComparison::WithinRole;
        for (k, &(i, _)) in lobby.iter().enumerate() {
            let m = values[k];
            if m.is_finite() {
                let p = self.players[i];
                self.scratch.push(Slot {
                    player: i,
                    logit: scale * (p.skill + offsets.get(k).copied().unwrap_or(0.0)),
                    weight: self.weight(p.games),
                    metric: m,
                    role: roles.get(k).copied().unwrap_or(0),
                    sum: 0.0,
                    wsum: 0.0,
                });
            }
        }
        self.values = values;
        let slots = &mut self.scratch[..];
        for a in 0..slots.len() {
            let (head, tail) = slots.split_at_mut(a + 1);
            let x = &mut head[a];
            for y in tail {
                if within && x.role != y.role {
                    continue;
                }
                let s = if margin > 0.0 {
                    sigmoid((x.metric - y.metric) / margin)
                } else if x.metric > y.metric {
                    1.0
                } else if x.metric < y.metric {
                    0.0
                } else {
                    0.5
                };
                let surprise = s - sigmoid(x.logit - y.logit);
                x.sum += y.weight * surprise;
                x.wsum += y.weight;
                y.sum -= x.weight * surprise;
                y.wsum += x.weight;
            }
        }
        for k in 0..self.scratch.len() {
            let x = self.scratch[k];
            let step = if x.wsum > 0.0 {
                self.rate(self.players[x.player].games) * x.sum / x.wsum
            } else {
                0.0
            };
            let s = &mut self.players[x.player];
            s.skill = (s.skill + step).clamp(-1.0, 1.0);
            s.games += 1;
        }
    }
}

/// A lobby member during an update.
#[derive(Debug, Clone, Copy)]
struct Slot {
    player: usize,
    logit: f64,
    weight: f64,
    metric: f64,
    role: u16,
    sum: f64,
    wsum: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> RawSkill {
        RawSkill::new(RawSkillParams::default().check().unwrap())
    }

    /// Hand case: two new players at 0; the better one wins the comparison. Expected surprise
    /// 1 - 1/2 = 1/2; rate = 4 (1 - 2^(-1/12)) / 6 * (1 + 3) for a brand-new player.
    #[test]
    fn hand_computed_first_match() {
        let mut m = model();
        m.update(&[(0, 2.0), (1, 1.0)]);
        let rate = 4.0 * (1.0 - 0.5f64.powf(1.0 / 12.0)) / 6.0 * 4.0;
        assert!((m.skill(0) - 0.5 * rate).abs() < 1e-12);
        assert!((m.skill(1) + 0.5 * rate).abs() < 1e-12);
        // A tie between equals moves nobody.
        let mut m = model();
        m.update(&[(0, 1.0), (1, 1.0), (2, f64::NAN)]);
        assert_eq!(
            (m.skill(0), m.skill(1), m.players()[2].games),
            (0.0, 0.0, 0)
        );
    }

    #[test]
    fn invalid_hyperparameters_name_the_field() {
        let e = RawSkillParams {
            half_life_matches: 0.5,
            ..Default::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.field, "half_life_matches");
        let e = RawSkillParams {
            scale: f64::NAN,
            ..Default::default()
        }
        .check()
        .unwrap_err();
        assert_eq!(e.field, "scale");
    }
}
