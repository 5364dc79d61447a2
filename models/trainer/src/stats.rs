//! Small statistics shared by the fits and their tests.

/// Spearman's rank correlation ρ of two equally long samples: Pearson's correlation of their
/// ranks, tied values sharing the mean of the ranks they span (as `scipy.stats.spearmanr`).
/// `NaN` for fewer than two values or a constant sample.
#[must_use]
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "spearman: samples of different lengths");
    let (ra, rb) = (average_ranks(a), average_ranks(b));
    let m = (a.len() as f64 + 1.0) / 2.0;
    let cov: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - m) * (y - m)).sum();
    let ss = |r: &[f64]| r.iter().map(|x| (x - m).powi(2)).sum::<f64>();
    cov / (ss(&ra) * ss(&rb)).sqrt()
}

/// Ranks from 1 to n, ties given the mean of the ranks they span (`scipy.stats.rankdata`'s
/// "average" method).
#[must_use]
pub fn average_ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&x, &y| v[x].total_cmp(&v[y]));
    let mut r = vec![0.0; v.len()];
    let mut lo = 0;
    while lo < idx.len() {
        let mut hi = lo + 1;
        while hi < idx.len() && v[idx[hi]] == v[idx[lo]] {
            hi += 1;
        }
        // Positions lo..hi hold ranks lo+1..=hi; their mean is (lo + 1 + hi) / 2.
        let rank = (lo + 1 + hi) as f64 / 2.0;
        for &i in &idx[lo..hi] {
            r[i] = rank;
        }
        lo = hi;
    }
    r
}

/// The logistic function (the artifact crate's, so trainer and services agree).
pub use mm_artifact::team::sigmoid;

/// Mean and (population) standard deviation; `NaN` for an empty sample.
#[must_use]
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    (
        mean,
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt(),
    )
}

/// Area under the ROC curve of scores `p` for labels `y` (Mann-Whitney, ties counted half).
/// `NaN` when one class is absent.
#[must_use]
pub fn auc(p: &[f64], y: &[bool]) -> f64 {
    assert_eq!(p.len(), y.len(), "auc: samples of different lengths");
    // Sum of the positives' ranks (ties averaged): the Mann-Whitney U of the positives.
    let rank_sum: f64 = average_ranks(p)
        .iter()
        .zip(y)
        .filter(|&(_, &pos)| pos)
        .map(|(r, _)| r)
        .sum();
    let np = y.iter().filter(|&&v| v).count() as f64;
    let nn = y.len() as f64 - np;
    if np == 0.0 || nn == 0.0 {
        return f64::NAN;
    }
    (rank_sum - np * (np + 1.0) / 2.0) / (np * nn)
}

/// The area under the ROC curve accumulated one prediction at a time in bounded memory:
/// predictions are counted in [`AucCounts::BINS`] equal-width bins of [0, 1], and two
/// predictions in one bin count as a tie (half). Equal to [`auc`] when no two different
/// predictions share a bin; otherwise off by at most the share of positive-negative pairs that
/// share a bin.
#[derive(Debug, Clone, PartialEq)]
pub struct AucCounts {
    pos: Vec<u64>,
    neg: Vec<u64>,
}

impl Default for AucCounts {
    fn default() -> Self {
        AucCounts {
            pos: vec![0; Self::BINS],
            neg: vec![0; Self::BINS],
        }
    }
}

impl AucCounts {
    pub const BINS: usize = 1 << 16;

    pub fn add(&mut self, p: f64, y: bool) {
        let b = ((p.clamp(0.0, 1.0) * Self::BINS as f64) as usize).min(Self::BINS - 1);
        if y {
            self.pos[b] += 1;
        } else {
            self.neg[b] += 1;
        }
    }

    pub fn merge(&mut self, o: &AucCounts) {
        for (a, b) in self.pos.iter_mut().zip(&o.pos) {
            *a += b;
        }
        for (a, b) in self.neg.iter_mut().zip(&o.neg) {
            *a += b;
        }
    }

    /// Predictions added.
    #[must_use]
    pub fn n(&self) -> u64 {
        self.pos.iter().sum::<u64>() + self.neg.iter().sum::<u64>()
    }

    /// Positives added.
    #[must_use]
    pub fn positives(&self) -> u64 {
        self.pos.iter().sum()
    }

    /// The AUC; `NaN` when one class is absent.
    #[must_use]
    pub fn auc(&self) -> f64 {
        let (mut below, mut credit) = (0.0, 0.0);
        for (&p, &n) in self.pos.iter().zip(&self.neg) {
            credit += p as f64 * (below + n as f64 / 2.0);
            below += n as f64;
        }
        let np = self.positives() as f64;
        credit / (np * below)
    }
}

