//! The integration tests of the matcher library, one module a file, in one binary.

mod common;

mod backfill;
mod cod_check;
mod exact;
mod partial;
mod policies;
mod teams;
