//! `mm fit skill`: raw skill and percentiles from the lake.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, TimestampMillisecondType};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use hashbrown::HashMap;
use mm_lake::Lake;
use mm_trainer::skill::percentile::PercentileMap;
use mm_trainer::skill::raw::{RawSkill, RawSkillParams};
use serde::Serialize;

/// The in-match performance metric players are compared on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Kills per enemy death, `(kills + 1) / (deaths_by_enemy + 1)`: self-kills never help,
    /// and late joiners are not punished for fewer minutes (both counts scale with time).
    KillsPerEnemyDeath,
    /// Score per minute played.
    ScorePerMinute,
    /// The lake's `perf` column (e.g. the share of points won in tennis).
    Perf,
    /// Win/draw/loss only, for games without stats: the team's outcome.
    Outcome,
}

impl Metric {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Metric::KillsPerEnemyDeath => "kills-per-enemy-death",
            Metric::ScorePerMinute => "score-per-minute",
            Metric::Perf => "perf",
            Metric::Outcome => "outcome",
        }
    }
}

/// What `fit_skill` does.
#[derive(Debug, Clone)]
pub struct SkillConfig {
    pub lake: PathBuf,
    pub out: PathBuf,
    /// Only matches of this mode (all modes when None; players are compared within a lobby).
    pub mode: Option<String>,
    pub metric: Metric,
    pub params: RawSkillParams,
    /// Players who played within this many days of the last match form the active population
    /// of the percentile map.
    pub active_days: u32,
    /// Quantile knots of the percentile map.
    pub knots: usize,
    /// Predictions are scored only for matches from this time on (ms since the epoch); None
    /// scores the last fifth of the matches.
    pub score_from_ms: Option<i64>,
}

/// Why a fit failed.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("invalid {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("{0}: no matches to fit (check --mode)")]
    Empty(PathBuf),
    #[error(transparent)]
    Lake(#[from] mm_lake::LakeError),
    #[error("{path}: {reason}")]
    Output { path: PathBuf, reason: String },
}

/// Prediction quality of "player i outperforms player j", scored before each update.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PairwiseScore {
    pub pairs: u64,
    pub log_loss: f64,
    pub accuracy: f64,
    pub brier: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SkillReport {
    pub metric: Metric,
    pub mode: Option<String>,
    pub matches: u64,
    pub player_matches: u64,
    pub players: u64,
    pub active_players: u64,
    pub skill_mean: f64,
    pub skill_sd: f64,
    pub skill_min: f64,
    pub skill_max: f64,
    pub score_from: String,
    pub scored: PairwiseScore,
    pub params: RawSkillParams,
    pub percentile_knots: usize,
    pub seconds: f64,
    pub out: PathBuf,
}

struct Match {
    start_ms: i64,
    rows: Vec<(u32, f64)>,
}