/// Bins of the reliability curve and of the expected calibration error.
pub const CALIBRATION_BINS: usize = 10;

/// Scores of probabilistic predictions of a binary (or half-point) result, accumulated one
/// prediction at a time: log-loss, accuracy, Brier score and expected calibration error (ECE,
/// equal-width bins of the predicted probability, weighted by their counts).
///
/// The result `y` is 1, 0 or 1/2 (a draw, scored as half of each side: the log-loss is the
/// cross-entropy `-(y ln p + (1 - y) ln(1 - p))`, and a draw counts half a correct call).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BinaryScore {
    pub n: u64,
    log_loss: f64,
    brier: f64,
    correct: f64,
    /// Per bin: count, sum of predictions, sum of results.
    bins: [(u64, f64, f64); CALIBRATION_BINS],
}

impl Default for BinaryScore {
    fn default() -> Self {
        BinaryScore {
            n: 0,
            log_loss: 0.0,
            brier: 0.0,
            correct: 0.0,
            bins: [(0, 0.0, 0.0); CALIBRATION_BINS],
        }
    }
}

/// One point of a reliability curve.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ReliabilityBin {
    pub lo: f64,
    pub hi: f64,
    pub n: u64,
    pub mean_predicted: f64,
    pub observed: f64,
}

/// The summary of a [`BinaryScore`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BinaryMetrics {
    pub n: u64,
    pub log_loss: f64,
    pub accuracy: f64,
    pub brier: f64,
    pub ece: f64,
}

impl BinaryScore {
    /// Adds one prediction `p` (clamped to [1e-15, 1 - 1e-15] for the log-loss) of result `y`.
    pub fn add(&mut self, p: f64, y: f64) {
        let q = p.clamp(1e-15, 1.0 - 1e-15);
        self.n += 1;
        self.log_loss -= y * q.ln() + (1.0 - y) * (1.0 - q).ln();
        self.brier += (p - y).powi(2);
        self.correct += if p == 0.5 || y == 0.5 {
            0.5
        } else if (p > 0.5) == (y > 0.5) {
            1.0
        } else {
            0.0
        };
        let b = ((p * CALIBRATION_BINS as f64) as usize).min(CALIBRATION_BINS - 1);
        let bin = &mut self.bins[b];
        bin.0 += 1;
        bin.1 += p;
        bin.2 += y;
    }

    /// Adds another accumulator's predictions.
    pub fn merge(&mut self, o: &BinaryScore) {
        self.n += o.n;
        self.log_loss += o.log_loss;
        self.brier += o.brier;
        self.correct += o.correct;
        for (a, b) in self.bins.iter_mut().zip(&o.bins) {
            a.0 += b.0;
            a.1 += b.1;
            a.2 += b.2;
        }
    }

    /// The means; all `NaN` when nothing was scored.
    #[must_use]
    pub fn metrics(&self) -> BinaryMetrics {
        let n = self.n as f64;
        let ece = self
            .bins
            .iter()
            .map(|&(_, sp, sy)| (sp - sy).abs())
            .sum::<f64>()
            / n;
        BinaryMetrics {
            n: self.n,
            log_loss: self.log_loss / n,
            accuracy: self.correct / n,
            brier: self.brier / n,
            ece,
        }
    }

