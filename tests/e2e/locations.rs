//! A location that is a URL is never a local path: every option that writes or reads plain
//! local files refuses an `s3://` value with exit code 2 naming the option, and nothing named
//! `s3:` appears in the working directory; `mm retrain --models s3://…` publishes into the bucket
//! (on the S3-compatible test server), and creating a lake there logs no ERROR.

use std::path::Path;
use std::process::Command;

use crate::util;

/// Runs `mm` in `cwd` with `env`: (exit code, stdout, stderr).
fn mm_in(cwd: &Path, args: &[&str], env: &[(&str, String)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mm"));
    c.current_dir(cwd).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Whether anything under `dir` is named like a URL's scheme (`s3:`, `gs:`, ...).
fn url_named(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in walk(dir) {
        let name = e.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(':') {
            found.push(e.display().to_string());
        }
    }
    found
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            }
            out.push(p);
        }
    }
    out
}

#[test]
fn options_that_take_local_paths_refuse_urls_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let cases: [(&str, &[&str]); 8] = [
        (
            "out",
            &["fit", "skill", "--lake", "lake", "--out", "s3://bkt/skill"],
        ),
        (
            "out",
            &["fit", "churn", "--lake", "lake", "--out", "s3://bkt/churn"],
        ),
        (
            "skill",
            &[
                "fit",
                "churn",
                "--lake",
                "lake",
                "--out",
                "c",
                "--skill",
                "s3://bkt/skill",
            ],
        ),
        (
            "skill",
            &[
                "export",
                "--skill",
                "s3://bkt/skill",
                "--churn",
                "c",
                "--models",
                "m",
            ],
        ),
        (
            "churn",
            &[
                "export",
                "--skill",
                "s",
                "--churn",
                "gs://bkt/churn",
                "--models",
                "m",
            ],
        ),
        (
            "out",
            &[
                "evaluate",
                "--artifact",
                "a",
                "--out",
                "s3://bkt/evaluation",
            ],
        ),
        (
            "work",
            &["retrain", "--lake", "lake", "--work", "s3://bkt/work"],
        ),
        (
            "wal",
            &[
                "serve",
                "--models",
                "m",
                "--lake",
                "lake",
                "--wal",
                "az://c/wal",
                "--max-seconds",
                "5",
            ],
        ),
    ];
    // A models directory for `serve` to find before it checks --wal.
    let (m, files) = mm_artifact::synthetic::artifact(10, 1);
    mm_artifact::Store::new(cwd.join("m"))
        .publish("v0001", m, &files, true, None)
        .unwrap();
    for (flag, args) in cases {
        let (code, _, err) = mm_in(cwd, args, &[]);
        assert_eq!(code, 2, "mm {args:?}: {err}");
        assert!(err.contains(&format!("--{flag} ")), "mm {args:?}: {err}");
        assert!(
            url_named(cwd).is_empty(),
            "mm {args:?} made {:?}",
            url_named(cwd)
        );
    }
}

