//! Where a lake (or an artifact store) lives: a local directory or an object-store URL.
//!
//! `--lake` and `--models` take either a path (`out/lake`, `/data/lake`, `file:///data/lake`) or
//! a URL of one of the object stores delta-rs reaches through the `object_store` crate:
//! `s3://bucket/prefix` (and `s3a://`), `gs://bucket/prefix`, `az://container/prefix` (and
//! `abfs://`, `abfss://`). Credentials and endpoints come from the environment, as delta-rs and
//! `object_store` read them (`AWS_*`, `GOOGLE_*`, `AZURE_*`); see `data/README.md`.

use std::fmt;
use std::path::{Path, PathBuf};

use url::Url;

use crate::error::LakeError;

/// Object-store URL schemes accepted besides local paths.
pub const REMOTE_SCHEMES: [&str; 7] = ["s3", "s3a", "gs", "az", "abfs", "abfss", "azure"];

/// A local directory or a remote object-store prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Local(PathBuf),
    Remote(Url),
}

impl Location {
    /// Parses a path or URL. A relative path is made absolute against the working directory.
    pub fn parse(text: &str) -> Result<Location, LakeError> {
        let bad = |reason: String| LakeError::Location {
            location: text.to_string(),
            reason,
        };
        if let Some((scheme, _)) = text.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            if scheme == "file" {
                let url = Url::parse(text).map_err(|e| bad(e.to_string()))?;
                let path = url
                    .to_file_path()
                    .map_err(|()| bad("not a local file URL".into()))?;
                return Ok(Location::Local(path));
            }
            if !REMOTE_SCHEMES.contains(&scheme.as_str()) {
                return Err(bad(format!(
                    "unsupported scheme {scheme}:// (use a path, file://, s3://, gs:// or az://)"
                )));
            }
            let mut url = Url::parse(text).map_err(|e| bad(e.to_string()))?;
            if url.host_str().is_none_or(str::is_empty) {
                return Err(bad("the URL names no bucket or container".into()));
            }
            let trimmed = url.path().trim_end_matches('/').to_string();
            url.set_path(&trimmed);
            return Ok(Location::Remote(url));
        }
        if text.is_empty() {
            return Err(bad("empty location".into()));
        }
        let path = std::path::absolute(text).map_err(|e| bad(e.to_string()))?;
        Ok(Location::Local(path))
    }

    /// Parses the location carried by a path-typed flag (a URL survives as the path's text).
    pub fn from_path(path: &Path) -> Result<Location, LakeError> {
        Location::parse(&path.to_string_lossy())
    }

    /// The location of `rel` (a `/`-separated relative path) below this one.
    #[must_use]
    pub fn join(&self, rel: &str) -> Location {
        match self {
            Location::Local(p) => Location::Local(p.join(rel)),
            Location::Remote(u) => {
                let mut u = u.clone();
                let path = format!("{}/{}", u.path().trim_end_matches('/'), rel);
                u.set_path(&path);
                Location::Remote(u)
            }
        }
    }

    /// The URL delta-rs opens (a `file://` URL for a local directory).
    pub fn url(&self) -> Result<Url, LakeError> {
        match self {
            Location::Local(p) => Url::from_directory_path(p).map_err(|()| LakeError::Location {
                location: p.display().to_string(),
                reason: "cannot be written as a file:// URL".into(),
            }),
            Location::Remote(u) => {
                let mut u = u.clone();
                if !u.path().ends_with('/') {
                    let p = format!("{}/", u.path());
                    u.set_path(&p);
                }
                Ok(u)
            }
        }
    }

    /// The local directory, if this is one.
    #[must_use]
    pub fn local(&self) -> Option<&Path> {
        match self {
            Location::Local(p) => Some(p),
            Location::Remote(_) => None,
        }
    }

    #[must_use]
    pub fn is_remote(&self) -> bool {
        matches!(self, Location::Remote(_))
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::Remote(u) => write!(f, "{u}"),
        }
    }
}

/// The local directory where files of remote tables are kept once read (Delta data files never
/// change once written, so a cached copy is always the file): `$MM_CACHE`, else
/// `$XDG_CACHE_HOME/mm`, else `~/.cache/mm`, else the temporary directory.
#[must_use]
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("MM_CACHE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("mm");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(h).join(".cache").join("mm");
    }
    std::env::temp_dir().join("mm-cache")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_urls_parse_to_the_right_kind() {
        let l = Location::parse("out/lake").unwrap();
        assert!(l.local().unwrap().is_absolute());
        assert_eq!(
            Location::parse("file:///tmp/x").unwrap(),
            Location::Local(PathBuf::from("/tmp/x"))
        );
        let r = Location::parse("s3://bucket/some/lake/").unwrap();
        assert_eq!(r.to_string(), "s3://bucket/some/lake");
        assert_eq!(
            r.join("matches").to_string(),
            "s3://bucket/some/lake/matches"
        );
        assert_eq!(
            r.join("matches").url().unwrap().as_str(),
            "s3://bucket/some/lake/matches/"
        );
        assert_eq!(
            Location::parse("gs://b").unwrap().join("t").to_string(),
            "gs://b/t"
        );
        assert!(Location::parse("az://container/p").unwrap().is_remote());
    }

    #[test]
    fn unsupported_or_incomplete_urls_are_refused_by_name() {
        for bad in ["ftp://host/x", "s3:///nobucket", ""] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with(bad), "{e}");
        }
    }
}
