//! The service's write-ahead log of reported matches: what makes "acknowledged" mean "durable".
//!
//! A report is answered only once its record is on disk (`fdatasync`). One writer thread owns
//! the log and commits in groups: it takes every record waiting when it wakes, writes them all
//! and syncs once, so concurrent reports share one sync. Records carry a sequence number that
//! grows by one per record across restarts; the lake's application transaction for this replica
//! records the last sequence number a flush committed, so a record is either at or below it (in
//! the lake) or pending.
//!
//! On disk: a directory of segment files `<first sequence, 20 digits>.wal`, each a run of
//! records `[length: u32][check: u64][sequence: u64][payload]` (little-endian; `check` is the
//! XXH3 of the sequence and payload). A new segment is started at each open and when the active
//! one passes the segment size; segments whose records are all in the lake are removed
//! ([`Wal::truncate_through`]), so the log's size is bounded by the flush lag. A record cut short
//! by a crash (only the last one of the last segment can be) is cut off at open; a damaged record
//! anywhere else stops the open with an error naming the file and offset.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::Xxh3;

const HEADER: usize = 4 + 8 + 8;
/// The largest record accepted (a match of hundreds of players is a few tens of KiB).
pub const MAX_RECORD: usize = 16 << 20;
/// Records written by one sync at most (the rest wait for the next).
const MAX_GROUP: usize = 8192;

/// One record read back at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub payload: Vec<u8>,
}

struct Job {
    payload: Vec<u8>,
    /// When it was sent.
    at: Instant,
    done: tokio::sync::oneshot::Sender<io::Result<u64>>,
}

#[derive(Debug, Default)]
struct Shared {
    /// Segments by first sequence number, oldest first; the last is the one being written.
    segments: Vec<(u64, PathBuf, u64)>,
    /// Sum of the segments' sizes.
    bytes: u64,
    /// Syncs done (each a group of records).
    syncs: u64,
}

/// The log, open for appending.
#[derive(Debug, Clone)]
pub struct Wal {
    dir: PathBuf,
    tx: mpsc::Sender<Job>,
    shared: Arc<Mutex<Shared>>,
}

fn check(seq: u64, payload: &[u8]) -> u64 {
    let mut h = Xxh3::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.digest()
}

fn segment_name(first: u64) -> String {
    format!("{first:020}.wal")
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn data_err(path: &Path, offset: u64, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what} at byte {offset}", path.display()),
    )
}

/// Reads one segment's records; `Ok(Some(offset))` when it ends in a record cut short at that
/// offset.
fn read_segment(path: &Path, out: &mut Vec<Record>) -> io::Result<Option<u64>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < HEADER {
            return Ok(Some(at as u64));
        }
        let len = u32::from_le_bytes(rest[0..4].try_into().unwrap_or_default()) as usize;
        let sum = u64::from_le_bytes(rest[4..12].try_into().unwrap_or_default());
        let seq = u64::from_le_bytes(rest[12..20].try_into().unwrap_or_default());
        if len > MAX_RECORD {
            return Err(data_err(
                path,
                at as u64,
                "a record longer than the largest",
            ));
        }
        if rest.len() < HEADER + len {
            return Ok(Some(at as u64));
        }
        let payload = &rest[HEADER..HEADER + len];
        if check(seq, payload) != sum {
            // A damaged record is a torn write only when nothing follows it.
            if at + HEADER + len == bytes.len() {
                return Ok(Some(at as u64));
            }
            return Err(data_err(path, at as u64, "a damaged record"));
        }
        if out.last().is_some_and(|r| r.seq >= seq) {
            return Err(data_err(path, at as u64, "a sequence number out of order"));
        }
        out.push(Record {
            seq,
            payload: payload.to_vec(),
        });
        at += HEADER + len;
    }
    Ok(None)
}

