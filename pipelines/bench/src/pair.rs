//! `mm bench pair`: our exact EOMM pairing on the peers' pools, and networkx
//! `max_weight_matching` on the same pools, run by the peers' own `bench_mwpm.py` in this run.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use mm_matcher::blossom::DenseBlossom;
use mm_matcher::pairing::{PairPolicy, costs_from_le_i32, pair_i64};
use serde::Serialize;

use crate::args::BenchPairArgs;
use crate::{median, peer_python};

#[derive(Debug, Serialize)]
struct SizeResult {
    players: usize,
    objective: i64,
    /// The reference optimum shipped with the pool (networkx, or HiGHS-certified at 2000).
    reference_optimum: i64,
    /// Median solve time (a reused solver, as a service pairing every tick would use it).
    mm_seconds: f64,
    mm_runs_s: Vec<f64>,
    /// networkx median solve time measured in this run, when run at this size.
    networkx_seconds: Option<f64>,
    /// networkx seconds / mm seconds, both measured in this run.
    speedup_vs_networkx: Option<f64>,
}

fn read_pool(peers: &Path, p: usize) -> Result<(Vec<i64>, i64)> {
    let results = peers.join("results");
    let wq = results.join(format!("pools/pool_P{p}_s20240601_wq.i32"));
    let bytes = std::fs::read(&wq).with_context(|| format!("reading {}", wq.display()))?;
    let (side, w) =
        costs_from_le_i32(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", wq.display()))?;
    if side != p {
        bail!("{}: expected {p}x{p} int32 values", wq.display());
    }
    let json = results.join(format!("mwpm_P{p}.json"));
    let v: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&json).with_context(|| format!("reading {}", json.display()))?,
    )?;
    let opt = v["objectives"]["optimal"]
        .as_i64()
        .with_context(|| format!("{}: no objectives.optimal", json.display()))?;
    Ok((w, opt))
}

/// Runs the peer script for one size and returns networkx's median solve seconds.
fn networkx(python: &Path, a: &BenchPairArgs, p: usize) -> Result<f64> {
    let out = a.work.join("results");
    std::fs::create_dir_all(&out)?;
    let script = a.peers.join("bench_mwpm.py");
    let status = Command::new(python)
        .arg(&script)
        .args(["--sizes", &p.to_string(), "--reps", &a.nx_reps.to_string()])
        .args(["--single-rep-above", "100000", "--nx-max", &p.to_string()])
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} failed at P={p}", script.display());
    }
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(
        out.join(format!("mwpm_P{p}.json")),
    )?)?;
    v["timings_s"]["nx_solve_median"]
        .as_f64()
        .context("peer output has no timings_s.nx_solve_median")
}

pub fn run(a: &BenchPairArgs, json: bool) -> Result<()> {
    let python = peer_python(a.peer_python.as_deref(), "networkx");
    if python.is_none() {
        eprintln!("networkx peer not installed (see ../shared/peers/README.md): ours only");
    }
    let mut rows = Vec::new();
    for &p in &a.sizes {
        let (w, reference) = read_pool(&a.peers, p)?;
        let mut solver = DenseBlossom::new();
        let mut runs = Vec::new();
        let mut objective = 0;
        for _ in 0..a.reps.max(1) {
            let t = Instant::now();
            let r = pair_i64(PairPolicy::Eomm, p, &w, None, &mut solver)?;
            runs.push(t.elapsed().as_secs_f64());
            objective = r.objective;
        }
        if objective != reference {
            bail!("P={p}: objective {objective} differs from the reference optimum {reference}");
        }
        let mm_seconds = median(&mut runs.clone());
        let networkx_seconds = match &python {
            Some(py) if p <= a.nx_max => Some(networkx(py, a, p)?),
            _ => None,
        };
        let row = SizeResult {
            players: p,
            objective,
            reference_optimum: reference,
            mm_seconds,
            mm_runs_s: runs,
            networkx_seconds,
            speedup_vs_networkx: networkx_seconds.map(|nx| nx / mm_seconds),
        };
        if !json {
            mm_run::outln!(
                "P={:<5} optimum {:>10} (= reference)  mm {:>9.3} ms  networkx {:>9}  speed-up {}",
                p,
                row.objective,
                row.mm_seconds * 1e3,
                row.networkx_seconds
                    .map_or("-".into(), |s| format!("{:.3} s", s)),
                row.speedup_vs_networkx
                    .map_or("-".into(), |r| format!("{r:.0}x")),
            );
        }
        rows.push(row);
    }
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&rows)?);
    }
    Ok(())
}
