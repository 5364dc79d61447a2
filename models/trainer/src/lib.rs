//! # mm-trainer: fitting the models
//!
//! Raw skill, percentiles, the team win model, the party adjustment and the churn model, each in
//! its own module with validated hyperparameters.
//!
//! **Status:** [`skill::raw`] (the Call of Duty style raw skill) and [`skill::percentile`] (the
//! percentile map) are written. The team win model, the party adjustment and the churn model are
//! not written yet; they bring linfa and ndarray in with them.
//!
//! ```
//! use mm_trainer::skill::raw::{RawSkill, RawSkillParams};
//! let mut model = RawSkill::new(RawSkillParams::default().check().unwrap());
//! // A lobby of three players and their performance metric (higher is better).
//! model.update(&[(0, 3.0), (1, 1.0), (2, 0.5)]);
//! assert!(model.skill(0) > 0.0 && model.skill(2) < 0.0);
//! ```

pub mod skill;
pub mod stats;