impl Wal {
    /// Opens the log in `dir` (created if missing) and returns every record it holds, in
    /// sequence order. New records are numbered after the highest found, and never at or below
    /// `floor` (the lake's last committed sequence number, when the segments holding it were
    /// removed). A new segment is started; segments roll over at `segment_bytes`. Under
    /// concurrent appends a sync waits until `window` after its first record was sent, so that
    /// more records share it (zero: every group syncs at once).
    ///
    /// # Errors
    /// The directory cannot be read or written, or a record before the log's end is damaged.
    pub fn open(
        dir: &Path,
        segment_bytes: u64,
        window: Duration,
        floor: u64,
    ) -> io::Result<(Wal, Vec<Record>)> {
        fs::create_dir_all(dir)?;
        let mut segs: Vec<(u64, PathBuf)> = Vec::new();
        for e in fs::read_dir(dir)? {
            let path = e?.path();
            let first = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(".wal"))
                .and_then(|n| n.parse::<u64>().ok());
            if let Some(first) = first {
                segs.push((first, path));
            }
        }
        segs.sort();
        let mut records = Vec::new();
        let mut shared = Shared::default();
        let last = segs.len().saturating_sub(1);
        for (k, (first, path)) in segs.into_iter().enumerate() {
            if let Some(cut) = read_segment(&path, &mut records)? {
                if k != last {
                    return Err(data_err(
                        &path,
                        cut,
                        "a record cut short before the log's end",
                    ));
                }
                // A crash mid-write: the record was never acknowledged.
                OpenOptions::new().write(true).open(&path)?.set_len(cut)?;
                tracing::warn!(file = %path.display(), offset = cut, "cut off a torn record at the log's end");
            }
            let size = fs::metadata(&path)?.len();
            if size == 0 && k == last {
                fs::remove_file(&path)?;
                continue;
            }
            shared.bytes += size;
            shared.segments.push((first, path, size));
        }
        let next = records.last().map_or(1, |r| r.seq + 1).max(floor + 1);
        let (file, path) = Self::new_segment(dir, next)?;
        shared.segments.push((next, path, 0));
        let shared = Arc::new(Mutex::new(shared));
        let (tx, rx) = mpsc::channel::<Job>();
        let writer = Writer {
            dir: dir.to_path_buf(),
            file,
            size: 0,
            next,
            segment_bytes: segment_bytes.max(1),
            shared: Arc::clone(&shared),
            broken: None,
            window,
        };
        std::thread::Builder::new()
            .name("mm-serve-wal".into())
            .spawn(move || writer.run(&rx))?;
        Ok((
            Wal {
                dir: dir.to_path_buf(),
                tx,
                shared,
            },
            records,
        ))
    }

    fn new_segment(dir: &Path, first: u64) -> io::Result<(File, PathBuf)> {
        let path = dir.join(segment_name(first));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)?;
        sync_dir(dir)?;
        Ok((file, path))
    }

    /// Appends a record and returns its sequence number once it is on disk.
    ///
    /// # Errors
    /// The write or the sync failed (then no later append succeeds either: the service stops
    /// acknowledging reports rather than acknowledge what may not be durable).
    pub async fn append(&self, payload: Vec<u8>) -> io::Result<u64> {
        self.enqueue(payload)?.await
    }

    /// [`Wal::append`] in two steps: queues the record now (records get their sequence numbers
    /// in the order they are queued) and returns the wait for its sync.
    ///
    /// # Errors
    /// As [`Wal::append`]; the size and a stopped writer are found at once.
    pub fn enqueue(
        &self,
        payload: Vec<u8>,
    ) -> io::Result<impl std::future::Future<Output = io::Result<u64>> + use<>> {
        if payload.len() > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a record of {} bytes is over {MAX_RECORD}", payload.len()),
            ));
        }
        let (done, wait) = tokio::sync::oneshot::channel();
        self.tx
            .send(Job {
                payload,
                at: Instant::now(),
                done,
            })
            .map_err(|_| io::Error::other("the log's writer has stopped"))?;
        Ok(async move {
            wait.await
                .map_err(|_| io::Error::other("the log's writer has stopped"))?
        })
    }

    /// Removes the segments whose records are all at or below `seq` (committed to the lake),
    /// never the one being written. Returns how many were removed.
    ///
    /// # Errors
    /// A segment could not be removed.
    pub fn truncate_through(&self, seq: u64) -> io::Result<usize> {
        let mut s = self
            .shared
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?;
        let mut removed = 0;
        while s.segments.len() > 1 && s.segments[1].0 <= seq + 1 {
            let (_, path, size) = s.segments.remove(0);
            fs::remove_file(&path)?;
            s.bytes -= size;
            removed += 1;
        }
        if removed > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(removed)
    }

    /// The log's size on disk, bytes.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.shared.lock().map_or(0, |s| s.bytes)
    }

    /// Syncs done so far (each commits a group of records).
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.shared.lock().map_or(0, |s| s.syncs)
    }

    /// Segments on disk.
    #[must_use]
    pub fn segments(&self) -> usize {
        self.shared.lock().map_or(0, |s| s.segments.len())
    }
}

