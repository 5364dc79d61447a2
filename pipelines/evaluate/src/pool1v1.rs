//! The 1v1 protocol: pools drawn from history, every pairing policy on the same pools and
//! draws, per-round figures and the tests between policies.

use std::time::Instant;

use mm_matcher::Outcome;
use mm_matcher::blossom::DenseBlossom;
use mm_matcher::from_artifact::ArtifactPool;
use mm_matcher::pairing::{PairPolicy, pair_f64};
use mm_matcher::queue::Member;
use mm_matcher::scoring::{ChurnModel, WinModel, eomm_matrix};
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::config::EvalConfig;
use crate::error::EvalError;
use crate::history::EvalHistory;
use crate::measures::{Scored, balance, decile, decile_stats, mix};
use crate::results::{EommVsSkill, OracleGain, PAPER_TABLE2, PairTest, PolicyStats, SizeResult};
use crate::stats::{Moments, paired, welch};
use crate::truth::{TruthPool, TruthSearches};

/// The oracle's name among the policies: EOMM paired on the simulator's truth.
pub(crate) const ORACLE: &str = "oracle";
/// EOMM paired on the truth's win probabilities and the fitted churn model: with
/// [`ORACLE_CHURN`], splits the gap between our EOMM and the oracle into its two models.
pub(crate) const ORACLE_WIN: &str = "eomm-true-win";
/// EOMM paired on the fitted win model and the truth's churn probabilities.
pub(crate) const ORACLE_CHURN: &str = "eomm-true-churn";

/// Per-round accumulators of one policy under one artifact.
#[derive(Debug, Clone, Default)]
struct Acc {
    retained: Moments,
    expected: Moments,
    /// Expected retained players under the simulator's truth (simulated lakes only).
    expected_truth: Moments,
    matched: Moments,
    blowouts: f64,
    balance: f64,
    disparity: f64,
    pairs: f64,
    dec_players: [f64; 10],
    dec_retained: [f64; 10],
    dec_balance: [f64; 10],
    solve_ms: Moments,
}

/// One round's result for one policy.
#[derive(Debug, Clone, Default)]
struct RoundOut {
    retained: f64,
    expected: f64,
    expected_truth: Option<f64>,
    matched: f64,
    blowouts: f64,
    balance: f64,
    disparity: f64,
    pairs: f64,
    dec_players: [f64; 10],
    dec_retained: [f64; 10],
    dec_balance: [f64; 10],
    solve_ms: f64,
}

impl Acc {
    fn add(&mut self, r: &RoundOut) {
        self.retained.push(r.retained);
        self.expected.push(r.expected);
        if let Some(x) = r.expected_truth {
            self.expected_truth.push(x);
        }
        self.matched.push(r.matched);
        self.blowouts += r.blowouts;
        self.balance += r.balance;
        self.disparity += r.disparity;
        self.pairs += r.pairs;
        for d in 0..10 {
            self.dec_players[d] += r.dec_players[d];
            self.dec_retained[d] += r.dec_retained[d];
            self.dec_balance[d] += r.dec_balance[d];
        }
        self.solve_ms.push(r.solve_ms);
    }

    fn stats(&self, policy: &str, artifact: &str) -> PolicyStats {
        let by_decile = decile_stats(&self.dec_players, &self.dec_retained, &self.dec_balance);
        PolicyStats {
            policy: policy.to_string(),
            artifact: artifact.to_string(),
            rounds: self.retained.n,
            matched_players: self.matched.mean,
            retained_mean: self.retained.mean,
            retained_sd: self.retained.sd(),
            retained_ci95: self.retained.ci(0.95),
            expected_retained_mean: self.expected.mean,
            expected_retained_ci95: self.expected.ci(0.95),
            expected_retained_truth_mean: (self.expected_truth.n > 0)
                .then_some(self.expected_truth.mean),
            expected_retained_truth_ci95: (self.expected_truth.n > 0)
                .then(|| self.expected_truth.ci(0.95)),
            blowout_rate: self.blowouts / self.pairs,
            mean_abs_pwin_minus_half: self.balance / self.pairs,
            mean_skill_disparity: self.disparity / self.pairs,
            by_decile,
            solve_ms_mean: self.solve_ms.mean,
        }
    }
}