/// Replays the lake through the raw-skill model and writes `players.parquet`,
/// `percentiles.json` and `skill_metrics.json` into `cfg.out`.
pub fn fit_skill(cfg: &SkillConfig) -> Result<SkillReport, FitError> {
    let t0 = std::time::Instant::now();
    let params = cfg.params.check().map_err(|e| FitError::Config {
        field: e.field,
        reason: e.to_string(),
    })?;
    if cfg.knots < 2 {
        return Err(FitError::Config {
            field: "knots",
            reason: "at least 2".into(),
        });
    }
    let lake = Lake::open(&cfg.lake)?;
    let (ids, matches) = read_matches(&lake, cfg)?;
    if matches.is_empty() {
        return Err(FitError::Empty(cfg.lake.clone()));
    }
    let score_from = cfg
        .score_from_ms
        .unwrap_or(matches[matches.len() * 4 / 5].start_ms);
    let mut model = RawSkill::new(params);
    let mut last_seen = vec![i64::MIN; ids.len()];
    let mut score = PairwiseScore::default();
    let mut lobby: Vec<(usize, f64)> = Vec::new();
    let mut player_matches = 0u64;
    for m in &matches {
        lobby.clear();
        lobby.extend(m.rows.iter().map(|&(p, x)| (p as usize, x)));
        if m.start_ms >= score_from {
            for (a, &(i, xi)) in lobby.iter().enumerate() {
                for &(j, xj) in &lobby[a + 1..] {
                    if !(xi.is_finite() && xj.is_finite()) || xi == xj {
                        continue;
                    }
                    let p = model.p_outperform(i, j).clamp(1e-12, 1.0 - 1e-12);
                    let y = if xi > xj { 1.0 } else { 0.0 };
                    score.pairs += 1;
                    score.log_loss -= y * p.ln() + (1.0 - y) * (1.0 - p).ln();
                    score.brier += (p - y).powi(2);
                    score.accuracy += if (p > 0.5) == (y > 0.5) {
                        1.0
                    } else if p == 0.5 {
                        0.5
                    } else {
                        0.0
                    };
                }
            }
        }
        model.update(&lobby);
        for &(i, _) in &lobby {
            last_seen[i] = m.start_ms;
        }
        player_matches += lobby.len() as u64;
    }
    if score.pairs > 0 {
        let n = score.pairs as f64;
        score.log_loss /= n;
        score.brier /= n;
        score.accuracy /= n;
    }
    let end = matches.last().map_or(0, |m| m.start_ms);
    let window = i64::from(cfg.active_days) * 86_400_000;
    let states = model.players();
    let active: Vec<f64> = (0..ids.len())
        .filter(|&i| last_seen[i] >= end - window && i < states.len())
        .map(|i| states[i].skill)
        .collect();
    let map =
        PercentileMap::fit(&active, cfg.knots).ok_or_else(|| FitError::Empty(cfg.lake.clone()))?;
    let skills: Vec<f64> = (0..ids.len()).map(|i| model.skill(i)).collect();
    let n = skills.len() as f64;
    let mean = skills.iter().sum::<f64>() / n;
    let sd = (skills.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    std::fs::create_dir_all(&cfg.out).map_err(|e| out_err(&cfg.out, e))?;
    write_players(cfg, &ids, &model, &last_seen, &map)?;
    let report = SkillReport {
        metric: cfg.metric,
        mode: cfg.mode.clone(),
        matches: matches.len() as u64,
        player_matches,
        players: ids.len() as u64,
        active_players: active.len() as u64,
        skill_mean: mean,
        skill_sd: sd,
        skill_min: skills.iter().copied().fold(f64::INFINITY, f64::min),
        skill_max: skills.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        score_from: chrono::DateTime::from_timestamp_millis(score_from)
            .map(|d| d.to_rfc3339())
            .unwrap_or_default(),
        scored: score,
        params: cfg.params,
        percentile_knots: cfg.knots,
        seconds: t0.elapsed().as_secs_f64(),
        out: cfg.out.clone(),
    };
    write_json(&cfg.out.join("percentiles.json"), &map)?;
    write_json(&cfg.out.join("skill_metrics.json"), &report)?;
    Ok(report)
}

fn out_err(path: &Path, e: impl std::fmt::Display) -> FitError {
    FitError::Output {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn write_json(path: &Path, v: &impl Serialize) -> Result<(), FitError> {
    let bytes = serde_json::to_vec_pretty(v).map_err(|e| out_err(path, e))?;
    mm_lake::store::write_atomic(path, &bytes)?;
    Ok(())
}

fn write_players(
    cfg: &SkillConfig,
    ids: &[String],
    model: &RawSkill,
    last_seen: &[i64],
    map: &PercentileMap,
) -> Result<(), FitError> {
    let skill: Vec<f64> = (0..ids.len()).map(|i| model.skill(i)).collect();
    let games: Vec<i64> = (0..ids.len())
        .map(|i| model.players().get(i).map_or(0, |p| i64::from(p.games)))
        .collect();
    let pct: Vec<f64> = skill.iter().map(|&s| map.percentile(s)).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("player_id", DataType::Utf8, false),
        Field::new("raw_skill", DataType::Float64, false),
        Field::new("percentile", DataType::Float64, false),
        Field::new("games", DataType::Int64, false),
        Field::new("last_seen_ms", DataType::Int64, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(ids.to_vec())),
        Arc::new(Float64Array::from(skill)),
        Arc::new(Float64Array::from(pct)),
        Arc::new(Int64Array::from(games)),
        Arc::new(Int64Array::from(last_seen.to_vec())),
    ];
    let batch = RecordBatch::try_new(schema, cols).map_err(|e| out_err(&cfg.out, e))?;
    let path = cfg.out.join("players.parquet");
    let tmp = cfg.out.join(".players.parquet.tmp");
    let _ = std::fs::remove_file(&tmp);
    mm_lake::store::write_parquet_file(&tmp, &[batch])?;
    std::fs::rename(&tmp, &path).map_err(|e| out_err(&path, e))?;
    Ok(())
}

/// Reads every match of the lake (of the configured mode) in time order, with each player's
/// metric, and the player ids in order of first appearance.
fn read_matches(lake: &Lake, cfg: &SkillConfig) -> Result<(Vec<String>, Vec<Match>), FitError> {
    let cols = [
        "match_id",
        "mode",
        "start_time",
        "team",
        "player_id",
        "outcome",
        "seconds_played",
        "kills",
        "deaths_by_enemy",
        "score",
        "perf",
    ];
    let mut ids: Vec<String> = Vec::new();
    let mut index: HashMap<String, u32> = HashMap::new();
    let mut matches = Vec::new();
    for day in lake.days()? {
        // (start, match id, row) for the day's rows, merged across files.
        let mut rows: Vec<(i64, String, u32, f64)> = Vec::new();
        for file in lake.partition_files(day)? {
            for b in mm_lake::store::read_parquet_columns(&file, Some(&cols))? {
                let col = |n: &str| b.column_by_name(n).cloned();
                let (Some(mid), Some(mode), Some(start), Some(pid), Some(outcome)) = (
                    col("match_id"),
                    col("mode"),
                    col("start_time"),
                    col("player_id"),
                    col("outcome"),
                ) else {
                    continue;
                };
                let (mid, mode, pid, outcome) = (
                    mid.as_string::<i32>(),
                    mode.as_string::<i32>(),
                    pid.as_string::<i32>(),
                    outcome.as_string::<i32>(),
                );
                let start = start.as_primitive::<TimestampMillisecondType>();
                let i32col = |n: &str| col(n).map(|a| a.as_primitive::<Int32Type>().clone());
                let f64col = |n: &str| col(n).map(|a| a.as_primitive::<Float64Type>().clone());
                let (kills, dbe) = (i32col("kills"), i32col("deaths_by_enemy"));
                let (secs, score, perf) =
                    (f64col("seconds_played"), f64col("score"), f64col("perf"));
                let val_i = |a: &Option<arrow_array::Int32Array>, i: usize| {
                    a.as_ref()
                        .filter(|a| a.is_valid(i))
                        .map(|a| f64::from(a.value(i)))
                };
                let val_f = |a: &Option<Float64Array>, i: usize| {
                    a.as_ref().filter(|a| a.is_valid(i)).map(|a| a.value(i))
                };
                for i in 0..b.num_rows() {
                    if cfg.mode.as_deref().is_some_and(|m| m != mode.value(i)) {
                        continue;
                    }
                    let metric = match cfg.metric {
                        Metric::KillsPerEnemyDeath => match (val_i(&kills, i), val_i(&dbe, i)) {
                            (Some(k), Some(d)) => (k + 1.0) / (d + 1.0),
                            _ => f64::NAN,
                        },
                        Metric::ScorePerMinute => match (val_f(&score, i), val_f(&secs, i)) {
                            (Some(s), Some(t)) if t > 0.0 => s / (t / 60.0),
                            _ => f64::NAN,
                        },
                        Metric::Perf => val_f(&perf, i).unwrap_or(f64::NAN),
                        Metric::Outcome => match outcome.value(i) {
                            "win" => 1.0,
                            "draw" => 0.5,
                            "loss" => 0.0,
                            _ => f64::NAN,
                        },
                    };
                    let p = pid.value(i);
                    let idx = match index.get(p) {
                        Some(&k) => k,
                        None => {
                            let k = ids.len() as u32;
                            ids.push(p.to_string());
                            index.insert(p.to_string(), k);
                            k
                        }
                    };
                    rows.push((start.value(i), mid.value(i).to_string(), idx, metric));
                }
            }
        }
        rows.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut k = 0;
        while k < rows.len() {
            let mut e = k + 1;
            while e < rows.len() && rows[e].1 == rows[k].1 {
                e += 1;
            }
            matches.push(Match {
                start_ms: rows[k].0,
                rows: rows[k..e].iter().map(|r| (r.2, r.3)).collect(),
            });
            k = e;
        }
    }
    Ok((ids, matches))
}
