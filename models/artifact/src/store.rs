//! A model's versions on disk: `<root>/<version>/` directories, the `LATEST` pointer and the
//! `HISTORY` of promotions. Publishing is atomic; loading verifies everything; a
//! [`Reloader`] swaps in a new LATEST for a running service only once it has verified.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::error::{ArtifactError, Problem};
use crate::load::Artifact;
use crate::manifest::{FileEntry, Manifest};

/// The pointer file: the version services load.
pub const LATEST: &str = "LATEST";
/// Every promotion, one version per line, oldest first: what rollback walks back through.
pub const HISTORY: &str = "HISTORY";
const TMP_PREFIX: &str = ".tmp-";

/// The steps of [`Store::publish`], in order: tests inject a failure before each to prove
/// that a crash at any point leaves the previous version intact and loadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishStep {
    CreateTemp,
    WriteFiles,
    WriteManifest,
    SyncTemp,
    Rename,
    WriteLatest,
    MoveLatest,
    AppendHistory,
}

impl PublishStep {
    pub const ALL: [PublishStep; 8] = [
        PublishStep::CreateTemp,
        PublishStep::WriteFiles,
        PublishStep::WriteManifest,
        PublishStep::SyncTemp,
        PublishStep::Rename,
        PublishStep::WriteLatest,
        PublishStep::MoveLatest,
        PublishStep::AppendHistory,
    ];
}

/// One model's directory.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

fn sync_dir(dir: &Path) -> Result<(), ArtifactError> {
    crate::fsio::sync_dir(dir).map_err(|e| ArtifactError::io(dir, &e))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), ArtifactError> {
    let mut f = File::create(path).map_err(|e| ArtifactError::io(path, &e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| ArtifactError::io(path, &e))
}

/// A version name is a plain directory name.
fn check_version(version: &str, root: &Path) -> Result<(), ArtifactError> {
    let ok = !version.is_empty()
        && !version.starts_with('.')
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ArtifactError::new(
            root,
            Problem::Invalid(format!(
                "version name {version:?}: use letters, digits, '-', '_' and '.'"
            )),
        ))
    }
}

impl Store {
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    #[must_use]
    pub fn dir(&self, version: &str) -> PathBuf {
        self.root.join(version)
    }

    /// Published versions (directories with a manifest), in name order.
    ///
    /// # Errors
    /// The root cannot be listed.
    pub fn versions(&self) -> Result<Vec<String>, ArtifactError> {
        let rd = match fs::read_dir(&self.root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ArtifactError::io(&self.root, &e)),
        };
        let mut v: Vec<String> = rd
            .filter_map(Result::ok)
            .filter(|e| e.path().join("manifest.json").is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.'))
            .collect();
        v.sort();
        Ok(v)
    }

    /// The name the next published version takes: `v0001`, or one more than the highest
    /// `vNNNN` already published (the one rule `mm export` and `mm retrain` share).
    ///
    /// # Errors
    /// The root cannot be listed.
    pub fn next_version(&self) -> Result<String, ArtifactError> {
        let n = self
            .versions()?
            .iter()
            .filter_map(|v| v.strip_prefix('v').and_then(|d| d.parse::<u32>().ok()))
            .max()
            .unwrap_or(0);
        Ok(format!("v{:04}", n + 1))
    }

    /// The version `LATEST` names, if any.
    ///
    /// # Errors
    /// `LATEST` exists but cannot be read or names nothing valid.
    pub fn latest(&self) -> Result<Option<String>, ArtifactError> {
        let path = self.root.join(LATEST);
        match fs::read_to_string(&path) {
            Ok(s) => {
                let v = s.trim().to_string();
                check_version(&v, &path)?;
                Ok(Some(v))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ArtifactError::io(path, &e)),
        }
    }

