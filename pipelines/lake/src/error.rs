//! The lake's error: every variant names the path or location it concerns.

use std::fmt;
use std::path::{Path, PathBuf};

/// Errors of the lake store. Every variant names the path it concerns.
#[derive(Debug, thiserror::Error)]
pub enum LakeError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: Parquet error: {source}")]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    #[error("{path}: Arrow error: {source}")]
    Arrow {
        path: PathBuf,
        source: arrow_schema::ArrowError,
    },
    #[error("{path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// The location cannot be used: a malformed URL, an unreachable or missing bucket, missing
    /// or refused credentials, or a version or time the table does not have.
    #[error("{location}: {reason}")]
    Location { location: String, reason: String },
    /// The table's Delta protocol asks for features `mm` does not implement.
    #[error("{location}: {reason}")]
    Protocol { location: String, reason: String },
    /// A concurrent run committed rows this run also holds; this run committed nothing.
    #[error("{location}: {reason}")]
    Conflict { location: String, reason: String },
    /// The log no longer holds a commit a reader asked for (cleaned up after a checkpoint):
    /// read the table whole instead.
    #[error(
        "{location}: the Delta log no longer holds version {version} (cleaned up after a \
         checkpoint); what was added since cannot be read commit by commit"
    )]
    LogTruncated { location: String, version: i64 },
    /// The application transaction of this commit was already recorded (by an earlier attempt
    /// of the same flush): nothing was committed, and nothing needed to be.
    #[error(
        "{location}: application {app_id} already committed its version {committed} (this \
         commit's is {version}); nothing committed again"
    )]
    AlreadyCommitted {
        location: String,
        app_id: String,
        version: i64,
        committed: i64,
    },
    #[error("{location}: Delta Lake error: {source}")]
    Delta {
        location: String,
        source: Box<deltalake_core::DeltaTableError>,
    },
}

impl LakeError {
    /// Whether the error is the input's or the configuration's fault (exit code 2 in `mm`):
    /// a location that cannot be used, a table of a newer protocol, a corrupt file.
    #[must_use]
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            LakeError::Location { .. } | LakeError::Protocol { .. } | LakeError::Corrupt { .. }
        )
    }

    /// Classifies a delta-rs error: storage that cannot be reached or read, and versions that
    /// do not exist, are the location's fault; anything else is reported as a Delta error.
    pub(crate) fn from_delta(
        loc: &impl fmt::Display,
        e: deltalake_core::DeltaTableError,
    ) -> LakeError {
        use deltalake_core::DeltaTableError as E;
        let location = loc.to_string();
        match e {
            E::ObjectStore { source } => LakeError::Location {
                location,
                reason: store_reason(&source),
            },
            E::InvalidVersion(v) => LakeError::Location {
                location,
                reason: format!("the table has no version {v}"),
            },
            E::InvalidTableLocation(r) | E::NotATable(r) => LakeError::Location {
                location,
                reason: r,
            },
            E::MissingFeature { feature, url } => LakeError::Location {
                location,
                reason: format!("{feature} is needed for {url}"),
            },
            other => {
                let text = other.to_string();
                if text.contains("Unsupported") || text.contains("unsupported") {
                    LakeError::Protocol {
                        location,
                        reason: text,
                    }
                } else {
                    LakeError::Delta {
                        location,
                        source: Box::new(other),
                    }
                }
            }
        }
    }
}

pub type Result<T, E = LakeError> = std::result::Result<T, E>;

pub fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> LakeError + '_ {
    move |source| LakeError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The object store's message about `e`, with what it most likely means when the cause is a
/// common misconfiguration (no credentials, credentials refused, no such bucket).
pub fn store_reason(e: &dyn fmt::Display) -> String {
    let text = e.to_string();
    let hint = if text.contains("/latest/api/token") || text.contains("/latest/meta-data") {
        // object_store falls back to the instance metadata service when it finds no keys.
        Some(
            "no credentials were found (no AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE \
             or web identity in the environment), and the instance metadata service, tried \
             last, gave none either",
        )
    } else if [
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "InvalidClientTokenId",
    ]
    .iter()
    .any(|c| text.contains(c))
    {
        Some("the storage refused the credentials")
    } else if text.contains("AccessDenied") || text.contains("403 Forbidden") {
        Some("the credentials lack permission for this location")
    } else if text.contains("NoSuchBucket") || text.contains("ContainerNotFound") {
        Some("the bucket (or container) does not exist")
    } else {
        None
    };
    match hint {
        Some(h) => format!("{h}. The store said: {text}"),
        None => text,
    }
}

#[cfg(test)]
mod reason_tests {
    use super::store_reason;

    #[test]
    fn common_misconfigurations_are_named() {
        let imds = "Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token";
        assert!(store_reason(&imds).starts_with("no credentials were found"));
        assert!(store_reason(&"<Code>NoSuchBucket</Code>").starts_with("the bucket"));
        assert!(
            store_reason(&"<Code>InvalidAccessKeyId</Code>").starts_with("the storage refused")
        );
        assert_eq!(store_reason(&"timed out"), "timed out");
    }
}
