//! Helpers: running `mm`, reading the lake back, snapshotting a directory.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use assert_cmd::Command;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A folder of the `shared/` tree beside this checkout (`rel`: its path inside), or `None`
/// with a message when it is absent. With `MM_REQUIRE_SHARED=1` (set by `.ci/run`) an absent
/// folder fails the test instead: CI never skips a test that needs it.
///
/// # Panics
/// When the folder is absent and `MM_REQUIRE_SHARED=1`.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared")
        .join(rel);
    if p.is_dir() {
        return Some(p);
    }
    assert!(
        std::env::var("MM_REQUIRE_SHARED").as_deref() != Ok("1"),
        "{} not found, and MM_REQUIRE_SHARED=1: clone this repository beside shared/",
        p.display()
    );
    eprintln!("skipping: {} not found", p.display());
    None
}

/// The shared real data, if this checkout sits beside `shared/`.
pub fn real_dir() -> Option<PathBuf> {
    shared("data/real")
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

/// All batches of a Delta table's latest snapshot (a lake's `matches` or `quarantine`), or of
/// every Parquet file under `dir` (recursively) when it is not a table, in path order.
pub fn read_tree(dir: &Path) -> Vec<RecordBatch> {
    let mut files = Vec::new();
    if mm_lake::store::is_delta_table(dir) {
        files = mm_lake::convert::table_files(dir).expect("table files");
    } else {
        collect(dir, &mut files);
    }
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

/// The rows of `lake`'s matches table as text (`column=value` for every column but `skip`),
/// sorted: equal lists mean the same rows.
pub fn lake_rows_text(lake: &Path, skip: &[&str]) -> Vec<Vec<String>> {
    use arrow_cast::display::{ArrayFormatter, FormatOptions};
    let opts = FormatOptions::default().with_null("<null>");
    let mut out = Vec::new();
    for b in read_tree(&lake.join("matches")) {
        let schema = b.schema();
        let cols: Vec<(String, ArrayFormatter)> = schema
            .fields()
            .iter()
            .zip(b.columns())
            .filter(|(f, _)| !skip.contains(&f.name().as_str()))
            .map(|(f, c)| (f.name().clone(), ArrayFormatter::try_new(c, &opts).unwrap()))
            .collect();
        for i in 0..b.num_rows() {
            out.push(
                cols.iter()
                    .map(|(name, f)| format!("{name}={}", f.value(i)))
                    .collect(),
            );
        }
    }
    out.sort();
    out
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

/// Snapshot without the tables' logs (`_delta_log/`), which record every run, even one that
/// adds nothing.
pub fn data_snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    snapshot(dir)
        .into_iter()
        .filter(|(p, _)| !p.components().any(|c| c.as_os_str() == "_delta_log"))
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

/// A Python with `moto` (the S3-compatible test server): see [`python_with`].
pub fn moto_python() -> Option<PathBuf> {
    python_with("moto.server, boto3")
}

/// A Python that imports `modules` (`"polars, pandas"`): `MM_TEST_PYTHON`, else the notebooks'
/// venv that `.ci/run` builds (notebooks/requirements.txt pins them all). `None` (with a
/// message) when there is none, unless `MM_REQUIRE_S3` is set, as CI sets it: then the test
/// fails instead of skipping.
pub fn python_with(modules: &str) -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("MM_TEST_PYTHON").map(PathBuf::from),
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/mm-nb-venv/bin/python")),
    ];
    for py in candidates.into_iter().flatten() {
        let ok = std::process::Command::new(&py)
            .args(["-c", &format!("import {modules}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    assert!(
        std::env::var_os("MM_REQUIRE_S3").is_none(),
        "MM_REQUIRE_S3 is set but no Python importing {modules} was found (set MM_TEST_PYTHON)"
    );
    eprintln!("skipping: no Python importing {modules} (set MM_TEST_PYTHON)");
    None
}

/// A moto S3 server on 127.0.0.1 at a free port, stopped when dropped and, whatever happens to
/// the test, by `timeout` after ten minutes.
pub struct S3Server {
    child: std::process::Child,
    pub endpoint: String,
    python: PathBuf,
}

impl S3Server {
    pub fn start(python: &Path) -> S3Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = std::process::Command::new("timeout")
            .arg("600")
            .arg(python)
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start moto");
        let endpoint = format!("http://127.0.0.1:{port}");
        let t0 = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t0.elapsed().as_secs() < 30,
                "moto did not start on {endpoint}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        S3Server {
            child,
            endpoint,
            python: python.to_path_buf(),
        }
    }

    /// The environment that points delta-rs and object_store at this server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// Runs `body` in Python with `c`, a boto3 S3 client of this server; returns its stdout.
    fn boto3(&self, body: &str) -> String {
        let script = format!(
            "import boto3\nc = boto3.client('s3', endpoint_url='{}', aws_access_key_id='testing', \
             aws_secret_access_key='testing', region_name='us-east-1')\n{body}",
            self.endpoint
        );
        let out = std::process::Command::new(&self.python)
            .args(["-c", &script])
            .output()
            .expect("run python");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The keys in bucket `name`, sorted.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.boto3(&format!(
            "for k in sorted(o['Key'] for o in c.list_objects_v2(Bucket='{name}').get('Contents', [])): print(k)"
        ))
        .lines()
        .map(str::to_string)
        .collect()
    }

    /// Uploads every file under `dir` to `s3://bucket/prefix/...`, `LATEST` and `HISTORY` last
    /// (as `mm export` pushes a version before its pointers).
    pub fn upload_dir(&self, bucket: &str, prefix: &str, dir: &Path) {
        self.boto3(&format!(
            "import os\nroot = {dir:?}\nfiles = []\nfor d, _, fs in os.walk(root):\n    \
             for f in fs:\n        files.append(os.path.join(d, f))\n\
             files.sort(key=lambda p: os.path.basename(p) in ('LATEST', 'HISTORY'))\n\
             for p in files:\n    c.upload_file(p, '{bucket}', '{prefix}/' + os.path.relpath(p, root))",
            dir = dir.display().to_string()
        ));
    }

    pub fn create_bucket(&self, name: &str) {
        self.boto3(&format!("c.create_bucket(Bucket='{name}')"));
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        // SIGTERM, which `timeout` passes on to the server (a SIGKILL would orphan it).
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Runs `mm` with `args` and extra environment: (exit code, stdout, stderr).
pub fn mm_env(args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mm"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A child process killed when dropped, however the test ends (a test's server never outlives
/// it; each is also started with `--max-seconds`).
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `mm serve` with `args` and the environment `env`, listening and serving metrics on
/// free ports; returns it, its gRPC address and its metrics URL once bound. Its log goes to the
/// test's stderr when `MM_TEST_SERVER_LOG` is set.
pub fn start_serve<S: AsRef<std::ffi::OsStr>>(
    args: &[S],
    env: &[(&str, String)],
) -> (Killed, String, String) {
    use std::io::BufRead;
    use std::process::Stdio;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mm"));
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
    ])
    .args(args)
    .stdout(Stdio::piped())
    .stderr(if std::env::var_os("MM_TEST_SERVER_LOG").is_some() {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = |prefix: &str| {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        l.trim()
            .strip_prefix(prefix)
            .unwrap_or_else(|| panic!("no {prefix:?} line: {l:?}"))
            .to_string()
    };
    let addr = line("listening on ");
    let metrics = line("metrics on ");
    (Killed(child), addr, metrics)
}
