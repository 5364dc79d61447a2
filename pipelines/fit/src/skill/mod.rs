//! `mm fit skill`: raw skill and percentiles from the lake.
//!
//! [`fit_skill`] runs the job's steps in order; the parts live beside it: [`history`] (the
//! lake's matches in time order), [`replay`] (our raw skill and the baselines under one
//! protocol), [`win`] (the win skill), [`truth`] (the fit against a simulated lake's truth),
//! [`out`] (the Parquet outputs) and [`report`] (the metrics and the HTML page).

pub mod history;
pub mod out;
pub mod replay;
pub mod report;
pub mod truth;
pub mod win;

use std::path::{Path, PathBuf};

use mm_lake::Lake;
use mm_lake::schema::{DAY_MS, ms_time};
use mm_trainer::skill::baselines::{BaselineKind, BaselineParams};
use mm_trainer::skill::percentile::PercentileMap;
use mm_trainer::skill::raw::{RawSkillParams, RoleComparison, ValidRawSkillParams};
use mm_trainer::skill::team::{
    FitTeamWinModel, PartyAdjustment, TeamFitConfig, TeamSample, TeamWinModel, fit_blowout,
};
use mm_trainer::stats::{BinaryScore, mean_sd};
use rayon::prelude::*;
use serde::Serialize;

use crate::error::{FitError, config_err, output_err};
use crate::skill::history::{DayStream, History, Metric};
use crate::skill::out::{MatchSkillWriter, write_players};
use crate::skill::replay::{OursReplay, OursRun, Windows, run_baseline, run_ours};
use crate::skill::report::{
    FinalWindow, ModelScore, SkillReport, TunePoint, TuningSample, WindowDates,
};
use crate::skill::win::{WinCollector, WinFit, WinSkillReport};

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
    /// `[score_from, score_to]`. Defaults: the matches' [`TUNE_FROM_POINT`], [`TUNE_TO_POINT`],
    /// [`TUNE_TO_POINT`] and 100% points in time.
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
    /// The most player-match rows held in memory: tuning, the baselines, the team model and
    /// the party adjustment are fitted on the lake's first days up to this many rows, and when
    /// the lake has more, the chosen model then replays every day of it one day at a time.
    pub max_tune_rows: usize,
    /// Fit the whole-history win skill and export it with its team win model when it predicts
    /// the latest matches better than raw skill (`crate::skill::win`).
    pub win_skill: bool,
    /// The most recent two-team matches the win skill is fitted on.
    pub max_win_matches: usize,
    /// A loss by more than this many team-score points is a blowout: the team win model's
    /// blowout model reads it (the churn fit's `blowout_margin` must agree, which the export
    /// checks).
    pub blowout_margin: f64,
}

/// Default of [`SkillConfig::max_tune_rows`].
pub const MAX_TUNE_ROWS: usize = 10_000_000;

/// The most team samples the day-by-day replay keeps per window (tuning, scoring) for the final
/// team model: a systematic sample of the matches when there are more. At 100M rows the skill
/// coefficient came out at 4.33 on 0.87M samples against 4.40 on 2.51M; at 4M the two
/// windows and their concatenation held up to about 270 MB at 100M rows, and the stage's peak
/// grew 1.68x from 10M rows; at 1M, 1.06x (issue 26, README).
const MAX_TEAM_SAMPLES: usize = 1_000_000;

/// The fewest decisive matches in the scoring window for the exported team model to be fitted
/// on that window alone (`fit_final_team`); with fewer, it is fitted on both windows.
pub const MIN_LATEST_DECISIVE: usize = 1_000;

/// The exported team win model: fitted on the scoring window, the latest matches, when it holds
/// at least [`MIN_LATEST_DECISIVE`] decisive ones; otherwise on the tuning and scoring windows
/// together.
///
/// Raw skill sharpens as players accumulate matches, so the same skill difference predicts
/// more of the outcome later in the history, and the matcher serves the ratings as they are at
/// its end. On a simulated 1v1 world of 3,000 players (seed 9001, issue 29) the coefficient of
/// a fit on each ten days' decisive matches rose from 1.76 (days 0-10) to 4.67 (days 50-56, the
/// last before the fit's cutoff); one fit over both windows gave 3.59, too flat for the ratings
/// the evaluation replays.
fn fit_final_team(
    tune: &[TeamSample],
    score: &[TeamSample],
    cfg: &TeamFitConfig,
) -> Result<(TeamWinModel, FinalWindow), FitError> {
    let decisive = score.iter().filter(|s| s.outcome != 0.5).count();
    if decisive >= MIN_LATEST_DECISIVE {
        return Ok((with_blowout(score, cfg)?, FinalWindow::Score));
    }
    let all: Vec<TeamSample> = tune.iter().chain(score).copied().collect();
    Ok((with_blowout(&all, cfg)?, FinalWindow::Both))
}

