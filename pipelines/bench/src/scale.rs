//! `mm bench scale`: every stage of the pipeline at several lake sizes, each stage run as its
//! own child process so that its peak memory is its own (the child's VmHWM, which it writes
//! as it exits), with rows per second of wall time and of CPU time (the child's user and
//! system seconds, all threads: rows per second per core busy) and the ratio of the largest
//! size to the smallest. Lakes are simulated with a fixed number of players over more days, so
//! that a stage whose memory is bounded by players and chunks shows the same peak at every
//! size.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::args::BenchScaleArgs;

/// Player-match rows per player and day of the default simulated world (250,000 players over
/// 28 days gave 10.0M rows).
const ROWS_PER_PLAYER_DAY: f64 = 1.43;

/// A stage's measurement at one size.
#[derive(Debug, Clone, Serialize)]
pub struct StageRun {
    pub stage: String,
    /// What the stage processed: lake rows, except for `evaluate`, whose work is one day's
    /// searches whatever the lake's size (its `unit` is then `searches`).
    pub rows: u64,
    pub unit: String,
    pub seconds: f64,
    pub rows_per_s: f64,
    /// The child's CPU time, user and system, all threads.
    pub cpu_seconds: f64,
    /// `rows / cpu_seconds`: rows per second per core busy.
    pub rows_per_cpu_s: f64,
    pub peak_rss_mib: f64,
}

/// One stage across the sizes: the largest size over the smallest.
#[derive(Debug, Clone, Serialize)]
pub struct StageScaling {
    pub stage: String,
    pub rss_ratio: f64,
    pub throughput_ratio: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    players: usize,
    runs: Vec<StageRun>,
    scaling: Vec<StageScaling>,
}

/// Set on each stage's child: the file where `mm` writes, as it exits, its peak resident memory
/// (bytes, the kernel's VmHWM) and its CPU seconds, separated by a space.
pub const PEAK_RSS_ENV: &str = "MM_PEAK_RSS_FILE";

/// What [`measure`] returns: wall seconds, CPU seconds, peak resident memory (MiB).
type Measured = (f64, f64, f64);

/// Runs `cmd` to its end; returns its wall time, CPU time and peak resident memory (MiB), or
/// its stderr.
fn measure(mut cmd: Command, work: &Path) -> Result<Measured> {
    let peak_file = work.join(".peak_rss");
    let _ = std::fs::remove_file(&peak_file);
    cmd.env(PEAK_RSS_ENV, &peak_file)
        .stdout(std::process::Stdio::null());
    let t0 = Instant::now();
    let out = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    let seconds = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = std::fs::read_to_string(&peak_file).unwrap_or_default();
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    let Some(Ok(bytes)) = fields.next() else {
        bail!("{cmd:?} reported no peak memory");
    };
    let cpu = fields.next().and_then(Result::ok).unwrap_or(f64::NAN);
    Ok((seconds, cpu, bytes / 1_048_576.0))
}

fn mm(args: &[&str]) -> Result<Command> {
    let mut c = Command::new(std::env::current_exe().context("locating the mm binary")?);
    c.args(args);
    Ok(c)
}

