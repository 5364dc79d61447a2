//! Linear assignment with the diagonal forbidden, returning optimal duals: the blossom
//! solver's jump start.
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
//! Two exact solvers, the same optimum:
//!
//! - [`Lap::assign_no_diagonal_dense`]: Jonker and Volgenant's shortest augmenting path (1987)
//!   after a row-then-column reduction; small problems, and the reference of the tests. Their
//!   augmenting row reduction is left out (on finely quantised costs it wages long wars of tiny
//!   price cuts). On EOMM pools of 1,000 players each free row's search scans about half the
//!   columns: about 0.75 s.
//! - [`Lap::assign_no_diagonal_auction`]: Bertsekas's forward auction with epsilon scaling
//!   (1988), on integer costs scaled by `n + 1` so that the last phase (`eps = 1`) ends at an
//!   optimum, with a look-ahead cache per row that makes most bids read eight columns instead
//!   of all of them. Its prices are only `eps`-optimal, so exact integer duals come from a
//!   label-correcting pass over the final assignment's residual graph, which starts from the
//!   prices and ends after about one scan of each row. About 0.05 s at 1,000 players.
//!
//! No maintained crate fits: `lapjv` takes an `ndarray` matrix (the matcher takes no ndarray)
//! and forbids nothing, `pathfinding`'s Hungarian method returns no duals.

// Rows and columns index several parallel arrays; index loops read clearer than zipped iterators.
#![allow(clippy::needless_range_loop)]

use std::collections::VecDeque;

const NONE: u32 = u32::MAX;
/// Sizes from which [`Lap::assign_no_diagonal`] takes the auction (faster than the dense
/// search from about 100 rows on the peers' pools).
pub const AUCTION_FROM: usize = 100;
/// The cost of a diagonal entry: far above any sum of real costs (`|c| <= 2^41` after the
/// blossom's scaling, at most 2^20 rows), far below overflow.
const FORBIDDEN: i64 = i64::MAX / 8;
/// Columns a rescan checks at once against the cache's bound.
const BLOCK: usize = 16;
/// Columns each row of the auction caches (the fastest on the peers' pools).
const LOOKAHEAD: usize = 8;
/// The first `eps` of the auction is the cost range over this, and each phase divides it by
/// [`EPS_FACTOR`] (the pair that made the fewest bids on the peers' P=1000 pool).
const EPS_DIVISOR: i64 = 100;
const EPS_FACTOR: i64 = 6;
/// How far, in units of the phase's `eps`, a bid before the last phase may trust a spent cache
/// (see the auction): fewer rescans than exact bids, for a few more bids.
const BID_SLACK: i64 = 4;
/// Row scans of the dual label correction, per row, beyond which the dense search takes over.
/// One scan per row is the rule on every pool measured; only a bug could reach this.
const DUAL_SCAN_LIMIT: u64 = 64;
/// Scaled values beyond this send the auction to the dense search (no real pool comes near:
/// costs within 2^40 and 2,000 rows stay below 2^52).
const VALUE_LIMIT: i64 = 1 << 60;

/// An optimal assignment with its duals: `row_to_col[i]` is row i's column, and
/// `u[i] + v[j] <= c(i, j)` for every `j != i`, with equality on the assignment.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    pub row_to_col: Vec<u32>,
    pub u: Vec<i64>,
    pub v: Vec<i64>,
}

/// Reusable buffers for the assignment solvers.
#[derive(Debug, Default)]
pub struct Lap {
    x: Vec<u32>,
    y: Vec<u32>,
    v: Vec<i64>,
    d: Vec<i64>,
    pred: Vec<u32>,
    cols: Vec<u32>,
    free: Vec<u32>,
    /// Auction: each row's cached cheapest columns, and a bound on every other column's value.
    cache: Vec<u32>,
    bound: Vec<i64>,
    queue: VecDeque<u32>,
    queued: Vec<bool>,
    stats: LapStats,
}

/// Counters of the last auction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LapStats {
    /// Epsilon phases.
    pub phases: usize,
    /// Bids made.
    pub bids: u64,
    /// Rows scanned in full to refill their cache.
    pub rescans: u64,
    /// Rows scanned by the label correction of the duals.
    pub dual_scans: u64,
    /// The values outgrew [`VALUE_LIMIT`] and the dense search solved the problem instead.
    pub fell_back: bool,
}

