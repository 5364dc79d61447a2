//! `mm retrain` on a small random 5v5 history (`tests/data/random_5v5.csv.gz`, one mode named
//! `default`): a run that crashes midway and is restarted finishes and never publishes a half
//! artifact; a second run refuses while the first holds the lock. The bundled simulated world,
//! with two modes, is the last test.

use std::path::Path;

use crate::util::mm;

fn latest(models: &Path) -> Option<String> {
    std::fs::read_to_string(models.join("default/LATEST"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn sample() -> String {
    format!(
        "{}/../../tests/data/random_5v5.csv.gz",
        env!("CARGO_MANIFEST_DIR")
    )
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

    // A tick that is not a positive number of seconds is refused before anything runs, not
    // at the evaluation after the fits.
    let s = sample();
    let (code, _, err) = run(&[&s, "--tick-s", "0"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("--tick-s is 0"), "{err}");
    assert!(!lake.exists(), "nothing ingested before the check");

    // First run: crashes right after fitting churn (before the export).
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

    // Second retrain (in full: a continued one has nothing new to read) crashes right after
    // publishing v0002 (not promoted): LATEST stays v0001, and v0002 is whole (it verifies).
    let (code, _, err) = run(&["--full", "--crash-after", "export"]);
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
    // on the held-out day (its team queue replayed at a 20-s tick) and promotes it (the same
    // data give the same models).
    let (code, out, err) = run(&["--tick-s", "20"]);
    assert_eq!(code, 0, "{out}{err}");
    let evaluation: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("default/evaluation/evaluation.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(evaluation["team_queue"]["tick_s"], 20.0);
    assert!(out.contains("promoted v0002"), "{out}");
    assert!(!models.join("default/v0003").exists());
    assert_eq!(latest(&models).as_deref(), Some("v0002"));
    let log = std::fs::read_to_string(work.join("runs.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 2, "one line per finished run");
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["resumed"], 1);
    assert_eq!(last["modes"][0]["mode"], "default");
    assert_eq!(last["modes"][0]["baseline"], "v0001");
    assert!(
        last["modes"][0]["baseline_holdout"]["churn_log_loss"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(work.join("default/evaluation/evaluation.html").exists());

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

/// The README's main command on the bundled default (`data/sample` with its file of bad rows,
/// and the simulated world of `data/world.toml`): both modes are fitted on their own and learn
/// what the simulator put in, the bad rows are quarantined with their reasons, and the summary
/// says so. A second run does not simulate again.
#[test]
fn the_bundled_world_learns_what_the_simulator_put_in() {
    let root = format!("{}/../..", env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    let (sample, world) = (
        format!("{root}/data/sample"),
        format!("{root}/data/world.toml"),
    );
    let args = [
        "retrain",
        sample.as_str(),
        "--simulate",
        world.as_str(),
        "--lake",
        &p("lake"),
        "--models",
        &p("models"),
        "--work",
        &p("work"),
        "-q",
    ];
    let (code, out, err) = mm(&args);
    assert_eq!(code, 0, "{out}{err}");
    eprintln!("{out}");
    // The quarantine shows: 16 rows read, every one accounted for.
    assert!(
        out.contains("16 read = 2 accepted + 13 quarantined + 1 duplicates + 0 skipped"),
        "{out}"
    );
    // The two stray accepted rows form a mode too small to fit, and the run says so.
    assert!(out.contains("mode tdm: 2 rows before the cutoff"), "{out}");
    let json = |rel: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.path().join("work").join(rel)).unwrap()).unwrap()
    };
    let ll = |m: &serde_json::Value| m["scored"]["log_loss"].as_f64().unwrap();

    // 6v6: raw skill on kills per enemy death beats every baseline on the later window, ranks
    // players as their true skill does, favours the stronger team, and credits parties.
    let s = json("tdm-6v6/skill/skill_metrics.json");
    assert_eq!(s["metric"], "kills-per-enemy-death");
    let models = s["models"].as_array().unwrap();
    for b in &models[1..] {
        assert!(ll(&models[0]) < ll(b), "{b}");
    }
    assert!(s["team_model_final"]["skill_coef"].as_f64().unwrap() > 0.0);
    let t = &s["truth"];
    assert!(t["spearman"].as_f64().unwrap() > 0.9, "{t}");
    assert!(t["team_coef_latent"].as_f64().unwrap() > 0.0, "{t}");
    assert!(t["party_per_member_latent"].as_f64().unwrap() > 0.0, "{t}");
    assert!(t["party_per_sd"].as_f64().unwrap() > 0.0, "{t}");
    // Churn: calibrated against the truth, and ranking better than a coin.
    let c = json("tdm-6v6/churn/churn_metrics.json");
    assert!(
        c["truth"]["ece_vs_truth"].as_f64().unwrap() < 0.01,
        "{}",
        c["truth"]
    );
    assert!(c["auc"].as_f64().unwrap() > 0.55);
    // A constant at the churn rate is calibrated too: the model must be much nearer the truth.
    let mad = |k: &str| c["truth"][k].as_f64().unwrap();
    assert!(
        mad("mean_abs_diff") < 0.75 * mad("constant_mean_abs_diff"),
        "{}",
        c["truth"]
    );
    let e = json("tdm-6v6/evaluation/evaluation.json");
    assert_eq!(e["team_queue"]["team_size"], 6);
    // The three policies, the team oracle and its halves, each also scored under the truth; team EOMM,
    // inside the CoD rules, makes no more predicted blowouts than they do (so the summary
    // flags nothing).
    let policies = e["team_queue"]["policies"].as_array().unwrap();
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "cod",
            "threshold",
            "eomm",
            "oracle",
            "oracle-churn",
            "oracle-outcomes"
        ]
    );
    assert!(
        policies
            .iter()
            .all(|p| p["truth"]["expected_churn"].is_number())
    );
    let blowouts = |k: usize| policies[k]["blowout_rate"].as_f64().unwrap();
    assert!(blowouts(2) <= 1.5 * blowouts(0), "{policies:?}");
    assert!(e["team_queue"]["oracle"]["share"].is_number());
    assert!(e["team_queue"]["oracle"]["true_outcomes_gain"].is_number());
    assert!(
        out.contains("half-oracles: true churn with our win model"),
        "{out}"
    );
    assert!(!out.contains("FLAG"), "{out}");

    // 1v1: no kills in the rows, so the outcome is the metric; skill still tracks the truth,
    // and the pairing policies are compared on pools.
    let s = json("duel-1v1/skill/skill_metrics.json");
    assert_eq!(s["metric"], "outcome");
    assert!(
        s["truth"]["spearman"].as_f64().unwrap() > 0.5,
        "{}",
        s["truth"]
    );
    let e = json("duel-1v1/evaluation/evaluation.json");
    assert!(!e["eomm_vs_skill"].as_array().unwrap().is_empty());
    for line in [
        "EOMM      retained per round over SkillMM",
        "queue     6v6",
        "vs truth",
        "true retention per player over the CoD rules",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }

    // One model per mode, both listed by `mm models list` without --name (JSON rows by name).
    let (code, out, err) = mm(&["models", "list", "--models", &p("models"), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["duel-1v1", "tdm-6v6"], "{out}");
    let (code, out, err) = mm(&["models", "list", "--models", &p("models")]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("duel-1v1") && out.contains("tdm-6v6"), "{out}");

    // Run again, stopping after the ingest stage (the fits would repeat the above): the world
    // is not simulated a second time, and nothing new is ingested.
    let again: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--crash-after", "ingest"])
        .collect();
    let (code, out, err) = mm(&again);
    assert_eq!(code, 101, "{out}{err}");
    let state = json("state.json");
    let notes = state["notes"].to_string();
    assert!(
        notes.contains("the world was not simulated again"),
        "{notes}"
    );
    assert!(notes.contains("16 read = 0 accepted"), "{notes}");
}
