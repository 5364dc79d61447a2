//! `mm fit skill` on the real sets, under the protocol: tuned on an earlier window,
//! scored on a later one, our model against Elo, Glicko-2, TrueSkill and Weng-Lin.

use std::path::Path;

use arrow_array::cast::AsArray;

use crate::util::{self, ingest_ok, mm};

fn fit(lake: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "fit",
        "skill",
        "--lake",
        lake.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ];
    args.extend_from_slice(extra);
    let (code, stdout, err) = mm(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&stdout).unwrap()
}

fn log_loss(r: &serde_json::Value, model: &str) -> f64 {
    r["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"].as_str().unwrap().starts_with(model))
        .unwrap()["scored"]["log_loss"]
        .as_f64()
        .unwrap()
}

/// `mm fit skill` on the ATP lake with the peers' windows (tuned on 2005-2014, scored on
/// 2015-2019), the share of points won as the metric, and `extra` flags.
fn atp_fit(real: &Path, extra: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    ingest_ok(&lake, &[&real.join("atp-tour")]);
    let mut args = vec![
        "--metric",
        "perf",
        "--tune-from",
        "2005-01-01",
        "--tune-to",
        "2015-01-01",
        "--score-to",
        "2019-12-31",
    ];
    args.extend_from_slice(extra);
    fit(&lake, &dir.path().join("skill"), &args)
}

/// ATP, tuned on 2005-2014 and scored on 2015-2019, as the peers did: our Elo reproduces the
/// peers' tuned Elo (log-loss 0.6114, `../shared/peers/results/ratings.json`), and raw skill on
/// the share of points won beats every baseline.
#[test]
fn atp_raw_skill_beats_the_baselines() {
    let Some(real) = util::real_dir() else {
        return;
    };
    let r = atp_fit(&real, &[]);
    let n = r["models"][0]["scored"]["n"].as_u64().unwrap();
    // The peers score 14,419 matches; our lake quarantines a handful of their rows.
    assert!((14_300..=14_419).contains(&n), "{n}");
    let elo = log_loss(&r, "elo");
    assert!((elo - 0.6114).abs() < 0.002, "elo {elo}");
    let ours = log_loss(&r, "raw-skill");
    for b in ["elo", "glicko2", "trueskill", "weng-lin"] {
        assert!(ours < log_loss(&r, b), "{b}: {r}");
    }
    assert!(ours < 0.61, "{ours}");
}

/// ATP at the baselines' defaults (`--no-tune`), scored on 2015-2019: our Elo (K = 32),
/// Glicko-2 (tau 0.5, one rating period a match) and TrueSkill (the library's defaults at the
/// data's draw rate, here 0 as the peer sets it) reproduce the peers' log-losses read from
/// `../shared/peers/results/ratings.json` (`bench_ratings.py`, the same matches less the handful
/// our lake quarantines). Weng-Lin's log-loss is not compared: its openskill peer predicts with
/// its own `predict_win`; its ratings are, update by update (`ratings_peer.rs`).
#[test]
fn atp_baselines_at_their_defaults_reproduce_the_peers() {
    let (Some(real), Some(peers)) = (util::real_dir(), util::shared("peers/results")) else {
        return;
    };
    let peer: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(peers.join("ratings.json")).unwrap())
            .unwrap();
    let r = atp_fit(&real, &["--no-tune"]);
    let n = r["models"][0]["scored"]["n"].as_u64().unwrap();
    assert_eq!(peer["models"]["elo_k32"]["n"], 14_419);
    assert!((14_400..=14_419).contains(&n), "{n}");
    for (ours, theirs, params) in [
        ("elo", "elo_k32", ("k", 32.0)),
        ("glicko2", "glicko2", ("tau", 0.5)),
        ("trueskill", "trueskill", ("draw_probability", 0.0)),
    ] {
        let m = r["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == ours)
            .unwrap();
        assert_eq!(m["params"][params.0], params.1, "{m}");
        let (a, b) = (
            log_loss(&r, ours),
            peer["models"][theirs]["log_loss"].as_f64().unwrap(),
        );
        assert!((a - b).abs() < 0.001, "{ours}: {a} against the peer's {b}");
    }
}

/// LoL pro games, kills per death: raw skill at least as good as the best baseline in
/// log-loss on the later window. The lake keeps each player's position as `role`, and the
/// tuning chooses how roles are compared among the three ways, on the tuning window only.
#[test]
fn lol_raw_skill_at_least_as_good_as_the_best_baseline() {
    let Some(real) = util::real_dir() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    ingest_ok(&lake, &[&real.join("lol-pro-oracleselixir-jan")]);
    let mut roles = std::collections::BTreeMap::<String, usize>::new();
    for b in util::read_tree(&lake.join("matches")) {
        let col = b.column_by_name("role").unwrap().as_string::<i32>().clone();
        for r in col.iter() {
            *roles.entry(r.unwrap_or("(none)").to_string()).or_default() += 1;
        }
    }
    // Ten players a game, two of each position (a few rows of partial games are quarantined).
    assert_eq!(
        roles.keys().map(String::as_str).collect::<Vec<_>>(),
        ["bot", "jng", "mid", "sup", "top"],
        "{roles:?}"
    );
    assert!(roles.values().all(|&n| n > 1_150), "{roles:?}");
    let r = fit(&lake, &dir.path().join("skill"), &[]);
    let ours = log_loss(&r, "raw-skill");
    let best = ["elo", "glicko2", "trueskill", "weng-lin"]
        .iter()
        .map(|b| log_loss(&r, b))
        .fold(f64::INFINITY, f64::min);
    assert!(ours <= best, "{ours} vs {best}: {r}");
    // Every role comparison was tried on the same grid, and the chosen one has the lowest
    // tuning log-loss.
    let tuning = r["tuning"].as_array().unwrap();
    let best_of = |roles: &str| {
        tuning
            .iter()
            .filter(|t| t["roles"] == roles)
            .map(|t| t["log_loss"].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min)
    };
    let tried: Vec<f64> = ["all", "within-role", "normalised"]
        .iter()
        .map(|k| best_of(k))
        .collect();
    assert!(tried.iter().all(|x| x.is_finite()), "{tried:?}");
    let chosen = r["params"]["roles"].as_str().unwrap();
    let min = tried.iter().copied().fold(f64::INFINITY, f64::min);
    assert_eq!(best_of(chosen), min, "{chosen}: {tried:?}");
    // A fixed comparison is used as given (no role tuning).
    let fixed = fit(
        &lake,
        &dir.path().join("skill-within"),
        &["--roles", "within-role", "--baselines", "none"],
    );
    assert_eq!(fixed["params"]["roles"], "within-role");
    assert!(
        fixed["tuning"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["roles"] == "within-role")
    );
}
