//! The raw-skill job on a simulated lake, judged against the simulator's ground truth.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use mm_fit::{Metric, SkillConfig, fit_skill};
use mm_lake::parquet_io::read_parquet_columns;
use mm_sim::{SimConfig, simulate};
use mm_trainer::skill::team::{FitTeamWinModel, TeamFitConfig, TeamSample, TeamWinModel};
use mm_trainer::stats::spearman;

fn column_f64(path: &std::path::Path, key: &str, col: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for b in read_parquet_columns(path, Some(&[key, col])).unwrap() {
        let k = b.column_by_name(key).unwrap().as_string::<i32>().clone();
        let v = b
            .column_by_name(col)
            .unwrap()
            .as_primitive::<Float64Type>()
            .clone();
        for i in 0..b.num_rows() {
            out.insert(k.value(i).to_string(), v.value(i));
        }
    }
    out
}

/// TDM, kills per enemy death: for players with at least 50 matches, the fitted raw skill ranks
/// them as their true skill does (Spearman, stated in the message); every value is in [-1, 1];
/// the pairwise predictions scored before each update beat a coin.
#[test]
fn raw_skill_recovers_true_skill_on_simulated_tdm() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        players: 6_000,
        days: 28,
        duel_share: 0.0,
        ..SimConfig::default()
    })
    .unwrap();
    let out = dir.path().join("skill");
    let report = fit_skill(&SkillConfig {
        mode: Some("tdm-6v6".into()),
        metric: Metric::KillsPerEnemyDeath,
        active_days: 7,
        ..SkillConfig::new(lake.clone(), out.clone())
    })
    .unwrap();
    let fitted = column_f64(&out.join("players.parquet"), "player_id", "raw_skill");
    let truth = column_f64(
        &lake.join("truth/players.parquet"),
        "player_id",
        "skill_end",
    );
    let mut games: HashMap<String, i64> = HashMap::new();
    for b in
        read_parquet_columns(&out.join("players.parquet"), Some(&["player_id", "games"])).unwrap()
    {
        let k = b
            .column_by_name("player_id")
            .unwrap()
            .as_string::<i32>()
            .clone();
        let g = b
            .column_by_name("games")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            games.insert(k.value(i).to_string(), g.value(i));
        }
    }
    let (mut a, mut t) = (Vec::new(), Vec::new());
    for (id, &g) in &games {
        if g >= 50 {
            a.push(fitted[id]);
            t.push(truth[id]);
        }
    }
    let rho = spearman(&a, &t);
    eprintln!(
        "Spearman(fitted raw skill, true skill) = {rho:.3} over {} players with >= 50 matches; \
         pairwise log-loss {:.4}, accuracy {:.4} over {} pairs; sd {:.3}",
        a.len(),
        report.pairwise.log_loss,
        report.pairwise.accuracy,
        report.pairwise.n,
        report.skill_sd
    );
    assert!(a.len() > 500, "{} players with 50 matches", a.len());
    assert!(rho > 0.8, "Spearman {rho}");
    assert!(fitted.values().all(|x| (-1.0..=1.0).contains(x)));
    assert!(report.pairwise.log_loss < std::f64::consts::LN_2 && report.pairwise.accuracy > 0.5);
    // Roughly normal well inside the bounds: the CoD spread, nobody at a bound.
    assert!(
        (report.skill_sd - mm_fit::COD_SKILL_SD).abs() < 0.03,
        "sd {}",
        report.skill_sd
    );
    assert!(fitted.values().all(|x| x.abs() < 0.9));

    // Summable: team sums predict team outcomes, better than every baseline tuned on the same
    // window (the metric carries more than the result).
    for m in &report.models {
        eprintln!(
            "{:<32} log-loss {:.4} accuracy {:.4} ECE {:.4} n {}",
            m.model, m.scored.log_loss, m.scored.accuracy, m.scored.ece, m.scored.n
        );
    }
    let ours = &report.models[0];
    assert!(ours.model.starts_with("raw-skill") && ours.scored.accuracy > 0.6);
    assert_eq!(report.models.len(), 5);
    for b in &report.models[1..] {
        assert!(ours.scored.log_loss < b.scored.log_loss, "{b:?}");
    }
    assert!(out.join("skill_report.html").exists() && out.join("team_model.json").exists());

    // The party adjustment against the simulator's bonus, 0.06 + 0.18 sd (latent units, sd of
    // the party's latent skills). Raw skill relates to latent skill by the slope `b` of the
    // fitted values on the true ones.
    let n = a.len() as f64;
    let (ma, mt) = (a.iter().sum::<f64>() / n, t.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(&t).map(|(x, y)| (x - ma) * (y - mt)).sum();
    let b = cov / t.iter().map(|y| (y - mt).powi(2)).sum::<f64>();
    let adj = report.party_adjustment.unwrap();
    let (per_member, per_sd) = (adj.per_member / b, adj.per_member_per_sd);
    eprintln!(
        "party adjustment from fitted raw skill: {per_member:.4} + {per_sd:.4} sd (latent units, \
         slope {b:.4}); simulator: {} + {} sd",
        mm_sim::PARTY_BASE,
        mm_sim::PARTY_SPREAD
    );
    // The same regression on the true skills (an oracle): the method recovers the bonus.
    let h = mm_fit::skill::history::read_history(
        &mm_lake::Lake::open(&lake).unwrap(),
        Some("tdm-6v6"),
        Metric::KillsPerEnemyDeath,
    )
    .unwrap();
    let skill: Vec<f64> = h.ids.iter().map(|id| truth[id]).collect();
    let skill = |p: u32| skill[p as usize];
    let samples: Vec<TeamSample> = h
        .matches
        .iter()
        .filter(|m| m.two_teams())
        .map(|m| mm_fit::skill::replay::team_sample(&h, m, &skill))
        .collect();
    let oracle = TeamWinModel::fit(&samples, &TeamFitConfig::default())
        .unwrap()
        .party_adjustment()
        .unwrap();
    eprintln!(
        "party adjustment from true skill: {:.4} + {:.4} sd",
        oracle.per_member, oracle.per_member_per_sd
    );
    assert!(
        (oracle.per_member - mm_sim::PARTY_BASE).abs() < 0.02,
        "{oracle:?}"
    );
    assert!(
        (oracle.per_member_per_sd - mm_sim::PARTY_SPREAD).abs() < 0.09,
        "{oracle:?}"
    );
    // From our fitted skill: right sign and size, inflated by the noise in raw skill (the
    // skill coefficient is attenuated, the party counts are not).
    assert!(
        per_member > 0.0 && (per_member - mm_sim::PARTY_BASE).abs() < 0.06,
        "{per_member}"
    );
    assert!(
        per_sd > 0.0 && (per_sd - mm_sim::PARTY_SPREAD).abs() < 0.15,
        "{per_sd}"
    );
}

