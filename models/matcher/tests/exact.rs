//! Exactness of the dense blossom solver against independent references:
//! - brute force (dynamic programming over subsets) for n <= 12, thousands of random pools;
//! - two independent exact matchers for larger n: `mwmatching` (a port of Van Rantwijk's
//!   mwmatching.py, the algorithm networkx uses) and `integer-blossom`;
//! - networkx `max_weight_matching` on every pool in ../shared/peers/results/pools (and the
//!   HiGHS-certified optimum for P = 2000);
//! - the LP dual certificate of every solve, checked by `Certificate::verify`.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use mm_matcher::blossom::{DenseBlossom, MatchingError, min_cost_perfect_matching};
use mm_matcher::pairing::{PairPolicy, costs_from_le_i32, pair_f64, pair_i64};
use mm_matcher::scoring::{EloDraw, TabularChurn, eomm_matrix};
use proptest::prelude::*;

/// Minimum-cost perfect matching by DP over subsets: O(2^n n).
fn brute_force(n: usize, c: &[i64]) -> i64 {
    let full = (1usize << n) - 1;
    let mut best = vec![i64::MAX; 1 << n];
    best[0] = 0;
    for m in 0..full {
        if best[m] == i64::MAX {
            continue;
        }
        // Pair the lowest unmatched vertex with every other unmatched one.
        let i = (!m).trailing_zeros() as usize;
        for j in i + 1..n {
            if m >> j & 1 == 0 {
                let to = m | 1 << i | 1 << j;
                best[to] = best[to].min(best[m] + c[i * n + j]);
            }
        }
    }
    best[full]
}

/// A symmetric matrix from the upper triangle.
fn symmetric(n: usize, upper: &[i64]) -> Vec<i64> {
    let mut c = vec![0i64; n * n];
    let mut k = 0;
    for i in 0..n {
        for j in i + 1..n {
            c[i * n + j] = upper[k];
            c[j * n + i] = upper[k];
            k += 1;
        }
    }
    c
}

/// Solves and checks the result is a perfect matching whose certificate proves it optimal.
fn solve_certified(n: usize, c: &[i64]) -> i64 {
    let mut s = DenseBlossom::new();
    let m = s.solve(n, c).unwrap();
    let dual = s
        .certificate()
        .verify(n, c, &m.mate)
        .unwrap_or_else(|e| panic!("certificate rejected: {e}"));
    assert_eq!(dual, m.cost);
    m.cost
}

/// The optimum by `mwmatching` (maximum weight, maximum cardinality, on offset weights
/// `C - c` in i32): the first independent matcher.
fn mwmatching_optimum(n: usize, c: &[i64]) -> i64 {
    let big = c.iter().copied().max().unwrap_or(0) + 1;
    let mut edges = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            edges.push((i, j, (big - c[i * n + j]) as i32));
        }
    }
    let mates = mwmatching::Matching::new(edges).max_cardinality().solve();
    (0..n)
        .filter(|&i| mates[i] > i)
        .map(|i| c[i * n + mates[i]])
        .sum()
}

/// Random pools of several kinds: wide ranges, narrow ranges (many ties, many blossoms),
/// negative costs, Euclidean-like costs, and near-separable costs `a_i + a_j + small` (the shape
/// of EOMM weights from an artifact, where the jump start matters most).
fn pool(max_n: usize) -> impl Strategy<Value = (usize, Vec<i64>)> {
    pool_between(2, max_n)
}

