//! # mm-artifact: the versioned model artifact format (serde + thiserror only)
//!
//! The contract between the trainer, which exports models, and the matcher services, which load
//! them. This crate depends on serde and thiserror only, so that any service can embed it.
//!
//! **Status:** the crate boundary exists; the format itself (manifest, checksums, format
//! versions, load and verify) is the work of the artifact issue and is not written yet. What is
//! here is the vocabulary every side already shares: [`Outcome`], which the lake stores too.

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
