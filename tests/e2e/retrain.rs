//! `mm retrain` on the bundled sample: a run that crashes midway and is restarted finishes
//! and never publishes a half artifact; a second run refuses while the first holds the lock.

use std::path::Path;

use crate::util::mm;

fn latest(models: &Path) -> Option<String> {
    std::fs::read_to_string(models.join("all-modes/LATEST"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn sample() -> String {
    format!("{}/../../data/sample", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_crashed_retrain_resumes_and_never_publishes_half_an_artifact() {
    let dir = tempfile::tempdir().unwrap();
    let (lake, models, work) = (
        dir.path().join("lake"),
        dir.path().join("models"),
        dir.path().join("work"),
    );
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = vec!["retrain".into()];
        v.extend(extra.iter().map(|s| (*s).to_string()));
        v.extend(
            [
                "--lake",
                lake.to_str().unwrap(),
                "--models",
                models.to_str().unwrap(),
                "--work",
                work.to_str().unwrap(),
            ]
            .map(String::from),
        );
        v
    };
    let run = |extra: &[&str]| {
        let a = args(extra);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        mm(&refs)
    };

    // First run: crashes right after fitting churn (before the export).
    let s = sample();
    let (code, _, err) = run(&[&s, "--crash-after", "fit-churn"]);
    assert_eq!(code, 101, "{err}");
    assert!(
        std::fs::read_to_string(work.join("retrain.lock"))
            .unwrap()
            .trim()
            .parse::<u32>()
            .is_ok(),
        "a crash leaves its pid in the lock file (the OS lock itself is gone with the process)"
    );
    assert_eq!(latest(&models), None, "nothing published before the export");

    // Restarted: takes over the stale lock, resumes after fit-churn, publishes and promotes.
    let (code, out, err) = run(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("took over a stale lock"), "{out}");
    assert!(out.contains("resuming run"), "{out}");
    assert!(out.contains("promoted v0001"), "{out}");
    assert_eq!(latest(&models).as_deref(), Some("v0001"));
    assert_eq!(
        std::fs::read_to_string(work.join("retrain.lock")).unwrap(),
        "",
        "a clean end clears the pid"
    );
    let (code, out, err) = mm(&[
        "models",
        "verify",
        "--all",
        "--models",
        models.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");

    // Second retrain crashes right after publishing v0002 (not promoted): LATEST stays v0001,
    // and v0002 is whole (it verifies).
    let (code, _, err) = run(&["--crash-after", "export"]);
    assert_eq!(code, 101, "{err}");
    assert_eq!(latest(&models).as_deref(), Some("v0001"));
    let (code, out, err) = mm(&[
        "models",
        "verify",
        "v0002",
        "--models",
        models.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");

    // Restarted: finds v0002 published, does not export a v0003, evaluates it against v0001
    // on the held-out day and promotes it (the same data give the same models).
    let (code, out, err) = run(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("promoted v0002"), "{out}");
    assert!(!models.join("all-modes/v0003").exists());
    assert_eq!(latest(&models).as_deref(), Some("v0002"));
    let log = std::fs::read_to_string(work.join("runs.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 2, "one line per finished run");
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["resumed"], 1);
    assert_eq!(last["baseline"], "v0001");
    assert!(last["baseline_holdout"]["churn_log_loss"].as_f64().unwrap() > 0.0);
    assert!(work.join("evaluation/evaluation.html").exists());

    // A live owner of the lock (this test process holds the OS lock) blocks a second run:
    // exit code 3, with the owner's pid.
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(work.join("retrain.lock"))
        .unwrap();
    held.lock().unwrap();
    std::fs::write(
        work.join("retrain.lock"),
        format!("{}\n", std::process::id()),
    )
    .unwrap();
    let (code, _, err) = run(&[]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("another retrain is running"), "{err}");
    assert!(
        err.contains(&format!("pid {}", std::process::id())),
        "{err}"
    );
    drop(held);
    assert_eq!(latest(&models).as_deref(), Some("v0002"));
}
