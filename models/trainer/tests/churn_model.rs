//! The churn model against a known truth: rows from the EOMM feature builder over random
//! histories, labels drawn from a known logistic model of those features. Held-out players are
//! scored against the true probabilities.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use mm_trainer::churn::features::{FeatureSpec, Outcome3, Played, Upcoming};
use mm_trainer::churn::model::{ChurnFitConfig, ChurnModel, FitChurnModel};
use mm_trainer::stats::auc;
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const H: i64 = 3_600_000;

fn outcome(rng: &mut ChaCha8Rng) -> Outcome3 {
    match rng.random_range(0..10) {
        0..4 => Outcome3::Win,
        4..6 => Outcome3::Draw,
        _ => Outcome3::Loss,
    }
}

/// (rows, labels, true probabilities, players) for `players` players of 25 matches each.
fn data(players: u32, seed: u64) -> (Vec<f64>, Vec<bool>, Vec<f64>, Vec<u32>) {
    let spec = FeatureSpec::default();
    let names = spec.names();
    let col = |n: &str| names.iter().position(|x| x == n).unwrap();
    let (now_loss, now_win, last1_win, games, n8h) = (
        col("now_loss"),
        col("now_win"),
        col("last1_win"),
        col("log_games"),
        col("matches_last_8h"),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut x, mut y, mut truth, mut group) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for p in 0..players {
        let mut hist: Vec<Played> = Vec::new();
        let mut t = 0i64;
        for _ in 0..25 {
            t += rng.random_range(H / 4..30 * H);
            let o = outcome(&mut rng);
            let now = Upcoming {
                start_ms: t,
                party: rng.random_bool(0.3),
                skill_percentile: rng.random_range(0.0..100.0),
            };
            let start = x.len();
            spec.push_row(&hist, &now, o, &mut x);
            let r = &x[start..];
            let logit = -0.8 + 0.9 * r[now_loss]
                - 0.6 * r[now_win]
                - 0.4 * r[last1_win]
                - 0.3 * r[games]
                - 0.15 * r[n8h];
            let pt = 1.0 / (1.0 + (-logit).exp());
            truth.push(pt);
            y.push(rng.random_bool(pt));
            group.push(p);
            hist.push(Played {
                start_ms: t,
                outcome: o,
                score_diff: rng.random_range(-5.0..5.0),
                perf_rank: rng.random_range(0.0..1.0),
                blowout_loss: false,
            });
        }
    }
    (x, y, truth, group)
}

#[test]
fn calibrated_against_the_truth_and_ranks_as_the_truth_allows() {
    let spec = FeatureSpec::default();
    let k = spec.names().len();
    let (x, y, _, g) = data(800, 7);
    let x = Array2::from_shape_vec((y.len(), k), x).unwrap();
    let cfg = ChurnFitConfig {
        c_grid: vec![1e-4, 1e-2, 1.0],
        ..ChurnFitConfig::default()
    };
    let m = ChurnModel::fit(spec, x.view(), &y, &g, &cfg).unwrap();
    assert_eq!(m.grid.len(), 3);
    assert!(
        m.grid
            .iter()
            .all(|p| p.cv_log_loss.is_finite() && p.cv_auc > 0.5)
    );

    // New players from the same world.
    let (xt, yt, truth, _) = data(1200, 8);
    let preds: Vec<f64> = xt.chunks(k).map(|r| m.predict(r)).collect();
    let mae = preds
        .iter()
        .zip(&truth)
        .map(|(a, b)| (a - b).abs())
        .sum::<f64>()
        / truth.len() as f64;
    let (a_model, a_truth) = (auc(&preds, &yt), auc(&truth, &yt));
    eprintln!(
        "C {}; mean |model - truth| {mae:.4}; AUC model {a_model:.4}, truth {a_truth:.4}; grid {:?}",
        m.c, m.grid
    );
    assert!(mae < 0.02, "{mae}");
    assert!(a_model > a_truth - 0.01, "{a_model} vs {a_truth}");

    // Counterfactual outcomes: a loss raises churn, a win lowers it, as in the truth.
    let [w, d, l] = m.counterfactual(&xt[..k]);
    assert!(w < d && d < l, "{w} {d} {l}");
}

