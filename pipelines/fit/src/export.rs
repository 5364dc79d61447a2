//! `mm export`: bundles the skill and churn fits into a versioned artifact
//! (`<models>/<name>/<version>/`, the format of `mm-artifact`), published atomically.
//!
//! Inputs: the skill fit's folder (`team_model.json`, `percentiles.json`, `players.parquet`,
//! `skill_metrics.json`) and the churn fit's (`churn_model.json`, `churn_metrics.json`,
//! `churn_state.parquet`). The two must come from the same lake and mode. The player snapshot
//! joins the skill fit's players with the churn fit's state; players are sorted by id, and
//! timings are dropped from the metrics, so the same fits give the same bytes (the manifest's
//! `created_at` apart).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use mm_artifact::churn::ChurnModel;
use mm_artifact::features::{Outcome3, Played};
use mm_artifact::load::{
    CHURN_FILE, ChurnFile, PARTY_FILE, PERCENTILES_FILE, PLAYERS_FILE, SKILL_FILE, SkillFile,
    TEAM_WIN_FILE, json_bytes as json,
};
use mm_artifact::manifest::{DataWindow, FORMAT_VERSION, Manifest, min_reader_format};
use mm_artifact::percentile::PercentileMap;
use mm_artifact::skill::RawSkillParams;
use mm_artifact::snapshot::{PlayerState, WinColumns, write_snapshot};
use mm_artifact::store::Store;
use mm_artifact::team::{PartyAdjustment, SkillBasis, TeamWinModel};
use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::columns::{bools, f64s, i64s, read_frame, strings};
use crate::error::{FitError, input_err};

/// What to export.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    pub skill: PathBuf,
    pub churn: PathBuf,
    /// The models root; the artifact goes to `<models>/<name>/<version>/`.
    pub models: PathBuf,
    /// Default: the fits' mode, else `all-modes`.
    pub name: Option<String>,
    /// Default: `v0001`, or one more than the highest `vNNNN` already there.
    pub version: Option<String>,
    /// Move `LATEST` to the new version.
    pub promote: bool,
}

/// What was exported.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    pub name: String,
    pub version: String,
    pub dir: PathBuf,
    pub promoted: bool,
    pub players: usize,
    pub files: Vec<mm_artifact::manifest::FileEntry>,
}

#[derive(Deserialize)]
struct TeamModelFile {
    metric: String,
    model: Option<TeamWinModel>,
    party_adjustment: Option<PartyAdjustment>,
    /// The adjustment the final replay credited to parties (absent in older skill fits).
    #[serde(default)]
    update_offsets: Option<PartyAdjustment>,
    raw_skill: RawSkillParams,
    /// How the win skill is updated after a match (absent in older skill fits, and when the
    /// model reads raw skill).
    #[serde(default)]
    win_update: Option<mm_artifact::skill::WinSkillUpdate>,
}

