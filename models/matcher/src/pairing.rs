//! 1v1 pairing policies over one pool: EOMM (exact minimum-weight perfect matching of the
//! expected-churn weights), the baselines of the EOMM paper (SkillMM, RandomMM, WorstMM) and
//! greedy (cheapest edge first) for reference.
//!
//! Weights are a row-major symmetric `n x n` matrix: `w[i * n + j]` is the cost of pairing `i`
//! with `j` (for EOMM, the pair's expected churn, see [`crate::scoring`]). With an odd pool one
//! player waits for the next tick; EOMM and WorstMM choose who by the same objective (a dummy
//! vertex joined to everyone at cost 0, so the waiting player is the one whose absence makes the
//! best matching of the rest), SkillMM removes the player whose removal makes the cheapest
//! neighbour pairing, RandomMM the last of the permutation, greedy the one left over.
//!
//! Exactness with floating-point weights: the matching is solved exactly on the weights
//! quantised to integers by a power-of-two scale that maps the largest `|w|` into `[2^39, 2^40]`.
//! The result is the exact optimum of those integers, and its float objective is within
//! `n/2 * 2^-40 * max|w|` of the float optimum (a relative 1e-12 for EOMM weights).

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

use crate::blossom::{DenseBlossom, MAX_ABS_COST, MatchingError};

/// Which pairing policy to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairPolicy {
    /// Minimum total weight (exact): engagement-optimised matchmaking.
    Eomm,
    /// Maximum total weight (exact): the worst case, for validation.
    Worst,
    /// Sort by skill, pair neighbours.
    Skill,
    /// Pair neighbours of a seeded random permutation.
    Random { seed: u64 },
    /// Cheapest edge first (ties by index), for reference.
    Greedy,
}

impl PairPolicy {
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            PairPolicy::Eomm => "eomm",
            PairPolicy::Worst => "worst",
            PairPolicy::Skill => "skill",
            PairPolicy::Random { .. } => "random",
            PairPolicy::Greedy => "greedy",
        }
    }
}

/// Why a pool could not be paired.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PairingError {
    #[error("the weight matrix has {len} entries, expected {n}x{n}")]
    Shape { n: usize, len: usize },
    #[error("weight[{i}][{j}] is {value}: weights must be finite")]
    NonFinite { i: usize, j: usize, value: f64 },
    #[error("the weight matrix is not symmetric at ({i}, {j})")]
    Asymmetric { i: usize, j: usize },
    #[error("SkillMM needs one skill per player: {got} skills for {n} players")]
    Skills { n: usize, got: usize },
    #[error(transparent)]
    Matching(#[from] MatchingError),
}

/// The pairs chosen for a pool, the player left waiting (odd pools) and the total weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing<T> {
    /// Pairs `(i, j)` with `i < j`, sorted.
    pub pairs: Vec<(usize, usize)>,
    pub waiting: Option<usize>,
    pub objective: T,
}

/// A weight type the policies work on: `i64` (exact, e.g. the peers' int32 pools) or `f64`.
pub trait Weight: Copy + PartialOrd + std::fmt::Debug + std::iter::Sum<Self> {
    const ZERO: Self;
    fn add(self, other: Self) -> Self;
}

impl Weight for i64 {
    const ZERO: Self = 0;
    fn add(self, other: Self) -> Self {
        self + other
    }
}

impl Weight for f64 {
    const ZERO: Self = 0.0;
    fn add(self, other: Self) -> Self {
        self + other
    }
}

/// Pairs a pool with integer weights (exact for every policy).
pub fn pair_i64(
    policy: PairPolicy,
    n: usize,
    w: &[i64],
    skills: Option<&[f64]>,
    solver: &mut DenseBlossom,
) -> Result<Pairing<i64>, PairingError> {
    check_shape(n, w.len())?;
    match policy {
        PairPolicy::Eomm => exact(n, w, false, solver),
        PairPolicy::Worst => exact(n, w, true, solver),
        _ => heuristic(policy, n, w, skills),
    }
}

/// Pairs a pool with floating-point weights; EOMM and WorstMM solve the quantised problem
/// exactly (see the module documentation).
pub fn pair_f64(
    policy: PairPolicy,
    n: usize,
    w: &[f64],
    skills: Option<&[f64]>,
    solver: &mut DenseBlossom,
) -> Result<Pairing<f64>, PairingError> {
    check_shape(n, w.len())?;
    for i in 0..n {
        for j in i + 1..n {
            let x = w[i * n + j];
            if !x.is_finite() {
                return Err(PairingError::NonFinite { i, j, value: x });
            }
            if x.to_bits() != w[j * n + i].to_bits() {
                return Err(PairingError::Asymmetric { i, j });
            }
        }
    }
    match policy {
        PairPolicy::Eomm | PairPolicy::Worst => {
            let q = quantise(n, w);
            let p = exact(n, &q, policy == PairPolicy::Worst, solver)?;
            Ok(with_objective(p.pairs, p.waiting, n, w))
        }
        _ => heuristic(policy, n, w, skills),
    }
}