/// The cross-validation's looser stop (`cv_tolerance_per_row`) ranks the penalties as a
/// tight one does: over several worlds, the same chosen C, the same model (the final fit runs
/// to the tight tolerance either way) and cross-validated log-losses within 1e-5.
#[test]
fn the_cross_validations_looser_stop_chooses_as_a_tight_one() {
    let spec = FeatureSpec::default();
    let k = spec.names().len();
    for seed in 0..4 {
        let (x, y, _, g) = data(600, 40 + seed);
        let x = Array2::from_shape_vec((y.len(), k), x).unwrap();
        let loose = ChurnFitConfig {
            c_grid: vec![1e-4, 1e-3, 1e-2, 1e-1, 1.0],
            ..ChurnFitConfig::default()
        };
        assert!(loose.cv_tolerance_per_row > loose.tolerance_per_row);
        let tight = ChurnFitConfig {
            cv_tolerance_per_row: loose.tolerance_per_row,
            ..loose.clone()
        };
        let a = ChurnModel::fit(spec, x.view(), &y, &g, &loose).unwrap();
        let b = ChurnModel::fit(spec, x.view(), &y, &g, &tight).unwrap();
        assert_eq!(a.c, b.c, "seed {seed}: {:?} against {:?}", a.grid, b.grid);
        assert_eq!(a.coef, b.coef);
        for (p, q) in a.grid.iter().zip(&b.grid) {
            assert!(
                (p.cv_log_loss - q.cv_log_loss).abs() < 1e-5,
                "seed {seed}: {p:?} against {q:?}"
            );
        }
    }
}

#[test]
fn refuses_bad_shapes_and_single_class() {
    let spec = FeatureSpec {
        history: 1,
        data_start_ms: None,
        outcome_interactions: 1,
        past_churn_horizon_ms: None,
        outcome_pattern: 0,
    };
    let k = spec.names().len();
    let x = Array2::<f64>::zeros((4, k));
    let e = ChurnModel::fit(
        spec,
        x.view(),
        &[true; 4],
        &[0, 1, 2, 3],
        &ChurnFitConfig::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("both classes"), "{e}");
    let e = ChurnModel::fit(
        spec,
        x.view(),
        &[true, false],
        &[0, 1],
        &ChurnFitConfig::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("labels"), "{e}");
}

/// The export's refit: at the chosen C on more rows, it is the fit a grid of that one C gives
/// on those rows (same coefficients), keeps the cross-validation that chose C, and on the same
/// rows it is the fit itself. More rows from the same world bring it closer to the truth.
#[test]
fn a_refit_at_the_chosen_c_is_the_fit_on_the_new_rows() {
    let spec = FeatureSpec::default();
    let k = spec.names().len();
    let (x, y, _, g) = data(300, 11);
    let x = Array2::from_shape_vec((y.len(), k), x).unwrap();
    let cfg = ChurnFitConfig {
        c_grid: vec![1e-3, 1e-1],
        ..ChurnFitConfig::default()
    };
    let m = ChurnModel::fit(spec, x.view(), &y, &g, &cfg).unwrap();
    let same = m.refit(x.view(), &y, &cfg).unwrap();
    assert_eq!(same, m);

    // Twice the players: the first 300 and 300 more.
    let (x2, y2, _, g2) = data(300, 12);
    let mut xa = x.clone().into_raw_vec_and_offset().0;
    xa.extend(&x2);
    let ya: Vec<bool> = y.iter().chain(&y2).copied().collect();
    let ga: Vec<u32> = g
        .iter()
        .copied()
        .chain(g2.iter().map(|p| p + 300))
        .collect();
    let xa = Array2::from_shape_vec((ya.len(), k), xa).unwrap();
    let r = m.refit(xa.view(), &ya, &cfg).unwrap();
    let one_c = ChurnFitConfig {
        c_grid: vec![m.c],
        ..cfg.clone()
    };
    let direct = ChurnModel::fit(spec, xa.view(), &ya, &ga, &one_c).unwrap();
    assert_eq!(
        (r.coef.clone(), r.intercept),
        (direct.coef, direct.intercept)
    );
    assert_eq!(
        (r.c, r.grid.clone(), r.cv_rows),
        (m.c, m.grid.clone(), m.cv_rows)
    );
    assert_eq!(r.rows, ya.len() as u64);
    assert_eq!(r.positives, ya.iter().filter(|&&v| v).count() as u64);

    // Held-out players: the refit on twice the rows is at least as close to the truth.
    let (xt, _, truth, _) = data(1000, 13);
    let mae = |m: &ChurnModel| {
        xt.chunks(k)
            .zip(&truth)
            .map(|(row, t)| (m.predict(row) - t).abs())
            .sum::<f64>()
            / truth.len() as f64
    };
    assert!(mae(&r) < mae(&m), "{} vs {}", mae(&r), mae(&m));
    assert!(m.refit(xa.view(), &ya[1..], &cfg).is_err());

    // Started from the model's own coefficients, the refit reaches the cold refit's optimum
    // (both run to a tight tolerance).
    let tight = ChurnFitConfig {
        tolerance_per_row: 1e-15,
        ..cfg.clone()
    };
    let r = m.refit(xa.view(), &ya, &tight).unwrap();
    let w = m.refit_warm(xa.view(), &ya, &tight).unwrap();
    assert_eq!((w.c, w.rows, w.positives), (r.c, r.rows, r.positives));
    let gap = xt
        .chunks(k)
        .map(|row| (w.predict(row) - r.predict(row)).abs())
        .fold(0.0, f64::max);
    assert!(gap < 1e-5, "largest prediction gap {gap}");
}
