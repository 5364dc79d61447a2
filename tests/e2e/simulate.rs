//! `mm simulate`: a small world through the binary, read back by `mm lake show`; a second run
//! into the same lake is refused with exit code 2 and changes nothing; a closed standard output
//! stops the printing, not the command.

use crate::util::{mm, snapshot};

#[test]
fn simulate_writes_a_lake_and_refuses_to_overwrite_it() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let lake_s = lake.to_str().unwrap();
    let args = [
        "simulate",
        "--lake",
        lake_s,
        "--players",
        "800",
        "--days",
        "2",
        "--json",
    ];
    let (code, out, err) = mm(&args);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = report["rows"].as_u64().unwrap();
    assert!(
        rows > 0 && report["matches_tdm"].as_u64().unwrap() > 0,
        "{report}"
    );

    let (code, out, err) = mm(&["lake", "show", "--lake", lake_s, "--json"]);
    assert_eq!(code, 0, "{err}");
    let show: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(show["match_rows"].as_u64().unwrap(), rows, "{show}");

    // The raw-skill fit reads it back: every player, bounded skills, predictions scored.
    let out = dir.path().join("skill");
    let (code, stdout, err) = mm(&[
        "fit",
        "skill",
        "--lake",
        lake_s,
        "--out",
        out.to_str().unwrap(),
        "--mode",
        "tdm-6v6",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let fit: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(fit["players"].as_u64().unwrap() > 0, "{fit}");
    assert!(
        fit["skill_min"].as_f64().unwrap() >= -1.0 && fit["skill_max"].as_f64().unwrap() <= 1.0
    );
    assert!(out.join("players.parquet").exists() && out.join("percentiles.json").exists());
    assert!(out.join("team_model.json").exists() && out.join("skill_report.html").exists());
    // The metrics table: our model, then the four baselines, all scored on the same matches.
    let models = fit["models"].as_array().unwrap();
    assert_eq!(models.len(), 5, "{fit}");
    let n = models[0]["scored"]["n"].as_u64().unwrap();
    assert!(n > 0 && models.iter().all(|m| m["scored"]["n"].as_u64() == Some(n)));
    // Scoring must come after tuning.
    let (code, _, err) = mm(&[
        "fit",
        "skill",
        "--lake",
        lake_s,
        "--out",
        out.to_str().unwrap(),
        "--tune-to",
        "2024-01-10",
        "--score-from",
        "2024-01-05",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("score-from"), "{err}");
    let (code, _, err) = mm(&[
        "fit",
        "skill",
        "--lake",
        lake_s,
        "--out",
        out.to_str().unwrap(),
        "--mode",
        "nope",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no matches"), "{err}");

    // The churn fit on the same lake, with the skill fit's percentiles: JSON report, outputs.
    let churn = dir.path().join("churn");
    let (code, stdout, err) = mm(&[
        "fit",
        "churn",
        "--lake",
        lake_s,
        "--out",
        churn.to_str().unwrap(),
        "--mode",
        "tdm-6v6",
        "--skill",
        out.to_str().unwrap(),
        "--c-grid",
        "0.01,1",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let c: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let (rows, censored) = (c["rows"].as_u64().unwrap(), c["censored"].as_u64().unwrap());
    let (train, unused, scored) = (
        c["train_rows"].as_u64().unwrap(),
        c["train_rows_unused"].as_u64().unwrap(),
        c["score_rows"].as_u64().unwrap(),
    );
    assert_eq!(rows, censored + train + unused + scored, "{c}");
    assert!(
        scored > 0 && c["truth"]["rows"].as_u64() == Some(scored),
        "{c}"
    );
    for f in [
        "churn_model.json",
        "churn_metrics.json",
        "churn_report.html",
        "churn_features.parquet",
    ] {
        assert!(churn.join(f).exists(), "{f}");
    }
    for bad in [["--horizon", "8x"], ["--history", "0"]] {
        let (code, _, err) = mm(&[
            "fit",
            "churn",
            "--lake",
            lake_s,
            "--out",
            churn.to_str().unwrap(),
            bad[0],
            bad[1],
        ]);
        assert_eq!(code, 2, "{bad:?}: {err}");
    }

    // Export: the same fits, refitted, give byte-identical artifacts (the manifest's creation
    // time and version name apart); verify, diff, a corrupted file refused, rollback.
    let churn2 = dir.path().join("churn2");
    let (code, _, err) = mm(&[
        "fit",
        "churn",
        "--lake",
        lake_s,
        "--out",
        churn2.to_str().unwrap(),
        "--mode",
        "tdm-6v6",
        "--skill",
        out.to_str().unwrap(),
        "--c-grid",
        "0.01,1",
        "--no-html",
        "--no-table",
    ]);
    assert_eq!(code, 0, "{err}");
    let models = dir.path().join("models");
    let m_s = models.to_str().unwrap();
    for (c, v) in [(&churn, "a"), (&churn2, "b")] {
        let (code, stdout, err) = mm(&[
            "export",
            "--skill",
            out.to_str().unwrap(),
            "--churn",
            c.to_str().unwrap(),
            "--models",
            m_s,
            "--version",
            v,
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(r["name"], "tdm-6v6");
    }
    let store = models.join("tdm-6v6");
    for f in [
        "players.parquet",
        "churn.json",
        "skill.json",
        "percentiles.json",
        "team_win.json",
        "party_adjustment.json",
    ] {
        assert_eq!(
            std::fs::read(store.join("a").join(f)).unwrap(),
            std::fs::read(store.join("b").join(f)).unwrap(),
            "{f}"
        );
    }
    let manifest = |v: &str| {
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(store.join(v).join("manifest.json")).unwrap())
                .unwrap();
        m["created_at"] = serde_json::Value::Null;
        m["model_version"] = serde_json::Value::Null;
        m
    };
    assert_eq!(manifest("a"), manifest("b"));
    let (code, stdout, err) = mm(&["models", "verify", "--all", "--models", m_s]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("a: ok") && stdout.contains("b: ok"),
        "{stdout}"
    );
    let (code, stdout, err) = mm(&["models", "diff", "a", "b", "--models", m_s, "--json"]);
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(d["metrics"].as_array().map(Vec::len), Some(0), "{d}");
    // LATEST is b; corrupt it: verify and promote refuse and name the file; rollback to a.
    let players = store.join("b").join("players.parquet");
    let mut bytes = std::fs::read(&players).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&players, &bytes).unwrap();
    let (code, _, err) = mm(&["models", "verify", "--models", m_s]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("players.parquet") && err.contains("sha256"),
        "{err}"
    );
    let (code, _, err) = mm(&["models", "promote", "b", "--models", m_s]);
    assert_eq!(code, 2, "{err}");
    let (code, stdout, err) = mm(&["models", "rollback", "--models", m_s]);
    assert_eq!(code, 0, "{err}");
    assert!(stdout.contains("LATEST -> a"), "{stdout}");

    // The matcher scores a pool with the artifact (LATEST): every policy, exact ones certified.
    let pool = dir.path().join("pool.csv");
    let ids: String = (0..50).map(|i| format!("p{i:07}\n")).collect();
    std::fs::write(&pool, format!("id\n{ids}")).unwrap();
    let (code, stdout, err) = mm(&[
        "pair",
        "--players",
        pool.to_str().unwrap(),
        "--artifact",
        store.to_str().unwrap(),
        "--policy",
        "all",
        "--verify",
        "--summary",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let objective = |p: &str| {
        r["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["policy"] == p)
            .unwrap()["objective"]
            .as_f64()
            .unwrap()
    };
    assert!(
        objective("eomm") <= objective("skill") && objective("skill") <= objective("worst"),
        "{r}"
    );
    for x in r["results"].as_array().unwrap() {
        if x["policy"] == "eomm" || x["policy"] == "worst" {
            assert_eq!(x["certified"], true, "{x}");
        }
    }

    let before = snapshot(&lake);
    let (code, _, err) = mm(&args);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("already holds matches"), "{err}");
    assert_eq!(snapshot(&lake), before);

    let (code, _, err) = mm(&[
        "simulate",
        "--lake",
        dir.path().join("x").to_str().unwrap(),
        "--players",
        "3",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--players"), "{err}");
}

/// `mm bench scale` at two small sizes: every requested stage is measured at each size in its
/// own process (peak memory reported by the child), sizes grow by days, and the scaling table
/// divides the larger size's figures by the smaller's.
#[test]
fn bench_scale_measures_each_stage_at_each_size() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = mm(&[
        "bench",
        "scale",
        "--rows",
        "8k,20k",
        "--players",
        "1500",
        "--stages",
        "ingest,fit-skill,churn-features,retrain",
        "--work",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let runs = v["runs"].as_array().unwrap();
    let stages: Vec<&str> = runs.iter().map(|r| r["stage"].as_str().unwrap()).collect();
    assert_eq!(
        stages,
        [
            "simulate",
            "ingest",
            "fit-skill",
            "churn-features",
            "retrain",
            "simulate",
            "ingest",
            "fit-skill",
            "churn-features",
            "retrain"
        ]
    );
    let (small, large) = (
        runs[0]["rows"].as_u64().unwrap(),
        runs[5]["rows"].as_u64().unwrap(),
    );
    assert!(small > 0 && large > 2 * small, "{small} then {large}");
    for r in runs {
        // A child's own peak: more than an empty process, far less than this machine.
        let mib = r["peak_rss_mib"].as_f64().unwrap();
        assert!(mib > 5.0 && mib < 4096.0, "{r}");
        let seconds = r["seconds"].as_f64().unwrap();
        assert!(seconds > 0.0, "{r}");
        // The child's CPU time: some, and no more than its wall time on every core.
        let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
        let cpu = r["cpu_seconds"].as_f64().unwrap();
        assert!(cpu > 0.0 && cpu <= seconds * cores + 0.05, "{r}");
        let per_cpu = r["rows_per_cpu_s"].as_f64().unwrap();
        assert!(
            (per_cpu * cpu - r["rows"].as_f64().unwrap()).abs() < 1.0,
            "{r}"
        );
        assert_eq!(r["unit"], "rows");
    }
    let scaling = v["scaling"].as_array().unwrap();
    assert_eq!(scaling.len(), 5);
    let fit = scaling.iter().find(|g| g["stage"] == "fit-skill").unwrap();
    let ratio =
        runs[7]["peak_rss_mib"].as_f64().unwrap() / runs[2]["peak_rss_mib"].as_f64().unwrap();
    assert!((fit["rss_ratio"].as_f64().unwrap() - ratio).abs() < 1e-9);
    // The retrain ran its whole chain at each size: fitted, exported and evaluated a model.
    for size in std::fs::read_dir(dir.path()).unwrap() {
        let models = size.unwrap().path().join("retrain-models/tdm-6v6");
        assert!(models.join("LATEST").exists(), "{}", models.display());
    }
    // Both simulated lakes stay in the work directory for the next run to reuse.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

/// `mm bench ingest` on a small file beside Python polars: mm and each polars variant hold every
/// row, the lake-layout variant writes exactly the lake's day files and the one-file variants one
/// file, the ratios are the quotients of the figures beside them, and nothing but the generated
/// CSV is left in the work directory.
#[test]
fn bench_ingest_measures_mm_beside_each_polars_variant() {
    let Some(py) = crate::util::python_with("polars") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = mm(&[
        "bench",
        "ingest",
        "--rows",
        "40000",
        "--reps",
        "1",
        "--work",
        dir.path().to_str().unwrap(),
        "--peer-python",
        py.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let size = &v.as_array().unwrap()[0];
    assert_eq!(size["rows"], 40000);
    let f = |run: &str, key: &str| size[run][key].as_f64().unwrap();
    let day_files = f("mm", "files");
    assert!(day_files >= 2.0, "{size}");
    assert_eq!(f("polars_lake", "files"), day_files, "{size}");
    for run in ["mm", "polars_eager", "polars_lazy", "polars_lake"] {
        assert!(
            f(run, "rows_per_s") > 0.0 && f(run, "peak_rss_mib") > 5.0,
            "{run}: {size}"
        );
        assert!(
            (f(run, "rows_per_s") * f(run, "seconds") - 40000.0).abs() < 1e-6,
            "{size}"
        );
    }
    for run in ["polars_eager", "polars_lazy"] {
        assert_eq!(f(run, "files"), 1.0, "{size}");
    }
    let near = |a: f64, b: f64| (a - b).abs() < 1e-12 * b.abs().max(1.0);
    let best = f("polars_eager", "rows_per_s").max(f("polars_lazy", "rows_per_s"));
    assert!(near(
        size["ratio_to_polars"].as_f64().unwrap(),
        f("mm", "rows_per_s") / best
    ));
    assert!(near(
        size["ratio_to_polars_lake"].as_f64().unwrap(),
        f("mm", "rows_per_s") / f("polars_lake", "rows_per_s")
    ));
    assert!(near(
        size["memory_to_polars_lake"].as_f64().unwrap(),
        f("mm", "peak_rss_mib") / f("polars_lake", "peak_rss_mib")
    ));
    assert!(near(
        size["memory_to_polars_lazy"].as_f64().unwrap(),
        f("mm", "peak_rss_mib") / f("polars_lazy", "peak_rss_mib")
    ));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["peer_shaped_40000_s20240603.csv"], "{left:?}");
}

/// `mm bench serve` on a small load: every phase runs against a server that needs its token for
/// the queue calls (the bench sends it), no request fails, every reload is served, and the
/// corrupt version promoted by hand is refused while the last good one keeps serving.
#[test]
fn bench_serve_runs_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = mm(&[
        "bench",
        "serve",
        "--players",
        "20000",
        "--seconds",
        "1",
        "--queue-searches",
        "2000",
        "--arrivals",
        "200",
        "--reloads",
        "2",
        "--work",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let phases: Vec<&str> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(phases, ["Score 12", "Pair 200", "Pair 1000"]);
    for p in v["phases"].as_array().unwrap() {
        assert_eq!(p["failed"], 0, "{p}");
        assert!(p["requests"].as_u64().unwrap() > 0, "{p}");
    }
    let q = &v["queue"];
    assert_eq!(q["searches_at_start"], 2000);
    assert!(q["lobbies_per_tick"].as_f64().unwrap() > 0.0, "{q}");
    let r = &v["reload"];
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["served_after_corrupt"], "v0003", "{r}");
    assert_eq!(r["refusals_in_metrics"], 1.0, "{r}");
    // Too few players for the queue phase: refused before it starts, saying why.
    let (code, _, err) = mm(&[
        "bench",
        "serve",
        "--players",
        "1000",
        "--seconds",
        "1",
        "--reloads",
        "0",
        "--work",
        dir.path().to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("--queue-searches"), "{err}");
}

/// `mm bench serve --reports` on a small load in two rounds: Score alone, beside the control's
/// Score calls and beside the reports, none failing; every acknowledged match of both rounds in
/// the lake exactly once.
#[test]
fn bench_serve_reports_runs_its_phases_and_lands_every_match_once() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = mm(&[
        "bench",
        "serve",
        "--reports",
        "--players",
        "20000",
        "--seconds",
        "1",
        "--report-rate",
        "200",
        "--report-rounds",
        "2",
        "--work",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for (key, name) in [
        ("score_alone", "Score 12"),
        ("score_beside_score_calls", "Score 12 + Score open"),
        ("score_calls", "Score 12 (open)"),
        ("score_beside_reports", "Score 12 + reports"),
        ("reports", "ReportMatch (open)"),
    ] {
        let p = &v[key];
        assert_eq!(p["name"], name, "{p}");
        assert_eq!(p["failed"], 0, "{p}");
        assert!(p["requests"].as_u64().unwrap() > 0, "{p}");
    }
    // The open loops send their calls at the rate asked: 200 in one second each, the control's
    // once and the reports' in each round.
    assert_eq!(v["score_calls"]["requests"], 200);
    assert_eq!(v["rounds"], 2);
    assert_eq!(v["reports"]["requests"], 400);
    assert_eq!(v["acknowledged"], 400);
    assert_eq!(v["lake_rows"], 4800);
    assert_eq!(v["lake_keys"], 4800);
    let by_round = v["score_p99_ratio_by_round"].as_array().unwrap();
    assert_eq!(by_round.len(), 2, "{by_round:?}");
    assert!(
        by_round.iter().all(|r| r.as_f64().unwrap() > 0.0),
        "{by_round:?}"
    );
    for ratio in ["score_p99_ratio", "score_p99_ratio_control"] {
        assert!(v[ratio].as_f64().unwrap() > 0.0, "{ratio}: {}", v[ratio]);
    }
}

/// A reader that closes standard output early (`mm simulate ... | head -0`) stops the printing,
/// not the command: the lake is written whole and `mm` exits 0, without a panic. A failure to
/// write that is not a closed pipe (a full disk: `/dev/full`) fails the command, named.
#[test]
fn a_closed_standard_output_stops_the_printing_not_the_command() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let lake_s = lake.to_str().unwrap();
    let closed = || {
        // The reader is gone before `mm` starts, so its first write fails (EPIPE).
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        Stdio::from(writer)
    };
    let run = |args: &[&str], stdout: Stdio| {
        let out = Command::new(env!("CARGO_BIN_EXE_mm"))
            .args(args)
            .stdout(stdout)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), err)
    };
    let args = [
        "simulate",
        "--lake",
        lake_s,
        "--players",
        "800",
        "--days",
        "2",
    ];
    let (code, err) = run(&args, closed());
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (code, out, err) = mm(&["lake", "show", "--lake", lake_s, "--json"]);
    assert_eq!(code, 0, "{err}");
    let show: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(show["match_rows"].as_u64().unwrap() > 0, "{show}");

    let (code, err) = run(&["completions", "bash"], closed());
    assert_eq!(code, Some(0), "{err}");
    let full = std::fs::File::create("/dev/full").unwrap();
    let (code, err) = run(&["completions", "bash"], Stdio::from(full));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("mm: error: cannot write to standard output: No space left on device"),
        "{err}"
    );
}
