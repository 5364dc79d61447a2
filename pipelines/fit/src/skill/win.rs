//! The win skill in `mm fit skill` (issues 29 and 56): the most recent two-team matches, kept
//! in bounded memory as the replay goes; two whole-history strengths fitted on them, a
//! Bradley-Terry fit on the outcomes (`mm-trainer`'s `skill::win`) and a least-squares fit on the
//! rows' in-match metric (`skill::perf`); their out-of-sample calibration into team win models;
//! and the choice, on the same later matches, between the better of them and raw skill's.
//!
//! Calibration: the strengths fitted on the matches before each [`CALIBRATION_STEP_DAYS`] of
//! the last [`CALIBRATION_DAYS`] days predict that step's matches (a rolling origin), and a team
//! win model (skill, party terms, draws) is fitted on those predictions. Raw skill's model is
//! fitted on the same matches from each row's pre-match raw skill. Each predicts matches its
//! skill has not seen, with the same few coefficients, so their log-losses compare. The better strength is exported when its log-loss is also below
//! raw skill's: then that strength fitted on every kept match, with the calibrated model's
//! coefficients.

use std::collections::VecDeque;

use mm_artifact::skill::{WinEstimator as Estimator, WinSkillUpdate};
use mm_trainer::skill::perf::{PerfMatches, PerfSkillFit, fit_perf_skill, fit_perf_skill_from};
use mm_trainer::skill::team::{
    FitTeamWinModel, SkillBasis, TeamFitConfig, TeamSample, TeamWinModel,
};
use mm_trainer::skill::win::{WinMatches, WinSkillFit, fit_win_skill, fit_win_skill_from};
use mm_trainer::stats::{BinaryScore, sigmoid};
use serde::Serialize;

use crate::error::FitError;
use crate::skill::history::{History, Metric};
use crate::skill::replay::sample_of;

/// Days at the end of the kept matches that calibrate the win skill and choose between it and
/// raw skill.
pub const CALIBRATION_DAYS: i64 = 10;

/// Default of the most recent two-team matches kept for the win skill. At about 12 players a
/// match (6v6) they hold about 150 MB; players with no kept match get win skill 0.
pub const MAX_WIN_MATCHES: usize = 1_000_000;

/// The fewest decisive matches before the calibration days, and in them, for a win skill.
pub const MIN_WIN_DECISIVE: usize = 1_000;

/// Steps of the calibration days: before each, the strengths are refitted on the matches
/// before it, so they predict matches 0 to 2 days after their fit, as an evaluation's held-out
/// day after a retrain does. Raw skill's model reads each row's pre-match value, current to
/// the match. In one 10-day step (each strength fitted once, before the calibration days) the
/// whole-history strengths were up to ten days older than raw skill, and lost to it on the
/// bundled world (`mm fit skill` on its 6v6 matches with this constant at 10: log-loss 0.5706
/// against 0.5630) although on its held-out day the performance strength predicted better
/// (win/draw/loss log-loss 0.6850 against 0.7114, exported by an edited build); in 2-day steps
/// 0.5606.
pub const CALIBRATION_STEP_DAYS: i64 = 2;

/// Half-life in days of a match's weight in the performance strength's fit, counted back from
/// the fit's last match: a player's skill drifts, and older matches say less about it now.
/// Chosen with the penalty (`PerfSkillFit`'s default) on the calibration log-loss of a 60-day
/// 6v6 world that no figure reports (`mm simulate --players 5000 --days 60 --duel-share 0
/// --seed 9103`, then `mm fit skill --mode tdm-6v6` with this constant changed): 0.5661 at 20
/// days, 0.5680 at 10, 0.5666 at 40 and 0.5682 without decay.
pub const PERF_HALF_LIFE_DAYS: f64 = 20.0;

