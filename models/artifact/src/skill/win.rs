//! The win skill's update after one match, between retrains (issue 50): what keeps a service's
//! and a continued retrain's win skill current until the next full fit.
//!
//! The full fit (`mm fit skill`) minimises, over every player's strength `theta`, a penalised
//! objective on the whole history: the outcomes' Bradley-Terry log-likelihood with penalty
//! `alpha / 2 |theta|^2` ([`WinEstimator::Outcomes`]), or the recency-weighted squared error of
//! the rows' metric against `theta_player - mean theta_opponents` with penalty
//! `lambda / 2 |theta|^2` ([`WinEstimator::Performance`]). The update keeps, beside each
//! player's strength, their **mass**: the diagonal of that objective's Hessian from the data
//! alone (for the outcomes, `sum p (1 - p)` over the player's decisive matches; for the
//! performance, `sum w (1 + n_other / n_own^2)` over their matches, each weighted by its age).
//! The past is then summed up, for each player, by a Gaussian of precision `mass + penalty`
//! around their strength (the Laplace approximation with a diagonal Hessian), and a finished
//! match updates its players jointly:
//!
//! - **performance**: the exact minimiser over the match's players of that prior plus the
//!   match's squared errors, a linear system of one row per player, solved by Cholesky (a
//!   recursive least-squares step, as a Kalman filter takes);
//! - **outcomes**: one Newton step of the prior plus the match's log-likelihood from the
//!   current strengths (closed form: the match is a rank-one term, as in Glicko or TrueSkill).
//!
//! Each player's mass then grows by their term of the match. With a half-life (performance),
//! time passes first: a player's mass decays by `0.5^(days / half_life)` since their last
//! match, and their strength shrinks towards 0 as the full fit's penalty would shrink it on
//! the decayed data, by `d (mass + penalty) / (d mass + penalty)`. A player's mass is stored
//! as of their last match (`last_seen_ms`).
//!
//! On one match from new players the update is the full fit's answer for that match (a hand
//! case below); on many it follows the refit (a test in `mm-fit` measures how closely).

use serde::{Deserialize, Serialize};

use super::Metric;
use crate::Outcome;

/// Milliseconds in a day.
const DAY_MS: f64 = 86_400_000.0;

/// Which whole-history strength the win skill is (`mm fit skill`'s choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WinEstimator {
    /// Bradley-Terry on the decisive matches' outcomes: `logit P(A wins) = sum theta_A - sum
    /// theta_B`.
    Outcomes,
    /// Least squares on each row's metric, on its fit scale ([`Metric::fit_scale`]) and minus
    /// [`WinSkillUpdate::centre`], against `theta_player - mean theta_opponents`.
    Performance,
}

/// `skill.json`'s `win_update`: how the win skill is updated after a match, as fitted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WinSkillUpdate {
    pub estimator: WinEstimator,
    /// The full fit's L2 penalty (`alpha` of the outcomes' fit, `lambda` of the performance
    /// fit).
    pub penalty: f64,
    /// Half-life in days of a match's weight (the performance fit's); absent: no decay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub half_life_days: Option<f64>,
    /// The weighted mean of the rows' metric on its fit scale, which the performance fit
    /// subtracts (0 for the outcomes).
    #[serde(default)]
    pub centre: f64,
}

/// One player of a match, as the update reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WinSlot {
    /// The player's win skill and mass before the match, and the time the mass is as of (their
    /// last match; `i64::MIN` for none).
    pub skill: f64,
    pub mass: f64,
    pub as_of_ms: i64,
    /// The player's team (two distinct values in a match the update reads).
    pub team: i32,
    /// The row's metric ([`Metric::value`]), and the team's outcome.
    pub metric: f64,
    pub outcome: Outcome,
}

impl WinSkillUpdate {
    /// # Errors
    /// A penalty, half-life or centre that is not a finite positive (centre: finite) number.
    pub fn check(&self) -> Result<(), String> {
        if !(self.penalty.is_finite() && self.penalty > 0.0) {
            return Err(format!("penalty {} is not positive", self.penalty));
        }
        if let Some(h) = self.half_life_days
            && !(h.is_finite() && h > 0.0)
        {
            return Err(format!("half_life_days {h} is not positive"));
        }
        if !self.centre.is_finite() {
            return Err(format!("centre {} is not finite", self.centre));
        }
        Ok(())
    }

