//! `mm retrain`: the whole chain, safe to run from a scheduler.
//!
//! Stages, in order: ingest the new inputs (when given), choose the cutoff (the last
//! `holdout` of the lake is held out), fit skill and churn on the data before the cutoff,
//! export the candidate without promoting it, evaluate it against the current `LATEST` on the
//! held-out window, and promote it only if it is not worse by more than the margin.
//!
//! - **Lock.** An OS file lock (`flock`) on `<work>/retrain.lock`, held for the whole run. The
//!   kernel releases it when the owner ends, however it ends, so a dead owner's lock is free
//!   and cannot be taken twice: of runs that start together, exactly one gets it. The owner's
//!   pid is written inside for the message of the runs that are refused; the file is never
//!   deleted (deleting a locked file lets a later run lock a new file beside a run still
//!   holding the old one). The interrupted run resumes.
//! - **Resume.** After every stage the run's state (`<work>/state.json`, written atomically)
//!   records what is done and what it produced. A restarted run skips finished stages. The
//!   candidate's version name is fixed before the export, so an export that finished before a
//!   crash is found (and verified) rather than repeated.
//! - **No half artifact.** Publishing is atomic (temporary directory, then rename) and the
//!   export never moves `LATEST`; only the promote stage does, by an atomic rename, after the
//!   gate.
//! - **Run log.** `<work>/runs.jsonl` gets one line per finished run: stages with timings, the
//!   gate's figures and the decision.

use std::path::{Path, PathBuf};
use std::time::Instant;

use mm_artifact::Store;
use serde::{Deserialize, Serialize};

use mm_eval::{EvalConfig, EvalError, Holdout};

const DAY_MS: i64 = 86_400_000;

/// What to run.
#[derive(Debug, Clone)]
pub struct RetrainConfig {
    pub lake: PathBuf,
    /// New input files or directories to ingest first (none: retrain on the lake as it is).
    pub inputs: Vec<PathBuf>,
    pub models: PathBuf,
    /// Working directory: lock, state, fit outputs, evaluation, run log.
    pub work: PathBuf,
    /// The mode to fit (`None`: all modes).
    pub mode: Option<String>,
    /// The model's name under `models` (default: the mode, as `mm export` names it).
    pub name: Option<String>,
    /// Held-out span at the end of the lake, milliseconds (whole days).
    pub holdout_ms: i64,
    /// The candidate is promoted unless its holdout churn or win log-loss is worse than
    /// `LATEST`'s by more than this (nats per prediction).
    pub margin: f64,
    /// The skill metric (`mm fit skill --metric`).
    pub metric: mm_fit::Metric,
    /// Evaluation rounds and pool sizes (1v1 modes).
    pub rounds: usize,
    pub pool_sizes: Vec<usize>,
    /// Test hook: exit the process right after this stage, as a crash would.
    pub crash_after: Option<String>,
    /// The run id of a new run (the process's, so that log lines and the run log agree);
    /// `None`: a fresh one. A resumed run keeps the id it started with.
    pub run_id: Option<String>,
}

/// The stages, in order.
pub const STAGES: [&str; 7] = [
    "ingest",
    "cutoff",
    "fit-skill",
    "fit-churn",
    "export",
    "evaluate",
    "promote",
];

/// The run's state, saved after every stage.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: String,
    pub started_at: String,
    pub done: Vec<String>,
    pub timings_s: Vec<(String, f64)>,
    pub cutoff_ms: Option<i64>,
    /// Midnight of the lake's first day.
    pub data_start_ms: Option<i64>,
    pub name: Option<String>,
    pub version: Option<String>,
    pub baseline: Option<String>,
    pub ingested_rows: Option<u64>,
    /// The lake version (matches table) every stage after the ingest reads: one snapshot for
    /// the fits and the evaluation, however many runs add to the lake meanwhile.
    #[serde(default)]
    pub lake_version: Option<i64>,
    /// The evaluation's holdout figures ([`Holdout`]) of the candidate and of `LATEST`.
    pub candidate: Option<serde_json::Value>,
    pub baseline_holdout: Option<serde_json::Value>,
    pub decision: Option<String>,
    pub resumed: u32,
    pub notes: Vec<String>,
}

