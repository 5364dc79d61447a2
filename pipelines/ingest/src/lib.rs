//! # mm-ingest: match history into the lake, every row accounted for
//!
//! [`ingest`] reads files of match history (canonical CSV, JSON lines or Parquet, plain or
//! gzip-compressed, and the real sets of `../shared/data/real/` through [`adapters`]) and adds
//! them to a [`mm_lake::Lake`] in one atomic run. Its central promise is the accounting in
//! [`report::Counts`]: every source record read is **accepted**, **quarantined** (with file,
//! line, field and reason, in the lake's `quarantine` table), a **duplicate** (of the lake or of
//! an earlier record of the run), or **skipped** by a documented rule of its source (a tennis
//! walkover, a League of Legends team summary row). The run refuses to commit if the counts do
//! not add up.
//!
//! The run has two passes. Pass 1 ([`parse`]) streams each file in chunks cut at record
//! boundaries, parses the chunks in parallel, applies the row-level rules and stages the rows by
//! day; it also logs every match's start times to scratch disk, and once the input is read the
//! log says which rows disagree with their match's first start ([`starts`]). Pass 2
//! ([`finalize`]) takes one day at a time, in parallel: duplicates against the lake and the
//! run, match-level rules (two teams, one row per player, consistent outcomes), and the day's
//! sorted zstd Parquet file. When the staged rows pass a memory budget, every day but the
//! newest is finalised early, so memory stays flat however large the input (a day that receives
//! rows again later gets a second file, deduplicated against the first; when a row refused for
//! its start sits in a day written early, the input is read a second time with the verdicts
//! known). Nothing is visible in the lake until the commit; a failed run (an unreadable
//! or truncated file, say) leaves the lake exactly as it was.
//!
//! ```
//! use mm_ingest::{IngestConfig, NoProgress, ingest};
//! let dir = tempfile::tempdir().unwrap();
//! let csv = dir.path().join("m.csv");
//! std::fs::write(&csv, "match_id,player_id,team,start_time,outcome,kills\n\
//!     m1,ann,0,2024-01-01 10:00:00,win,5\n\
//!     m1,bob,1,2024-01-01 10:00:00,loss,-1\n\
//!     m1,cid,1,2024-01-01 10:00:00,loss,2\n").unwrap();
//! let cfg = IngestConfig::new(dir.path().join("lake"), vec![csv]);
//! let report = ingest(&cfg, &NoProgress).unwrap();
//! let c = report.totals;
//! assert_eq!((c.read, c.accepted, c.quarantined, c.duplicates), (3, 2, 1, 0));
//! // Ingesting the same file again changes nothing: the good rows are duplicates now.
//! let again = ingest(&cfg, &NoProgress).unwrap();
//! assert_eq!((again.totals.accepted, again.totals.duplicates, again.lake_rows_written), (0, 2, 0));
//! ```

pub mod adapters;
pub mod canonical;
pub mod columnar;
pub mod fields;
pub mod finalize;
pub mod generate;
pub mod parse;
pub mod report;
pub mod source;
pub mod starts;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::sync_channel;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use mm_lake::parquet_io::read_parquet_columns;
use mm_lake::schema::{qcol, quarantine_schema};
use mm_lake::{Lake, LakeError, Txn};
use rayon::prelude::*;

pub use adapters::Format;
use parse::{FileCtx, Parsed, QEntry};
pub use report::{Counts, FileReport, RunReport};
use source::{Chunk, Container};

/// Errors of an ingest run. [`IngestError::Input`] is the input's fault (exit code 2 in `mm`).
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// An input file cannot be read as a whole: missing, unreadable, truncated, corrupt, or its
    /// header lacks a required column. The lake is left as it was.
    #[error("{path}: {reason}")]
    Input { path: PathBuf, reason: String },
    #[error("invalid configuration: {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error("{path}: {reason}")]
    Internal { path: PathBuf, reason: String },
}

