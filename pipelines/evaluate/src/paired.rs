//! An artifact's holdout scores ([`holdout`]), and two artifacts' on the same searches, and how
//! far apart they are ([`holdout_diff`]): each score's difference (candidate minus baseline) with a 95% interval from a paired bootstrap.
//!
//! The churn scores are resampled by player (a player's searches are drawn together: one
//! player's labels and predictions are not independent of each other), the win model's by
//! match. Both artifacts are scored on each resample's same draw, so what the interval measures
//! is the noise of the difference, which is smaller than either score's own.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::history::EvalHistory;
use crate::measures::{self, Scored, churn_preds, clamp_p, decile, win_preds};
use crate::results::{DiffCi, Holdout, HoldoutDiff};

/// Bootstrap resamples: the 2.5% and 97.5% points are then read from 25 draws either side.
pub const RESAMPLES: usize = 1000;

/// Churn predictions with their labels, each row's terms computed and the rows sorted once,
/// so that a weighted resample is a few sums and one pass for the AUC.
pub(crate) struct ChurnSet {
    p: Vec<f64>,
    y: Vec<bool>,
    /// Each row's log-loss and squared error, and its calibration bin.
    loss: Vec<f64>,
    sq: Vec<f64>,
    bin: Vec<u8>,
    /// Indices by increasing prediction.
    order: Vec<u32>,
    /// End (exclusive, into `order`) of each run of equal predictions.
    ties_end: Vec<u32>,
}

/// A churn model's scores on a (weighted) set of searches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ChurnScores {
    pub log_loss: f64,
    pub brier: f64,
    /// Expected calibration error over ten equal-width bins.
    pub ece: f64,
    /// Area under the ROC curve, ties counted half; `NaN` when one class is absent.
    pub auc: f64,
}

impl ChurnSet {
    pub(crate) fn new(p: Vec<f64>, y: Vec<bool>) -> Self {
        assert_eq!(
            p.len(),
            y.len(),
            "churn set: predictions and labels differ in length"
        );
        let mut order: Vec<u32> = (0..p.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| p[a as usize].total_cmp(&p[b as usize]));
        let mut ties_end = Vec::new();
        for k in 1..=order.len() {
            if k == order.len() || p[order[k] as usize] != p[order[k - 1] as usize] {
                ties_end.push(k as u32);
            }
        }
        let loss = p
            .iter()
            .zip(&y)
            .map(|(&p, &y)| {
                -if y {
                    clamp_p(p).ln()
                } else {
                    (1.0 - clamp_p(p)).ln()
                }
            })
            .collect();
        let sq = p
            .iter()
            .zip(&y)
            .map(|(&p, &y)| (p - f64::from(u8::from(y))).powi(2))
            .collect();
        let bin = p.iter().map(|&p| decile(p) as u8).collect();
        ChurnSet {
            p,
            y,
            loss,
            sq,
            bin,
            order,
            ties_end,
        }
    }

    /// The scores with each search weighted (`None`: every weight 1).
    pub(crate) fn scores(&self, w: Option<&[f64]>) -> ChurnScores {
        let wt = |i: usize| w.map_or(1.0, |w| w[i]);
        let (mut total, mut ll, mut brier) = (0.0, 0.0, 0.0);
        let mut bins = [(0.0, 0.0); 10];
        for i in 0..self.p.len() {
            let w = wt(i);
            if w == 0.0 {
                continue;
            }
            total += w;
            ll += w * self.loss[i];
            brier += w * self.sq[i];
            let b = &mut bins[self.bin[i] as usize];
            b.0 += w * self.p[i];
            if self.y[i] {
                b.1 += w;
            }
        }
        let (mut num, mut pos, mut neg) = (0.0, 0.0, 0.0);
        let mut start = 0;
        for &end in &self.ties_end {
            let (mut tp, mut tn) = (0.0, 0.0);
            for &i in &self.order[start..end as usize] {
                let i = i as usize;
                if self.y[i] {
                    tp += wt(i);
                } else {
                    tn += wt(i);
                }
            }
            num += tp * (neg + 0.5 * tn);
            pos += tp;
            neg += tn;
            start = end as usize;
        }
        ChurnScores {
            log_loss: ll / total,
            brier: brier / total,
            ece: bins.iter().map(|b| (b.0 - b.1).abs()).sum::<f64>() / total,
            auc: if pos > 0.0 && neg > 0.0 {
                num / (pos * neg)
            } else {
                f64::NAN
            },
        }
    }
}

