//! # mm-bench: the benchmarks behind `mm bench`
//!
//! Each benchmark prints figures and, where the peers' Python is installed, the same
//! measurement by the peer on the same input in the same run, with the ratio. They run the
//! `mm` binary itself in child processes where a stage's own peak memory is wanted, so they
//! are called from `mm bench` (`pipelines/cli`), which only parses their flags ([`BenchCmd`]).
//! The Python the peers run lives in `peers/` beside this crate.
//!
//! This is tooling at the level of a binary: errors are `anyhow` errors that `mm` prints.

use std::path::{Path, PathBuf};
use std::process::Command;

pub mod args;
mod artifact;
mod ingest;
mod logistic;
mod pair;
pub mod scale;
mod serve;
mod skill;
mod table;

pub use args::BenchCmd;

/// Runs one benchmark; `json` prints its figures as one JSON object.
///
/// # Errors
/// The benchmark could not run (a child failed, an input is missing).
pub fn run(cmd: &BenchCmd, json: bool) -> anyhow::Result<()> {
    match cmd {
        BenchCmd::Ingest(a) => ingest::ingest(a, json),
        BenchCmd::Pair(a) => pair::run(a, json),
        BenchCmd::Artifact(a) => artifact::run(a, json),
        BenchCmd::Skill(a) => skill::run(a, json),
        BenchCmd::Scale(a) => scale::run(a, json),
        BenchCmd::Logistic(a) => logistic::logistic(a, json),
        BenchCmd::Serve(a) => serve::run(a, json),
    }
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The peers' Python (explicit, `$PEERS_VENV`, or `~/.venvs/peers`) if it can import `module`.
pub(crate) fn peer_python(explicit: Option<&Path>, module: &str) -> Option<PathBuf> {
    let candidates = explicit
        .map(Path::to_path_buf)
        .into_iter()
        .chain(std::env::var_os("PEERS_VENV").map(|v| PathBuf::from(v).join("bin/python")))
        .chain(std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".venvs/peers/bin/python")));
    candidates.into_iter().find(|p| {
        p.exists()
            && Command::new(p)
                .args(["-c", &format!("import {module}")])
                .output()
                .is_ok_and(|o| o.status.success())
    })
}