#[derive(Deserialize)]
struct ChurnModelFile {
    blowout_margin: f64,
    horizon: String,
    horizon_ms: i64,
    mode: Option<String>,
    model: ChurnModel,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, FitError> {
    let bytes = std::fs::read(path).map_err(|e| input_err(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| input_err(path, e))
}

/// Drops timings (keys ending in `seconds` or `per_s`), peak memory and the output list,
/// recursively, and keeps of the churn fit's `build` only its key (the digest of the lake
/// version and options): the rest describes the run (where its tables were, how many shards
/// built them), not the model, and would make two exports of one model differ.
fn without_timings(v: serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(m) => serde_json::Value::Object(
            m.into_iter()
                .filter(|(k, _)| {
                    !(k.ends_with("seconds")
                        || k.ends_with("per_s")
                        || k == "outputs"
                        || k == "peak_rss_bytes")
                })
                .map(|(k, v)| match (k.as_str(), v) {
                    ("build", serde_json::Value::Object(b)) => {
                        let key = b.get("key").cloned().unwrap_or_default();
                        (k, serde_json::json!({ "key": key }))
                    }
                    (_, v) => (k, without_timings(v)),
                })
                .collect(),
        ),
        serde_json::Value::Array(a) => {
            serde_json::Value::Array(a.into_iter().map(without_timings).collect())
        }
        other => other,
    }
}

/// The churn fit's state, per player: games, first match, window counts, slots by number.
#[derive(Debug)]
struct State {
    games: u64,
    first_seen_ms: Option<i64>,
    counts: [u32; 4],
    churned_gaps: u64,
    slots: Vec<(i64, Played)>,
}

/// Rows of the state table turned into typed columns at a time: the table holds up to
/// `history + 1` rows per player, and copying whole columns cost more than the table itself.
const STATE_CHUNK: usize = 65_536;

fn read_state(path: &Path) -> Result<(HashMap<String, State>, i64), FitError> {
    read_state_chunked(path, STATE_CHUNK)
}

fn read_state_chunked(
    path: &Path,
    chunk: usize,
) -> Result<(HashMap<String, State>, i64), FitError> {
    let df = read_frame(path)?;
    let mut out: HashMap<String, State> = HashMap::new();
    let mut as_of = i64::MIN;
    for offset in (0..df.height()).step_by(chunk) {
        let part = df.slice(offset as i64, chunk);
        read_state_rows(&part, path, offset, &mut out, &mut as_of)?;
    }
    Ok((out, as_of))
}

/// Adds the state rows of `df` (rows `offset..` of the file at `path`) to `out`.
fn read_state_rows(
    df: &DataFrame,
    path: &Path,
    offset: usize,
    out: &mut HashMap<String, State>,
    as_of: &mut i64,
) -> Result<(), FitError> {
    let ids = strings(df, path, "player_id")?;
    let slot = i64s(df, path, "slot")?;
    let start = i64s(df, path, "start_ms")?;
    let win = bools(df, path, "win")?;
    let draw = bools(df, path, "draw")?;
    let diff = f64s(df, path, "score_diff")?;
    let perf = f64s(df, path, "perf_rank")?;
    let blow = bools(df, path, "blowout_loss")?;
    let games = i64s(df, path, "games")?;
    let asof = i64s(df, path, "as_of_ms")?;
    let first = i64s(df, path, "first_seen_ms")?;
    // State tables built before the column existed: 0 (only the churn history features read it,
    // and a fit with them builds a new table).
    let gaps = if df.column("churned_gaps").is_ok() {
        i64s(df, path, "churned_gaps")?
    } else {
        vec![Some(0); df.height()]
    };
    let w: Vec<Vec<Option<i64>>> = ["8h", "1d", "1w", "1m"]
        .iter()
        .map(|w| i64s(df, path, &format!("matches_{w}")))
        .collect::<Result<_, _>>()?;
    for (r, id) in ids.into_iter().enumerate() {
        let need = |v: Option<i64>, what: &str| {
            v.ok_or_else(|| input_err(path, format!("row {}: {what} is null", offset + r)))
        };
        *as_of = (*as_of).max(need(asof[r], "as_of_ms")?);
        let outcome = match (win[r], draw[r]) {
            (Some(true), _) => Outcome3::Win,
            (_, Some(true)) => Outcome3::Draw,
            _ => Outcome3::Loss,
        };
        let played = Played {
            start_ms: need(start[r], "start_ms")?,
            outcome,
            score_diff: diff[r].unwrap_or(f64::NAN),
            perf_rank: perf[r].unwrap_or(f64::NAN),
            blowout_loss: blow[r].unwrap_or(false),
        };
        let counts =
            [0, 1, 2, 3].map(|k| w[k][r].unwrap_or(0).clamp(0, i64::from(u32::MAX)) as u32);
        let g = need(games[r], "games")?.max(0) as u64;
        let e = out.entry(id).or_insert_with(|| State {
            games: g,
            first_seen_ms: first[r],
            counts,
            churned_gaps: gaps[r].unwrap_or(0).max(0) as u64,
            slots: Vec::new(),
        });
        e.slots.push((need(slot[r], "slot")?, played));
    }
    Ok(())
}

/// The metric value at a JSON path, for the manifest's data window.
fn u64_at(v: &serde_json::Value, key: &str) -> u64 {
    v.get(key).and_then(serde_json::Value::as_u64).unwrap_or(0)
}

/// Builds the snapshot from the skill fit's players and the churn fit's state.
fn snapshot(
    skill_players: &Path,
    state: HashMap<String, State>,
    history: usize,
    as_of: i64,
    columns: WinColumns,
) -> Result<Vec<PlayerState>, FitError> {
    let df = read_frame(skill_players)?;
    let ids = strings(&df, skill_players, "player_id")?;
    let raw = f64s(&df, skill_players, "raw_skill")?;
    // Only a team model that reads the win skill needs the column, and only its update the
    // masses.
    let win_skill = columns != WinColumns::None;
    let win = if win_skill {
        f64s(&df, skill_players, "win_skill")?
    } else {
        Vec::new()
    };
    let mass = if columns == WinColumns::SkillAndMass {
        f64s(&df, skill_players, "win_mass")?
    } else {
        Vec::new()
    };
    let pct = f64s(&df, skill_players, "percentile")?;
    let games = i64s(&df, skill_players, "games")?;
    let seen = i64s(&df, skill_players, "last_seen_ms")?;
    let mut players = Vec::with_capacity(ids.len());
    let mut state = state;
    for (r, id) in ids.into_iter().enumerate() {
        let bad = |what: &str| input_err(skill_players, format!("row {r} ({id}): {what}"));
        let raw_skill = raw[r]
            .filter(|x| x.is_finite())
            .ok_or_else(|| bad("raw_skill"))?;
        let percentile = pct[r]
            .filter(|x| x.is_finite())
            .ok_or_else(|| bad("percentile"))?;
        let mut p = PlayerState::new_player(&id, as_of, percentile, raw_skill);
        if win_skill {
            p.win_skill = win[r]
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad("win_skill"))?;
        }
        if let Some(m) = mass.get(r) {
            p.win_mass = m
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| bad("win_mass"))?;
        }
        p.games = games[r].unwrap_or(0).max(0) as u64;
        p.last_seen_ms = seen[r].unwrap_or(i64::MIN);
        if let Some(mut s) = state.remove(&id) {
            s.slots.sort_by_key(|(k, _)| std::cmp::Reverse(*k));
            // Slots `history + 1` and beyond only give the time before the oldest kept.
            p.before_recent_ms = s
                .slots
                .iter()
                .find(|(k, _)| *k == history as i64 + 1)
                .map(|(_, m)| m.start_ms);
            p.recent = s
                .slots
                .iter()
                .filter(|(k, _)| *k <= history as i64)
                .map(|(_, m)| *m)
                .collect();
            p.games = s.games;
            p.first_seen_ms = s.first_seen_ms;
            p.window_counts = s.counts;
            p.churned_gaps = s.churned_gaps;
        }
        players.push(p);
    }
    players.sort_by(|a, b| a.player_id.cmp(&b.player_id));
    Ok(players)
}