    /// The weight a match at `from_ms` has at `to_ms`: `0.5^(days / half-life)` (1 without a
    /// half-life, or when `to_ms` is not later).
    #[must_use]
    pub fn decay(&self, from_ms: i64, to_ms: i64) -> f64 {
        match self.half_life_days {
            Some(h) if to_ms > from_ms => 0.5f64.powf((to_ms as f64 - from_ms as f64) / DAY_MS / h),
            _ => 1.0,
        }
    }

    /// A mass as of `from_ms` re-expressed as of `to_ms` (earlier or later): the same matches'
    /// weights at the other time.
    #[must_use]
    pub fn mass_moved(&self, mass: f64, from_ms: i64, to_ms: i64) -> f64 {
        if to_ms >= from_ms {
            mass * self.decay(from_ms, to_ms)
        } else {
            mass / self.decay(to_ms, from_ms)
        }
    }

    /// Each slot's win skill and mass after the match that started at `start_ms`, the mass as
    /// of `max(as_of_ms, start_ms)`. A match the fit does not read (not two teams; for the
    /// outcomes, a draw; for the performance, a row without the metric) moves no strength, but
    /// time still passes for each player.
    #[must_use]
    pub fn after(&self, metric: Metric, start_ms: i64, slots: &[WinSlot]) -> Vec<(f64, f64)> {
        // Time passes: each player's prior (strength, precision) at the match, and the weight
        // of the match as of their new reference time (below 1 only for a match older than
        // the player's last).
        let lam = self.penalty;
        let mut prior: Vec<(f64, f64, f64)> = slots
            .iter()
            .map(|s| {
                let to = s.as_of_ms.max(start_ms);
                let d = if s.mass > 0.0 {
                    self.decay(s.as_of_ms, to)
                } else {
                    1.0
                };
                let skill = s.skill * d * (s.mass + lam) / (s.mass * d + lam);
                (skill, s.mass * d, self.decay(start_ms, to))
            })
            .collect();
        let Some(split) = two_teams(slots) else {
            return prior.iter().map(|&(t, m, _)| (t, m)).collect();
        };
        match self.estimator {
            WinEstimator::Outcomes => self.newton(slots, split, &mut prior),
            WinEstimator::Performance => self.least_squares(metric, slots, split, &mut prior),
        }
        prior.iter().map(|&(t, m, _)| (t, m)).collect()
    }

    /// The outcomes: one Newton step, `delta = P^-1 z (s - p) / (1 + p (1 - p) z' P^-1 z)`
    /// with `z` +1 on team A and -1 on team B.
    fn newton(&self, slots: &[WinSlot], split: usize, prior: &mut [(f64, f64, f64)]) {
        let s = match slots[0].outcome {
            Outcome::Win => 1.0,
            Outcome::Loss => 0.0,
            Outcome::Draw => return,
        };
        let z = |k: usize| if k < split { 1.0 } else { -1.0 };
        let logit: f64 = prior.iter().enumerate().map(|(k, p)| z(k) * p.0).sum();
        let p = 1.0 / (1.0 + (-logit).exp());
        let v = p * (1.0 - p);
        let spread: f64 = prior.iter().map(|x| x.2 / (x.1 + self.penalty)).sum();
        let step = (s - p) / (1.0 + v * spread);
        for (k, x) in prior.iter_mut().enumerate() {
            x.0 += z(k) * x.2 * step / (x.1 + self.penalty);
            x.1 += x.2 * v;
        }
    }