/// Scans row i at prices `p`: its `list.len()` cheapest columns (the diagonal excluded) go to
/// `list`, and the value of the next cheapest is returned (`i64::MAX` when there is none).
fn rescan(i: usize, row: &[i64], s: i64, p: &[i64], list: &mut [u32]) -> i64 {
    let k = list.len();
    // Values stay within +-2^61 (see `VALUE_LIMIT`), so this stands for none yet.
    const NO_VALUE: i64 = 1 << 62;
    let mut best = [(NO_VALUE, 0u32); LOOKAHEAD + 1];
    let mut worst = NO_VALUE;
    let mut offer = |j: usize, val: i64, worst: &mut i64| {
        if val < *worst && j != i {
            let mut at = k;
            while at > 0 && best[at - 1].0 > val {
                best[at] = best[at - 1];
                at -= 1;
            }
            best[at] = (val, j as u32);
            *worst = best[k].0;
        }
    };
    // Blocks of 16 are checked against the bound first, branch-free: the sign of the OR of
    // `value - worst` over the block says whether any value is below it (no overflow: values
    // stay within +-2^61). Nearly all of a row is dearer than its cache once the first blocks
    // are in.
    let blocks = row.len() / BLOCK;
    for b in 0..blocks {
        let (cs, ps) = (
            &row[b * BLOCK..(b + 1) * BLOCK],
            &p[b * BLOCK..(b + 1) * BLOCK],
        );
        let mut below = 0i64;
        for t in 0..BLOCK {
            below |= cs[t] * s + ps[t] - worst;
        }
        if below < 0 {
            for t in 0..BLOCK {
                offer(b * BLOCK + t, cs[t] * s + ps[t], &mut worst);
            }
        }
    }
    for j in blocks * BLOCK..row.len() {
        offer(j, row[j] * s + p[j], &mut worst);
    }
    for (slot, b) in list.iter_mut().zip(&best) {
        *slot = b.1;
    }
    if best[k].0 == NO_VALUE {
        i64::MAX
    } else {
        best[k].0
    }
}

impl Lap {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Row reduction, then column reduction: prices `v`, a partial assignment and its free
    /// rows. Returns the least and the greatest cost off the diagonal (the auction's range).
    fn reduce(&mut self, n: usize, cost: &[i64]) -> (i64, i64) {
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
        let mut max = i64::MIN;
        for i in 0..n {
            let mut min = i64::MAX;
            for j in 0..n {
                if j != i {
                    min = min.min(cost[i * n + j]);
                    max = max.max(cost[i * n + j]);
                }
            }
            self.d[i] = min;
        }
        let lo = self.d.iter().copied().min().unwrap_or(0);
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
        (lo, max)
    }

    /// Counters of the last auction.
    #[must_use]
    pub fn stats(&self) -> LapStats {
        self.stats
    }

    /// Minimum-cost assignment of the `n x n` row-major `cost` with `i -> i` forbidden: the
    /// dense search below [`AUCTION_FROM`] rows, the auction from there on (the same optimum
    /// either way). Needs `n >= 3` (so every row has two allowed columns) and `|cost| <= 2^42`.
    ///
    /// # Panics
    /// When `n < 3` or `cost.len() != n * n`.
    pub fn assign_no_diagonal(&mut self, n: usize, cost: &[i64]) -> Assignment {
        if n < AUCTION_FROM {
            self.assign_no_diagonal_dense(n, cost)
        } else {
            self.assign_no_diagonal_auction(n, cost)
        }
    }

    /// The dense search: also the reference the auction is tested against. Needs `n >= 3`
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