/// The team win model of `samples` with its blowout model fitted on the same matches
/// (`mm_trainer::skill::team::fit_blowout`): every exported team model, and a continued
/// retrain's refit.
///
/// # Errors
/// A fit failed.
pub fn with_blowout(samples: &[TeamSample], cfg: &TeamFitConfig) -> Result<TeamWinModel, FitError> {
    let mut model = TeamWinModel::fit(samples, cfg)?;
    model.blowout = fit_blowout(&model, samples, cfg)?;
    Ok(model)
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
            max_tune_rows: MAX_TUNE_ROWS,
            win_skill: true,
            max_win_matches: crate::skill::win::MAX_WIN_MATCHES,
            blowout_margin: mm_trainer::skill::team::BLOWOUT_MARGIN,
        }
    }
}

/// Where the default tuning window starts, as a share of the matches in time: the matches
/// before it are burn-in.
///
/// The tuning window is the recent past before the scoring window, not the lake's early days:
/// hyperparameters serve ratings as they are at the end of the history, and the early days are
/// dominated by players with few matches. With the window at the 20% to 60% points, the bundled
/// world's 6v6 mode chose a metric margin of 0.82 at cutoffs of 8, 10 and 12 days, and 0 from 14
/// days on; the 40% to 80% points chose 0 at every cutoff, and the choice predicted the next four
/// days 0.012 to 0.026 nats better at those cutoffs and as well (within 0.001) at the others. On
/// the ATP tour it predicted the next two years as well or better at four cutoffs (2008, 2011,
/// 2014, 2017: 0.0000 to 0.0018 nats). Docs: the guide, `mm fit skill`.
pub const TUNE_FROM_POINT: f64 = 0.4;
/// Where the default tuning window ends and the scoring window starts (see
/// [`TUNE_FROM_POINT`]); the scoring window runs to the end of the data.
pub const TUNE_TO_POINT: f64 = 0.8;

