//! Input files: discovery, opening (plain or gzip), hashing, and cutting text into chunks at
//! record boundaries so that chunks can be parsed in parallel with exact line numbers.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};

use sha2::{Digest, Sha256};

use crate::IngestError;

/// How a file's bytes are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    Csv,
    JsonLines,
    Parquet,
}

/// How many bytes of text the files stand for, for sizing per-run scratch structures: a file's
/// size on disk, times 8 for gzip and Parquet (a rough, deliberately generous expansion ratio).
#[must_use]
pub fn estimated_bytes(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|p| {
            let size = std::fs::metadata(p).map_or(0, |m| m.len());
            match container_of(p) {
                Some((Container::Parquet, _) | (_, true)) => size.saturating_mul(8),
                _ => size,
            }
        })
        .fold(0, u64::saturating_add)
}

/// Kind of a file by its name: `.csv`, `.jsonl`/`.ndjson`/`.json`, `.parquet`, each optionally
/// `.gz` (not Parquet). `None` for names we do not read.
pub fn container_of(path: &Path) -> Option<(Container, bool)> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    let (stem, gz) = match name.strip_suffix(".gz") {
        Some(s) => (s.to_string(), true),
        None => (name, false),
    };
    let c = if stem.ends_with(".csv") {
        Container::Csv
    } else if stem.ends_with(".jsonl") || stem.ends_with(".ndjson") || stem.ends_with(".json") {
        Container::JsonLines
    } else if stem.ends_with(".parquet") && !gz {
        Container::Parquet
    } else {
        return None;
    };
    Some((c, gz))
}

/// Expands directories (recursively, sorted, readable kinds only) and checks that every named
/// file exists and has a kind we read.
pub fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, IngestError> {
    let mut out = Vec::new();
    for p in inputs {
        let meta =
            std::fs::metadata(p).map_err(|e| IngestError::input(p, format!("cannot read: {e}")))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found)?;
            found.sort();
            out.extend(found);
        } else if container_of(p).is_some() {
            out.push(p.clone());
        } else {
            return Err(IngestError::input(
                p,
                "unknown file kind (expected .csv, .jsonl, .ndjson, .json or .parquet, optionally .gz)",
            ));
        }
    }
    Ok(out)
}

/// Collects the readable files below `dir`. A Delta table (a lake's `matches`, say) gives the
/// files of its latest snapshot, never its log or uncommitted files; other names starting with
/// `_` or `.` are skipped, as Spark and Hive skip them.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), IngestError> {
    if mm_lake::store::is_delta_table(dir) {
        out.extend(mm_lake::convert::table_files(dir)?);
        return Ok(());
    }
    let rd = std::fs::read_dir(dir)
        .map_err(|e| IngestError::input(dir, format!("cannot read directory: {e}")))?;
    for entry in rd {
        let path = entry
            .map_err(|e| IngestError::input(dir, e.to_string()))?
            .path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('_') || n.starts_with('.'))
        {
            continue;
        }
        if path.is_dir() {
            walk(&path, out)?;
        } else if container_of(&path).is_some() {
            out.push(path);
        }
    }
    Ok(())
}

/// The SHA-256 of a file's bytes, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, IngestError> {
    let mut f =
        File::open(path).map_err(|e| IngestError::input(path, format!("cannot open: {e}")))?;
    let mut h = Sha256::new();
    let mut buf = vec![0_u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| IngestError::input(path, format!("read failed: {e}")))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A reader that hashes and counts the raw (possibly compressed) bytes it passes on.
struct Hashing<'p, R> {
    inner: R,
    hasher: Sha256,
    bytes: u64,
    progress: &'p (dyn Fn(u64) + Sync),
}

impl<R: Read> Read for Hashing<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        (self.progress)(n as u64);
        Ok(n)
    }
}

/// One piece of a text file that starts and ends at record boundaries.
#[derive(Debug)]
pub struct Chunk {
    /// A reusable buffer: `bytes[..len]` holds the data, the rest is spare.
    pub bytes: Vec<u8>,
    pub len: usize,
    /// Where the records start in `bytes` (after the header, in the first chunk).
    pub start: usize,
    /// Physical line number (1-based) of the line at `bytes[start]`.
    pub first_line: u64,
    /// The file's last chunk.
    pub last: bool,
    /// Position of the chunk in the file: 0, 1, 2, ...
    pub seq: u64,
}

impl Chunk {
    pub fn data(&self) -> &[u8] {
        &self.bytes[self.start..self.len]
    }
    /// The file's last byte was not a newline (so its last record may be cut off).
    pub fn unterminated(&self) -> bool {
        self.last && self.len > 0 && self.bytes[self.len - 1] != b'\n'
    }
}

/// Position just past the last newline in `buf` that ends a record: with `quotes`, a newline
/// inside a quoted CSV field does not count (`buf` starts at a record boundary, so a newline
/// ends a record exactly when an even number of quote characters precede it).
fn split_point(buf: &[u8], quotes: bool) -> Option<usize> {
    if !quotes || memchr::memchr(b'"', buf).is_none() {
        return memchr::memrchr(b'\n', buf).map(|i| i + 1);
    }
    let mut in_quotes = false;
    let mut last = None;
    for i in memchr::memchr2_iter(b'"', b'\n', buf) {
        if buf[i] == b'"' {
            in_quotes = !in_quotes;
        } else if !in_quotes {
            last = Some(i + 1);
        }
    }
    last
}

