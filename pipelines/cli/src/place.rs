//! Where an option points. Options that read or write a lake or a model store take a path or an
//! object-store URL (`s3://`, `gs://`, `az://`), resolved by the lake crate's `Location`; the
//! options that write plain local files (a fit's output folder, the retrain's work folder, the
//! service's log) take a local path only, and refuse a URL by name. No option's URL is ever
//! turned into a local directory named after it.

use std::path::{Path, PathBuf};

use mm_lake::Location;

/// An option that cannot take the value given (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("--{flag} {value}: {reason}")]
pub struct PlaceError {
    pub flag: &'static str,
    pub value: String,
    pub reason: String,
}

/// The local directory or file an option names (`file://` URLs included). An object-store URL
/// is refused: this option reads or writes local files only.
///
/// # Errors
/// The value is a URL, or not a usable path.
pub fn local(flag: &'static str, p: &Path) -> Result<PathBuf, PlaceError> {
    let value = p.to_string_lossy().into_owned();
    match Location::from_path(p) {
        Ok(Location::Local(path)) => Ok(path),
        Ok(Location::Remote(_)) => Err(PlaceError {
            flag,
            value,
            reason: "this option takes a local path; object-store URLs are taken by --lake, \
                     --models and --tables"
                .into(),
        }),
        Err(e) => Err(PlaceError {
            flag,
            value,
            reason: e.to_string(),
        }),
    }
}

/// A models root given as a path or a URL, with its local mirror: the folder the commands read
/// and publish into (the root itself when local; for a bucket, a cached copy that `push`
/// uploads). The one place the commands that take `--models` resolve it.
///
/// # Errors
/// The value is not a usable location, or the bucket cannot be read.
pub fn models_root(p: &Path) -> anyhow::Result<(Location, mm_lake::mirror::Mirror)> {
    let remote = Location::from_path(p)?;
    let mirror = mm_lake::mirror::Mirror::pull(&remote)?;
    Ok((remote, mirror))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn urls_are_refused_by_name_and_paths_pass() {
        let e = local("out", Path::new("s3://bkt/skill")).unwrap_err();
        assert_eq!(e.flag, "out");
        assert!(e.to_string().starts_with("--out s3://bkt/skill: "), "{e}");
        assert!(local("work", Path::new("gs://b/w")).is_err());
        assert!(local("work", Path::new("ftp://b/w")).is_err());
        assert!(local("out", Path::new("out/skill")).unwrap().is_absolute());
        assert_eq!(
            local("out", Path::new("file:///tmp/x")).unwrap(),
            PathBuf::from("/tmp/x")
        );
    }
}
