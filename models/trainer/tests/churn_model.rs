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

/// The blowout shift against a known truth: loss rows whose churn log-odds are the fitted
/// model's plus -0.1 after a close loss and +0.5 more after a blowout recover both shifts; with
/// every log-odds 0 the shift is the closed form `logit(churn rate)` of each kind of loss.
#[test]
fn the_blowout_shift_recovers_known_shifts() {
    use mm_trainer::churn::model::fit_blowout_shift;
    use mm_trainer::stats::sigmoid;
    let spec = FeatureSpec::default();
    let k = spec.names().len();
    let (x, y, _, g) = data(800, 11);
    let x = Array2::from_shape_vec((y.len(), k), x).unwrap();
    let m = ChurnModel::fit(spec, x.view(), &y, &g, &ChurnFitConfig::default()).unwrap();
    assert!(m.blowout.is_none());
    // Relabel the loss rows from the model's own log-odds with the known shifts.
    let loss = spec.outcome_columns()[2];
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let (mut y2, mut blown) = (y.clone(), vec![false; y.len()]);
    // Six passes over the same loss rows: enough of them for a tight check.
    let rows: Vec<usize> = (0..y.len()).filter(|&r| x[[r, loss]] == 1.0).collect();
    let mut big_x = Vec::new();
    let (mut big_y, mut big_b) = (Vec::new(), Vec::new());
    for _ in 0..6 {
        for &r in &rows {
            let row = x.row(r);
            let z = m.predict(row.as_slice().unwrap());
            let z = (z / (1.0 - z)).ln();
            let b = rng.random_bool(0.25);
            let p = sigmoid(z - 0.1 + if b { 0.5 } else { 0.0 });
            big_x.extend(row.iter());
            big_y.push(rng.random_bool(p));
            big_b.push(b);
        }
    }
    let n = big_y.len();
    let bx = Array2::from_shape_vec((n, k), big_x).unwrap();
    let s = fit_blowout_shift(&m, bx.view(), &big_y, &big_b)
        .unwrap()
        .unwrap();
    eprintln!("{s:?} on {n} loss rows");
    assert_eq!(s.losses, n as u64);
    assert!((s.close + 0.1).abs() < 0.05, "{s:?}");
    assert!((s.blowout - 0.5).abs() < 0.1, "{s:?}");
    // Non-loss rows are not read: the whole table gives the same shift for its loss rows.
    for (r, b) in blown.iter_mut().enumerate() {
        *b = x[[r, loss]] == 1.0 && r % 4 == 0;
        if x[[r, loss]] != 1.0 {
            y2[r] = !y2[r];
        }
    }
    let whole = fit_blowout_shift(&m, x.view(), &y2, &blown)
        .unwrap()
        .unwrap();
    let only: Vec<usize> = rows.clone();
    let ox = Array2::from_shape_fn((only.len(), k), |(i, j)| x[[only[i], j]]);
    let oy: Vec<bool> = only.iter().map(|&r| y2[r]).collect();
    let ob: Vec<bool> = only.iter().map(|&r| blown[r]).collect();
    let part = fit_blowout_shift(&m, ox.view(), &oy, &ob).unwrap().unwrap();
    assert_eq!(whole, part);
    // The closed form: a model whose log-odds are 0 on every row.
    let zero = ChurnModel {
        coef: vec![0.0; k],
        intercept: 0.0,
        ..m.clone()
    };
    let s0 = fit_blowout_shift(&zero, ox.view(), &oy, &ob)
        .unwrap()
        .unwrap();
    let rate = |want: bool| {
        let (pos, all) = oy
            .iter()
            .zip(&ob)
            .filter(|(_, b)| **b == want)
            .fold((0.0, 0.0), |(p, a), (y, _)| {
                (p + f64::from(u8::from(*y)), a + 1.0)
            });
        let q: f64 = pos / all;
        (q / (1.0 - q)).ln()
    };
    assert!((s0.close - rate(false)).abs() < 1e-8, "{s0:?}");
    assert!((s0.close + s0.blowout - rate(true)).abs() < 1e-8, "{s0:?}");
    // The counterfactual reads it: close and blowout losses straddle the plain loss.
    let with = ChurnModel {
        blowout: Some(s),
        ..m.clone()
    };
    let r0 = x.row(rows[0]).to_vec();
    let (plain, split) = with.counterfactual_blowout(&r0);
    let [close, blow] = split.unwrap();
    let l0 = m.counterfactual(&r0)[2];
    assert_eq!(plain, m.counterfactual(&r0));
    assert_eq!(m.counterfactual_blowout(&r0), (plain, None));
    assert!(close < l0 && l0 < blow, "{close} {l0} {blow}");
}

/// The folds are fitted in parallel and merged in fold order: on one thread (the folds one after
/// another) and on two, the same grid and the same model to the bit.
#[test]
fn cross_validation_is_the_same_on_one_thread_as_on_two() {
    let spec = FeatureSpec::default();
    let k = spec.names().len();
    let (x, y, _, g) = data(400, 11);
    let x = Array2::from_shape_vec((y.len(), k), x).unwrap();
    let cfg = ChurnFitConfig {
        c_grid: vec![1e-3, 1e-1, 10.0],
        ..ChurnFitConfig::default()
    };
    let run = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| ChurnModel::fit(spec, x.view(), &y, &g, &cfg).unwrap())
    };
    let (one, two) = (run(1), run(2));
    let bits = |m: &ChurnModel| -> Vec<u64> {
        m.grid
            .iter()
            .flat_map(|p| [p.c, p.cv_log_loss, p.cv_auc])
            .chain(m.coef.iter().copied())
            .chain([m.intercept, m.c])
            .map(f64::to_bits)
            .collect()
    };
    assert_eq!(one.grid.len(), 3);
    assert_eq!(bits(&one), bits(&two));
}
