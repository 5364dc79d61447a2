//! `evaluate` on small simulated histories, fitted on their first days and evaluated on the
//! rest. 1v1: the exact policies bound every other policy, the run is deterministic for a seed,
//! and a window the models were fitted on is refused. 6v6: the team-queue replay accounts for
//! every search, forms full lobbies with parties intact, and is deterministic.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::path::{Path, PathBuf};

use mm_eval::{EvalConfig, EvalError, evaluate};
use mm_sim::{SimConfig, simulate};

const DAY: i64 = 86_400_000;

/// Simulates history of one mode (`duel-1v1` or `tdm-6v6`), fits on all but the last day and
/// exports; returns the artifact's model directory and the cutoff.
fn fitted(dir: &Path, mode: &str) -> (PathBuf, i64) {
    let lake = dir.join("lake");
    let duel = mode == "duel-1v1";
    simulate(&SimConfig {
        lake: lake.clone(),
        seed: 11,
        players: if duel { 3_000 } else { 2_000 },
        days: if duel { 6 } else { 4 },
        duel_share: if duel { 1.0 } else { 0.0 },
        ..SimConfig::default()
    })
    .unwrap();
    let days = mm_lake::Lake::open(&lake).unwrap().days().unwrap();
    let cutoff = (i64::from(*days.last().unwrap()) - 1) * DAY;
    let mut s = mm_fit::SkillConfig::new(lake.clone(), dir.join("skill"));
    s.mode = Some(mode.into());
    if duel {
        s.metric = mm_fit::Metric::Outcome;
    }
    s.until_ms = Some(cutoff);
    s.baselines.clear();
    mm_fit::fit_skill(&s).unwrap();
    let mut c = mm_fit::churn::ChurnConfig::new(&lake, dir.join("churn"));
    c.mode = Some(mode.into());
    c.until_ms = Some(cutoff);
    c.skill = Some(dir.join("skill"));
    c.fit.c_grid = vec![0.1];
    c.fit.folds = 2;
    mm_fit::churn::fit_churn(&c).unwrap();
    mm_fit::export::export(&mm_fit::export::ExportConfig {
        skill: dir.join("skill"),
        churn: dir.join("churn"),
        models: dir.join("models"),
        name: None,
        version: None,
        promote: true,
    })
    .unwrap();
    (dir.join("models").join(mode), cutoff)
}

