//! The raw skill's hyperparameters as exported, so a service can update skills between
//! retrains exactly as the trainer did: the update itself ([`raw`], documented there) and the
//! metric it compares ([`metric`]) live here, so the trainer's replay and a service share them.

use serde::{Deserialize, Serialize};

pub mod metric;
pub mod raw;
pub mod win;

pub use metric::{Metric, PerfColumns};
pub use raw::{LobbySlot, PlayerSkill, RawSkill, RoleStats, update_lobby};
pub use win::{WinEstimator, WinSkillUpdate};

/// Hyperparameters, as given (see [`RawSkillParams::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RawSkillParams {
    /// Matches for an established player to move halfway to a new level. Default 12.
    pub half_life_matches: f64,
    /// Log-odds of outperforming per unit of raw-skill difference. Default 6.
    pub scale: f64,
    /// Matches after which a player is established. Default 20.
    pub provisional_matches: u32,
    /// Extra learning rate of a brand-new player (linearly down to 0 when established). Default 3.
    pub provisional_boost: f64,
    /// Smallest weight of a brand-new opponent's evidence. Default 0.05.
    pub min_opponent_weight: f64,
    /// How the metric's margin counts. 0 (the default): only the ordering counts, a comparison
    /// is won, drawn or lost (`s_ij` is 1, 1/2 or 0). Positive: the comparison is scored
    /// `s_ij = sigmoid((m_i - m_j) / margin)`, so a wide margin counts more than a narrow one
    /// (for tennis, a 60% share of points won says more than 51%). In the metric's units.
    #[serde(default)]
    pub margin: f64,
    /// Which players are compared with which, for games whose rows carry a role (LoL positions,
    /// the lake's `role` column). Default [`RoleComparison::All`], the paper's rule.
    #[serde(default)]
    pub roles: RoleComparison,
}

/// How raw skill treats roles. In games with roles the metric depends on the role (supports
/// kill and die less than carries whatever their skill), so comparing every player with every
/// other on one metric partly ranks roles, not skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoleComparison {
    /// Every player with every other on the metric as it is (the CoD paper's rule).
    #[default]
    All,
    /// Only players of the same role are compared; rows without a role form one group.
    WithinRole,
    /// Every player with every other, on the metric standardised within the player's role:
    /// `(m - mean) / sd` with the role's mean and standard deviation over all earlier matches
    /// (the pooled figures while the role has fewer than [`ROLE_MIN_ROWS`] rows).
    Normalised,
}

/// Rows of a role before its own mean and standard deviation standardise its metric.
pub const ROLE_MIN_ROWS: u64 = 30;

impl RoleComparison {
    pub const ALL: [RoleComparison; 3] = [
        RoleComparison::All,
        RoleComparison::WithinRole,
        RoleComparison::Normalised,
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            RoleComparison::All => "all",
            RoleComparison::WithinRole => "within-role",
            RoleComparison::Normalised => "normalised",
        }
    }
}

impl Default for RawSkillParams {
    fn default() -> Self {
        RawSkillParams {
            half_life_matches: 12.0,
            scale: 6.0,
            provisional_matches: 20,
            provisional_boost: 3.0,
            min_opponent_weight: 0.05,
            margin: 0.0,
            roles: RoleComparison::All,
        }
    }
}

/// A hyperparameter out of range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("raw skill: {field} = {value} is invalid: {reason}")]
pub struct ParamError {
    pub field: &'static str,
    pub value: f64,
    pub reason: &'static str,
}

/// Checked hyperparameters with the derived learning rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValidRawSkillParams {
    params: RawSkillParams,
    rate: f64,
}

impl ValidRawSkillParams {
    #[must_use]
    pub fn params(&self) -> &RawSkillParams {
        &self.params
    }

    /// The learning rate of an established player.
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

impl RawSkillParams {
    pub fn check(self) -> Result<ValidRawSkillParams, ParamError> {
        let bad = |field, value: f64, reason| {
            Err(ParamError {
                field,
                value,
                reason,
            })
        };
        if !(self.half_life_matches.is_finite() && self.half_life_matches >= 1.0) {
            return bad(
                "half_life_matches",
                self.half_life_matches,
                "must be at least 1",
            );
        }
        if !(self.scale.is_finite() && self.scale > 0.0) {
            return bad("scale", self.scale, "must be positive");
        }
        if !(self.provisional_boost.is_finite() && self.provisional_boost >= 0.0) {
            return bad(
                "provisional_boost",
                self.provisional_boost,
                "must be non-negative",
            );
        }
        if !(0.0..=1.0).contains(&self.min_opponent_weight) {
            return bad(
                "min_opponent_weight",
                self.min_opponent_weight,
                "must be in [0, 1]",
            );
        }
        if !(self.margin.is_finite() && self.margin >= 0.0) {
            return bad("margin", self.margin, "must be finite and non-negative");
        }
        let alpha = 1.0 - 0.5f64.powf(1.0 / self.half_life_matches);
        Ok(ValidRawSkillParams {
            params: self,
            rate: 4.0 * alpha / self.scale,
        })
    }
}
