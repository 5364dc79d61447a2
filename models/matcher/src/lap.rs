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
//!
//! [`Lap::assign_no_diagonal`] runs the search on a sparse candidate graph and prices the rest
//! (Volgenant's LAPMOD idea, 1996, with column generation): each row keeps its few columns of
//! least reduced cost after the reductions, each column its few rows that want it most, plus the
//! edge `i -> i + 1 (mod n)`, so the sparse graph always has a perfect assignment. Once every
//! row is assigned, one dense pass checks `c(i, j) - v_j >= u_i` for every edge; a row with a
//! violated edge gets its most violated columns and is freed, and the search runs again. It stops when no edge is violated, so the duals are
//! feasible on the whole matrix and the assignment is optimal, exactly as the dense search's.
//! The dense search ([`Lap::assign_no_diagonal_dense`]) serves small problems and is the
//! reference the tests compare with. On pools of 1,000 players it scanned about half the
//! columns for each free row, 97% of the matching's time; the sparse search does the same
//! work on lists of a dozen columns, plus a dozen or more pricing passes (every pass frees
//! nearly every row, because the searches never see, and so never raise, the prices of
//! columns outside the lists).

// Rows and columns index several parallel arrays; index loops read clearer than zipped iterators.
#![allow(clippy::needless_range_loop)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;

const NONE: u32 = u32::MAX;
/// Heap entry kinds, in the order ties are broken: a free column ends the search at once.
const FREE: u8 = 0;
const TAKEN: u8 = 1;
/// Candidate columns per row in the sparse search, before pricing adds any.
const CANDIDATES: usize = 12;
/// Sizes from which [`Lap::assign_no_diagonal`] takes the sparse search. Measured with
/// `examples/solve_pool.rs` (medians of 5 to 7, both searches interleaved in one process): the
/// two are even at 400 rows, the sparse one is up to 1.2x faster at 500 (peers' and evaluation
/// pools) and 2.2 to 2.5x faster at 1,000.
pub const SPARSE_FROM: usize = 450;
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
    /// Sparse search: each row's candidate columns with their costs.
    adj: Vec<Vec<(u32, i64)>>,
    keys: Vec<(i64, u32)>,
    dist: Vec<i64>,
    done: Vec<bool>,
    touched: Vec<u32>,
    scanned: Vec<u32>,
    heap: BinaryHeap<Reverse<(i64, u8, u32)>>,
    /// Candidates per row (0: [`CANDIDATES`]); tests set it low to exercise the pricing.
    candidates: usize,
    stats: LapStats,
}

/// Keeps the `k` least keys (in no order).
fn keep_least(keys: &mut Vec<(i64, u32)>, k: usize) {
    if k < keys.len() {
        keys.select_nth_unstable(k);
        keys.truncate(k);
    }
}

/// Counters of the last sparse solve.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LapStats {
    /// Rows left free by the reductions.
    pub free_after_reduction: usize,
    /// Dense pricing passes (the last one finds nothing).
    pub pricing_rounds: usize,
    /// Edges the pricing added to the candidate graph.
    pub priced_edges: usize,
    /// Rows the pricing freed and assigned again.
    pub repriced_rows: usize,
}

impl Lap {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Row reduction, then column reduction: prices `v`, a partial assignment and its free
    /// rows.
    fn reduce(&mut self, n: usize, cost: &[i64]) {
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
    }

    /// Candidate columns kept per row by the sparse search (at least 1; 0 restores the
    /// default). Any value gives the same optimum; small ones make the pricing do more.
    pub fn set_candidates(&mut self, k: usize) {
        self.candidates = k;
    }

    /// Counters of the last sparse search.
    #[must_use]
    pub fn stats(&self) -> LapStats {
        self.stats
    }

    /// Minimum-cost assignment of the `n x n` row-major `cost` with `i -> i` forbidden: the
    /// dense search below [`SPARSE_FROM`] rows, the sparse one with pricing from there on (the
    /// same optimum either way). Needs `n >= 3` (so every row has two allowed columns) and
    /// `|cost| <= 2^42`.
    ///
    /// # Panics
    /// When `n < 3` or `cost.len() != n * n`.
    pub fn assign_no_diagonal(&mut self, n: usize, cost: &[i64]) -> Assignment {
        if n < SPARSE_FROM {
            self.assign_no_diagonal_dense(n, cost)
        } else {
            self.assign_no_diagonal_sparse(n, cost)
        }
    }

