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

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use mm_eval::{EvalError, Holdout};

pub mod daily;
mod gate;
mod lock;
mod stages;
mod summary;
mod window;
pub use gate::gate;
pub use lock::{Lock, acquire};
pub use stages::{ModeStage, SharedStage, World, stage_names};
pub use summary::summary;

use mm_lake::schema::DAY_MS;

/// What to run.
#[derive(Debug, Clone)]
pub struct RetrainConfig {
    pub lake: PathBuf,
    /// New input files or directories to ingest first (none: retrain on the lake as it is).
    pub inputs: Vec<PathBuf>,
    /// A simulated world ([`World`], a TOML file) to write into the lake first when the lake
    /// holds no matches yet; a lake with matches is left as it is.
    pub simulate: Option<PathBuf>,
    pub models: PathBuf,
    /// Working directory: lock, state, fit outputs, evaluation, run log.
    pub work: PathBuf,
    /// The mode to fit (`None`: every mode of the lake with at least [`MIN_MODE_ROWS`] rows,
    /// each on its own).
    pub mode: Option<String>,
    /// The model's name under `models` (default: the mode, as `mm export` names it). Only
    /// with one mode.
    pub name: Option<String>,
    /// Whole days held out at the end of the lake for the evaluation (at least 1).
    pub holdout_days: i64,
    /// The candidate is promoted unless its holdout churn or win log-loss is worse than
    /// `LATEST`'s by more than this (nats per prediction).
    pub margin: f64,
    /// The skill metric (`mm fit skill --metric`); `None`: kills per enemy death for a mode
    /// whose rows carry kills, the outcome for one whose rows do not.
    pub metric: Option<mm_fit::Metric>,
    /// Evaluation rounds and pool sizes (1v1 modes).
    pub rounds: usize,
    pub pool_sizes: Vec<usize>,
    /// Team modes: the evaluation's queue replay tick, seconds (`mm evaluate --tick-s`).
    pub tick_s: f64,
    /// Fit every mode from the whole history even when a promoted model could be continued.
    pub full: bool,
    /// Continue a promoted model only while the last full fit in its chain ended less than
    /// this long before the run's cutoff (ms); then fit in full.
    pub full_every_ms: i64,
    /// Fit in full when more than this share of the rows since the promoted model started
    /// before its data's end (late matches).
    pub late_max: f64,
    /// A continued run refits the team win model on the matches of the last this many days
    /// of continued runs.
    pub window_days: i64,
    /// A continued run refits the churn model on the labelled feature rows of the last this
    /// many days (the full run's and the continued runs').
    pub churn_window_days: i64,
    /// A continued run refits the churn model once those rows hold at least this many
    /// labelled ones.
    pub churn_min_rows: usize,
    /// How many modes' chains (fit skill to promote) run at once, each on its own thread; at
    /// least 1. Peak memory is about that of the largest such modes' fits together.
    pub parallel_modes: usize,
    /// The settings the ingest stage starts from (`mm ingest`'s: `mm.toml`'s `[ingest]`
    /// table); the run sets the lake and the inputs. `None`: `mm ingest`'s defaults.
    pub ingest: Option<mm_ingest::IngestConfig>,
    /// The settings each mode's full skill fit starts from (`mm fit skill`'s: `mm.toml`'s
    /// `[fit.skill]` table); the run sets the lake, the output folder, the mode, the metric,
    /// the cutoff and the snapshot. `None`: the fit's defaults.
    pub skill: Option<mm_fit::SkillConfig>,
    /// The settings each mode's full churn fit starts from (`[fit.churn]`); the run sets the
    /// lake, the output folder, the mode, the cutoff, the snapshot, the skill fit it reads and
    /// the scoring window. `None`: the fit's defaults.
    pub churn: Option<mm_fit::churn::ChurnConfig>,
    /// Test hook: exit the process right after this stage, as a crash would.
    pub crash_after: Option<String>,
    /// The run id of a new run (the process's, so that log lines and the run log agree);
    /// `None`: a fresh one. A resumed run keeps the id it started with.
    pub run_id: Option<String>,
}

/// Modes with fewer player-match rows than this before the cutoff are not fitted (the run's
/// notes say so): a handful of stray rows would fail the fits and stop the other modes.
pub const MIN_MODE_ROWS: u64 = 1_000;

