//! The run's lock: one retrain per working directory.

use std::path::Path;

use crate::{RetrainError, io};

/// The run's lock: an OS lock on `<work>/retrain.lock`, released by the kernel when the file
/// is closed or the process dies. On a clean end the pid inside is cleared.
#[derive(Debug)]
pub struct Lock {
    file: std::fs::File,
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Still holding the lock: nobody reads a half-cleared file.
        let _ = self.file.set_len(0);
    }
}

/// Takes the lock of `work`, or says who holds it. A pid left in the file by an owner that
/// died is reported in `log` as taken over.
///
/// # Errors
/// [`RetrainError::Locked`] while another process holds it; an I/O error.
pub fn acquire(work: &Path, log: &mut Vec<String>) -> Result<Lock, RetrainError> {
    use std::io::{Read as _, Seek as _, Write as _};
    let path = work.join("retrain.lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    let mut owner = String::new();
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let _ = file.read_to_string(&mut owner);
            return Err(RetrainError::Locked {
                lock: path,
                pid: owner.trim().parse().ok(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(&path)(e)),
    }
    let _ = file.read_to_string(&mut owner);
    if let Ok(pid) = owner.trim().parse::<u32>() {
        let line = format!("took over a stale lock (pid {pid}, no longer running)");
        tracing::warn!(stale_pid = pid, "{line}");
        log.push(line);
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.sync_all())
        .map_err(io(&path))?;
    Ok(Lock { file })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Many would-be owners find the same dead owner's pid and race for the lock: exactly
    /// one gets it while the others hold their attempts, and it reports the take-over.
    #[test]
    fn one_winner_among_racing_runs_on_a_dead_lock() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("retrain.lock"), "4194999\n").unwrap();
            let barrier = std::sync::Barrier::new(8);
            let results: Vec<(bool, Vec<String>)> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            let mut log = Vec::new();
                            let r = acquire(dir.path(), &mut log);
                            let won = r.is_ok();
                            if let Err(e) = &r {
                                assert!(matches!(e, RetrainError::Locked { .. }), "{e}");
                            }
                            // Hold the attempt until every thread has tried.
                            barrier.wait();
                            drop(r);
                            (won, log)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let winners: Vec<_> = results.iter().filter(|r| r.0).collect();
            assert_eq!(winners.len(), 1);
            assert!(
                winners[0].1[0].contains("pid 4194999"),
                "{:?}",
                winners[0].1
            );
            // Released and cleared: the next run takes it without a take-over.
            let mut log = Vec::new();
            let lock = acquire(dir.path(), &mut log).unwrap();
            assert!(log.is_empty(), "{log:?}");
            let pid = std::fs::read_to_string(dir.path().join("retrain.lock")).unwrap();
            assert_eq!(pid.trim(), std::process::id().to_string());
            drop(lock);
        }
    }
}