    /// The sparse search with pricing (see the module notes).
    ///
    /// # Panics
    /// When `n < 3` or `cost.len() != n * n`.
    pub fn assign_no_diagonal_sparse(&mut self, n: usize, cost: &[i64]) -> Assignment {
        assert!(
            n >= 3 && cost.len() == n * n,
            "lap: n >= 3 and an n x n matrix"
        );
        self.reduce(n, cost);
        self.stats = LapStats {
            free_after_reduction: self.free.len(),
            ..LapStats::default()
        };
        let k = if self.candidates == 0 {
            CANDIDATES
        } else {
            self.candidates
        }
        .clamp(1, n - 1);
        self.adj.resize_with(n, Vec::new);
        for i in 0..n {
            let row = &cost[i * n..(i + 1) * n];
            self.keys.clear();
            self.keys.extend(
                (0..n)
                    .filter(|&j| j != i)
                    .map(|j| (row[j] - self.v[j], j as u32)),
            );
            keep_least(&mut self.keys, k);
            let adj = &mut self.adj[i];
            adj.clear();
            adj.extend(self.keys.iter().map(|&(_, j)| (j, row[j as usize])));
            // The cycle edge keeps a perfect assignment in the sparse graph; the reduction's
            // column (one of the row's cheapest, perhaps lost in a tie) keeps the row valid.
            for j in [(i + 1) % n, self.x[i] as usize] {
                if j < n && !adj.iter().any(|&(c, _)| c as usize == j) {
                    adj.push((j as u32, row[j]));
                }
            }
        }
        // Column lists too: each column is listed by the rows that want it most (least
        // row-reduced cost), so that its rivals see it and can raise its price. On the P=1000
        // pools this took the pricing rounds from 15 to 11 (peers) and 36 to 22 (evaluation).
        // (`d` still holds the row minima of the reduction.)
        for j in 0..n {
            self.keys.clear();
            self.keys.extend(
                (0..n)
                    .filter(|&i| i != j)
                    .map(|i| (cost[i * n + j] - self.d[i], i as u32)),
            );
            keep_least(&mut self.keys, k);
            for &(_, i) in &self.keys {
                let adj = &mut self.adj[i as usize];
                if !adj.iter().any(|&(c, _)| c as usize == j) {
                    adj.push((j as u32, cost[i as usize * n + j]));
                }
            }
        }
        self.dist.clear();
        self.dist.resize(n, i64::MAX);
        self.done.clear();
        self.done.resize(n, false);
        loop {
            let free = std::mem::take(&mut self.free);
            for &fr in &free {
                self.augment_sparse(n, cost, fr as usize);
            }
            self.free = free;
            self.free.clear();
            self.stats.pricing_rounds += 1;
            // Pricing: a row with an edge cheaper than its own (under the prices the searches
            // left) gets its most violated columns and is assigned again. A round that finds
            // nothing proves the duals feasible on the whole matrix.
            for i in 0..n {
                let xi = self.x[i] as usize;
                let row = &cost[i * n..(i + 1) * n];
                let ui = row[xi] - self.v[xi];
                self.keys.clear();
                self.keys.extend(
                    (0..n)
                        .filter(|&j| j != i && row[j] - self.v[j] < ui)
                        .map(|j| (row[j] - self.v[j], j as u32)),
                );
                if self.keys.is_empty() {
                    continue;
                }
                keep_least(&mut self.keys, k);
                self.stats.priced_edges += self.keys.len();
                self.stats.repriced_rows += 1;
                self.adj[i].extend(self.keys.iter().map(|&(_, j)| (j, row[j as usize])));
                self.y[xi] = NONE;
                self.x[i] = NONE;
                self.free.push(i as u32);
            }
            if self.free.is_empty() {
                break;
            }
        }
        self.duals(n, cost)
    }

    /// One shortest augmenting path from the free row `fr` over the listed columns (Dijkstra
    /// with a binary heap; at equal distance a free column comes first), then the price update
    /// and the augmentation, as in the dense search.
    fn augment_sparse(&mut self, n: usize, cost: &[i64], fr: usize) {
        self.touched.clear();
        self.scanned.clear();
        self.heap.clear();
        self.scan_row(fr, 0);
        let (end, min) = loop {
            let Some(Reverse((d, _, id))) = self.heap.pop() else {
                unreachable!("the cycle edges keep a perfect assignment in the candidate graph")
            };
            let id = id as usize;
            if self.done[id] || d > self.dist[id] {
                continue;
            }
            if self.y[id] == NONE {
                break (id, d);
            }
            self.done[id] = true;
            self.scanned.push(id as u32);
            let i = self.y[id] as usize;
            self.scan_row(i, d - (cost[i * n + id] - self.v[id]));
        };
        for &j in &self.scanned {
            let j = j as usize;
            self.v[j] += self.dist[j] - min;
        }
        for &j in &self.touched {
            self.dist[j as usize] = i64::MAX;
            self.done[j as usize] = false;
        }
        let mut j = end;
        loop {
            let i = self.pred[j] as usize;
            self.y[j] = i as u32;
            let next = self.x[i];
            self.x[i] = j as u32;
            if i == fr {
                break;
            }
            j = next as usize;
        }
    }