/// Every row of a Parquet file as text, sorted: two files with the same rows compare equal
/// whatever their row groups.
fn rows_of(path: &std::path::Path) -> Vec<String> {
    let mut rows = Vec::new();
    for b in read_parquet_columns(path, None).unwrap() {
        let cols: Vec<_> = b
            .columns()
            .iter()
            .map(|c| {
                arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &Default::default())
                    .unwrap()
            })
            .collect();
        for i in 0..b.num_rows() {
            rows.push(
                cols.iter()
                    .map(|c| c.value(i).to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
    }
    rows.sort();
    rows
}

/// Issue 26: a lake larger than `max_tune_rows` is replayed one day at a time with players
/// numbered across days; with the same parameters that replay is the whole-history one, row for
/// row (players.parquet and match_skill.parquet), including a cutoff in the middle of a day.
/// The replay fed day by day with a party adjustment equals the whole-history replay too.
#[test]
fn the_day_by_day_replay_is_the_whole_history_replay() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        seed: 26,
        players: 1_500,
        days: 8,
        duel_share: 0.3,
        ..SimConfig::default()
    })
    .unwrap();
    let first = mm_fit::skill::history::read_history(
        &mm_lake::Lake::open(&lake).unwrap(),
        None,
        Metric::KillsPerEnemyDeath,
    )
    .unwrap()
    .matches[0]
        .start_ms;
    let fit = |max_tune_rows: usize, out: &str| {
        let out = dir.path().join(out);
        let report = fit_skill(&SkillConfig {
            mode: Some("tdm-6v6".into()),
            tune: false,
            party_iterations: 0,
            target_sd: None,
            baselines: Vec::new(),
            html: false,
            // Six and a half days in: the cut falls inside a day.
            until_ms: Some(first + 6 * 86_400_000 + 43_200_000),
            max_tune_rows,
            ..SkillConfig::new(lake.clone(), out.clone())
        })
        .unwrap();
        (report, out)
    };
    let (whole, a) = fit(usize::MAX, "whole");
    let cap = (whole.player_matches / 4) as usize;
    let (days, b) = fit(cap, "days");
    assert!(whole.tuning_sample.is_none());
    let sample = days.tuning_sample.clone().unwrap();
    eprintln!(
        "whole: {} rows of {} matches; the day-by-day fit tuned on {} rows",
        whole.player_matches, whole.matches, sample.rows
    );
    assert!(sample.rows <= cap as u64 && sample.rows > 0);
    assert_eq!(
        (days.matches, days.player_matches, days.players),
        (whole.matches, whole.player_matches, whole.players)
    );
    for f in ["players.parquet", "match_skill.parquet"] {
        let (x, y) = (rows_of(&a.join(f)), rows_of(&b.join(f)));
        assert_eq!(x.len(), y.len(), "{f}");
        assert!(x == y, "{f} differs");
    }
    assert_eq!(
        rows_of(&a.join("match_skill.parquet")).len() as u64,
        whole.player_matches
    );
    // No hidden file left beside the outputs.
    for e in std::fs::read_dir(&b).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(!name.starts_with('.'), "{name}");
    }

    // The replay itself, fed day by day with a party adjustment.
    let l = mm_lake::Lake::open(&lake).unwrap();
    let h = mm_fit::skill::history::read_history(&l, None, Metric::KillsPerEnemyDeath).unwrap();
    let params = mm_trainer::skill::raw::RawSkillParams::default()
        .check()
        .unwrap();
    let adj = mm_trainer::skill::team::PartyAdjustment {
        per_member: 0.01,
        per_member_per_sd: 0.1,
    };
    let win = mm_fit::skill::replay::Windows {
        tune_from: first + 86_400_000,
        tune_to: first + 4 * 86_400_000,
        score_from: first + 4 * 86_400_000,
        score_to: i64::MAX,
    };
    let whole =
        mm_fit::skill::replay::run_ours(&h, params, Some(adj), i64::MAX, &win, Some(86_400_000));
    let mut stream =
        mm_fit::skill::history::DayStream::new(&l, None, Metric::KillsPerEnemyDeath).unwrap();
    let mut r = mm_fit::skill::replay::OursReplay::new(
        params,
        Some(adj),
        i64::MAX,
        win,
        Some(86_400_000),
        usize::MAX,
    );
    let mut pre = Vec::new();
    while let Some(day) = stream.next_day().unwrap() {
        let mut p = vec![f32::NAN; day.rows()];
        assert!(r.feed(&day, &mut p));
        pre.extend(p);
    }
    let days = r.finish();
    assert_eq!(stream.ids, h.ids);
    assert!(pre == whole.pre_skill);
    assert_eq!(days.last_seen, whole.last_seen);
    assert_eq!(days.tune, whole.tune);
    assert_eq!(days.score, whole.score);
    assert_eq!(days.dist, whole.dist);
    assert_eq!(days.pairwise, whole.pairwise);
}
