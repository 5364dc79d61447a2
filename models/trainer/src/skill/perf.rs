//! Performance strength: a whole-history strength per player fitted on the in-match metric of
//! two-team matches, beside the online raw skill (issue 56).
//!
//! Raw skill (the Call of Duty paper's) compares each player's metric with every other player's
//! in the lobby, one match at a time, and keeps only its latest value: at its fixed point it is
//! close to a player's rank among the opponents they meet, which matchmaking makes similar to
//! them. A least-squares fit on every match at once reads how far each player's metric sits
//! above the opponents' strength instead:
//!
//! `y_r = theta_p - mean_{q in opponents} theta_q + e_r`,
//!
//! with `y_r` the row's metric on its scale (`ln` for ratio metrics such as kills per death),
//! centred by its weighted mean, each match weighted by its recency (`0.5^(age / half-life)`),
//! and an L2 penalty `lambda / 2 |theta|^2` that shrinks players with few matches towards the
//! population's 0. The minimiser solves `(X^T W X + lambda I) theta = X^T W y`, a symmetric
//! positive-definite system, by argmin's conjugate gradient; the design `X` is never built
//! (a product with it is one pass over the matches' member lists).
//!
//! The tests check the solution against the dense normal equations and that it recovers true
//! strengths on simulated matches.

use argmin::core::{Executor, Operator, State};
use argmin::solver::conjugategradient::ConjugateGradient;
use ndarray::Array1;

/// Two-team matches with each row's metric, as member lists: match `m`'s players are
/// `members[offsets[m]..offsets[m + 1]]`, the first `team_a[m]` of them team A.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerfMatches {
    pub members: Vec<u32>,
    pub offsets: Vec<usize>,
    pub team_a: Vec<u16>,
    /// The metric of each member's row, on the fit's scale.
    pub y: Vec<f64>,
    /// Each match's weight.
    pub weight: Vec<f64>,
}

impl PerfMatches {
    #[must_use]
    pub fn new() -> Self {
        PerfMatches {
            offsets: vec![0],
            ..PerfMatches::default()
        }
    }

    /// Adds a match of weight `weight`: team A's players and their metrics, then team B's.
    /// A match without a player on either side is not added.
    pub fn push(&mut self, a: &[u32], ya: &[f64], b: &[u32], yb: &[f64], weight: f64) {
        if a.is_empty() || b.is_empty() {
            return;
        }
        self.members.extend_from_slice(a);
        self.members.extend_from_slice(b);
        self.y.extend_from_slice(ya);
        self.y.extend_from_slice(yb);
        self.offsets.push(self.members.len());
        self.team_a.push(u16::try_from(a.len()).unwrap_or(u16::MAX));
        self.weight.push(weight);
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.weight.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.weight.is_empty()
    }

    /// Match `m`'s member range and the index where team B starts.
    fn bounds(&self, m: usize) -> (usize, usize, usize) {
        let (lo, hi) = (self.offsets[m], self.offsets[m + 1]);
        (lo, lo + usize::from(self.team_a[m]), hi)
    }

    /// `X^T W u` for a vector `u` with one value per row, added to `out`.
    fn add_xt(&self, u: &[f64], out: &mut [f64]) {
        for m in 0..self.len() {
            let (lo, split, hi) = self.bounds(m);
            let w = self.weight[m];
            let (na, nb) = ((split - lo) as f64, (hi - split) as f64);
            let ua: f64 = u[lo..split].iter().sum();
            let ub: f64 = u[split..hi].iter().sum();
            for (r, (&p, &ur)) in (lo..hi).zip(self.members[lo..hi].iter().zip(&u[lo..hi])) {
                // Own row, and the other side's rows each reading `-1 / n_own_side` of this
                // player (this player is one of their `n` opponents).
                let other = if r < split { ub / na } else { ua / nb };
                out[p as usize] += w * (ur - other);
            }
        }
    }

