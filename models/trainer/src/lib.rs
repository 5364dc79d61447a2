//! # mm-trainer: fitting the models
//!
//! Raw skill, percentiles, the team win model, the party adjustment and the churn model, each in
//! its own module with validated hyperparameters.
//!
//! **Status:** [`skill::raw`] (the Call of Duty style raw skill), [`skill::percentile`] (the
//! percentile map), [`skill::team`] (the team win model, its draw model and the party
//! adjustment, fitted with linfa-logistic) and [`skill::baselines`] (Elo, Glicko-2, TrueSkill and
//! Weng-Lin through `skillratings`) are written. The churn model: [`churn::features`] (the
//! EOMM features, row at a time, and the censored label; the lake-scale version is the polars
//! query of `mm-fit`, tested against this one) and [`churn::model`] (L2 logistic regression
//! with the penalty chosen by player-grouped cross-validation, and counterfactual outcomes),
//! solved by [`logit::newton`] (Newton-CG on the Hessian of the whole table; linfa-logistic is
//! the reference in its tests and fits the small team models).
//!
//! ```
//! use mm_trainer::skill::raw::{RawSkill, RawSkillParams};
//! let mut model = RawSkill::new(RawSkillParams::default().check().unwrap());
//! // A lobby of three players and their performance metric (higher is better).
//! model.update(&[(0, 3.0), (1, 1.0), (2, 0.5)]);
//! assert!(model.skill(0) > 0.0 && model.skill(2) < 0.0);
//! ```

pub mod churn;
pub mod logit;
pub mod skill;
pub mod stats;