/// Runs one policy on one pool under one artifact with the round's draws: `pool` scores the
/// pool's `members` (skills, churn); the policy pairs on `w_pair` (the artifact's EOMM weight
/// matrix `w`, or the truth's for the oracle); the pairs are scored under the artifact (`w`)
/// and, on a simulated lake, under the truth (`w_truth`).
#[allow(clippy::too_many_arguments)]
fn run_policy(
    policy: PairPolicy,
    pool: &ArtifactPool,
    members: &[&Member],
    w_pair: &[f64],
    w: &[f64],
    w_truth: Option<&[f64]>,
    u_out: &[f64],
    u_churn: &[f64],
    blowout_p: f64,
    solver: &mut DenseBlossom,
) -> Result<RoundOut, EvalError> {
    let n = members.len();
    let t = Instant::now();
    let pairing = pair_f64(policy, n, w_pair, Some(&pool.skills), solver)?;
    let solve_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut r = RoundOut {
        solve_ms,
        expected_truth: w_truth.map(|_| 0.0),
        ..RoundOut::default()
    };
    for &(i, j) in &pairing.pairs {
        if let (Some(e), Some(wt)) = (r.expected_truth.as_mut(), w_truth) {
            *e += 2.0 - wt[i * n + j];
        }
        let p = pool.outcome_probs(i, j);
        let u = u_out[i.min(j)];
        let oi = if u < p.win {
            Outcome::Win
        } else if u < p.win + p.draw {
            Outcome::Draw
        } else {
            Outcome::Loss
        };
        let (bal, blow) = balance(&p, blowout_p);
        r.pairs += 1.0;
        r.balance += bal;
        r.blowouts += f64::from(u8::from(blow));
        r.disparity += (members[i].percentile - members[j].percentile).abs();
        r.expected += 2.0 - w[i * n + j];
        for (k, o) in [(i, oi), (j, oi.mirrored())] {
            let kept = u_churn[k] >= pool.churn(k, o);
            r.matched += 1.0;
            r.retained += f64::from(u8::from(kept));
            let d = decile(members[k].percentile);
            r.dec_players[d] += 1.0;
            r.dec_retained[d] += f64::from(u8::from(kept));
            r.dec_balance[d] += bal;
        }
    }
    Ok(r)
}

/// Pools: searches grouped by window, one search per player per window.
pub(crate) struct Pools {
    windows: Vec<Vec<u32>>,
    all: Vec<u32>,
}

pub(crate) fn pools(h: &EvalHistory, window_ms: Option<i64>) -> Pools {
    let mut seen = hashbrown::HashSet::new();
    let all: Vec<u32> = (0..h.searchers.len() as u32)
        .filter(|&s| seen.insert(h.searchers[s as usize].player))
        .collect();
    let mut windows: Vec<Vec<u32>> = Vec::new();
    if let Some(w) = window_ms {
        let mut cur: Option<i64> = None;
        let mut set = hashbrown::HashSet::new();
        for (s, x) in h.searchers.iter().enumerate() {
            let b = (x.start_ms - h.from_ms).div_euclid(w);
            if cur != Some(b) {
                cur = Some(b);
                set.clear();
                windows.push(Vec::new());
            }
            if set.insert(x.player)
                && let Some(last) = windows.last_mut()
            {
                last.push(s as u32);
            }
        }
    }
    Pools { windows, all }
}

fn prefix(name: &str) -> &str {
    name.split_once('/').map_or("", |p| p.0)
}

