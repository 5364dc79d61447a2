//! `mm bench ingest`: canonical CSV to the lake at several sizes, in child processes (so that
//! each size's peak memory is its own), beside Python polars on the same file.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::args::BenchIngestArgs;
use crate::{median, peer_python};

/// The peer: as in `../shared/peers/bench_polars.py`, eager read_csv + write_parquet (zstd 3) and
/// lazy scan_csv + sink_parquet, one file with integer ids; and, as a third variant, the lazy
/// pipeline writing the lake's layout (text ids, a file per day, the lake's row order, zstd 1).
/// Each timed alone; peak memory of the process reported.
const PEER_SCRIPT: &str = include_str!("../peers/ingest_polars.py");

/// The peer's variants, in the order each round runs them.
const VARIANTS: [&str; 3] = ["eager", "lazy", "lake"];

#[derive(Debug, Serialize)]
struct Run {
    seconds: f64,
    rows_per_s: f64,
    peak_rss_mib: f64,
    /// CPU seconds, user and system, all threads (the median for several runs): mm's whole
    /// process; polars' timed part only.
    cpu_s: f64,
    /// Parquet files written (mm: the lake's day files).
    files: u64,
}

#[derive(Debug, Serialize)]
struct SizeResult {
    rows: u64,
    csv_mib: f64,
    /// Median over the repetitions, end to end (process start to exit).
    mm: Run,
    mm_runs_s: Vec<f64>,
    polars_eager: Option<Run>,
    polars_lazy: Option<Run>,
    /// Polars writing the lake's layout (text ids, day files, the lake's row order, zstd 1).
    polars_lake: Option<Run>,
    /// mm rows/s divided by the faster one-file polars variant's rows/s, measured in this run.
    ratio_to_polars: Option<f64>,
    /// mm's peak memory divided by the lazy one-file variant's.
    memory_to_polars_lazy: Option<f64>,
    /// mm rows/s divided by the lake-layout variant's.
    ratio_to_polars_lake: Option<f64>,
    /// mm's peak memory divided by the lake-layout variant's.
    memory_to_polars_lake: Option<f64>,
}

/// The median time and the largest peak memory of single runs; `None` for no runs.
fn combine(runs: &[Run], rows: u64) -> Option<Run> {
    if runs.is_empty() {
        return None;
    }
    let mut secs: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
    let mut cpu: Vec<f64> = runs.iter().map(|r| r.cpu_s).collect();
    let s = median(&mut secs);
    Some(Run {
        seconds: s,
        rows_per_s: rows as f64 / s,
        peak_rss_mib: runs.iter().map(|r| r.peak_rss_mib).fold(0.0, f64::max),
        cpu_s: median(&mut cpu),
        files: runs[0].files,
    })
}

/// Removes `path`, a file or a folder of files; absent is fine.
fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_dir_all(path);
}