struct Writer {
    dir: PathBuf,
    file: File,
    size: u64,
    next: u64,
    segment_bytes: u64,
    shared: Arc<Mutex<Shared>>,
    /// The first failure: every later append fails with it.
    broken: Option<String>,
    /// How long a group waits for more records after its first was sent, when the previous
    /// group held more than one.
    window: Duration,
}

impl Writer {
    fn run(mut self, rx: &mpsc::Receiver<Job>) {
        let mut buf = Vec::new();
        let mut last_group = 0;
        while let Ok(first) = rx.recv() {
            // Under concurrent reports (the last sync held several), the group waits for more
            // before it syncs: fewer syncs for the same records, each sync a virtio kick and a
            // wake-up of this thread. A lone report is synced at once.
            if last_group > 1 {
                let due = first.at + self.window;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
            }
            let mut group = vec![first];
            while group.len() < MAX_GROUP {
                match rx.try_recv() {
                    Ok(j) => group.push(j),
                    Err(_) => break,
                }
            }
            last_group = group.len();
            let result = self.write_group(&group, &mut buf);
            match result {
                Ok(first_seq) => {
                    for (k, j) in group.into_iter().enumerate() {
                        let _ = j.done.send(Ok(first_seq + k as u64));
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    tracing::error!(error = %text, "the log could not be written; reports are refused from now on");
                    self.broken.get_or_insert(text.clone());
                    for j in group {
                        let _ = j.done.send(Err(io::Error::other(text.clone())));
                    }
                }
            }
        }
    }

    fn write_group(&mut self, group: &[Job], buf: &mut Vec<u8>) -> io::Result<u64> {
        if let Some(b) = &self.broken {
            return Err(io::Error::other(b.clone()));
        }
        if self.size >= self.segment_bytes {
            let (file, path) = Wal::new_segment(&self.dir, self.next)?;
            self.file = file;
            self.size = 0;
            if let Ok(mut s) = self.shared.lock() {
                s.segments.push((self.next, path, 0));
            }
        }
        buf.clear();
        let first = self.next;
        for (k, j) in group.iter().enumerate() {
            let seq = first + k as u64;
            let len = u32::try_from(j.payload.len()).unwrap_or(u32::MAX);
            buf.extend_from_slice(&len.to_le_bytes());
            buf.extend_from_slice(&check(seq, &j.payload).to_le_bytes());
            buf.extend_from_slice(&seq.to_le_bytes());
            buf.extend_from_slice(&j.payload);
        }
        self.file.write_all(buf)?;
        self.file.sync_data()?;
        self.next = first + group.len() as u64;
        self.size += buf.len() as u64;
        if let Ok(mut s) = self.shared.lock() {
            s.bytes += buf.len() as u64;
            s.syncs += 1;
            if let Some(last) = s.segments.last_mut() {
                last.2 = self.size;
            }
        }
        Ok(first)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Records come back in order after a reopen, numbered on; a torn tail is cut off; segments
    /// at or below a committed sequence number are removed, the active one never.
    #[test]
    fn records_survive_a_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let rt = rt();
        let (wal, old) = Wal::open(dir.path(), 50, Duration::ZERO, 0).unwrap();
        assert!(old.is_empty());
        let seqs: Vec<u64> = rt.block_on(async {
            let mut v = Vec::new();
            for k in 0..10u8 {
                v.push(wal.append(vec![k; 40]).await.unwrap());
            }
            v
        });
        assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
        // 60-byte records, segments roll at 50 bytes: one record each.
        assert_eq!(wal.segments(), 10);
        drop(wal);
        // A torn write at the end of the last segment.
        let mut segs: Vec<PathBuf> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        segs.sort();
        let last = segs.last().unwrap();
        let mut f = OpenOptions::new().append(true).open(last).unwrap();
        f.write_all(&[9, 0, 0, 0, 1, 2, 3]).unwrap();
        drop(f);
        let (wal, recs) = Wal::open(dir.path(), 50, Duration::ZERO, 0).unwrap();
        assert_eq!(recs.len(), 10);
        assert_eq!(recs[3].payload, vec![3u8; 40]);
        assert_eq!(rt.block_on(wal.append(vec![1])).unwrap(), 11);
        let before = wal.segments();
        let removed = wal.truncate_through(5).unwrap();
        assert_eq!(removed, 5, "the segments of records 1..=5");
        assert_eq!(wal.segments(), before - 5);
        drop(wal);
        let (_, recs) = Wal::open(dir.path(), 50, Duration::ZERO, 0).unwrap();
        assert_eq!(recs.first().unwrap().seq, 6);
        // A floor above every record: numbering continues above it.
        let (wal, _) = Wal::open(dir.path(), 1 << 20, Duration::ZERO, 100).unwrap();
        assert_eq!(rt.block_on(wal.append(vec![2])).unwrap(), 101);
    }

    /// A damaged record in the middle of the log stops the open, naming the file.
    #[test]
    fn a_damaged_record_before_the_end_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let rt = rt();
        let (wal, _) = Wal::open(dir.path(), 1 << 20, Duration::ZERO, 0).unwrap();
        rt.block_on(async {
            for k in 0..3u8 {
                wal.append(vec![k; 10]).await.unwrap();
            }
        });
        drop(wal);
        let seg = dir.path().join(segment_name(1));
        let mut bytes = fs::read(&seg).unwrap();
        bytes[HEADER + 2] ^= 0xff; // inside the first record's payload
        fs::write(&seg, bytes).unwrap();
        let e = Wal::open(dir.path(), 1 << 20, Duration::ZERO, 0).unwrap_err();
        assert!(e.to_string().contains(&segment_name(1)), "{e}");
    }

