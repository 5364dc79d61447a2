//! The win skill in `mm fit skill` (issue 29): the most recent two-team matches, kept in bounded
//! memory as the replay goes; a Bradley-Terry fit on them (`mm-trainer`'s `skill::win`); its
//! out-of-sample calibration into a team win model; and the choice, on the same later matches,
//! between that model and raw skill's.
//!
//! Calibration: the strengths fitted on the matches before the last [`CALIBRATION_DAYS`] days
//! predict those days' matches, and a team win model (skill, party terms, draws) is fitted on
//! those predictions. Raw skill's model is fitted on the same matches from each row's pre-match
//! raw skill. Both predict matches their skill has not seen, with the same few coefficients, so
//! their log-losses compare. The win skill is exported when its log-loss is the lower: then the
//! strengths fitted on every kept match, with the calibrated model's coefficients.

use std::collections::VecDeque;

use mm_trainer::skill::team::{
    FitTeamWinModel, SkillBasis, TeamFitConfig, TeamSample, TeamWinModel,
};
use mm_trainer::skill::win::{WinMatches, WinSkillFit, fit_win_skill};
use mm_trainer::stats::{BinaryScore, sigmoid};
use serde::Serialize;

use crate::error::FitError;
use crate::skill::history::History;
use crate::skill::replay::sample_of;

/// Days at the end of the kept matches that calibrate the win skill and choose between it and
/// raw skill.
pub const CALIBRATION_DAYS: i64 = 10;

/// Default of the most recent two-team matches kept for the win skill. At about 12 players a
/// match (6v6) they hold about 100 MB; players with no kept match get win skill 0.
pub const MAX_WIN_MATCHES: usize = 1_000_000;

/// The fewest decisive matches before the calibration days, and in them, for a win skill.
pub const MIN_WIN_DECISIVE: usize = 1_000;

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
    /// L2 penalty (`1 / C`).
    pub alpha: f64,
    /// The final fit's L-BFGS iterations and whether it converged.
    pub iterations: u64,
    pub converged: bool,
    /// Mean log-loss of decisive calibration matches, win skill (strengths from before them)
    /// and raw skill (each row's pre-match value), each through a team win model fitted on
    /// those matches.
    pub win_log_loss: Option<f64>,
    pub raw_log_loss: Option<f64>,
    /// The win skill's calibrated model, whether it was exported, and why not when not.
    pub model: Option<TeamWinModel>,
    pub exported: bool,
    pub reason: String,
    pub seconds: f64,
}

/// The exported win skill: a strength per player (by the fit's player number) and the team win
/// model that reads it.
#[derive(Debug, Clone)]
pub struct WinFit {
    pub theta: Vec<f64>,
    pub model: TeamWinModel,
}