/// The 2.5% and 97.5% points of a sample (linear between order statistics), `NaN`s left out.
fn percentile_ci(mut xs: Vec<f64>) -> (f64, f64) {
    xs.retain(|x| !x.is_nan());
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    xs.sort_unstable_by(f64::total_cmp);
    let at = |q: f64| {
        let r = q * (xs.len() - 1) as f64;
        let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
        xs[lo] + (xs[hi] - xs[lo]) * (r - lo as f64)
    };
    (at(0.025), at(0.975))
}

/// Draws `n` units with replacement: how many times each was drawn.
fn draw_counts(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n];
    for _ in 0..n {
        c[rng.random_range(0..n)] += 1.0;
    }
    c
}

/// A weighted mean.
fn weighted_mean(x: &[f64], w: Option<&[f64]>) -> f64 {
    let (s, t) = x.iter().enumerate().fold((0.0, 0.0), |(s, t), (i, &v)| {
        let w = w.map_or(1.0, |w| w[i]);
        (s + w * v, t + w)
    });
    s / t
}

/// The churn and win models scored against what happened in the window.
pub(crate) fn holdout(h: &EvalHistory, sc: &Scored) -> Holdout {
    let preds: Vec<(f64, bool)> = churn_preds(h, sc)
        .into_iter()
        .map(|(p, y, _)| (p, y))
        .collect();
    let n = preds.len() as f64;
    let (p, y): (Vec<f64>, Vec<bool>) = preds.iter().copied().unzip();
    let scores = ChurnSet::new(p, y).scores(None);
    let mean_p = preds.iter().map(|p| p.0).sum::<f64>() / n;
    let obs = preds.iter().filter(|p| p.1).count() as f64 / n;
    let wins = win_preds(h, sc);
    let wn = wins.len() as f64;
    let wll = wins.iter().map(|w| -clamp_p(w.0).ln()).sum::<f64>();
    let wacc = wins.iter().filter(|w| w.1).count() as f64;
    Holdout {
        artifact: sc.label.clone(),
        version: sc.version.clone(),
        churn_rows: preds.len() as u64,
        churn_log_loss: scores.log_loss,
        churn_brier: scores.brier,
        churn_ece: scores.ece,
        churn_auc: scores.auc,
        churn_mean_predicted: mean_p,
        churn_observed: obs,
        win_matches: wn as u64,
        win_log_loss: wll / wn,
        win_accuracy: wacc / wn,
        new_players: sc.new_players,
    }
}

/// The candidate's holdout scores against the baseline's on the same searches and matches.
pub(crate) fn holdout_diff(
    h: &EvalHistory,
    candidate: &Scored,
    baseline: &Scored,
    resamples: usize,
    seed: u64,
) -> HoldoutDiff {
    let ca = measures::churn_preds(h, candidate);
    let cb = measures::churn_preds(h, baseline);
    // Both come from the same searchers in the same order: one label and player per row.
    let y: Vec<bool> = ca.iter().map(|r| r.1).collect();
    let mut players: Vec<u32> = ca.iter().map(|r| r.2).collect();
    players.sort_unstable();
    players.dedup();
    let cluster: Vec<usize> = ca
        .iter()
        .map(|r| players.binary_search(&r.2).unwrap_or_default())
        .collect();
    let win_ll = |s: &Scored| -> Vec<f64> {
        measures::win_preds(h, s)
            .iter()
            .map(|w| -clamp_p(w.0).ln())
            .collect()
    };
    let sample = Paired {
        churn: [
            ChurnSet::new(ca.iter().map(|r| r.0).collect(), y.clone()),
            ChurnSet::new(cb.iter().map(|r| r.0).collect(), y),
        ],
        cluster,
        clusters: players.len(),
        win_loss: [win_ll(candidate), win_ll(baseline)],
    };
    let [ll, brier, ece, auc, win] = sample.bootstrap(resamples, seed);
    HoldoutDiff {
        candidate: candidate.version.clone(),
        baseline: baseline.version.clone(),
        resamples,
        players: players.len() as u64,
        churn_rows: ca.len() as u64,
        win_matches: sample.win_loss[0].len() as u64,
        churn_log_loss: ll,
        churn_brier: brier,
        churn_ece: ece,
        churn_auc: auc,
        win_log_loss: win,
    }
}

