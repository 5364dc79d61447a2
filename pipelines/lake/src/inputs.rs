//! Input files in object storage: `mm ingest s3://bucket/raw/*.csv.gz` (and `gs://`, `az://`).
//!
//! The objects a URL names are listed and streamed to local files through the same object-store
//! code as the lake (credentials and endpoints from the environment), a chunk at a time, so
//! memory stays bounded whatever their size; the ingest then reads those files as it reads local
//! ones (it may read a file twice, and hashes each), and names every row and error by its URL.
//! The local copies need as much disk as the objects (compressed as they are stored).

use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use object_store::ObjectStoreExt as _;

use crate::delta;
use crate::error::{LakeError, Result};
use crate::location::Location;
use crate::mirror::download;

/// One remote input and its local copy.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The object's URL (`s3://bucket/raw/day1.csv.gz`): the rows' `source_file`.
    pub url: String,
    pub local: PathBuf,
}

/// Whether `text` names an object-store location (an input to fetch) rather than a local path.
#[must_use]
pub fn is_remote(text: &str) -> bool {
    Location::parse(text).is_ok_and(|l| l.is_remote())
}

/// The prefix to list and the pattern its keys must match: a glob's literal directories, then
/// the rest (`s3://b/raw/2024-*/*.csv` lists `s3://b/raw` for `2024-*/*.csv`). Without a glob
/// character the URL is an object or a prefix (`None`).
fn split_glob(url: &str) -> (String, Option<String>) {
    let Some(at) = url.find(['*', '?', '[']) else {
        return (url.trim_end_matches('/').to_string(), None);
    };
    let cut = url[..at].rfind('/').unwrap_or(0);
    (url[..cut].to_string(), Some(url[cut + 1..].to_string()))
}

/// Hidden and bookkeeping names are skipped under a prefix, as Spark and Hive skip them (and
/// as a local directory is read).
fn hidden(key: &str) -> bool {
    key.split('/')
        .any(|part| part.starts_with('_') || part.starts_with('.'))
}

/// Downloads the objects `url` names into `into` (mirroring their keys below it), in key order:
/// every object matching a glob (`*`, `?`, `[...]`; `*` stays within one `/` level), else the
/// object itself, else every object under the prefix. `keep` chooses among the listed keys (the
/// file kinds the caller reads) when the URL is a prefix.
///
/// # Errors
/// A bad URL, a store that cannot be listed or read, or no object named: each error names the
/// URL.
pub fn fetch(url: &str, into: &Path, keep: &dyn Fn(&str) -> bool) -> Result<Vec<Fetched>> {
    let (base, pattern) = split_glob(url);
    let loc = Location::parse(&base)?;
    let err = |reason: String| LakeError::Location {
        location: url.to_string(),
        reason,
    };
    let store = delta::object_store(&loc)?;
    let listed: Vec<object_store::ObjectMeta> = delta::block_on(store.list(None).try_collect())
        .map_err(|e| err(crate::error::store_reason(&e)))?;
    let mut keys: Vec<String> = listed.iter().map(|o| o.location.to_string()).collect();
    keys.sort();
    let chosen: Vec<String> = match &pattern {
        Some(p) => {
            let glob = glob::Pattern::new(p).map_err(|e| err(format!("bad pattern: {e}")))?;
            let opts = glob::MatchOptions {
                require_literal_separator: true,
                ..glob::MatchOptions::new()
            };
            keys.into_iter()
                .filter(|k| glob.matches_with(k, opts) && !hidden(k))
                .collect()
        }
        // Nothing under it as a prefix: the URL may name one object.
        None if keys.is_empty() => return single(&loc, url, into),
        None => keys.into_iter().filter(|k| !hidden(k) && keep(k)).collect(),
    };
    if chosen.is_empty() {
        return Err(err("no object matches".into()));
    }
    let mut out = Vec::with_capacity(chosen.len());
    for key in chosen {
        let local = into.join(&key);
        download(
            store.clone(),
            &object_store::path::Path::from(key.as_str()),
            &local,
            &loc,
        )?;
        out.push(Fetched {
            url: format!("{}/{key}", base.trim_end_matches('/')),
            local,
        });
    }
    Ok(out)
}

/// The URL as one object, downloaded into `into` (its parent prefix is the store listed).
fn single(loc: &Location, url: &str, into: &Path) -> Result<Vec<Fetched>> {
    let text = loc.to_string();
    let missing = || LakeError::Location {
        location: url.to_string(),
        reason: "no object matches".into(),
    };
    let (parent, file) = text.rsplit_once('/').ok_or_else(missing)?;
    // A bucket's root (`s3://bucket`) has no parent: nothing there to read.
    let ploc = Location::parse(parent).map_err(|_| missing())?;
    let store = delta::object_store(&ploc)?;
    let key = object_store::path::Path::from(file);
    match delta::block_on(store.head(&key)) {
        Ok(_) => {}
        Err(object_store::Error::NotFound { .. }) => return Err(missing()),
        Err(e) => {
            return Err(LakeError::Location {
                location: url.to_string(),
                reason: crate::error::store_reason(&e),
            });
        }
    }
    let local = into.join(file);
    download(store, &key, &local, &ploc)?;
    Ok(vec![Fetched {
        url: url.to_string(),
        local,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_split_at_their_last_literal_directory() {
        assert_eq!(
            split_glob("s3://b/raw/*.csv.gz"),
            ("s3://b/raw".into(), Some("*.csv.gz".into()))
        );
        assert_eq!(
            split_glob("s3://b/raw/2024-*/day?.csv"),
            ("s3://b/raw".into(), Some("2024-*/day?.csv".into()))
        );
        assert_eq!(split_glob("gs://b/raw/"), ("gs://b/raw".into(), None));
        assert!(hidden("raw/_tmp/a.csv") && hidden(".x.csv") && !hidden("raw/a.csv"));
        assert!(is_remote("s3://b/x.csv") && !is_remote("data/x.csv"));
    }
}
