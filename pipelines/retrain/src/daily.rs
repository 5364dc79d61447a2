//! The daily run: the promoted model continued over the matches it has not seen, instead of a
//! fit over the whole history.
//!
//! A model fitted on the lake at version `v` saw exactly the mode's matches that started before
//! the midnight after its snapshot's last match (`snapshot_as_of_ms`). What it has not seen,
//! in the run's pinned snapshot of the lake:
//!
//! - **new**: the mode's matches of the days from that midnight to the run's cutoff (read
//!   from the day partitions, however many commits wrote them);
//! - **late**: the mode's matches of earlier days in files the matches table gained after `v`
//!   with new data (`add` actions with `dataChange: true`, [`mm_lake::Lake::changes_since`]),
//!   so that `mm lake optimize` and other rewrites of old days bring nothing.
//!
//! They are applied to the artifact's player snapshot in start order (the late ones, which all
//! started earlier, first) by the service's own live update ([`LiveUpdater`]: raw skill's
//! update with the artifact's parameters and party offsets, and each player's match history);
//! without late matches this is the full replay's arithmetic, so raw skill equals a replay of
//! the whole history with the same parameters. Then the window counts are recounted from the
//! lake's rows of the last month (the snapshot keeps a few matches per player, too few to see
//! a busy player's old matches leave a window), the percentile map is refitted on the players
//! active in the last [`ACTIVE_DAYS`] days, and every player's percentile is read from it.
//!
//! The team win model (with the party adjustment) and the churn model are refitted on the
//! continued runs of the last `--window-days` once those hold enough matches ([`refit_team`],
//! [`refit_churn`]). The win skill is continued by the live update's step when the artifact
//! has one (`skill.json`'s `win_update`, format 7), and kept as it is otherwise; its choice of
//! estimator and raw skill's hyperparameters are the artifact's until a full run (`--full`,
//! and every `--full-every`).

use std::collections::HashMap;
use std::path::Path;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use mm_artifact::Artifact;
use mm_artifact::features::WINDOWS_MS;
use mm_artifact::load::{
    CHURN_FILE, ChurnFile, PARTY_FILE, PERCENTILES_FILE, PLAYERS_FILE, TEAM_WIN_FILE, json_bytes,
};
use mm_artifact::manifest::Manifest;
use mm_artifact::online::{FinishedMatch, LiveUpdater};
use mm_artifact::percentile::PercentileMap;
use mm_artifact::skill::RoleComparison;
use mm_artifact::snapshot::{PlayerState, WinColumns, write_snapshot};
use mm_artifact::team::{SkillBasis, TeamSample, TeamWinModel};
use mm_lake::Lake;
use mm_trainer::skill::team::TeamFitConfig;
use serde::{Deserialize, Serialize};

use crate::window::{ChurnRefit, ChurnRows, Window, counts_before, refit_churn, window_days};
use crate::{DAY_MS, RetrainError, io};

/// Players whose last match is at most this many days before the data's end make the
/// percentile map (the skill fit's `active_days`).
pub const ACTIVE_DAYS: i64 = 28;

/// Where a continued run starts and what it reads: fixed at the cutoff stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Continued {
    /// The version continued (the model's `LATEST` at the cutoff stage).
    pub base: String,
    /// The lake version the base was fitted on, and the version this run reads.
    pub from_lake_version: i64,
    pub to_lake_version: i64,
    /// The base saw the matches before this time (the midnight after its last match).
    pub from_ms: i64,
    /// The data end of the last full fit in the chain of continued versions (`--full-every`
    /// counts from it).
    pub full_data_end_ms: i64,
    /// The new and late matches and player-match rows of the mode.
    pub new_matches: u64,
    pub new_rows: u64,
    pub late_matches: u64,
    pub late_rows: u64,
    /// Players in the continued snapshot, and how many of them are new.
    #[serde(default)]
    pub players: u64,
    #[serde(default)]
    pub new_players: u64,
    /// What became of the team win model and party adjustment: refitted on the window's
    /// matches, or kept (and why).
    #[serde(default)]
    pub team_model: String,
    /// What became of the churn model: refitted at its C on the window's labelled rows, or
    /// kept (and why).
    #[serde(default)]
    pub churn_model: String,
}