/// One run of the polars peer (`variant`: one of [`VARIANTS`]) on `csv`.
fn run_peer(python: &Path, csv: &Path, work: &Path, variant: &str, rows: u64) -> Result<Run> {
    let out = work.join(format!("peer_{variant}.parquet"));
    remove(&out);
    let o = Command::new(python)
        .args(["-c", PEER_SCRIPT])
        .arg(csv)
        .arg(&out)
        .arg(variant)
        .output()?;
    if !o.status.success() {
        bail!("polars peer failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)?;
    if v["rows"].as_u64() != Some(rows) {
        bail!("polars peer wrote {} rows, expected {rows}", v["rows"]);
    }
    remove(&out);
    let s = v["seconds"].as_f64().unwrap_or(f64::NAN);
    Ok(Run {
        seconds: s,
        rows_per_s: rows as f64 / s,
        peak_rss_mib: v["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        cpu_s: v["cpu_seconds"].as_f64().unwrap_or(f64::NAN),
        files: v["files"].as_u64().unwrap_or(0),
    })
}

pub fn ingest(a: &BenchIngestArgs, json: bool) -> Result<()> {
    if a.reps == 0 || a.rows.is_empty() {
        bail!("--reps and --rows must be positive");
    }
    std::fs::create_dir_all(&a.work).with_context(|| format!("{}", a.work.display()))?;
    let exe = std::env::current_exe()?;
    let python = if a.no_peer {
        None
    } else {
        peer_python(a.peer_python.as_deref(), "polars")
    };
    if python.is_none() && !a.no_peer {
        eprintln!(
            "mm bench: the polars peer is not installed (see ../shared/peers/README.md); measuring mm alone"
        );
    }
    let mut results = Vec::new();
    for &rows in &a.rows {
        let csv = a.work.join(format!("peer_shaped_{rows}_s{}.csv", a.seed));
        if !csv.exists() {
            let tmp = csv.with_extension("csv.tmp");
            eprintln!("mm bench: generating {} ...", csv.display());
            mm_ingest::generate::write_peer_shaped_csv(&tmp, rows, a.seed)?;
            std::fs::rename(&tmp, &csv)?;
        }
        let rows = rows / 10 * 10;
        let csv_mib = std::fs::metadata(&csv)?.len() as f64 / 1048576.0;
        // Rounds interleave the contenders (mm, then each polars variant, then again), so that
        // a machine that slows down or speeds up during the run biases none of them.
        let mut mm_runs = Vec::new();
        let mut peer_runs: [Vec<Run>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        for rep in 0..a.reps {
            mm_runs.push(run_mm(
                &exe,
                &csv,
                &a.work.join(format!("lake_{rows}_{rep}")),
                rows,
            )?);
            if let Some(py) = &python {
                for (k, variant) in VARIANTS.into_iter().enumerate() {
                    peer_runs[k].push(run_peer(py, &csv, &a.work, variant, rows)?);
                }
            }
        }
        let runs = mm_runs.iter().map(|r| r.seconds).collect();
        let Some(mm) = combine(&mm_runs, rows) else {
            bail!("--reps must be positive");
        };
        let [eager, lazy, lake] = peer_runs.map(|r| combine(&r, rows));
        if let Some(p) = lake.as_ref().filter(|p| p.files != mm.files) {
            bail!(
                "the polars peer wrote {} day files, the lake {}: not the same layout",
                p.files,
                mm.files
            );
        }
        let best = [&eager, &lazy]
            .into_iter()
            .flatten()
            .map(|r| r.rows_per_s)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
        let memory = |p: &Option<Run>| p.as_ref().map(|p| mm.peak_rss_mib / p.peak_rss_mib);
        results.push(SizeResult {
            rows,
            csv_mib,
            ratio_to_polars: best.map(|b| mm.rows_per_s / b),
            memory_to_polars_lazy: memory(&lazy),
            ratio_to_polars_lake: lake.as_ref().map(|p| mm.rows_per_s / p.rows_per_s),
            memory_to_polars_lake: memory(&lake),
            mm,
            mm_runs_s: runs,
            polars_eager: eager,
            polars_lazy: lazy,
            polars_lake: lake,
        });
    }
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_results(a, &results);
    }
    Ok(())
}

/// One `mm ingest` of `csv` into a fresh `lake` (removed after), as its own process: its wall
/// time, peak resident memory and CPU time; an error unless it accepted every one of `rows`.
fn run_mm(exe: &Path, csv: &Path, lake: &Path, rows: u64) -> Result<Run> {
    let _ = std::fs::remove_dir_all(lake);
    let cpu0 = mm_run::children_cpu_seconds();
    let t = Instant::now();
    let o = Command::new(exe)
        .arg("ingest")
        .arg(csv)
        .arg("--lake")
        .arg(lake)
        .args(["--json", "--quiet"])
        .output()?;
    let s = t.elapsed().as_secs_f64();
    let cpu = mm_run::children_cpu_seconds()
        .zip(cpu0)
        .map_or(f64::NAN, |(b, a)| b - a);
    if !o.status.success() {
        bail!("mm ingest failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)?;
    if v["totals"]["accepted"].as_u64() != Some(rows) {
        bail!(
            "mm ingest accepted {} rows, expected {rows}",
            v["totals"]["accepted"]
        );
    }
    std::fs::remove_dir_all(lake)?;
    Ok(Run {
        seconds: s,
        rows_per_s: rows as f64 / s,
        peak_rss_mib: v["peak_rss_bytes"].as_f64().unwrap_or(0.0) / 1048576.0,
        cpu_s: cpu,
        files: v["partitions_written"].as_u64().unwrap_or(0),
    })
}

/// `mm bench ingest`'s figures, as text: a line per size and contender, then the ratios.
fn print_results(a: &BenchIngestArgs, results: &[SizeResult]) {
    mm_run::outln!(
        "canonical CSV -> lake (validation, dedup, day files, zstd 1, fsync, Delta commit) beside polars: one file with integer ids (zstd 3), and the lake's layout (text ids, day files, lake order, zstd 1); median of {} runs, {} cores",
        a.reps,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    mm_run::outln!(
        "{:>11} {:>8} {:>14} {:>8} {:>12} {:>8} {:>8}",
        "rows",
        "CSV MiB",
        "contender",
        "s",
        "rows/s",
        "MiB",
        "CPU s"
    );
    for r in results {
        let contenders = [
            ("mm", Some(&r.mm)),
            ("polars eager", r.polars_eager.as_ref()),
            ("polars lazy", r.polars_lazy.as_ref()),
            ("polars lake", r.polars_lake.as_ref()),
        ];
        for (name, run) in contenders {
            let Some(x) = run else { continue };
            mm_run::outln!(
                "{:>11} {:>8.0} {:>14} {:>8.2} {:>12.0} {:>8.0} {:>8.2}",
                r.rows,
                r.csv_mib,
                name,
                x.seconds,
                x.rows_per_s,
                x.peak_rss_mib,
                x.cpu_s
            );
        }
    }
    let f = |x: Option<f64>| x.map_or("-".into(), |x| format!("{x:.2}"));
    for r in results {
        mm_run::outln!(
            "{:>11} rows: mm / best one-file polars: speed {}, memory {} (of lazy); mm / polars lake layout: speed {}, memory {}",
            r.rows,
            f(r.ratio_to_polars),
            f(r.memory_to_polars_lazy),
            f(r.ratio_to_polars_lake),
            f(r.memory_to_polars_lake)
        );
    }
    mm_run::outln!(
        "CPU: user + system of all threads, median; mm's whole process, polars' timed part only"
    );
}