/// The retrain chain with its lake and models in a bucket: the models land there (no local
/// folder named after the URL), and nothing is logged at ERROR while the new lake is created.
#[test]
fn retrain_publishes_into_a_bucket() {
    let Some(py) = util::moto_python() else {
        return;
    };
    let server = util::S3Server::start(&py);
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    std::fs::write(
        cwd.join("world.toml"),
        "seed = 7\nplayers = 400\ndays = 4\nduel_share = 0.5\nstart = \"2024-01-01\"\n",
    )
    .unwrap();
    let mut env = server.env();
    env.push(("MM_CACHE", cwd.join("cache").display().to_string()));
    let (code, out, err) = mm_in(
        cwd,
        &[
            "retrain",
            "--simulate",
            "world.toml",
            "--lake",
            "s3://bkt/lake",
            "--models",
            "s3://bkt/models",
            "--work",
            "w",
            "--rounds",
            "20",
            "--pool-sizes",
            "20",
            "--holdout-days",
            "2",
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(url_named(cwd).is_empty(), "{:?}", url_named(cwd));
    assert!(!err.contains("ERROR"), "{err}");
    let keys = server.list("bkt");
    let latest: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with("models/") && k.ends_with("/LATEST"))
        .collect();
    assert!(!latest.is_empty(), "no LATEST under models/: {keys:?}");
    for l in latest {
        let version = l.replace("/LATEST", "/v0001/manifest.json");
        assert!(keys.contains(&version), "{version} missing: {keys:?}");
    }
    // The next day's run continues the bucket's LATEST of each mode and publishes v0002 there.
    let (code, out, err) = mm_in(
        cwd,
        &[
            "retrain",
            "--lake",
            "s3://bkt/lake",
            "--models",
            "s3://bkt/models",
            "--work",
            "w",
            "--rounds",
            "20",
            "--pool-sizes",
            "20",
            "--margin",
            "1",
        ],
        &env,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("continued v0001 (lake version"), "{out}");
    let keys = server.list("bkt");
    for l in keys.iter().filter(|k| k.ends_with("/LATEST")) {
        let version = l.replace("/LATEST", "/v0002/manifest.json");
        assert!(keys.contains(&version), "{version} missing: {keys:?}");
    }
    assert!(url_named(cwd).is_empty(), "{:?}", url_named(cwd));
    // And every model verifies from the bucket.
    let (code, out, err) = mm_in(
        cwd,
        &["models", "list", "--models", "s3://bkt/models"],
        &env,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // The notebooks open the lake in the bucket (MM_LAKE as a URL), through the Delta log, and
    // count the rows `mm lake show` counts.
    let notebooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../notebooks");
    let mut c = Command::new(&py);
    c.current_dir(cwd).env("PYTHONPATH", &notebooks).args([
        "-c",
        "import json, mmnb, polars as pl\n\
         rows = mmnb.matches().select(pl.len()).collect().item()\n\
         show = mmnb.lake_show()\n\
         print(json.dumps({'rows': rows, 'show': show['match_rows']}))",
    ]);
    c.env("MM_LAKE", "s3://bkt/lake")
        .env("MM_BIN", env!("CARGO_BIN_EXE_mm"));
    for (k, v) in &env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["rows"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["rows"], v["show"], "{v}");
}

/// `mm ingest` reads its inputs from a bucket: a glob, one object, or a prefix (hidden names and
/// kinds it does not read skipped), with the same rows as the same files read locally, each row
/// and file named by its URL; a URL that names nothing, and a bad file in the bucket, are errors
/// naming the URL (exit code 2), and no local copy is left behind.
#[test]
fn ingest_reads_inputs_from_a_bucket() {
    use std::io::Write;
    let Some(py) = util::moto_python() else {
        return;
    };
    let server = util::S3Server::start(&py);
    server.create_bucket("bkt");
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path();
    let raw = cwd.join("raw");
    std::fs::create_dir_all(raw.join("_tmp")).unwrap();
    let gz = |path: &Path, text: &str| {
        let mut e = flate2::write::GzEncoder::new(
            std::fs::File::create(path).unwrap(),
            flate2::Compression::default(),
        );
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
    };
    let header = "match_id,mode,start_time,team,player_id,outcome,kills,deaths\n";
    for (day, name) in [(1, "day1.csv.gz"), (2, "day2.csv.gz")] {
        let mut text = header.to_string();
        for m in 0..3 {
            for (team, outcome) in [(1, "win"), (2, "loss")] {
                for p in 0..2 {
                    text += &format!(
                        "m{day}-{m},tdm,2024-01-0{day}T1{m}:00:00Z,{team},p{team}{p},{outcome},{},{}\n",
                        3 + p,
                        2
                    );
                }
            }
        }
        gz(&raw.join(name), &text);
    }
    gz(&raw.join("_tmp/partial.csv.gz"), header);
    std::fs::write(raw.join("notes.txt"), "not data").unwrap();
    std::fs::create_dir_all(cwd.join("bad")).unwrap();
    std::fs::write(cwd.join("bad/no_team.csv"), "match_id,player_id\nm,p\n").unwrap();
    server.create_bucket("empty");
    server.upload_dir("bkt", "raw", &raw);
    server.upload_dir("bkt", "bad", &cwd.join("bad"));
    let mut env = server.env();
    env.push(("MM_CACHE", cwd.join("cache").display().to_string()));

    let ingest = |lake: &str, input: &str| {
        let (code, out, err) = mm_in(cwd, &["ingest", input, "--lake", lake, "--json"], &env);
        assert_eq!(code, 0, "{input}: {err}");
        serde_json::from_str::<serde_json::Value>(&out).unwrap()
    };
    let files = |r: &serde_json::Value| -> Vec<String> {
        r["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_string())
            .collect()
    };
    let glob = ingest("from_glob", "s3://bkt/raw/*.csv.gz");
    assert_eq!(
        files(&glob),
        ["s3://bkt/raw/day1.csv.gz", "s3://bkt/raw/day2.csv.gz"]
    );
    assert_eq!(glob["lake_rows_written"], 24, "{glob}");
    assert_eq!(glob["quarantine_entries_written"], 0, "{glob}");
    let prefix = ingest("from_prefix", "s3://bkt/raw");
    assert_eq!(
        files(&prefix),
        files(&glob),
        "hidden and unread kinds skipped"
    );
    let one = ingest("from_one", "s3://bkt/raw/day2.csv.gz");
    assert_eq!(files(&one), ["s3://bkt/raw/day2.csv.gz"]);
    assert_eq!(one["lake_rows_written"], 12);
    // The same rows as the local files give; the rows name the objects.
    let local = ingest("from_disk", "raw");
    assert_eq!(local["lake_rows_written"], 24);
    assert_eq!(
        util::lake_rows_text(&cwd.join("from_glob"), &["source_file"]),
        util::lake_rows_text(&cwd.join("from_disk"), &["source_file"])
    );
    let sources: std::collections::BTreeSet<String> =
        util::read_tree(&cwd.join("from_glob/matches"))
            .iter()
            .flat_map(|b| {
                let opts = arrow_cast::display::FormatOptions::default();
                let c = b.column_by_name("source_file").unwrap();
                let f = arrow_cast::display::ArrayFormatter::try_new(c, &opts).unwrap();
                (0..b.num_rows())
                    .map(|i| f.value(i).to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
    assert_eq!(
        sources.into_iter().collect::<Vec<_>>(),
        ["s3://bkt/raw/day1.csv.gz", "s3://bkt/raw/day2.csv.gz"]
    );

    // Errors name the URL; nothing is left in the cache's spool, and no folder named `s3:`.
    for (input, want) in [
        ("s3://bkt/raw/*.parquet", "s3://bkt/raw/*.parquet: "),
        ("s3://bkt/nothing/here.csv", "s3://bkt/nothing/here.csv: "),
        ("s3://bkt/bad/no_team.csv", "s3://bkt/bad/no_team.csv: "),
        ("s3://empty", "s3://empty: "),
    ] {
        let (code, _, err) = mm_in(cwd, &["ingest", input, "--lake", "refused"], &env);
        assert_eq!(code, 2, "{input}: {err}");
        assert!(err.contains(want), "{input}: {err}");
    }
    let spool = cwd.join("cache/inputs");
    assert!(
        std::fs::read_dir(&spool).map_or(0, Iterator::count) == 0,
        "local copies left in {}",
        spool.display()
    );
    assert!(url_named(cwd).is_empty(), "{:?}", url_named(cwd));
}
