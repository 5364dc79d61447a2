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

use super::{ROLE_MIN_ROWS, RoleComparison, ValidRawSkillParams};
use crate::team::sigmoid;

/// One player's state.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PlayerSkill {
    pub skill: f64,
    pub games: u32,
}

/// The model: every player's state, indexed by a dense player index (the batch replay's
/// layout). A service that keeps players by id updates them with [`update_lobby`], the same
/// step this model takes.
#[derive(Debug, Clone)]
pub struct RawSkill {
    p: ValidRawSkillParams,
    players: Vec<PlayerSkill>,
    // Scratch buffers of the last lobby, reused.
    lobby: Vec<LobbySlot>,
    scratch: Vec<Slot>,
    values: Vec<f64>,
    roles: RoleStats,
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

/// Running metric statistics per role (index 0: rows without a role) and pooled, for
/// [`RoleComparison::Normalised`]: the metric of every earlier match, so they are part of the
/// replay's state.
#[derive(Debug, Clone, Default)]
pub struct RoleStats {
    per_role: Vec<Running>,
    pooled: Running,
}

impl RoleStats {
    /// The values players are compared on in a lobby whose members have roles `roles`
    /// (`roles[k]` for `metrics[k]`, 0 for no role; empty means none): the metrics as they
    /// are, or with `normalise` standardised within each role by the statistics of earlier
    /// matches. Non-finite metrics stay non-finite.
    pub fn compared_values(
        &self,
        normalise: bool,
        metrics: impl Iterator<Item = f64>,
        roles: &[u16],
        out: &mut Vec<f64>,
    ) {
        out.clear();
        for (k, m) in metrics.enumerate() {
            if !normalise || !m.is_finite() {
                out.push(m);
                continue;
            }
            let role = roles.get(k).copied().unwrap_or(0) as usize;
            let own = self.per_role.get(role).copied().unwrap_or_default();
            let s = if own.n >= ROLE_MIN_ROWS {
                own
            } else {
                self.pooled
            };
            let sd = s.sd();
            out.push(if sd > 0.0 { (m - s.mean) / sd } else { 0.0 });
        }
    }

    /// Adds one lobby's finite metrics to the statistics.
    pub fn observe(&mut self, metrics: impl Iterator<Item = f64>, roles: &[u16]) {
        for (k, m) in metrics.enumerate() {
            if m.is_finite() {
                let role = roles.get(k).copied().unwrap_or(0) as usize;
                if self.per_role.len() <= role {
                    self.per_role.resize(role + 1, Running::default());
                }
                self.per_role[role].add(m);
                self.pooled.add(m);
            }
        }
    }
}

/// One lobby member as [`update_lobby`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LobbySlot {
    /// Raw skill before the match; after [`update_lobby`], after it.
    pub skill: f64,
    /// Matches played before this one; [`update_lobby`] adds one for a member it compared.
    pub games: u32,
    /// The value compared (the metric, standardised when roles are normalised); not finite:
    /// the member neither moves nor counts.
    pub value: f64,
    /// A known advantage in raw-skill units for this match (a party's), or 0.
    pub offset: f64,
    /// The member's role (0: none).
    pub role: u16,
}

/// The raw skill update of one lobby (see the module's documentation): every member with a
/// finite value is compared with every other, then moves by its rate times its weighted mean
/// surprise, clamped to [-1, 1]. The batch replay ([`RawSkill`]) and a service's live update
/// both take exactly this step, so their skills agree to the last bit. `scratch` is reused.
pub fn update_lobby(p: &ValidRawSkillParams, lobby: &mut [LobbySlot], scratch: &mut Vec<Slot>) {
    let params = p.params();
    let (scale, margin) = (params.scale, params.margin);
    let prov = f64::from(params.provisional_matches.max(1));
    let weight = |games: u32| (f64::from(games) / prov).clamp(params.min_opponent_weight, 1.0);
    let rate = |games: u32| {
        let left = (1.0 - f64::from(games) / prov).max(0.0);
        p.rate() * (1.0 + params.provisional_boost * left)
    };
    // The members with a value, their skill in log-odds units (offset included), weight and
    // value; then per member the weighted surprise and the weight sum. Each unordered pair is
    // evaluated once (p_ji = 1 - p_ij, s_ji = 1 - s_ij).
    scratch.clear();
    let within = params.roles == RoleComparison::WithinRole;
    for (k, m) in lobby.iter().enumerate() {
        if m.value.is_finite() {
            scratch.push(Slot {
                member: k,
                logit: scale * (m.skill + m.offset),
                weight: weight(m.games),
                metric: m.value,
                role: m.role,
                sum: 0.0,
                wsum: 0.0,
            });
        }
    }
    let slots = &mut scratch[..];
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
    for x in scratch.iter() {
        let m = &mut lobby[x.member];
        let step = if x.wsum > 0.0 {
            rate(m.games) * x.sum / x.wsum
        } else {
            0.0
        };
        m.skill = (m.skill + step).clamp(-1.0, 1.0);
        m.games = m.games.saturating_add(1);
    }
}

impl RawSkill {
    #[must_use]
    pub fn new(p: ValidRawSkillParams) -> Self {
        RawSkill {
            p,
            players: Vec::new(),
            lobby: Vec::new(),
            scratch: Vec::new(),
            values: Vec::new(),
            roles: RoleStats::default(),
        }
    }

    /// A replay that continues from known states (player `i` of `players` is index `i`) and
    /// role statistics, e.g. an exported snapshot's.
    #[must_use]
    pub fn resume(p: ValidRawSkillParams, players: Vec<PlayerSkill>, roles: RoleStats) -> Self {
        RawSkill {
            players,
            roles,
            ..RawSkill::new(p)
        }
    }

    /// Sets every player's state (player `i` is `players[i]`), e.g. to continue from an
    /// exported snapshot.
    pub fn set_players(&mut self, players: Vec<PlayerSkill>) {
        self.players = players;
    }

    /// The state of every player seen (unseen indices below the largest are at 0, 0 games).
    #[must_use]
    pub fn players(&self) -> &[PlayerSkill] {
        &self.players
    }

    /// The running role statistics ([`RoleComparison::Normalised`]).
    #[must_use]
    pub fn role_stats(&self) -> &RoleStats {
        &self.roles
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
        let normalise = self.p.params().roles == RoleComparison::Normalised;
        self.roles
            .compared_values(normalise, lobby.iter().map(|&(_, m)| m), roles, out);
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
            self.roles.observe(lobby.iter().map(|&(_, m)| m), roles);
        }
        if let Some(m) = lobby.iter().map(|&(i, _)| i).max()
            && self.players.len() <= m
        {
            self.players.resize(m + 1, PlayerSkill::default());
        }
        self.lobby.clear();
        for (k, &(i, _)) in lobby.iter().enumerate() {
            let p = self.players[i];
            self.lobby.push(LobbySlot {
                skill: p.skill,
                games: p.games,
                value: values[k],
                offset: offsets.get(k).copied().unwrap_or(0.0),
                role: roles.get(k).copied().unwrap_or(0),
            });
        }
        self.values = values;
        update_lobby(&self.p, &mut self.lobby, &mut self.scratch);
        for (k, &(i, _)) in lobby.iter().enumerate() {
            let s = self.lobby[k];
            self.players[i] = PlayerSkill {
                skill: s.skill,
                games: s.games,
            };
        }
    }
}

/// A lobby member during an update ([`update_lobby`]'s scratch).
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    member: usize,
    logit: f64,
    weight: f64,
    metric: f64,
    role: u16,
    sum: f64,
    wsum: f64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use crate::skill::RawSkillParams;

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