/// Streams a text file as [`Chunk`]s of about `chunk_bytes` into `tx`, hashing the raw bytes.
/// Buffers sent back on `recycle` are reused, so that steady-state reading touches no new
/// memory. Returns the SHA-256 and size of the file. Stops quietly if the receiver hangs up.
pub fn read_chunks(
    path: &Path,
    gz: bool,
    csv_quotes: bool,
    chunk_bytes: usize,
    tx: &SyncSender<Chunk>,
    recycle: &Receiver<Vec<u8>>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(String, u64), IngestError> {
    let file =
        File::open(path).map_err(|e| IngestError::input(path, format!("cannot open: {e}")))?;
    let mut hashing = Hashing {
        inner: file,
        hasher: Sha256::new(),
        bytes: 0,
        progress,
    };
    {
        let mut reader: Box<dyn Read + '_> = if gz {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
                1 << 20,
                &mut hashing,
            )))
        } else {
            Box::new(&mut hashing)
        };
        let fresh = || vec![0_u8; chunk_bytes];
        let mut buf = fresh();
        let mut filled = 0_usize;
        let mut line = 1_u64;
        let mut seq = 0_u64;
        loop {
            let mut eof = false;
            while filled < buf.len() {
                match reader.read(&mut buf[filled..]) {
                    Ok(0) => {
                        eof = true;
                        break;
                    }
                    Ok(n) => filled += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let what = if gz {
                            "gzip stream is corrupt or truncated"
                        } else {
                            "read failed"
                        };
                        return Err(IngestError::input(path, format!("{what}: {e}")));
                    }
                }
            }
            if eof {
                let chunk = Chunk {
                    bytes: buf,
                    len: filled,
                    start: 0,
                    first_line: line,
                    last: true,
                    seq,
                };
                if tx.send(chunk).is_err() {
                    return Ok((String::new(), 0));
                }
                break;
            }
            match split_point(&buf[..filled], csv_quotes) {
                Some(cut) => {
                    let mut next = recycle.try_recv().unwrap_or_else(|_| fresh());
                    if next.len() < chunk_bytes.max(filled - cut) {
                        next.resize(chunk_bytes.max(2 * (filled - cut)), 0);
                    }
                    next[..filled - cut].copy_from_slice(&buf[cut..filled]);
                    let lines = memchr::memchr_iter(b'\n', &buf[..cut]).count() as u64;
                    let chunk = Chunk {
                        bytes: buf,
                        len: cut,
                        start: 0,
                        first_line: line,
                        last: false,
                        seq,
                    };
                    if tx.send(chunk).is_err() {
                        return Ok((String::new(), 0));
                    }
                    seq += 1;
                    line += lines;
                    filled -= cut;
                    buf = next;
                }
                // One record longer than the buffer: grow it and read on.
                None => buf.resize(buf.len() * 2, 0),
            }
        }
        drop(reader);
    }
    // Read to the end of a gzip file's raw bytes too, so the hash covers the whole file.
    std::io::copy(&mut hashing, &mut std::io::sink())
        .map_err(|e| IngestError::input(path, format!("read failed: {e}")))?;
    Ok((hex(&hashing.hasher.finalize()), hashing.bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_respects_quoted_newlines() {
        let buf = b"a,b\n1,\"x\ny\"\n2,\"z\n";
        // The last newline is inside an open quote; the one before it ends record "1".
        assert_eq!(split_point(buf, true), Some(12));
        assert_eq!(split_point(buf, false), Some(buf.len()));
        assert_eq!(split_point(b"no newline", true), None);
    }

    #[test]
    fn chunks_cover_the_file_with_right_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.csv");
        let mut text = String::from("h1,h2\n");
        for i in 0..1000 {
            text.push_str(&format!("{i},\"q\n{i}\"\n"));
        }
        std::fs::write(&p, &text).unwrap();
        let (tx, rx) = std::sync::mpsc::sync_channel(1000);
        let (_keep, recycle) = std::sync::mpsc::channel();
        let (sha, bytes) = read_chunks(&p, false, true, 64, &tx, &recycle, &|_| {}).unwrap();
        drop(tx);
        let chunks: Vec<Chunk> = rx.into_iter().collect();
        assert!(chunks.len() > 10);
        assert_eq!(bytes, text.len() as u64);
        assert_eq!(sha, sha256_file(&p).unwrap());
        let joined: Vec<u8> = chunks.iter().flat_map(|c| c.data().to_vec()).collect();
        assert_eq!(joined, text.as_bytes());
        let mut line = 1;
        for c in &chunks {
            assert_eq!(c.first_line, line);
            line += memchr::memchr_iter(b'\n', c.data()).count() as u64;
            // every chunk but the last ends at a record boundary
            assert!(c.last || c.data().ends_with(b"\"\n") || c.data().ends_with(b"h2\n"));
        }
    }
}