/// [`pool`] with an even size between `min_n` and `max_n`.
fn pool_between(min_n: usize, max_n: usize) -> impl Strategy<Value = (usize, Vec<i64>)> {
    (min_n.div_ceil(2)..=max_n / 2, 0..5u8).prop_flat_map(|(half, kind)| {
        let n = 2 * half;
        let e = n * (n - 1) / 2;
        let values = match kind {
            0 => prop::collection::vec(0i64..1_000_000, e).boxed(),
            1 => prop::collection::vec(0i64..4, e).boxed(),
            2 => prop::collection::vec(-500i64..500, e).boxed(),
            3 => (
                prop::collection::vec(0i64..1_000_000, n),
                prop::collection::vec(0i64..300, e),
            )
                .prop_map(move |(a, small)| {
                    let mut v = Vec::new();
                    for i in 0..a.len() {
                        for j in i + 1..a.len() {
                            v.push(a[i] + a[j] + small[v.len()]);
                        }
                    }
                    v
                })
                .boxed(),
            _ => prop::collection::vec(0i64..1000, n)
                .prop_map(move |x| {
                    let mut v = Vec::new();
                    for i in 0..x.len() {
                        for j in i + 1..x.len() {
                            v.push((x[i] - x[j]).abs() + (x[i] * x[j]) % 7);
                        }
                    }
                    v
                })
                .boxed(),
        };
        values.prop_map(move |v| (n, symmetric(n, &v)))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn equals_brute_force_up_to_12((n, c) in pool(12)) {
        prop_assert_eq!(solve_certified(n, &c), brute_force(n, &c));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    /// Pools large enough for the auction jump start (`lap::AUCTION_FROM`), against the first
    /// independent matcher.
    #[test]
    fn equals_an_independent_matcher_from_100_to_160((n, c) in pool_between(100, 160)) {
        prop_assume!(n >= mm_matcher::lap::AUCTION_FROM);
        let ours = solve_certified(n, &c);
        let theirs = mwmatching_optimum(n, &c);
        prop_assert_eq!(ours, theirs);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn equals_two_independent_matchers_up_to_90((n, c) in pool(90)) {
        let ours = solve_certified(n, &c);
        let theirs = mwmatching_optimum(n, &c);
        prop_assert_eq!(ours, theirs);
        if c.iter().all(|&x| x >= 0) {
            let mate = integer_blossom::min_weight_perfect_matching(&c, n);
            let other: i64 = (0..n).filter(|&i| mate[i] > i).map(|i| c[i * n + mate[i]]).sum();
            prop_assert_eq!(ours, other);
        }
    }

    /// Odd pools: EOMM's waiting player is the best one to leave out (brute force over all).
    #[test]
    fn odd_pool_leaves_out_the_best_player((n, c) in pool(12), drop in 0usize..12) {
        // Remove one vertex from an even pool to get an odd one.
        let drop = drop % n;
        let keep: Vec<usize> = (0..n).filter(|&i| i != drop).collect();
        let m = keep.len();
        let sub: Vec<i64> = keep.iter().flat_map(|&i| keep.iter().map(move |&j| (i, j)))
            .map(|(i, j)| c[i * n + j]).collect();
        let p = pair_i64(PairPolicy::Eomm, m, &sub, None, &mut DenseBlossom::new()).unwrap();
        let best = (0..m).map(|out| {
            let rest: Vec<usize> = (0..m).filter(|&i| i != out).collect();
            let r = rest.len();
            let cc: Vec<i64> = rest.iter().flat_map(|&i| rest.iter().map(move |&j| (i, j)))
                .map(|(i, j)| sub[i * m + j]).collect();
            if r == 0 { 0 } else { brute_force(r, &cc) }
        }).min().unwrap();
        prop_assert_eq!(p.objective, best);
        prop_assert_eq!(p.pairs.len(), m / 2);
        let mut seen = vec![false; m];
        for &(i, j) in &p.pairs {
            prop_assert!(!seen[i] && !seen[j]);
            seen[i] = true;
            seen[j] = true;
        }
        prop_assert!(p.waiting.is_some_and(|w| !seen[w]));
    }

    /// WorstMM is EOMM of the negated weights, and every policy pairs each player once.
    #[test]
    fn every_policy_pairs_each_player_once((n, c) in pool(40), seed in any::<u64>()) {
        let skills: Vec<f64> = (0..n).map(|i| ((i * 7919) % 101) as f64).collect();
        let mut s = DenseBlossom::new();
        let eomm = pair_i64(PairPolicy::Eomm, n, &c, None, &mut s).unwrap();
        for policy in [PairPolicy::Worst, PairPolicy::Skill, PairPolicy::Random { seed }, PairPolicy::Greedy] {
            let p = pair_i64(policy, n, &c, Some(&skills), &mut s).unwrap();
            prop_assert!(p.objective >= eomm.objective, "{} below the optimum", policy.name());
            let mut seen = vec![0; n];
            for &(i, j) in &p.pairs {
                seen[i] += 1;
                seen[j] += 1;
            }
            prop_assert!(seen.iter().all(|&k| k == 1));
        }
        let neg: Vec<i64> = c.iter().map(|&x| -x).collect();
        let worst = pair_i64(PairPolicy::Worst, n, &c, None, &mut s).unwrap();
        prop_assert_eq!(-worst.objective, solve_certified(n, &neg));
    }
}

#[test]
fn refuses_bad_problems_without_panicking() {
    assert_eq!(
        min_cost_perfect_matching(3, &[0; 9]),
        Err(MatchingError::OddVertexCount(3))
    );
    assert!(matches!(
        min_cost_perfect_matching(2, &[0; 3]),
        Err(MatchingError::Shape { .. })
    ));
    assert!(matches!(
        min_cost_perfect_matching(2, &[0, 1, 2, 0]),
        Err(MatchingError::Asymmetric { .. })
    ));
    assert!(matches!(
        min_cost_perfect_matching(2, &[0, i64::MAX, i64::MAX, 0]),
        Err(MatchingError::CostOutOfRange { .. })
    ));
    assert_eq!(min_cost_perfect_matching(0, &[]).unwrap().cost, 0);
    let inf = [0.0, f64::INFINITY, f64::INFINITY, 0.0];
    assert!(pair_f64(PairPolicy::Eomm, 2, &inf, None, &mut DenseBlossom::new()).is_err());
}

/// The peers' results beside this checkout; absent, the test is skipped with a message, or
/// fails when `MM_REQUIRE_SHARED=1` (as `.ci/run` sets it).
fn peers() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/peers/results");
    if p.is_dir() {
        return Some(p);
    }
    assert!(
        std::env::var("MM_REQUIRE_SHARED").as_deref() != Ok("1"),
        "{} not found, and MM_REQUIRE_SHARED=1",
        p.display()
    );
    eprintln!("skipped: {} not found", p.display());
    None
}

fn read_i32(path: &std::path::Path) -> Vec<i64> {
    costs_from_le_i32(&std::fs::read(path).unwrap()).unwrap().1
}

/// Matches networkx max_weight_matching (and the HiGHS certificate at P = 2000) on every
/// shipped pool, reproduces the peers' greedy and SkillMM objectives exactly, and recomputing
/// the weights from the pool CSV with our scoring gives an optimum at least as good as
/// networkx's pairs on the float weights, within the peers' 1e-6 rounding.
#[test]
fn peer_pools_match_networkx_greedy_and_skillmm() {
    let Some(dir) = peers() else { return };
    let mut checked = 0;
    for p in [100usize, 200, 300, 400, 500, 1000, 2000] {
        let json = dir.join(format!("mwpm_P{p}.json"));
        let Ok(text) = std::fs::read_to_string(&json) else {
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let obj = &v["objectives"];
        let w = read_i32(&dir.join(format!("pools/pool_P{p}_s20240601_wq.i32")));
        assert_eq!(w.len(), p * p);
        assert_eq!(
            solve_certified(p, &w),
            obj["optimal"].as_i64().unwrap(),
            "P={p}"
        );

        let players = v["players"].as_array().unwrap();
        let skills: Vec<f64> = players
            .iter()
            .map(|x| x["skill"].as_f64().unwrap())
            .collect();
        let mut s = DenseBlossom::new();
        let greedy = pair_i64(PairPolicy::Greedy, p, &w, None, &mut s).unwrap();
        assert_eq!(
            greedy.objective,
            obj["greedy"].as_i64().unwrap(),
            "greedy P={p}"
        );
        let skill = pair_i64(PairPolicy::Skill, p, &w, Some(&skills), &mut s).unwrap();
        assert_eq!(
            skill.objective,
            obj["skillmm"].as_i64().unwrap(),
            "skillmm P={p}"
        );

        // Our scoring of the same pool (float weights), solved through the quantised path.
        let win = EloDraw {
            skills: skills.clone(),
            p_draw: 0.2,
            scale: 400.0,
        };
        let churn = TabularChurn {
            by_outcome: players
                .iter()
                .map(|x| {
                    let f = |k: &str| x[k].as_f64().unwrap();
                    [f("c_win"), f("c_draw"), f("c_lose")]
                })
                .collect(),
        };
        let wf = eomm_matrix(p, &win, &churn);
        let rounded = wf
            .iter()
            .zip(&w)
            .filter(|&(x, &q)| (x * 1e6).round() as i64 != q)
            .count();
        assert!(
            rounded <= p,
            "P={p}: {rounded} weights differ from the peer's after rounding"
        );
        let eomm = pair_f64(PairPolicy::Eomm, p, &wf, None, &mut s).unwrap();
        // networkx solved the weights rounded to 1e-6; `optimal_float` is its pairs summed over
        // the float weights. Our float optimum is never worse than those pairs, and better by
        // at most the rounding: p/2 pairs, each off by at most 2 x 0.5e-6.
        let reference = obj["optimal_float"].as_f64().unwrap();
        assert!(
            eomm.objective <= reference * (1.0 + 1e-12),
            "P={p}: {} vs {reference}",
            eomm.objective
        );
        assert!(eomm.objective >= reference - p as f64 * 0.5e-6, "P={p}");
        checked += 1;
    }
    assert_eq!(checked, 7, "every shipped pool is checked");
}