#[test]
fn policies_on_the_same_pools() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cutoff) = fitted(dir.path(), "duel-1v1");
    let mut cfg = EvalConfig::new(dir.path().join("lake"), &model, dir.path().join("eval"));
    cfg.from_ms = Some(cutoff);
    cfg.rounds = 40;
    cfg.pool_sizes = vec![30, 60];
    cfg.pool_window_ms = Some(6 * 3_600_000);
    let r = evaluate(&cfg).unwrap();
    assert!(r.one_v_one);
    assert_eq!(r.sizes.len(), 2);
    for s in &r.sizes {
        let get = |n: &str| s.policies.iter().find(|p| p.policy == n).unwrap();
        let (eomm, worst) = (get("eomm"), get("worst"));
        for p in &s.policies {
            // Every policy pairs the whole (even) pool.
            assert!(
                (p.matched_players - s.pool_size as f64).abs() < 1e-9,
                "{p:?}"
            );
            assert_eq!(p.rounds, 40);
            // EOMM is the exact minimum of expected churn on every pool, WorstMM the maximum:
            // so are their means over the same pools.
            assert!(eomm.expected_retained_mean >= p.expected_retained_mean - 1e-9);
            assert!(worst.expected_retained_mean <= p.expected_retained_mean + 1e-9);
            let players: u64 = p.by_decile.iter().map(|d| d.players).sum();
            assert_eq!(players, 40 * s.pool_size as u64);
            assert!(p.retained_ci95.0 <= p.retained_mean && p.retained_mean <= p.retained_ci95.1);
        }
        // The simulated lake has its truth: every policy is also scored under it, and the
        // oracle (EOMM on the true probabilities) is the exact optimum there, on every pool.
        let oracle = get("oracle").expected_retained_truth_mean.unwrap();
        for p in &s.policies {
            let t = p.expected_retained_truth_mean.unwrap();
            assert!(oracle >= t - 1e-9, "{p:?}");
            let (lo, hi) = p.expected_retained_truth_ci95.unwrap();
            assert!(lo <= t && t <= hi);
        }
        for t in s.tests.iter().filter(|t| t.a == "oracle") {
            assert!(t.paired_truth.unwrap().diff >= -1e-9, "{t:?}");
        }
        // Welch tests between every ordered pair of policies (the five, the oracle and its two
        // halves: EOMM on the true win with our churn, and on our win with the true churn),
        // and paired tests of the same rounds: the mean of the differences is the difference
        // of the means.
        assert_eq!(s.policies.len(), 8);
        assert_eq!(s.tests.len(), 8 * 7);
        for t in &s.tests {
            let (p, e) = (t.paired.unwrap(), t.paired_expected.unwrap());
            assert!((p.diff - t.welch.diff).abs() < 1e-9, "{t:?}");
            assert!((0.0..=1.0).contains(&p.p) && p.df == 39.0, "{t:?}");
            // EOMM has the least expected churn on every pool, so each paired difference
            // against it is one-signed.
            if t.a == "eomm" {
                assert!(e.diff >= -1e-9, "{t:?}");
            }
        }
    }
    assert_eq!(r.eomm_vs_skill.len(), 2);
    for (e, s) in r.eomm_vs_skill.iter().zip(&r.sizes) {
        let t = e.truth.unwrap();
        let truth = |n: &str| {
            s.policies
                .iter()
                .find(|p| p.policy == n)
                .unwrap()
                .expected_retained_truth_mean
                .unwrap()
        };
        assert_eq!(
            (t.skill, t.eomm, t.oracle),
            (truth("skill"), truth("eomm"), truth("oracle"))
        );
        assert!((t.share - (t.eomm - t.skill) / (t.oracle - t.skill)).abs() < 1e-12);
        for (share, name) in [
            (t.true_win_share, "eomm-true-win"),
            (t.true_churn_share, "eomm-true-churn"),
        ] {
            let x = (truth(name) - t.skill) / (t.oracle - t.skill);
            assert!((share.unwrap() - x).abs() < 1e-12, "{name}");
            assert!(share.unwrap() <= 1.0 + 1e-9, "{name}");
        }
        assert!(t.oracle_gain >= t.realised_gain, "{t:?}");
    }
    // The report states the Table 2 findings in words, from the same figures: one line per
    // size with each test's level, then the policies retaining the most and the fewest.
    let verdict = mm_eval::report::table2_verdict(&r);
    assert_eq!(verdict.len(), 4, "{verdict:?}");
    for (line, e) in verdict.iter().zip(&r.eomm_vs_skill) {
        assert!(
            line.starts_with(&format!("P={}: EOMM ", e.pool_size)),
            "{line}"
        );
        let level = |p: f64| {
            if p < 0.01 {
                "significant at 1%"
            } else {
                "not significant at 1%"
            }
        };
        assert!(
            line.contains(&format!("({}), Welch p = ", level(e.paired_p_value)))
                && line.ends_with(&format!("({}).", level(e.p_value))),
            "{line}"
        );
    }
    for (line, pick) in verdict[2..].iter().zip([true, false]) {
        let names: Vec<&str> = r
            .sizes
            .iter()
            .map(|s| {
                let cmp = |a: &&mm_eval::PolicyStats, b: &&mm_eval::PolicyStats| {
                    a.retained_mean.total_cmp(&b.retained_mean)
                };
                let it = s.policies.iter();
                if pick { it.max_by(cmp) } else { it.min_by(cmp) }
                    .unwrap()
                    .policy
                    .as_str()
            })
            .collect();
        for n in names {
            assert!(line.contains(n), "{line} lacks {n}");
        }
    }
    assert!(mm_eval::report::summary(&r).contains(&verdict[0]));
    let h = &r.holdout[0];
    assert!(h.churn_rows > 0 && h.churn_log_loss.is_finite() && h.win_log_loss.is_finite());
    assert!(r.historical[0].players > 0);
    let html = std::fs::read_to_string(dir.path().join("eval/evaluation.html")).unwrap();
    assert!(html.contains("EOMM Table 2") && html.contains("<svg"));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("eval/evaluation.json")).unwrap())
            .unwrap();
    assert_eq!(json["sizes"][0]["pool_size"], 30);

    // The same seed gives the same figures; comparing the artifact with itself gives two
    // identical sets of rows on the same pools and draws.
    cfg.compare = Some(model.clone());
    cfg.out = dir.path().join("eval2");
    let r2 = evaluate(&cfg).unwrap();
    for (a, s2) in r.sizes.iter().zip(&r2.sizes) {
        for p in &a.policies {
            for who in ["candidate", "baseline"] {
                let q = s2
                    .policies
                    .iter()
                    .find(|q| q.policy == format!("{who}/{}", p.policy))
                    .unwrap();
                assert_eq!(p.retained_mean, q.retained_mean, "{}", p.policy);
                assert_eq!(p.expected_retained_mean, q.expected_retained_mean);
            }
        }
    }
    assert_eq!(r2.holdout.len(), 2);
    assert_eq!(r2.holdout[0].churn_log_loss, r2.holdout[1].churn_log_loss);
    // The paired scores: each the holdout's, and an artifact differs from itself by nothing.
    assert!(r.holdout_diff.is_none());
    let d = r2.holdout_diff.as_ref().unwrap();
    assert_eq!(d.churn_rows, r2.holdout[0].churn_rows);
    assert_eq!(d.win_matches, r2.holdout[0].win_matches);
    assert_eq!(d.churn_log_loss.candidate, r2.holdout[0].churn_log_loss);
    assert_eq!(d.churn_auc.baseline, r2.holdout[1].churn_auc);
    assert!((d.win_log_loss.candidate - r2.holdout[0].win_log_loss).abs() < 1e-12);
    for x in [
        d.churn_log_loss,
        d.churn_brier,
        d.churn_ece,
        d.churn_auc,
        d.win_log_loss,
    ] {
        assert_eq!((x.diff, x.ci95), (0.0, (0.0, 0.0)));
        assert!(x.within_noise());
    }
    assert!(mm_eval::report::summary(&r2).contains("candidate - baseline (95% paired bootstrap"));
    let html = std::fs::read_to_string(dir.path().join("eval2/evaluation.html")).unwrap();
    assert!(html.contains("paired bootstrap"));

    // A window that starts inside the training data is refused.
    cfg.compare = None;
    cfg.from_ms = Some(cutoff - DAY);
    match evaluate(&cfg) {
        Err(EvalError::Input(m)) => {
            assert!(m.contains("not after the artifact's data end"), "{m}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn team_queue_replay_accounts_for_every_search() {
    let dir = tempfile::tempdir().unwrap();
    let (model, cutoff) = fitted(dir.path(), "tdm-6v6");
    let mut cfg = EvalConfig::new(dir.path().join("lake"), &model, dir.path().join("eval"));
    cfg.from_ms = Some(cutoff);
    cfg.rounds = 2;
    let r = evaluate(&cfg).unwrap();
    assert!(!r.one_v_one && r.sizes.is_empty());
    let t = r
        .team_queue
        .as_ref()
        .expect("a team mode gets the queue replay");
    assert_eq!(t.team_size, 6);
    // The three policies and, on this simulated lake, the team oracle and its two halves.
    let names: Vec<&str> = t.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(
        names,
        [
            "cod",
            "threshold",
            "eomm",
            "oracle",
            "oracle-churn",
            "oracle-outcomes"
        ]
    );
    let offered = t.policies[0].searches + t.policies[0].superseded;
    for p in &t.policies {
        // Every arrival is either queued or superseded by the player's older search, and every
        // queued search is either placed or left unplaced at the end.
        assert_eq!(p.searches + p.superseded, offered, "{}", p.policy);
        assert_eq!(p.placed_searches + p.unplaced_searches, p.searches);
        // Lobbies are full 6v6 lobbies.
        assert_eq!(p.placed_players, 12 * p.lobbies, "{}", p.policy);
        assert!(p.lobbies > 50, "{}: {} lobbies", p.policy, p.lobbies);
        assert!(p.rescued <= p.lobbies);
        assert!(
            0.0 <= p.wait_s_p50 && p.wait_s_p50 <= p.wait_s_p90 && p.wait_s_p90 <= p.wait_s_max
        );
        assert!(p.wait_s_ci95.0 <= p.wait_s_mean && p.wait_s_mean <= p.wait_s_ci95.1);
        assert!((0.0..=1.0).contains(&p.party_parity));
        assert!((0.0..=1.0).contains(&p.party_parity_exact));
        assert!(p.expected_churn > 0.0 && p.expected_churn < 1.0);
        assert!((0.0..=0.5).contains(&p.mean_abs_pwin_minus_half));
        let players: u64 = p.by_decile.iter().map(|d| d.players).sum();
        assert_eq!(players, p.placed_players);
        // Under the truth: a churn per player and a blowout share, both probabilities.
        let truth = p
            .truth
            .as_ref()
            .expect("a simulated lake scores every policy by its truth");
        assert!(truth.expected_churn > 0.0 && truth.expected_churn < 1.0);
        assert!((0.0..=1.0).contains(&truth.blowout_rate));
        // The truth's balance, and how much more often our model's favourite wins than it
        // predicts: lobby by lobby the favourite's true chance is our chance plus the excess, so
        // the truth is off one half by at least our model's imbalance plus the excess.
        assert!((0.0..=0.5).contains(&truth.mean_abs_pwin_minus_half));
        assert!(truth.favourite_excess.abs() <= 0.5);
        assert!(
            truth.mean_abs_pwin_minus_half
                >= p.mean_abs_pwin_minus_half + truth.favourite_excess - 1e-9,
            "{}: {truth:?} against our {}",
            p.label,
            p.mean_abs_pwin_minus_half
        );
    }
    // Every pair of policies has a paired test under the truth, antisymmetric; the oracle
    // figures are those of the oracle's and team EOMM's tests against the CoD rules.
    let test = |a: &str, b: &str| {
        t.tests
            .iter()
            .find(|x| x.a == a && x.b == b)
            .and_then(|x| x.paired_truth)
            .expect("a paired test under the truth")
    };
    assert!((test("eomm", "cod").diff + test("cod", "eomm").diff).abs() < 1e-12);
    let o = t.oracle.expect("the team oracle's figures");
    assert_eq!(o.available_gain, test("oracle", "cod").diff);
    assert_eq!(o.realised_gain, test("eomm", "cod").diff);
    assert!((o.share - o.realised_gain / o.available_gain).abs() < 1e-12);
    assert_eq!(o.true_churn_gain, test("oracle-churn", "cod").diff);
    assert_eq!(o.true_outcomes_gain, test("oracle-outcomes", "cod").diff);
    assert_eq!(o.true_churn_p, test("oracle-churn", "cod").p);
    assert_eq!(t.tests.len(), 6 * 5);
    let html = std::fs::read_to_string(dir.path().join("eval/evaluation.html")).unwrap();
    assert!(html.contains("Team-queue policies replayed"));
    assert!(html.contains("Under the simulator's truth") && html.contains("of the available gain"));
    assert!(html.contains("Where the rest is lost") && html.contains("oracle-outcomes"));
    leavers_account_for_every_slot(t);
    assert!(html.contains("Leavers and backfill") && html.contains("Time to fill an open slot"));

    // Deterministic, and an artifact compared with itself gives identical rows.
    cfg.compare = Some(model.clone());
    cfg.out = dir.path().join("eval2");
    let r2 = evaluate(&cfg).unwrap();
    let t2 = r2.team_queue.as_ref().unwrap();
    assert_eq!(t2.policies.len(), 2 * 6);
    for p in &t.policies {
        for q in t2.policies.iter().filter(|q| q.policy == p.policy) {
            assert_eq!(
                (p.placed_searches, p.lobbies, p.rescued),
                (q.placed_searches, q.lobbies, q.rescued)
            );
            assert_eq!(p.wait_s_mean, q.wait_s_mean, "{}", p.policy);
            assert_eq!(p.expected_churn, q.expected_churn);
            assert_eq!(p.retained_share, q.retained_share);
        }
    }
    // The replay with leavers runs for the first artifact, the same again.
    let (l, l2) = (t.leavers.as_ref().unwrap(), t2.leavers.as_ref().unwrap());
    for (a, b) in l.runs.iter().zip(&l2.runs) {
        assert_eq!(
            (a.lobbies, a.quits, a.slots_filled, a.true_churn),
            (b.lobbies, b.quits, b.slots_filled, b.true_churn)
        );
    }
}

/// The replay with leavers: each policy with and without backfill; every quit opens a slot,
/// every filled slot is a backfilled player, no backfill worsens a team size differential, and
/// backfill leaves fewer matches short-handed.
fn leavers_account_for_every_slot(t: &mm_eval::results::TeamQueueResult) {
    let l = t
        .leavers
        .as_ref()
        .expect("a simulated lake with quit rates");
    assert_eq!(
        (l.quit_base_per_min, l.quit_deficit_kills),
        (
            mm_sim::game::QUIT_BASE_PER_MIN,
            mm_sim::game::QUIT_DEFICIT_KILLS
        )
    );
    let names: Vec<(&str, bool)> = l
        .runs
        .iter()
        .map(|r| (r.policy.as_str(), r.backfill))
        .collect();
    assert_eq!(
        names,
        [
            ("cod", true),
            ("cod", false),
            ("threshold", true),
            ("threshold", false),
            ("eomm", true),
            ("eomm", false)
        ]
    );
    for pair in l.runs.chunks(2) {
        let (with, without) = (&pair[0], &pair[1]);
        for r in pair {
            assert!(r.lobbies > 30 && r.quits > 0, "{}: {r:?}", r.policy);
            assert!((0.003..0.1).contains(&r.quit_share), "{r:?}");
            assert_eq!(r.worsened, 0, "{r:?}");
            // A match ends short-handed only after a quit.
            assert!(r.short_handed * (r.lobbies as f64) <= r.quits as f64 + 1e-9);
            assert!(
                r.short_handed_ci95.0 <= r.short_handed && r.short_handed <= r.short_handed_ci95.1
            );
            assert!(r.true_churn > 0.0 && r.true_churn < 1.0);
        }
        assert_eq!(
            (
                without.slots_filled,
                without.backfills,
                without.backfilled_players
            ),
            (0, 0, 0)
        );
        assert!(without.retention_vs_no_backfill.is_none());
        assert!(with.retention_vs_no_backfill.is_some());
        // Every filled slot is a backfilled player, and no more slots are filled than opened.
        assert_eq!(with.slots_filled, with.backfilled_players);
        assert!(with.slots_filled <= with.quits);
        assert!(with.slots_filled > 0, "{with:?}");
        assert!(with.fill_s_p50 <= with.fill_s_p95);
        assert!(with.fill_s_quantiles.windows(2).all(|w| w[0] <= w[1]));
        assert!(
            with.short_handed < without.short_handed,
            "{with:?} {without:?}"
        );
    }
}