/// The run's state, saved after every stage.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: String,
    pub started_at: String,
    /// Finished stages: `ingest`, `cutoff`, then `<mode>/<stage>` for each mode.
    pub done: Vec<String>,
    pub timings_s: Vec<(String, f64)>,
    pub cutoff_ms: Option<i64>,
    /// Midnight of the lake's first day.
    pub data_start_ms: Option<i64>,
    pub ingested_rows: Option<u64>,
    /// The lake version (matches table) every stage after the ingest reads: one snapshot for
    /// the fits and the evaluation, however many runs add to the lake meanwhile.
    #[serde(default)]
    pub lake_version: Option<i64>,
    /// The modes fitted, each on its own, in the order they run (fixed at the cutoff stage).
    #[serde(default)]
    pub modes: Vec<ModeRun>,
    pub resumed: u32,
    pub notes: Vec<String>,
}

/// One mode's part of a run: its model name, candidate version and decision.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ModeRun {
    pub mode: String,
    /// The model's name under the models root (the mode, or `--name`).
    pub name: String,
    /// The skill metric, chosen at the cutoff stage.
    pub metric: Option<mm_fit::Metric>,
    pub version: Option<String>,
    pub baseline: Option<String>,
    /// The evaluation's holdout figures of the candidate and of `LATEST`.
    pub candidate: Option<Holdout>,
    pub baseline_holdout: Option<Holdout>,
    pub decision: Option<String>,
    /// Continued from the promoted model over the matches it has not seen ([`daily`]);
    /// `None`: fitted on the whole history, for the reason in `full_reason`.
    #[serde(default)]
    pub continued: Option<daily::Continued>,
    #[serde(default)]
    pub full_reason: Option<String>,
}

impl ModeRun {
    /// `<work>/<name>`: the mode's fits and evaluation.
    #[must_use]
    pub fn dir(&self, work: &Path) -> PathBuf {
        work.join(&self.name)
    }

    #[must_use]
    pub fn promoted(&self) -> bool {
        self.decision
            .as_deref()
            .is_some_and(|d| d.starts_with("promoted"))
    }
}

