//! Where an option points. Options that read or write a lake or a model store take a path or an
//! object-store URL (`s3://`, `gs://`, `az://`), resolved by the lake crate's `Location`; the
//! options that write plain local files (a fit's output folder, the retrain's work folder, the
//! service's log) take a local path only, and refuse a URL by name. No option's URL is ever
//! turned into a local directory named after it.
//!
//! Every command that takes `--models` finds its models here: the root and its mirror
//! ([`models_root`]), a model's store ([`store`], [`stores`]) and the model `mm serve` serves
//! ([`served_model`]).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use mm_artifact::store::{HISTORY, LATEST, Store};
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

/// The model directory `mm serve` serves and its models root: `--models` itself when it holds a
/// `LATEST` and no `--name` is given, else the one model under it or `--name`. A root in a
/// bucket is served from its local mirror, pulled here.
///
/// # Errors
/// The value is not a usable location, the bucket cannot be read, or no model is found.
pub fn served_model(models: &Path, name: Option<&str>) -> anyhow::Result<Served> {
    let (remote, mirror) = models_root(models)?;
    let dir = if name.is_none() && mirror.local.join(LATEST).exists() {
        mirror.local.clone()
    } else {
        store(&mirror.local, name)?.root().to_path_buf()
    };
    Ok(Served { remote, dir })
}

/// What [`served_model`] resolves.
pub struct Served {
    /// `--models` as given (a path or a bucket).
    pub remote: Location,
    /// The model's directory in the root's local copy (the root itself when local).
    pub dir: PathBuf,
}

/// The model's store under the models root `models`: `name`, or the only model there.
pub fn store(models: &Path, name: Option<&str>) -> Result<Store> {
    let mut all = stores(models, name)?;
    if all.len() > 1 {
        let names: Vec<String> = all.into_iter().map(|(n, _)| n).collect();
        bail!(
            "{}: several models ({}); choose one with --name",
            models.display(),
            names.join(", ")
        );
    }
    Ok(all.remove(0).1)
}

/// The stores `mm models list` shows: `name`, or every model under `models`, by name.
pub fn stores(models: &Path, name: Option<&str>) -> Result<Vec<(String, Store)>> {
    if let Some(n) = name {
        return Ok(vec![(n.to_string(), Store::new(models.join(n)))]);
    }
    Ok(model_names(models)?
        .into_iter()
        .map(|n| {
            let s = Store::new(models.join(&n));
            (n, s)
        })
        .collect())
}

/// The models under `--models` (directories with a version history or a `LATEST`), sorted;
/// at least one.
fn model_names(models: &Path) -> Result<Vec<String>> {
    let entries = match std::fs::read_dir(models) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{}: no exported models (the directory does not exist; `mm retrain` and `mm export` \
             publish there, or pass --models / MM_MODELS)",
            models.display()
        ),
        r => r.map_err(|e| anyhow::anyhow!("{}: {e}", models.display()))?,
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().join(HISTORY).exists() || e.path().join(LATEST).exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    if names.is_empty() {
        bail!("{}: no exported models (run `mm export`)", models.display());
    }
    names.sort();
    Ok(names)
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