impl IngestError {
    /// Bad input (exit code 2) rather than a failure of the run: an input that cannot be
    /// read, an invalid setting, or a lake that cannot be used as given.
    #[must_use]
    pub fn is_input(&self) -> bool {
        match self {
            IngestError::Input { .. } | IngestError::Config { .. } => true,
            IngestError::Lake(x) => x.is_input(),
            IngestError::Internal { .. } => false,
        }
    }

    pub fn input(path: &Path, reason: impl Into<String>) -> IngestError {
        IngestError::Input {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }
}

/// What to ingest, and how.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    pub lake: PathBuf,
    /// Files or directories (searched recursively for readable kinds, in name order), or
    /// object-store URLs (a glob, an object or a prefix; see [`mm_lake::inputs::fetch`]).
    pub inputs: Vec<PathBuf>,
    /// `None`: recognise real-data sources by their header, canonical otherwise.
    pub format: Option<Format>,
    /// The `mode` of canonical rows that have no `mode` column or value.
    pub default_mode: String,
    /// Rows staged in memory before older days are finalised (roughly 150 bytes per row).
    pub stage_rows: usize,
    /// Size of the chunks that are parsed in parallel.
    pub chunk_bytes: usize,
    /// Test support: stop the commit at this point as a crash would, and fail.
    #[doc(hidden)]
    pub crash_at: Option<mm_lake::txn::CrashPoint>,
}

impl IngestConfig {
    /// Defaults: auto-detected format, mode `default`, 500k staged rows, 2 MiB chunks. Chunks are
    /// small because a staged day is a slice of its chunk's columns and keeps the whole chunk
    /// alive.
    pub fn new(lake: impl Into<PathBuf>, inputs: Vec<PathBuf>) -> IngestConfig {
        IngestConfig {
            lake: lake.into(),
            inputs,
            format: None,
            default_mode: "default".into(),
            stage_rows: 500_000,
            chunk_bytes: 2 << 20,
            crash_at: None,
        }
    }

    fn validate(&self) -> Result<(), IngestError> {
        if self.inputs.is_empty() {
            return Err(IngestError::Config {
                field: "inputs",
                reason: "no input files given".into(),
            });
        }
        if self.default_mode.trim().is_empty() {
            return Err(IngestError::Config {
                field: "default_mode",
                reason: "must not be empty".into(),
            });
        }
        if self.stage_rows < 1000 {
            return Err(IngestError::Config {
                field: "stage_rows",
                reason: format!("{} is below the minimum of 1000", self.stage_rows),
            });
        }
        if self.chunk_bytes < 4096 {
            return Err(IngestError::Config {
                field: "chunk_bytes",
                reason: format!("{} is below the minimum of 4096", self.chunk_bytes),
            });
        }
        Ok(())
    }
}

/// Progress of a run, for a progress bar. Every method has a do-nothing default.
pub trait Progress: Sync {
    /// A file starts; `bytes` is its size on disk.
    fn file(&self, _path: &Path, _bytes: u64) {}
    /// `bytes` more of the current file were read.
    fn advance(&self, _bytes: u64) {}
    /// A stage after reading starts.
    fn stage(&self, _what: &str) {}
}

/// No progress reporting.
#[derive(Debug, Clone, Copy)]
pub struct NoProgress;
impl Progress for NoProgress {}

/// A run id that sorts by time (see [`mm_run::new_run_id`]).
#[must_use]
pub fn new_run_id() -> String {
    mm_run::new_run_id()
}

/// Runs pass 1 of one file and hands each chunk's result to `sink`.
struct FileRun<'a> {
    cfg: &'a IngestConfig,
    idx: u32,
    path: &'a Path,
    name: &'a str,
    progress: &'a dyn Progress,
}