/// Which whole-history strength the win skill is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WinEstimator {
    /// Bradley-Terry on the decisive matches' outcomes (`mm-trainer`'s `skill::win`).
    Outcomes,
    /// Least squares on the rows' in-match metric against the opponents' strength
    /// (`mm-trainer`'s `skill::perf`).
    Performance,
}

impl WinEstimator {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            WinEstimator::Outcomes => "outcomes",
            WinEstimator::Performance => "performance",
        }
    }
}

/// One kept match: its rows are the next `len` of the kept players and parties.
#[derive(Debug, Clone, Copy)]
struct Kept {
    start_ms: i64,
    len: u16,
    split: u16,
    /// Team A's features from the rows' pre-match raw skill, and the outcome.
    raw: TeamSample,
}

/// The most recent two-team matches before a time, fed a stretch of history at a time.
#[derive(Debug)]
pub struct WinCollector {
    cap: usize,
    until: i64,
    kept: VecDeque<Kept>,
    players: VecDeque<u32>,
    parties: VecDeque<u16>,
    /// Each kept row's metric on the performance fit's scale (`NaN`: unknown).
    ys: VecDeque<f32>,
    metric: Metric,
    offered: u64,
}

/// What the win skill's fit found, for the report (`win_skill` in `skill_metrics.json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WinSkillReport {
    /// Two-team matches before the fit's end, and how many of the latest were kept.
    pub offered_matches: u64,
    pub kept_matches: u64,
    /// Decisive matches kept; players in them.
    pub decisive: u64,
    pub players: u64,
    pub first_kept: String,
    pub calibration_from: String,
    pub last_kept: String,
    /// Decisive matches before the calibration days; matches in them (decisive).
    pub early_decisive: u64,
    pub calibration_matches: u64,
    pub calibration_decisive: u64,
    /// L2 penalty of the outcomes' fit (`1 / C`).
    pub alpha: f64,
    /// L2 penalty and recency half-life of the performance fit.
    pub perf_lambda: f64,
    pub perf_half_life_days: f64,
    /// The final fit's iterations (L-BFGS for the outcomes, conjugate gradient for the
    /// performance) and whether it converged.
    pub iterations: u64,
    pub converged: bool,
    /// Mean log-loss of decisive calibration matches: the outcomes' and the performance
    /// strengths (refitted before each step of them) and raw skill (each row's pre-match
    /// value), each through a team win model fitted on those matches.
    pub win_log_loss: Option<f64>,
    pub perf_log_loss: Option<f64>,
    pub raw_log_loss: Option<f64>,
    /// The better of the two strengths, its calibrated model, whether it was exported, and
    /// why not when not.
    pub estimator: Option<WinEstimator>,
    pub model: Option<TeamWinModel>,
    pub exported: bool,
    pub reason: String,
    pub seconds: f64,
}

impl WinSkillReport {
    /// The calibration log-loss of the strength chosen ([`WinSkillReport::estimator`]).
    #[must_use]
    pub fn chosen_log_loss(&self) -> Option<f64> {
        match self.estimator? {
            WinEstimator::Outcomes => self.win_log_loss,
            WinEstimator::Performance => self.perf_log_loss,
        }
    }
}

/// The exported win skill: a strength per player (by the fit's player number) and the team win
/// model that reads it.
#[derive(Debug, Clone)]
pub struct WinFit {
    pub theta: Vec<f64>,
    /// Each player's mass as of `as_of_ms` (0 for a player of no kept match).
    pub mass: Vec<f64>,
    pub as_of_ms: i64,
    /// How a service and a continued retrain update the strength after a match.
    pub update: WinSkillUpdate,
    pub model: TeamWinModel,
}

impl WinCollector {
    /// Keeps the latest `cap` two-team matches starting before `until`, with their rows'
    /// `metric`.
    #[must_use]
    pub fn new(cap: usize, until: i64, metric: Metric) -> Self {
        WinCollector {
            cap: cap.max(1),
            until,
            kept: VecDeque::new(),
            players: VecDeque::new(),
            parties: VecDeque::new(),
            ys: VecDeque::new(),
            metric,
            offered: 0,
        }
    }

