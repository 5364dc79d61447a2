//! `mm fit skill`: raw skill and percentiles from the lake.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use mm_lake::Lake;
use mm_trainer::skill::baselines::{BaselineKind, BaselineParams};
use mm_trainer::skill::percentile::PercentileMap;
use mm_trainer::skill::raw::{RawSkill, RawSkillParams, RoleComparison, ValidRawSkillParams};
use mm_trainer::skill::team::{
    FitTeamWinModel, PartyAdjustment, TeamFitConfig, TeamSample, TeamWinModel,
};
use mm_trainer::stats::{BinaryScore, mean_sd};
use serde::Serialize;

use crate::error::{FitError, config_err, output_err};
use crate::history::{History, Metric, read_history};
use crate::replay::{OursRun, Windows, run_baseline, run_ours};
use crate::report::skill::{ModelScore, SkillReport, TunePoint, WindowDates};

/// What `fit_skill` does.
#[derive(Debug, Clone)]
pub struct SkillConfig {
    pub lake: PathBuf,
    /// The lake snapshot to read (latest by default; a version or time reproduces an old fit).
    pub as_of: mm_lake::AsOf,
    pub out: PathBuf,
    /// Only matches starting before this time (ms since the epoch).
    pub until_ms: Option<i64>,
    /// Only matches of this mode (all modes when None; players are compared within a lobby).
    pub mode: Option<String>,
    pub metric: Metric,
    /// The raw skill's hyperparameters; with `tune`, `half_life_matches` and `margin` are chosen
    /// on the tuning window instead.
    pub params: RawSkillParams,
    /// Tune our model and every baseline on the tuning window (otherwise: as given, and the
    /// baselines' defaults).
    pub tune: bool,
    /// With `tune`, also choose how roles are compared (`params.roles`) when the lake's rows
    /// carry roles; otherwise `params.roles` as given.
    pub tune_roles: bool,
    /// Baselines to run.
    pub baselines: Vec<BaselineKind>,
    /// Refits of the party adjustment, each replaying with the previous adjustment credited to
    /// parties rather than to their members (0: the raw skill ignores parties).
    pub party_iterations: u32,
    /// Players who played within this many days of the last match form the active population
    /// of the percentile map.
    pub active_days: u32,
    /// Quantile knots of the percentile map.
    pub knots: usize,
    /// Windows (ms since the epoch): tune on `[tune_from, tune_to)`, score on
    /// `[score_from, score_to]`. Defaults: the matches' 20%, 60%, 60% and 100% points in time.
    pub tune_from_ms: Option<i64>,
    pub tune_to_ms: Option<i64>,
    pub score_from_ms: Option<i64>,
    pub score_to_ms: Option<i64>,
    /// Write `skill_report.html`.
    pub html: bool,
    /// Choose `params.scale` so that the established players' raw skill has this standard
    /// deviation on the tuning window (the scale is a unit: predictions do not depend on it, but
    /// the population must sit well inside [-1, 1]). None keeps `params.scale`.
    pub target_sd: Option<f64>,
}

/// The Call of Duty paper's spread: the 80th and 50th percentiles of raw skill differ by 0.1, a
/// standard deviation of 0.1 / 0.8416 for a normal population.
pub const COD_SKILL_SD: f64 = 0.1 / 0.841_621;

impl SkillConfig {
    /// Defaults for a lake and an output directory.
    #[must_use]
    pub fn new(lake: PathBuf, out: PathBuf) -> SkillConfig {
        SkillConfig {
            until_ms: None,
            as_of: mm_lake::AsOf::Latest,
            lake,
            out,
            mode: None,
            metric: Metric::KillsPerEnemyDeath,
            params: RawSkillParams::default(),
            tune: true,
            tune_roles: true,
            baselines: BaselineKind::ALL.to_vec(),
            party_iterations: 2,
            active_days: 28,
            knots: 101,
            tune_from_ms: None,
            tune_to_ms: None,
            score_from_ms: None,
            score_to_ms: None,
            html: true,
            target_sd: Some(COD_SKILL_SD),
        }
    }
}