    /// Promotions, oldest first.
    ///
    /// # Errors
    /// `HISTORY` exists but cannot be read.
    pub fn history(&self) -> Result<Vec<String>, ArtifactError> {
        let path = self.root.join(HISTORY);
        match fs::read_to_string(&path) {
            Ok(s) => Ok(s
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(ArtifactError::io(path, &e)),
        }
    }

    /// Loads and verifies one version.
    ///
    /// # Errors
    /// See [`Artifact::open`].
    pub fn open(&self, version: &str) -> Result<Artifact, ArtifactError> {
        check_version(version, &self.root)?;
        Artifact::open(&self.dir(version))
    }

    /// Loads and verifies the version `LATEST` names.
    ///
    /// # Errors
    /// No `LATEST`, or the version is refused.
    pub fn open_latest(&self) -> Result<Artifact, ArtifactError> {
        let v = self
            .latest()?
            .ok_or_else(|| ArtifactError::new(self.root.join(LATEST), Problem::Missing))?;
        self.open(&v)
    }

    /// Loads and verifies an artifact from either kind of directory a user may name: a version
    /// directory (it holds `manifest.json`) or a model directory (its `LATEST`).
    ///
    /// # Errors
    /// Neither kind of directory, or the version is refused.
    pub fn open_any(path: &Path) -> Result<Artifact, ArtifactError> {
        if !path.join("manifest.json").exists() && path.join(LATEST).exists() {
            return Store::new(path).open_latest();
        }
        Artifact::open(path)
    }

    /// Publishes a new version atomically: the files and the manifest (whose `files` list is
    /// filled in here) go to a temporary directory, are synced, and the directory is renamed
    /// to `<root>/<version>`. With `promote`, `LATEST` then moves to it (written aside,
    /// synced, renamed) and the promotion is appended to `HISTORY`. A failure at any step
    /// leaves every earlier version and `LATEST` as they were; a leftover temporary directory
    /// is removed by the next publish. `fail_before` injects a failure (tests).
    ///
    /// # Errors
    /// The version exists, or any write fails.
    pub fn publish(
        &self,
        version: &str,
        mut manifest: Manifest,
        files: &[(String, Vec<u8>)],
        promote: bool,
        fail_before: Option<PublishStep>,
    ) -> Result<PathBuf, ArtifactError> {
        check_version(version, &self.root)?;
        let inject = |step| self.inject(fail_before, step);
        let dest = self.dir(version);
        if dest.exists() {
            return Err(ArtifactError::new(
                dest,
                Problem::Invalid("this version exists already; versions are immutable".into()),
            ));
        }
        fs::create_dir_all(&self.root).map_err(|e| ArtifactError::io(&self.root, &e))?;
        self.remove_stale_temps()?;
        inject(PublishStep::CreateTemp)?;
        let tmp = self
            .root
            .join(format!("{TMP_PREFIX}{version}-{}", std::process::id()));
        fs::create_dir(&tmp).map_err(|e| ArtifactError::io(&tmp, &e))?;
        inject(PublishStep::WriteFiles)?;
        manifest.files.clear();
        for (name, bytes) in files {
            write_synced(&tmp.join(name), bytes)?;
            manifest.files.push(FileEntry::of(name, bytes));
        }
        manifest.files.sort_by(|a, b| a.path.cmp(&b.path));
        manifest.model_version = version.to_string();
        inject(PublishStep::WriteManifest)?;
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| ArtifactError::new(&tmp, Problem::Invalid(e.to_string())))?;
        write_synced(&tmp.join("manifest.json"), &json)?;
        inject(PublishStep::SyncTemp)?;
        sync_dir(&tmp)?;
        inject(PublishStep::Rename)?;
        fs::rename(&tmp, &dest).map_err(|e| ArtifactError::io(&dest, &e))?;
        sync_dir(&self.root)?;
        if promote {
            self.set_latest(version, fail_before, true)?;
        }
        Ok(dest)
    }

    /// The injected failure of tests, if `step` is the chosen one.
    fn inject(
        &self,
        fail_before: Option<PublishStep>,
        step: PublishStep,
    ) -> Result<(), ArtifactError> {
        if fail_before == Some(step) {
            Err(ArtifactError::new(
                &self.root,
                Problem::Io(format!("injected failure before {step:?}")),
            ))
        } else {
            Ok(())
        }
    }

    fn remove_stale_temps(&self) -> Result<(), ArtifactError> {
        let rd = fs::read_dir(&self.root).map_err(|e| ArtifactError::io(&self.root, &e))?;
        for e in rd.filter_map(Result::ok) {
            let name = e.file_name();
            if name.to_string_lossy().starts_with(TMP_PREFIX) {
                let p = e.path();
                if p.is_dir() {
                    fs::remove_dir_all(&p).map_err(|e| ArtifactError::io(&p, &e))?;
                } else {
                    fs::remove_file(&p).map_err(|e| ArtifactError::io(&p, &e))?;
                }
            }
        }
        Ok(())
    }

