//! The members and searches a queue holds.

use mm_artifact::Artifact;
use mm_artifact::snapshot::{PlayerState, features_of};
use serde::{Deserialize, Serialize};

use super::SearchId;
use crate::Outcome;

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
    /// Raw skill in [-1, 1] (team balance, SkillMM's order).
    pub raw_skill: f64,
    /// The skill the artifact's team win model reads (win probability): the win skill when
    /// the model reads it, else raw skill ([`Artifact::outcome_skill`]). Absent in a serialised
    /// member of an older version: raw skill's models read 0 there, so give it explicitly.
    #[serde(default)]
    pub outcome_skill: f64,
    /// Skill percentile in [0, 1] (skill rules, candidate distance).
    pub percentile: f64,
    /// Matches played (experience).
    pub games: u64,
    /// Probability of churning after a win, a draw and a loss.
    pub churn: [f64; 3],
    /// Probability of churning after a close and after a blowout loss, when the churn model
    /// tells them apart (artifact format 6 on); team EOMM weighs them by the team win model's
    /// chance of a blowout. `None`: every loss is `churn[2]`.
    #[serde(default)]
    pub churn_by_loss: Option<[f64; 2]>,
}

impl Member {
    /// Churn after a close and after a blowout loss (the loss's for both when the churn model
    /// does not tell them apart).
    #[must_use]
    pub fn churn_after_losses(&self) -> [f64; 2] {
        self.churn_by_loss.unwrap_or([self.churn[2]; 2])
    }

    /// A member from the artifact: skill and percentile from the snapshot, churn from the churn
    /// model on the player's state at `now_ms` for each hypothetical outcome.
    #[must_use]
    pub fn from_state(art: &Artifact, state: &PlayerState, now_ms: i64, in_party: bool) -> Member {
        let spec = art.churn.model.spec;
        let row = features_of(&spec, state, now_ms, in_party, Outcome::Win);
        let (churn, churn_by_loss) = art.churn.model.counterfactual_blowout(&row);
        Member {
            raw_skill: state.raw_skill,
            outcome_skill: art.outcome_skill(state),
            percentile: state.percentile,
            games: state.games,
            churn,
            churn_by_loss,
        }
    }

    /// The member for `player_id` searching at `now_ms`: its state in the artifact's snapshot,
    /// or a new player's (raw skill 0) when the snapshot does not hold it
    /// ([`Artifact::player_or_new`]). The service facade: what an embedding service calls for
    /// each player of a search.
    #[must_use]
    pub fn lookup(art: &Artifact, player_id: &str, now_ms: i64, in_party: bool) -> Member {
        Member::from_state(art, &art.player_or_new(player_id), now_ms, in_party)
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
