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

pub mod daily;
mod summary;
pub use summary::summary;

const DAY_MS: i64 = 86_400_000;

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
    /// Held-out span at the end of the lake, milliseconds (whole days).
    pub holdout_ms: i64,
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
    /// Test hook: exit the process right after this stage, as a crash would.
    pub crash_after: Option<String>,
    /// The run id of a new run (the process's, so that log lines and the run log agree);
    /// `None`: a fresh one. A resumed run keeps the id it started with.
    pub run_id: Option<String>,
}

/// The stages, in order: the first two once per run, the others once per mode.
pub const STAGES: [&str; 7] = [
    "ingest",
    "cutoff",
    "fit-skill",
    "fit-churn",
    "export",
    "evaluate",
    "promote",
];

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
    /// The evaluation's holdout figures ([`Holdout`]) of the candidate and of `LATEST`.
    pub candidate: Option<serde_json::Value>,
    pub baseline_holdout: Option<serde_json::Value>,
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
        if self.holdout_ms < 86_400_000 {
            return Err(RetrainError::Input(format!(
                "--holdout-days is {}: at least one day is held out",
                self.holdout_ms / 86_400_000
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
        if !(0.0..=1.0).contains(&self.late_max) {
            return Err(RetrainError::Input(format!(
                "--late-max is {}: a share of the new rows, from 0 to 1",
                self.late_max
            )));
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
    if st.modes.is_empty() {
        // A state written before runs were per mode (or before the cutoff): the cutoff stage
        // chooses the modes, so it runs (again), and every per-mode stage after it.
        st.done.retain(|d| d == "ingest");
    }
    for stage in &STAGES[..2] {
        run_stage(cfg, &mut st, stage, None)?;
    }
    for m in 0..st.modes.len() {
        for stage in &STAGES[2..] {
            run_stage(cfg, &mut st, stage, Some(m))?;
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
    let promoted = st.modes.iter().any(ModeRun::promoted);
    Ok(RetrainReport {
        state: st,
        promoted,
        log,
    })
}

/// Runs one stage unless the state says it is done (`mode`: the index of the mode in
/// `st.modes`, for the per-mode stages), then saves the state.
fn run_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    stage: &str,
    mode: Option<usize>,
) -> Result<(), RetrainError> {
    let key = match mode {
        Some(m) => format!("{}/{stage}", st.modes[m].mode),
        None => stage.to_string(),
    };
    if st.done.contains(&key) {
        return Ok(());
    }
    let t = Instant::now();
    let mode_name = mode.map(|m| st.modes[m].mode.clone());
    let span = tracing::info_span!("stage", stage, mode = mode_name.as_deref());
    let _entered = span.enter();
    // The candidate's version once it is known: every later line carries it.
    let model_span = mode
        .and_then(|m| st.modes[m].version.clone())
        .map(|v| tracing::info_span!("model", model_version = v).entered());
    tracing::info!("{key}: started");
    match (stage, mode) {
        ("ingest", None) => {
            if let Some(world) = &cfg.simulate {
                simulate_stage(cfg, st, world)?;
            }
            if !cfg.inputs.is_empty() {
                let r = mm_ingest::ingest(
                    &mm_ingest::IngestConfig::new(&cfg.lake, cfg.inputs.clone()),
                    &mm_ingest::NoProgress,
                )?;
                st.ingested_rows = Some(r.lake_rows_written);
                let t = &r.totals;
                let reasons: Vec<String> = r
                    .files
                    .iter()
                    .flat_map(|f| f.quarantine_by_reason.iter())
                    .map(|(why, n)| format!("{n} {why}"))
                    .collect();
                st.notes.push(format!(
                    "ingested {} file(s): {} read = {} accepted + {} quarantined + {} duplicates + {} skipped{}",
                    r.files.len(),
                    t.read,
                    t.accepted,
                    t.quarantined,
                    t.duplicates,
                    t.skipped,
                    if reasons.is_empty() {
                        String::new()
                    } else {
                        format!(" (quarantined: {}; each row is kept with its reason in the lake's quarantine table)", reasons.join(", "))
                    }
                ));
            }
        }
        ("cutoff", None) => cutoff_stage(cfg, st)?,
        (_, Some(m)) => mode_stage(cfg, st, stage, m)?,
        _ => unreachable!("the first two stages run once, the others per mode"),
    }
    st.done.push(key.clone());
    let seconds = t.elapsed().as_secs_f64();
    st.timings_s.push((key.clone(), seconds));
    save(&cfg.work, st)?;
    let m = mode.map(|m| &st.modes[m]);
    tracing::info!(
        seconds = (seconds * 1000.0).round() / 1000.0,
        version = m.and_then(|m| m.version.as_deref()),
        decision = m.and_then(|m| m.decision.as_deref()),
        "{key}: done in {seconds:.2} s"
    );
    drop(model_span);
    if cfg.crash_after.as_deref() == Some(stage) {
        // Test hook: die here as a killed process would (no destructor runs, so the lock file
        // keeps the pid; the OS lock goes with the process).
        std::process::exit(101);
    }
    Ok(())
}

/// A simulated world: the `mm simulate` settings, each optional (the simulator's default
/// otherwise), in a TOML file such as `data/world.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    pub seed: Option<u64>,
    pub players: Option<usize>,
    pub days: Option<u32>,
    pub duel_share: Option<f64>,
    /// The first simulated day, `YYYY-MM-DD`.
    pub start: Option<String>,
    pub tick_s: Option<i64>,
}

impl World {
    /// Reads and checks a world file.
    ///
    /// # Errors
    /// [`RetrainError::Input`] naming the file and what is wrong in it.
    pub fn read(path: &Path) -> Result<mm_sim::SimConfig, RetrainError> {
        let bad = |why: String| RetrainError::Input(format!("{}: {why}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let w: World = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        let d = mm_sim::SimConfig::default();
        let start = match &w.start {
            Some(s) => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map_err(|e| bad(format!("start = {s:?}: {e} (YYYY-MM-DD)")))?,
            None => d.start,
        };
        Ok(mm_sim::SimConfig {
            seed: w.seed.unwrap_or(d.seed),
            players: w.players.unwrap_or(d.players),
            days: w.days.unwrap_or(d.days),
            duel_share: w.duel_share.unwrap_or(d.duel_share),
            start,
            tick_s: w.tick_s.unwrap_or(d.tick_s),
            lake: d.lake,
        })
    }
}

/// Simulates the world into the lake unless the lake already holds matches.
fn simulate_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    world: &Path,
) -> Result<(), RetrainError> {
    let mut sim = World::read(world)?;
    let has_matches = mm_lake::Lake::open(&cfg.lake).is_ok_and(|l| !l.match_entries().is_empty());
    if has_matches {
        st.notes.push(format!(
            "{}: the lake already holds matches, so the world was not simulated again",
            world.display()
        ));
        return Ok(());
    }
    sim.lake.clone_from(&cfg.lake);
    let r = mm_sim::simulate(&sim)?;
    st.notes.push(format!(
        "simulated {} ({} players over {} days, seed {}): {} 6v6 and {} 1v1 matches, {} rows",
        world.display(),
        sim.players,
        sim.days,
        sim.seed,
        r.matches_tdm,
        r.matches_duel,
        r.rows
    ));
    Ok(())
}

/// Pins the lake's version, cuts off the held-out days and chooses the modes to fit.
fn cutoff_stage(cfg: &RetrainConfig, st: &mut RunState) -> Result<(), RetrainError> {
    let lake = mm_lake::Lake::open(&cfg.lake)?;
    st.lake_version = lake.version();
    let days = lake.days()?;
    let last = *days.last().ok_or_else(|| {
        RetrainError::Input(format!("{}: the lake holds no matches", cfg.lake.display()))
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
    let counts = mode_rows(&lake, cutoff)?;
    let modes: Vec<String> = match &cfg.mode {
        Some(m) => vec![m.clone()],
        None => {
            for (m, (n, _)) in counts.iter().filter(|(_, (n, _))| *n < MIN_MODE_ROWS) {
                st.notes.push(format!(
                    "mode {m}: {n} rows before the cutoff, fewer than {MIN_MODE_ROWS}: not fitted"
                ));
            }
            counts
                .iter()
                .filter(|(_, (n, _))| *n >= MIN_MODE_ROWS)
                .map(|(m, _)| m.clone())
                .collect()
        }
    };
    if modes.is_empty() {
        return Err(RetrainError::Input(format!(
            "{}: no mode has {MIN_MODE_ROWS} rows before the cutoff ({})",
            cfg.lake.display(),
            counts
                .iter()
                .map(|(m, (n, _))| format!("{m}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if modes.len() > 1 && cfg.name.is_some() {
        return Err(RetrainError::Input(format!(
            "--name names one model, but the lake holds {} modes ({}): give --mode too",
            modes.len(),
            modes.join(", ")
        )));
    }
    st.modes = modes
        .into_iter()
        .map(|mode| {
            let with_kills = counts.get(&mode).map_or(0, |c| c.1);
            let metric = cfg.metric.unwrap_or(if with_kills > 0 {
                mm_fit::Metric::KillsPerEnemyDeath
            } else {
                mm_fit::Metric::Outcome
            });
            ModeRun {
                name: cfg.name.clone().unwrap_or_else(|| mode.clone()),
                mode,
                metric: Some(metric),
                ..ModeRun::default()
            }
        })
        .collect();
    plan_modes(cfg, st, &lake, cutoff)
}

/// Chooses, per mode, a full fit or the promoted model continued ([`daily::plan`]); a mode with
/// nothing new keeps its model and runs no stage.
fn plan_modes(
    cfg: &RetrainConfig,
    st: &mut RunState,
    lake: &mm_lake::Lake,
    cutoff: i64,
) -> Result<(), RetrainError> {
    let policy = daily::Policy {
        force_full: cfg.full,
        full_every_ms: cfg.full_every_ms,
        late_max: cfg.late_max,
    };
    for m in 0..st.modes.len() {
        let run = &st.modes[m];
        let store = Store::new(cfg.models.join(&run.name));
        let latest = match store.latest() {
            Ok(Some(v)) => match store.open(&v) {
                Ok(a) => Some(a),
                Err(e) => {
                    st.modes[m].full_reason = Some(format!("LATEST {v} cannot be read: {e}"));
                    continue;
                }
            },
            _ => None,
        };
        let plan = daily::plan(policy, latest.as_ref(), lake, &cfg.lake, &run.mode, cutoff)?;
        let mode = run.mode.clone();
        match plan {
            daily::Plan::Full(why) => {
                tracing::info!(mode = %mode, "{mode}: full fit ({why})");
                st.modes[m].full_reason = Some(why);
            }
            daily::Plan::Continue(c) => {
                tracing::info!(
                    mode = %mode,
                    base = %c.base,
                    new_rows = c.new_rows,
                    late_rows = c.late_rows,
                    "{mode}: continuing {} over {} new and {} late rows",
                    c.base,
                    c.new_rows,
                    c.late_rows
                );
                st.modes[m].baseline = Some(c.base.clone());
                st.modes[m].continued = Some(c);
            }
            daily::Plan::Nothing(why) => {
                let base = latest.map(|a| a.manifest.model_version).unwrap_or_default();
                st.modes[m].baseline = Some(base.clone());
                st.modes[m].decision = Some(format!("kept {base}: {why}"));
                for stage in &STAGES[2..] {
                    st.done.push(format!("{mode}/{stage}"));
                }
            }
        }
    }
    Ok(())
}

/// Player-match rows per mode before `cutoff_ms`, and how many of them carry kills, sorted
/// by mode.
fn mode_rows(
    lake: &mm_lake::Lake,
    cutoff_ms: i64,
) -> Result<std::collections::BTreeMap<String, (u64, u64)>, RetrainError> {
    use arrow_array::cast::AsArray;
    use mm_lake::schema::col;
    let mut counts = std::collections::BTreeMap::new();
    let last_day = (cutoff_ms / DAY_MS) as i32;
    for day in lake.days()?.into_iter().filter(|&d| d < last_day) {
        for path in lake.partition_files(day)? {
            let cols = [col::MODE, col::KILLS];
            for b in mm_lake::parquet_io::read_parquet_columns(&path, Some(&cols))? {
                let (Some(modes), Some(kills)) =
                    (b.column_by_name(col::MODE), b.column_by_name(col::KILLS))
                else {
                    continue;
                };
                for (i, v) in modes.as_string::<i32>().iter().enumerate() {
                    let Some(v) = v else { continue };
                    if !counts.contains_key(v) {
                        counts.insert(v.to_string(), (0, 0));
                    }
                    if let Some(c) = counts.get_mut(v) {
                        c.0 += 1;
                        c.1 += u64::from(kills.is_valid(i));
                    }
                }
            }
        }
    }
    Ok(counts)
}

/// One per-mode stage: the fits and the evaluation read the pinned lake before / after the
/// cutoff; export and promote work on the mode's model.
fn mode_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    stage: &str,
    m: usize,
) -> Result<(), RetrainError> {
    let run = st.modes[m].clone();
    let dir = run.dir(&cfg.work);
    let (skill_dir, churn_dir, eval_dir) =
        (dir.join("skill"), dir.join("churn"), dir.join("evaluation"));
    let mode = Some(run.mode.clone());
    if let Some(mut c) = run.continued.clone() {
        match stage {
            "fit-skill" => {
                let store = Store::new(cfg.models.join(&run.name));
                let art = store.open(&c.base)?;
                let lake = mm_lake::Lake::open_as_of(&cfg.lake, pinned(st))?;
                let cutoff = st.cutoff_ms.unwrap_or(i64::MAX);
                daily::continue_model(
                    &art,
                    &lake,
                    &cfg.lake,
                    &run.mode,
                    cutoff,
                    &mut c,
                    &daily::Window {
                        dir: dir.join("team-window"),
                        days: cfg.window_days,
                    },
                    &dir.join("continued"),
                )?;
                st.modes[m].continued = Some(c);
                return Ok(());
            }
            // The churn model is the base's (refitted by full runs).
            "fit-churn" => return Ok(()),
            "export" => return export_stage(cfg, st, m, &skill_dir, &churn_dir),
            _ => {}
        }
    }
    match stage {
        "fit-skill" => {
            let mut c = mm_fit::SkillConfig::new(cfg.lake.clone(), skill_dir);
            c.mode = mode;
            c.metric = run.metric.unwrap_or(mm_fit::Metric::KillsPerEnemyDeath);
            c.until_ms = st.cutoff_ms;
            c.as_of = pinned(st);
            mm_fit::fit_skill(&c)?;
        }
        "fit-churn" => {
            let mut c = mm_fit::churn::ChurnConfig::new(&cfg.lake, &churn_dir);
            c.mode = mode;
            c.until_ms = st.cutoff_ms;
            c.skill = Some(skill_dir);
            c.as_of = pinned(st);
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
        "export" => export_stage(cfg, st, m, &skill_dir, &churn_dir)?,
        "evaluate" => {
            let store = Store::new(cfg.models.join(&run.name));
            let version = run.version.clone().unwrap_or_default();
            let mut e = EvalConfig::new(&cfg.lake, store.dir(&version), &eval_dir);
            e.mode = mode;
            e.from_ms = st.cutoff_ms;
            e.as_of = pinned(st);
            e.rounds = cfg.rounds;
            e.pool_sizes.clone_from(&cfg.pool_sizes);
            e.tick_s = cfg.tick_s;
            e.compare = run.baseline.as_ref().map(|b| store.dir(b));
            let r = match mm_eval::evaluate(&e) {
                Err(EvalError::Input(msg)) if msg.contains("holds only") => {
                    // Too few players for the pools: score the holdout only.
                    st.notes.push(format!("{}: pools skipped: {msg}", run.mode));
                    e.pool_sizes.clear();
                    mm_eval::evaluate(&e)?
                }
                r => r?,
            };
            let fig = |h: Option<&Holdout>| h.and_then(|h| serde_json::to_value(h).ok());
            st.modes[m].candidate = fig(r.holdout.first());
            st.modes[m].baseline_holdout = fig(r.holdout.get(1));
        }
        "promote" => {
            let store = Store::new(cfg.models.join(&run.name));
            let version = run.version.clone().unwrap_or_default();
            let (ok, why) = gate(
                run.candidate.as_ref(),
                run.baseline_holdout.as_ref(),
                cfg.margin,
            );
            st.modes[m].decision = Some(if ok {
                store.promote(&version)?;
                format!("promoted {version}: {why}")
            } else {
                format!("kept {}: {why}", run.baseline.clone().unwrap_or_default())
            });
        }
        _ => unreachable!("every per-mode stage is handled"),
    }
    Ok(())
}

fn export_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    m: usize,
    skill_dir: &Path,
    churn_dir: &Path,
) -> Result<(), RetrainError> {
    let name = st.modes[m].name.clone();
    let store = Store::new(cfg.models.join(&name));
    if st.modes[m].version.is_none() {
        // Fix the version name before exporting, so a crash after the publish is found.
        let next = store
            .versions()
            .unwrap_or_default()
            .iter()
            .filter_map(|v| v.strip_prefix('v').and_then(|d| d.parse::<u32>().ok()))
            .max()
            .unwrap_or(0)
            + 1;
        st.modes[m].version = Some(format!("v{next:04}"));
        st.modes[m].baseline = store.latest().ok().flatten();
        save(&cfg.work, st)?;
    }
    let version = st.modes[m].version.clone().unwrap_or_default();
    if store.dir(&version).is_dir() && store.open(&version).is_ok() {
        st.notes.push(format!(
            "{name} {version} was already published; verified, not exported again"
        ));
        return Ok(());
    }
    if st.modes[m].continued.is_some() {
        let dir = st.modes[m].dir(&cfg.work).join("continued");
        let (manifest, files) = daily::read_continued(&dir)?;
        store.publish(&version, manifest, &files, false, None)?;
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
