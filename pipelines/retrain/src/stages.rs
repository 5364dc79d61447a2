//! The stages' bodies: simulate and ingest, the cutoff and each mode's plan, and per mode the
//! fits (or the continued model), export, evaluation and promotion.

use std::path::Path;

use mm_artifact::Store;
use mm_eval::{EvalConfig, EvalError};
use serde::Deserialize;

use crate::{
    DAY_MS, MIN_MODE_ROWS, ModeRun, RetrainConfig, RetrainError, RunState, Saver, daily, gate,
    pinned,
};

/// The stages run once per run, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedStage {
    Ingest,
    Cutoff,
}

/// The stages run per mode, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeStage {
    FitSkill,
    FitChurn,
    Export,
    Evaluate,
    Promote,
}

impl SharedStage {
    pub const ALL: [SharedStage; 2] = [SharedStage::Ingest, SharedStage::Cutoff];

    /// The name in the run state, the log and `--crash-after`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            SharedStage::Ingest => "ingest",
            SharedStage::Cutoff => "cutoff",
        }
    }
}

impl ModeStage {
    pub const ALL: [ModeStage; 5] = [
        ModeStage::FitSkill,
        ModeStage::FitChurn,
        ModeStage::Export,
        ModeStage::Evaluate,
        ModeStage::Promote,
    ];

    /// The name in the run state (after the mode: `tdm-6v6/fit-skill`), the log and
    /// `--crash-after`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            ModeStage::FitSkill => "fit-skill",
            ModeStage::FitChurn => "fit-churn",
            ModeStage::Export => "export",
            ModeStage::Evaluate => "evaluate",
            ModeStage::Promote => "promote",
        }
    }
}

/// Every stage's name, in the order a run takes them.
#[must_use]
pub fn stage_names() -> Vec<&'static str> {
    SharedStage::ALL
        .iter()
        .map(|s| s.name())
        .chain(ModeStage::ALL.iter().map(|s| s.name()))
        .collect()
}

