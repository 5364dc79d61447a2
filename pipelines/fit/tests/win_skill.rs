//! The win skill in `mm fit skill` on simulated 1v1 and 6v6 worlds, judged against the
//! simulator's ground truth (issues 29 and 56).

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use mm_fit::skill::win::WinEstimator;
use mm_fit::{Metric, SkillConfig, fit_skill};
use mm_lake::parquet_io::read_parquet_columns;
use mm_sim::{SimConfig, simulate};
use mm_trainer::skill::team::{SkillBasis, TeamWinModel};
use mm_trainer::stats::spearman;

fn columns(path: &std::path::Path, cols: &[&str]) -> HashMap<String, Vec<f64>> {
    let mut all = vec!["player_id"];
    all.extend_from_slice(cols);
    let mut out = HashMap::new();
    for b in read_parquet_columns(path, Some(&all)).unwrap() {
        let k = b.column_by_name("player_id").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            let v = cols
                .iter()
                .map(|c| {
                    b.column_by_name(c)
                        .unwrap()
                        .as_primitive::<Float64Type>()
                        .value(i)
                })
                .collect();
            out.insert(k.value(i).to_string(), v);
        }
    }
    out
}

/// On a 1v1 world scored by outcome, the whole-history win skill ranks players closer to
/// their true skill than raw skill does, predicts the last ten days better, and is exported
/// with a team win model that reads it; `--no-win-skill` exports raw skill's model as before.
#[test]
fn the_win_skill_ranks_and_predicts_better_than_raw_skill_on_a_duel_world() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        players: 1_500,
        days: 40,
        duel_share: 1.0,
        seed: 4242,
        ..SimConfig::default()
    })
    .unwrap();
    let fit = |name: &str, win_skill: bool| {
        let out = dir.path().join(name);
        let report = fit_skill(&SkillConfig {
            mode: Some("duel-1v1".into()),
            metric: Metric::Outcome,
            baselines: Vec::new(),
            win_skill,
            ..SkillConfig::new(lake.clone(), out.clone())
        })
        .unwrap();
        (out, report)
    };
    let (out, report) = fit("skill", true);
    let w = report.win_skill.clone().unwrap();
    eprintln!("{w:?}");
    assert!(w.exported, "{}", w.reason);
    assert!(w.converged && w.players > 1_000);
    // A 1v1 scored by outcome has one measurement a match either way: the outcomes' fit wins.
    assert_eq!(w.estimator, Some(WinEstimator::Outcomes));
    let (wl, pl, rl) = (
        w.win_log_loss.unwrap(),
        w.perf_log_loss.unwrap(),
        w.raw_log_loss.unwrap(),
    );
    assert!(
        wl < rl && wl <= pl,
        "win skill {wl}, performance {pl}, raw skill {rl}"
    );
    let team: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("team_model.json")).unwrap()).unwrap();
    let model: TeamWinModel = serde_json::from_value(team["model"].clone()).unwrap();
    assert_eq!(model.basis, SkillBasis::WinSkill);
    assert!(model.skill_coef > 0.0);
    // As in the report, to JSON's round trip (serde_json may move the last digit).
    let same = |a: &TeamWinModel, b: &TeamWinModel| {
        a.basis == b.basis
            && (a.skill_coef - b.skill_coef).abs() < 1e-12
            && a.samples == b.samples
            && a.draws == b.draws
    };
    assert!(same(&model, &w.model.unwrap()));
    // The party adjustment stays raw skill's (raw-skill units); the raw model is kept beside.
    let raw_model: TeamWinModel = serde_json::from_value(team["raw_skill_model"].clone()).unwrap();
    assert_eq!(raw_model.basis, SkillBasis::RawSkill);
    assert!(same(&raw_model, &report.team_model_final.unwrap()));

    // The report's win skill section comes last: the team model's own lines (its pairwise
    // figures, raw skill's) stay under the team model's heading.
    let html = std::fs::read_to_string(out.join("skill_report.html")).unwrap();
    let at = |s: &str| {
        html.find(s)
            .unwrap_or_else(|| panic!("{s} not in the report"))
    };
    assert!(at("<h2>Team win model on raw skill") < at("<p>Pairwise ("));
    assert!(at("<p>Pairwise (") < at("<h2>Win skill (a whole-history strength; exported"));
    assert!(html.ends_with("</p></body></html>"));

    // Against the truth: players' true skill at the end of the history.
    let fitted = columns(&out.join("players.parquet"), &["raw_skill", "win_skill"]);
    let truth = columns(&lake.join("truth/players.parquet"), &["skill_end"]);
    let (mut raw, mut win, mut t) = (Vec::new(), Vec::new(), Vec::new());
    for (id, v) in &fitted {
        raw.push(v[0]);
        win.push(v[1]);
        t.push(truth[id][0]);
    }
    let (rho_raw, rho_win) = (spearman(&raw, &t), spearman(&win, &t));
    eprintln!("Spearman against the true skill: raw {rho_raw:.3}, win {rho_win:.3}");
    assert!(rho_win > rho_raw + 0.03, "raw {rho_raw}, win {rho_win}");

    // Without it: no column, raw skill's model exported.
    let (out, report) = fit("skill-raw", false);
    assert!(report.win_skill.is_none());
    let team: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("team_model.json")).unwrap()).unwrap();
    let model: TeamWinModel = serde_json::from_value(team["model"].clone()).unwrap();
    assert_eq!(model.basis, SkillBasis::RawSkill);
    assert!((model.skill_coef - report.team_model_final.unwrap().skill_coef).abs() < 1e-12);
    let schema = read_parquet_columns(&out.join("players.parquet"), None).unwrap()[0].schema();
    assert!(schema.field_with_name("win_skill").is_err());
}

/// On a 6v6 world scored by kills per enemy death, the performance strength (twelve
/// measurements a match) predicts the last ten days better than the outcomes' fit, so it is
/// the candidate against raw skill; it is exported exactly when its log-loss is below raw
/// skill's, and the exported team model then reads it.
#[test]
fn the_performance_strength_is_the_candidate_on_a_team_world() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        players: 5_000,
        days: 60,
        duel_share: 0.0,
        seed: 4343,
        ..SimConfig::default()
    })
    .unwrap();
    let out = dir.path().join("skill");
    let report = fit_skill(&SkillConfig {
        mode: Some("tdm-6v6".into()),
        metric: Metric::KillsPerEnemyDeath,
        ..SkillConfig::new(lake.clone(), out.clone())
    })
    .unwrap();
    let w = report.win_skill.unwrap();
    eprintln!("{w:?}");
    assert_eq!(w.estimator, Some(WinEstimator::Performance));
    let (wl, pl, rl) = (
        w.win_log_loss.unwrap(),
        w.perf_log_loss.unwrap(),
        w.raw_log_loss.unwrap(),
    );
    assert!(pl + 0.02 < wl, "outcomes {wl}, performance {pl}");
    assert_eq!(w.chosen_log_loss(), Some(pl));
    assert_eq!(w.exported, pl < rl, "performance {pl}, raw skill {rl}");
    let team: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("team_model.json")).unwrap()).unwrap();
    let model: TeamWinModel = serde_json::from_value(team["model"].clone()).unwrap();
    let basis = if w.exported {
        SkillBasis::WinSkill
    } else {
        SkillBasis::RawSkill
    };
    assert_eq!(model.basis, basis);
}