/// Every policy under every artifact on `cfg.rounds` pools of `p` players.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_size(
    cfg: &EvalConfig,
    arts: &[Scored],
    names: &[String],
    policies: &[PairPolicy],
    pools: &Pools,
    p: usize,
    truth: Option<&TruthSearches>,
    progress: &mut dyn FnMut(u64),
) -> Result<SizeResult, EvalError> {
    let t0 = Instant::now();
    let eligible: Vec<&Vec<u32>> = pools.windows.iter().filter(|w| w.len() >= p).collect();
    let source = if eligible.is_empty() {
        if pools.all.len() < p {
            return Err(EvalError::PoolTooLarge {
                size: p,
                players: pools.all.len(),
            });
        }
        "collection"
    } else {
        "window"
    };
    // Each artifact's policies, then (on a simulated lake) the oracle: EOMM on the truth.
    let mut names: Vec<String> = names.to_vec();
    if truth.is_some() {
        names.extend([ORACLE, ORACLE_WIN, ORACLE_CHURN].map(str::to_string));
    }
    let per = names.len();
    let k = arts.len() * per;
    let chunk = 64usize;
    let mut accs = vec![Acc::default(); k];
    // Per ordered pair (a, b): per-round differences of retained, expected retained, and
    // expected retained under the truth.
    let mut diffs = vec![[Moments::default(), Moments::default(), Moments::default()]; k * k];
    let ctx = Rounds {
        cfg,
        arts,
        policies,
        pools,
        eligible: &eligible,
        p,
        truth,
        k,
    };
    let mut r0 = 0usize;
    while r0 < cfg.rounds {
        let r1 = (r0 + chunk * rayon::current_num_threads()).min(cfg.rounds);
        let outs: Vec<Result<Vec<RoundOut>, EvalError>> = (r0..r1)
            .into_par_iter()
            .map_init(DenseBlossom::new, |solver, round| ctx.round(round, solver))
            .collect();
        for o in outs {
            let o = o?;
            for (a, r) in accs.iter_mut().zip(&o) {
                a.add(r);
            }
            for (a, ra) in o.iter().enumerate() {
                for (b, rb) in o.iter().enumerate() {
                    let d = &mut diffs[a * k + b];
                    d[0].push(ra.retained - rb.retained);
                    d[1].push(ra.expected - rb.expected);
                    if let (Some(x), Some(y)) = (ra.expected_truth, rb.expected_truth) {
                        d[2].push(x - y);
                    }
                }
            }
        }
        progress((r1 - r0) as u64);
        r0 = r1;
    }
    let label = |ai: usize, pi: usize| {
        if arts.len() > 1 {
            format!("{}/{}", arts[ai].label, names[pi])
        } else {
            names[pi].clone()
        }
    };
    let mut stats = Vec::new();
    for (ai, sc) in arts.iter().enumerate() {
        for pi in 0..per {
            stats.push(accs[ai * per + pi].stats(&label(ai, pi), &sc.label));
        }
    }
    let tests = pair_tests(&accs, &diffs, arts.len(), per, &label);
    Ok(SizeResult {
        pool_size: p,
        pool_source: source.to_string(),
        windows_eligible: eligible.len(),
        policies: stats,
        tests,
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// What every round of one pool size shares.
struct Rounds<'a> {
    cfg: &'a EvalConfig,
    arts: &'a [Scored],
    policies: &'a [PairPolicy],
    pools: &'a Pools,
    /// The time windows with at least `p` searchers (none: the whole collection).
    eligible: &'a [&'a Vec<u32>],
    p: usize,
    truth: Option<&'a TruthSearches>,
    /// Policies in all, over the artifacts (and the oracles).
    k: usize,
}

impl Rounds<'_> {
    /// Round `round`: a pool drawn from a window (or the collection), its draws, and every
    /// policy of every artifact on it, then the oracle and its halves on a simulated lake.
    fn round(&self, round: usize, solver: &mut DenseBlossom) -> Result<Vec<RoundOut>, EvalError> {
        let Rounds {
            cfg,
            arts,
            policies,
            pools,
            eligible,
            p,
            truth,
            k,
        } = *self;
        let mut rng = ChaCha8Rng::seed_from_u64(mix(cfg.seed, p as u64, round as u64));
        let from: &[u32] = if eligible.is_empty() {
            &pools.all
        } else {
            eligible[rng.random_range(0..eligible.len())]
        };
        let idx: Vec<usize> = sample(&mut rng, from.len(), p).into_vec();
        let u_out: Vec<f64> = (0..p).map(|_| rng.random::<f64>()).collect();
        let u_churn: Vec<f64> = (0..p).map(|_| rng.random::<f64>()).collect();
        let policy_seed = rng.random::<u64>();
        let mut out = Vec::with_capacity(k);
        let truth_pool = truth.map(|t| TruthPool {
            truth: t,
            searchers: idx.iter().map(|&i| from[i] as usize).collect(),
        });
        let w_truth = truth_pool.as_ref().map(|tp| eomm_matrix(p, tp, tp));
        for sc in arts {
            let members: Vec<&Member> =
                idx.iter().map(|&i| &sc.members[from[i] as usize]).collect();
            let pool = ArtifactPool::from_members(sc.win, members.iter().copied());
            let w = eomm_matrix(p, &pool, &pool);
            for pol in policies {
                let pol = match pol {
                    PairPolicy::Random { .. } => PairPolicy::Random { seed: policy_seed },
                    x => *x,
                };
                out.push(run_policy(
                    pol,
                    &pool,
                    &members,
                    &w,
                    &w,
                    w_truth.as_deref(),
                    &u_out,
                    &u_churn,
                    cfg.blowout_p,
                    solver,
                )?);
            }
            if let (Some(wt), Some(tp)) = (w_truth.as_deref(), truth_pool.as_ref()) {
                // The oracle, then each half of it: true win with our churn, our win
                // with true churn.
                let true_win = eomm_matrix(p, tp, &pool);
                let true_churn = eomm_matrix(p, &pool, tp);
                for w_pair in [wt, &true_win, &true_churn] {
                    out.push(run_policy(
                        PairPolicy::Eomm,
                        &pool,
                        &members,
                        w_pair,
                        &w,
                        Some(wt),
                        &u_out,
                        &u_churn,
                        cfg.blowout_p,
                        solver,
                    )?);
                }
            }
        }
        Ok(out)
    }
}

