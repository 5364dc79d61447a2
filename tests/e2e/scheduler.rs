//! `mm` under a scheduler: JSON log lines that carry the run id and the stage, the retrain lock
//! (an OS lock: one winner among runs that start together, free again when its owner is
//! killed), the quick start's defaults agreeing with `mm models list`, and the config file's
//! precedence (flag over environment over `mm.toml` over default).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn sample() -> String {
    format!(
        "{}/../../tests/data/random_5v5.csv.gz",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `mm` in `cwd`, with extra environment and no inherited `MM_*` settings.
fn mm_in(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mm"));
    c.current_dir(cwd).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("MM_") && k != "MM_TEST_PYTHON" {
            c.env_remove(k);
        }
    }
    c.env_remove("RUST_LOG");
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn run(mut c: Command) -> (i32, String, String) {
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn retrain_logs_one_json_object_per_line_with_run_id_and_stage() {
    let dir = tempfile::tempdir().unwrap();
    let s = sample();
    let (code, out, err) = run(mm_in(
        dir.path(),
        &["retrain", &s, "--log-format", "json"],
        &[("MM_PROGRESS_MS", "0")],
    ));
    assert_eq!(code, 0, "{out}{err}");
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() >= 15, "{err}");
    let run_id = lines[0]["run_id"].as_str().unwrap().to_string();
    for l in &lines {
        assert_eq!(l["run_id"].as_str(), Some(run_id.as_str()), "{l}");
        assert!(l["stage"].as_str().is_some_and(|s| !s.is_empty()), "{l}");
        assert!(l["level"].is_string() && l["message"].is_string(), "{l}");
        assert!(l["timestamp"].is_string(), "{l}");
    }
    // Each stage's line is written as it finishes, in the chain's order.
    let done: Vec<&str> = lines
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .is_some_and(|m| m.contains(": done in"))
        })
        .map(|l| l["stage"].as_str().unwrap())
        .collect();
    assert_eq!(done, mm_retrain::stage_names());
    // Progress events of the long stages: count, total, rate.
    let progress: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["task"].is_string()).collect();
    assert!(
        progress
            .iter()
            .any(|l| l["stage"] == "fit-churn" && l["done"].as_u64().unwrap() > 0),
        "{err}"
    );
    assert!(progress.iter().all(|l| l["rate_per_s"].is_number()));
    // Once the candidate exists, its version is on every line.
    let evaluate: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l["stage"] == "evaluate").collect();
    assert!(!evaluate.is_empty());
    assert!(
        evaluate.iter().all(|l| l["model_version"] == "v0001"),
        "{err}"
    );
    // The run log keeps the same run id.
    let log = std::fs::read_to_string(dir.path().join("out/retrain/runs.jsonl")).unwrap();
    let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["run_id"].as_str(), Some(run_id.as_str()));

    // The quick start's outputs are where `mm models list` looks by default.
    let (code, out, err) = run(mm_in(dir.path(), &["models", "list"], &[]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("v0001"), "{out}");
    let (code, out, err) = run(mm_in(dir.path(), &["models", "verify", "--json"], &[]));
    assert_eq!(code, 0, "{out}{err}");
}

/// A pid that no process has any more.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn of_two_runs_against_a_dead_owners_lock_exactly_one_proceeds() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("out/retrain");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("retrain.lock"), format!("{}\n", dead_pid())).unwrap();
    let s = sample();
    let spawn = || {
        mm_in(dir.path(), &["retrain", &s], &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
    let codes: Vec<i32> = outs.iter().map(|o| o.status.code().unwrap()).collect();
    let text: String = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    let mut sorted = codes.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        vec![0, 3],
        "exactly one proceeds: {codes:?}\n{text}"
    );
    assert!(text.contains("another retrain is running"), "{text}");
    let winner = outs.iter().find(|o| o.status.success()).unwrap();
    assert!(
        String::from_utf8_lossy(&winner.stdout).contains("took over a stale lock"),
        "the winner says it took over the dead owner's lock"
    );
    let runs = std::fs::read_to_string(work.join("runs.jsonl")).unwrap();
    assert_eq!(runs.lines().count(), 1, "one finished run");
}

