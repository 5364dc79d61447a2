//! Scoring a 1v1 pairing: outcome probabilities from a win model and churn for each hypothetical
//! outcome from a churn model, combined into the EOMM edge weight (EOMM paper, Eqn. 7).
//!
//! The models are traits so that a service can plug in the exported artifact's models and tests
//! can plug in closed-form ones. [`EloDraw`] and [`TabularChurn`] are the closed forms of the
//! peer pools in `shared/peers` (`gen_pool.py`): Elo win expectancy with a fixed draw rate, and
//! per-player churn by outcome.

use crate::Outcome;

/// Outcome probabilities of a 1v1 pairing, from player `i`'s side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutcomeProbs {
    pub win: f64,
    pub draw: f64,
    pub loss: f64,
}

impl OutcomeProbs {
    #[must_use]
    pub fn get(&self, o: Outcome) -> f64 {
        match o {
            Outcome::Win => self.win,
            Outcome::Draw => self.draw,
            Outcome::Loss => self.loss,
        }
    }
}

/// P(win / draw / loss) for player `i` against player `j` of a pool.
pub trait WinModel {
    fn outcome_probs(&self, i: usize, j: usize) -> OutcomeProbs;
    /// A skill value per player, used by SkillMM to sort; higher is better.
    fn skill(&self, i: usize) -> f64;
}

/// Probability that player `i` of a pool churns after a match with the given outcome.
pub trait ChurnModel {
    fn churn(&self, i: usize, outcome: Outcome) -> f64;
}

/// The EOMM edge weight: the expected number of the pair's two players who churn,
/// `sum over o of P(o) (churn_i(o) + churn_j(mirror o))`.
#[must_use]
pub fn eomm_weight<W: WinModel + ?Sized, C: ChurnModel + ?Sized>(
    win: &W,
    churn: &C,
    i: usize,
    j: usize,
) -> f64 {
    let p = win.outcome_probs(i, j);
    [Outcome::Win, Outcome::Draw, Outcome::Loss]
        .into_iter()
        .map(|o| p.get(o) * (churn.churn(i, o) + churn.churn(j, o.mirrored())))
        .sum()
}

/// The full symmetric `n x n` EOMM weight matrix of a pool (row-major, zero diagonal). Weights
/// are computed once per unordered pair, so the matrix is exactly symmetric.
#[must_use]
pub fn eomm_matrix<W: WinModel + ?Sized, C: ChurnModel + ?Sized>(
    n: usize,
    win: &W,
    churn: &C,
) -> Vec<f64> {
    let mut w = vec![0.0; n * n];
    for i in 0..n {
        for j in i + 1..n {
            let x = eomm_weight(win, churn, i, j);
            w[i * n + j] = x;
            w[j * n + i] = x;
        }
    }
    w
}

/// Elo expectancy with a fixed draw probability: `P(i wins) = (1 - p_draw) E_ij` with
/// `E_ij = 1 / (1 + 10^((s_j - s_i) / scale))`. The peer pools use `p_draw = 0.2`, `scale = 400`.
#[derive(Debug, Clone)]
pub struct EloDraw {
    pub skills: Vec<f64>,
    pub p_draw: f64,
    pub scale: f64,
}

impl WinModel for EloDraw {
    fn outcome_probs(&self, i: usize, j: usize) -> OutcomeProbs {
        let e = 1.0 / (1.0 + 10f64.powf((self.skills[j] - self.skills[i]) / self.scale));
        let decisive = 1.0 - self.p_draw;
        OutcomeProbs {
            win: decisive * e,
            draw: self.p_draw,
            loss: decisive * (1.0 - e),
        }
    }

    fn skill(&self, i: usize) -> f64 {
        self.skills[i]
    }
}

/// Churn probability per player and outcome, `[win, draw, loss]`.
#[derive(Debug, Clone)]
pub struct TabularChurn {
    pub by_outcome: Vec<[f64; 3]>,
}

impl ChurnModel for TabularChurn {
    fn churn(&self, i: usize, outcome: Outcome) -> f64 {
        self.by_outcome[i][outcome.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The weight formula of gen_pool.py, written out:
    /// w = P(i wins)(c_i(win) + c_j(lose)) + P(i loses)(c_i(lose) + c_j(win)) + 0.2 (c_i(draw) + c_j(draw)).
    #[test]
    fn eomm_weight_matches_the_peer_pool_formula() {
        let win = EloDraw {
            skills: vec![1574.963489, 1679.8632],
            p_draw: 0.2,
            scale: 400.0,
        };
        let churn = TabularChurn {
            by_outcome: vec![
                [0.349809, 0.359015, 0.405544],
                [0.44072, 0.492466, 0.402574],
            ],
        };
        let e = 1.0 / (1.0 + 10f64.powf((1679.8632 - 1574.963489) / 400.0));
        let expected = 0.8 * e * (0.349809 + 0.402574)
            + 0.8 * (1.0 - e) * (0.405544 + 0.44072)
            + 0.2 * (0.359015 + 0.492466);
        let w = eomm_weight(&win, &churn, 0, 1);
        assert!((w - expected).abs() < 1e-15);
        // Symmetric: the pair's expected churn does not depend on who is "i".
        assert!((eomm_weight(&win, &churn, 1, 0) - w).abs() < 1e-15);
    }
}