/// An artifact's files: name and bytes.
pub type Files = Vec<(String, Vec<u8>)>;

/// What a mode's run does: a full fit (and why), a continued one, or nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Full(String),
    Continue(Continued),
    /// Nothing new since the base: the reason.
    Nothing(String),
}

/// The settings the choice reads.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub force_full: bool,
    pub full_every_ms: i64,
    pub late_max: f64,
}

fn date(ms: i64) -> String {
    mm_lake::schema::day_date(mm_lake::schema::day_of(ms))
}

/// The midnight after `ms` (UTC).
fn midnight_after(ms: i64) -> i64 {
    (ms.div_euclid(DAY_MS) + 1) * DAY_MS
}

/// The mode's matches of `files`, with start before `until`.
fn read_mode(
    files: &[std::path::PathBuf],
    mode: &str,
    until: i64,
) -> Result<Vec<FinishedMatch>, RetrainError> {
    let mut out = Vec::new();
    for f in files {
        for (m, fm) in mm_lake::results::read_finished(f)? {
            if m == mode && fm.start_ms < until {
                out.push(fm);
            }
        }
    }
    Ok(out)
}

/// The mode's matches and player-match rows in `files`, with start before `until`: three
/// columns read, not the matches (the plan only counts; the continuation reads them).
fn count_mode(
    files: &[std::path::PathBuf],
    mode: &str,
    until: i64,
) -> Result<(u64, u64), RetrainError> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::TimestampMillisecondType;
    use mm_lake::schema::col;
    let mut ids = std::collections::HashSet::new();
    let mut rows = 0u64;
    for f in files {
        let cols = [col::MATCH_ID, col::MODE, col::START_TIME];
        for b in mm_lake::parquet_io::read_parquet_columns(f, Some(&cols))? {
            let (Some(mid), Some(modes), Some(start)) = (
                b.column_by_name(col::MATCH_ID),
                b.column_by_name(col::MODE),
                b.column_by_name(col::START_TIME),
            ) else {
                continue;
            };
            let (mid, modes) = (mid.as_string::<i32>(), modes.as_string::<i32>());
            let start = start.as_primitive::<TimestampMillisecondType>();
            for i in 0..b.num_rows() {
                if modes.value(i) == mode && start.value(i) < until {
                    rows += 1;
                    if !ids.contains(mid.value(i)) {
                        ids.insert(mid.value(i).to_string());
                    }
                }
            }
        }
    }
    Ok((ids.len() as u64, rows))
}

/// The files of the days `[from_ms, until_ms)` of the pinned lake.
fn window_files(
    lake: &Lake,
    from_ms: i64,
    until_ms: i64,
) -> Result<Vec<std::path::PathBuf>, RetrainError> {
    let (first, end) = (from_ms.div_euclid(DAY_MS), until_ms.div_euclid(DAY_MS));
    let mut out = Vec::new();
    for day in lake.days()? {
        if i64::from(day) >= first && i64::from(day) < end.max(first) {
            out.extend(lake.partition_files(day)?);
        }
    }
    Ok(out)
}

/// The late files: added with new data after `version`, of days before `from_ms`.
fn late_files(
    lake: &Lake,
    version: i64,
    from_ms: i64,
) -> Result<Vec<std::path::PathBuf>, mm_lake::LakeError> {
    let first = from_ms.div_euclid(DAY_MS);
    let mut out = Vec::new();
    for change in lake.changes_since(version)? {
        for f in change.added {
            if f.day.is_some_and(|d| i64::from(d) < first) {
                out.push(lake.matches_file(&f)?);
            }
        }
    }
    Ok(out)
}

