//! The manifest: what an artifact is, where it came from, and the checksum of every file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The format this crate writes. 2 added the snapshot's `first_seen_ms` (the churn model's
/// `log_games_known`); a format-1 reader refuses its snapshot, so format-2 artifacts need a
/// format-2 reader ([`MIN_READER_FORMAT`]). 3 added the snapshot's `churned_gaps` (the
/// churn history features); a format-2 reader refuses that snapshot too. 4 added the churn
/// model's outcome pattern (`FeatureSpec::outcome_pattern`): a format-3 reader does not know
/// the field and would build rows without those columns, so an artifact whose model has a
/// pattern needs a format-4 reader ([`min_reader_format`]); one without still reads with 3.
/// 5 added the win skill: a team win model that reads it (`basis: win-skill`) and the
/// snapshot's `win_skill` column; a format-4 reader refuses that snapshot's columns, so such an
/// artifact needs a format-5 reader, and one whose model reads raw skill is written as before.
/// 6 added the blowout terms (the team win model's `blowout`, the churn model's `blowout`):
/// a format-5 reader does not know them and reads the rest as before (team EOMM then weighs
/// every loss alike), so they raise no reader format.
/// 7 added the win skill's update after a match (`skill.json`'s `win_update` and the
/// snapshot's `win_mass`); a format-6 reader refuses that snapshot's columns, so such an
/// artifact needs a format-7 reader.
pub const FORMAT_VERSION: u32 = 7;
/// The oldest reader format that reads every artifact this crate writes.
pub const MIN_READER_FORMAT: u32 = 7;

/// The oldest reader format that reads an artifact whose churn model has `spec`, with the
/// snapshot's win-skill columns `win`: 7 with the win skill's masses, 5 with the win skill
/// alone, else 4 with an outcome pattern, else 3.
#[must_use]
pub fn min_reader_format(
    spec: &crate::features::FeatureSpec,
    win: crate::snapshot::WinColumns,
) -> u32 {
    use crate::snapshot::WinColumns;
    if win == WinColumns::SkillAndMass {
        7
    } else if win == WinColumns::Skill {
        5
    } else if spec.outcome_pattern > 0 {
        4
    } else {
        3
    }
}
/// The oldest format this crate still reads.
pub const OLDEST_READABLE_FORMAT: u32 = 1;

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The format this artifact is written in.
    pub format_version: u32,
    /// The oldest reader format that can read it: a reader of format `r` reads the artifact
    /// when `min_reader_format <= r` and `format_version` is not older than the oldest format
    /// the reader still reads.
    pub min_reader_format: u32,
    /// The model's name (its directory under the models root), e.g. `tdm-6v6`.
    pub name: String,
    /// The version (its directory under the name), e.g. `v0003`.
    pub model_version: String,
    /// When it was exported (RFC 3339, UTC). The only field that differs between two exports
    /// of the same fit.
    pub created_at: String,
    /// The `mm` version that wrote it.
    pub code_version: String,
    /// The game mode the models were fitted on, when one was chosen.
    pub mode: Option<String>,
    /// The training data.
    pub data: DataWindow,
    /// The player snapshot's window counts and recent matches are as of this time (ms since
    /// the Unix epoch): the start of the last match in the data.
    pub snapshot_as_of_ms: i64,
    /// The churn model's feature names, in coefficient order.
    pub feature_names: Vec<String>,
    /// The fit steps' metrics (`skill`, `churn`), timings removed.
    pub metrics: BTreeMap<String, serde_json::Value>,
    /// Every other file of the artifact, sorted by path.
    pub files: Vec<FileEntry>,
}

/// The data the models were fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataWindow {
    /// The lake, as given to the fit.
    pub lake: String,
    /// The version of the lake's matches table (Delta Lake) the fits read: `mm fit ... --as-of`
    /// with it reproduces them. Absent in artifacts of lakes before Delta.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lake_version: Option<i64>,
    /// First and last match start (ms since the Unix epoch).
    pub first_match_ms: i64,
    pub last_match_ms: i64,
    /// Player-match rows, matches and players in the skill fit.
    pub rows: u64,
    pub matches: u64,
    pub players: u64,
    /// Rows the churn model was trained on, and rows censored (too close to the end to label).
    pub churn_train_rows: u64,
    pub churn_censored_rows: u64,
}

/// One file of the artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the version directory.
    pub path: String,
    pub bytes: u64,
    /// Lower-case hex.
    pub sha256: String,
}

impl FileEntry {
    #[must_use]
    pub fn of(path: &str, content: &[u8]) -> FileEntry {
        FileEntry {
            path: path.to_string(),
            bytes: content.len() as u64,
            sha256: sha256_hex(content),
        }
    }
}

/// Lower-case hex sha256.
#[must_use]
pub fn sha256_hex(content: &[u8]) -> String {
    let d = Sha256::digest(content);
    let mut s = String::with_capacity(64);
    for b in d {
        s.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        s.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSpec;

    /// Only a model with an outcome pattern needs a format-4 reader, only one with the win skill a
    /// format-5 reader, and only one that updates it a format-7 reader.
    #[test]
    fn a_pattern_raises_the_reader_format() {
        use crate::snapshot::WinColumns;
        let plain = FeatureSpec::default();
        assert_eq!(min_reader_format(&plain, WinColumns::None), 3);
        let pattern = FeatureSpec {
            outcome_pattern: 3,
            ..plain
        };
        assert_eq!(min_reader_format(&pattern, WinColumns::None), 4);
        assert_eq!(min_reader_format(&plain, WinColumns::Skill), 5);
        assert_eq!(
            min_reader_format(&plain, WinColumns::SkillAndMass),
            MIN_READER_FORMAT
        );
        const { assert!(MIN_READER_FORMAT <= FORMAT_VERSION) };
    }
}
