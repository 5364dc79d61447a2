//! # mm-fit: fit jobs over the lake
//!
//! Each job replays the lake in time order through models of `mm-trainer` and writes what the
//! export step needs. [`fit_skill`] is the skill job:
//! - the raw skill: every match is a lobby compared on a performance metric ([`Metric`]);
//! - the team win model on the difference of team raw-skill sums, with draws and party terms,
//!   and the party adjustment it implies;
//! - the baselines (Elo, Glicko-2, TrueSkill, Weng-Lin), each tuned on the same window;
//! - one evaluation protocol for all of them ([`skill::replay`]): every prediction is made before the
//!   match is learned from, hyperparameters are chosen on a tuning window, and the reported
//!   figures come from a later scoring window.
//!
//! It writes per-player state, the percentile table, the team model, a metrics report and an
//! HTML report.

pub mod churn;
pub mod columns;
mod error;
pub mod export;
pub mod html;
pub mod skill;

pub use error::{FitError, input_err};
pub use skill::history::Metric;
pub use skill::report::{ModelScore, SkillReport};
pub use skill::{
    COD_SKILL_SD, MAX_TUNE_ROWS, MIN_LATEST_DECISIVE, SkillConfig, fit_skill, with_blowout,
};
