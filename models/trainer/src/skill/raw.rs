//! Raw skill as the Call of Duty paper describes it: the model and its update live in the
//! artifact crate ([`mm_artifact::skill::raw`], where the update is documented), so that a
//! service embedding the matcher updates skills with the very code the trainer replays.

pub use mm_artifact::skill::raw::{LobbySlot, PlayerSkill, RawSkill, RoleStats, update_lobby};
pub use mm_artifact::skill::{
    ParamError, ROLE_MIN_ROWS, RawSkillParams, RoleComparison, ValidRawSkillParams,
};
