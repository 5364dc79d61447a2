//! Skill models: the raw skill of the Call of Duty paper, its percentile map, the team win model
//! with the party adjustment, and the rating-system baselines they are judged against.

pub mod baselines;
pub mod percentile;
pub mod perf;
pub mod raw;
pub mod team;
pub mod win;

#[cfg(test)]
mod update_follows_refit;
