//! The churn model: L2 logistic regression (linfa-logistic) on standardised features, with the
//! penalty chosen by k-fold cross-validation whose folds are grouped by player (no player is in
//! training and validation at once).
//!
//! The penalty follows scikit-learn's convention: the loss is `C * sum of log-losses + |w|^2 / 2`,
//! which is linfa's `sum of log-losses + alpha |w|^2 / 2` with `alpha = 1 / C`. The intercept is
//! not penalised.

use ndarray::{Array1, Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use crate::churn::features::{FeatureSpec, Outcome3};
use crate::logit::{LogitFit, fit_logistic};
use crate::stats::{BinaryScore, auc, sigmoid};

/// How to fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChurnFitConfig {
    /// Inverse L2 strengths to try (scikit-learn's `C`).
    pub c_grid: Vec<f64>,
    pub folds: usize,
    pub max_iterations: u64,
    /// Gradient tolerance per training row: linfa's loss is a sum over rows, so its tolerance
    /// is this times the row count (scikit-learn's `tol` on its mean loss).
    pub gradient_tolerance: f64,
}

impl Default for ChurnFitConfig {
    fn default() -> Self {
        ChurnFitConfig {
            c_grid: vec![1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0],
            folds: 5,
            max_iterations: 500,
            gradient_tolerance: 1e-4,
        }
    }
}

/// Why a churn fit failed.
#[derive(Debug, thiserror::Error)]
pub enum ChurnFitError {
    #[error("churn model: {0}")]
    Data(String),
    #[error("churn model: {0}")]
    Linfa(String),
}

/// Cross-validation result of one `C`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GridPoint {
    pub c: f64,
    pub cv_log_loss: f64,
    pub cv_auc: f64,
}

/// The fitted model: `P(churn) = sigmoid(intercept + sum coef_k (x_k - mean_k) / scale_k)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChurnModel {
    pub spec: FeatureSpec,
    pub feature_names: Vec<String>,
    pub mean: Vec<f64>,
    pub scale: Vec<f64>,
    pub coef: Vec<f64>,
    pub intercept: f64,
    pub c: f64,
    pub grid: Vec<GridPoint>,
    pub rows: u64,
    pub positives: u64,
}

/// Column means and standard deviations (1 for a constant column).
fn standardiser(x: ArrayView2<'_, f64>) -> (Vec<f64>, Vec<f64>) {
    let n = x.nrows() as f64;
    let mut mean = Vec::with_capacity(x.ncols());
    let mut sd = Vec::with_capacity(x.ncols());
    for col in x.columns() {
        let m = col.sum() / n;
        let v = col.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n;
        mean.push(m);
        sd.push(if v > 1e-24 { v.sqrt() } else { 1.0 });
    }
    (mean, sd)
}

fn standardise(x: ArrayView2<'_, f64>, mean: &[f64], sd: &[f64]) -> Array2<f64> {
    let mut z = x.to_owned();
    for (k, mut col) in z.columns_mut().into_iter().enumerate() {
        col.mapv_inplace(|v| (v - mean[k]) / sd[k]);
    }
    z
}

/// Fits on standardised rows; returns `(coef, intercept)` for the class `true`.
fn logistic(
    z: &Array2<f64>,
    y: Array1<bool>,
    c: f64,
    cfg: &ChurnFitConfig,
) -> Result<(Vec<f64>, f64), ChurnFitError> {
    let how = LogitFit {
        alpha: 1.0 / c,
        intercept: true,
        max_iterations: cfg.max_iterations,
        gradient_tolerance: Some(cfg.gradient_tolerance * z.nrows() as f64),
    };
    let (w, b) = fit_logistic(z, y, &how).map_err(ChurnFitError::Linfa)?;
    Ok((w.to_vec(), b))
}

fn fold_of(group: u32, folds: usize) -> usize {
    // A fixed mix of the group id, so folds do not follow id order.
    let h = u64::from(group)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_right(29);
    (h % folds as u64) as usize
}