/// Simulates the world (with `--simulate`) and ingests the inputs, if any.
pub(crate) fn ingest_stage(cfg: &RetrainConfig, st: &mut RunState) -> Result<(), RetrainError> {
    if let Some(world) = &cfg.simulate {
        simulate_stage(cfg, st, world)?;
    }
    if !cfg.inputs.is_empty() {
        let mut c = cfg
            .ingest
            .clone()
            .unwrap_or_else(|| mm_ingest::IngestConfig::new(&cfg.lake, Vec::new()));
        c.lake.clone_from(&cfg.lake);
        c.inputs.clone_from(&cfg.inputs);
        let r = mm_ingest::ingest(&c, &mm_ingest::NoProgress)?;
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
pub(crate) fn cutoff_stage(cfg: &RetrainConfig, st: &mut RunState) -> Result<(), RetrainError> {
    let lake = mm_lake::Lake::open(&cfg.lake)?;
    st.lake_version = lake.version();
    let days = lake.days()?;
    let last = *days.last().ok_or_else(|| {
        RetrainError::Input(format!("{}: the lake holds no matches", cfg.lake.display()))
    })?;
    let end = (i64::from(last) + 1) * DAY_MS;
    let cutoff = end - cfg.holdout_days * DAY_MS;
    if cutoff <= i64::from(days[0]) * DAY_MS {
        return Err(RetrainError::Input(format!(
            "{}: the lake spans {} day(s); a holdout of {} day(s) leaves nothing to train on",
            cfg.lake.display(),
            days.len(),
            cfg.holdout_days
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
                for stage in ModeStage::ALL {
                    st.done.push(format!("{mode}/{}", stage.name()));
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
    for f in lake
        .match_entries()
        .iter()
        .filter(|f| f.day.is_some_and(|d| d < last_day))
    {
        // A file of one mode with its counts in the log is not read.
        if let (Some((lo, hi)), Some(rows), Some(without)) =
            (&f.mode_range, f.rows, f.rows_without_kills)
            && lo == hi
        {
            let c = counts.entry(lo.clone()).or_insert((0, 0));
            c.0 += rows;
            c.1 += rows.saturating_sub(without);
            continue;
        }
        let path = lake.match_file(&f.path)?;
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
    Ok(counts)
}

/// One per-mode stage: the fits and the evaluation read the pinned lake before / after the
/// cutoff; export and promote work on the mode's model.
pub(crate) fn mode_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    stage: ModeStage,
    m: usize,
    saver: &Saver<'_>,
) -> Result<(), RetrainError> {
    let run = st.modes[m].clone();
    let dir = run.dir(&cfg.work);
    let (skill_dir, churn_dir, eval_dir) =
        (dir.join("skill"), dir.join("churn"), dir.join("evaluation"));
    let mode = Some(run.mode.clone());
    if let Some(mut c) = run.continued.clone() {
        match stage {
            ModeStage::FitSkill => {
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
                    &window(cfg, st, &dir),
                    &dir.join("continued"),
                )?;
                st.modes[m].continued = Some(c);
                return Ok(());
            }
            // The churn model is the base's (refitted by full runs).
            ModeStage::FitChurn => return Ok(()),
            ModeStage::Export => return export_stage(cfg, st, m, &skill_dir, &churn_dir, saver),
            ModeStage::Evaluate | ModeStage::Promote => {}
        }
    }
    match stage {
        ModeStage::FitSkill => {
            let mut c = cfg
                .skill
                .clone()
                .unwrap_or_else(|| mm_fit::SkillConfig::new(cfg.lake.clone(), skill_dir.clone()));
            c.lake.clone_from(&cfg.lake);
            c.out = skill_dir;
            c.mode = mode;
            c.metric = run.metric.unwrap_or(mm_fit::Metric::KillsPerEnemyDeath);
            c.until_ms = st.cutoff_ms;
            c.as_of = pinned(st);
            mm_fit::fit_skill(&c)?;
        }
        ModeStage::FitChurn => {
            let mut c = cfg
                .churn
                .clone()
                .unwrap_or_else(|| mm_fit::churn::ChurnConfig::new(&cfg.lake, &churn_dir));
            c.lake.clone_from(&cfg.lake);
            c.out.clone_from(&churn_dir);
            c.mode = mode;
            c.until_ms = st.cutoff_ms;
            c.skill = Some(skill_dir);
            c.as_of = pinned(st);
            // The churn fit's own scoring window: the last quarter of the labelled part of
            // the training span (rows within the horizon of the cutoff have no label).
            c.score_from_ms = None;
            if let (Some(a), Some(b)) = (st.data_start_ms, st.cutoff_ms) {
                let labelled_end = b - c.horizon_ms;
                if labelled_end > a {
                    c.score_from_ms = Some(a + (labelled_end - a) / 4 * 3);
                }
            }
            mm_fit::churn::fit_churn(&c)?;
        }
        ModeStage::Export => export_stage(cfg, st, m, &skill_dir, &churn_dir, saver)?,
        ModeStage::Evaluate => {
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
                Err(too_large @ EvalError::PoolTooLarge { .. }) => {
                    // Too few players for the pools: score the holdout only.
                    st.notes
                        .push(format!("{}: pools skipped: {too_large}", run.mode));
                    e.pool_sizes.clear();
                    mm_eval::evaluate(&e)?
                }
                r => r?,
            };
            st.modes[m].candidate = r.holdout.first().cloned();
            st.modes[m].baseline_holdout = r.holdout.get(1).cloned();
        }
        ModeStage::Promote => {
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
    }
    Ok(())
}

fn export_stage(
    cfg: &RetrainConfig,
    st: &mut RunState,
    m: usize,
    skill_dir: &Path,
    churn_dir: &Path,
    saver: &Saver<'_>,
) -> Result<(), RetrainError> {
    let name = st.modes[m].name.clone();
    let store = Store::new(cfg.models.join(&name));
    if st.modes[m].version.is_none() {
        // Fix the version name before exporting, so a crash after the publish is found.
        st.modes[m].version = Some(store.next_version()?);
        st.modes[m].baseline = store.latest().ok().flatten();
        saver.save(&cfg.work, st)?;
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
        name: Some(name.clone()),
        version: Some(version.clone()),
        promote: false,
    })?;
    // The continued runs' churn window starts with this fit's rows of its last days.
    let features = churn_dir.join("churn_features.parquet");
    let cutoff = st.cutoff_ms.unwrap_or(i64::MAX);
    if features.is_file() {
        let art = store.open(&version)?;
        let dir = st.modes[m].dir(&cfg.work);
        let rows = crate::window::seed(
            &window(cfg, st, &dir),
            &st.run_id,
            &features,
            &art.churn.model.feature_names,
            cutoff,
        )?;
        st.notes.push(format!(
            "{name}: the churn window seeded with {rows} rows of the last {} day(s)",
            cfg.churn_window_days
        ));
    }
    Ok(())
}

/// The windows continued runs refit on, in the mode's working folder `dir`.
fn window(cfg: &RetrainConfig, st: &RunState, dir: &Path) -> crate::window::Window {
    crate::window::Window {
        dir: dir.join("team-window"),
        days: cfg.window_days,
        churn_dir: dir.join("churn-window"),
        churn_days: cfg.churn_window_days,
        churn_min_rows: cfg.churn_min_rows,
        run_id: st.run_id.clone(),
    }
}
