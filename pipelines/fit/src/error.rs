//! Why a fit failed, and which failures are the caller's input.

use std::path::{Path, PathBuf};

use mm_trainer::skill::team::TeamFitError;

/// Why a fit failed.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("invalid {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("{0}: no matches to fit (check --mode)")]
    Empty(PathBuf),
    #[error(transparent)]
    Lake(#[from] mm_lake::LakeError),
    #[error(transparent)]
    Team(#[from] TeamFitError),
    #[error(transparent)]
    WinSkill(#[from] mm_trainer::skill::win::WinSkillError),
    #[error(transparent)]
    PerfSkill(#[from] mm_trainer::skill::perf::PerfSkillError),
    #[error("{path}: {reason}")]
    Output { path: PathBuf, reason: String },
    #[error("feature query: {0}")]
    Query(String),
    #[error("{path}: {reason}")]
    Input { path: PathBuf, reason: String },
    #[error(transparent)]
    Artifact(#[from] mm_artifact::ArtifactError),
}

impl FitError {
    /// Bad input (exit code 2) rather than a failure of the run: an invalid setting, a lake or
    /// file that cannot be used as given, nothing to fit, a refused artifact.
    #[must_use]
    pub fn is_input(&self) -> bool {
        match self {
            FitError::Lake(x) => x.is_input(),
            x => matches!(
                x,
                FitError::Config { .. }
                    | FitError::Empty(_)
                    | FitError::Input { .. }
                    | FitError::Artifact(_)
            ),
        }
    }
}

/// An invalid setting, named as its field.
pub(crate) fn config_err(field: &'static str, reason: impl Into<String>) -> FitError {
    FitError::Config {
        field,
        reason: reason.into(),
    }
}

/// A failed write of `path`.
pub(crate) fn output_err(path: &Path, e: impl std::fmt::Display) -> FitError {
    FitError::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

/// A failed write of `p`, as a `map_err` closure.
pub(crate) fn out_err(p: &Path) -> impl Fn(std::io::Error) -> FitError + '_ {
    move |e| output_err(p, e)
}

/// A failed polars query.
pub(crate) fn pl_err(e: polars::prelude::PolarsError) -> FitError {
    FitError::Query(e.to_string())
}

/// An unreadable or invalid input file.
pub fn input_err(path: &Path, reason: impl ToString) -> FitError {
    FitError::Input {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}