    /// `X theta` per row.
    fn x(&self, theta: &[f64], out: &mut [f64]) {
        for m in 0..self.len() {
            let (lo, split, hi) = self.bounds(m);
            let (na, nb) = ((split - lo) as f64, (hi - split) as f64);
            let sa: f64 = self.members[lo..split]
                .iter()
                .map(|&p| theta[p as usize])
                .sum();
            let sb: f64 = self.members[split..hi]
                .iter()
                .map(|&p| theta[p as usize])
                .sum();
            for (r, (o, &p)) in (lo..hi).zip(out[lo..hi].iter_mut().zip(&self.members[lo..hi])) {
                let opp = if r < split { sb / nb } else { sa / na };
                *o = theta[p as usize] - opp;
            }
        }
    }

    /// The rows' weighted mean metric, which the fit subtracts (0 without rows).
    #[must_use]
    pub fn centre(&self) -> f64 {
        let (mut sw, mut swy) = (0.0, 0.0);
        for m in 0..self.len() {
            let (lo, _, hi) = self.bounds(m);
            sw += self.weight[m] * (hi - lo) as f64;
            swy += self.weight[m] * self.y[lo..hi].iter().sum::<f64>();
        }
        if sw > 0.0 { swy / sw } else { 0.0 }
    }

    /// The rows' metrics minus their weighted mean.
    fn centred(&self) -> Vec<f64> {
        let mean = self.centre();
        self.y.iter().map(|y| y - mean).collect()
    }

    /// The diagonal of `X^T W X` for `players` players: each player's mass, the data's weight
    /// behind their strength (`mm-artifact`'s `skill::win` update continues from it). A match
    /// adds `w (1 + n_other / n_own^2)` to each of its players: their own row, and the
    /// `-1 / n_own` each opponent's row reads of them.
    #[must_use]
    pub fn diagonal(&self, players: usize) -> Vec<f64> {
        let mut out = vec![0.0; players];
        for m in 0..self.len() {
            let (lo, split, hi) = self.bounds(m);
            let (na, nb) = ((split - lo) as f64, (hi - split) as f64);
            for r in lo..hi {
                let (own, other) = if r < split { (na, nb) } else { (nb, na) };
                out[self.members[r] as usize] += self.weight[m] * (1.0 + other / (own * own));
            }
        }
        out
    }
}

/// How to fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerfSkillFit {
    /// L2 penalty on the strengths, in units of one full-weight row's squared error. Default
    /// 0.3: on a 60-day 6v6 world's last ten days (`mm-fit`'s calibration, the world of its
    /// `PERF_HALF_LIFE_DAYS`), log-loss 0.5661 against 0.5666 at 1 and 0.5696 at 3 (0.5660 at
    /// 0.1).
    pub lambda: f64,
    pub max_iterations: u64,
    /// Stop when the residual of the normal equations is this fraction of their right-hand side.
    pub relative_tolerance: f64,
}

impl Default for PerfSkillFit {
    fn default() -> Self {
        PerfSkillFit {
            lambda: 0.3,
            max_iterations: 1_000,
            relative_tolerance: 1e-8,
        }
    }
}

/// A fitted performance strength.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfSkill {
    /// Strength per player, on the metric's scale (0 for players without a match).
    pub theta: Vec<f64>,
    pub iterations: u64,
    pub converged: bool,
}

/// Why a performance strength could not be fitted.
#[derive(Debug, thiserror::Error)]
pub enum PerfSkillError {
    #[error("performance strength: lambda = {0} must be positive and finite")]
    Lambda(f64),
    #[error("performance strength: match {0} names player {1}, beyond the {2} players")]
    Player(usize, u32, usize),
    #[error("performance strength: match {0} has a weight or a metric that is not finite")]
    NotFinite(usize),
    #[error("performance strength: the solver failed: {0}")]
    Solver(String),
}

/// `v -> (X^T W X + lambda I) v`.
struct Normal<'a> {
    data: &'a PerfMatches,
    lambda: f64,
}

impl Operator for Normal<'_> {
    type Param = Array1<f64>;
    type Output = Array1<f64>;
    fn apply(&self, v: &Self::Param) -> Result<Self::Output, argmin::core::Error> {
        let v = v.as_slice().unwrap_or(&[]);
        let mut rows = vec![0.0; self.data.members.len()];
        self.data.x(v, &mut rows);
        let mut out: Vec<f64> = v.iter().map(|x| self.lambda * x).collect();
        self.data.add_xt(&rows, &mut out);
        Ok(Array1::from(out))
    }
}

