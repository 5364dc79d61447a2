//! Load time of an artifact with a synthetic population, in this crate alone (no polars in
//! the build, so it builds in release quickly):
//! `cargo run --release -p mm-artifact --example load_bench -- 1000000 5`.
//! `mm bench artifact` measures the same through the CLI, each load in a fresh process.

use std::time::Instant;

use mm_artifact::store::Store;
use mm_artifact::{Artifact, synthetic};

fn rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let players: usize = args.next().map_or(Ok(1_000_000), |a| a.parse())?;
    let reps: usize = args.next().map_or(Ok(5), |a| a.parse())?;
    let dir = std::env::temp_dir().join(format!("mm-load-bench-{}", std::process::id()));
    let (m, files) = synthetic::artifact(players, 1);
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    Store::new(&dir).publish("v1", m, &files, true, None)?;
    drop(files);
    let mut times = Vec::new();
    let mut held = 0.0f64;
    for _ in 0..reps {
        let before = rss_mib();
        let t = Instant::now();
        let a = Artifact::open(&dir.join("v1"))?;
        times.push(t.elapsed().as_secs_f64());
        held = held.max(rss_mib() - before);
        assert_eq!(a.snapshot.len(), players);
    }
    std::fs::remove_dir_all(&dir)?;
    times.sort_by(f64::total_cmp);
    println!(
        "{players} players, {:.1} MiB on disk: load + verify median {:.3} s (min {:.3}, max {:.3}, {reps} runs); {held:.0} MiB resident held by the loaded artifact",
        bytes as f64 / 1048576.0,
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}
