//! # mm-artifact: the versioned model artifact format
//!
//! The contract between the trainer, which exports models, and the matcher services, which load
//! them. It depends on serde, serde_json, thiserror, sha2 and parquet's own column API (no
//! arrow, no polars), so that any service can embed it. `models/README.md` documents the format
//! for readers in other languages.
//!
//! - [`manifest`]: format versions, provenance, metrics and the sha256 of every file;
//! - the parameter types, shared with the trainer that fits them: [`skill`] (raw skill
//!   hyperparameters), [`percentile`] (the percentile map), [`team`] (team win model, party
//!   adjustment), [`churn`] (the churn model) and [`features`] (its feature rows, so a service
//!   computes exactly what the model was trained on);
//! - [`snapshot`]: the per-player state (`players.parquet`);
//! - [`online`]: what a finished match does to its players between retrains (the live update
//!   a service applies, with the trainer's own raw skill step);
//! - [`load`]: loading and verifying one version ([`Artifact`]);
//! - [`fsio`]: the atomic, durable file write every crate of the workspace uses;
//! - [`store`]: versions, `LATEST`, atomic publishing, promote, rollback and hot reload.

pub mod churn;
pub mod diff;
pub mod error;
pub mod features;
pub mod fsio;
pub mod load;
pub mod manifest;
pub mod online;
pub mod percentile;
pub mod skill;
pub mod snapshot;
pub mod store;
pub mod synthetic;
pub mod team;

pub use error::{ArtifactError, Problem};
pub use load::Artifact;
pub use manifest::{FORMAT_VERSION, Manifest, OLDEST_READABLE_FORMAT};
pub use store::{Reload, Reloader, Store};

use serde::{Deserialize, Serialize};

/// The outcome of a match for one side, as the models and the matcher use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Win,
    Draw,
    Loss,
}

impl Outcome {
    /// The position of this outcome in `[win, draw, loss]` arrays (per-outcome churn, outcome
    /// probabilities).
    #[must_use]
    pub fn index(self) -> usize {
        match self {
            Outcome::Win => 0,
            Outcome::Draw => 1,
            Outcome::Loss => 2,
        }
    }

    /// The lower-case name, as stored in the lake's `outcome` column and in artifacts.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Win => "win",
            Outcome::Loss => "loss",
            Outcome::Draw => "draw",
        }
    }

    /// Parses the codes the lake and the canonical inputs accept, case-insensitively:
    /// `win`/`w`/`won`/`victory`/`1`, `loss`/`l`/`lose`/`lost`/`defeat`/`0`, `draw`/`d`/`tie`/`0.5`.
    #[must_use]
    pub fn parse(code: &str) -> Option<Outcome> {
        match code {
            "win" => return Some(Outcome::Win),
            "loss" => return Some(Outcome::Loss),
            "draw" => return Some(Outcome::Draw),
            _ => {}
        }
        let c = code.trim();
        const WIN: [&str; 5] = ["win", "w", "won", "victory", "1"];
        const LOSS: [&str; 6] = ["loss", "l", "lose", "lost", "defeat", "0"];
        const DRAW: [&str; 4] = ["draw", "d", "tie", "0.5"];
        let is = |set: &[&str]| set.iter().any(|s| s.eq_ignore_ascii_case(c));
        if is(&WIN) {
            Some(Outcome::Win)
        } else if is(&LOSS) {
            Some(Outcome::Loss)
        } else if is(&DRAW) {
            Some(Outcome::Draw)
        } else {
            None
        }
    }

    /// The outcome seen from the other side of a 1v1 pairing.
    #[must_use]
    pub fn mirrored(self) -> Outcome {
        match self {
            Outcome::Win => Outcome::Loss,
            Outcome::Draw => Outcome::Draw,
            Outcome::Loss => Outcome::Win,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirroring_is_an_involution_and_serialises_lowercase() {
        for o in [Outcome::Win, Outcome::Draw, Outcome::Loss] {
            assert_eq!(o.mirrored().mirrored(), o);
        }
        assert_eq!(serde_json::to_string(&Outcome::Win).unwrap(), "\"win\"");
    }

    #[test]
    fn outcome_codes_round_trip_and_reject_unknown() {
        for o in [Outcome::Win, Outcome::Loss, Outcome::Draw] {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
            assert_eq!(Outcome::parse(&o.as_str().to_uppercase()), Some(o));
            assert_eq!(
                serde_json::to_string(&o).unwrap(),
                format!("\"{}\"", o.as_str())
            );
        }
        assert_eq!(Outcome::parse("1"), Some(Outcome::Win));
        assert_eq!(Outcome::parse(" Tie "), Some(Outcome::Draw));
        assert_eq!(Outcome::parse("2"), None);
        assert_eq!(Outcome::parse("forfeit"), None);
    }
}
