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
}
