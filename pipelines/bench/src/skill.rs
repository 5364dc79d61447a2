//! `mm bench skill`: player-match updates per second of the raw skill on 6v6 lobbies and of
//! each baseline, from the same Parquet lake; and, on ATP, each system's matches per second
//! beside the peers' Python implementations (`bench_ratings.py`) run in the same run.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use mm_fit::Metric;
use mm_fit::skill::history::{History, read_history};
use mm_fit::skill::replay::{Windows, run_baseline, run_ours};
use mm_lake::Lake;
use mm_trainer::skill::baselines::BaselineKind;
use mm_trainer::skill::raw::RawSkillParams;
use serde::Serialize;

use crate::args::BenchSkillArgs;
use crate::{median, peer_python};

/// No tuning or scoring window: a replay that only fits.
const FIT_ONLY: Windows = Windows {
    tune_from: i64::MAX,
    tune_to: i64::MAX,
    score_from: i64::MAX,
    score_to: i64::MAX,
};

#[derive(Debug, Serialize)]
struct SystemRate {
    model: String,
    seconds: f64,
    updates_per_s: f64,
    matches_per_s: f64,
    /// The peer's matches per second in this run (ATP only).
    peer: Option<String>,
    peer_matches_per_s: Option<f64>,
    /// Our matches/s over the peer's.
    ratio_vs_peer: Option<f64>,
}

#[derive(Debug, Serialize)]
struct LobbyBench {
    lake: PathBuf,
    rows: usize,
    matches: usize,
    /// Pairs compared by the raw skill (n (n - 1) / 2 per lobby).
    pairs: u64,
    read_seconds: f64,
    fit_seconds: f64,
    /// Parquet to fitted state (median of the runs).
    total_seconds: f64,
    total_runs_s: Vec<f64>,
    rows_per_s: f64,
    /// Time for 10M rows at this rate (the target: under 3 s).
    projected_10m_seconds: f64,
    systems: Vec<SystemRate>,
}

#[derive(Debug, Serialize)]
struct Report {
    lobbies: LobbyBench,
    atp: Option<Vec<SystemRate>>,
}

fn mm_exe() -> Result<PathBuf> {
    std::env::current_exe().context("locating the mm binary")
}

/// Whether `dir` is a lake holding matches (a cached lake from an earlier run).
fn has_matches(dir: &std::path::Path) -> bool {
    Lake::open(dir).is_ok_and(|l| l.days().is_ok_and(|d| !d.is_empty()))
}

