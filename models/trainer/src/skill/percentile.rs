//! The percentile map lives in the artifact crate (it is part of the exported format); it is
//! re-exported here.

pub use mm_artifact::percentile::*;