#[doc(hidden)]
/// Reads a square row-major little-endian int32 cost matrix (the peers' `pools/*.i32`
/// format); returns its side and entries. The error says what is wrong with the bytes.
pub fn costs_from_le_i32(bytes: &[u8]) -> Result<(usize, Vec<i64>), String> {
    if !bytes.len().is_multiple_of(4) {
        return Err(format!(
            "{} bytes is not a whole number of int32 values",
            bytes.len()
        ));
    }
    let w: Vec<i64> = bytes
        .chunks_exact(4)
        .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .collect();
    let n = w.len().isqrt();
    if n * n != w.len() {
        return Err(format!(
            "{} int32 values do not form a square matrix",
            w.len()
        ));
    }
    Ok((n, w))
}

fn check_shape(n: usize, len: usize) -> Result<(), PairingError> {
    if len != n * n {
        return Err(PairingError::Shape { n, len });
    }
    Ok(())
}

/// Integer weights `round(w * 2^k)` with the largest `|w|` scaled into `[2^39, 2^40]`: the
/// problem EOMM and WorstMM solve exactly for float weights.
#[must_use]
pub fn quantise(n: usize, w: &[f64]) -> Vec<i64> {
    let max = w.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let scale = if max > 0.0 {
        let k = 39 - max.log2().ceil() as i32;
        2f64.powi(k)
    } else {
        1.0
    };
    let limit = MAX_ABS_COST as f64;
    let mut q: Vec<i64> = w
        .iter()
        .map(|x| (x * scale).round().clamp(-limit, limit) as i64)
        .collect();
    for i in 0..n {
        q[i * n + i] = 0;
    }
    q
}

fn with_objective<T: Weight>(
    mut pairs: Vec<(usize, usize)>,
    waiting: Option<usize>,
    n: usize,
    w: &[T],
) -> Pairing<T> {
    for p in &mut pairs {
        if p.0 > p.1 {
            *p = (p.1, p.0);
        }
    }
    pairs.sort_unstable();
    let objective = pairs.iter().map(|&(i, j)| w[i * n + j]).sum();
    Pairing {
        pairs,
        waiting,
        objective,
    }
}

/// The perfect-matching problem an exact policy solves for a pool: costs (negated to maximise)
/// with a dummy vertex at cost 0 for an odd pool. Returns its size and row-major costs, so that
/// a caller can check [`DenseBlossom::certificate`] against exactly what was solved.
#[must_use]
pub fn exact_problem(n: usize, w: &[i64], maximise: bool) -> (usize, Vec<i64>) {
    let m = n + n % 2;
    let mut cost = vec![0i64; m * m];
    for i in 0..n {
        for j in 0..n {
            let x = w[i * n + j];
            cost[i * m + j] = if i == j {
                0
            } else if maximise {
                x.checked_neg().unwrap_or(i64::MAX)
            } else {
                x
            };
        }
    }
    (m, cost)
}

/// Exact minimum (or maximum) weight perfect matching; an odd pool gets a dummy vertex at cost 0.
fn exact(
    n: usize,
    w: &[i64],
    maximise: bool,
    solver: &mut DenseBlossom,
) -> Result<Pairing<i64>, PairingError> {
    if n < 2 {
        return Ok(Pairing {
            pairs: vec![],
            waiting: (n == 1).then_some(0),
            objective: 0,
        });
    }
    let (m, cost) = exact_problem(n, w, maximise);
    let sol = solver.solve(m, &cost)?;
    let mut pairs = Vec::with_capacity(n / 2);
    let mut waiting = None;
    for (i, &j) in sol.mate.iter().enumerate() {
        if j == n {
            waiting = Some(i);
        } else if i < j && j < n {
            pairs.push((i, j));
        }
    }
    Ok(with_objective(pairs, waiting, n, w))
}

fn heuristic<T: Weight>(
    policy: PairPolicy,
    n: usize,
    w: &[T],
    skills: Option<&[f64]>,
) -> Result<Pairing<T>, PairingError> {
    let at = |i: usize, j: usize| w[i * n + j];
    let (pairs, waiting) = match policy {
        PairPolicy::Skill => {
            let skills = skills.ok_or(PairingError::Skills { n, got: 0 })?;
            if skills.len() != n {
                return Err(PairingError::Skills {
                    n,
                    got: skills.len(),
                });
            }
            skill_pairs(n, skills, at)
        }
        PairPolicy::Random { seed } => {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
            let pairs = order.chunks_exact(2).map(|c| (c[0], c[1])).collect();
            (pairs, (n % 2 == 1).then(|| order[n - 1]))
        }
        PairPolicy::Greedy => greedy_pairs(n, at),
        PairPolicy::Eomm | PairPolicy::Worst => unreachable!("exact policies are solved above"),
    };
    Ok(with_objective(pairs, waiting, n, w))
}