/// Welch and paired tests between every two policies (of the same artifact when there are
/// several).
fn pair_tests(
    accs: &[Acc],
    diffs: &[[Moments; 3]],
    arts: usize,
    per: usize,
    label: &dyn Fn(usize, usize) -> String,
) -> Vec<PairTest> {
    let k = accs.len();
    let mut tests = Vec::new();
    for a in 0..k {
        for b in 0..k {
            if a == b || (arts > 1 && a / per != b / per) {
                continue;
            }
            let (ai, pa) = (a / per, a % per);
            let (bi, pb) = (b / per, b % per);
            let w = welch(&accs[a].retained, &accs[b].retained);
            let d = &diffs[a * k + b];
            tests.push(PairTest {
                a: label(ai, pa),
                b: label(bi, pb),
                welch: w,
                relative: w.diff / accs[b].retained.mean,
                paired: Some(paired(&d[0])),
                paired_expected: Some(paired(&d[1])),
                paired_truth: (d[2].n > 0).then(|| paired(&d[2])),
            });
        }
    }
    tests
}

/// EOMM against SkillMM at each pool size, per artifact, beside the paper's Table 2 and, on a
/// simulated lake, the oracle.
pub(crate) fn eomm_vs_skill(sizes: &[SizeResult]) -> Vec<EommVsSkill> {
    let mut out = Vec::new();
    for s in sizes {
        for t in &s.tests {
            if t.a.ends_with("eomm") && t.b.ends_with("skill") && prefix(&t.a) == prefix(&t.b) {
                let pre = prefix(&t.a);
                let name = |n: &str| {
                    if pre.is_empty() {
                        n.to_string()
                    } else {
                        format!("{pre}/{n}")
                    }
                };
                let truth_of = |n: &str| {
                    s.policies
                        .iter()
                        .find(|p| p.policy == name(n))
                        .and_then(|p| p.expected_retained_truth_mean)
                };
                let p_truth = |a: &str, b: &str| {
                    s.tests
                        .iter()
                        .find(|x| x.a == name(a) && x.b == name(b))
                        .and_then(|x| x.paired_truth)
                        .map_or(f64::NAN, |x| x.p)
                };
                let truth = match (truth_of("skill"), truth_of("eomm"), truth_of(ORACLE)) {
                    (Some(skill), Some(eomm), Some(oracle)) => Some(OracleGain {
                        skill,
                        eomm,
                        oracle,
                        oracle_gain: oracle / skill - 1.0,
                        realised_gain: eomm / skill - 1.0,
                        share: (eomm - skill) / (oracle - skill),
                        true_win_share: truth_of(ORACLE_WIN)
                            .map(|x| (x - skill) / (oracle - skill)),
                        true_churn_share: truth_of(ORACLE_CHURN)
                            .map(|x| (x - skill) / (oracle - skill)),
                        realised_p: p_truth("eomm", "skill"),
                        oracle_p: p_truth(ORACLE, "skill"),
                    }),
                    _ => None,
                };
                out.push(EommVsSkill {
                    truth,
                    pool_size: s.pool_size,
                    artifact: prefix(&t.a).to_string(),
                    relative_improvement: t.relative,
                    p_value: t.welch.p,
                    paired_p_value: t.paired.map_or(f64::NAN, |x| x.p),
                    paired_expected_p_value: t.paired_expected.map_or(f64::NAN, |x| x.p),
                    paper_relative_improvement: PAPER_TABLE2
                        .iter()
                        .find(|r| r.0 == s.pool_size)
                        .map(|r| r.1[3] / r.1[1] - 1.0),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{EvalHistory, Searcher};
    use crate::stats::{Paired, Welch};

    fn history(searches: &[(u32, i64)]) -> EvalHistory {
        EvalHistory {
            lake_version: None,
            ids: (0..10).map(|i| format!("p{i}")).collect(),
            searchers: searches
                .iter()
                .map(|&(player, start_ms)| Searcher {
                    player,
                    start_ms,
                    match_ix: 0,
                    in_party: false,
                    outcome: Outcome::Win,
                    churned: None,
                })
                .collect(),
            party: vec![0; searches.len()],
            matches: Vec::new(),
            from_ms: 0,
            to_ms: 10_000,
            data_end_ms: 10_000,
            horizon_ms: 1,
            lake_rows: 0,
            rows: Vec::new(),
        }
    }

    #[test]
    fn pools_hold_one_search_per_player_per_window() {
        // Player 1 searches twice in the first window; player 2 in both windows.
        let h = history(&[(1, 0), (2, 10), (1, 20), (3, 1_500), (2, 1_600), (2, 1_700)]);
        let p = pools(&h, Some(1_000));
        assert_eq!(p.windows, vec![vec![0, 1], vec![3, 4]]);
        // The collection: every player's first search.
        assert_eq!(p.all, vec![0, 1, 3]);
        assert!(pools(&h, None).windows.is_empty());
    }

    #[test]
    fn eomm_vs_skill_pairs_the_tests_of_one_artifact_with_the_papers_figure() {
        let t = |a: &str, b: &str| PairTest {
            a: a.into(),
            b: b.into(),
            welch: Welch {
                diff: 1.0,
                t: 2.0,
                df: 10.0,
                p: 0.07,
            },
            relative: 0.01,
            paired: Some(Paired {
                diff: 1.0,
                sd: 1.0,
                t: 3.0,
                df: 9.0,
                p: 0.01,
            }),
            paired_expected: None,
            paired_truth: None,
        };
        let sizes = vec![SizeResult {
            pool_size: 300,
            pool_source: "window".into(),
            windows_eligible: 1,
            policies: Vec::new(),
            tests: vec![
                t("candidate/eomm", "candidate/skill"),
                t("candidate/eomm", "baseline/skill"),
                t("candidate/skill", "candidate/eomm"),
            ],
            seconds: 0.0,
        }];
        let e = eomm_vs_skill(&sizes);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].artifact, "candidate");
        assert!((e[0].p_value - 0.07).abs() < 1e-12);
        assert!((e[0].paired_p_value - 0.01).abs() < 1e-12);
        assert!(e[0].paired_expected_p_value.is_nan());
        // EOMM Table 2 at P = 300: 157.50 / 156.05 - 1.
        let paper = e[0]
            .paper_relative_improvement
            .expect("the paper has P = 300");
        assert!((paper - (157.50 / 156.05 - 1.0)).abs() < 1e-12);
    }
}