/// Two models' predictions of the same searches and matches.
struct Paired {
    /// Candidate's and baseline's churn predictions, row for row.
    churn: [ChurnSet; 2],
    /// Each churn row's player, `0..clusters`.
    cluster: Vec<usize>,
    clusters: usize,
    /// Candidate's and baseline's log-loss of each match's real result.
    win_loss: [Vec<f64>; 2],
}

impl Paired {
    /// Churn log-loss, Brier, ECE, AUC and the win log-loss of both models under weights.
    fn figures(&self, cw: Option<&[f64]>, mw: Option<&[f64]>) -> [[f64; 5]; 2] {
        [0, 1].map(|k| {
            let c = self.churn[k].scores(cw);
            [
                c.log_loss,
                c.brier,
                c.ece,
                c.auc,
                weighted_mean(&self.win_loss[k], mw),
            ]
        })
    }

    /// Each figure's difference, candidate minus baseline, with its bootstrap interval.
    fn bootstrap(&self, resamples: usize, seed: u64) -> [DiffCi; 5] {
        let point = self.figures(None, None);
        let diffs: Vec<[f64; 5]> = (0..resamples)
            .into_par_iter()
            .map(|r| {
                let mut rng = ChaCha8Rng::seed_from_u64(measures::mix(seed, 0xB007, r as u64));
                let counts = draw_counts(&mut rng, self.clusters);
                let cw: Vec<f64> = self.cluster.iter().map(|&c| counts[c]).collect();
                let mw = draw_counts(&mut rng, self.win_loss[0].len());
                let [a, b] = self.figures(Some(&cw), Some(&mw));
                std::array::from_fn(|i| a[i] - b[i])
            })
            .collect();
        std::array::from_fn(|i| DiffCi {
            candidate: point[0][i],
            baseline: point[1][i],
            diff: point[0][i] - point[1][i],
            ci95: percentile_ci(diffs.iter().map(|d| d[i]).collect()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::Rng;

    fn rows(seed: u64, n: usize, levels: u32) -> (Vec<f64>, Vec<bool>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                // Coarse predictions make ties; labels follow the predictions loosely.
                let p = f64::from(rng.random_range(0..=levels)) / f64::from(levels);
                (p, rng.random::<f64>() < 0.3 + 0.4 * p)
            })
            .unzip()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Unit weights give the trainer's rank AUC, and integer weights give the scores of the
        /// rows repeated that many times (the bootstrap's meaning of a weight).
        #[test]
        fn weights_are_repeated_rows(seed in 0u64..10_000, n in 2usize..120, levels in 1u32..12) {
            let (p, y) = rows(seed, n, levels);
            let set = ChurnSet::new(p.clone(), y.clone());
            let s = set.scores(None);
            let reference = mm_trainer::stats::auc(&p, &y);
            prop_assert!(s.auc == reference || (s.auc.is_nan() && reference.is_nan()));
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 7);
            let w: Vec<f64> = (0..n).map(|_| f64::from(rng.random_range(0..4u8))).collect();
            prop_assume!(w.iter().sum::<f64>() > 0.0);
            let (mut pe, mut ye) = (Vec::new(), Vec::new());
            for i in 0..n {
                for _ in 0..w[i] as usize {
                    pe.push(p[i]);
                    ye.push(y[i]);
                }
            }
            let a = set.scores(Some(&w));
            let b = ChurnSet::new(pe.clone(), ye.clone()).scores(None);
            for (x, r) in [(a.log_loss, b.log_loss), (a.brier, b.brier), (a.ece, b.ece)] {
                prop_assert!((x - r).abs() < 1e-12, "{x} vs {r}");
            }
            let r = mm_trainer::stats::auc(&pe, &ye);
            prop_assert!((a.auc - r).abs() < 1e-12 || (a.auc.is_nan() && r.is_nan()));
        }
    }

    #[test]
    fn hand_worked_scores() {
        // p = 0.2 (no), 0.2 (yes), 0.8 (yes), 0.9 (no).
        let set = ChurnSet::new(vec![0.2, 0.2, 0.8, 0.9], vec![false, true, true, false]);
        let s = set.scores(None);
        // Positives 0.2, 0.8 against negatives 0.2, 0.9: pairs (0.2,0.2) half, (0.2,0.9) 0,
        // (0.8,0.2) 1, (0.8,0.9) 0: 1.5 / 4.
        assert!((s.auc - 0.375).abs() < 1e-15);
        let ll = -((0.8f64).ln() + (0.2f64).ln() + (0.8f64).ln() + (0.1f64).ln()) / 4.0;
        assert!((s.log_loss - ll).abs() < 1e-12);
        assert!((s.brier - (0.04 + 0.64 + 0.04 + 0.81) / 4.0).abs() < 1e-12);
        // Bins: 0.2 twice (predicted 0.4, observed 1), 0.8 (0.8, 1), 0.9 (0.9, 0).
        assert!((s.ece - (0.6 + 0.2 + 0.9) / 4.0).abs() < 1e-12);
    }

    #[test]
    fn percentiles_interpolate_and_skip_nan() {
        let xs: Vec<f64> = (0..=40).map(f64::from).chain([f64::NAN]).collect();
        assert_eq!(percentile_ci(xs), (1.0, 39.0));
        let (lo, hi) = percentile_ci(vec![f64::NAN]);
        assert!(lo.is_nan() && hi.is_nan());
    }

    #[test]
    fn draws_count_every_unit_drawn() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let c = draw_counts(&mut rng, 50);
        assert_eq!(c.iter().sum::<f64>(), 50.0);
        assert!(c.iter().all(|&x| x >= 0.0 && x.fract() == 0.0));
    }

