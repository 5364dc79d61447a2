//! # mm-trainer: fitting the models
//!
//! Raw skill, percentiles, the team win model, the party adjustment and the churn model, each in
//! its own module with validated hyperparameters, fitted with ndarray and linfa.
//!
//! **Status:** the crate boundary exists; the models are the work of the skill and churn issues
//! and are not written yet (so the crate does not pull in linfa or ndarray yet).