impl ChurnModel {
    /// Fits on `x` (rows of `spec`'s features), labels `y` and player `groups`.
    pub fn fit(
        spec: FeatureSpec,
        x: ArrayView2<'_, f64>,
        y: &[bool],
        groups: &[u32],
        cfg: &ChurnFitConfig,
    ) -> Result<ChurnModel, ChurnFitError> {
        let names = spec.names();
        if x.ncols() != names.len() || x.nrows() != y.len() || y.len() != groups.len() {
            return Err(ChurnFitError::Data(format!(
                "{} rows x {} columns, {} labels, {} groups; the spec has {} features",
                x.nrows(),
                x.ncols(),
                y.len(),
                groups.len(),
                names.len()
            )));
        }
        let pos = y.iter().filter(|&&v| v).count();
        if pos == 0 || pos == y.len() {
            return Err(ChurnFitError::Data(format!(
                "{pos} of {} rows churn: both classes are needed",
                y.len()
            )));
        }
        if cfg.folds < 2
            || cfg.c_grid.is_empty()
            || cfg.c_grid.iter().any(|c| !c.is_finite() || *c <= 0.0)
        {
            return Err(ChurnFitError::Data(
                "at least 2 folds and a grid of positive C values".into(),
            ));
        }
        let fold: Vec<usize> = groups.iter().map(|&g| fold_of(g, cfg.folds)).collect();
        let mut grid = Vec::new();
        for &c in &cfg.c_grid {
            let mut score = BinaryScore::default();
            let (mut preds, mut labels) = (Vec::new(), Vec::new());
            for f in 0..cfg.folds {
                let (tr, va): (Vec<usize>, Vec<usize>) = (0..y.len()).partition(|&i| fold[i] != f);
                if va.is_empty() || tr.is_empty() {
                    continue;
                }
                let xt = x.select(ndarray::Axis(0), &tr);
                let yt: Array1<bool> = tr.iter().map(|&i| y[i]).collect();
                if yt.iter().all(|&v| v) || yt.iter().all(|&v| !v) {
                    continue;
                }
                let (mean, sd) = standardiser(xt.view());
                let (w, b) = logistic(&standardise(xt.view(), &mean, &sd), yt, c, cfg)?;
                let xv = standardise(x.select(ndarray::Axis(0), &va).view(), &mean, &sd);
                for (r, &i) in xv.rows().into_iter().zip(&va) {
                    let p = sigmoid(b + r.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>());
                    score.add(p, f64::from(u8::from(y[i])));
                    preds.push(p);
                    labels.push(y[i]);
                }
            }
            grid.push(GridPoint {
                c,
                cv_log_loss: score.metrics().log_loss,
                cv_auc: auc(&preds, &labels),
            });
        }
        let best = grid
            .iter()
            .filter(|g| g.cv_log_loss.is_finite())
            .min_by(|a, b| a.cv_log_loss.total_cmp(&b.cv_log_loss))
            .copied()
            .ok_or_else(|| ChurnFitError::Data("no fold could be fitted".into()))?;
        let (mean, scale) = standardiser(x);
        let yy: Array1<bool> = y.iter().copied().collect();
        let (coef, intercept) = logistic(&standardise(x, &mean, &scale), yy, best.c, cfg)?;
        Ok(ChurnModel {
            spec,
            feature_names: names,
            mean,
            scale,
            coef,
            intercept,
            c: best.c,
            grid,
            rows: y.len() as u64,
            positives: pos as u64,
        })
    }

    /// P(churn) of one feature row.
    #[must_use]
    pub fn predict(&self, row: &[f64]) -> f64 {
        let z: f64 = row
            .iter()
            .zip(&self.mean)
            .zip(&self.scale)
            .zip(&self.coef)
            .map(|(((x, m), s), w)| (x - m) / s * w)
            .sum();
        sigmoid(self.intercept + z)
    }

    /// P(churn) for each hypothetical outcome of the upcoming match (win, draw, loss): the
    /// input EOMM needs. `row` is any row of the player's state; its outcome columns are
    /// replaced.
    #[must_use]
    pub fn counterfactual(&self, row: &[f64]) -> [f64; 3] {
        let cols = self.spec.outcome_columns();
        let mut r = row.to_vec();
        [Outcome3::Win, Outcome3::Draw, Outcome3::Loss].map(|o| {
            for (k, &c) in cols.iter().enumerate() {
                r[c] = f64::from(u8::from(k == o as usize));
            }
            self.predict(&r)
        })
    }
}