impl WinCollector {
    /// Keeps the latest `cap` two-team matches starting before `until`.
    #[must_use]
    pub fn new(cap: usize, until: i64) -> Self {
        WinCollector {
            cap: cap.max(1),
            until,
            kept: VecDeque::new(),
            players: VecDeque::new(),
            parties: VecDeque::new(),
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
            if self.kept.len() > self.cap
                && let Some(old) = self.kept.pop_front()
            {
                self.players.drain(..usize::from(old.len));
                self.parties.drain(..usize::from(old.len));
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
        let mut offsets = Vec::with_capacity(kept.len() + 1);
        offsets.push(0usize);
        for k in &kept {
            offsets.push(offsets.last().copied().unwrap_or(0) + usize::from(k.len));
        }
        let first = kept.first().map_or(0, |k| k.start_ms);
        let last = kept.last().map_or(0, |k| k.start_ms);
        let end = last.saturating_add(1).min(self.until);
        let cal_from = end - CALIBRATION_DAYS * mm_lake::schema::DAY_MS;
        let decisive = |k: &Kept| k.raw.outcome == 0.0 || k.raw.outcome == 1.0;
        let (local, global) = compact(&players_v, players);
        let build = |pick: &dyn Fn(&Kept) -> bool| {
            let mut d = WinMatches::new();
            for (m, k) in kept.iter().enumerate() {
                if decisive(k) && pick(k) {
                    let rows = &players_v[offsets[m]..offsets[m + 1]];
                    let ids: Vec<u32> = rows.iter().map(|&p| local[p as usize]).collect();
                    let (a, b) = ids.split_at(usize::from(k.split));
                    d.push(a, b, k.raw.outcome == 1.0);
                }
            }
            d
        };
        let early = build(&|k| k.start_ms < cal_from);
        let cal: Vec<usize> = (0..kept.len())
            .filter(|&m| kept[m].start_ms >= cal_from)
            .collect();
        let cal_decisive = cal.iter().filter(|&&m| decisive(&kept[m])).count();
        let cfg = WinSkillFit::default();
        let mut report = WinSkillReport {
            offered_matches: self.offered,
            kept_matches: kept.len() as u64,
            decisive: kept.iter().filter(|k| decisive(k)).count() as u64,
            players: global.len() as u64,
            first_kept: mm_lake::schema::ms_time(first),
            calibration_from: mm_lake::schema::ms_time(cal_from),
            last_kept: mm_lake::schema::ms_time(last),
            early_decisive: early.len() as u64,
            calibration_matches: cal.len() as u64,
            calibration_decisive: cal_decisive as u64,
            alpha: cfg.alpha,
            iterations: 0,
            converged: false,
            win_log_loss: None,
            raw_log_loss: None,
            model: None,
            exported: false,
            reason: String::new(),
            seconds: 0.0,
        };
        if early.len() < MIN_WIN_DECISIVE || cal_decisive < MIN_WIN_DECISIVE {
            report.reason = format!(
                "too few decisive matches: {} before the last {CALIBRATION_DAYS} days and {} in \
                 them (at least {MIN_WIN_DECISIVE} each)",
                early.len(),
                cal_decisive
            );
            report.seconds = t0.elapsed().as_secs_f64();
            return Ok((None, report));
        }
        let theta_early = fit_win_skill(&early, global.len(), &cfg)?.theta;
        drop(early);
        let win_samples = Rows {
            kept: &kept,
            offsets: &offsets,
            players: &players_v,
            parties: &parties_v,
        }
        .samples(&cal, |p| theta_early[local[p as usize] as usize]);
        let raw_samples: Vec<TeamSample> = cal.iter().map(|&m| kept[m].raw).collect();
        let mut win_model = crate::skill::with_blowout(&win_samples, team_cfg)?;
        win_model.basis = SkillBasis::WinSkill;
        let raw_model = TeamWinModel::fit(&raw_samples, team_cfg)?;
        let (w, r) = (
            decisive_log_loss(&win_model, &win_samples),
            decisive_log_loss(&raw_model, &raw_samples),
        );
        report.win_log_loss = Some(w);
        report.raw_log_loss = Some(r);
        report.model = Some(win_model);
        if w >= r || win_model.skill_coef <= 0.0 {
            report.reason = format!(
                "raw skill predicts the last {CALIBRATION_DAYS} days at least as well \
                 (log-loss {r:.4} against {w:.4})"
            );
            report.seconds = t0.elapsed().as_secs_f64();
            return Ok((None, report));
        }
        let all = build(&|_| true);
        let full = fit_win_skill(&all, global.len(), &cfg)?;
        report.iterations = full.iterations;
        report.converged = full.converged;
        report.exported = true;
        let mut theta = vec![0.0; players];
        for (l, &g) in global.iter().enumerate() {
            theta[g as usize] = full.theta[l];
        }
        report.seconds = t0.elapsed().as_secs_f64();
        Ok((
            Some(WinFit {
                theta,
                model: win_model,
            }),
            report,
        ))
    }
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

/// The kept matches' rows: match `m`'s players and parties are `offsets[m]..offsets[m + 1]`.
struct Rows<'a> {
    kept: &'a [Kept],
    offsets: &'a [usize],
    players: &'a [u32],
    parties: &'a [u16],
}

impl Rows<'_> {
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