    /// Offers `h`'s two-team matches (in time order, after those already fed) with each row's
    /// pre-match raw skill `pre` (`NaN`: not replayed, skipped).
    pub fn feed(&mut self, h: &History, pre: &[f32]) {
        let mut values = Vec::new();
        for m in &h.matches {
            if !m.two_teams() || m.start_ms >= self.until {
                continue;
            }
            let (lo, hi) = (m.lo as usize, m.hi as usize);
            values.clear();
            values.extend(pre[lo..hi].iter().map(|&x| f64::from(x)));
            let (Ok(len), Ok(split)) = (u16::try_from(hi - lo), u16::try_from(m.split - m.lo))
            else {
                continue;
            };
            if values.iter().any(|x| !x.is_finite()) {
                continue;
            }
            self.offered += 1;
            let mut raw = sample_of(&values, &h.party[lo..hi], usize::from(split), m.score_a);
            raw.margin = f64::from(m.margin_a);
            self.kept.push_back(Kept {
                start_ms: m.start_ms,
                len,
                split,
                raw,
            });
            self.players.extend(&h.player[lo..hi]);
            self.parties.extend(&h.party[lo..hi]);
            let metric = self.metric;
            self.ys
                .extend(h.metric[lo..hi].iter().map(|&x| metric.fit_scale(x) as f32));
            if self.kept.len() > self.cap
                && let Some(old) = self.kept.pop_front()
            {
                self.players.drain(..usize::from(old.len));
                self.parties.drain(..usize::from(old.len));
                self.ys.drain(..usize::from(old.len));
            }
        }
    }