impl RetrainConfig {
    /// Checks what needs no data: at least one day held out.
    ///
    /// # Errors
    /// The first setting out of range, named as its flag.
    pub fn check(&self) -> Result<(), RetrainError> {
        if self.holdout_ms < 86_400_000 {
            return Err(RetrainError::Input(format!(
                "--holdout-days is {}: at least one day is held out",
                self.holdout_ms / 86_400_000
            )));
        }
        Ok(())
    }
}

/// Why a retrain did not run.
#[derive(Debug, thiserror::Error)]
pub enum RetrainError {
    #[error(
        "{lock}: another retrain is running ({}); not starting a second one",
        pid.map_or_else(|| "its pid is not written yet".to_string(), |p| format!("pid {p}"))
    )]
    Locked { lock: PathBuf, pid: Option<u32> },
    #[error(transparent)]
    Eval(#[from] EvalError),
    #[error(transparent)]
    Fit(#[from] mm_fit::FitError),
    #[error(transparent)]
    Ingest(#[from] mm_ingest::IngestError),
    #[error(transparent)]
    Artifact(#[from] mm_artifact::ArtifactError),
    #[error(transparent)]
    Lake(#[from] mm_lake::LakeError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Input(String),
}

impl RetrainError {
    /// Bad input (exit code 2): an invalid setting, or an evaluation or lake that cannot use
    /// what it was given.
    #[must_use]
    pub fn is_input(&self) -> bool {
        match self {
            RetrainError::Input(_) => true,
            RetrainError::Eval(x) => x.is_input(),
            RetrainError::Lake(x) => x.is_input(),
            _ => false,
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RetrainError + '_ {
    move |source| RetrainError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The run's lock: an OS lock on `<work>/retrain.lock`, released by the kernel when the file
/// is closed or the process dies. On a clean end the pid inside is cleared.
#[derive(Debug)]
pub struct Lock {
    file: std::fs::File,
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Still holding the lock: nobody reads a half-cleared file.
        let _ = self.file.set_len(0);
    }
}

/// Takes the lock of `work`, or says who holds it. A pid left in the file by an owner that
/// died is reported in `log` as taken over.
///
/// # Errors
/// [`RetrainError::Locked`] while another process holds it; an I/O error.
pub fn acquire(work: &Path, log: &mut Vec<String>) -> Result<Lock, RetrainError> {
    use std::io::{Read as _, Seek as _, Write as _};
    let path = work.join("retrain.lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    let mut owner = String::new();
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let _ = file.read_to_string(&mut owner);
            return Err(RetrainError::Locked {
                lock: path,
                pid: owner.trim().parse().ok(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(io(&path)(e)),
    }
    let _ = file.read_to_string(&mut owner);
    if let Ok(pid) = owner.trim().parse::<u32>() {
        let line = format!("took over a stale lock (pid {pid}, no longer running)");
        tracing::warn!(stale_pid = pid, "{line}");
        log.push(line);
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.sync_all())
        .map_err(io(&path))?;
    Ok(Lock { file })
}

fn save(work: &Path, st: &RunState) -> Result<(), RetrainError> {
    let path = work.join("state.json");
    let bytes = serde_json::to_vec_pretty(st).map_err(|e| RetrainError::Input(e.to_string()))?;
    mm_eval::report::write_atomic(&path, &bytes)?;
    Ok(())
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What a retrain did.
#[derive(Debug, Clone, Serialize)]
pub struct RetrainReport {
    pub state: RunState,
    pub promoted: bool,
    pub log: Vec<String>,
}

/// Runs (or resumes) the chain.
///
/// # Errors
/// Another run holds the lock, or a stage failed (the state keeps what finished; the next run
/// resumes from there).
pub fn retrain(cfg: &RetrainConfig) -> Result<RetrainReport, RetrainError> {
    cfg.check()?;
    std::fs::create_dir_all(&cfg.work).map_err(io(&cfg.work))?;
    let mut log = Vec::new();
    let _lock = acquire(&cfg.work, &mut log)?;
    let state_path = cfg.work.join("state.json");
    let mut st: RunState = match std::fs::read(&state_path) {
        Ok(b) => {
            let mut s: RunState = serde_json::from_slice(&b)
                .map_err(|e| RetrainError::Input(format!("{}: {e}", state_path.display())))?;
            s.resumed += 1;
            let line = format!(
                "resuming run {} after {}",
                s.run_id,
                s.done.last().map_or("no stage", String::as_str)
            );
            tracing::info!(resumes = %s.run_id, "{line}");
            log.push(line);
            s
        }
        Err(_) => RunState {
            run_id: cfg.run_id.clone().unwrap_or_else(mm_lake::new_run_id),
            started_at: now_rfc3339(),
            ..RunState::default()
        },
    };
    st.notes.append(&mut log.clone());
    let skill_dir = cfg.work.join("skill");
    let churn_dir = cfg.work.join("churn");
    let eval_dir = cfg.work.join("evaluation");
    for stage in STAGES {
        if st.done.iter().any(|d| d == stage) {
            continue;
        }
        let t = Instant::now();
        let span = tracing::info_span!("stage", stage);
        let _entered = span.enter();
        // The candidate's version once it is known: every later line carries it.
        let model_span = st
            .version
            .as_deref()
            .map(|v| tracing::info_span!("model", model_version = v).entered());
        tracing::info!("{stage}: started");
        match stage {
            "ingest" => {
                if !cfg.inputs.is_empty() {
                    let r = mm_ingest::ingest(
                        &mm_ingest::IngestConfig::new(&cfg.lake, cfg.inputs.clone()),
                        &mm_ingest::NoProgress,
                    )?;
                    st.ingested_rows = Some(r.lake_rows_written);
                }
            }
            "cutoff" => {
                let lake = mm_lake::Lake::open(&cfg.lake)?;
                st.lake_version = lake.version();
                let days = lake.days()?;
                let last = *days.last().ok_or_else(|| {
                    RetrainError::Input(format!(
                        "{}: the lake holds no matches",
                        cfg.lake.display()
                    ))
                })?;
                let end = (i64::from(last) + 1) * DAY_MS;
                let cutoff = (end - cfg.holdout_ms).div_euclid(DAY_MS) * DAY_MS;
                if cutoff <= i64::from(days[0]) * DAY_MS {
                    return Err(RetrainError::Input(format!(
                        "{}: the lake spans {} day(s); a holdout of {} day(s) leaves nothing to train on",
                        cfg.lake.display(),
                        days.len(),
                        cfg.holdout_ms / DAY_MS
                    )));
                }
                st.cutoff_ms = Some(cutoff);
                st.data_start_ms = Some(i64::from(days[0]) * DAY_MS);
            }
            "fit-skill" => {
                let mut c = mm_fit::SkillConfig::new(cfg.lake.clone(), skill_dir.clone());
                c.mode.clone_from(&cfg.mode);
                c.metric = cfg.metric;
                c.until_ms = st.cutoff_ms;
                c.as_of = pinned(&st);
                mm_fit::fit_skill(&c)?;
            }
            "fit-churn" => {
                let mut c = mm_fit::churn::ChurnConfig::new(&cfg.lake, &churn_dir);
                c.mode.clone_from(&cfg.mode);
                c.until_ms = st.cutoff_ms;
                c.skill = Some(skill_dir.clone());
                c.as_of = pinned(&st);
                // The churn fit's own scoring window: the last quarter of the labelled part of
                // the training span (rows within the horizon of the cutoff have no label).
                if let (Some(a), Some(b)) = (st.data_start_ms, st.cutoff_ms) {
                    let labelled_end = b - c.horizon_ms;
                    if labelled_end > a {
                        c.score_from_ms = Some(a + (labelled_end - a) / 4 * 3);
                    }
                }
                mm_fit::churn::fit_churn(&c)?;
            }
            "export" => export_stage(cfg, &mut st, &skill_dir, &churn_dir)?,
            "evaluate" => {
                let name = st.name.clone().unwrap_or_default();
                let store = Store::new(cfg.models.join(&name));
                let version = st.version.clone().unwrap_or_default();
                let mut e = EvalConfig::new(&cfg.lake, store.dir(&version), &eval_dir);
                e.mode.clone_from(&cfg.mode);
                e.from_ms = st.cutoff_ms;
                e.as_of = pinned(&st);
                e.rounds = cfg.rounds;
                e.pool_sizes.clone_from(&cfg.pool_sizes);
                e.compare = st.baseline.as_ref().map(|b| store.dir(b));
                let r = match mm_eval::evaluate(&e) {
                    Err(EvalError::Input(msg)) if msg.contains("holds only") => {
                        // Too few players for the pools: score the holdout only.
                        st.notes.push(format!("pools skipped: {msg}"));
                        e.pool_sizes.clear();
                        mm_eval::evaluate(&e)?
                    }
                    r => r?,
                };
                let fig = |h: Option<&Holdout>| h.and_then(|h| serde_json::to_value(h).ok());
                st.candidate = fig(r.holdout.first());
                st.baseline_holdout = fig(r.holdout.get(1));
            }
            "promote" => {
                let name = st.name.clone().unwrap_or_default();
                let store = Store::new(cfg.models.join(&name));
                let version = st.version.clone().unwrap_or_default();
                let (ok, why) = gate(
                    st.candidate.as_ref(),
                    st.baseline_holdout.as_ref(),
                    cfg.margin,
                );
                if ok {
                    store.promote(&version)?;
                    st.decision = Some(format!("promoted {version}: {why}"));
                } else {
                    st.decision = Some(format!(
                        "kept {}: {why}",
                        st.baseline.clone().unwrap_or_default()
                    ));
                }
            }
            _ => unreachable!("every stage is handled"),
        }
        st.done.push(stage.to_string());
        let seconds = t.elapsed().as_secs_f64();
        st.timings_s.push((stage.to_string(), seconds));
        save(&cfg.work, &st)?;
        tracing::info!(
            seconds = (seconds * 1000.0).round() / 1000.0,
            version = st.version.as_deref(),
            decision = st.decision.as_deref(),
            "{stage}: done in {seconds:.2} s"
        );
        drop(model_span);
        if cfg.crash_after.as_deref() == Some(stage) {
            // Test hook: die here as a killed process would (the lock stays behind).
            std::mem::forget(_lock);
            std::process::exit(101);
        }
    }
    // Finished: append to the run log, keep the last state beside it, clear the state.
    let line = serde_json::to_string(&st).map_err(|e| RetrainError::Input(e.to_string()))?;
    let runs = cfg.work.join("runs.jsonl");
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&runs)
            .map_err(io(&runs))?;
        writeln!(f, "{line}").map_err(io(&runs))?;
        f.sync_all().map_err(io(&runs))?;
    }
    std::fs::rename(&state_path, cfg.work.join("last_run.json")).map_err(io(&state_path))?;
    mm_artifact::fsio::sync_dir(&cfg.work).map_err(io(&cfg.work))?;
    let promoted = st
        .decision
        .as_deref()
        .is_some_and(|d| d.starts_with("promoted"));
    Ok(RetrainReport {
        state: st,
        promoted,
        log,
    })
}

fn export_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    skill_dir: &Path,
    churn_dir: &Path,
) -> Result<(), RetrainError> {
    let name = cfg
        .name
        .clone()
        .or_else(|| cfg.mode.clone())
        .unwrap_or_else(|| "all-modes".to_string());
    let store = Store::new(cfg.models.join(&name));
    if st.version.is_none() {
        // Fix the version name before exporting, so a crash after the publish is found.
        let next = store
            .versions()
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.strip_prefix('v').and_then(|d| d.parse::<u32>().ok()))
            .max()
            .unwrap_or(0)
            + 1;
        st.version = Some(format!("v{next:04}"));
        st.baseline = store.latest().ok().flatten();
        st.name = Some(name.clone());
        save(&cfg.work, st)?;
    }
    let version = st.version.clone().unwrap_or_default();
    if store.dir(&version).is_dir() && store.open(&version).is_ok() {
        st.notes.push(format!(
            "{version} was already published; verified, not exported again"
        ));
        return Ok(());
    }
    mm_fit::export::export(&mm_fit::export::ExportConfig {
        skill: skill_dir.to_path_buf(),
        churn: churn_dir.to_path_buf(),
        models: cfg.models.clone(),
        name: Some(name),
        version: Some(version),
        promote: false,
    })?;
    Ok(())
}

/// The promotion rule: no baseline, or the candidate's holdout churn and win log-losses are
/// each at most the baseline's plus `margin`.
#[must_use]
pub fn gate(
    candidate: Option<&serde_json::Value>,
    baseline: Option<&serde_json::Value>,
    margin: f64,
) -> (bool, String) {
    let Some(c) = candidate.map(Figures::of) else {
        return (false, "no holdout figures for the candidate".into());
    };
    let Some(b) = baseline.map(Figures::of) else {
        return (true, "no current LATEST to compare with".into());
    };
    let worse = |x: f64, y: f64| x.is_finite() && y.is_finite() && x > y + margin;
    let churn_worse = worse(c.churn_log_loss, b.churn_log_loss);
    let win_worse = worse(c.win_log_loss, b.win_log_loss);
    let figures = format!(
        "holdout churn log-loss {:.4} vs {:.4}, win log-loss {:.4} vs {:.4}, margin {margin}",
        c.churn_log_loss, b.churn_log_loss, c.win_log_loss, b.win_log_loss
    );
    if churn_worse || win_worse {
        (false, format!("candidate worse: {figures}"))
    } else {
        (true, figures)
    }
}

/// The two figures the gate compares (`NaN` when absent).
struct Figures {
    churn_log_loss: f64,
    win_log_loss: f64,
}

impl Figures {
    fn of(v: &serde_json::Value) -> Figures {
        let get = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(f64::NAN)
        };
        Figures {
            churn_log_loss: get("churn_log_loss"),
            win_log_loss: get("win_log_loss"),
        }
    }
}

/// The snapshot the run pinned at its cutoff stage (the latest, for a run state from before
/// lake versions).
fn pinned(st: &RunState) -> mm_lake::AsOf {
    st.lake_version
        .map_or(mm_lake::AsOf::Latest, mm_lake::AsOf::Version)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Many would-be owners find the same dead owner's pid and race for the lock: exactly
    /// one gets it while the others hold their attempts, and it reports the take-over.
    #[test]
    fn one_winner_among_racing_runs_on_a_dead_lock() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("retrain.lock"), "4194999\n").unwrap();
            let barrier = std::sync::Barrier::new(8);
            let results: Vec<(bool, Vec<String>)> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            let mut log = Vec::new();
                            let r = acquire(dir.path(), &mut log);
                            let won = r.is_ok();
                            if let Err(e) = &r {
                                assert!(matches!(e, RetrainError::Locked { .. }), "{e}");
                            }
                            // Hold the attempt until every thread has tried.
                            barrier.wait();
                            drop(r);
                            (won, log)
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let winners: Vec<_> = results.iter().filter(|r| r.0).collect();
            assert_eq!(winners.len(), 1);
            assert!(
                winners[0].1[0].contains("pid 4194999"),
                "{:?}",
                winners[0].1
            );
            // Released and cleared: the next run takes it without a take-over.
            let mut log = Vec::new();
            let lock = acquire(dir.path(), &mut log).unwrap();
            assert!(log.is_empty(), "{log:?}");
            let pid = std::fs::read_to_string(dir.path().join("retrain.lock")).unwrap();
            assert_eq!(pid.trim(), std::process::id().to_string());
            drop(lock);
        }
    }
}