    /// A sample of players drawn from a population: each player has a propensity, labels
    /// follow it, the candidate predicts it with a little noise and the baseline with more.
    fn population(seed: u64, players: usize) -> Paired {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut pa, mut pb, mut y, mut cluster) = (vec![], vec![], vec![], vec![]);
        for c in 0..players {
            let q: f64 = 0.05 + 0.6 * rng.random::<f64>();
            let bias_a = 0.05 * (rng.random::<f64>() - 0.5);
            let bias_b = 0.3 * (rng.random::<f64>() - 0.5);
            for _ in 0..rng.random_range(1..8) {
                y.push(rng.random::<f64>() < q);
                pa.push((q + bias_a).clamp(0.01, 0.99));
                pb.push((q + bias_b).clamp(0.01, 0.99));
                cluster.push(c);
            }
        }
        let wa: Vec<f64> = (0..players)
            .map(|_| 0.6 + 0.2 * rng.random::<f64>())
            .collect();
        let wb: Vec<f64> = wa
            .iter()
            .map(|x| x + 0.1 * (rng.random::<f64>() - 0.5))
            .collect();
        Paired {
            churn: [ChurnSet::new(pa, y.clone()), ChurnSet::new(pb, y)],
            cluster,
            clusters: players,
            win_loss: [wa, wb],
        }
    }

    /// The intervals cover the population's difference about 95% of the time: 100 samples of
    /// 300 players, against the differences on 100,000 players of the same population.
    #[test]
    fn intervals_cover_the_population_difference() {
        let truth = population(1, 100_000);
        let t = truth.figures(None, None);
        let mut covered = [0u32; 5];
        let trials = 100;
        for trial in 0..trials {
            let sample = population(1_000 + trial, 300);
            let cis = sample.bootstrap(200, trial);
            for (i, ci) in cis.iter().enumerate() {
                let d = t[0][i] - t[1][i];
                if ci.ci95.0 <= d && d <= ci.ci95.1 {
                    covered[i] += 1;
                }
            }
        }
        // ECE (index 2) is biased upwards in small samples, so its interval is not checked.
        for i in [0, 1, 3, 4] {
            let share = f64::from(covered[i]) / trials as f64;
            assert!((0.85..=1.0).contains(&share), "figure {i}: covered {share}");
        }
        // The candidate is the better model, and the intervals say so.
        let cis = population(7, 3_000).bootstrap(200, 7);
        assert!(cis[0].ci95.1 < 0.0, "log-loss {:?}", cis[0]);
        assert!(cis[3].ci95.0 > 0.0, "AUC {:?}", cis[3]);
    }

    #[test]
    fn a_model_against_itself_differs_by_nothing() {
        let mut p = population(3, 200);
        p.churn[1] = ChurnSet::new(p.churn[0].p.clone(), p.churn[0].y.clone());
        p.win_loss[1] = p.win_loss[0].clone();
        for ci in p.bootstrap(100, 1) {
            assert_eq!((ci.diff, ci.ci95), (0.0, (0.0, 0.0)));
        }
    }
}
