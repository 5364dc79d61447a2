//! Artifact stores in object storage: `--models s3://bucket/models` (or `gs://`, `az://`).
//!
//! The artifact format and its checks live in `mm-artifact`, which reads a local directory and
//! stays free of network code (matcher services embed it). A remote store is used through a
//! local mirror in the cache: [`localize`] downloads the prefix (version files once, since a
//! published version never changes; the `LATEST` and `HISTORY` pointers every time), and the
//! artifact is then opened and verified from the mirror as from any directory. [`Mirror::push`]
//! uploads what a local command added: a version's files first, each only if absent and its
//! manifest last, then the pointers. A reader therefore never sees `LATEST` name a version whose
//! files are not all there, and a half-uploaded version has no manifest and fails verification.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path as ObjPath;
use object_store::{ObjectStore, ObjectStoreExt as _};

use crate::delta;
use crate::error::{LakeError, Result, io_err};
use crate::location::{Location, cache_root};

/// Files that move: re-read on every pull, uploaded last on every push.
const POINTERS: [&str; 2] = ["LATEST", "HISTORY"];

/// A remote prefix and its local copy.
#[derive(Debug, Clone)]
pub struct Mirror {
    pub remote: Location,
    pub local: PathBuf,
}

fn store_of(loc: &Location) -> Result<Arc<dyn ObjectStore>> {
    delta::object_store(loc)
}

fn remote_err(loc: &Location, rel: &str) -> impl Fn(object_store::Error) -> LakeError {
    let location = if rel.is_empty() {
        loc.to_string()
    } else {
        format!("{loc}/{rel}")
    };
    move |e| LakeError::Location {
        location: location.clone(),
        reason: crate::error::store_reason(&e),
    }
}

/// A local copy of the file `rel` of the table at `loc`: the file itself for a local table; for
/// a remote one a copy under the cache (`cache_root()/<kind>/<scheme>/<host>/<path>/<rel>`),
/// downloaded once (Delta data files never change once written). `store` is the table's object
/// store, asked for only when a download is needed.
pub(crate) fn local_copy(
    loc: &Location,
    kind: &str,
    rel: &str,
    store: impl FnOnce() -> Result<Arc<dyn ObjectStore>>,
) -> Result<PathBuf> {
    match loc {
        Location::Local(dir) => Ok(dir.join(rel)),
        Location::Remote(url) => {
            let key = format!("{}{}", url.host_str().unwrap_or(""), url.path());
            let dst = crate::location::cache_root()
                .join(kind)
                .join(url.scheme())
                .join(key.trim_start_matches('/'))
                .join(rel);
            if !dst.exists() {
                download(store()?, &ObjPath::from(rel), &dst, loc)?;
            }
            Ok(dst)
        }
    }
}

/// Copies object `key` of `store` to `dst`, streamed through a temporary sibling so that a
/// reader never sees half a file and memory stays bounded by one chunk. `remote` names the
/// object in errors.
pub(crate) fn download(
    store: Arc<dyn ObjectStore>,
    key: &ObjPath,
    dst: &Path,
    remote: &Location,
) -> Result<()> {
    use std::io::Write;
    let rel = key.to_string();
    if let Some(p) = dst.parent() {
        fs::create_dir_all(p).map_err(io_err(p))?;
    }
    let tmp = dst.with_extension(format!("mm-part{}", std::process::id()));
    let mut file = std::io::BufWriter::new(fs::File::create(&tmp).map_err(io_err(&tmp))?);
    let key = key.clone();
    let written = delta::block_on(async {
        let mut chunks = store.get(&key).await?.into_stream();
        while let Some(chunk) = chunks.try_next().await? {
            if let Err(e) = file.write_all(&chunk) {
                return Ok(Err(e));
            }
        }
        Ok(file.flush())
    })
    .map_err(remote_err(remote, &rel))
    .and_then(|w| w.map_err(io_err(&tmp)));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, dst).map_err(io_err(dst))
}