/// The windows from the configuration and the matches' times.
fn windows(cfg: &SkillConfig, h: &History) -> Result<Windows, FitError> {
    let at = |f: f64| h.matches[((h.matches.len() - 1) as f64 * f) as usize].start_ms;
    let tune_to = cfg.tune_to_ms.unwrap_or_else(|| at(TUNE_TO_POINT));
    let w = Windows {
        tune_from: cfg
            .tune_from_ms
            .unwrap_or_else(|| at(TUNE_FROM_POINT).min(tune_to)),
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
                ms_time(w.score_from),
                ms_time(w.tune_to)
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
        let mut grid: Vec<RawSkillParams> = Vec::new();
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
                    grid.push(RawSkillParams {
                        half_life_matches: hl,
                        margin,
                        roles,
                        ..cfg.params
                    });
                }
            }
        }
        // The grid's replays are independent: one per core, results in grid order.
        tuning = grid
            .par_iter()
            .map(|&p| {
                let run = run_ours(h, check(p)?, None, win.tune_to, win, None);
                Ok(TunePoint {
                    half_life_matches: p.half_life_matches,
                    margin: p.margin,
                    roles: p.roles,
                    log_loss: objective(&run, team_cfg),
                })
            })
            .collect::<Result<Vec<_>, FitError>>()?;
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
    /// The party adjustment `run` credited to parties (None: none).
    offsets: Option<PartyAdjustment>,
    team: Option<TeamWinModel>,
    team_final: Option<(TeamWinModel, FinalWindow)>,
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
    let bucket = (span / 60).max(DAY_MS);
    let mut run = run_ours(h, valid, None, i64::MAX, win, Some(bucket));
    let mut offsets = None;
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
            offsets = Some(adj);
            team = fit_team(&run, team_cfg);
            match team.and_then(|t| t.party_adjustment()) {
                Some(a) => party_iterations.push(a),
                None => break,
            }
        }
    }
    let ours_score = team.map(|t| log_loss_of(&t, &run.score));
    let team_final = if team.is_some() {
        Some(fit_final_team(&run.tune, &run.score, team_cfg)?)
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
        offsets,
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
        // Untuned: the defaults at the data's draw rate.
        let untuned = BaselineParams {
            draw_probability: draw_rate,
            ..kind.default_params()
        };
        let p = if cfg.tune {
            // One replay per core, compared in grid order.
            let grid = kind.grid(draw_rate);
            let scored: Vec<f64> = grid
                .par_iter()
                .map(|&p| run_baseline(h, p, win.tune_to, win).tune.metrics().log_loss)
                .collect();
            let mut best: Option<(BaselineParams, f64)> = None;
            for (p, ll) in grid.into_iter().zip(scored) {
                if ll.is_finite() && best.is_none_or(|b| ll < b.1) {
                    best = Some((p, ll));
                }
            }
            best.map_or(untuned, |b| b.0)
        } else {
            untuned
        };
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

/// The lake's first days (in time order, before `until_ms`) up to `max_rows` player-match
/// rows (at least one day), with players numbered as in the whole history; and whether that is
/// every match before `until_ms`.
fn read_sample(
    lake: &Lake,
    cfg: &SkillConfig,
    max_rows: usize,
) -> Result<(History, bool), FitError> {
    let mut days = DayStream::new(lake, cfg.mode.as_deref(), cfg.metric)?;
    let mut h = History::default();
    let mut complete = true;
    while let Some(day) = days.next_day_before(cfg.until_ms)? {
        if h.rows() > 0 && h.rows() + day.rows() > max_rows {
            complete = false;
            break;
        }
        h.append(&day);
    }
    // Players are numbered by first appearance: those of the sample are a prefix.
    let players = h.player.iter().max().map_or(0, |&p| p as usize + 1);
    days.ids.truncate(players);
    h.ids = days.ids;
    h.role_names = days.role_names;
    Ok((h, complete))
}

/// The replay whose states are exported: the tuning sample's when it was the whole lake
/// (`complete`), else every day of the lake again with the chosen model.
#[allow(clippy::too_many_arguments)]
fn final_run(
    lake: &Lake,
    cfg: &SkillConfig,
    h: &History,
    complete: bool,
    run: OursRun,
    team_final: Option<(TeamWinModel, FinalWindow)>,
    (params, offsets): (RawSkillParams, Option<PartyAdjustment>),
    win: &Windows,
    team_cfg: &TeamFitConfig,
) -> Result<FinalRun, FitError> {
    let mut collector = WinCollector::new(
        cfg.max_win_matches,
        cfg.until_ms.unwrap_or(i64::MAX),
        cfg.metric,
    );
    if !complete {
        drop(run);
        tracing::info!("skill: replaying every day of the lake with the chosen model");
        return replay_days(lake, cfg, check(params)?, offsets, win, team_cfg, collector);
    }
    let mut out = MatchSkillWriter::new(&cfg.out)?;
    out.push(&h.ids, h, &run.pre_skill)?;
    if cfg.win_skill {
        collector.feed(h, &run.pre_skill);
    }
    Ok(FinalRun {
        ids: h.ids.clone(),
        team_final,
        matches: h.matches.len() as u64,
        two_team_matches: h.matches.iter().filter(|m| m.two_teams()).count() as u64,
        rows: h.rows() as u64,
        end_ms: h.matches.last().map_or(0, |m| m.start_ms),
        match_skill: out,
        win: collector,
        run,
    })
}

/// Says whether the win skill is exported, and why.
fn log_win_skill(report: &crate::skill::win::WinSkillReport) {
    tracing::info!(
        exported = report.exported,
        "skill: win skill {} ({})",
        if report.exported {
            "exported"
        } else {
            "not exported"
        },
        if report.exported {
            format!(
                "{} strength, log-loss {:.4} against raw skill's {:.4} over the last {} days",
                report.estimator.map_or("", |e| e.name()),
                report.chosen_log_loss().unwrap_or(f64::NAN),
                report.raw_log_loss.unwrap_or(f64::NAN),
                crate::skill::win::CALIBRATION_DAYS
            )
        } else {
            report.reason.clone()
        }
    );
}

/// `percentiles.json`, and `team_model.json` when a final team model was fitted: the exported
/// model reads the win skill when it was chosen; the party adjustment, in raw-skill units, is
/// always raw skill's model's.
fn write_models(
    cfg: &SkillConfig,
    report: &SkillReport,
    map: &PercentileMap,
    win_fit: Option<&crate::skill::win::WinFit>,
    offsets: Option<PartyAdjustment>,
    params: RawSkillParams,
) -> Result<(), FitError> {
    write_json(&cfg.out.join("percentiles.json"), map)?;
    if let Some(t) = &report.team_model_final {
        let exported = win_fit.map_or(*t, |w| w.model);
        write_json(
            &cfg.out.join("team_model.json"),
            &serde_json::json!({
                "model": exported,
                "win_update": win_fit.map(|w| w.update),
                "party_adjustment": t.party_adjustment(),
                "update_offsets": offsets,
                "raw_skill_model": t,
                "raw_skill": params,
                "metric": cfg.metric,
            }),
        )?;
    }
    Ok(())
}

/// What the replay of every match with the chosen model gave, for the outputs.
struct FinalRun {
    run: OursRun,
    ids: Vec<String>,
    team_final: Option<(TeamWinModel, FinalWindow)>,
    matches: u64,
    two_team_matches: u64,
    rows: u64,
    end_ms: i64,
    match_skill: MatchSkillWriter,
    win: WinCollector,
}

/// Replays every day of the lake (before `cfg.until_ms`) one day at a time with the chosen
/// `params` and party `offsets`, writing the rows' pre-match skill as it goes; fits the final
/// team model on a bounded systematic sample of the matches. Memory: the players' state and a
/// day's rows.
fn replay_days(
    lake: &Lake,
    cfg: &SkillConfig,
    params: ValidRawSkillParams,
    offsets: Option<PartyAdjustment>,
    win: &Windows,
    team_cfg: &TeamFitConfig,
    mut collector: WinCollector,
) -> Result<FinalRun, FitError> {
    let mut days = DayStream::new(lake, cfg.mode.as_deref(), cfg.metric)?;
    let span = days.days();
    let span_ms = span
        .last()
        .zip(span.first())
        .map_or(0, |(l, f)| i64::from(l - f + 1) * DAY_MS);
    let bucket = (span_ms / 60).max(DAY_MS);
    let until = cfg.until_ms.unwrap_or(i64::MAX);
    let mut replay = OursReplay::new(params, offsets, until, *win, Some(bucket), MAX_TEAM_SAMPLES);
    let mut out = MatchSkillWriter::new(&cfg.out)?;
    let (mut matches, mut two, mut rows, mut end_ms) = (0u64, 0u64, 0u64, 0i64);
    let mut pre: Vec<f32> = Vec::new();
    let mut meter = mm_run::progress::Meter::new("skill: replay", "days", Some(span.len() as u64));
    while let Some(day) = days.next_day_before(cfg.until_ms)? {
        meter.add(1);
        pre.clear();
        pre.resize(day.rows(), f32::NAN);
        let more = replay.feed(&day, &mut pre);
        out.push(&days.ids, &day, &pre)?;
        if cfg.win_skill {
            collector.feed(&day, &pre);
        }
        matches += day.matches.len() as u64;
        two += day.matches.iter().filter(|m| m.two_teams()).count() as u64;
        rows += day.rows() as u64;
        end_ms = day.matches.last().map_or(end_ms, |m| m.start_ms);
        if !more {
            break;
        }
    }
    let run = replay.finish();
    days.ids.truncate(run.last_seen.len());
    let team_final = if run.tune.len() + run.score.len() >= 20 {
        Some(fit_final_team(&run.tune, &run.score, team_cfg)?)
    } else {
        None
    };
    Ok(FinalRun {
        run,
        ids: days.ids,
        team_final,
        matches,
        two_team_matches: two,
        rows,
        end_ms,
        match_skill: out,
        win: collector,
    })
}

/// Replays the lake through the raw-skill model and the baselines; writes `players.parquet`,
/// `match_skill.parquet`, `percentiles.json`, `team_model.json`, `skill_metrics.json` and
/// `skill_report.html` into `cfg.out`.
///
/// Tuning, the baselines, the team model and the party adjustment are fitted on the lake's
/// first days up to `cfg.max_tune_rows` rows, held in memory. When that is the whole lake,
/// its replay is the final one; otherwise the chosen model replays every day of the lake one
/// day at a time, so memory depends on the players and on `max_tune_rows`, not on the rows.
pub fn fit_skill(cfg: &SkillConfig) -> Result<SkillReport, FitError> {
    let t0 = std::time::Instant::now();
    check(cfg.params)?;
    if cfg.knots < 2 {
        return Err(config_err("knots", "at least 2"));
    }
    if cfg.max_tune_rows == 0 {
        return Err(config_err("max-tune-rows", "at least 1"));
    }
    let lake = Lake::open_as_of(&cfg.lake, cfg.as_of)?;
    let (h, complete) = read_sample(&lake, cfg, cfg.max_tune_rows)?;
    log_sample(&h, complete);
    if h.matches.is_empty() {
        return Err(FitError::Empty(cfg.lake.clone()));
    }
    let win = windows(cfg, &h)?;
    let team_cfg = TeamFitConfig {
        blowout_margin: cfg.blowout_margin,
        ..TeamFitConfig::default()
    };

    let (params, tuning) = tune(cfg, &h, &win, &team_cfg)?;
    let Fitted {
        run,
        offsets,
        team,
        team_final,
        party_iterations,
        ours_score,
        model_score,
    } = fit_models(cfg, &h, &win, params, &team_cfg)?;
    let mut models: Vec<ModelScore> = model_score.into_iter().collect();
    models.extend(score_baselines(cfg, &h, &win));
    std::fs::create_dir_all(&cfg.out).map_err(|e| output_err(&cfg.out, e))?;

    let fin = final_run(
        &lake,
        cfg,
        &h,
        complete,
        run,
        team_final,
        (params, offsets),
        &win,
        &team_cfg,
    )?;
    let (win_fit, win_report) = if cfg.win_skill {
        win_skill(fin.win, fin.ids.len(), &team_cfg)?
    } else {
        (None, None)
    };
    let run = &fin.run;
    let model = &run.model;
    let (map, active) = percentile_map(cfg, run, fin.ids.len(), fin.end_ms)?;
    let skills: Vec<f64> = (0..fin.ids.len()).map(|i| model.skill(i)).collect();
    let (mean, sd) = mean_sd(&skills);
    write_players(
        &cfg.out,
        &fin.ids,
        model,
        &run.last_seen,
        &map,
        win_fit.as_ref(),
    )?;
    let truth = crate::skill::truth::compare(
        &lake,
        &fin.ids,
        &h,
        model,
        fin.team_final.as_ref().map(|(t, _)| t),
        &team_cfg,
    );
    let report = SkillReport {
        lake_version: lake.version(),
        metric: cfg.metric,
        mode: cfg.mode.clone(),
        matches: fin.matches,
        two_team_matches: fin.two_team_matches,
        player_matches: fin.rows,
        players: fin.ids.len() as u64,
        active_players: active,
        skill_mean: mean,
        skill_sd: sd,
        skill_min: skills.iter().copied().fold(f64::INFINITY, f64::min),
        skill_max: skills.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        windows: window_dates(&h, &win),
        tuning_sample: (!complete).then(|| TuningSample {
            rows: h.rows() as u64,
            matches: h.matches.len() as u64,
            until: ms_time(h.matches.last().map_or(0, |m| m.start_ms)),
        }),
        params,
        tuning,
        models,
        pairwise: run.pairwise.metrics(),
        team_model: team,
        team_model_final: fin.team_final.map(|(t, _)| t),
        team_model_final_window: fin.team_final.map(|(_, w)| w),
        win_skill: win_report,
        party_adjustment: party_iterations.last().copied(),
        party_iterations,
        truth,
        reliability: ours_score.map(|s| s.reliability()).unwrap_or_default(),
        percentile_knots: cfg.knots,
        seconds: 0.0,
        out: cfg.out.clone(),
    };
    fin.match_skill.finish(&map)?;
    write_models(cfg, &report, &map, win_fit.as_ref(), offsets, params)?;
    if cfg.html {
        let html = crate::skill::report::skill_html(&report, &run.dist, &map, &run.score);
        mm_lake::parquet_io::write_atomic(&cfg.out.join("skill_report.html"), html.as_bytes())?;
    }
    let report = SkillReport {
        seconds: t0.elapsed().as_secs_f64(),
        ..report
    };
    write_json(&cfg.out.join("skill_metrics.json"), &report)?;
    Ok(report)
}

/// The win skill fitted on the matches the final replay kept, and its report (logged).
fn win_skill(
    win: WinCollector,
    players: usize,
    team_cfg: &TeamFitConfig,
) -> Result<(Option<WinFit>, Option<WinSkillReport>), FitError> {
    let (fit, report) = win.fit(players, team_cfg)?;
    log_win_skill(&report);
    Ok((fit, Some(report)))
}

/// Logs what was read: the whole lake, or the first days for tuning.
fn log_sample(h: &History, complete: bool) {
    tracing::info!(
        matches = h.matches.len(),
        players = h.ids.len(),
        rows = h.player.len(),
        complete,
        "skill: read {} matches of {} players{}",
        h.matches.len(),
        h.ids.len(),
        if complete {
            ""
        } else {
            " (the first days, up to --max-tune-rows, for tuning)"
        }
    );
}

/// The percentile map of the players active in the last `cfg.active_days` days of the data,
/// and how many they are.
fn percentile_map(
    cfg: &SkillConfig,
    run: &OursRun,
    players: usize,
    end: i64,
) -> Result<(PercentileMap, u64), FitError> {
    let model = &run.model;
    let window = i64::from(cfg.active_days) * DAY_MS;
    let states = model.players();
    let active: Vec<f64> = (0..players)
        .filter(|&i| run.last_seen[i] >= end - window && i < states.len())
        .map(|i| states[i].skill)
        .collect();
    let map =
        PercentileMap::fit(&active, cfg.knots).ok_or_else(|| FitError::Empty(cfg.lake.clone()))?;
    Ok((map, active.len() as u64))
}

/// The tuning and scoring windows' dates and two-team match counts.
fn window_dates(h: &History, win: &Windows) -> WindowDates {
    let count = |f: &dyn Fn(i64) -> bool| {
        h.matches
            .iter()
            .filter(|m| m.two_teams() && f(m.start_ms))
            .count() as u64
    };
    WindowDates {
        tune_from: ms_time(win.tune_from),
        tune_to: ms_time(win.tune_to),
        score_from: ms_time(win.score_from),
        score_to: ms_time(win.score_to.min(h.matches.last().map_or(0, |m| m.start_ms))),
        tune_matches: count(&|t| win.in_tune(t)),
        scored_matches: count(&|t| win.in_score(t)),
    }
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

#[cfg(test)]
mod tests {
    use mm_trainer::stats::sigmoid;

    use super::*;

    /// `n` matches with skill differences spread over [-0.3, 0.3], won by team A with
    /// probability `sigmoid(coef × difference)`; every `draw_every`-th one (when not 0) a draw.
    /// The coins are a hash of `seed` and the index.
    fn matches(n: usize, coef: f64, seed: u64, draw_every: usize) -> Vec<TeamSample> {
        (0..n)
            .map(|k| {
                let u = |salt: u64| {
                    let h = xxhash_rust::xxh3::xxh3_64_with_seed(
                        &(k as u64).to_le_bytes(),
                        seed ^ salt,
                    );
                    (h >> 11) as f64 / (1u64 << 53) as f64
                };
                let d = 0.6 * u(1) - 0.3;
                let outcome = if draw_every != 0 && k % draw_every == 0 {
                    0.5
                } else {
                    f64::from(u(2) < sigmoid(coef * d))
                };
                TeamSample {
                    skill_diff: d,
                    outcome,
                    ..TeamSample::default()
                }
            })
            .collect()
    }

    #[test]
    fn the_exported_team_model_is_fitted_on_the_latest_window_when_it_can_be() {
        let cfg = TeamFitConfig::default();
        // Ratings that predict more later, as raw skill does once players have history.
        let tune = matches(20_000, 2.0, 1, 0);
        let score = matches(20_000, 5.0, 2, 0);
        let (late, w) = fit_final_team(&tune, &score, &cfg).unwrap();
        assert_eq!(w, FinalWindow::Score);
        assert!((late.skill_coef - 5.0).abs() < 0.4, "{late:?}");
        assert_eq!(late.samples, score.len() as u64);

        // Too few decisive matches in the scoring window: both windows, and the coefficient is
        // the pooled one (20,000 matches at 2 and 999 at 5).
        let few = &score[..MIN_LATEST_DECISIVE - 1];
        let (both, w) = fit_final_team(&tune, few, &cfg).unwrap();
        assert_eq!(w, FinalWindow::Both);
        assert_eq!(both.samples, (tune.len() + few.len()) as u64);
        assert!((both.skill_coef - 2.0).abs() < 0.4, "{both:?}");

        // Draws do not count towards the minimum: every other match a draw, so 1,998 matches
        // hold 999 decisive ones (both windows) and 2,000 hold 1,000 (the latest).
        let drawn = matches(2 * MIN_LATEST_DECISIVE, 5.0, 3, 2);
        let (_, w) = fit_final_team(&tune, &drawn, &cfg).unwrap();
        assert_eq!(w, FinalWindow::Score);
        let (_, w) = fit_final_team(&tune, &drawn[..2 * MIN_LATEST_DECISIVE - 2], &cfg).unwrap();
        assert_eq!(w, FinalWindow::Both);
    }
}