#[test]
fn a_killed_owner_frees_the_lock_for_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("out/retrain");
    let s = sample();
    let mut owner = mm_in(dir.path(), &["retrain", &s], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait (bounded) until the owner holds the lock: its pid is in the file.
    let lock = work.join("retrain.lock");
    let t = Instant::now();
    let want = format!("{}\n", owner.id());
    while std::fs::read_to_string(&lock).ok().as_deref() != Some(want.as_str()) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the owner never took the lock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Stopped (SIGSTOP) while it holds the lock, so it cannot finish first: a second run is
    // refused with the owner's pid.
    let stop = Command::new("kill")
        .args(["-STOP", &owner.id().to_string()])
        .status()
        .unwrap();
    assert!(stop.success());
    assert!(
        owner.try_wait().unwrap().is_none(),
        "the owner ended before it was stopped"
    );
    let (code, _, err) = run(mm_in(dir.path(), &["retrain"], &[]));
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&format!("pid {}", owner.id())), "{err}");
    owner.kill().unwrap(); // SIGKILL: no destructor runs, the pid stays in the file
    owner.wait().unwrap();
    let (code, out, err) = run(mm_in(dir.path(), &["retrain", &s], &[]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("promoted v0001")
            || out.contains("promoted v0002")
            || out.contains("kept v0001: no match of this mode since"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        "",
        "a clean end clears the pid"
    );
}

#[test]
fn the_environment_overrides_the_config_file_and_flags_override_both() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mm.toml"),
        "lake = \"file/lake\"\nmodels = \"file/models\"\n[retrain]\nholdout-days = 2\nrounds = 50\nwork = \"file/work\"\n",
    )
    .unwrap();
    let env = [("MM_MODELS", "env/models"), ("MM_WORK", "env/work")];
    let (code, out, err) = run(mm_in(
        dir.path(),
        &[
            "config",
            "show",
            "--json",
            "retrain",
            "--rounds",
            "9",
            "--work",
            "flag/work",
        ],
        &env,
    ));
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let get = |k: &str| {
        v["settings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == k)
            .unwrap()
            .clone()
    };
    assert_eq!(
        get("lake")["value"],
        "file/lake",
        "the file, with no MM_LAKE"
    );
    assert!(
        get("lake")["source"]
            .as_str()
            .unwrap()
            .starts_with("config ")
    );
    assert_eq!(
        get("models")["value"],
        "env/models",
        "MM_MODELS beats the file"
    );
    assert_eq!(get("models")["source"], "environment MM_MODELS");
    assert_eq!(
        get("work")["value"],
        "flag/work",
        "the flag beats MM_WORK and the file"
    );
    assert_eq!(get("work")["source"], "command line");
    assert_eq!(get("rounds")["value"], "9");
    assert_eq!(get("rounds")["source"], "command line");
    assert_eq!(get("holdout-days")["value"], "2");
    assert_eq!(get("margin")["source"], "default");
    assert_eq!(v["config_file"], "mm.toml");

    // The text form names each source too; a bad key is refused with the file's name.
    let (code, out, _) = run(mm_in(dir.path(), &["config", "show", "retrain"], &env));
    assert_eq!(code, 0);
    assert!(out.contains("lake = \"file/lake\""), "{out}");
    assert!(out.contains("# environment MM_MODELS"), "{out}");
    std::fs::write(dir.path().join("mm.toml"), "[retrain]\nholdout = 2\n").unwrap();
    let (code, _, err) = run(mm_in(dir.path(), &["retrain"], &[]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("mm.toml: unknown setting `holdout`"), "{err}");
}

/// `mm config show --json ARGS` in `dir`: the settings by key, and stderr.
fn settings_in(dir: &Path, args: &[&str]) -> (serde_json::Value, String) {
    let mut argv = vec!["config", "show", "--json"];
    argv.extend_from_slice(args);
    let (code, out, err) = run(mm_in(dir, &argv, &[]));
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let by_key = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["key"].as_str().unwrap().to_string(), s.clone()))
        .collect::<serde_json::Map<_, _>>();
    (serde_json::Value::Object(by_key), err)
}

