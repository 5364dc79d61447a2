//! The churn model of the EOMM paper: features and label ([`features`]) and the
//! cross-validated L2 logistic regression with counterfactual outcomes ([`model`]). Building
//! the features from the lake, `mm fit churn` and the calibration report are not written yet.

pub mod features;
pub mod model;
