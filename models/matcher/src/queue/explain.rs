//! Why a search is still queued: the rules and their explanations.

use serde::{Deserialize, Serialize};

use super::SearchId;

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
