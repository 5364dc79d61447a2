//! What changed between two artifact versions (`mm models diff`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::Artifact;

/// What changed between two versions.
#[derive(Debug, Serialize)]
pub struct Diff {
    /// Numeric metrics that differ: path, a, b.
    pub metrics: Vec<(String, f64, f64)>,
    /// Churn coefficients (per standardised unit) by |change|, largest first: name, a, b.
    pub churn_coefficients: Vec<(String, Option<f64>, Option<f64>)>,
    pub churn_c: (f64, f64),
    /// Team win model and party adjustment parameters: name, a, b.
    pub skill_parameters: Vec<(String, f64, f64)>,
    /// Largest and mean absolute move of the percentile table's knots (raw skill units).
    pub percentile_knots_max_move: f64,
    pub percentile_knots_mean_move: f64,
    pub players: (usize, usize),
}

fn numbers(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, f64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                numbers(&format!("{prefix}.{k}"), v, out);
            }
        }
        serde_json::Value::Array(a) if a.len() <= 20 => {
            for (i, v) in a.iter().enumerate() {
                numbers(&format!("{prefix}[{i}]"), v, out);
            }
        }
        serde_json::Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.to_string(), x);
            }
        }
        _ => {}
    }
}

/// What changed from `a` to `b`: metrics that differ, the `top` churn coefficients that moved
/// most, the team win model and party adjustment, the percentile table's knots and the
/// snapshot's size.
#[must_use]
pub fn diff(a: &Artifact, b: &Artifact, top: usize) -> Diff {
    let (mut na, mut nb) = (BTreeMap::new(), BTreeMap::new());
    for (k, v) in &a.manifest.metrics {
        numbers(k, v, &mut na);
    }
    for (k, v) in &b.manifest.metrics {
        numbers(k, v, &mut nb);
    }
    let metrics = na
        .iter()
        .filter_map(|(k, x)| nb.get(k).filter(|y| *y != x).map(|y| (k.clone(), *x, *y)))
        .collect();
    let coef = |m: &crate::churn::ChurnModel| -> BTreeMap<String, f64> {
        m.feature_names
            .iter()
            .cloned()
            .zip(m.coef.iter().copied())
            .collect()
    };
    let (ca, cb) = (coef(&a.churn.model), coef(&b.churn.model));
    let mut names: Vec<&String> = ca.keys().chain(cb.keys()).collect();
    names.sort();
    names.dedup();
    let mut churn_coefficients: Vec<(String, Option<f64>, Option<f64>)> = names
        .into_iter()
        .map(|n| (n.clone(), ca.get(n).copied(), cb.get(n).copied()))
        .collect();
    let moved =
        |r: &(String, Option<f64>, Option<f64>)| (r.1.unwrap_or(0.0) - r.2.unwrap_or(0.0)).abs();
    churn_coefficients.sort_by(|x, y| moved(y).total_cmp(&moved(x)));
    churn_coefficients.truncate(top);
    let mut skill_parameters = Vec::new();
    let team = |t: &Option<crate::team::TeamWinModel>| {
        t.map_or([f64::NAN; 3], |t| {
            [t.skill_coef, t.party_members_coef, t.party_spread_coef]
        })
    };
    for (n, (x, y)) in [
        "team_win.skill_coef",
        "team_win.party_members_coef",
        "team_win.party_spread_coef",
    ]
    .iter()
    .zip(team(&a.team_win).into_iter().zip(team(&b.team_win)))
    {
        skill_parameters.push(((*n).to_string(), x, y));
    }
    let party = |p: &Option<crate::team::PartyAdjustment>| {
        p.map_or([f64::NAN; 2], |p| [p.per_member, p.per_member_per_sd])
    };
    for (n, (x, y)) in [
        "party_adjustment.per_member",
        "party_adjustment.per_member_per_sd",
    ]
    .iter()
    .zip(
        party(&a.party_adjustment)
            .into_iter()
            .zip(party(&b.party_adjustment)),
    ) {
        skill_parameters.push(((*n).to_string(), x, y));
    }
    // Knots compared at the same quantiles, through each table's own interpolation.
    let moves: Vec<f64> = (0..=100)
        .map(|k| {
            let p = f64::from(k) / 100.0;
            (a.percentiles.skill_at(p) - b.percentiles.skill_at(p)).abs()
        })
        .collect();
    Diff {
        metrics,
        churn_coefficients,
        churn_c: (a.churn.model.c, b.churn.model.c),
        skill_parameters,
        percentile_knots_max_move: moves.iter().copied().fold(0.0, f64::max),
        percentile_knots_mean_move: moves.iter().sum::<f64>() / moves.len() as f64,
        players: (a.snapshot.len(), b.snapshot.len()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn open(players: usize, seed: u64) -> (Artifact, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!(
            "mm-artifact-diff-{}-{players}-{seed}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let (m, files) = crate::synthetic::artifact(players, seed);
        crate::Store::new(&dir)
            .publish("v1", m, &files, true, None)
            .unwrap();
        (crate::Store::new(&dir).open_latest().unwrap(), dir)
    }

    #[test]
    fn a_version_against_itself_changes_nothing() {
        let (a, dir) = open(50, 3);
        let d = diff(&a, &a, 5);
        assert!(d.metrics.is_empty());
        assert_eq!(d.players, (50, 50));
        assert_eq!(d.percentile_knots_max_move, 0.0);
        assert!(d.churn_coefficients.iter().all(|(_, x, y)| x == y));
        assert!(d.churn_coefficients.len() <= 5);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn two_versions_differ_where_their_models_do() {
        let (a, da) = open(40, 1);
        let (b, db) = open(60, 2);
        let d = diff(&a, &b, 3);
        assert_eq!(d.players, (40, 60));
        assert_eq!(d.churn_c, (a.churn.model.c, b.churn.model.c));
        // Largest move first.
        let moved = |r: &(String, Option<f64>, Option<f64>)| {
            (r.1.unwrap_or(0.0) - r.2.unwrap_or(0.0)).abs()
        };
        assert!(
            d.churn_coefficients
                .windows(2)
                .all(|w| moved(&w[0]) >= moved(&w[1]))
        );
        let _ = std::fs::remove_dir_all(da);
        let _ = std::fs::remove_dir_all(db);
    }
}