    /// Forward auction with epsilon scaling (Bertsekas, 1988), exact on integer costs: they are
    /// scaled by `n + 1` and the last phase runs at `eps = 1`, where `eps`-complementary
    /// slackness leaves an assignment within `n < n + 1` of the optimum, so optimal. Each row
    /// caches its [`LOOKAHEAD`] cheapest columns and the value of the next one. Prices only
    /// rise, so every column outside the cache is still at least that dear: a bid whose best and
    /// second best columns are in the cache and no dearer than that bound is the bid a full scan
    /// would make, and only an exhausted cache rescans the row (before the last phase a cache
    /// is trusted a little beyond its bound: [`BID_SLACK`]). Needs `n >= 3` and
    /// `|cost| <= 2^42`.
    ///
    /// # Panics
    /// When `n < 3` or `cost.len() != n * n`.
    pub fn assign_no_diagonal_auction(&mut self, n: usize, cost: &[i64]) -> Assignment {
        assert!(
            n >= 3 && cost.len() == n * n,
            "lap: n >= 3 and an n x n matrix"
        );
        self.stats = LapStats::default();
        // The reduction's column prices start the auction.
        let (lo, hi) = self.reduce(n, cost);
        let s = n as i64 + 1;
        if hi.abs().max(lo.abs()).saturating_mul(4 * s) > VALUE_LIMIT {
            self.stats.fell_back = true;
            return self.assign_no_diagonal_dense(n, cost);
        }
        // Prices in the min-cost form: row i pays `c(i, j) * s + p_j` for column j. They take
        // the buffer of the reduction's row minima, which the auction does not need.
        let p = &mut self.d;
        for j in 0..n {
            p[j] = -self.v[j] * s;
        }
        let k = LOOKAHEAD.min(n - 1);
        self.cache.clear();
        self.cache.resize(n * k, 0);
        self.bound.clear();
        self.bound.resize(n, i64::MIN);
        let (col, owner, queue) = (&mut self.x, &mut self.y, &mut self.queue);
        col.fill(NONE);
        owner.fill(NONE);
        queue.clear();
        queue.extend(0..n as u32);
        let mut eps = ((hi - lo) / EPS_DIVISOR).max(1) * s;
        loop {
            self.stats.phases += 1;
            // Before the last phase a bid may use a cache whose bound its second best passes by
            // up to `slack`: the bidder ends within `eps + slack` of its best instead of `eps`,
            // which only loosens this phase's complementary slackness (the next phase starts by
            // freeing every row outside its own `eps`). The last phase is exact.
            let slack = if eps > 1 { eps * BID_SLACK } else { 0 };
            while let Some(i) = queue.pop_front() {
                let i = i as usize;
                let row = &cost[i * n..(i + 1) * n];
                let list = &mut self.cache[i * k..(i + 1) * k];
                let (j1, b1, b2) = loop {
                    let (mut b1, mut j1, mut b2) = (i64::MAX, 0u32, i64::MAX);
                    for &j in list.iter() {
                        let val = row[j as usize] * s + p[j as usize];
                        if val < b1 {
                            (b2, b1, j1) = (b1, val, j);
                        } else if val < b2 {
                            b2 = val;
                        }
                    }
                    if b2 <= self.bound[i].saturating_add(slack) {
                        break (j1 as usize, b1, b2);
                    }
                    self.stats.rescans += 1;
                    self.bound[i] = rescan(i, row, s, p, list);
                };
                self.stats.bids += 1;
                p[j1] += b2 - b1 + eps;
                if p[j1] > VALUE_LIMIT {
                    self.stats.fell_back = true;
                    return self.assign_no_diagonal_dense(n, cost);
                }
                let old = owner[j1];
                owner[j1] = i as u32;
                col[i] = j1 as u32;
                if old != NONE {
                    col[old as usize] = NONE;
                    queue.push_back(old);
                }
            }
            if eps == 1 {
                break;
            }
            eps = (eps / EPS_FACTOR).max(1);
            // A row keeps its column while that is within the new eps of its best.
            for i in 0..n {
                let row = &cost[i * n..(i + 1) * n];
                let list = &mut self.cache[i * k..(i + 1) * k];
                let best = loop {
                    let b = list
                        .iter()
                        .map(|&j| row[j as usize] * s + p[j as usize])
                        .min()
                        .unwrap_or(i64::MAX);
                    if b <= self.bound[i] {
                        break b;
                    }
                    self.stats.rescans += 1;
                    self.bound[i] = rescan(i, row, s, p, list);
                };
                let ji = col[i] as usize;
                if row[ji] * s + p[ji] > best + eps {
                    owner[ji] = NONE;
                    col[i] = NONE;
                    queue.push_back(i as u32);
                }
            }
        }
        // Exact duals from the prices (see `exact_duals`).
        if !self.exact_duals(n, cost) {
            self.stats.fell_back = true;
            return self.assign_no_diagonal_dense(n, cost);
        }
        self.duals(n, cost)
    }