    /// Fits the win skill of `players` players (the fit's numbering) and chooses between it and
    /// raw skill. `Ok((None, report))` when it is not exported; the report says why.
    ///
    /// # Errors
    /// The Bradley-Terry or a team model's fit failed.
    pub fn fit(
        self,
        players: usize,
        team_cfg: &TeamFitConfig,
    ) -> Result<(Option<WinFit>, WinSkillReport), FitError> {
        let t0 = std::time::Instant::now();
        let players_v: Vec<u32> = self.players.into_iter().collect();
        let parties_v: Vec<u16> = self.parties.into_iter().collect();
        let kept: Vec<Kept> = self.kept.into_iter().collect();
        let ys_v: Vec<f32> = self.ys.into_iter().collect();
        let offsets: Vec<usize> = std::iter::once(0)
            .chain(kept.iter().scan(0, |end, k| {
                *end += usize::from(k.len);
                Some(*end)
            }))
            .collect();
        let first = kept.first().map_or(0, |k| k.start_ms);
        let last = kept.last().map_or(0, |k| k.start_ms);
        let end = last.saturating_add(1).min(self.until);
        let cal_from = end - CALIBRATION_DAYS * mm_lake::schema::DAY_MS;
        let decisive = |k: &Kept| k.raw.outcome == 0.0 || k.raw.outcome == 1.0;
        let (local, global) = compact(&players_v, players);
        let rows = Rows {
            win_cfg: WinSkillFit::default(),
            perf_cfg: PerfSkillFit::default(),
            kept: &kept,
            offsets: &offsets,
            players: &players_v,
            parties: &parties_v,
            ys: &ys_v,
            local: &local,
        };
        let early = kept
            .iter()
            .filter(|k| k.start_ms < cal_from && decisive(k))
            .count();
        let cal: Vec<usize> = (0..kept.len())
            .filter(|&m| kept[m].start_ms >= cal_from)
            .collect();
        let cal_decisive = cal.iter().filter(|&&m| decisive(&kept[m])).count();
        let mut report = WinSkillReport {
            offered_matches: self.offered,
            kept_matches: kept.len() as u64,
            decisive: kept.iter().filter(|k| decisive(k)).count() as u64,
            players: global.len() as u64,
            first_kept: mm_lake::schema::ms_time(first),
            calibration_from: mm_lake::schema::ms_time(cal_from),
            last_kept: mm_lake::schema::ms_time(last),
            early_decisive: early as u64,
            calibration_matches: cal.len() as u64,
            calibration_decisive: cal_decisive as u64,
            alpha: rows.win_cfg.alpha,
            perf_lambda: rows.perf_cfg.lambda,
            perf_half_life_days: PERF_HALF_LIFE_DAYS,
            iterations: 0,
            converged: false,
            win_log_loss: None,
            perf_log_loss: None,
            raw_log_loss: None,
            estimator: None,
            model: None,
            exported: false,
            reason: String::new(),
            seconds: 0.0,
        };
        if early < MIN_WIN_DECISIVE || cal_decisive < MIN_WIN_DECISIVE {
            report.reason = format!(
                "too few decisive matches: {} before the last {CALIBRATION_DAYS} days and {} in \
                 them (at least {MIN_WIN_DECISIVE} each)",
                early, cal_decisive
            );
            report.seconds = t0.elapsed().as_secs_f64();
            return Ok((None, report));
        }
        // Each whole-history strength, refitted before each step of the calibration days,
        // predicts them through a team win model calibrated on them.
        let (win_samples, perf_samples) = rows.rolling(&cal, cal_from, end, global.len())?;
        let (win_model, w) = calibrated(&win_samples, team_cfg)?;
        let (perf_model, p) = calibrated(&perf_samples, team_cfg)?;
        let raw_samples: Vec<TeamSample> = cal.iter().map(|&m| kept[m].raw).collect();
        let raw_model = TeamWinModel::fit(&raw_samples, team_cfg)?;
        let r = decisive_log_loss(&raw_model, &raw_samples);
        report.win_log_loss = Some(w);
        report.perf_log_loss = Some(p);
        report.raw_log_loss = Some(r);
        // The better of the two strengths (a model that reads a strength backwards is not a
        // candidate), then against raw skill.
        let (estimator, model, loss) =
            if p < w && perf_model.skill_coef > 0.0 || win_model.skill_coef <= 0.0 {
                (WinEstimator::Performance, perf_model, p)
            } else {
                (WinEstimator::Outcomes, win_model, w)
            };
        report.estimator = Some(estimator);
        report.model = Some(model);
        if loss >= r || model.skill_coef <= 0.0 {
            report.reason = format!(
                "raw skill predicts the last {CALIBRATION_DAYS} days at least as well \
                 (log-loss {r:.4} against {loss:.4}, {})",
                estimator.name()
            );
            report.seconds = t0.elapsed().as_secs_f64();
            return Ok((None, report));
        }
        let full = rows.refit(estimator, global.len(), end)?;
        report.iterations = full.iterations;
        report.converged = full.converged;
        report.exported = true;
        report.seconds = t0.elapsed().as_secs_f64();
        Ok((
            Some(full.by_fit_player(&global, players, end, model)),
            report,
        ))
    }
}

/// The team win model reading a strength, fitted on `samples`, and its mean log-loss on their
/// decisive ones.
fn calibrated(
    samples: &[TeamSample],
    team_cfg: &TeamFitConfig,
) -> Result<(TeamWinModel, f64), FitError> {
    let mut model = crate::skill::with_blowout(samples, team_cfg)?;
    model.basis = SkillBasis::WinSkill;
    Ok((model, decisive_log_loss(&model, samples)))
}

/// Compact numbering of the players of the kept matches: each fit player's compact index
/// (`u32::MAX` when absent) and each compact index's fit player.
fn compact(rows: &[u32], players: usize) -> (Vec<u32>, Vec<u32>) {
    let mut local = vec![u32::MAX; players];
    let mut global: Vec<u32> = Vec::new();
    for &p in rows {
        let slot = &mut local[p as usize];
        if *slot == u32::MAX {
            *slot = global.len() as u32;
            global.push(p);
        }
    }
    (local, global)
}

