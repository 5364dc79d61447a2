//! The raw-skill job on a simulated lake, judged against the simulator's ground truth.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use mm_fit::{Metric, SkillConfig, fit_skill};
use mm_lake::store::read_parquet_columns;
use mm_sim::{SimConfig, simulate};
use mm_trainer::skill::raw::RawSkillParams;
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
        lake: lake.clone(),
        out: out.clone(),
        mode: Some("tdm-6v6".into()),
        metric: Metric::KillsPerEnemyDeath,
        params: RawSkillParams::default(),
        active_days: 7,
        knots: 101,
        score_from_ms: None,
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
        report.scored.log_loss,
        report.scored.accuracy,
        report.scored.pairs,
        report.skill_sd
    );
    assert!(a.len() > 500, "{} players with 50 matches", a.len());
    assert!(rho > 0.8, "Spearman {rho}");
    assert!(fitted.values().all(|x| (-1.0..=1.0).contains(x)));
    assert!(report.scored.log_loss < std::f64::consts::LN_2 && report.scored.accuracy > 0.5);
}
