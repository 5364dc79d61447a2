//! Errors: every refusal names the file and the problem.

use std::path::PathBuf;

/// A refused artifact: which file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", file.display())]
pub struct ArtifactError {
    pub file: PathBuf,
    pub problem: Problem,
}

/// What is wrong with a file of an artifact.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Problem {
    #[error("missing")]
    Missing,
    #[error("cannot read or write: {0}")]
    Io(String),
    #[error("{actual} bytes, the manifest says {expected}")]
    Size { expected: u64, actual: u64 },
    #[error("sha256 {actual}, the manifest says {expected}")]
    Checksum { expected: String, actual: String },
    #[error(
        "format version {found} (readable from format {min_reader}); this reader reads formats {oldest} to {newest}"
    )]
    FormatVersion {
        found: u32,
        min_reader: u32,
        oldest: u32,
        newest: u32,
    },
    #[error("not valid: {0}")]
    Parse(String),
    #[error("{names} feature names but {values} {what}")]
    FeatureMismatch {
        names: usize,
        values: usize,
        what: &'static str,
    },
    #[error("{0} is not a finite number")]
    NonFinite(String),
    #[error("{0}")]
    Invalid(String),
}

impl ArtifactError {
    pub(crate) fn new(file: impl Into<PathBuf>, problem: Problem) -> Self {
        ArtifactError {
            file: file.into(),
            problem,
        }
    }

    /// An I/O error: a missing file is [`Problem::Missing`].
    pub(crate) fn io(file: impl Into<PathBuf>, e: &std::io::Error) -> Self {
        let problem = if e.kind() == std::io::ErrorKind::NotFound {
            Problem::Missing
        } else {
            Problem::Io(e.to_string())
        };
        ArtifactError::new(file, problem)
    }
}