    /// The performance: the minimiser of `sum_k (P_k / 2) (t_k - prior_k)^2 + sum_rows (w / 2)
    /// (y - t_k + mean t_opponents)^2`.
    fn least_squares(
        &self,
        metric: Metric,
        slots: &[WinSlot],
        split: usize,
        prior: &mut [(f64, f64, f64)],
    ) {
        let n = slots.len();
        let y: Vec<f64> = slots
            .iter()
            .map(|s| metric.fit_scale(s.metric) - self.centre)
            .collect();
        if y.iter().any(|v| !v.is_finite()) {
            return;
        }
        // The match's design: row k reads +1 of its player and -1/n of each opponent.
        let other = |k: usize| if k < split { split..n } else { 0..split };
        let mut x = vec![0.0; n * n];
        for k in 0..n {
            x[k * n + k] = 1.0;
            let o = other(k);
            let inv = 1.0 / o.len() as f64;
            for q in o {
                x[k * n + q] = -inv;
            }
        }
        // Residuals at the prior, then the system in the step: (P + X' W X) d = X' W e, each
        // row weighted by its player's weight of the match.
        let e: Vec<f64> = (0..n)
            .map(|k| y[k] - (0..n).map(|q| x[k * n + q] * prior[q].0).sum::<f64>())
            .collect();
        let mut a = vec![0.0; n * n];
        let mut b = vec![0.0; n];
        for k in 0..n {
            let w = prior[k].2;
            for i in 0..n {
                b[i] += w * x[k * n + i] * e[k];
                for j in 0..n {
                    a[i * n + j] += w * x[k * n + i] * x[k * n + j];
                }
            }
        }
        let gain: Vec<f64> = (0..n).map(|i| a[i * n + i]).collect();
        for (i, p) in prior.iter().enumerate() {
            a[i * n + i] += p.1 + self.penalty;
        }
        if !cholesky_solve(&mut a, &mut b, n) {
            return;
        }
        for (k, p) in prior.iter_mut().enumerate() {
            p.0 += b[k];
            p.1 += gain[k];
        }
    }
}

/// The index where the second team starts, when the slots (sorted by team) hold exactly two
/// teams.
fn two_teams(slots: &[WinSlot]) -> Option<usize> {
    let first = slots.first()?.team;
    let split = slots.iter().position(|s| s.team != first)?;
    let second = slots[split].team;
    slots[split..]
        .iter()
        .all(|s| s.team == second)
        .then_some(split)
}