/// The exported strength's fit on every kept match (compact players).
struct Refit {
    theta: Vec<f64>,
    mass: Vec<f64>,
    iterations: u64,
    converged: bool,
    update: WinSkillUpdate,
}

impl Refit {
    /// The exported win skill, numbered by the fit's `players` players (`global`: each compact
    /// player's), its masses as of `end`.
    fn by_fit_player(
        self,
        global: &[u32],
        players: usize,
        end: i64,
        model: TeamWinModel,
    ) -> WinFit {
        let (mut theta, mut mass) = (vec![0.0; players], vec![0.0; players]);
        for (l, &g) in global.iter().enumerate() {
            theta[g as usize] = self.theta[l];
            mass[g as usize] = self.mass[l];
        }
        WinFit {
            theta,
            mass,
            as_of_ms: end,
            update: self.update,
            model,
        }
    }
}

/// The kept matches' rows: match `m`'s players and parties are `offsets[m]..offsets[m + 1]`.
struct Rows<'a> {
    /// How the two strengths are fitted (the report states the same penalties).
    win_cfg: WinSkillFit,
    perf_cfg: PerfSkillFit,
    kept: &'a [Kept],
    offsets: &'a [usize],
    players: &'a [u32],
    parties: &'a [u16],
    /// Each row's metric on the performance fit's scale.
    ys: &'a [f32],
    /// Each fit player's compact index.
    local: &'a [u32],
}

