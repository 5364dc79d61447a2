//! # mm-matcher: the embeddable matcher
//!
//! Services embed this crate to turn queues of searches into matches, using models exported by
//! the trainer. It depends on the artifact crate and small pure crates only: no polars, linfa or
//! ndarray (CI checks the dependency tree).
//!
//! **Status:** the crate boundary exists; the policies (EOMM pairing, team balance, Call of Duty
//! rules, the threshold matcher) are the work of the matcher issues and are not written yet.

pub use mm_artifact::Outcome;
