//! Dense linear assignment (Jonker and Volgenant's shortest augmenting path algorithm, 1987) with
//! the diagonal forbidden, returning optimal duals: the blossom solver's jump start.
//!
//! Why the blossom needs it: the bipartite relaxation of a symmetric matching problem (assign
//! every vertex a partner, `i -> j` costing `c(i, j)`, never `i -> i`) is solved by a
//! permutation whose cycles are mostly 2-cycles, and its duals `(u, v)` average into potentials
//! `p_i = (u_i + v_i) / 2` that are feasible for the matching LP (`p_i + p_j <= c(i, j)` because
//! `c` is symmetric) and tight on every edge of the permutation (complementary slackness with
//! the averaged primal `(x + x^T) / 2`). So every cycle edge can start matched and only one
//! vertex per odd cycle is left to the blossom search. On EOMM pools, whose costs are almost
//! separable (`c(i, j) ~ a_i + a_j`), the greedy start leaves nearly every vertex free and the
//! blossom search then forms tens of thousands of blossoms; this start leaves a few dozen.
//!
//! No maintained crate fits: `lapjv` takes an `ndarray` matrix (the matcher takes no ndarray)
//! and `pathfinding`'s Hungarian method returns no duals. This is Jonker and Volgenant's
//! shortest augmenting path (a Dijkstra-like search over columns for each free row) after a
//! row-then-column reduction; their augmenting row reduction is left out (on finely quantised
//! costs it wages long wars of tiny price cuts, and with a work budget it did not pay on our
//! pools).

// Rows and columns index several parallel arrays; index loops read clearer than zipped iterators.
#![allow(clippy::needless_range_loop)]

const NONE: u32 = u32::MAX;
/// The cost of a diagonal entry: far above any sum of real costs (`|c| <= 2^41` after the
/// blossom's scaling, at most 2^20 rows), far below overflow.
const FORBIDDEN: i64 = i64::MAX / 8;

/// An optimal assignment with its duals: `row_to_col[i]` is row i's column, and
/// `u[i] + v[j] <= c(i, j)` for every `j != i`, with equality on the assignment.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    pub row_to_col: Vec<u32>,
    pub u: Vec<i64>,
    pub v: Vec<i64>,
}

/// Reusable buffers for [`assign_no_diagonal`].
#[derive(Debug, Default)]
pub struct Lap {
    x: Vec<u32>,
    y: Vec<u32>,
    v: Vec<i64>,
    d: Vec<i64>,
    pred: Vec<u32>,
    cols: Vec<u32>,
    free: Vec<u32>,
}

impl Lap {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Minimum-cost assignment of the `n x n` row-major `cost` with `i -> i` forbidden. Needs
    /// `n >= 3` (so every row has two allowed columns) and `|cost| <= 2^42`.
    ///
    /// # Panics
    /// When `n < 3` or `cost.len() != n * n`.
    pub fn assign_no_diagonal(&mut self, n: usize, cost: &[i64]) -> Assignment {
        assert!(
            n >= 3 && cost.len() == n * n,
            "lap: n >= 3 and an n x n matrix"
        );
        let c = |i: usize, j: usize| {
            if i == j { FORBIDDEN } else { cost[i * n + j] }
        };
        for buf in [&mut self.x, &mut self.y, &mut self.pred, &mut self.cols] {
            buf.clear();
            buf.resize(n, NONE);
        }
        self.v.clear();
        self.v.resize(n, 0);
        self.d.clear();
        self.d.resize(n, 0);
        self.free.clear();
        let (x, y, v) = (&mut self.x, &mut self.y, &mut self.v);

        // Row reduction, then column reduction of what is left: on near-separable costs
        // (`c(i, j) ~ a_i + a_j`) the column minima of the raw costs all fall in the row with the
        // least `a_i`, while those of the row-reduced costs spread over the rows. Column j's
        // price is its least row-reduced cost, and its cheapest row takes it when still free.
        // Every assigned row's column is then one of its cheapest under these prices, as the
        // augmenting paths below require. (Jonker and Volgenant's augmenting row reduction is
        // left out: on finely quantised costs it makes millions of tiny price cuts.)
        for i in 0..n {
            let mut min = i64::MAX;
            for j in 0..n {
                if j != i {
                    min = min.min(cost[i * n + j]);
                }
            }
            self.d[i] = min;
        }
        v.fill(i64::MAX);
        for i in 0..n {
            let (row, r) = (&cost[i * n..(i + 1) * n], self.d[i]);
            for j in 0..n {
                let h = row[j] - r;
                if j != i && h < v[j] {
                    v[j] = h;
                    self.pred[j] = i as u32;
                }
            }
        }
        for j in 0..n {
            let imin = self.pred[j] as usize;
            if x[imin] == NONE {
                x[imin] = j as u32;
                y[j] = imin as u32;
            }
        }
        for i in 0..n {
            if x[i] == NONE {
                self.free.push(i as u32);
            }
        }

        // Shortest augmenting path from each free row.
        let free = std::mem::take(&mut self.free);
        for &fr in &free {
            let fr = fr as usize;
            for j in 0..n {
                self.d[j] = c(fr, j) - v[j];
                self.pred[j] = fr as u32;
                self.cols[j] = j as u32;
            }
            // cols[..low] scanned, cols[low..up] at the current minimum, cols[up..] the rest.
            let (mut low, mut up) = (0usize, 0usize);
            let mut min = 0i64;
            let end = 'search: loop {
                if up == low {
                    min = self.d[self.cols[up] as usize];
                    up += 1;
                    // Columns at the minimum are swapped to the front of the unscanned ones:
                    // `up` grows inside the loop, whose range is fixed at its start on purpose.
                    #[allow(clippy::mut_range_bound)]
                    for k in up..n {
                        let j = self.cols[k] as usize;
                        let h = self.d[j];
                        if h <= min {
                            if h < min {
                                up = low;
                                min = h;
                            }
                            self.cols[k] = self.cols[up];
                            self.cols[up] = j as u32;
                            up += 1;
                        }
                    }
                    for k in low..up {
                        let j = self.cols[k] as usize;
                        if y[j] == NONE {
                            break 'search j;
                        }
                    }
                }
                let j1 = self.cols[low] as usize;
                low += 1;
                let i = y[j1] as usize;
                let h = c(i, j1) - v[j1] - min;
                let mut k = up;
                while k < n {
                    let j = self.cols[k] as usize;
                    let v2 = c(i, j) - v[j] - h;
                    if v2 < self.d[j] {
                        self.pred[j] = i as u32;
                        if v2 == min {
                            if y[j] == NONE {
                                break 'search j;
                            }
                            self.cols[k] = self.cols[up];
                            self.cols[up] = j as u32;
                            up += 1;
                        }
                        self.d[j] = v2;
                    }
                    k += 1;
                }
            };
            // Scanned columns move their prices (those scanned at the final minimum by zero).
            for k in 0..low {
                let j = self.cols[k] as usize;
                v[j] += self.d[j] - min;
            }
            // Augment along the predecessors.
            let mut j = end;
            loop {
                let i = self.pred[j] as usize;
                y[j] = i as u32;
                let next = x[i];
                x[i] = j as u32;
                if i == fr {
                    break;
                }
                j = next as usize;
            }
        }
        self.free = free;

