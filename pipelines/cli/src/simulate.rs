//! `mm simulate`: a seeded population with ground truth, written as a new lake.

use anyhow::Result;

use crate::args::{Output, SimulateArgs};

pub fn run(a: &SimulateArgs, out: &Output) -> Result<()> {
    let report = mm_sim::simulate(&a.to_config()?)?;
    crate::output::emit(out, &report, |r| {
        mm_run::outln!(
            "simulated {} players over {} days into {}: {} 6v6 and {} 1v1 matches, {} rows in {:.1} s ({:.0} rows/s{})",
            r.config.players,
            r.config.days,
            r.config.lake.display(),
            r.matches_tdm,
            r.matches_duel,
            r.rows,
            r.seconds,
            r.rows_per_s,
            r.peak_rss_bytes
                .map(|b| format!(", peak RSS {:.0} MiB", b as f64 / 1048576.0))
                .unwrap_or_default()
        );
    })
}