/// Refuses a skill fit and a churn fit that are not of the same mode and lake snapshot.
fn same_fit(
    cfg: &ExportConfig,
    skill_metrics: &serde_json::Value,
    churn_metrics: &serde_json::Value,
    churn_mode: Option<&str>,
) -> Result<(), FitError> {
    let skill_mode = skill_metrics
        .get("mode")
        .and_then(serde_json::Value::as_str);
    if skill_mode != churn_mode {
        return Err(input_err(
            &cfg.churn.join("churn_model.json"),
            format!(
                "mode {:?}, but the skill fit's is {:?}: export fits of the same mode",
                churn_mode, skill_mode
            ),
        ));
    }
    let version_of =
        |m: &serde_json::Value| m.get("lake_version").and_then(serde_json::Value::as_i64);
    if let (Some(s), Some(c)) = (version_of(skill_metrics), version_of(churn_metrics))
        && s != c
    {
        return Err(input_err(
            &cfg.churn.join("churn_metrics.json"),
            format!(
                "the churn fit read lake version {c}, the skill fit version {s}: fit both on one \
                 snapshot (--as-of {s})"
            ),
        ));
    }
    Ok(())
}

/// What the artifact was fitted on, from the two fits' metrics.
fn data_window(
    skill_metrics: &serde_json::Value,
    churn_metrics: &serde_json::Value,
    as_of: i64,
    players: usize,
) -> DataWindow {
    DataWindow {
        lake: churn_metrics
            .get("lake")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string(),
        lake_version: churn_metrics
            .get("lake_version")
            .and_then(serde_json::Value::as_i64),
        first_match_ms: churn_metrics
            .get("train_from_ms")
            .and_then(serde_json::Value::as_i64)
            .unwrap_or_default(),
        last_match_ms: as_of,
        rows: u64_at(skill_metrics, "player_matches"),
        matches: u64_at(skill_metrics, "matches"),
        players: players as u64,
        // The rows the exported model was fitted on: the refit's when there was one.
        churn_train_rows: churn_metrics
            .get("refit")
            .and_then(|r| r.get("rows"))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| u64_at(churn_metrics, "train_rows")),
        churn_censored_rows: u64_at(churn_metrics, "censored"),
    }
}