impl FileRun<'_> {
    /// Reads a CSV or JSON-lines file; returns (sha256, bytes, format).
    fn text(
        &self,
        container: Container,
        gz: bool,
        sink: &mut dyn FnMut(Parsed) -> Result<(), IngestError>,
    ) -> Result<(String, u64, Format), IngestError> {
        let (tx, rx) = sync_channel::<Chunk>(1);
        let (recycle_tx, recycle_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let advance = |n: u64| self.progress.advance(n);
        std::thread::scope(|s| {
            let reader = s.spawn(move || {
                let tx = tx;
                source::read_chunks(
                    self.path,
                    gz,
                    container == Container::Csv,
                    self.cfg.chunk_bytes,
                    &tx,
                    &recycle_rx,
                    &advance,
                )
            });
            // parse_stream owns the receiver: when it returns (even on an error) the reader stops.
            let parsed = self.parse_stream(container, rx, &recycle_tx, sink);
            let read = reader
                .join()
                .map_err(|_| IngestError::input(self.path, "reader thread panicked"))?;
            // A read error explains a parse error that follows from it, so it wins.
            let (sha, bytes) = read?;
            let format = parsed?;
            Ok((sha, bytes, format))
        })
    }

    fn parse_stream(
        &self,
        container: Container,
        rx: std::sync::mpsc::Receiver<Chunk>,
        recycle: &std::sync::mpsc::Sender<Vec<u8>>,
        sink: &mut dyn FnMut(Parsed) -> Result<(), IngestError>,
    ) -> Result<Format, IngestError> {
        let Ok(mut first) = rx.recv() else {
            return Ok(self.cfg.format.unwrap_or(Format::Canonical)); // the reader failed; it says why
        };
        let (format, adapter, header_len) = match container {
            Container::Csv => self.csv_header(&mut first)?,
            _ => {
                if matches!(self.cfg.format, Some(f) if f != Format::Canonical) {
                    return Err(IngestError::input(
                        self.path,
                        "only the canonical format is read from JSON lines",
                    ));
                }
                (Format::Canonical, None, 0)
            }
        };
        let ctx = FileCtx {
            file_idx: self.idx,
            name: self.name,
            header_len,
            adapter: adapter.as_deref(),
            default_mode: &self.cfg.default_mode,
        };
        let parse = |c: &Chunk| match container {
            Container::Csv => parse::parse_csv_chunk(&ctx, c, self.path),
            _ => parse::parse_jsonl_chunk(&ctx, c, self.path),
        };
        // The first chunk (with the header) inline; the rest on parallel workers that pull
        // chunks as the reader produces them. Results come back in any order and are handed
        // to `sink` in file order.
        sink(parse(&first)?)?;
        if first.last {
            return Ok(format);
        }
        let _ = recycle.send(first.bytes);
        let workers = rayon::current_num_threads().max(1);
        let rx = std::sync::Mutex::new(rx);
        std::thread::scope(|s| {
            let (res_tx, res_rx) =
                sync_channel::<(u64, bool, Result<Parsed, IngestError>)>(workers);
            for _ in 0..workers {
                let res_tx = res_tx.clone();
                let (rx, parse) = (&rx, &parse);
                s.spawn(move || {
                    loop {
                        let next = match rx.lock() {
                            Ok(guard) => guard.recv(),
                            Err(_) => return,
                        };
                        let Ok(chunk) = next else { return };
                        let result = parse(&chunk);
                        let (seq, last) = (chunk.seq, chunk.last);
                        let _ = recycle.send(chunk.bytes);
                        if res_tx.send((seq, last, result)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(res_tx);
            let mut waiting: BTreeMap<u64, (bool, Result<Parsed, IngestError>)> = BTreeMap::new();
            let mut expected = first.seq + 1;
            for (seq, last, result) in res_rx.iter() {
                waiting.insert(seq, (last, result));
                while let Some((last, result)) = waiting.remove(&expected) {
                    expected += 1;
                    sink(result?)?;
                    if last {
                        return Ok(format);
                    }
                }
            }
            // The reader stopped early; it reports why.
            Ok(format)
        })
    }

    /// Reads the CSV header from the first chunk and moves the chunk past it; the format (as
    /// configured, or detected from the header), its adapter and the header's field count.
    fn csv_header(&self, first: &mut Chunk) -> Result<Header, IngestError> {
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(first.data());
        let mut rec = csv::ByteRecord::new();
        let has = rdr
            .read_byte_record(&mut rec)
            .map_err(|e| IngestError::input(self.path, format!("CSV header: {e}")))?;
        if !has {
            return Err(IngestError::input(
                self.path,
                "file is empty: no header line",
            ));
        }
        let header: Vec<String> = rec
            .iter()
            .map(|f| {
                String::from_utf8_lossy(f)
                    .trim_start_matches('\u{feff}')
                    .trim()
                    .to_string()
            })
            .collect();
        let mut consumed = usize::try_from(rdr.position().byte())
            .unwrap_or(0)
            .min(first.data().len());
        // After a CRLF header the reader stops between '\r' and '\n': step over the '\n'
        // so that line numbers count from the first data line.
        if first.data().get(consumed) == Some(&b'\n') {
            consumed += 1;
        }
        first.first_line += memchr::memchr_iter(b'\n', &first.data()[..consumed]).count() as u64;
        first.start += consumed;
        let format = self.cfg.format.unwrap_or_else(|| Format::detect(&header));
        let adapter = format
            .csv_adapter(&header, &self.cfg.default_mode)
            .map_err(|e| IngestError::input(self.path, format!("{} header: {e}", format.name())))?;
        Ok((format, Some(adapter), header.len()))
    }
}

/// A file's format, its CSV adapter (none for JSON lines) and its header's field count.
type Header = (Format, Option<Box<dyn adapters::CsvAdapter>>, usize);

/// Ingests `cfg.inputs` into the lake at `cfg.lake` in one atomic run.
pub fn ingest(cfg: &IngestConfig, progress: &dyn Progress) -> Result<RunReport, IngestError> {
    let t0 = Instant::now();
    cfg.validate()?;
    let spool = Spool::new();
    let mut inputs = Vec::with_capacity(cfg.inputs.len());
    let mut names: HashMap<PathBuf, String> = HashMap::new();
    for (k, p) in cfg.inputs.iter().enumerate() {
        let text = p.to_string_lossy();
        if !mm_lake::inputs::is_remote(&text) {
            inputs.push(p.clone());
            continue;
        }
        progress.stage(&format!("fetching {text}"));
        let keep = |key: &str| source::container_of(Path::new(key)).is_some();
        for f in mm_lake::inputs::fetch(&text, &spool.dir.join(k.to_string()), &keep)? {
            names.insert(f.local.clone(), f.url);
            inputs.push(f.local);
        }
    }
    ingest_files(cfg, &inputs, &names, progress, t0).map_err(|e| named(e, &names))
}

/// The local copies of remote inputs (under the cache, beside the lakes' own), removed when the
/// run ends however it ends.
struct Spool {
    dir: PathBuf,
}

impl Spool {
    fn new() -> Spool {
        Spool {
            dir: mm_lake::location::cache_root()
                .join("inputs")
                .join(new_run_id()),
        }
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An error about a remote input's local copy, naming the input's URL instead.
fn named(e: IngestError, names: &HashMap<PathBuf, String>) -> IngestError {
    match e {
        IngestError::Input { path, reason } if names.contains_key(&path) => IngestError::Input {
            path: PathBuf::from(&names[&path]),
            reason,
        },
        IngestError::Internal { path, reason } if names.contains_key(&path) => {
            IngestError::Internal {
                path: PathBuf::from(&names[&path]),
                reason,
            }
        }
        e => e,
    }
}

/// [`ingest`] over local files; `names` gives the URL of a remote input's local copy.
fn ingest_files(
    cfg: &IngestConfig,
    inputs: &[PathBuf],
    names: &HashMap<PathBuf, String>,
    progress: &dyn Progress,
    t0: Instant,
) -> Result<RunReport, IngestError> {
    let files = source::expand_inputs(inputs)?;
    if files.is_empty() {
        return Err(IngestError::Config {
            field: "inputs",
            reason: "no readable files (.csv, .jsonl, .parquet, optionally .gz) found".into(),
        });
    }
    let lake = Lake::open_or_create(&cfg.lake)?;
    let recovery = lake.recover()?;
    let mut run_id = new_run_id();
    let mut txn = lake.begin(&run_id)?;
    let mut log = starts::StartLog::create(
        &txn.scratch_dir()?.join("starts"),
        starts::StartLog::buckets_for(source::estimated_bytes(&files)),
    )?;
    let mut stager = Stager::new(cfg.stage_rows);
    // Each file with the name its rows and report carry (a remote input's URL).
    let files: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|p| {
            let name = names
                .get(&p)
                .cloned()
                .unwrap_or_else(|| p.display().to_string());
            (p, name)
        })
        .collect();
    let (mut reports, mut qentries) = read_inputs(
        cfg,
        &files,
        progress,
        &lake,
        &txn,
        &mut stager,
        &mut Starts::Log(&mut log),
    )?;
    progress.stage("checking match start times");
    let check = log.finish()?;
    let read_twice = !check.is_empty() && check.days().iter().any(|d| stager.parts.contains_key(d));
    if !check.is_empty() {
        if read_twice {
            // A refused row may sit in a day finalised early: read the input again, with the
            // verdicts known, into a fresh run (dropping this one removes its files).
            progress.stage("reading again: a match start disagrees in a day already written");
            let first_read: Vec<String> = reports.iter().map(|r| r.sha256.clone()).collect();
            run_id = new_run_id();
            txn = lake.begin(&run_id)?;
            stager = Stager::new(cfg.stage_rows);
            (reports, qentries) = read_inputs(
                cfg,
                &files,
                progress,
                &lake,
                &txn,
                &mut stager,
                &mut Starts::Filter(&check),
            )?;
            for (r, sha) in reports.iter().zip(&first_read) {
                if &r.sha256 != sha {
                    return Err(IngestError::input(
                        Path::new(&r.path),
                        "the file changed while it was being ingested",
                    ));
                }
            }
        } else {
            filter_staged(&mut stager, &check, &mut reports, &mut qentries)?;
        }
    }
    drop(check);

    let mut stage_seconds = BTreeMap::new();
    stage_seconds.insert("read".to_string(), t0.elapsed().as_secs_f64());
    let t1 = Instant::now();
    progress.stage("deduplicating and writing partitions");
    stager.flush(&lake, &txn, true)?;
    let results = std::mem::take(&mut stager.results);
    drop(stager);

    let (lake_rows, partitions) = tally(results, &mut txn, &mut reports, &mut qentries);
    let quarantine_written = write_quarantine(&lake, &mut txn, &reports, &qentries)?;

    let totals = balanced_totals(&reports)?;
    stage_seconds.insert("finalize".to_string(), t1.elapsed().as_secs_f64());
    let seconds = t0.elapsed().as_secs_f64();
    let report = RunReport {
        run_id: run_id.clone(),
        lake: cfg.lake.display().to_string(),
        files: reports,
        totals,
        lake_rows_written: lake_rows,
        partitions_written: partitions,
        quarantine_entries_written: quarantine_written,
        seconds,
        stage_seconds,
        records_per_second: totals.read as f64 / seconds.max(1e-9),
        peak_rss_bytes: None,
        recovered: recovery.removed,
        lake_version: None,
        read_version: lake.version(),
        read_twice,
    };
    commit_run(cfg, txn, report, t0)
}

/// Applies the start-time verdicts to the rows still in memory (no day was written early).
fn filter_staged(
    stager: &mut Stager,
    check: &starts::StartCheck,
    reports: &mut [FileReport],
    qentries: &mut Vec<QEntry>,
) -> Result<(), IngestError> {
    for batches in stager.mem.values_mut() {
        for b in batches.iter_mut() {
            let (kept, rejected) = check.filter(b.clone())?;
            *b = kept;
            for q in &rejected {
                reports[q.file_idx as usize].counts.quarantined += 1;
            }
            qentries.extend(rejected);
        }
    }
    Ok(())
}

/// Adds each finalised day's file to the transaction and its counts to its input files' reports;
/// collects its quarantine entries, then counts them by reason and keeps a few examples per file.
/// Returns the lake rows and partitions written.
fn tally(
    results: Vec<finalize::DayResult>,
    txn: &mut Txn,
    reports: &mut [FileReport],
    qentries: &mut Vec<QEntry>,
) -> (u64, u64) {
    let mut lake_rows = 0;
    let mut partitions = 0;
    for r in results {
        if let Some((rel, rows)) = &r.written {
            txn.add_staged(rel);
            lake_rows += rows;
            partitions += 1;
        }
        for (fi, c) in r.per_file {
            let fr = &mut reports[fi as usize];
            fr.counts.accepted += c.accepted;
            fr.counts.duplicates += c.duplicates;
            fr.counts.quarantined += c.quarantined;
            fr.lake_rows += c.lake_rows;
        }
        qentries.extend(r.quarantine);
    }
    qentries.sort_by_key(|q| (q.file_idx, q.line));
    for q in qentries.iter() {
        let fr = &mut reports[q.file_idx as usize];
        *fr.quarantine_by_reason.entry(q.category()).or_default() += 1;
        if fr.quarantine_examples.len() < 5 {
            fr.quarantine_examples.push(report::Example {
                line: q.line,
                reason: q.reason.clone(),
            });
        }
    }
    (lake_rows, partitions)
}

/// The run's totals, refusing to commit a file whose accounting does not balance.
fn balanced_totals(reports: &[FileReport]) -> Result<Counts, IngestError> {
    let mut totals = Counts::default();
    for fr in reports {
        if !fr.counts.balanced() {
            return Err(IngestError::Internal {
                path: PathBuf::from(&fr.path),
                reason: format!(
                    "accounting does not balance, refusing to commit: {:?}",
                    fr.counts
                ),
            });
        }
        totals.add(&fr.counts);
    }
    Ok(totals)
}

/// Commits the run with its report as the commit's record (or stops at the test hook's crash
/// point), and completes the report with the lake version and timings.
fn commit_run(
    cfg: &IngestConfig,
    txn: Txn,
    mut report: RunReport,
    t0: Instant,
) -> Result<RunReport, IngestError> {
    let totals = report.totals;
    let record = serde_json::to_value(&report).map_err(|e| IngestError::Internal {
        path: cfg.lake.clone(),
        reason: e.to_string(),
    })?;
    let t2 = Instant::now();
    if let Some(crash) = cfg.crash_at {
        txn.commit_crashing_at(&record, crash)?;
        return Err(IngestError::Internal {
            path: cfg.lake.clone(),
            reason: format!("stopped at {crash:?} (test hook)"),
        });
    }
    let committed = txn.commit(&record)?;
    report.lake_version = Some(committed.version);
    report
        .stage_seconds
        .insert("commit".to_string(), t2.elapsed().as_secs_f64());
    report.seconds = t0.elapsed().as_secs_f64();
    report.records_per_second = totals.read as f64 / report.seconds.max(1e-9);
    report.peak_rss_bytes = mm_run::peak_rss_bytes();
    Ok(report)
}

/// What pass 1 does about match start times: log them for the check after reading, or apply
/// the check's known verdicts (when the input is read a second time).
enum Starts<'a> {
    Log(&'a mut starts::StartLog),
    Filter(&'a starts::StartCheck),
}

/// Pass 1 over every input file: parses, applies the row-level rules, and stages the rows by day
/// (finalising early past the budget). Returns each file's report and the quarantine entries.
fn read_inputs(
    cfg: &IngestConfig,
    files: &[(PathBuf, String)],
    progress: &dyn Progress,
    lake: &Lake,
    txn: &Txn,
    stager: &mut Stager,
    starts: &mut Starts,
) -> Result<(Vec<FileReport>, Vec<QEntry>), IngestError> {
    let mut reports: Vec<FileReport> = Vec::new();
    let mut qentries: Vec<QEntry> = Vec::new();
    for (idx, (path, name)) in files.iter().enumerate() {
        let name = name.clone();
        let (container, gz) = source::container_of(path)
            .ok_or_else(|| IngestError::input(path, "unknown file kind"))?;
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        progress.file(path, size);
        let idx = u32::try_from(idx).map_err(|_| IngestError::Config {
            field: "inputs",
            reason: "too many files".into(),
        })?;
        let mut fr = FileReport {
            path: name.clone(),
            ..Default::default()
        };
        let mut skipped: BTreeMap<&'static str, u64> = BTreeMap::new();
        {
            let mut sink = |p: Parsed| -> Result<(), IngestError> {
                fr.counts.read += p.read;
                fr.counts.quarantined += p.quarantine.len() as u64;
                for (why, n) in p.skipped {
                    fr.counts.skipped += n;
                    *skipped.entry(why).or_default() += n;
                }
                for (day, batch) in p.days {
                    let batch = match starts {
                        Starts::Log(log) => {
                            log.record(&batch)?;
                            batch
                        }
                        Starts::Filter(check) => {
                            let (batch, rejected) = check.filter(batch)?;
                            fr.counts.quarantined += rejected.len() as u64;
                            qentries.extend(rejected);
                            batch
                        }
                    };
                    stager.add(lake, txn, day, batch)?;
                }
                qentries.extend(p.quarantine);
                Ok(())
            };
            let run = FileRun {
                cfg,
                idx,
                path,
                name: &name,
                progress,
            };
            match container {
                Container::Parquet => {
                    if matches!(cfg.format, Some(f) if f != Format::Canonical) {
                        return Err(IngestError::input(
                            path,
                            "only the canonical format is read from Parquet",
                        ));
                    }
                    let ctx = FileCtx {
                        file_idx: idx,
                        name: &name,
                        header_len: 0,
                        adapter: None,
                        default_mode: &cfg.default_mode,
                    };
                    parse::parse_parquet(&ctx, path, &mut sink, &|b| progress.advance(b))?;
                    fr.sha256 = source::sha256_file(path)?;
                    fr.bytes = size;
                    fr.format = Format::Canonical.name().into();
                }
                _ => {
                    let (sha, bytes, format) = run.text(container, gz, &mut sink)?;
                    fr.sha256 = sha;
                    fr.bytes = bytes;
                    fr.format = format.name().into();
                }
            }
        }
        fr.skipped_by_reason = skipped
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        reports.push(fr);
    }
    Ok((reports, qentries))
}

/// Staged rows by day, finalised early (all days but the newest) past the row budget.
struct Stager {
    budget_rows: usize,
    mem: BTreeMap<i32, Vec<RecordBatch>>,
    mem_rows: usize,
    /// Files already staged this run, per day (relative to the lake root).
    parts: BTreeMap<i32, Vec<PathBuf>>,
    results: Vec<finalize::DayResult>,
}

impl Stager {
    fn new(budget_rows: usize) -> Stager {
        Stager {
            budget_rows,
            mem: BTreeMap::new(),
            mem_rows: 0,
            parts: BTreeMap::new(),
            results: Vec::new(),
        }
    }

    fn add(
        &mut self,
        lake: &Lake,
        txn: &Txn,
        day: i32,
        batch: RecordBatch,
    ) -> Result<(), IngestError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.mem_rows += batch.num_rows();
        self.mem.entry(day).or_default().push(batch);
        if self.mem_rows > self.budget_rows {
            self.flush(lake, txn, false)?;
        }
        Ok(())
    }

    /// Finalises every staged day (`all`), or all but the newest, which is likely still filling.
    fn flush(&mut self, lake: &Lake, txn: &Txn, all: bool) -> Result<(), IngestError> {
        let mut days = std::mem::take(&mut self.mem);
        if !all
            && days.len() > 1
            && let Some((d, b)) = days.pop_last()
        {
            self.mem.insert(d, b);
        }
        let parts = &self.parts;
        let results: Vec<finalize::DayResult> = days
            .into_par_iter()
            .map(|(day, batches)| {
                let earlier = parts.get(&day).map_or(&[][..], Vec::as_slice);
                finalize::finalize_day(day, batches, lake, txn, earlier)
            })
            .collect::<Result<_, _>>()?;
        for r in &results {
            if let Some((rel, _)) = &r.written {
                self.parts.entry(r.day).or_default().push(rel.clone());
            }
        }
        self.results.extend(results);
        self.mem_rows = self.mem.values().flatten().map(RecordBatch::num_rows).sum();
        Ok(())
    }
}

/// Longest raw record kept in the quarantine table.
const MAX_RAW: usize = 4000;

/// Stages the run's new quarantine entries: a record already quarantined by an earlier run
/// (same file content, same line) is not stored again.
fn write_quarantine(
    lake: &Lake,
    txn: &mut Txn,
    files: &[FileReport],
    entries: &[QEntry],
) -> Result<u64, IngestError> {
    let mut known: HashSet<(String, i64)> = HashSet::new();
    for f in lake.quarantine_files()? {
        for b in read_parquet_columns(&f, Some(&[qcol::SOURCE_SHA256, qcol::LINE]))? {
            let (Some(s), Some(l)) = (
                b.column_by_name(qcol::SOURCE_SHA256),
                b.column_by_name(qcol::LINE),
            ) else {
                continue;
            };
            let (s, l) = (s.as_string::<i32>(), l.as_primitive::<Int64Type>());
            for i in 0..b.num_rows() {
                known.insert((s.value(i).to_string(), l.value(i)));
            }
        }
    }
    let fresh: Vec<&QEntry> = entries
        .iter()
        .filter(|q| {
            known.insert((
                files[q.file_idx as usize].sha256.clone(),
                i64::try_from(q.line).unwrap_or(i64::MAX),
            ))
        })
        .collect();
    if fresh.is_empty() {
        return Ok(0);
    }
    let text = |f: &dyn Fn(&QEntry) -> Option<String>| -> ArrayRef {
        Arc::new(fresh.iter().map(|q| f(q)).collect::<StringArray>())
    };
    let cols: Vec<ArrayRef> = vec![
        text(&|_| Some(txn.run_id().to_string())),
        text(&|q| Some(files[q.file_idx as usize].path.clone())),
        text(&|q| Some(files[q.file_idx as usize].sha256.clone())),
        Arc::new(
            fresh
                .iter()
                .map(|q| i64::try_from(q.line).unwrap_or(i64::MAX))
                .collect::<Int64Array>(),
        ),
        text(&|q| Some(q.stage.to_string())),
        text(&|q| q.field.clone()),
        text(&|q| Some(q.reason.clone())),
        text(&|q| q.match_id.clone()),
        text(&|q| q.player_id.clone()),
        text(&|q| q.raw.as_ref().map(|r| r.chars().take(MAX_RAW).collect())),
    ];
    let batch =
        RecordBatch::try_new(quarantine_schema(), cols).map_err(|e| IngestError::Internal {
            path: PathBuf::from(lake.root().to_string()),
            reason: e.to_string(),
        })?;
    let rel =
        Path::new(mm_lake::store::QUARANTINE_DIR).join(format!("part-{}.parquet", txn.run_id()));
    txn.write_parquet(&rel, &[batch])?;
    Ok(fresh.len() as u64)
}
