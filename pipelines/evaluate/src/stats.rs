//! Summary statistics, Welch's t-test (the EOMM paper's significance test) and the paired
//! t-test (the policies run on the same pools with the same draws, so the per-round
//! differences carry less noise than the two samples apart).

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Running mean and variance (Welford), mergeable.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    pub n: u64,
    pub mean: f64,
    m2: f64,
}

impl Moments {
    pub fn push(&mut self, x: f64) {
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Sample variance (n - 1 denominator); `NaN` below two values.
    #[must_use]
    pub fn var(&self) -> f64 {
        if self.n < 2 {
            f64::NAN
        } else {
            self.m2 / (self.n - 1) as f64
        }
    }

    #[must_use]
    pub fn sd(&self) -> f64 {
        self.var().sqrt()
    }

    /// Standard error of the mean.
    #[must_use]
    pub fn se(&self) -> f64 {
        (self.var() / self.n as f64).sqrt()
    }

    /// The two-sided `level` confidence interval of the mean (Student t).
    #[must_use]
    pub fn ci(&self, level: f64) -> (f64, f64) {
        if self.n < 2 {
            return (f64::NAN, f64::NAN);
        }
        let t = t_quantile(level, (self.n - 1) as f64);
        let h = t * self.se();
        (self.mean - h, self.mean + h)
    }
}

/// The `(1 + level) / 2` quantile of Student's t with `df` degrees of freedom.
#[must_use]
pub fn t_quantile(level: f64, df: f64) -> f64 {
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) => t.inverse_cdf(0.5 + level / 2.0),
        Err(_) => f64::NAN,
    }
}

/// Welch's unequal-variance t-test of `a` against `b`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    /// `mean(a) - mean(b)`.
    pub diff: f64,
    pub t: f64,
    /// Welch-Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

#[must_use]
pub fn welch(a: &Moments, b: &Moments) -> Welch {
    let (va, vb) = (a.var() / a.n as f64, b.var() / b.n as f64);
    let diff = a.mean - b.mean;
    let se2 = va + vb;
    if se2.is_nan() || se2 <= 0.0 {
        // Identical constant samples: no evidence either way unless the means differ.
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return Welch {
            diff,
            t: if diff == 0.0 {
                0.0
            } else {
                diff.signum() * f64::INFINITY
            },
            df: f64::NAN,
            p,
        };
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (va * va / (a.n as f64 - 1.0) + vb * vb / (b.n as f64 - 1.0));
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(d) => 2.0 * d.cdf(-t.abs()),
        Err(_) => f64::NAN,
    };
    Welch { diff, t, df, p }
}

/// A paired t-test: whether the mean of per-round differences `a - b` is 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    /// Mean difference `a - b`.
    pub diff: f64,
    /// Standard deviation of the differences.
    pub sd: f64,
    pub t: f64,
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
}

/// The paired t-test of the differences summarised by `d`.
#[must_use]
pub fn paired(d: &Moments) -> Paired {
    let (diff, sd, df) = (d.mean, d.sd(), d.n as f64 - 1.0);
    let se = d.se();
    if se.is_nan() || se <= 0.0 {
        return Paired {
            diff,
            sd,
            t: if diff == 0.0 {
                0.0
            } else {
                diff.signum() * f64::INFINITY
            },
            df,
            p: if diff == 0.0 { 1.0 } else { 0.0 },
        };
    }
    let t = diff / se;
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(s) => 2.0 * s.cdf(-t.abs()),
        Err(_) => f64::NAN,
    };
    Paired { diff, sd, t, df, p }
}

/// Wilson score interval of a binomial proportion at 95%.
#[must_use]
pub fn wilson(successes: f64, n: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (f64::NAN, f64::NAN);
    }
    let z = 1.959_963_984_540_054;
    let p = successes / n;
    let d = 1.0 + z * z / n;
    let c = (p + z * z / (2.0 * n)) / d;
    let h = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt() / d;
    (c - h, c + h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(xs: &[f64]) -> Moments {
        let mut m = Moments::default();
        for &x in xs {
            m.push(x);
        }
        m
    }

    #[test]
    fn welch_matches_scipy() {
        // scipy 1.x: stats.ttest_ind(a, b, equal_var=False) gives
        // t = -3.5506372172573264, p = 0.0035640317626682316, df = 12.969704896107947.
        let a = of(&[19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0]);
        let b = of(&[20.2, 22.4, 21.8, 20.4, 22.0, 20.8]);
        let w = welch(&a, &b);
        assert!((w.t - -3.550_637_217_257_326_4).abs() < 1e-9, "{w:?}");
        assert!((w.df - 12.969_704_896_107_947).abs() < 1e-8, "{w:?}");
        assert!((w.p - 0.003_564_031_762_668_231_6).abs() < 1e-9, "{w:?}");
        assert!((w.diff - (a.mean - b.mean)).abs() < 1e-12);
    }

    #[test]
    fn paired_matches_scipy() {
        // scipy 1.x: stats.ttest_rel(a, b) gives t = -3.193548387096774,
        // p = 0.01094404532081518, df = 9; the differences' sd is 1.30707476620293.
        let a = [19.8, 20.4, 19.6, 17.8, 18.5, 18.9, 18.3, 18.9, 19.5, 22.0];
        let b = [20.2, 22.4, 21.8, 20.4, 22.0, 20.8, 19.1, 18.7, 20.0, 21.5];
        let d: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x - y).collect();
        let t = paired(&of(&d));
        assert!((t.t - -3.193_548_387_096_774).abs() < 1e-9, "{t:?}");
        assert!((t.p - 0.010_944_045_320_815_18).abs() < 1e-9, "{t:?}");
        assert!((t.sd - 1.307_074_766_202_93).abs() < 1e-9 && t.df == 9.0);
        assert!((t.diff - -1.32).abs() < 1e-12);
        // Identical samples: no evidence of a difference.
        assert_eq!(paired(&of(&[0.0; 5])).p, 1.0);
    }

    #[test]
    fn moments_match_two_pass() {
        let xs: Vec<f64> = (0..1000).map(|i| ((i * 37) % 101) as f64 * 0.5).collect();
        let m = of(&xs);
        let mean = xs.iter().sum::<f64>() / 1000.0;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 999.0;
        assert!((m.mean - mean).abs() < 1e-9);
        assert!((m.var() - var).abs() < 1e-9);
        let (lo, hi) = m.ci(0.95);
        assert!(lo < mean && mean < hi);
    }

    #[test]
    fn t_quantile_is_the_normal_one_for_large_df() {
        // 100,000 df: 1.959988 (scipy.stats.t.ppf(0.975, 1e5)).
        assert!((t_quantile(0.95, 1e5) - 1.959_988).abs() < 1e-5);
        // Student t, 10 df, 97.5%: 2.228139 (tables).
        assert!((t_quantile(0.95, 10.0) - 2.228_139).abs() < 1e-5);
    }
}