/// A renamed flag's old name in `mm.toml` still applies to its command, with a warning naming
/// the new one; at the top level it no longer reaches the command that renamed it.
#[test]
fn a_renamed_flag_old_name_in_the_config_file_still_applies_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("mm.toml");
    std::fs::write(&toml, "margin = 0.5\n[fit.skill]\nmargin = 2.5\n").unwrap();
    let (skill, err) = settings_in(dir.path(), &["fit", "skill"]);
    assert!(err.contains("`margin` is now `metric-margin`"), "{err}");
    assert_eq!(
        skill["metric-margin"]["value"], "2.5",
        "the [fit.skill] table's, not the top level's"
    );
    // `mm retrain --margin` (the promotion gate) takes the top-level key.
    let (retrain, _) = settings_in(dir.path(), &["retrain"]);
    assert_eq!(retrain["margin"]["value"], "0.5");
    // With only the top-level key, `mm fit skill` keeps its default.
    std::fs::write(&toml, "margin = 0.5\n").unwrap();
    let (skill, err) = settings_in(dir.path(), &["fit", "skill"]);
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(skill["metric-margin"]["source"], "default");
}

/// `mm fit churn` reads the skill fit where `mm fit skill` writes it by default; without one
/// there it says so (the skill feature is off), and `--no-skill` turns the feature off quietly.
#[test]
fn fit_churn_says_when_it_runs_without_the_skill_feature() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, err) = run(mm_in(
        dir.path(),
        &["fit", "churn", "--lake", "no-lake"],
        &[],
    ));
    assert!(err.contains("no skill fit in out/skill"), "{err}");
    let (_, _, err) = run(mm_in(
        dir.path(),
        &["fit", "churn", "--lake", "no-lake", "--no-skill"],
        &[],
    ));
    assert!(!err.contains("no skill fit"), "{err}");
}

#[test]
fn retrain_runs_its_stages_with_their_tables_of_the_config_file() {
    // `[fit.skill]` and `[fit.churn]` mean the same inside `mm retrain` as for the commands on
    // their own; what the run sets itself (a fit's output folder) is named in a warning.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mm.toml"),
        "[fit.skill]\nno-tune = true\nhalf-life = 7\nbaselines = \"none\"\n\n\
         [fit.churn]\nhorizon = \"4h\"\nhistory = 5\nc-grid = [0.5]\nout = \"elsewhere\"\n\
         lake = \"other/lake\"\n",
    )
    .unwrap();
    let s = sample();
    let (code, out, err) = run(mm_in(dir.path(), &["retrain", &s], &[]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("mm.toml: fit skill: half-life, no-tune, baselines"),
        "{err}"
    );
    assert!(
        err.contains("mm.toml: fit churn: horizon, history, c-grid"),
        "{err}"
    );
    assert!(
        err.contains("mm.toml: fit churn: lake, out: mm retrain sets these itself"),
        "{err}"
    );
    assert!(!dir.path().join("elsewhere").exists());
    assert!(!dir.path().join("other").exists());
    let json = |p: &str| -> serde_json::Value {
        let f = dir.path().join("out/retrain/default").join(p);
        serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap()
    };
    let skill = json("skill/skill_metrics.json");
    assert_eq!(skill["params"]["half_life_matches"], 7.0);
    assert_eq!(skill["tuning"], serde_json::json!([]), "not tuned");
    let churn = json("churn/churn_metrics.json");
    assert_eq!(churn["horizon"], "4h");
    assert_eq!(churn["c"], 0.5);
    assert_eq!(churn["grid"].as_array().unwrap().len(), 1);
    // The artifact carries the churn model's feature spec: five earlier matches a row.
    let model = json("churn/churn_model.json");
    assert_eq!(model["horizon"], "4h");
    assert_eq!(model["model"]["spec"]["history"], 5);
    assert!(out.contains("(C = 0.5)"), "{out}");

    // A bad value in a stage's table stops the run before anything is written, naming the
    // file and the stage (exit code 2, as for the flag).
    let dir2 = tempfile::tempdir().unwrap();
    std::fs::write(
        dir2.path().join("mm.toml"),
        "[fit.churn]\nhistory = \"many\"\n",
    )
    .unwrap();
    let (code, out, err) = run(mm_in(dir2.path(), &["retrain", &s], &[]));
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("mm.toml: the settings of `mm fit churn` in it") && err.contains("many"),
        "{err}"
    );
    assert!(!dir2.path().join("out").exists(), "nothing written");
}