    fn set_latest(
        &self,
        version: &str,
        fail_before: Option<PublishStep>,
        append: bool,
    ) -> Result<(), ArtifactError> {
        let inject = |step| self.inject(fail_before, step);
        inject(PublishStep::WriteLatest)?;
        let tmp = self.root.join(format!("{TMP_PREFIX}{LATEST}"));
        write_synced(&tmp, format!("{version}\n").as_bytes())?;
        inject(PublishStep::MoveLatest)?;
        let latest = self.root.join(LATEST);
        crate::fsio::publish(&tmp, &latest).map_err(|e| ArtifactError::io(&latest, &e))?;
        if !append {
            return Ok(());
        }
        inject(PublishStep::AppendHistory)?;
        let path = self.root.join(HISTORY);
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| ArtifactError::io(&path, &e))?;
        writeln!(f, "{version}")
            .and_then(|()| f.sync_all())
            .map_err(|e| ArtifactError::io(&path, &e))
    }

    /// Points `LATEST` at `version` after verifying it.
    ///
    /// # Errors
    /// The version is refused by the loader, or a write fails.
    pub fn promote(&self, version: &str) -> Result<(), ArtifactError> {
        self.open(version)?;
        self.set_latest(version, None, true)
    }

    /// Points `LATEST` back at the version promoted before the current one (verified first),
    /// and returns it. `HISTORY` is a stack: promote pushes, rollback pops, so repeated
    /// rollbacks walk further back.
    ///
    /// # Errors
    /// Nothing to roll back to, or that version is refused.
    pub fn rollback(&self) -> Result<String, ArtifactError> {
        let current = self.latest()?;
        let mut hist = self.history()?;
        // Drop the current version's own promotions from the end; the one before is the target.
        while hist.last().is_some_and(|v| Some(v) == current.as_ref()) {
            hist.pop();
        }
        let target = hist.last().cloned().ok_or_else(|| {
            ArtifactError::new(
                self.root.join(HISTORY),
                Problem::Invalid("no earlier promotion to roll back to".into()),
            )
        })?;
        self.open(&target)?;
        // The history first: a crash before LATEST moves leaves a retry with the same target.
        let body: String = hist.iter().map(|v| format!("{v}\n")).collect();
        let path = self.root.join(HISTORY);
        crate::fsio::write_atomic(&path, body.as_bytes())
            .map_err(|e| ArtifactError::io(&path, &e))?;
        self.set_latest(&target, None, false)?;
        Ok(target)
    }
}

/// What a reload check did.
#[derive(Debug)]
pub enum Reload {
    /// `LATEST` still names the loaded version.
    Unchanged,
    /// A new version verified and is now current.
    Swapped { from: String, to: String },
    /// `LATEST` names a version that was refused; the current one stays.
    Kept {
        current: String,
        error: ArtifactError,
    },
}

/// Hot reload for services: holds the current artifact; [`Reloader::check`] loads a new
/// `LATEST` and swaps it in only once it has verified.
#[derive(Debug)]
pub struct Reloader {
    store: Store,
    current: RwLock<Arc<Artifact>>,
}

impl Reloader {
    /// Loads the current `LATEST`.
    ///
    /// # Errors
    /// No `LATEST`, or it is refused.
    pub fn start(store: Store) -> Result<Reloader, ArtifactError> {
        let a = store.open_latest()?;
        Ok(Reloader {
            store,
            current: RwLock::new(Arc::new(a)),
        })
    }

    /// The artifact to score with (cheap: a reference count).
    #[must_use]
    pub fn current(&self) -> Arc<Artifact> {
        match self.current.read() {
            Ok(g) => Arc::clone(&g),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// Checks `LATEST` and swaps in a new version if it verifies.
    pub fn check(&self) -> Reload {
        let current = self.current();
        let now = current.manifest.model_version.clone();
        let latest = match self.store.latest() {
            Ok(Some(v)) => v,
            Ok(None) => {
                return Reload::Kept {
                    current: now,
                    error: ArtifactError::new(self.store.root().join(LATEST), Problem::Missing),
                };
            }
            Err(error) => {
                return Reload::Kept {
                    current: now,
                    error,
                };
            }
        };
        if latest == now {
            return Reload::Unchanged;
        }
        match self.store.open(&latest) {
            Ok(a) => {
                let a = Arc::new(a);
                match self.current.write() {
                    Ok(mut g) => *g = a,
                    Err(p) => *p.into_inner() = a,
                }
                Reload::Swapped {
                    from: now,
                    to: latest,
                }
            }
            Err(error) => Reload::Kept {
                current: now,
                error,
            },
        }
    }
}