impl RetrainConfig {
    /// Checks what needs no data: at least one day held out, a positive replay tick.
    ///
    /// # Errors
    /// The first setting out of range, named as its flag.
    pub fn check(&self) -> Result<(), RetrainError> {
        if self.holdout_days < 1 {
            return Err(RetrainError::Input(format!(
                "--holdout-days is {}: at least one day is held out",
                self.holdout_days
            )));
        }
        if self.full_every_ms < DAY_MS {
            return Err(RetrainError::Input(format!(
                "--full-every is {} ms: at least a day (1d); every run is full with --full",
                self.full_every_ms
            )));
        }
        if self.window_days < 1 {
            return Err(RetrainError::Input(format!(
                "--window-days is {}: at least 1",
                self.window_days
            )));
        }
        if self.churn_window_days < 1 {
            return Err(RetrainError::Input(format!(
                "--churn-window-days is {}: at least 1",
                self.churn_window_days
            )));
        }
        if !(0.0..=1.0).contains(&self.late_max) {
            return Err(RetrainError::Input(format!(
                "--late-max is {}: a share of the new rows, from 0 to 1",
                self.late_max
            )));
        }
        if let Some(s) = &self.crash_after
            && !stage_names().contains(&s.as_str())
        {
            return Err(RetrainError::Input(format!(
                "--crash-after {s:?}: the stages are {}",
                stage_names().join(", ")
            )));
        }
        if self.parallel_modes < 1 {
            return Err(RetrainError::Input(
                "--parallel-modes is 0: at least 1 (one mode at a time)".into(),
            ));
        }
        if !(self.tick_s > 0.0 && self.tick_s.is_finite()) {
            return Err(RetrainError::Input(format!(
                "--tick-s is {}: the queue replay's tick must be a positive number of seconds",
                self.tick_s
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
    #[error("simulating the world: {0}")]
    Sim(#[from] mm_sim::SimError),
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
            RetrainError::Sim(x) => x.is_input(),
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
            run_id: cfg.run_id.clone().unwrap_or_else(mm_run::new_run_id),
            started_at: now_rfc3339(),
            ..RunState::default()
        },
    };
    st.notes.append(&mut log.clone());
    if st.modes.is_empty() {
        // A state written before runs were per mode (or before the cutoff): the cutoff stage
        // chooses the modes, so it runs (again), and every per-mode stage after it.
        st.done.retain(|d| d == "ingest");
    }
    for stage in SharedStage::ALL {
        run_stage(cfg, &mut st, Stage::Shared(stage), &Saver::Direct)?;
    }
    let st = run_modes(cfg, st)?;
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
    let promoted = st.modes.iter().any(ModeRun::promoted);
    Ok(RetrainReport {
        state: st,
        promoted,
        log,
    })
}
/// A stage of a run: a shared one, or a per-mode one of the mode at that index of
/// `st.modes`.
#[derive(Debug, Clone, Copy)]
enum Stage {
    Shared(SharedStage),
    Mode(ModeStage, usize),
}

/// How a stage saves the run's state: straight to `state.json` (the shared stages, which run
/// alone), or, for one mode's chain running beside others, by merging what this chain changed
/// (its mode's entry, its finished stages, its notes) into the run's state under a lock and
/// saving that, so that `state.json` always holds every chain's progress.
pub(crate) enum Saver<'a> {
    Direct,
    Merged {
        run: &'a Mutex<RunState>,
        mode: usize,
        /// How many of the chain's own notes are merged already.
        notes_merged: Cell<usize>,
    },
}

impl Saver<'_> {
    /// Saves `st` (a chain's own copy of the state, for [`Saver::Merged`]).
    pub(crate) fn save(&self, work: &Path, st: &RunState) -> Result<(), RetrainError> {
        let Saver::Merged {
            run,
            mode,
            notes_merged,
        } = self
        else {
            return save(work, st);
        };
        let mut run = run.lock().unwrap_or_else(PoisonError::into_inner);
        run.modes[*mode] = st.modes[*mode].clone();
        for d in &st.done {
            if !run.done.contains(d) {
                run.done.push(d.clone());
            }
        }
        for t in &st.timings_s {
            if !run.timings_s.iter().any(|(k, _)| *k == t.0) {
                run.timings_s.push(t.clone());
            }
        }
        run.notes.extend_from_slice(&st.notes[notes_merged.get()..]);
        notes_merged.set(st.notes.len());
        save(work, &run)
    }
}

/// Runs every mode's chain, `cfg.parallel_modes` at a time, each from its own copy of the
/// state (the shared stages are done: the cutoff, the lake version and the modes are fixed).
/// A chain that fails does not stop the others (each saves what it finished); the first
/// failure, in mode order, is returned.
fn run_modes(cfg: &RetrainConfig, st: RunState) -> Result<RunState, RetrainError> {
    let n = st.modes.len();
    let run = Mutex::new(st);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut failed: Vec<(usize, RetrainError)> = Vec::new();
    // Each chain's log lines keep the caller's span (the run id), which threads do not inherit.
    let span = tracing::Span::current();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..cfg.parallel_modes.min(n))
            .map(|_| {
                let (run, next, span) = (&run, &next, span.clone());
                s.spawn(move || {
                    let mut failed = Vec::new();
                    loop {
                        let m = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        if m >= n {
                            return failed;
                        }
                        if let Err(e) = span.in_scope(|| run_mode(cfg, run, m)) {
                            failed.push((m, e));
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            failed.extend(w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
    });
    failed.sort_by_key(|(m, _)| *m);
    match failed.into_iter().next() {
        Some((_, e)) => Err(e),
        None => Ok(run.into_inner().unwrap_or_else(PoisonError::into_inner)),
    }
}

/// Mode `m`'s stages, in order, on a copy of the run's state.
fn run_mode(cfg: &RetrainConfig, run: &Mutex<RunState>, m: usize) -> Result<(), RetrainError> {
    let mut st = run.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let saver = Saver::Merged {
        run,
        mode: m,
        notes_merged: Cell::new(st.notes.len()),
    };
    for stage in ModeStage::ALL {
        run_stage(cfg, &mut st, Stage::Mode(stage, m), &saver)?;
    }
    Ok(())
}

/// Runs one stage unless the state says it is done, then saves the state.
fn run_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    stage: Stage,
    saver: &Saver<'_>,
) -> Result<(), RetrainError> {
    let (name, mode) = match stage {
        Stage::Shared(s) => (s.name(), None),
        Stage::Mode(s, m) => (s.name(), Some(m)),
    };
    let key = match mode {
        Some(m) => format!("{}/{name}", st.modes[m].mode),
        None => name.to_string(),
    };
    if st.done.contains(&key) {
        return Ok(());
    }
    let t = Instant::now();
    let mode_name = mode.map(|m| st.modes[m].mode.clone());
    let span = tracing::info_span!("stage", stage = name, mode = mode_name.as_deref());
    let _entered = span.enter();
    // The candidate's version once it is known: every later line carries it.
    let model_span = mode
        .and_then(|m| st.modes[m].version.clone())
        .map(|v| tracing::info_span!("model", model_version = v).entered());
    tracing::info!("{key}: started");
    match stage {
        Stage::Shared(SharedStage::Ingest) => stages::ingest_stage(cfg, st)?,
        Stage::Shared(SharedStage::Cutoff) => stages::cutoff_stage(cfg, st)?,
        Stage::Mode(s, m) => stages::mode_stage(cfg, st, s, m, saver)?,
    }
    st.done.push(key.clone());
    let seconds = t.elapsed().as_secs_f64();
    st.timings_s.push((key.clone(), seconds));
    saver.save(&cfg.work, st)?;
    let m = mode.map(|m| &st.modes[m]);
    tracing::info!(
        seconds = (seconds * 1000.0).round() / 1000.0,
        version = m.and_then(|m| m.version.as_deref()),
        decision = m.and_then(|m| m.decision.as_deref()),
        "{key}: done in {seconds:.2} s"
    );
    drop(model_span);
    if cfg.crash_after.as_deref() == Some(name) {
        // Test hook: die here as a killed process would (no destructor runs, so the lock file
        // keeps the pid; the OS lock goes with the process).
        std::process::exit(101);
    }
    Ok(())
}
/// The snapshot the run pinned at its cutoff stage (the latest, for a run state from before
/// lake versions).
pub(crate) fn pinned(st: &RunState) -> mm_lake::AsOf {
    st.lake_version
        .map_or(mm_lake::AsOf::Latest, mm_lake::AsOf::Version)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(name: &str) -> ModeRun {
        ModeRun {
            mode: name.into(),
            name: name.into(),
            ..ModeRun::default()
        }
    }

    /// Two chains saving in turn, each from its own copy: `state.json` holds both chains'
    /// stages, timings, notes and mode entries after every save, and a chain never undoes the
    /// other's progress.
    #[test]
    fn merged_saves_keep_every_chains_progress() {
        let work = tempfile::tempdir().unwrap();
        let run = Mutex::new(RunState {
            run_id: "r".into(),
            done: vec!["ingest".into(), "cutoff".into()],
            modes: vec![mode("a"), mode("b")],
            notes: vec!["shared".into()],
            ..RunState::default()
        });
        let mut copies = [0, 1].map(|_| run.lock().unwrap().clone());
        let savers = [0, 1].map(|m| Saver::Merged {
            run: &run,
            mode: m,
            notes_merged: Cell::new(1),
        });
        let read = || -> RunState {
            serde_json::from_slice(&std::fs::read(work.path().join("state.json")).unwrap()).unwrap()
        };
        for (step, stage) in ["fit-skill", "fit-churn", "export"].iter().enumerate() {
            for m in [1, 0] {
                let st = &mut copies[m];
                let key = format!("{}/{stage}", st.modes[m].mode);
                st.done.push(key.clone());
                st.timings_s.push((key.clone(), step as f64));
                st.notes.push(format!("note {key}"));
                st.modes[m].version = Some(format!("v{step}{m}"));
                savers[m].save(work.path(), st).unwrap();
                let saved = read();
                assert!(saved.done.contains(&key), "{:?}", saved.done);
                assert_eq!(
                    saved.modes[m].version.as_deref(),
                    Some(&*format!("v{step}{m}"))
                );
                assert_eq!(
                    saved
                        .notes
                        .iter()
                        .filter(|n| **n == format!("note {key}"))
                        .count(),
                    1
                );
            }
        }
        let saved = read();
        assert_eq!(saved.done.len(), 2 + 6, "{:?}", saved.done);
        assert_eq!(saved.timings_s.len(), 6);
        assert_eq!(saved.notes.len(), 1 + 6, "{:?}", saved.notes);
        assert_eq!(saved.modes[0].version.as_deref(), Some("v20"));
        assert_eq!(saved.modes[1].version.as_deref(), Some("v21"));
        // The other chain's entry is untouched by a save: mode b's copy still has mode a at
        // its start, and saving it did not write that back.
        assert_eq!(copies[1].modes[0].version, None);
    }
}