        let u = (0..n)
            .map(|i| c(i, x[i] as usize) - v[x[i] as usize])
            .collect();
        Assignment {
            row_to_col: x.clone(),
            u,
            v: v.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The least assignment cost with the diagonal forbidden, by trying every permutation.
    fn brute(n: usize, cost: &[i64]) -> i64 {
        fn go(i: usize, n: usize, cost: &[i64], used: &mut [bool], acc: i64, best: &mut i64) {
            if i == n {
                *best = (*best).min(acc);
                return;
            }
            for j in 0..n {
                if j != i && !used[j] {
                    used[j] = true;
                    go(i + 1, n, cost, used, acc + cost[i * n + j], best);
                    used[j] = false;
                }
            }
        }
        let mut best = i64::MAX;
        go(0, n, cost, &mut vec![false; n], 0, &mut best);
        best
    }

    fn check(n: usize, cost: &[i64], a: &Assignment) -> i64 {
        let mut seen = vec![false; n];
        let mut total = 0;
        for i in 0..n {
            let j = a.row_to_col[i] as usize;
            assert!(
                j < n && j != i && !seen[j],
                "not a permutation without fixed points"
            );
            seen[j] = true;
            assert_eq!(a.u[i] + a.v[j], cost[i * n + j], "assigned edge not tight");
            total += cost[i * n + j];
            for k in 0..n {
                if k != i {
                    assert!(a.u[i] + a.v[k] <= cost[i * n + k], "dual infeasible");
                }
            }
        }
        total
    }

    #[test]
    fn optimal_with_feasible_duals_on_random_and_tied_matrices() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut lap = Lap::new();
        for case in 0..3000 {
            let n = rng.random_range(3..=8);
            let hi = [3, 50, 1_000_000][case % 3];
            let mut cost = vec![0; n * n];
            for i in 0..n {
                for j in 0..n {
                    cost[i * n + j] = rng.random_range(-hi..=hi);
                }
            }
            let a = lap.assign_no_diagonal(n, &cost);
            assert_eq!(
                check(n, &cost, &a),
                brute(n, &cost),
                "case {case}: {cost:?}"
            );
        }
    }

    #[test]
    fn large_near_separable_matrix() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let n = 300;
        let a: Vec<i64> = (0..n).map(|_| rng.random_range(0..1_000_000)).collect();
        let mut cost = vec![0; n * n];
        for i in 0..n {
            for j in 0..n {
                cost[i * n + j] = a[i] + a[j] + rng.random_range(0..1000);
            }
        }
        let asg = Lap::new().assign_no_diagonal(n, &cost);
        check(n, &cost, &asg);
    }
}
