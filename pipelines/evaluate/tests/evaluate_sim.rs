//! `evaluate` on a small simulated 1v1 history, fitted on its first days and evaluated on the
//! rest: the exact policies bound every other policy, the run is deterministic for a seed,
//! and a window the models were fitted on is refused.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::{Path, PathBuf};

use mm_eval::{EvalConfig, EvalError, evaluate};
use mm_sim::{SimConfig, simulate};

const DAY: i64 = 86_400_000;

/// Simulates 1v1 history, fits on all but the last two days and exports; returns the
/// artifact's model directory and the cutoff.
fn fitted(dir: &Path) -> (PathBuf, i64) {
    let lake = dir.join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        seed: 11,
        players: 3_000,
        days: 6,
        duel_share: 1.0,
        ..SimConfig::default()
    })
    .unwrap();
    let days = mm_lake::Lake::open(&lake).unwrap().days().unwrap();
    let cutoff = (i64::from(*days.last().unwrap()) - 1) * DAY;
    let mut s = mm_fit::SkillConfig::new(lake.clone(), dir.join("skill"));
    s.mode = Some("duel-1v1".into());
    s.metric = mm_fit::Metric::Outcome;
    s.until_ms = Some(cutoff);
    s.baselines.clear();
    mm_fit::fit_skill(&s).unwrap();
    let mut c = mm_fit::churn::ChurnConfig::new(&lake, dir.join("churn"));
    c.mode = Some("duel-1v1".into());
    c.until_ms = Some(cutoff);
    c.skill = Some(dir.join("skill"));
    c.fit.c_grid = vec![0.1];
    c.fit.folds = 2;
    mm_fit::churn::fit_churn(&c).unwrap();
    mm_fit::export::export(&mm_fit::export::ExportConfig {
        skill: dir.join("skill"),
        churn: dir.join("churn"),
        models: dir.join("models"),
        name: None,
        version: None,
        promote: true,
    })
    .unwrap();
    (dir.join("models/duel-1v1"), cutoff)
}

#[test]
fn policies_on_the_same_pools() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cutoff) = fitted(dir.path());
    let mut cfg = EvalConfig::new(dir.path().join("lake"), &model, dir.path().join("eval"));
    cfg.from_ms = Some(cutoff);
    cfg.rounds = 40;
    cfg.pool_sizes = vec![30, 60];
    cfg.pool_window_ms = Some(6 * 3_600_000);
    let r = evaluate(&cfg).unwrap();
    assert!(r.one_v_one);
    assert_eq!(r.sizes.len(), 2);
    for s in &r.sizes {
        let get = |n: &str| s.policies.iter().find(|p| p.policy == n).unwrap();
        let (eomm, worst) = (get("eomm"), get("worst"));
        for p in &s.policies {
            // Every policy pairs the whole (even) pool.
            assert!(
                (p.matched_players - s.pool_size as f64).abs() < 1e-9,
                "{p:?}"
            );
            assert_eq!(p.rounds, 40);
            // EOMM is the exact minimum of expected churn on every pool, WorstMM the maximum:
            // so are their means over the same pools.
            assert!(eomm.expected_retained_mean >= p.expected_retained_mean - 1e-9);
            assert!(worst.expected_retained_mean <= p.expected_retained_mean + 1e-9);
            let players: u64 = p.by_decile.iter().map(|d| d.players).sum();
            assert_eq!(players, 40 * s.pool_size as u64);
            assert!(p.retained_ci95.0 <= p.retained_mean && p.retained_mean <= p.retained_ci95.1);
        }
        // Welch tests between every ordered pair of policies.
        assert_eq!(s.tests.len(), 5 * 4);
    }
    assert_eq!(r.eomm_vs_skill.len(), 2);
    let h = &r.holdout[0];
    assert!(h.churn_rows > 0 && h.churn_log_loss.is_finite() && h.win_log_loss.is_finite());
    assert!(r.historical[0].players > 0);
    let html = std::fs::read_to_string(dir.path().join("eval/evaluation.html")).unwrap();
    assert!(html.contains("EOMM Table 2") && html.contains("<svg"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("eval/evaluation.json")).unwrap())
            .unwrap();
    assert_eq!(json["sizes"][0]["pool_size"], 30);

    // The same seed gives the same figures; comparing the artifact with itself gives two
    // identical sets of rows on the same pools and draws.
    cfg.compare = Some(model.clone());
    cfg.out = dir.path().join("eval2");
    let r2 = evaluate(&cfg).unwrap();
    for (a, s2) in r.sizes.iter().zip(&r2.sizes) {
        for p in &a.policies {
            for who in ["candidate", "baseline"] {
                let q = s2
                    .policies
                    .iter()
                    .find(|q| q.policy == format!("{who}/{}", p.policy))
                    .unwrap();
                assert_eq!(p.retained_mean, q.retained_mean, "{}", p.policy);
                assert_eq!(p.expected_retained_mean, q.expected_retained_mean);
            }
        }
    }
    assert_eq!(r2.holdout.len(), 2);
    assert_eq!(r2.holdout[0].churn_log_loss, r2.holdout[1].churn_log_loss);

    // A window that starts inside the training data is refused.
    cfg.compare = None;
    cfg.from_ms = Some(cutoff - DAY);
    match evaluate(&cfg) {
        Err(EvalError::Input(m)) => {
            assert!(m.contains("not after the artifact's data end"), "{m}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}