fn is_pointer(rel: &str) -> bool {
    POINTERS.contains(&rel.rsplit('/').next().unwrap_or(rel))
}

/// The local directory for `path`: the path itself, or for a URL a mirror pulled just now.
pub fn localize(path: &Path) -> Result<PathBuf> {
    match Location::from_path(path)? {
        Location::Local(p) => Ok(p),
        remote => Ok(Mirror::pull(&remote)?.local),
    }
}

impl Mirror {
    /// The mirror directory of a remote prefix (not pulled).
    #[must_use]
    pub fn of(remote: &Location) -> Mirror {
        let local = match remote {
            Location::Local(p) => p.clone(),
            Location::Remote(u) => cache_root()
                .join("objects")
                .join(u.scheme())
                .join(u.host_str().unwrap_or("_"))
                .join(u.path().trim_start_matches('/')),
        };
        Mirror {
            remote: remote.clone(),
            local,
        }
    }

    /// Downloads the prefix into the mirror. A prefix with no objects gives an empty mirror (a
    /// models root not used yet); a bucket that cannot be listed is an error naming it.
    pub fn pull(remote: &Location) -> Result<Mirror> {
        let m = Mirror::of(remote);
        if remote.local().is_some() {
            return Ok(m);
        }
        let store = store_of(remote)?;
        let objects: Vec<object_store::ObjectMeta> =
            delta::block_on(store.list(None).try_collect()).map_err(remote_err(remote, ""))?;
        fs::create_dir_all(&m.local).map_err(io_err(&m.local))?;
        // Pointers no longer on the remote are stale here too.
        for p in POINTERS {
            let _ = fs::remove_file(m.local.join(p));
        }
        for o in objects {
            let rel = o.location.to_string();
            let dst = m.local.join(&rel);
            let fresh = !is_pointer(&rel) && fs::metadata(&dst).is_ok_and(|md| md.len() == o.size);
            if fresh {
                continue;
            }
            download(store.clone(), &o.location, &dst, remote)?;
        }
        Ok(m)
    }

    /// Uploads the mirror's files the remote lacks (version files, each only if absent, the
    /// manifest of each version last), then the pointers. Returns the uploaded paths.
    pub fn push(&self) -> Result<Vec<String>> {
        if self.remote.local().is_some() {
            return Ok(Vec::new());
        }
        let store = store_of(&self.remote)?;
        let present: std::collections::HashSet<String> =
            delta::block_on(store.list(None).try_collect::<Vec<_>>())
                .map_err(remote_err(&self.remote, ""))?
                .into_iter()
                .map(|o| o.location.to_string())
                .collect();
        let mut files = Vec::new();
        walk(&self.local, &self.local, &mut files)?;
        // Data files, then each version's manifest, then the pointers.
        files.sort_by_key(|rel| {
            let rank = if is_pointer(rel) {
                2
            } else if rel.ends_with("manifest.json") {
                1
            } else {
                0
            };
            (rank, rel.clone())
        });
        let mut uploaded = Vec::new();
        for rel in files {
            let pointer = is_pointer(&rel);
            if !pointer && present.contains(&rel) {
                continue;
            }
            let src = self.local.join(&rel);
            // Pointers are replaced; version files are created only where absent.
            crate::delta::upload(store.clone(), &src, &rel, !pointer).map_err(|e| {
                LakeError::Location {
                    location: format!("{}/{rel}", self.remote),
                    reason: crate::error::store_reason(&e),
                }
            })?;
            uploaded.push(rel);
        }
        Ok(uploaded)
    }
}

/// Relative paths (with `/`) of the files below `dir`, skipping hidden and temporary names
/// (`.` and `_` prefixes, as Spark and Hive do, and our partial downloads).
pub(crate) fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Ok(());
    };
    for e in rd {
        let p = e.map_err(io_err(dir))?.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name.starts_with('.') || name.starts_with('_') || name.contains(".mm-part") {
            continue;
        }
        if p.is_dir() {
            walk(base, &p, out)?;
        } else if let Ok(rel) = p.strip_prefix(base) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}