/// Chooses what the mode's run does. `latest`: the model's promoted version, if any, opened;
/// `lake`: the run's pinned snapshot; `cutoff_ms`: the run's cutoff.
///
/// # Errors
/// The lake cannot be read (a log that no longer reaches the base's version is not an error:
/// the run goes full and says so).
pub fn plan(
    policy: Policy,
    latest: Option<&Artifact>,
    lake: &Lake,
    lake_arg: &Path,
    mode: &str,
    cutoff_ms: i64,
) -> Result<Plan, RetrainError> {
    if policy.force_full {
        return Ok(Plan::Full("--full".into()));
    }
    let Some(art) = latest else {
        return Ok(Plan::Full("no promoted model to continue".into()));
    };
    let m = &art.manifest;
    let v = &m.model_version;
    if m.mode.as_deref() != Some(mode) {
        return Ok(Plan::Full(format!(
            "LATEST {v} was fitted on mode {:?}, not {mode:?}",
            m.mode
        )));
    }
    if m.data.lake != lake_arg.display().to_string() {
        return Ok(Plan::Full(format!(
            "LATEST {v} was fitted on the lake {:?}, not {:?}",
            m.data.lake,
            lake_arg.display().to_string()
        )));
    }
    let Some(from_version) = m.data.lake_version else {
        return Ok(Plan::Full(format!("LATEST {v} records no lake version")));
    };
    let to_version = lake.version().unwrap_or(-1);
    if from_version > to_version {
        return Ok(Plan::Full(format!(
            "LATEST {v} was fitted on lake version {from_version}, later than this run's \
             {to_version}"
        )));
    }
    if art.skill.raw_skill.roles == RoleComparison::Normalised {
        return Ok(Plan::Full(format!(
            "LATEST {v} compares roles by normalised metric, whose running statistics the \
             artifact does not keep"
        )));
    }
    let from_ms = midnight_after(m.snapshot_as_of_ms);
    if cutoff_ms < from_ms {
        return Ok(Plan::Full(format!(
            "this run's cutoff ({}) is before the end of LATEST {v}'s data ({})",
            date(cutoff_ms),
            date(from_ms)
        )));
    }
    let full_data_end_ms = m
        .metrics
        .get("continued")
        .and_then(|c| c.get("full_data_end_ms"))
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(from_ms);
    if cutoff_ms - full_data_end_ms >= policy.full_every_ms {
        return Ok(Plan::Full(format!(
            "the last full fit's data end at {}, {} day(s) before this run's cutoff (--full-every \
             {} day(s))",
            date(full_data_end_ms),
            (cutoff_ms - full_data_end_ms) / DAY_MS,
            policy.full_every_ms / DAY_MS
        )));
    }
    let late = match late_files(lake, from_version, from_ms) {
        Ok(f) => f,
        Err(mm_lake::LakeError::LogTruncated { version, .. }) => {
            return Ok(Plan::Full(format!(
                "the lake's log no longer holds version {version} (cleaned up after a \
                 checkpoint), so the matches added since LATEST {v}'s version {from_version} \
                 cannot be told apart"
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let (late_matches, late_rows) = count_mode(&late, mode, cutoff_ms)?;
    let (new_matches, new_rows) =
        count_mode(&window_files(lake, from_ms, cutoff_ms)?, mode, cutoff_ms)?;
    if new_rows + late_rows == 0 {
        return Ok(Plan::Nothing(format!(
            "no match of this mode since LATEST {v} (lake version {from_version}, data until {})",
            date(from_ms)
        )));
    }
    let share = late_rows as f64 / (new_rows + late_rows) as f64;
    if share > policy.late_max {
        return Ok(Plan::Full(format!(
            "{late_rows} of the {} rows since LATEST {v} started before its data's end ({:.1} %, \
             more than --late-max {:.1} %)",
            new_rows + late_rows,
            100.0 * share,
            100.0 * policy.late_max
        )));
    }
    Ok(Plan::Continue(Continued {
        base: v.clone(),
        from_lake_version: from_version,
        to_lake_version: to_version,
        from_ms,
        full_data_end_ms,
        new_matches,
        new_rows,
        late_matches,
        late_rows,
        players: 0,
        new_players: 0,
        team_model: String::new(),
        churn_model: String::new(),
    }))
}

/// The continued model: the base artifact's files with a new player snapshot and percentile
/// map, and its manifest, written into `out` (`manifest.json` and the files) for the export
/// stage to publish.
///
/// # Errors
/// The lake or the base cannot be read, or `out` cannot be written.
#[allow(clippy::too_many_arguments)]
pub fn continue_model(
    art: &Artifact,
    lake: &Lake,
    lake_arg: &Path,
    mode: &str,
    cutoff_ms: i64,
    c: &mut Continued,
    window: &Window,
    out: &Path,
) -> Result<(), RetrainError> {
    let late = late_files(lake, c.from_lake_version, c.from_ms)?;
    let mut matches = read_mode(&late, mode, cutoff_ms)?;
    let late_n = matches.len();
    matches.extend(read_mode(
        &window_files(lake, c.from_ms, cutoff_ms)?,
        mode,
        cutoff_ms,
    )?);
    // Start order, ties by match id, as the replay reads a day (its rows by team within a
    // match, which `read_finished` gives); the late ones all started before the others.
    matches[..late_n].sort_by(|a, b| (a.start_ms, &a.match_id).cmp(&(b.start_ms, &b.match_id)));
    matches[late_n..].sort_by(|a, b| (a.start_ms, &a.match_id).cmp(&(b.start_ms, &b.match_id)));
    c.late_matches = late_n as u64;
    c.late_rows = matches[..late_n].iter().map(|m| m.rows.len() as u64).sum();
    c.new_matches = (matches.len() - late_n) as u64;
    c.new_rows = matches[late_n..].iter().map(|m| m.rows.len() as u64).sum();

    let mut updater = LiveUpdater::new(art)
        .map_err(|e| RetrainError::Input(format!("{}: {e}", art.dir.display())))?;
    let mut touched: HashMap<String, PlayerState> = HashMap::new();
    // The data's end: the last match start.
    let end = matches
        .iter()
        .map(|m| m.start_ms)
        .fold(art.manifest.snapshot_as_of_ms, i64::max);
    let mut samples: Vec<TeamSample> = Vec::new();
    // Every player's match starts from a month before the first new match (or the end) on:
    // each new row's exact window counts and next match (its label), and every player's window
    // counts at the end.
    let first = matches.iter().map(|m| m.start_ms).fold(end, i64::min);
    let starts = player_starts(lake, mode, first - WINDOWS_MS[3], cutoff_ms)?;
    let mut rows = ChurnRows::new(&art.churn.model.feature_names);
    for m in &matches {
        let before: Vec<PlayerState> = m
            .rows
            .iter()
            .map(|r| {
                touched
                    .get(&r.player_id)
                    .cloned()
                    .unwrap_or_else(|| art.player_or_new(&r.player_id))
            })
            .collect();
        if let Some(s) = team_sample(art, m, &before) {
            samples.push(s);
        }
        rows.push_match(art, m, &before, &starts);
        for s in updater.apply(m, before) {
            touched.insert(s.player_id.clone(), s);
        }
    }
    let mut players = merged_players(art, touched, &starts, end, c);
    let active: Vec<f64> = players
        .iter()
        .filter(|p| p.last_seen_ms >= end - ACTIVE_DAYS * DAY_MS)
        .map(|p| p.raw_skill)
        .collect();
    let map = PercentileMap::fit(&active, art.percentiles.skill.len()).ok_or_else(|| {
        RetrainError::Input(format!("{}: no active player to map", lake_arg.display()))
    })?;
    for p in &mut players {
        p.percentile = map.percentile(p.raw_skill);
    }

    let team = refit_team(art, &samples, window, cutoff_ms)?;
    c.team_model = team.note.clone();
    let churn = refit_churn(art, &rows, &starts, end, window, cutoff_ms)?;
    c.churn_model = churn.note.clone();

    let files = artifact_files(art, &players, &map, &team, &churn)?;
    let mut manifest: Manifest = art.manifest.clone();
    manifest.created_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    manifest.code_version = env!("CARGO_PKG_VERSION").to_string();
    manifest.data.lake_version = Some(c.to_lake_version);
    manifest.data.last_match_ms = end;
    manifest.data.rows += c.new_rows + c.late_rows;
    manifest.data.matches += c.new_matches + c.late_matches;
    manifest.data.players = c.players;
    if let Some(m) = &churn.model {
        manifest.data.churn_train_rows = m.rows;
    }
    manifest.snapshot_as_of_ms = end;
    manifest.metrics.insert(
        "continued".into(),
        serde_json::to_value(&*c).map_err(|e| RetrainError::Input(e.to_string()))?,
    );
    write_artifact(out, &files, &manifest)
}

/// Every player: the snapshot's, updated where they played (`touched`), then the new ones, by
/// id, with their window counts at `end`.
fn merged_players(
    art: &Artifact,
    mut touched: HashMap<String, PlayerState>,
    starts: &HashMap<String, Vec<i64>>,
    end: i64,
    c: &mut Continued,
) -> Vec<PlayerState> {
    let mut players: Vec<PlayerState> = Vec::with_capacity(art.snapshot.len() + touched.len());
    for p in art.snapshot.iter() {
        players.push(touched.remove(&p.player_id).unwrap_or(p));
    }
    c.new_players = touched.len() as u64;
    players.extend(touched.into_values());
    players.sort_by(|a, b| a.player_id.cmp(&b.player_id));
    c.players = players.len() as u64;
    for p in &mut players {
        p.window_counts = starts
            .get(p.player_id.as_str())
            .map_or([0; 4], |s| counts_before(s, end));
        p.counts_as_of_ms = end;
    }
    players
}

/// The base's files, but for the snapshot, the percentile map and the refitted team and churn
/// models.
fn artifact_files(
    art: &Artifact,
    players: &[PlayerState],
    map: &PercentileMap,
    team: &TeamRefit,
    churn: &ChurnRefit,
) -> Result<Files, RetrainError> {
    let columns = WinColumns::of(art.snapshot.has_win_skill(), art.snapshot.has_win_mass());
    let history = art.churn.model.spec.history;
    let mut files: Files = Vec::new();
    for f in &art.manifest.files {
        let bytes = match f.path.as_str() {
            PLAYERS_FILE => write_snapshot(history, players, columns)
                .map_err(|e| RetrainError::Input(format!("writing the snapshot: {e}")))?,
            PERCENTILES_FILE => json_bytes(map),
            TEAM_WIN_FILE if team.model.is_some() => json_bytes(&team.model),
            // The party adjustment is in raw-skill units: a model on the win skill keeps the
            // base's.
            PARTY_FILE if team.model.is_some_and(|t| t.basis == SkillBasis::RawSkill) => {
                json_bytes(&team.model.and_then(|t| t.party_adjustment()))
            }
            CHURN_FILE if churn.model.is_some() => json_bytes(&ChurnFile {
                model: churn
                    .model
                    .clone()
                    .unwrap_or_else(|| art.churn.model.clone()),
                ..art.churn.clone()
            }),
            name => {
                let path = art.dir.join(name);
                std::fs::read(&path).map_err(io(&path))?
            }
        };
        files.push((f.path.clone(), bytes));
    }
    Ok(files)
}

/// Writes the continued artifact's files into `out`, each atomically, the manifest last.
fn write_artifact(out: &Path, files: &Files, manifest: &Manifest) -> Result<(), RetrainError> {
    std::fs::create_dir_all(out).map_err(io(out))?;
    for (name, bytes) in files {
        let p = out.join(name);
        mm_eval::report::write_atomic(&p, bytes)?;
    }
    let p = out.join("manifest.json");
    let bytes =
        serde_json::to_vec_pretty(manifest).map_err(|e| RetrainError::Input(e.to_string()))?;
    mm_eval::report::write_atomic(&p, &bytes)?;
    Ok(())
}

/// Reads what [`continue_model`] wrote into `dir`: the manifest and the files.
///
/// # Errors
/// A file is missing or the manifest does not parse.
pub fn read_continued(dir: &Path) -> Result<(Manifest, Files), RetrainError> {
    let p = dir.join("manifest.json");
    let m: Manifest = serde_json::from_slice(&std::fs::read(&p).map_err(io(&p))?)
        .map_err(|e| RetrainError::Input(format!("{}: {e}", p.display())))?;
    let mut files = Vec::new();
    for f in &m.files {
        let p = dir.join(&f.path);
        files.push((f.path.clone(), std::fs::read(&p).map_err(io(&p))?));
    }
    Ok((m, files))
}

/// What [`refit_team`] decided: the refitted model (`None`: the base's is kept) and why.
struct TeamRefit {
    model: Option<TeamWinModel>,
    note: String,
}

/// Team A's features of a two-team match from the players' states before it, as the skill
/// fit's replay takes them (its first row's team is A, the outcome is that row's).
fn team_sample(art: &Artifact, m: &FinishedMatch, before: &[PlayerState]) -> Option<TeamSample> {
    let first = m.rows.first()?.team;
    let split = m.rows.iter().take_while(|r| r.team == first).count();
    let rest = &m.rows[split..];
    if rest.is_empty() || rest.iter().any(|r| r.team != rest[0].team) {
        return None;
    }
    let outcome = match m.rows[0].outcome {
        mm_artifact::Outcome::Win => 1.0,
        mm_artifact::Outcome::Draw => 0.5,
        mm_artifact::Outcome::Loss => 0.0,
    };
    let values: Vec<f64> = before.iter().map(|s| art.outcome_skill(s)).collect();
    let parties = mm_artifact::online::party_numbers(m);
    let score = |r: &mm_artifact::online::ResultRow| r.team_score.unwrap_or(f64::NAN);
    Some(TeamSample {
        margin: score(&m.rows[0]) - score(&rest[0]),
        ..mm_fit::skill::replay::sample_of(&values, &parties, split, outcome)
    })
}

/// Saves this run's samples in the window, drops the files that left it, and refits the team
/// win model (with its party terms) on the window when it holds at least
/// [`mm_fit::MIN_LATEST_DECISIVE`] decisive matches, as the full fit does on its latest
/// window. The samples read the skill the model reads, each player's before the match. A model
/// that reads a win skill that does not move between full fits (no `win_update`: format 6 and
/// older) is kept. The samples of a win-skill model are kept in files of their own
/// (`<day>.win-skill.json`), so that a window never mixes the two skills.
fn refit_team(
    art: &Artifact,
    samples: &[TeamSample],
    window: &Window,
    cutoff_ms: i64,
) -> Result<TeamRefit, RetrainError> {
    let keep = |note: String| TeamRefit { model: None, note };
    let win = art
        .team_win
        .is_some_and(|t| t.basis == SkillBasis::WinSkill);
    if win && art.skill.win_update.is_none() {
        return Ok(keep(
            "kept: it reads the win skill, refitted by full runs".into(),
        ));
    }
    let ext = if win { "win-skill.json" } else { "json" };
    let dir = &window.dir;
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let today = cutoff_ms.div_euclid(DAY_MS);
    // The margin is last; `null` when unknown (JSON has no NaN).
    let rows: Vec<[Option<f64>; 5]> = samples
        .iter()
        .map(|s| {
            [
                s.skill_diff,
                s.party_members_diff,
                s.party_spread_diff,
                s.outcome,
                s.margin,
            ]
            .map(|x| x.is_finite().then_some(x))
        })
        .collect();
    let path = dir.join(format!("{today}.{ext}"));
    let bytes = serde_json::to_vec(&rows).map_err(|e| RetrainError::Input(e.to_string()))?;
    mm_eval::report::write_atomic(&path, &bytes)?;
    let mut window_samples: Vec<TeamSample> = Vec::new();
    for p in window_days(dir, ext, today, window.days)? {
        // Rows of four (no margin) were written before the blowout model.
        let rows: Vec<Vec<Option<f64>>> =
            serde_json::from_slice(&std::fs::read(&p).map_err(io(&p))?)
                .map_err(|e| RetrainError::Input(format!("{}: {e}", p.display())))?;
        for r in rows {
            let x = |k: usize| r.get(k).copied().flatten().unwrap_or(f64::NAN);
            if !(4..=5).contains(&r.len()) || (0..4).any(|k| !x(k).is_finite()) {
                return Err(RetrainError::Input(format!(
                    "{}: a team sample of {} numbers, not 4 or 5 finite",
                    p.display(),
                    r.len()
                )));
            }
            window_samples.push(TeamSample {
                skill_diff: x(0),
                party_members_diff: x(1),
                party_spread_diff: x(2),
                outcome: x(3),
                margin: x(4),
            });
        }
    }
    let decisive = window_samples.iter().filter(|s| s.outcome != 0.5).count();
    let need = mm_fit::MIN_LATEST_DECISIVE;
    if decisive < need {
        return Ok(keep(format!(
            "kept: {decisive} decisive matches in the last {} day(s) of continued runs, fewer \
             than {need}",
            window.days
        )));
    }
    let cfg = TeamFitConfig {
        blowout_margin: art.churn.blowout_margin,
        ..TeamFitConfig::default()
    };
    let mut model = mm_fit::with_blowout(&window_samples, &cfg)
        .map_err(|e| RetrainError::Input(e.to_string()))?;
    if win {
        model.basis = SkillBasis::WinSkill;
    }
    Ok(TeamRefit {
        model: Some(model),
        note: format!(
            "refitted on {} matches ({decisive} decisive) of the last {} day(s)",
            window_samples.len(),
            window.days
        ),
    })
}

/// Each player's match starts (of the mode, before `cutoff_ms`) from `from_ms` on, sorted.
fn player_starts(
    lake: &Lake,
    mode: &str,
    from_ms: i64,
    cutoff_ms: i64,
) -> Result<HashMap<String, Vec<i64>>, RetrainError> {
    use mm_lake::schema::col;
    let mut out: HashMap<String, Vec<i64>> = HashMap::new();
    let cols = [col::PLAYER_ID, col::START_TIME, col::MODE];
    for f in window_files(lake, from_ms, cutoff_ms)? {
        for b in mm_lake::parquet_io::read_parquet_columns(&f, Some(&cols))? {
            let (Some(p), Some(s), Some(m)) = (
                b.column_by_name(col::PLAYER_ID),
                b.column_by_name(col::START_TIME),
                b.column_by_name(col::MODE),
            ) else {
                continue;
            };
            let (p, m) = (p.as_string::<i32>(), m.as_string::<i32>());
            let s = s.as_primitive::<arrow_array::types::TimestampMillisecondType>();
            for i in 0..b.num_rows() {
                if m.is_null(i) || m.value(i) != mode || s.is_null(i) {
                    continue;
                }
                let t = s.value(i);
                if t >= from_ms && t < cutoff_ms {
                    out.entry(p.value(i).to_string()).or_default().push(t);
                }
            }
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    Ok(out)
}