    /// Concurrent appends share syncs: 200 appends in flight at once take fewer than 200 syncs,
    /// and every number is given once, with and without a group wait.
    #[test]
    fn concurrent_appends_are_committed_in_groups() {
        for window in [Duration::ZERO, Duration::from_millis(2)] {
            concurrent_appends(window);
        }
    }

    fn concurrent_appends(window: Duration) {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (wal, _) = Wal::open(dir.path(), 1 << 20, window, 0).unwrap();
        let mut seqs: Vec<u64> = rt.block_on(async {
            let tasks: Vec<_> = (0..200u8)
                .map(|t| {
                    let w = wal.clone();
                    tokio::spawn(async move { w.append(vec![t; 100]).await.unwrap() })
                })
                .collect();
            let mut all = Vec::new();
            for t in tasks {
                all.push(t.await.unwrap());
            }
            all
        });
        seqs.sort_unstable();
        assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
        assert!(
            wal.syncs() < 200,
            "{} syncs, window {window:?}",
            wal.syncs()
        );
        // Every record reads back, in order, after a reopen.
        drop(wal);
        let (_, recs) = Wal::open(dir.path(), 1 << 20, window, 0).unwrap();
        let back: Vec<u64> = recs.iter().map(|r| r.seq).collect();
        assert_eq!(back, (1..=200).collect::<Vec<_>>());
    }
}