    /// Exact column duals `v` for the auction's assignment (`y`: each column's row) from its
    /// prices (`d`); false when the limit is reached, which only a suboptimal assignment (a
    /// negative cycle) can do.
    ///
    /// With `j = x_i`, feasibility is `v_k <= v_j + c(i, k) - c(i, j)`: shortest paths over the
    /// columns, with no negative cycle because the assignment is optimal. The duals this ends with
    /// certify that optimum on their own (feasible everywhere, tight on the assignment), whatever
    /// the auction did; a negative cycle would never end, hence the limit. Starts from the prices
    /// and only ever lowers a `v_k`, scanning its row again when it changes; the prices are within
    /// `eps` of feasible, so few rows are scanned twice.
    fn exact_duals(&mut self, n: usize, cost: &[i64]) -> bool {
        let s = n as i64 + 1;
        let (p, owner, queue) = (&self.d, &self.y, &mut self.queue);
        let v = &mut self.v;
        for j in 0..n {
            v[j] = (-p[j]).div_euclid(s);
        }
        self.queued.clear();
        self.queued.resize(n, true);
        queue.extend(0..n as u32);
        while let Some(j) = queue.pop_front() {
            let j = j as usize;
            self.queued[j] = false;
            let i = owner[j] as usize;
            let row = &cost[i * n..(i + 1) * n];
            let base = v[j] - row[j];
            self.stats.dual_scans += 1;
            if self.stats.dual_scans > DUAL_SCAN_LIMIT * n as u64 {
                // Only a suboptimal assignment (a negative cycle) gets here: a bug, not an input.
                debug_assert!(false, "lap: the auction's assignment is not optimal");
                queue.clear();
                return false;
            }
            for kk in 0..n {
                if kk != i && base + row[kk] < v[kk] {
                    v[kk] = base + row[kk];
                    if !self.queued[kk] {
                        self.queued[kk] = true;
                        queue.push_back(kk as u32);
                    }
                }
            }
        }
        true
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
            let a = lap.assign_no_diagonal_auction(n, &cost);
            assert_eq!(check(n, &cost, &a), best, "auction, case {case}: {cost:?}");
            assert!(!lap.stats().fell_back);
        }
    }

    /// Random, tied and near-separable matrices (the shape of EOMM pools) of 9 to 300 rows, and
    /// costs near the accepted limit: the auction gives the dense search's optimum, with duals
    /// feasible on every entry.
    #[test]
    fn auction_matches_the_dense_search() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let (mut auction, mut dense) = (Lap::new(), Lap::new());
        for case in 0..80 {
            let n = rng.random_range(9..=300);
            let a: Vec<i64> = (0..n).map(|_| rng.random_range(0..1_000_000)).collect();
            let mut cost = vec![0; n * n];
            for i in 0..n {
                for j in 0..n {
                    cost[i * n + j] = match case % 4 {
                        0 => rng.random_range(0..1_000_000),
                        1 => rng.random_range(0..4),
                        2 => a[i] + a[j] + rng.random_range(0..1000),
                        _ => rng.random_range(-(1i64 << 40)..=1 << 40),
                    };
                }
            }
            let s = auction.assign_no_diagonal_auction(n, &cost);
            let d = dense.assign_no_diagonal_dense(n, &cost);
            assert_eq!(
                check(n, &cost, &s),
                check(n, &cost, &d),
                "case {case}, n {n}"
            );
            let st = auction.stats();
            assert!(!st.fell_back && st.bids >= n as u64 && st.dual_scans >= n as u64);
        }
    }

    #[test]
    fn costs_beyond_the_auction_range_fall_back_to_the_dense_search() {
        let n = 5;
        let cost: Vec<i64> = (0..n * n).map(|k| (k as i64 % 7) << 58).collect();
        let mut lap = Lap::new();
        let a = lap.assign_no_diagonal_auction(n, &cost);
        assert!(lap.stats().fell_back);
        assert_eq!(check(n, &cost, &a), brute(n, &cost));
    }

    #[test]
    fn large_near_separable_matrix() {
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let n = AUCTION_FROM + 60;
        let a: Vec<i64> = (0..n).map(|_| rng.random_range(0..1_000_000)).collect();
        let mut cost = vec![0; n * n];
        for i in 0..n {
            for j in 0..n {
                cost[i * n + j] = a[i] + a[j] + rng.random_range(0..1000);
            }
        }
        let mut lap = Lap::new();
        let s = lap.assign_no_diagonal(n, &cost);
        assert!(lap.stats().bids > 0, "the auction ran");
        let d = Lap::new().assign_no_diagonal_dense(n, &cost);
        assert_eq!(check(n, &cost, &s), check(n, &cost, &d));
    }
}
