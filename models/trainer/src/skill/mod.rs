//! Skill models: the raw skill of the Call of Duty paper and its percentile map.

pub mod percentile;
pub mod raw;
