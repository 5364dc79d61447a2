//! `mm bench artifact`: writing and loading an artifact of a synthetic population.

use anyhow::{Result, bail};
use mm_artifact::Store;

use crate::args::BenchArtifactArgs;

/// `VmRSS` and `VmHWM` (peak) of this process, bytes (Linux; 0 elsewhere).
fn rss() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// `mm bench artifact`: writes a synthetic artifact of `--players` players, then loads it
/// `--reps` times, each in a fresh process (so the peak memory is the load's own).
pub fn run(a: &BenchArtifactArgs, json: bool) -> Result<()> {
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("mm-bench-artifact-{}", std::process::id()));
            tmp.clone()
        }
    };
    if a.load_only {
        let (before, _) = rss();
        let t = std::time::Instant::now();
        let art = mm_artifact::Artifact::open(&dir.join("v1"))?;
        let seconds = t.elapsed().as_secs_f64();
        let (after, peak) = rss();
        mm_run::outln!(
            "{}",
            serde_json::json!({"seconds": seconds, "players": art.snapshot.len(),
                "rss_before": before, "rss_after": after, "peak_rss": peak})
        );
        return Ok(());
    }
    let t = std::time::Instant::now();
    let (m, files) = mm_artifact::synthetic::artifact(a.players, 1);
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    let _ = std::fs::remove_dir_all(&dir);
    Store::new(&dir).publish("v1", m, &files, true, None)?;
    drop(files);
    let write_s = t.elapsed().as_secs_f64();
    let exe = std::env::current_exe()?;
    let mut runs = Vec::new();
    for _ in 0..a.reps.max(1) {
        let run = std::process::Command::new(&exe)
            .args(["bench", "artifact", "--load-only", "--dir"])
            .arg(&dir)
            .output()?;
        if !run.status.success() {
            bail!("load run failed: {}", String::from_utf8_lossy(&run.stderr));
        }
        runs.push(serde_json::from_slice::<serde_json::Value>(&run.stdout)?);
    }
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut secs: Vec<f64> = runs.iter().filter_map(|r| r["seconds"].as_f64()).collect();
    let median = crate::median(&mut secs);
    let mib = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(0.0) / 1048576.0;
    let held = runs
        .iter()
        .map(|r| mib(r, "rss_after") - mib(r, "rss_before"))
        .fold(0.0, f64::max);
    let peak = runs.iter().map(|r| mib(r, "peak_rss")).fold(0.0, f64::max);
    let report = serde_json::json!({
        "players": a.players, "artifact_bytes": bytes, "write_seconds": write_s,
        "load_seconds_median": median, "load_seconds": secs,
        "resident_mib_held": held, "peak_rss_mib": peak,
    });
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        mm_run::outln!(
            "artifact of {} players ({:.1} MiB on disk, written in {:.2} s): load + verify median {:.3} s over {} runs; {:.0} MiB resident after loading, peak {:.0} MiB",
            a.players,
            bytes as f64 / 1048576.0,
            write_s,
            median,
            secs.len(),
            held,
            peak
        );
    }
    Ok(())
}
