//! Helpers: running `mm`, reading the lake back, snapshotting a directory.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use assert_cmd::Command;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// The shared real data, if this checkout sits beside `shared/`.
pub fn real_dir() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/real");
    if p.is_dir() {
        Some(p)
    } else {
        eprintln!("skipping: {} not found", p.display());
        None
    }
}

/// Runs `mm ingest ... --json` and returns (exit code, stdout JSON or null, stderr).
pub fn ingest(lake: &Path, inputs: &[&Path], extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mm"));
    cmd.arg("ingest");
    for i in inputs {
        cmd.arg(i);
    }
    cmd.arg("--lake").arg(lake).arg("--json").args(extra);
    let out = cmd.output().expect("run mm");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Like [`ingest`], asserting success.
pub fn ingest_ok(lake: &Path, inputs: &[&Path]) -> serde_json::Value {
    let (code, json, err) = ingest(lake, inputs, &[]);
    assert_eq!(code, 0, "mm ingest failed: {err}");
    json
}

pub fn counts(report: &serde_json::Value) -> [u64; 5] {
    let t = &report["totals"];
    ["read", "accepted", "quarantined", "duplicates", "skipped"]
        .map(|k| t[k].as_u64().expect("count"))
}

pub fn assert_balanced(report: &serde_json::Value) {
    for f in report["files"]
        .as_array()
        .expect("files")
        .iter()
        .chain([&report["totals"]])
    {
        let g = |k: &str| f[k].as_u64().expect(k);
        assert_eq!(
            g("read"),
            g("accepted") + g("quarantined") + g("duplicates") + g("skipped"),
            "unbalanced accounting: {f}"
        );
    }
}

/// All batches of all Parquet files under `dir` (recursively), in path order.
pub fn read_tree(dir: &Path) -> Vec<RecordBatch> {
    let mut files = Vec::new();
    collect(dir, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let r = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&f).expect("open"))
            .expect("parquet")
            .build()
            .expect("reader");
        for b in r {
            out.push(b.expect("batch"));
        }
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
}

pub fn rows(dir: &Path) -> usize {
    read_tree(dir).iter().map(RecordBatch::num_rows).sum()
}

/// Every file under `dir` with its bytes: equal snapshots mean nothing changed.
pub fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if p.file_name().is_some_and(|n| n != "_lock") {
                out.insert(
                    p.strip_prefix(base).expect("prefix").to_path_buf(),
                    std::fs::read(&p).expect("read"),
                );
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// Snapshot without the run log (`_runs/`), which records every run, even one that adds nothing.
pub fn data_snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    snapshot(dir)
        .into_iter()
        .filter(|(p, _)| !p.starts_with("_runs"))
        .collect()
}

/// The lines of a (possibly gzipped) text file.
pub fn read_lines(path: &Path) -> Vec<String> {
    let mut text = String::new();
    if path.extension().is_some_and(|x| x == "gz") {
        flate2::read::MultiGzDecoder::new(std::fs::File::open(path).expect("open"))
            .read_to_string(&mut text)
            .expect("gunzip");
    } else {
        text = std::fs::read_to_string(path).expect("read");
    }
    text.lines().map(str::to_string).collect()
}

/// Runs `mm` with `args`: (exit code, stdout, stderr).
pub fn mm(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mm"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