fn lake_rows(lake: &Path) -> Result<u64> {
    let l = mm_lake::Lake::open(lake)?;
    Ok(l.match_entries().iter().filter_map(|e| e.rows).sum())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// How the `evaluate` and `retrain` stages evaluate: a one-minute queue tick (see
/// `one_size`) and 200 rounds.
const EVALUATION: [&str; 4] = ["--tick-s", "60", "--rounds", "200"];

/// The stages after `simulate`, in the order they run.
const STAGES: [&str; 8] = [
    "ingest",
    "fit-skill",
    "churn-features",
    "fit-churn",
    "export",
    "evaluate",
    "retrain",
    "retrain-daily",
];

/// Measures every stage at `rows` (about; the simulated lake's actual count is used).
fn one_size(a: &BenchScaleArgs, target: u64, out: &mut Vec<StageRun>) -> Result<()> {
    let days = ((target as f64) / (a.players as f64 * ROWS_PER_PLAYER_DAY))
        .ceil()
        .max(4.0) as u32;
    let dir = a.work.join(format!("{}x{days}", a.players));
    std::fs::create_dir_all(&dir)?;
    eprintln!(
        "size ~{target} rows: {} players x {days} days in {}",
        a.players,
        dir.display()
    );
    // Fit on all days but the last two; evaluate on the first of those (its labels need the
    // second), with a one-minute queue tick: the team-queue replay's cost is the window's and
    // the tick's, not the lake's, and at the default 5 s it takes half an hour.
    let start = chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap_or_default();
    let mut size = Size {
        a,
        lake: dir.join("lake"),
        skill: dir.join("skill"),
        churn: dir.join("churn"),
        models: dir.join("models"),
        until: (start + chrono::Days::new(u64::from(days - 2))).to_string(),
        eval_to: (start + chrono::Days::new(u64::from(days - 1))).to_string(),
        dir,
        days,
        rows: 0,
        out,
    };
    size.simulate()?;
    size.rows = lake_rows(&size.lake)?;
    let stage = |name: &str| a.stages.iter().any(|x| x == name);
    for name in STAGES.into_iter().filter(|n| stage(n)) {
        match name {
            "ingest" => size.ingest(),
            "fit-skill" => size.fit_skill(),
            "churn-features" => size.churn_features(),
            "fit-churn" => size.fit_churn(),
            "export" => size.export(),
            "evaluate" => size.evaluate(),
            "retrain" => size.retrain(),
            _ => size.retrain_daily(),
        }?;
    }
    Ok(())
}

/// One size's lake, its stages' folders and the measurements so far.
struct Size<'a> {
    a: &'a BenchScaleArgs,
    dir: std::path::PathBuf,
    lake: std::path::PathBuf,
    skill: std::path::PathBuf,
    churn: std::path::PathBuf,
    models: std::path::PathBuf,
    days: u32,
    /// The lake's rows (after `simulate`).
    rows: u64,
    /// The fits read the days before this one; the evaluation reads `[until, eval_to)`.
    until: String,
    eval_to: String,
    out: &'a mut Vec<StageRun>,
}

