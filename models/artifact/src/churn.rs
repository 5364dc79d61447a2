//! The churn model as exported (fitted by `mm-trainer`'s `churn::model`, which documents the
//! fit): `P(churn) = sigmoid(intercept + sum coef_k (x_k - mean_k) / scale_k)` over the
//! features of [`crate::features`].

use serde::{Deserialize, Serialize};

use crate::features::{FeatureSpec, Outcome3};
use crate::team::sigmoid;

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
    /// Rows the cross-validation used.
    pub cv_rows: u64,
}

impl ChurnModel {
    /// P(churn) of one feature row.
    #[must_use]
    pub fn predict(&self, row: &[f64]) -> f64 {
        standardised_logit(
            row.iter(),
            &self.mean,
            &self.scale,
            &self.coef,
            self.intercept,
        )
    }

    /// P(churn) for each hypothetical outcome of the upcoming match (win, draw, loss): the
    /// input EOMM needs. `row` is any row of the player's state; its outcome columns (the
    /// one-hot and the interactions with earlier outcomes) are replaced.
    #[must_use]
    pub fn counterfactual(&self, row: &[f64]) -> [f64; 3] {
        let mut r = row.to_vec();
        [Outcome3::Win, Outcome3::Draw, Outcome3::Loss].map(|o| {
            self.spec.set_outcome(&mut r, o);
            self.predict(&r)
        })
    }
}

/// `sigmoid(intercept + sum coef_k (x_k - mean_k) / sd_k)`.
#[must_use]
pub fn standardised_logit<'a>(
    row: impl Iterator<Item = &'a f64>,
    mean: &[f64],
    sd: &[f64],
    coef: &[f64],
    intercept: f64,
) -> f64 {
    let z: f64 = row
        .zip(mean)
        .zip(sd)
        .zip(coef)
        .map(|(((x, m), s), w)| (x - m) / s * w)
        .sum();
    sigmoid(intercept + z)
}
