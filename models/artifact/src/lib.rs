//! # mm-artifact: the versioned model artifact format (serde + thiserror only)
//!
//! The contract between the trainer, which exports models, and the matcher services, which load
//! them. This crate depends on serde and thiserror only, so that any service can embed it.
//!
//! **Status:** the crate boundary exists; the format itself (manifest, checksums, format
//! versions, load and verify) is the work of the artifact issue and is not written yet. What is
//! here is the vocabulary both sides already share.

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
}