impl Rows<'_> {
    /// The decisive matches `pick` keeps, for the outcomes' fit (compact player indices).
    fn outcomes(&self, pick: &dyn Fn(&Kept) -> bool) -> WinMatches {
        let mut d = WinMatches::new();
        let mut ids = Vec::new();
        for (m, k) in self.kept.iter().enumerate() {
            if (k.raw.outcome == 0.0 || k.raw.outcome == 1.0) && pick(k) {
                ids.clear();
                ids.extend(
                    self.players[self.offsets[m]..self.offsets[m + 1]]
                        .iter()
                        .map(|&p| self.local[p as usize]),
                );
                let (a, b) = ids.split_at(usize::from(k.split));
                d.push(a, b, k.raw.outcome == 1.0);
            }
        }
        d
    }

    /// The team samples of the calibration matches `cal` (in time order, from `cal_from` to
    /// `end`) by rolling origin, for the outcomes' and the performance strengths: before each
    /// [`CALIBRATION_STEP_DAYS`] both are refitted on every kept match before the step
    /// (warm-started from the previous step's), as a retrain schedule refits them, and they
    /// read that step's matches.
    fn rolling(
        &self,
        cal: &[usize],
        cal_from: i64,
        end: i64,
        players: usize,
    ) -> Result<(Vec<TeamSample>, Vec<TeamSample>), FitError> {
        let step = CALIBRATION_STEP_DAYS * mm_lake::schema::DAY_MS;
        let (mut win, mut perf) = (vec![0.0; players], vec![0.0; players]);
        let (mut win_samples, mut perf_samples) = (Vec::new(), Vec::new());
        let mut from = cal_from;
        while from < end {
            let to = from.saturating_add(step).min(end);
            let chunk: Vec<usize> = cal
                .iter()
                .copied()
                .filter(|&m| (from..to).contains(&self.kept[m].start_ms))
                .collect();
            if !chunk.is_empty() {
                let before = |k: &Kept| k.start_ms < from;
                win = fit_win_skill_from(&self.outcomes(&before), &win, &self.win_cfg)?.theta;
                let data = self.performance(&before, from);
                perf = fit_perf_skill_from(&data, &perf, &self.perf_cfg)?.theta;
                win_samples.extend(self.samples(&chunk, |p| win[self.local[p as usize] as usize]));
                perf_samples
                    .extend(self.samples(&chunk, |p| perf[self.local[p as usize] as usize]));
            }
            from = to;
        }
        Ok((win_samples, perf_samples))
    }

    /// `estimator`'s strengths of the `players` compact players fitted on every kept match
    /// (performance weighted by age at `end`), with their masses as of `end` and the update
    /// that continues from them.
    fn refit(&self, estimator: WinEstimator, players: usize, end: i64) -> Result<Refit, FitError> {
        Ok(match estimator {
            WinEstimator::Outcomes => {
                let data = self.outcomes(&|_| true);
                let full = fit_win_skill(&data, players, &self.win_cfg)?;
                Refit {
                    mass: data.curvature(&full.theta, players),
                    theta: full.theta,
                    iterations: full.iterations,
                    converged: full.converged,
                    update: WinSkillUpdate {
                        estimator: Estimator::Outcomes,
                        penalty: self.win_cfg.alpha,
                        half_life_days: None,
                        centre: 0.0,
                    },
                }
            }
            WinEstimator::Performance => {
                let data = self.performance(&|_| true, end);
                let full = fit_perf_skill(&data, players, &self.perf_cfg)?;
                Refit {
                    mass: data.diagonal(players),
                    theta: full.theta,
                    iterations: full.iterations,
                    converged: full.converged,
                    update: WinSkillUpdate {
                        estimator: Estimator::Performance,
                        penalty: self.perf_cfg.lambda,
                        half_life_days: Some(PERF_HALF_LIFE_DAYS),
                        centre: data.centre(),
                    },
                }
            }
        })
    }

    /// The matches `pick` keeps whose rows all have a metric, for the performance fit, each
    /// weighted by its age at `to_ms` ([`PERF_HALF_LIFE_DAYS`]).
    fn performance(&self, pick: &dyn Fn(&Kept) -> bool, to_ms: i64) -> PerfMatches {
        let mut d = PerfMatches::new();
        let (mut ids, mut y) = (Vec::new(), Vec::new());
        for (m, k) in self.kept.iter().enumerate() {
            let (lo, hi) = (self.offsets[m], self.offsets[m + 1]);
            if !pick(k) || self.ys[lo..hi].iter().any(|v| !v.is_finite()) {
                continue;
            }
            ids.clear();
            ids.extend(self.players[lo..hi].iter().map(|&p| self.local[p as usize]));
            y.clear();
            y.extend(self.ys[lo..hi].iter().map(|&v| f64::from(v)));
            let split = usize::from(k.split);
            let age_days = (to_ms - k.start_ms).max(0) as f64 / mm_lake::schema::DAY_MS as f64;
            let w = 0.5f64.powf(age_days / PERF_HALF_LIFE_DAYS);
            d.push(&ids[..split], &y[..split], &ids[split..], &y[split..], w);
        }
        d
    }

    /// The team samples of matches `ms` with each player's skill from `skill` (by fit player),
    /// each keeping its raw-skill sample's margin.
    fn samples(&self, ms: &[usize], skill: impl Fn(u32) -> f64) -> Vec<TeamSample> {
        let mut values = Vec::new();
        ms.iter()
            .map(|&m| {
                let (lo, hi) = (self.offsets[m], self.offsets[m + 1]);
                values.clear();
                values.extend(self.players[lo..hi].iter().map(|&p| skill(p)));
                let k = &self.kept[m];
                TeamSample {
                    margin: k.raw.margin,
                    ..sample_of(
                        &values,
                        &self.parties[lo..hi],
                        usize::from(k.split),
                        k.raw.outcome,
                    )
                }
            })
            .collect()
    }
}

/// Mean log-loss of the decisive matches of `samples` under `model`.
fn decisive_log_loss(model: &TeamWinModel, samples: &[TeamSample]) -> f64 {
    let mut score = BinaryScore::default();
    for s in samples
        .iter()
        .filter(|s| s.outcome == 0.0 || s.outcome == 1.0)
    {
        score.add(sigmoid(model.logit(s)), s.outcome);
    }
    score.metrics().log_loss
}