impl Size<'_> {
    /// Records (and prints) a stage's measurement.
    fn push(&mut self, stage: &str, rows: u64, unit: &str, (seconds, cpu, rss): Measured) {
        let r = StageRun {
            stage: stage.into(),
            rows,
            unit: unit.into(),
            seconds,
            rows_per_s: rows as f64 / seconds.max(1e-9),
            cpu_seconds: cpu,
            // NaN when the child could not read its CPU time (no `/proc`).
            rows_per_cpu_s: if cpu > 0.0 {
                rows as f64 / cpu
            } else {
                f64::NAN
            },
            peak_rss_mib: rss,
        };
        eprintln!(
            "  {:<14} {:>12} {unit}  {:>8.2} s  {:>12.0} /s  {:>12.0} /cpu-s  {:>8.0} MiB",
            r.stage, r.rows, r.seconds, r.rows_per_s, r.rows_per_cpu_s, r.peak_rss_mib
        );
        self.out.push(r);
    }

    /// Runs `args` as a child `mm` and records it as `stage` over `rows` of `unit`.
    fn run(&mut self, stage: &str, cmd: Command, rows: u64, unit: &str) -> Result<()> {
        let t = measure(cmd, &self.dir)?;
        self.push(stage, rows, unit, t);
        Ok(())
    }

    /// Simulates the lake (reused when it is there from an earlier run).
    fn simulate(&mut self) -> Result<()> {
        if lake_rows(&self.lake).is_ok_and(|n| n > 0) {
            return Ok(());
        }
        let _ = std::fs::remove_dir_all(&self.lake);
        let t = measure(
            mm(&[
                "simulate",
                "--lake",
                s(&self.lake),
                "--players",
                &self.a.players.to_string(),
                "--days",
                &self.days.to_string(),
                "--duel-share",
                "0",
                "-q",
            ])?,
            &self.dir,
        )?;
        let rows = lake_rows(&self.lake)?;
        self.push("simulate", rows, "rows", t);
        Ok(())
    }

    /// `mm ingest` of a CSV of the lake's size, into a lake of its own.
    fn ingest(&mut self) -> Result<()> {
        let csv = self.dir.join("ingest.csv");
        if !csv.exists() {
            mm_ingest::generate::write_peer_shaped_csv(&csv, self.rows, 20_240_603)?;
        }
        let ingest_lake = self.dir.join("ingest-lake");
        let _ = std::fs::remove_dir_all(&ingest_lake);
        let cmd = mm(&["ingest", s(&csv), "--lake", s(&ingest_lake), "-q"])?;
        self.run("ingest", cmd, self.rows, "rows")?;
        let _ = std::fs::remove_dir_all(&ingest_lake);
        Ok(())
    }

    fn fit_skill(&mut self) -> Result<()> {
        let cmd = mm(&[
            "fit",
            "skill",
            "--lake",
            s(&self.lake),
            "--out",
            s(&self.skill),
            "--mode",
            &self.a.mode,
            "--until",
            &self.until,
        ])?;
        self.run("fit-skill", cmd, self.rows, "rows")
    }

    /// `mm fit churn` on this lake's mode up to `until`, with the skill percentile feature when
    /// the skill fit has run (this run or an earlier).
    fn fit_churn_cmd(&self, out: &Path, extra: &[&str]) -> Result<Command> {
        let mut args = vec![
            "fit",
            "churn",
            "--lake",
            s(&self.lake),
            "--out",
            s(out),
            "--mode",
            &self.a.mode,
            "--until",
            &self.until,
        ];
        args.extend_from_slice(extra);
        if self.skill.join("match_skill.parquet").exists() {
            args.extend(["--skill", s(&self.skill)]);
        }
        mm(&args)
    }

    /// The feature build alone: one shard of one builds and commits the whole table and stops.
    /// Its own table, so that fit-churn's is left as it is.
    fn churn_features(&mut self) -> Result<()> {
        let tables = self.dir.join("churn-features-bench");
        let _ = std::fs::remove_dir_all(&tables);
        let cmd = self.fit_churn_cmd(
            &tables.join("out"),
            &["--tables", s(&tables), "--shard", "0/1", "-q"],
        )?;
        self.run("churn-features", cmd, self.rows, "rows")?;
        let _ = std::fs::remove_dir_all(&tables);
        Ok(())
    }

    fn fit_churn(&mut self) -> Result<()> {
        // `--rebuild`: build the feature table again (an earlier run's would be found and
        // reused).
        let cmd = self.fit_churn_cmd(
            &self.churn,
            &["--c-grid", "0.01", "--folds", "2", "--rebuild"],
        )?;
        self.run("fit-churn", cmd, self.rows, "rows")
    }

    fn export(&mut self) -> Result<()> {
        let _ = std::fs::remove_dir_all(&self.models);
        let cmd = mm(&[
            "export",
            "--skill",
            s(&self.skill),
            "--churn",
            s(&self.churn),
            "--models",
            s(&self.models),
            "--name",
            "scale",
        ])?;
        self.run("export", cmd, self.rows, "rows")
    }

    /// `mm evaluate` of the exported model on the day after the fits'; its work is one day's
    /// searches, whatever the lake's size.
    fn evaluate(&mut self) -> Result<()> {
        let evaluation = self.dir.join("evaluation");
        let cmd = mm(&[
            &[
                "evaluate",
                "--lake",
                s(&self.lake),
                "--artifact",
                s(&self.models.join("scale")),
                "--out",
                s(&evaluation),
                "--from",
                &self.until,
                "--to",
                &self.eval_to,
            ][..],
            &EVALUATION,
        ]
        .concat())?;
        let t = measure(cmd, &self.dir)?;
        let searches = std::fs::read_to_string(evaluation.join("evaluation.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("searches")?.as_u64())
            .context("evaluation.json has no search count")?;
        self.push("evaluate", searches, "searches", t);
        Ok(())
    }

    /// `mm retrain` into `models` with `work`, with `extra` flags.
    fn retrain_cmd(&self, work: &Path, models: &Path, extra: &[&str]) -> Result<Command> {
        let mut args = vec![
            "retrain",
            "--lake",
            s(&self.lake),
            "--mode",
            &self.a.mode,
            "--models",
            s(models),
            "--work",
            s(work),
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&EVALUATION);
        mm(&args)
    }

    /// The scheduled job, the stages above chained in one process: the lake as it is (no
    /// inputs), its last day held out and evaluated at the same one-minute tick. A fresh
    /// working directory, so that it builds everything rather than resuming.
    fn retrain(&mut self) -> Result<()> {
        let (work, models) = (
            self.dir.join("retrain-work"),
            self.dir.join("retrain-models"),
        );
        let cmd = self.retrain_cmd(&work, &models, &[])?;
        self.run("retrain", cmd, self.rows, "rows")
    }

    /// The nightly job's two kinds of run: a full one on the lake without its last day (two
    /// days held out), then the next day's, which continues the promoted model over the one day
    /// more (the last day held out). Both evaluate at the one-minute tick.
    fn retrain_daily(&mut self) -> Result<()> {
        let (work, models) = (self.dir.join("daily-work"), self.dir.join("daily-models"));
        let _ = std::fs::remove_dir_all(&work);
        let _ = std::fs::remove_dir_all(&models);
        let margin = ["--margin", "1"];
        let cmd = self.retrain_cmd(
            &work,
            &models,
            &[&["--holdout-days", "2", "--full"], &margin[..]].concat(),
        )?;
        self.run("retrain-full", cmd, self.rows, "rows")?;
        let cmd = self.retrain_cmd(
            &work,
            &models,
            &[&["--holdout-days", "1"], &margin[..]].concat(),
        )?;
        let t = measure(cmd, &self.dir)?;
        let log = std::fs::read_to_string(work.join("runs.jsonl"))?;
        anyhow::ensure!(
            log.lines()
                .last()
                .is_some_and(|l| l.contains("\"continued\":{")),
            "the daily run did not continue the full run's model: {}",
            log.lines().last().unwrap_or_default()
        );
        self.push("retrain-daily", self.rows, "rows", t);
        Ok(())
    }
}

/// The largest size over the smallest, per stage.
pub fn scaling(runs: &[StageRun]) -> Vec<StageScaling> {
    let mut stages: Vec<&str> = Vec::new();
    for r in runs {
        if !stages.contains(&r.stage.as_str()) {
            stages.push(&r.stage);
        }
    }
    stages
        .into_iter()
        .filter_map(|st| {
            let of: Vec<&StageRun> = runs.iter().filter(|r| r.stage == st).collect();
            let lo = of.iter().min_by_key(|r| r.rows)?;
            let hi = of.iter().max_by_key(|r| r.rows)?;
            (hi.rows > lo.rows).then(|| StageScaling {
                stage: st.to_string(),
                rss_ratio: hi.peak_rss_mib / lo.peak_rss_mib,
                throughput_ratio: hi.rows_per_s / lo.rows_per_s,
            })
        })
        .collect()
}

pub fn run(a: &BenchScaleArgs, json: bool) -> Result<()> {
    if let Some(bad) = a.stages.iter().find(|x| !STAGES.contains(&x.as_str())) {
        bail!(
            "unknown stage {bad:?}: the stages are {}",
            STAGES.join(", ")
        );
    }
    let mut runs = Vec::new();
    for &rows in &a.rows {
        one_size(a, rows, &mut runs)?;
    }
    let report = Report {
        players: a.players,
        scaling: scaling(&runs),
        runs,
    };
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    mm_run::outln!(
        "every stage in its own process; {} players, lakes grow by days; peak RSS is each process's VmHWM",
        report.players
    );
    mm_run::outln!(
        "{:<14} {:>12} {:>9} {:>9} {:>12} {:>12} {:>10}",
        "stage",
        "rows",
        "s",
        "cpu s",
        "rows/s",
        "rows/cpu-s",
        "peak MiB"
    );
    for r in &report.runs {
        mm_run::outln!(
            "{:<14} {:>12} {:>9.2} {:>9.2} {:>12.0} {:>12.0} {:>10.0}{}",
            r.stage,
            r.rows,
            r.seconds,
            r.cpu_seconds,
            r.rows_per_s,
            r.rows_per_cpu_s,
            r.peak_rss_mib,
            if r.unit == "rows" {
                String::new()
            } else {
                format!("  (rows are {})", r.unit)
            }
        );
    }
    if !report.scaling.is_empty() {
        mm_run::outln!("largest size over smallest:");
        mm_run::outln!("{:<14} {:>10} {:>12}", "stage", "peak RSS", "throughput");
        for g in &report.scaling {
            mm_run::outln!(
                "{:<14} {:>9.2}x {:>11.2}x",
                g.stage,
                g.rss_ratio,
                g.throughput_ratio
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_is_largest_over_smallest_per_stage() {
        let run = |stage: &str, rows: u64, seconds: f64, rss: f64| StageRun {
            stage: stage.into(),
            rows,
            unit: "rows".into(),
            seconds,
            rows_per_s: rows as f64 / seconds,
            cpu_seconds: seconds,
            rows_per_cpu_s: rows as f64 / seconds,
            peak_rss_mib: rss,
        };
        let g = scaling(&[
            run("fit-skill", 10, 1.0, 100.0),
            run("fit-skill", 30, 3.0, 110.0),
            run("fit-skill", 100, 20.0, 150.0),
            run("export", 10, 1.0, 50.0),
        ]);
        assert_eq!(g.len(), 1, "export has one size only");
        assert_eq!(g[0].stage, "fit-skill");
        assert!((g[0].rss_ratio - 1.5).abs() < 1e-12);
        assert!((g[0].throughput_ratio - 0.5).abs() < 1e-12);
    }
}