/// Solves `a x = b` in place (`b` becomes `x`) for a symmetric positive-definite `a` of
/// `n * n`, row-major, by Cholesky. False when `a` is not positive definite.
fn cholesky_solve(a: &mut [f64], b: &mut [f64], n: usize) -> bool {
    for j in 0..n {
        let mut d = a[j * n + j];
        for k in 0..j {
            d -= a[j * n + k] * a[j * n + k];
        }
        if !(d > 0.0 && d.is_finite()) {
            return false;
        }
        let d = d.sqrt();
        a[j * n + j] = d;
        for i in j + 1..n {
            let mut s = a[i * n + j];
            for k in 0..j {
                s -= a[i * n + k] * a[j * n + k];
            }
            a[i * n + j] = s / d;
        }
    }
    // L y = b, then L' x = y.
    for i in 0..n {
        let mut s = b[i];
        for k in 0..i {
            s -= a[i * n + k] * b[k];
        }
        b[i] = s / a[i * n + i];
    }
    for i in (0..n).rev() {
        let mut s = b[i];
        for k in i + 1..n {
            s -= a[k * n + i] * b[k];
        }
        b[i] = s / a[i * n + i];
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(team: i32, metric: f64, outcome: Outcome) -> WinSlot {
        WinSlot {
            skill: 0.0,
            mass: 0.0,
            as_of_ms: i64::MIN,
            team,
            metric,
            outcome,
        }
    }

    const PERF: WinSkillUpdate = WinSkillUpdate {
        estimator: WinEstimator::Performance,
        penalty: 0.3,
        half_life_days: Some(20.0),
        centre: 0.0,
    };

    /// Two new players, one match, kills per death `e` and `1/e` (fit scale +1 and -1): the
    /// full fit on that match alone minimises `(1 - 2x)^2 + (-1 + 2x)^2 + 0.3 (x^2 + x^2)` at
    /// `x = 4 / 8.6` (`8 (2x - 1) + 1.2 x = 0`), and each mass is the design's diagonal, 2.
    /// With a metric read as it is (`perf`, values `ya` and `yb`), the normal equations
    /// `[[2.3, -2], [-2, 2.3]] t = [ya - yb, yb - ya]` give `t = (ya - yb) / 4.3`.
    #[test]
    fn one_performance_match_from_new_players_is_the_full_fit() {
        let e = std::f64::consts::E;
        let pair = [slot(0, e, Outcome::Win), slot(1, 1.0 / e, Outcome::Loss)];
        let got = PERF.after(Metric::KillsPerEnemyDeath, 0, &pair);
        let x = 4.0 / 8.6;
        assert!((got[0].0 - x).abs() < 1e-12 && (got[1].0 + x).abs() < 1e-12);
        assert!((got[0].1 - 2.0).abs() < 1e-12 && (got[1].1 - 2.0).abs() < 1e-12);
        let got = PERF.after(Metric::Perf, 0, &pair);
        let t = (e - 1.0 / e) / 4.3;
        assert!((got[0].0 - t).abs() < 1e-12 && (got[1].0 + t).abs() < 1e-12);
        // A centre is subtracted from both rows and cancels in a 1v1.
        let centred = WinSkillUpdate {
            centre: 0.7,
            ..PERF
        }
        .after(Metric::Perf, 0, &pair);
        assert!((centred[0].0 - t).abs() < 1e-12);
    }

    /// Two new players, a decisive match, alpha 0.1: one Newton step from 0 is
    /// `(1 / 0.1) (1 - 1/2) / (1 + 1/4 * 20) = 5 / 6` for the winner, and each mass is 1/4.
    #[test]
    fn one_outcome_by_hand() {
        let u = WinSkillUpdate {
            estimator: WinEstimator::Outcomes,
            penalty: 0.1,
            half_life_days: None,
            centre: 0.0,
        };
        let got = u.after(
            Metric::Outcome,
            0,
            &[slot(0, 1.0, Outcome::Win), slot(1, 0.0, Outcome::Loss)],
        );
        assert!((got[0].0 - 5.0 / 6.0).abs() < 1e-12 && (got[1].0 + 5.0 / 6.0).abs() < 1e-12);
        assert_eq!((got[0].1, got[1].1), (0.25, 0.25));
        // A draw moves nothing.
        let draw = u.after(
            Metric::Outcome,
            0,
            &[slot(0, 0.5, Outcome::Draw), slot(1, 0.5, Outcome::Draw)],
        );
        assert_eq!(draw, [(0.0, 0.0), (0.0, 0.0)]);
    }

    /// Time passing: a player of mass 2 and strength 1, 20 days (one half-life) after their last
    /// match, in a match without the metric: mass 1, strength `0.5 * 2.3 / 1.3`.
    #[test]
    fn decay_by_hand() {
        let s = WinSlot {
            skill: 1.0,
            mass: 2.0,
            as_of_ms: 0,
            ..slot(0, f64::NAN, Outcome::Win)
        };
        let got = PERF.after(
            Metric::Perf,
            20 * 86_400_000,
            &[s, slot(1, 1.0, Outcome::Loss)],
        );
        assert!((got[0].1 - 1.0).abs() < 1e-12);
        assert!((got[0].0 - 0.5 * 2.3 / 1.3).abs() < 1e-12);
        assert_eq!(got[1], (0.0, 0.0));
        // No second team: no step either.
        let alone = PERF.after(Metric::Perf, 0, &[slot(0, 1.0, Outcome::Win)]);
        assert_eq!(alone, [(0.0, 0.0)]);
    }

    /// The Cholesky solve against a system solved by hand.
    #[test]
    fn cholesky_by_hand() {
        // [[4, 2], [2, 3]] x = [2, 1]: x = (0.5, 0).
        let mut a = vec![4.0, 2.0, 2.0, 3.0];
        let mut b = vec![2.0, 1.0];
        assert!(cholesky_solve(&mut a, &mut b, 2));
        assert!((b[0] - 0.5).abs() < 1e-15 && b[1].abs() < 1e-15);
        let mut not_pd = vec![1.0, 2.0, 2.0, 1.0];
        assert!(!cholesky_solve(&mut not_pd, &mut [1.0, 1.0], 2));
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(PERF.check().is_ok());
        for bad in [
            WinSkillUpdate {
                penalty: 0.0,
                ..PERF
            },
            WinSkillUpdate {
                penalty: f64::NAN,
                ..PERF
            },
            WinSkillUpdate {
                half_life_days: Some(-1.0),
                ..PERF
            },
            WinSkillUpdate {
                centre: f64::INFINITY,
                ..PERF
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