    /// The reliability curve: per non-empty bin, the mean prediction and the observed rate.
    #[must_use]
    pub fn reliability(&self) -> Vec<ReliabilityBin> {
        let w = 1.0 / CALIBRATION_BINS as f64;
        self.bins
            .iter()
            .enumerate()
            .filter(|(_, b)| b.0 > 0)
            .map(|(k, &(c, sp, sy))| ReliabilityBin {
                lo: k as f64 * w,
                hi: (k + 1) as f64 * w,
                n: c,
                mean_predicted: sp / c as f64,
                observed: sy / c as f64,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotone_is_one_and_reversed_is_minus_one() {
        let a = [1.0, 5.0, 2.0, 9.0];
        assert!((spearman(&a, &[10.0, 50.0, 20.0, 90.0]) - 1.0).abs() < 1e-12);
        assert!((spearman(&a, &[-1.0, -5.0, -2.0, -9.0]) + 1.0).abs() < 1e-12);
        // Hand case: ranks (0, 1, 2) vs (0, 2, 1): 1 - 6 * 2 / (3 * 8) = 0.5.
        assert!((spearman(&[1.0, 2.0, 3.0], &[1.0, 3.0, 2.0]) - 0.5).abs() < 1e-12);
    }

    /// Tied data against scipy 1.17 (`scipy.stats.spearmanr(a, b).statistic` and
    /// `scipy.stats.rankdata(a)`, run on these exact lists).
    #[test]
    fn ties_take_average_ranks_as_scipy() {
        let a = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 7.0, 0.5, 2.0, 9.0];
        let b = [3.0, 1.0, 1.0, 4.0, 4.0, 2.0, 5.0, 0.0, 1.0, 1.0];
        assert_eq!(
            average_ranks(&a),
            vec![2.0, 4.0, 4.0, 7.0, 7.0, 7.0, 9.0, 1.0, 4.0, 10.0]
        );
        assert!((spearman(&a, &b) - 0.520_924_558_421_099_3).abs() < 1e-12);
        let (c, d) = ([1.0, 1.0, 1.0, 2.0, 2.0], [5.0, 6.0, 7.0, 8.0, 8.0]);
        assert!((spearman(&c, &d) - 0.888_523_316_638_638_6).abs() < 1e-12);
        // Tie order does not matter: the input order of tied values changes nothing.
        let (c2, d2) = ([1.0, 1.0, 1.0, 2.0, 2.0], [7.0, 5.0, 6.0, 8.0, 8.0]);
        assert!((spearman(&c2, &d2) - spearman(&c, &d)).abs() < 1e-12);
    }

    /// Hand case: positives scored 0.9 and 0.4, negatives 0.4 and 0.1: of the 4 pairs, 3 are
    /// ordered right and 1 is tied, so 3.5 / 4.
    #[test]
    fn auc_by_hand() {
        let p = [0.9, 0.4, 0.4, 0.1];
        let y = [true, true, false, false];
        assert!((auc(&p, &y) - 0.875).abs() < 1e-12);
        assert!(auc(&[0.1, 0.2], &[true, true]).is_nan());
        let mut c = AucCounts::default();
        for (&p, &y) in p.iter().zip(&y) {
            c.add(p, y);
        }
        assert!((c.auc() - 0.875).abs() < 1e-12);
    }

    /// Hand case: predictions 0.8 (won), 0.3 (lost), 0.6 (lost), 0.5 (drawn).
    #[test]
    fn binary_scores_by_hand() {
        let mut s = BinaryScore::default();
        for (p, y) in [(0.8, 1.0), (0.3, 0.0), (0.6, 0.0), (0.5, 0.5)] {
            s.add(p, y);
        }
        let m = s.metrics();
        let ll = -(0.8f64.ln() + 0.7f64.ln() + 0.4f64.ln() + 0.5f64.ln()) / 4.0;
        assert!((m.log_loss - ll).abs() < 1e-12);
        assert!((m.brier - (0.04 + 0.09 + 0.36 + 0.0) / 4.0).abs() < 1e-12);
        assert!((m.accuracy - 2.5 / 4.0).abs() < 1e-12);
        // Bins: [0.3] -> 0.3 off, [0.5] -> 0, [0.6] -> 0.6 off, [0.8] -> 0.2 off.
        assert!((m.ece - (0.3 + 0.0 + 0.6 + 0.2) / 4.0).abs() < 1e-12);
        assert_eq!(s.reliability().len(), 4);
        let mut t = BinaryScore::default();
        t.merge(&s);
        assert_eq!(t, s);
    }

    proptest::proptest! {
        /// Binned AUC against the exact one: equal on predictions that fall in distinct bins
        /// (or tie exactly), and within the share of pairs sharing a bin otherwise.
        #[test]
        fn binned_auc_matches_the_exact_one(
            rows in proptest::collection::vec((0.0f64..1.0, proptest::bool::ANY), 2..400),
            on_grid in proptest::bool::ANY,
        ) {
            let p: Vec<f64> = rows
                .iter()
                .map(|(p, _)| if on_grid { (p * 50.0).floor() / 50.0 + 1e-6 } else { *p })
                .collect();
            let y: Vec<bool> = rows.iter().map(|r| r.1).collect();
            let mut c = AucCounts::default();
            let mut halves = c.clone();
            let mid = p.len() / 2;
            for (k, (&p, &y)) in p.iter().zip(&y).enumerate() {
                if k < mid { c.add(p, y) } else { halves.add(p, y) }
            }
            c.merge(&halves);
            let exact = auc(&p, &y);
            if exact.is_nan() {
                proptest::prop_assert!(c.auc().is_nan());
            } else {
                let bin = |v: f64| (v * AucCounts::BINS as f64) as usize;
                let (np, nn) = (c.positives() as f64, (c.n() - c.positives()) as f64);
                let mut shared = 0.0;
                for i in 0..p.len() {
                    for j in 0..p.len() {
                        if y[i] && !y[j] && p[i] != p[j] && bin(p[i]) == bin(p[j]) {
                            shared += 1.0;
                        }
                    }
                }
                proptest::prop_assert!((c.auc() - exact).abs() <= shared / (np * nn) + 1e-12);
            }
        }
    }
}