/// SkillMM: players sorted by (skill, index) and ranks 2k, 2k+1 paired. With an odd pool, the
/// player left out is the one (at an even rank) that makes the neighbour pairing cheapest.
fn skill_pairs<T: Weight>(
    n: usize,
    skills: &[f64],
    at: impl Fn(usize, usize) -> T,
) -> (Vec<(usize, usize)>, Option<usize>) {
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| skills[a].total_cmp(&skills[b]).then(a.cmp(&b)));
    if n.is_multiple_of(2) {
        return (order.chunks_exact(2).map(|c| (c[0], c[1])).collect(), None);
    }
    // Leaving out rank k (even): ranks below pair as (0,1)..(k-2,k-1), above as (k+1,k+2)...
    let m = n / 2;
    let mut below = vec![T::ZERO; m + 1];
    for p in 0..m {
        below[p + 1] = below[p].add(at(order[2 * p], order[2 * p + 1]));
    }
    let mut above = vec![T::ZERO; m + 1];
    for p in (0..m).rev() {
        above[p] = above[p + 1].add(at(order[2 * p + 1], order[2 * p + 2]));
    }
    let mut best = 0;
    for k in 1..=m {
        if below[k].add(above[k]) < below[best].add(above[best]) {
            best = k;
        }
    }
    let left = order.remove(2 * best);
    (
        order.chunks_exact(2).map(|c| (c[0], c[1])).collect(),
        Some(left),
    )
}

/// Greedy: all edges sorted by (weight, i, j); an edge is taken when both ends are free.
fn greedy_pairs<T: Weight>(
    n: usize,
    at: impl Fn(usize, usize) -> T,
) -> (Vec<(usize, usize)>, Option<usize>) {
    let mut edges: Vec<(T, u32, u32)> = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        for j in i + 1..n {
            edges.push((at(i, j), i as u32, j as u32));
        }
    }
    edges.sort_unstable_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then((a.1, a.2).cmp(&(b.1, b.2)))
    });
    let mut free = vec![true; n];
    let mut pairs = Vec::with_capacity(n / 2);
    for &(_, i, j) in &edges {
        let (i, j) = (i as usize, j as usize);
        if free[i] && free[j] {
            free[i] = false;
            free[j] = false;
            pairs.push((i, j));
            if pairs.len() == n / 2 {
                break;
            }
        }
    }
    (pairs, free.iter().position(|&f| f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solver() -> DenseBlossom {
        DenseBlossom::new()
    }

    #[test]
    fn empty_and_single_player_pools_are_documented_outcomes() {
        let p = pair_f64(PairPolicy::Eomm, 0, &[], None, &mut solver()).unwrap();
        assert!(p.pairs.is_empty() && p.waiting.is_none());
        let p = pair_f64(PairPolicy::Eomm, 1, &[0.0], None, &mut solver()).unwrap();
        assert_eq!((p.pairs.len(), p.waiting), (0, Some(0)));
    }

    #[test]
    fn non_finite_and_asymmetric_weights_are_errors_naming_the_entry() {
        let w = [0.0, f64::NAN, f64::NAN, 0.0];
        let e = pair_f64(PairPolicy::Eomm, 2, &w, None, &mut solver()).unwrap_err();
        assert!(e.to_string().contains("weight[0][1]"), "{e}");
        let w = [0.0, 1.0, 2.0, 0.0];
        let e = pair_f64(PairPolicy::Greedy, 2, &w, None, &mut solver()).unwrap_err();
        assert_eq!(e, PairingError::Asymmetric { i: 0, j: 1 });
        let e = pair_f64(PairPolicy::Skill, 2, &[0.0; 4], Some(&[1.0]), &mut solver());
        assert!(matches!(e, Err(PairingError::Skills { n: 2, got: 1 })));
    }

    /// Three players: pairs cost (0,1)=5, (0,2)=1, (1,2)=4. EOMM pairs 0-2 and 1 waits;
    /// WorstMM pairs 0-1 and 2 waits.
    #[test]
    fn odd_pool_waiting_player_follows_the_objective() {
        let w = [0, 5, 1, 5, 0, 4, 1, 4, 0];
        let p = pair_i64(PairPolicy::Eomm, 3, &w, None, &mut solver()).unwrap();
        assert_eq!(
            (p.pairs, p.waiting, p.objective),
            (vec![(0, 2)], Some(1), 1)
        );
        let p = pair_i64(PairPolicy::Worst, 3, &w, None, &mut solver()).unwrap();
        assert_eq!(
            (p.pairs, p.waiting, p.objective),
            (vec![(0, 1)], Some(2), 5)
        );
        // Skills 10, 30, 20: sorted 0, 2, 1; leaving out rank 0 costs (2,1)=4, rank 2 costs (0,2)=1.
        let p = pair_i64(
            PairPolicy::Skill,
            3,
            &w,
            Some(&[10.0, 30.0, 20.0]),
            &mut solver(),
        );
        assert_eq!(p.unwrap().pairs, vec![(0, 2)]);
    }
}
