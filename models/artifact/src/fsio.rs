//! Files that survive a crash: the one atomic write of the workspace.
//!
//! A reader of `path` sees the old bytes or the new bytes, never a mix, and after a return the
//! new bytes survive a power cut: the data go to a temporary sibling, which is fsynced, renamed
//! over `path`, and the directory is fsynced so that the rename itself is durable. Every crate
//! that writes a file a later run relies on (`state.json`, reports, fits, the artifact store)
//! uses these functions; they live here because this crate is the lowest one they all depend on.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The temporary sibling `write_atomic` and [`publish`] callers use for `path`: hidden, and
/// unique to this process so that two writers never share one.
#[must_use]
pub fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Writes `bytes` to `path` atomically and durably (temporary sibling, fsync, rename, fsync of
/// the directory). On an error the temporary file is removed and `path` is untouched.
///
/// # Errors
/// The I/O error of the step that failed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(path);
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    publish(&tmp, path)
}

/// Publishes a finished temporary file (written by a streaming writer) at `path`: fsync, rename
/// over `path`, fsync of the directory. On an error the temporary file is removed.
///
/// # Errors
/// The I/O error of the step that failed.
pub fn publish(tmp: &Path, path: &Path) -> std::io::Result<()> {
    let done = File::options()
        .read(true)
        .write(true)
        .open(tmp)
        .and_then(|f| f.sync_all())
        .and_then(|()| std::fs::rename(tmp, path));
    if let Err(e) = done {
        let _ = std::fs::remove_file(tmp);
        return Err(e);
    }
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Fsyncs a directory, making the renames and creations inside it durable. A platform that does
/// not let a directory be opened (not Unix) is skipped.
///
/// # Errors
/// The I/O error of the fsync.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    match File::open(dir) {
        Ok(f) => f.sync_all(),
        Err(_) if !cfg!(unix) => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        write_atomic(&p, b"old").unwrap();
        write_atomic(&p, b"new bytes").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new bytes");
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        write_atomic(&p, b"old").unwrap();
        // The rename cannot replace a non-empty directory: the write fails and `p` survives.
        let blocked = d.path().join("dir");
        std::fs::create_dir(&blocked).unwrap();
        std::fs::write(blocked.join("x"), b"x").unwrap();
        assert!(write_atomic(&blocked, b"new").is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert!(
            !temp_path(&blocked).exists(),
            "the temporary file is removed"
        );
    }
}
