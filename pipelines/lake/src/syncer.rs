//! Background fsync of staged files.
//!
//! A run's files must be durable before its commit point, but nothing needs them durable any
//! earlier. Waiting for each file's fsync on the thread that wrote it leaves a core idle for the
//! length of a disk flush: on the 10M-row ingest benchmark (688 day files, two cores) that was
//! about a tenth of the run. A [`Syncer`] takes the open file instead and a few I/O threads sync
//! it (and then its directory, so that its entry is durable too) while the writers go on
//! computing; [`Syncer::finish`] waits for every sync and reports the first failure, and
//! [`crate::Txn`] calls it before it writes its commit point.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::error::{LakeError, Result, io_err};

/// I/O threads. They spend their time waiting for the disk, not computing.
const THREADS: usize = 4;
/// Files handed over but not yet synced before a writer waits: bounds the open file handles.
const QUEUE: usize = 64;

/// Syncs files in the background; started on the first file.
#[derive(Debug, Default)]
pub struct Syncer {
    pool: Mutex<Option<Pool>>,
}

#[derive(Debug)]
struct Pool {
    tx: SyncSender<(PathBuf, File)>,
    threads: Vec<JoinHandle<()>>,
    error: Arc<Mutex<Option<LakeError>>>,
}

fn sync_one(path: &Path, file: &File) -> Result<()> {
    file.sync_all().map_err(io_err(path))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

impl Pool {
    fn start() -> Result<Pool> {
        let (tx, rx) = sync_channel::<(PathBuf, File)>(QUEUE);
        let rx: Arc<Mutex<Receiver<(PathBuf, File)>>> = Arc::new(Mutex::new(rx));
        let error: Arc<Mutex<Option<LakeError>>> = Arc::default();
        let mut threads = Vec::with_capacity(THREADS);
        for k in 0..THREADS {
            let (rx, error) = (rx.clone(), error.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("lake-sync-{k}"))
                .spawn(move || {
                    loop {
                        // The lock is held only to take the next file, never across a sync.
                        let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        let Ok((path, file)) = next else { return };
                        if let Err(e) = sync_one(&path, &file) {
                            let mut first = error.lock().unwrap_or_else(PoisonError::into_inner);
                            first.get_or_insert(e);
                        }
                    }
                })
                .map_err(io_err(Path::new("<lake sync thread>")))?;
            threads.push(spawned);
        }
        Ok(Pool { tx, threads, error })
    }
}

impl Syncer {
    /// Hands `file` (written at `path`) over to be synced; waits only when [`QUEUE`] files are
    /// already waiting.
    pub fn sync_later(&self, path: PathBuf, file: File) -> Result<()> {
        let tx = {
            let mut slot = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            let pool = match &mut *slot {
                Some(pool) => pool,
                None => slot.insert(Pool::start()?),
            };
            pool.tx.clone()
        };
        // The lock is released: a full queue makes this writer wait, not the others.
        tx.send((path, file)).map_err(|_| LakeError::Corrupt {
            path: PathBuf::from("<lake sync thread>"),
            reason: "the sync threads stopped".into(),
        })
    }

    /// Waits until every file handed over is synced; the first failure, if any. The syncer can
    /// be used again afterwards.
    pub fn finish(&self) -> Result<()> {
        let pool = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(Pool { tx, threads, error }) = pool else {
            return Ok(());
        };
        drop(tx);
        let mut panicked = false;
        for t in threads {
            panicked |= t.join().is_err();
        }
        let first = error.lock().unwrap_or_else(PoisonError::into_inner).take();
        match first {
            Some(e) => Err(e),
            None if panicked => Err(LakeError::Corrupt {
                path: PathBuf::from("<lake sync thread>"),
                reason: "a sync thread panicked".into(),
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_synced_before_finish_returns() {
        let dir = tempfile::tempdir().unwrap();
        let s = Syncer::default();
        assert!(s.finish().is_ok(), "nothing handed over");
        for round in 0..2 {
            for i in 0..(QUEUE * 2) {
                let p = dir.path().join(format!("f{round}-{i}"));
                std::fs::write(&p, b"x").unwrap();
                s.sync_later(p.clone(), File::open(&p).unwrap()).unwrap();
            }
            s.finish().unwrap();
            assert!(s.pool.lock().unwrap().is_none(), "threads joined");
        }
    }

    #[test]
    fn a_failed_sync_is_reported_by_finish() {
        let dir = tempfile::tempdir().unwrap();
        let s = Syncer::default();
        let p = dir.path().join("gone").join("f");
        std::fs::create_dir(dir.path().join("gone")).unwrap();
        std::fs::write(&p, b"x").unwrap();
        let f = File::open(&p).unwrap();
        // The file syncs, but its directory no longer exists when the thread opens it.
        std::fs::remove_file(&p).unwrap();
        std::fs::remove_dir(dir.path().join("gone")).unwrap();
        s.sync_later(p, f).unwrap();
        let e = s.finish().unwrap_err();
        assert!(e.to_string().contains("gone"), "{e}");
    }
}
