//! The integration tests of ingest, one module a file, in one binary.

mod crash_quarantine;
mod formats;
mod invariants;
mod match_starts;
mod valid_matches;