/// Exports and publishes one version.
///
/// # Errors
/// A missing or unreadable input, fits of different modes, or a publish failure; nothing is
/// published then, and the previous versions and `LATEST` are untouched.
pub fn export(cfg: &ExportConfig) -> Result<ExportReport, FitError> {
    let team: TeamModelFile = read_json(&cfg.skill.join("team_model.json"))?;
    let percentiles: PercentileMap = read_json(&cfg.skill.join("percentiles.json"))?;
    let skill_metrics: serde_json::Value = read_json(&cfg.skill.join("skill_metrics.json"))?;
    let churn_path = cfg.churn.join("churn_model.json");
    let churn: ChurnModelFile = read_json(&churn_path)?;
    let churn_metrics: serde_json::Value = read_json(&cfg.churn.join("churn_metrics.json"))?;
    same_fit(cfg, &skill_metrics, &churn_metrics, churn.mode.as_deref())?;
    if let Some(b) = team.model.and_then(|t| t.blowout)
        && b.margin != churn.blowout_margin
    {
        return Err(input_err(
            &cfg.skill.join("team_model.json"),
            format!(
                "its blowout model counts a loss by more than {} points as a blowout, the churn \
                 fit by more than {}: fit both with the same --blowout-margin",
                b.margin, churn.blowout_margin
            ),
        ));
    }
    let history = churn.model.spec.history;
    let (state, as_of) = read_state(&cfg.churn.join("churn_state.parquet"))?;
    let win_skill = team.model.is_some_and(|t| t.basis == SkillBasis::WinSkill);
    let win_update = team.win_update.filter(|_| win_skill);
    let columns = WinColumns::of(win_skill, win_update.is_some());
    let players = snapshot(
        &cfg.skill.join("players.parquet"),
        state,
        history,
        as_of,
        columns,
    )?;
    let players_bytes = write_snapshot(history, &players, columns)
        .map_err(|e| input_err(&cfg.skill.join("players.parquet"), e))?;

    let files: Vec<(String, Vec<u8>)> = vec![
        (
            SKILL_FILE.into(),
            json(&SkillFile {
                metric: team.metric.clone(),
                raw_skill: team.raw_skill,
                party_offsets: team.update_offsets,
                win_update,
            }),
        ),
        (PERCENTILES_FILE.into(), json(&percentiles)),
        (TEAM_WIN_FILE.into(), json(&team.model)),
        (PARTY_FILE.into(), json(&team.party_adjustment)),
        (
            CHURN_FILE.into(),
            json(&ChurnFile {
                horizon: churn.horizon.clone(),
                horizon_ms: churn.horizon_ms,
                blowout_margin: churn.blowout_margin,
                model: churn.model.clone(),
            }),
        ),
        (PLAYERS_FILE.into(), players_bytes),
    ];
    let name = cfg
        .name
        .clone()
        .or_else(|| churn.mode.clone())
        .unwrap_or_else(|| "all-modes".to_string());
    let root = cfg.models.join(&name);
    if root.join("Cargo.toml").exists() {
        return Err(input_err(
            &root,
            "is a crate of this workspace, not a model: choose another --name",
        ));
    }
    let store = Store::new(root);
    let version = match &cfg.version {
        Some(v) => v.clone(),
        None => store.next_version()?,
    };
    let mut metrics = BTreeMap::new();
    metrics.insert("skill".to_string(), without_timings(skill_metrics.clone()));
    metrics.insert("churn".to_string(), without_timings(churn_metrics.clone()));
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        min_reader_format: min_reader_format(&churn.model.spec, columns),
        name: name.clone(),
        model_version: version.clone(),
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        code_version: env!("CARGO_PKG_VERSION").to_string(),
        mode: churn.mode.clone(),
        data: data_window(&skill_metrics, &churn_metrics, as_of, players.len()),
        snapshot_as_of_ms: as_of,
        feature_names: churn.model.feature_names.clone(),
        metrics,
        files: Vec::new(),
    };
    let dir = store.publish(&version, manifest, &files, cfg.promote, None)?;
    let m = mm_artifact::load::read_manifest(&dir)?;
    Ok(ExportReport {
        name,
        version,
        dir,
        promoted: cfg.promote,
        players: players.len(),
        files: m.files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state table read a few rows at a time is the table read at once, players spread
    /// over the chunk boundaries; a null names the file's row, not the chunk's.
    #[test]
    fn the_state_table_read_in_chunks_is_the_whole_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("churn_state.parquet");
        let n = 23usize;
        let ids: Vec<String> = (0..n).map(|r| format!("p{}", r / 4)).collect();
        let slot: Vec<i64> = (0..n).map(|r| (r % 4) as i64 + 1).collect();
        let start: Vec<i64> = (0..n).map(|r| 1_000 * r as i64).collect();
        let win: Vec<bool> = (0..n).map(|r| r % 3 == 0).collect();
        let draw: Vec<bool> = (0..n).map(|r| r % 3 == 1).collect();
        let diff: Vec<Option<f64>> = (0..n).map(|r| (r % 5 != 0).then_some(r as f64)).collect();
        let perf: Vec<f64> = (0..n).map(|r| r as f64 / n as f64).collect();
        let blow: Vec<bool> = (0..n).map(|r| r % 7 == 0).collect();
        let games: Vec<i64> = (0..n).map(|r| 10 + (r / 4) as i64).collect();
        let asof: Vec<i64> = (0..n).map(|r| 50_000 + r as i64).collect();
        let first: Vec<Option<i64>> = (0..n).map(|r| (r % 2 == 0).then_some(7)).collect();
        let gaps: Vec<i64> = (0..n).map(|r| (r / 4) as i64).collect();
        let mut df = df!(
            "player_id" => ids, "slot" => slot, "start_ms" => start, "win" => win,
            "draw" => draw, "score_diff" => diff, "perf_rank" => perf, "blowout_loss" => blow,
            "games" => games, "as_of_ms" => asof, "first_seen_ms" => first,
            "churned_gaps" => gaps, "matches_8h" => vec![1i64; n], "matches_1d" => vec![2i64; n],
            "matches_1w" => vec![3i64; n], "matches_1m" => vec![4i64; n],
        )
        .unwrap();
        ParquetWriter::new(std::fs::File::create(&path).unwrap())
            .finish(&mut df)
            .unwrap();
        // Debug text in player order: a score difference of NaN is not equal to itself.
        let text = |(m, as_of): (HashMap<String, State>, i64)| {
            format!("{:?} {as_of}", m.into_iter().collect::<BTreeMap<_, _>>())
        };
        let whole = read_state_chunked(&path, 1_000).unwrap();
        assert_eq!(whole.0.len(), 6);
        assert_eq!(whole.0["p5"].slots.len(), 3);
        assert_eq!(whole.1, 50_000 + n as i64 - 1);
        let whole = text(whole);
        for chunk in [1, 3, 4, 5, 22] {
            assert_eq!(
                text(read_state_chunked(&path, chunk).unwrap()),
                whole,
                "chunk {chunk}"
            );
        }

        // A null in the last chunk: the error names the row of the file.
        let mut nulls: Vec<Option<i64>> = (0..n).map(|r| Some(r as i64)).collect();
        nulls[n - 2] = None;
        df.replace("start_ms", Column::new("start_ms".into(), nulls))
            .unwrap();
        ParquetWriter::new(std::fs::File::create(&path).unwrap())
            .finish(&mut df)
            .unwrap();
        let err = read_state_chunked(&path, 5).unwrap_err().to_string();
        assert!(
            err.contains(&format!("row {}: start_ms is null", n - 2)),
            "{err}"
        );
    }
}
