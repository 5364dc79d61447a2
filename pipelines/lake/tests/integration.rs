//! The integration tests of the lake, one module a file, in one binary.

mod commit_model;
mod file_stats;
mod match_ids;
