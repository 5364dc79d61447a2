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
    /// Churn after a close and after a blowout loss (absent before format 6): then both are
    /// the loss's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blowout: Option<BlowoutShift>,
}

/// How a loss's churn differs by whether it was a blowout: on a loss row the model's log-odds
/// `z` become `z + close` after a close loss and `z + close + blowout` after a blowout loss.
/// Fitted after the model, on its training rows that are losses, with `z` held fixed (an
/// offset), so the model itself is unchanged: `close` takes back the blowouts' share of the
/// loss coefficient, `blowout` is what a blowout adds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BlowoutShift {
    pub close: f64,
    pub blowout: f64,
    /// Loss rows it was fitted on, and how many were blowouts.
    pub losses: u64,
    pub blowouts: u64,
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

    /// [`Self::counterfactual`], and with a [`BlowoutShift`] the churn after a close and after a
    /// blowout loss.
    #[must_use]
    pub fn counterfactual_blowout(&self, row: &[f64]) -> ([f64; 3], Option<[f64; 2]>) {
        let plain = self.counterfactual(row);
        let split = self.blowout.map(|b| {
            let mut r = row.to_vec();
            self.spec.set_outcome(&mut r, Outcome3::Loss);
            let z = self.log_odds(&r);
            [sigmoid(z + b.close), sigmoid(z + b.close + b.blowout)]
        });
        (plain, split)
    }

    /// The log-odds of churn of one feature row: [`Self::predict`] before the logistic.
    #[must_use]
    pub fn log_odds(&self, row: &[f64]) -> f64 {
        self.intercept
            + row
                .iter()
                .zip(&self.mean)
                .zip(&self.scale)
                .zip(&self.coef)
                .map(|(((x, m), s), w)| (x - m) / s * w)
                .sum::<f64>()
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