/// Fits the strengths of `players` players on `data`.
///
/// # Errors
/// A non-positive penalty, a member beyond `players`, a metric or weight that is not finite,
/// or a solver failure.
pub fn fit_perf_skill(
    data: &PerfMatches,
    players: usize,
    cfg: &PerfSkillFit,
) -> Result<PerfSkill, PerfSkillError> {
    fit_perf_skill_from(data, &vec![0.0; players], cfg)
}

/// Fits the strengths of `init.len()` players on `data`, starting from `init` (a warm start:
/// the solution is the same, the solver's path shorter when `init` is near it).
///
/// # Errors
/// As [`fit_perf_skill`].
pub fn fit_perf_skill_from(
    data: &PerfMatches,
    init: &[f64],
    cfg: &PerfSkillFit,
) -> Result<PerfSkill, PerfSkillError> {
    let players = init.len();
    if !(cfg.lambda.is_finite() && cfg.lambda > 0.0) {
        return Err(PerfSkillError::Lambda(cfg.lambda));
    }
    for m in 0..data.len() {
        let (lo, _, hi) = data.bounds(m);
        if !data.weight[m].is_finite() || data.y[lo..hi].iter().any(|y| !y.is_finite()) {
            return Err(PerfSkillError::NotFinite(m));
        }
        if let Some(&p) = data.members[lo..hi]
            .iter()
            .find(|&&p| p as usize >= players)
        {
            return Err(PerfSkillError::Player(m, p, players));
        }
    }
    let mut b = vec![0.0; players];
    data.add_xt(&data.centred(), &mut b);
    let b = Array1::from(b);
    let b_norm = b.dot(&b).sqrt();
    if b_norm == 0.0 {
        // No metric varies: the penalty alone sets every strength.
        return Ok(PerfSkill {
            theta: vec![0.0; players],
            iterations: 0,
            converged: true,
        });
    }
    let target = (cfg.relative_tolerance * b_norm).powi(2);
    let res = Executor::new(
        Normal {
            data,
            lambda: cfg.lambda,
        },
        ConjugateGradient::new(b),
    )
    .configure(|s| {
        s.param(Array1::from(init.to_vec()))
            .max_iters(cfg.max_iterations)
            .target_cost(target)
    })
    .run()
    .map_err(|e| PerfSkillError::Solver(e.to_string()))?;
    let state = res.state();
    // The solver's cost is the squared norm of the residual.
    let converged = state.get_cost() <= target;
    Ok(PerfSkill {
        iterations: state.get_iter(),
        converged,
        theta: state
            .get_param()
            .map_or_else(|| vec![0.0; players], |t| t.to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Random matches of `team` a side among `players` players: each row's metric is its true
    /// strength minus the opponents' mean plus noise of sd `noise`, plus 3 (the fit centres it).
    fn simulate(
        players: usize,
        matches: usize,
        team: usize,
        noise: f64,
        seed: u64,
    ) -> (PerfMatches, Vec<f64>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let truth: Vec<f64> = (0..players).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut d = PerfMatches::new();
        for k in 0..matches {
            let mut pick: Vec<u32> = Vec::new();
            while pick.len() < 2 * team {
                let p = rng.random_range(0..players as u32);
                if !pick.contains(&p) {
                    pick.push(p);
                }
            }
            let (a, b) = pick.split_at(team);
            let mean = |s: &[u32]| s.iter().map(|&p| truth[p as usize]).sum::<f64>() / team as f64;
            let (ma, mb) = (mean(a), mean(b));
            let mut y = |p: u32, opp: f64| {
                3.0 + truth[p as usize] - opp + noise * (rng.random::<f64>() - 0.5) * 12f64.sqrt()
            };
            let ya: Vec<f64> = a.iter().map(|&p| y(p, mb)).collect();
            let yb: Vec<f64> = b.iter().map(|&p| y(p, ma)).collect();
            d.push(a, &ya, b, &yb, 1.0 / (1.0 + k as f64 / matches as f64));
        }
        (d, truth)
    }

    /// The dense normal equations solved by Gaussian elimination (index loops, as the
    /// textbook writes it).
    #[allow(clippy::needless_range_loop)]
    fn dense_reference(d: &PerfMatches, players: usize, lambda: f64) -> Vec<f64> {
        let rows = d.members.len();
        let mut x = Array2::<f64>::zeros((rows, players));
        let mut w = vec![0.0; rows];
        for m in 0..d.len() {
            let (lo, split, hi) = d.bounds(m);
            for r in lo..hi {
                w[r] = d.weight[m];
                x[[r, d.members[r] as usize]] += 1.0;
                let opp = if r < split { split..hi } else { lo..split };
                let n = opp.len() as f64;
                for q in opp {
                    x[[r, d.members[q] as usize]] -= 1.0 / n;
                }
            }
        }
        let y = d.centred();
        // The diagonal of the design's X^T W X, against `diagonal`.
        let diag = d.diagonal(players);
        for (i, got) in diag.iter().enumerate() {
            let want: f64 = (0..rows).map(|r| w[r] * x[[r, i]] * x[[r, i]]).sum();
            assert!(
                (got - want).abs() < 1e-9,
                "player {i}: {got} against {want}"
            );
        }
        let mut a = vec![vec![0.0; players + 1]; players];
        for i in 0..players {
            a[i][i] = lambda;
            for r in 0..rows {
                let xi = x[[r, i]];
                if xi == 0.0 {
                    continue;
                }
                for j in 0..players {
                    a[i][j] += w[r] * xi * x[[r, j]];
                }
                a[i][players] += w[r] * xi * y[r];
            }
        }
        for c in 0..players {
            let pivot = (c..players)
                .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
                .unwrap_or(c);
            a.swap(c, pivot);
            for i in 0..players {
                if i != c {
                    let f = a[i][c] / a[c][c];
                    for j in c..=players {
                        a[i][j] -= f * a[c][j];
                    }
                }
            }
        }
        (0..players).map(|i| a[i][players] / a[i][i]).collect()
    }

    #[test]
    fn solves_the_normal_equations() {
        for (team, seed) in [(1, 1), (3, 2), (6, 3)] {
            let players = 30;
            let (d, _) = simulate(players, 200, team, 0.5, seed);
            let cfg = PerfSkillFit {
                lambda: 0.7,
                ..PerfSkillFit::default()
            };
            let ours = fit_perf_skill(&d, players, &cfg).expect("fit");
            assert!(ours.converged, "team {team}: not converged");
            let reference = dense_reference(&d, players, cfg.lambda);
            let worst = ours
                .theta
                .iter()
                .zip(&reference)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-6, "team {team}: largest difference {worst}");
        }
    }

    #[test]
    fn recovers_the_true_strengths_and_leaves_the_unseen_at_zero() {
        let players = 80;
        let (d, truth) = simulate(players - 1, 4_000, 6, 0.5, 7);
        let fit = fit_perf_skill(&d, players, &PerfSkillFit::default()).expect("fit");
        assert!(fit.converged);
        // Strengths are identified up to a constant.
        let mean = fit.theta[..players - 1].iter().sum::<f64>() / (players - 1) as f64;
        let tmean = truth.iter().sum::<f64>() / truth.len() as f64;
        let worst = truth
            .iter()
            .zip(&fit.theta)
            .map(|(t, f)| ((t - tmean) - (f - mean)).abs())
            .fold(0.0, f64::max);
        assert!(worst < 0.1, "largest error {worst}");
        assert!(fit.theta[players - 1].abs() < 1e-12);
    }

    #[test]
    fn refuses_bad_input() {
        let mut d = PerfMatches::new();
        d.push(&[0], &[1.0], &[5], &[0.5], 1.0);
        assert!(matches!(
            fit_perf_skill(&d, 3, &PerfSkillFit::default()),
            Err(PerfSkillError::Player(0, 5, 3))
        ));
        let cfg = PerfSkillFit {
            lambda: 0.0,
            ..PerfSkillFit::default()
        };
        assert!(matches!(
            fit_perf_skill(&d, 6, &cfg),
            Err(PerfSkillError::Lambda(_))
        ));
        d.push(&[1], &[f64::NAN], &[2], &[0.5], 1.0);
        assert!(matches!(
            fit_perf_skill(&d, 6, &PerfSkillFit::default()),
            Err(PerfSkillError::NotFinite(1))
        ));
    }
}