    /// Scans row i, reached at `base` (its distance less its assigned column's reduced cost):
    /// each listed column is offered `base + c(i, j) - v_j`.
    fn scan_row(&mut self, i: usize, base: i64) {
        for &(j, c) in &self.adj[i] {
            let jj = j as usize;
            if self.done[jj] {
                continue;
            }
            let d = base + c - self.v[jj];
            if d < self.dist[jj] {
                if self.dist[jj] == i64::MAX {
                    self.touched.push(j);
                }
                self.dist[jj] = d;
                self.pred[jj] = i as u32;
                let kind = if self.y[jj] == NONE { FREE } else { TAKEN };
                self.heap.push(Reverse((d, kind, j)));
            }
        }
    }

    /// The dense search: also the reference the sparse one is tested against. Needs `n >= 3`
    /// and `|cost| <= 2^42`.
    ///
    /// # Panics
    /// When `n < 3` or `cost.len() != n * n`.
    pub fn assign_no_diagonal_dense(&mut self, n: usize, cost: &[i64]) -> Assignment {
        assert!(
            n >= 3 && cost.len() == n * n,
            "lap: n >= 3 and an n x n matrix"
        );
        self.reduce(n, cost);
        let c = |i: usize, j: usize| {
            if i == j { FORBIDDEN } else { cost[i * n + j] }
        };
        let (x, y, v) = (&mut self.x, &mut self.y, &mut self.v);
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
        self.duals(n, cost)
    }

    /// The assignment with its row duals `u_i = c(i, x_i) - v_{x_i}`.
    fn duals(&self, n: usize, cost: &[i64]) -> Assignment {
        let (x, v) = (&self.x, &self.v);
        let u = (0..n)
            .map(|i| cost[i * n + x[i] as usize] - v[x[i] as usize])
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
            let best = brute(n, &cost);
            let a = lap.assign_no_diagonal_dense(n, &cost);
            assert_eq!(check(n, &cost, &a), best, "dense, case {case}: {cost:?}");
            // One to three candidates per row: the pricing must find the rest.
            lap.set_candidates(1 + case % 3);
            let a = lap.assign_no_diagonal_sparse(n, &cost);
            assert_eq!(check(n, &cost, &a), best, "sparse, case {case}: {cost:?}");
        }
    }

    /// Random, tied and near-separable matrices (the shape of EOMM pools) of 20 to 200 rows:
    /// the sparse search with few or many candidates gives the dense search's optimum, with
    /// duals feasible on every entry.
    #[test]
    fn sparse_search_matches_the_dense_one() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let (mut sparse, mut dense) = (Lap::new(), Lap::new());
        for case in 0..60 {
            let n = rng.random_range(20..=200);
            let a: Vec<i64> = (0..n).map(|_| rng.random_range(0..1_000_000)).collect();
            let mut cost = vec![0; n * n];
            for i in 0..n {
                for j in 0..n {
                    cost[i * n + j] = match case % 3 {
                        0 => rng.random_range(0..1_000_000),
                        1 => rng.random_range(0..4),
                        _ => a[i] + a[j] + rng.random_range(0..1000),
                    };
                }
            }
            sparse.set_candidates([1, 4, 12, 40][case % 4]);
            let s = sparse.assign_no_diagonal_sparse(n, &cost);
            let d = dense.assign_no_diagonal_dense(n, &cost);
            assert_eq!(
                check(n, &cost, &s),
                check(n, &cost, &d),
                "case {case}, n {n}"
            );
            assert!(sparse.stats().pricing_rounds >= 1);
        }
    }

    #[test]
    fn large_near_separable_matrix() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let n = SPARSE_FROM + 60;
        let a: Vec<i64> = (0..n).map(|_| rng.random_range(0..1_000_000)).collect();
        let mut cost = vec![0; n * n];
        for i in 0..n {
            for j in 0..n {
                cost[i * n + j] = a[i] + a[j] + rng.random_range(0..1000);
            }
        }
        let mut lap = Lap::new();
        let s = lap.assign_no_diagonal(n, &cost);
        assert!(lap.stats().pricing_rounds >= 1, "the sparse search ran");
        let d = Lap::new().assign_no_diagonal_dense(n, &cost);
        assert_eq!(check(n, &cost, &s), check(n, &cost, &d));
    }
}