fn date(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// The windows from the configuration and the matches' times.
fn windows(cfg: &SkillConfig, h: &History) -> Result<Windows, FitError> {
    let at = |f: f64| h.matches[((h.matches.len() - 1) as f64 * f) as usize].start_ms;
    let tune_to = cfg.tune_to_ms.unwrap_or_else(|| at(0.6));
    let w = Windows {
        tune_from: cfg.tune_from_ms.unwrap_or_else(|| at(0.2).min(tune_to)),
        tune_to,
        score_from: cfg.score_from_ms.unwrap_or(tune_to),
        score_to: cfg.score_to_ms.unwrap_or(i64::MAX),
    };
    if w.tune_from > w.tune_to {
        return Err(config_err("tune-from", "after tune-to"));
    }
    if w.score_from < w.tune_to {
        return Err(config_err(
            "score-from",
            format!(
                "{} is before the end of the tuning window ({}): scoring must be on later matches",
                date(w.score_from),
                date(w.tune_to)
            ),
        ));
    }
    if w.score_to < w.score_from {
        return Err(config_err("score-to", "before score-from"));
    }
    Ok(w)
}

fn log_loss_of(model: &TeamWinModel, samples: &[TeamSample]) -> BinaryScore {
    let mut s = BinaryScore::default();
    for x in samples {
        s.add(model.expected_score(x), x.outcome);
    }
    s
}

/// Our model's tuning objective: the team model's log-loss on the tuning window when there are
/// two-team matches, else the pairwise log-loss.
fn objective(run: &OursRun, team_cfg: &TeamFitConfig) -> f64 {
    match fit_team(run, team_cfg) {
        Some(m) => log_loss_of(&m, &run.tune).metrics().log_loss,
        None => run.pairwise_tune.metrics().log_loss,
    }
}

/// The team win model of a replay's tuning window, when it has at least 20 two-team matches.
fn fit_team(run: &OursRun, team_cfg: &TeamFitConfig) -> Option<TeamWinModel> {
    (run.tune.len() >= 20)
        .then(|| TeamWinModel::fit(&run.tune, team_cfg).ok())
        .flatten()
}

fn check(p: RawSkillParams) -> Result<ValidRawSkillParams, FitError> {
    p.check().map_err(|e| FitError::Config {
        field: e.field,
        reason: e.to_string(),
    })
}

/// Stage 2: our model's half-life and margin tuned on the tuning window (with `cfg.tune`), and
/// the scale calibrated to `cfg.target_sd`; the grid's points with their log-loss.
fn tune(
    cfg: &SkillConfig,
    h: &History,
    win: &Windows,
    team_cfg: &TeamFitConfig,
) -> Result<(RawSkillParams, Vec<TunePoint>), FitError> {
    let mut params = cfg.params;
    let mut tuning = Vec::new();
    if let Some(sd) = cfg.target_sd {
        params.scale = calibrated_scale(h, params, sd, win)?;
    }
    if cfg.tune {
        let sd = metric_sd(h, win.tune_to);
        // With roles in the lake, how they are compared is tuned too (the metric is
        // standardised under `Normalised`, so its margins are in standard deviations).
        let role_choices: Vec<RoleComparison> = if h.role_names.is_empty() || !cfg.tune_roles {
            vec![cfg.params.roles]
        } else {
            RoleComparison::ALL.to_vec()
        };
        for &roles in &role_choices {
            let unit = if roles == RoleComparison::Normalised {
                1.0
            } else {
                sd
            };
            let margins: Vec<f64> = match cfg.metric {
                Metric::Outcome => vec![0.0],
                _ => [0.0, 0.25, 0.5, 1.0].iter().map(|f| f * unit).collect(),
            };
            for hl in [3.0, 4.0, 6.0, 9.0, 12.0, 20.0, 35.0, 60.0] {
                for &margin in &margins {
                    let p = RawSkillParams {
                        half_life_matches: hl,
                        margin,
                        roles,
                        ..cfg.params
                    };
                    let run = run_ours(h, check(p)?, None, win.tune_to, win, None);
                    tuning.push(TunePoint {
                        half_life_matches: hl,
                        margin,
                        roles,
                        log_loss: objective(&run, team_cfg),
                    });
                }
            }
        }
        if let Some(best) = tuning
            .iter()
            .filter(|t| t.log_loss.is_finite())
            .min_by(|a, b| a.log_loss.total_cmp(&b.log_loss))
        {
            params.half_life_matches = best.half_life_matches;
            params.margin = best.margin;
            params.roles = best.roles;
        }
        if let Some(sd) = cfg.target_sd {
            params.scale = calibrated_scale(h, params, sd, win)?;
        }
    }
    Ok((params, tuning))
}

/// What stage 3 fitted: the replay with the chosen parameters, the team win model (on the
/// tuning window, and on every match), the party adjustment's iterations and our model's scores.
struct Fitted {
    run: OursRun,
    team: Option<TeamWinModel>,
    team_final: Option<TeamWinModel>,
    party_iterations: Vec<PartyAdjustment>,
    ours_score: Option<BinaryScore>,
    model_score: Option<ModelScore>,
}

/// Stage 3: replays every match with `params`, fits the team win model and iterates the party
/// adjustment (each replay with the previous adjustment's offsets).
fn fit_models(
    cfg: &SkillConfig,
    h: &History,
    win: &Windows,
    params: RawSkillParams,
    team_cfg: &TeamFitConfig,
) -> Result<Fitted, FitError> {
    let valid = check(params)?;
    tracing::info!(
        half_life = params.half_life_matches,
        margin = params.margin,
        roles = params.roles.name(),
        "skill: replaying every match with the chosen parameters"
    );
    let span = h.matches.last().map_or(0, |m| m.start_ms) - h.matches[0].start_ms;
    let bucket = (span / 60).max(86_400_000);
    let mut run = run_ours(h, valid, None, i64::MAX, win, Some(bucket));
    let mut team = fit_team(&run, team_cfg);
    let mut party_iterations = Vec::new();
    if let Some(adj) = team.and_then(|t| t.party_adjustment())
        && (team.is_some_and(|t| t.party_members_coef != 0.0))
    {
        party_iterations.push(adj);
        for _ in 0..cfg.party_iterations {
            let Some(adj) = party_iterations.last().copied() else {
                break;
            };
            run = run_ours(h, valid, Some(adj), i64::MAX, win, Some(bucket));
            team = fit_team(&run, team_cfg);
            match team.and_then(|t| t.party_adjustment()) {
                Some(a) => party_iterations.push(a),
                None => break,
            }
        }
    }
    let ours_score = team.map(|t| log_loss_of(&t, &run.score));
    let team_final = if team.is_some() {
        let all: Vec<TeamSample> = run.tune.iter().chain(&run.score).copied().collect();
        Some(TeamWinModel::fit(&all, team_cfg)?)
    } else {
        None
    };
    let model_score = match (team, &ours_score) {
        (Some(t), Some(s)) => Some(ModelScore {
            model: match params.roles {
                RoleComparison::All => format!("raw-skill ({})", cfg.metric.name()),
                r => format!("raw-skill ({}, roles {})", cfg.metric.name(), r.name()),
            },
            params: serde_json::json!({
                "half_life_matches": params.half_life_matches,
                "margin": params.margin,
                "roles": params.roles,
                "scale": params.scale,
                "team_skill_coef": t.skill_coef,
            }),
            tune_log_loss: log_loss_of(&t, &run.tune).metrics().log_loss,
            scored: s.metrics(),
            updates_per_s: run.updates as f64 / run.seconds.max(1e-9),
        }),
        _ => None,
    };
    Ok(Fitted {
        run,
        team,
        team_final,
        party_iterations,
        ours_score,
        model_score,
    })
}

/// Stage 4: each baseline tuned on the tuning window (with `cfg.tune`), then scored on the
/// scoring window.
fn score_baselines(cfg: &SkillConfig, h: &History, win: &Windows) -> Vec<ModelScore> {
    let mut models = Vec::new();
    let draw_rate = {
        let two: Vec<_> = h.matches.iter().filter(|m| m.two_teams()).collect();
        let d = two.iter().filter(|m| m.score_a == 0.5).count();
        d as f64 / two.len().max(1) as f64
    };
    for &kind in &cfg.baselines {
        let grid = if cfg.tune {
            kind.grid(draw_rate)
        } else {
            vec![BaselineParams {
                draw_probability: draw_rate,
                ..kind.default_params()
            }]
        };
        let mut best: Option<(BaselineParams, f64)> = None;
        if grid.len() > 1 {
            for p in grid {
                let ll = run_baseline(h, p, win.tune_to, win).tune.metrics().log_loss;
                if ll.is_finite() && best.is_none_or(|b| ll < b.1) {
                    best = Some((p, ll));
                }
            }
        }
        let p = best.map_or(kind.default_params(), |b| b.0);
        let r = run_baseline(h, p, i64::MAX, win);
        if r.score.n == 0 {
            continue;
        }
        models.push(ModelScore {
            model: kind.name().to_string(),
            params: serde_json::to_value(p).unwrap_or_default(),
            tune_log_loss: r.tune.metrics().log_loss,
            scored: r.score.metrics(),
            updates_per_s: r.updates as f64 / r.seconds.max(1e-9),
        });
    }
    models
}

/// Replays the lake through the raw-skill model and the baselines; writes `players.parquet`,
/// `percentiles.json`, `team_model.json`, `skill_metrics.json` and `skill_report.html` into
/// `cfg.out`.
pub fn fit_skill(cfg: &SkillConfig) -> Result<SkillReport, FitError> {
    let t0 = std::time::Instant::now();
    check(cfg.params)?;
    if cfg.knots < 2 {
        return Err(config_err("knots", "at least 2"));
    }
    let lake = Lake::open_as_of(&cfg.lake, cfg.as_of)?;
    let mut h = read_history(&lake, cfg.mode.as_deref(), cfg.metric)?;
    tracing::info!(
        matches = h.matches.len(),
        players = h.ids.len(),
        rows = h.player.len(),
        "skill: read {} matches of {} players",
        h.matches.len(),
        h.ids.len()
    );
    if let Some(t) = cfg.until_ms {
        h.truncate_from(t);
    }
    if h.matches.is_empty() {
        return Err(FitError::Empty(cfg.lake.clone()));
    }
    let win = windows(cfg, &h)?;
    let team_cfg = TeamFitConfig::default();

    let (params, tuning) = tune(cfg, &h, &win, &team_cfg)?;
    let Fitted {
        run,
        team,
        team_final,
        party_iterations,
        ours_score,
        model_score,
    } = fit_models(cfg, &h, &win, params, &team_cfg)?;
    let mut models: Vec<ModelScore> = model_score.into_iter().collect();
    models.extend(score_baselines(cfg, &h, &win));

    let model = &run.model;
    let end = h.matches.last().map_or(0, |m| m.start_ms);
    let window = i64::from(cfg.active_days) * 86_400_000;
    let states = model.players();
    let active: Vec<f64> = (0..h.ids.len())
        .filter(|&i| run.last_seen[i] >= end - window && i < states.len())
        .map(|i| states[i].skill)
        .collect();
    let map =
        PercentileMap::fit(&active, cfg.knots).ok_or_else(|| FitError::Empty(cfg.lake.clone()))?;
    let skills: Vec<f64> = (0..h.ids.len()).map(|i| model.skill(i)).collect();
    let (mean, sd) = mean_sd(&skills);
    std::fs::create_dir_all(&cfg.out).map_err(|e| output_err(&cfg.out, e))?;
    write_players(cfg, &h.ids, model, &run.last_seen, &map)?;
    write_match_skill(cfg, &h, &run.pre_skill, &map)?;
    let count = |f: &dyn Fn(i64) -> bool| {
        h.matches
            .iter()
            .filter(|m| m.two_teams() && f(m.start_ms))
            .count() as u64
    };
    let truth = crate::skill_truth::compare(&lake, &h, model, team_final.as_ref(), &team_cfg);
    let report = SkillReport {
        lake_version: lake.version(),
        metric: cfg.metric,
        mode: cfg.mode.clone(),
        matches: h.matches.len() as u64,
        two_team_matches: h.matches.iter().filter(|m| m.two_teams()).count() as u64,
        player_matches: h.rows() as u64,
        players: h.ids.len() as u64,
        active_players: active.len() as u64,
        skill_mean: mean,
        skill_sd: sd,
        skill_min: skills.iter().copied().fold(f64::INFINITY, f64::min),
        skill_max: skills.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        windows: WindowDates {
            tune_from: date(win.tune_from),
            tune_to: date(win.tune_to),
            score_from: date(win.score_from),
            score_to: date(win.score_to.min(end)),
            tune_matches: count(&|t| win.in_tune(t)),
            scored_matches: count(&|t| win.in_score(t)),
        },
        params,
        tuning,
        models,
        pairwise: run.pairwise.metrics(),
        team_model: team,
        team_model_final: team_final,
        party_adjustment: party_iterations.last().copied(),
        party_iterations,
        truth,
        reliability: ours_score.map(|s| s.reliability()).unwrap_or_default(),
        percentile_knots: cfg.knots,
        seconds: 0.0,
        out: cfg.out.clone(),
    };
    write_json(&cfg.out.join("percentiles.json"), &map)?;
    if let Some(t) = &report.team_model_final {
        write_json(
            &cfg.out.join("team_model.json"),
            &serde_json::json!({
                "model": t,
                "party_adjustment": t.party_adjustment(),
                "raw_skill": params,
                "metric": cfg.metric,
            }),
        )?;
    }
    if cfg.html {
        let html = crate::report::skill::skill_html(&report, &run.dist, &map, &run.score);
        mm_lake::parquet_io::write_atomic(&cfg.out.join("skill_report.html"), html.as_bytes())?;
    }
    let report = SkillReport {
        seconds: t0.elapsed().as_secs_f64(),
        ..report
    };
    write_json(&cfg.out.join("skill_metrics.json"), &report)?;
    Ok(report)
}

/// The scale that gives the established players (past their provisional matches; with fewer
/// than 10 of them, those with 3 or more matches) a raw-skill standard deviation of `target_sd`
/// at the end of the tuning window. The dynamics in log-odds
/// are the same for every scale (the learning rate is divided by it), so this only sets the
/// unit, away from the bounds.
fn calibrated_scale(
    h: &History,
    params: RawSkillParams,
    target_sd: f64,
    win: &Windows,
) -> Result<f64, FitError> {
    if !(target_sd.is_finite() && target_sd > 0.0 && target_sd < 0.5) {
        return Err(config_err("target-sd", "must be in (0, 0.5)"));
    }
    let run = run_ours(h, check(params)?, None, win.tune_to, win, None);
    // Established players; on a short history, everyone with a few matches.
    let logits_over = |min_games: u32| -> Vec<f64> {
        run.model
            .players()
            .iter()
            .filter(|p| p.games >= min_games)
            .map(|p| p.skill * params.scale)
            .collect()
    };
    let mut logits = logits_over(params.provisional_matches);
    if logits.len() < 10 {
        logits = logits_over(3);
    }
    if logits.len() < 10 {
        return Ok(params.scale);
    }
    let sd = mean_sd(&logits).1;
    Ok(if sd > 0.0 {
        (sd / target_sd).clamp(1.0, 200.0)
    } else {
        params.scale
    })
}

/// Standard deviation of the metric over the rows of matches before `until`.
fn metric_sd(h: &History, until: i64) -> f64 {
    let end = h
        .matches
        .iter()
        .take_while(|m| m.start_ms < until)
        .last()
        .map_or(0, |m| m.hi as usize);
    let v: Vec<f64> = h.metric[..end]
        .iter()
        .copied()
        .filter(|x| x.is_finite())
        .collect();
    if v.is_empty() { 0.0 } else { mean_sd(&v).1 }
}

fn write_json(path: &Path, v: &impl Serialize) -> Result<(), FitError> {
    let bytes = serde_json::to_vec_pretty(v).map_err(|e| output_err(path, e))?;
    mm_lake::parquet_io::write_atomic(path, &bytes)?;
    Ok(())
}

/// `match_skill.parquet`: every replayed row's raw skill just before its match and its
/// percentile on the final map, keyed by player and match start (the churn fit joins it).
fn write_match_skill(
    cfg: &SkillConfig,
    h: &History,
    pre: &[f32],
    map: &PercentileMap,
) -> Result<(), FitError> {
    let mut ids = Vec::with_capacity(h.rows());
    let mut start = Vec::with_capacity(h.rows());
    let mut skill = Vec::with_capacity(h.rows());
    let mut pct = Vec::with_capacity(h.rows());
    for m in &h.matches {
        let rows = m.lo as usize..m.hi as usize;
        for (r, &s) in rows.clone().zip(&pre[rows]) {
            let s = f64::from(s);
            if !s.is_finite() {
                continue;
            }
            ids.push(h.ids[h.player[r] as usize].as_str());
            start.push(m.start_ms);
            skill.push(s);
            pct.push(map.percentile(s));
        }
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("player_id", DataType::Utf8, false),
        Field::new("start_ms", DataType::Int64, false),
        Field::new("raw_skill", DataType::Float64, false),
        Field::new("percentile", DataType::Float64, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(ids)),
        Arc::new(Int64Array::from(start)),
        Arc::new(Float64Array::from(skill)),
        Arc::new(Float64Array::from(pct)),
    ];
    let batch = RecordBatch::try_new(schema, cols).map_err(|e| output_err(&cfg.out, e))?;
    let path = cfg.out.join("match_skill.parquet");
    let tmp = mm_artifact::fsio::temp_path(&path);
    mm_lake::parquet_io::write_parquet_file(&tmp, &[batch])?;
    mm_artifact::fsio::publish(&tmp, &path).map_err(|e| output_err(&path, e))?;
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
    let batch = RecordBatch::try_new(schema, cols).map_err(|e| output_err(&cfg.out, e))?;
    let path = cfg.out.join("players.parquet");
    let tmp = mm_artifact::fsio::temp_path(&path);
    mm_lake::parquet_io::write_parquet_file(&tmp, &[batch])?;
    mm_artifact::fsio::publish(&tmp, &path).map_err(|e| output_err(&path, e))?;
    Ok(())
}