/// The 6v6 lake to read: the given one, or a simulated one cached in the work directory.
fn lobby_lake(a: &BenchSkillArgs) -> Result<PathBuf> {
    if let Some(l) = &a.lake {
        return Ok(l.clone());
    }
    let dir = a.work.join(format!("lake-6v6-{}x{}", a.players, a.days));
    if has_matches(&dir) {
        return Ok(dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "simulating {} players over {} days (6v6 only) into {} ...",
        a.players,
        a.days,
        dir.display()
    );
    mm_sim::simulate(&mm_sim::SimConfig {
        lake: dir.clone(),
        players: a.players,
        days: a.days,
        duel_share: 0.0,
        ..mm_sim::SimConfig::default()
    })?;
    Ok(dir)
}

fn systems(h: &History, params: RawSkillParams) -> Result<Vec<SystemRate>> {
    let rate = |model: &str, seconds: f64, updates: u64| SystemRate {
        model: model.into(),
        seconds,
        updates_per_s: updates as f64 / seconds,
        matches_per_s: h.matches.len() as f64 / seconds,
        peer: None,
        peer_matches_per_s: None,
        ratio_vs_peer: None,
    };
    let r = run_ours(h, params.check()?, None, i64::MAX, &FIT_ONLY, None);
    let mut out = vec![rate("raw-skill", r.seconds, r.updates)];
    for kind in BaselineKind::ALL {
        let r = run_baseline(h, kind.default_params(), i64::MAX, &FIT_ONLY);
        out.push(rate(kind.name(), r.seconds, r.updates));
    }
    Ok(out)
}

fn lobbies(a: &BenchSkillArgs) -> Result<LobbyBench> {
    let lake_dir = lobby_lake(a)?;
    let lake = Lake::open(&lake_dir)?;
    let params = RawSkillParams {
        scale: 16.0,
        ..RawSkillParams::default()
    };
    let valid = params.check()?;
    let (mut read, mut fit, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..a.reps.max(1) {
        let t0 = Instant::now();
        let h = read_history(&lake, Some(&a.mode), Metric::KillsPerEnemyDeath)?;
        let t1 = Instant::now();
        let r = run_ours(&h, valid, None, i64::MAX, &FIT_ONLY, None);
        std::hint::black_box(r.model.players().len());
        let t2 = Instant::now();
        read.push((t1 - t0).as_secs_f64());
        fit.push((t2 - t1).as_secs_f64());
        total.push((t2 - t0).as_secs_f64());
        last = Some(h);
    }
    let Some(h) = last else { bail!("no run") };
    if h.matches.is_empty() {
        bail!("{}: no {} matches", lake_dir.display(), a.mode);
    }
    let pairs = h
        .matches
        .iter()
        .map(|m| {
            let n = u64::from(m.hi - m.lo);
            n * n.saturating_sub(1) / 2
        })
        .sum();
    let runs = total.clone();
    let t = median(&mut total);
    Ok(LobbyBench {
        lake: lake_dir,
        rows: h.rows(),
        matches: h.matches.len(),
        pairs,
        read_seconds: median(&mut read),
        fit_seconds: median(&mut fit),
        total_seconds: t,
        total_runs_s: runs,
        rows_per_s: h.rows() as f64 / t,
        projected_10m_seconds: 1e7 / (h.rows() as f64 / t),
        systems: systems(&h, params)?,
    })
}

/// ATP: our systems' matches/s beside `bench_ratings.py` in this run.
fn atp(a: &BenchSkillArgs) -> Result<Option<Vec<SystemRate>>> {
    let real = a.peers.join("../data/real/atp-tour");
    let script = a.peers.join("bench_ratings.py");
    if !real.is_dir() || !script.exists() {
        eprintln!(
            "skipping ATP: {} or {} missing",
            real.display(),
            script.display()
        );
        return Ok(None);
    }
    let lake_dir = a.work.join("lake-atp");
    if !has_matches(&lake_dir) {
        let _ = std::fs::remove_dir_all(&lake_dir);
        let st = Command::new(mm_exe()?)
            .arg("ingest")
            .arg(&real)
            .arg("--lake")
            .arg(&lake_dir)
            .arg("--quiet")
            .status()?;
        if !st.success() {
            bail!("mm ingest {} failed", real.display());
        }
    }
    let h = read_history(&Lake::open(&lake_dir)?, None, Metric::Perf)?;
    let mut ours = systems(
        &h,
        RawSkillParams {
            margin: 0.07,
            ..RawSkillParams::default()
        },
    )?;
    let Some(py) = peer_python(a.peer_python.as_deref(), "openskill, trueskill, numpy") else {
        eprintln!("skipping the Python peers: no venv with openskill and trueskill");
        return Ok(Some(ours));
    };
    let out = a.work.join("ratings.json");
    let st = Command::new(&py)
        .arg(&script)
        .args([
            "--reps",
            &a.peer_reps.to_string(),
            "--save-matches",
            "",
            "--save-preds",
            "",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()?;
    if !st.success() {
        bail!("{} failed", script.display());
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out)?)?;
    let peer_of = |m: &str| match m {
        "elo" => v["elo_k_tuned"].as_u64().map(|k| format!("elo_tuned_k{k}")),
        "glicko2" => Some("glicko2".into()),
        "trueskill" => Some("trueskill".into()),
        "weng-lin" => Some("openskill_btf".into()),
        _ => None,
    };
    for s in &mut ours {
        if let Some(p) = peer_of(&s.model)
            && let Some(r) = v["models"][&p]["matches_per_s"].as_f64()
        {
            s.ratio_vs_peer = Some(s.matches_per_s / r);
            s.peer_matches_per_s = Some(r);
            s.peer = Some(p);
        }
    }
    Ok(Some(ours))
}

fn print_rates(rows: &[SystemRate]) {
    mm_run::outln!(
        "{:<12} {:>9} {:>14} {:>14} {:>16} {:>16} {:>9}",
        "system",
        "seconds",
        "updates/s",
        "matches/s",
        "peer",
        "peer matches/s",
        "ratio"
    );
    for s in rows {
        mm_run::outln!(
            "{:<12} {:>9.3} {:>14.0} {:>14.0} {:>16} {:>16} {:>9}",
            s.model,
            s.seconds,
            s.updates_per_s,
            s.matches_per_s,
            s.peer.as_deref().unwrap_or("-"),
            s.peer_matches_per_s
                .map_or("-".into(), |r| format!("{r:.0}")),
            s.ratio_vs_peer.map_or("-".into(), |r| format!("{r:.1}x")),
        );
    }
}

pub fn run(a: &BenchSkillArgs, json: bool) -> Result<()> {
    std::fs::create_dir_all(&a.work)?;
    let lob = lobbies(a)?;
    let atp = if a.no_atp { None } else { atp(a)? };
    let report = Report { lobbies: lob, atp };
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let l = &report.lobbies;
    mm_run::outln!(
        "6v6 lobbies: {} rows, {} matches, {} pairs compared ({})",
        l.rows,
        l.matches,
        l.pairs,
        l.lake.display()
    );
    mm_run::outln!(
        "raw skill, Parquet to fitted state: {:.3} s median (read {:.3} s, fit {:.3} s) = {:.0} rows/s; 10M rows projected {:.2} s (target < 3 s)",
        l.total_seconds,
        l.read_seconds,
        l.fit_seconds,
        l.rows_per_s,
        l.projected_10m_seconds
    );
    print_rates(&l.systems);
    if let Some(atp) = &report.atp {
        mm_run::outln!(
            "ATP (1991-2019, every match predicted then updated; peers' script run now):"
        );
        print_rates(atp);
    }
    Ok(())
}
