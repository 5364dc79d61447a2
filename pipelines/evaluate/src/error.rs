//! The evaluation's error, and how its messages write times.

use std::path::PathBuf;

/// Why an evaluation failed.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Input(String),
    /// A pool size larger than the players of the evaluation window.
    #[error("pool size {size}: the evaluation window holds only {players} players")]
    PoolTooLarge { size: usize, players: usize },
    #[error(transparent)]
    Fit(#[from] mm_fit::FitError),
    #[error(transparent)]
    Lake(#[from] mm_lake::LakeError),
    #[error(transparent)]
    Artifact(#[from] mm_artifact::ArtifactError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("pairing: {0}")]
    Pairing(#[from] mm_matcher::pairing::PairingError),
}

impl EvalError {
    /// Bad input (exit code 2) rather than a failure of the run.
    #[must_use]
    pub fn is_input(&self) -> bool {
        match self {
            EvalError::Lake(x) => x.is_input(),
            x => matches!(
                x,
                EvalError::Input(_)
                    | EvalError::PoolTooLarge { .. }
                    | EvalError::Artifact(_)
                    | EvalError::Fit(_)
            ),
        }
    }
}

pub(crate) fn fmt_ms(ms: i64) -> String {
    if ms == i64::MAX {
        return "the end of the data".into();
    }
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}
