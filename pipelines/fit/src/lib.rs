//! # mm-fit: fit jobs over the lake
//!
//! Each job replays the lake in time order through a model of `mm-trainer` and writes what the
//! export step needs. [`fit_skill`] is the raw-skill job: every match is a lobby compared on a
//! performance metric ([`Metric`]). Every prediction is scored *before* the update that uses
//! the match. It writes per-player state, the percentile table and a metrics report.
//!
//! **Status:** raw skill and percentiles. The team win model, the party adjustment, the rating
//! baselines and the HTML report of the skill issue are not written yet.

mod skill;

pub use skill::{FitError, Metric, SkillConfig, SkillReport, fit_skill};
