//! The churn job on simulated lakes: the polars feature query against the row-at-a-time
//! reference (`FeatureSpec::push_row`, fed by an independent per-match computation), and the
//! fitted model against the simulator's true churn probabilities.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, TimestampMillisecondType};
use arrow_array::{Array, RecordBatch};
use mm_fit::churn::features::{FeatureQuery, query, state_query};
use mm_fit::churn::{ChurnConfig, fit_churn};
use mm_fit::{SkillConfig, fit_skill};
use mm_lake::Lake;
use mm_lake::parquet_io::read_parquet_columns;
use mm_sim::{SimConfig, simulate};
use mm_trainer::churn::features::{FeatureSpec, Outcome3, Played, Upcoming, label};

/// One lake row, as the reference reads it.
#[derive(Debug, Clone)]
struct Row {
    match_id: String,
    player: String,
    start: i64,
    team: i32,
    outcome: Outcome3,
    party_id: Option<String>,
    team_score: Option<f64>,
    metric: Option<f64>,
}

fn f64_at(b: &RecordBatch, name: &str, i: usize) -> Option<f64> {
    let c = b.column_by_name(name)?;
    let c = c.as_primitive_opt::<Float64Type>()?;
    (!c.is_null(i)).then(|| c.value(i))
}

fn i32_at(b: &RecordBatch, name: &str, i: usize) -> Option<i32> {
    let c = b.column_by_name(name)?;
    let c = c.as_primitive_opt::<Int32Type>()?;
    (!c.is_null(i)).then(|| c.value(i))
}

fn read_rows(lake: &std::path::Path, mode: &str) -> Vec<Row> {
    let cols = [
        "match_id",
        "mode",
        "start_time",
        "team",
        "player_id",
        "outcome",
        "party_id",
        "kills",
        "deaths",
        "score",
        "team_score",
        "perf",
    ];
    let mut rows = Vec::new();
    for f in Lake::open(lake).unwrap().matches_files().unwrap() {
        for b in read_parquet_columns(&f, Some(&cols)).unwrap() {
            let s = |n: &str| b.column_by_name(n).unwrap().as_string::<i32>().clone();
            let (mid, md, pid, out, party) = (
                s("match_id"),
                s("mode"),
                s("player_id"),
                s("outcome"),
                s("party_id"),
            );
            let start = b
                .column_by_name("start_time")
                .unwrap()
                .as_primitive::<TimestampMillisecondType>()
                .clone();
            for i in 0..b.num_rows() {
                if md.value(i) != mode {
                    continue;
                }
                let metric = f64_at(&b, "perf", i)
                    .or_else(|| {
                        Some(f64::from(
                            i32_at(&b, "kills", i)? - i32_at(&b, "deaths", i)?,
                        ))
                    })
                    .or_else(|| f64_at(&b, "score", i));
                rows.push(Row {
                    match_id: mid.value(i).to_string(),
                    player: pid.value(i).to_string(),
                    start: start.value(i),
                    team: i32_at(&b, "team", i).unwrap(),
                    outcome: match out.value(i) {
                        "win" => Outcome3::Win,
                        "draw" => Outcome3::Draw,
                        _ => Outcome3::Loss,
                    },
                    party_id: (!party.is_null(i)).then(|| party.value(i).to_string()),
                    team_score: f64_at(&b, "team_score", i),
                    metric,
                });
            }
        }
    }
    rows
}

/// The reference table: (player, match) -> (features, label), computed row by row.
fn reference(
    rows: &[Row],
    spec: FeatureSpec,
    horizon_ms: i64,
    margin: f64,
) -> HashMap<(String, String), (Vec<f64>, Option<bool>)> {
    let mut by_match: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        by_match.entry(&r.match_id).or_default().push(i);
    }
    // Per row: score difference, performance rank, party, blowout loss.
    let mut played_of: Vec<(Played, bool)> = Vec::with_capacity(rows.len());
    played_of.resize(
        rows.len(),
        (
            Played {
                start_ms: 0,
                outcome: Outcome3::Loss,
                score_diff: f64::NAN,
                perf_rank: f64::NAN,
                blowout_loss: false,
            },
            false,
        ),
    );
    for idx in by_match.values() {
        for &i in idx {
            let r = &rows[i];
            let others: Vec<usize> = idx
                .iter()
                .copied()
                .filter(|&j| rows[j].team != r.team)
                .collect();
            let score_diff = match r.team_score {
                Some(own) if !others.is_empty() => {
                    let opp: Option<f64> = others.iter().map(|&j| rows[j].team_score).sum();
                    opp.map_or(f64::NAN, |s| own - s / others.len() as f64)
                }
                _ => f64::NAN,
            };
            let ranked: Vec<f64> = idx.iter().filter_map(|&j| rows[j].metric).collect();
            let perf_rank = match r.metric {
                Some(m) if ranked.len() > 1 => {
                    let below = ranked.iter().filter(|&&x| x < m).count() as f64;
                    let ties = ranked.iter().filter(|&&x| x == m).count() as f64 - 1.0;
                    (below + 0.5 * ties) / (ranked.len() as f64 - 1.0)
                }
                _ => f64::NAN,
            };
            let party = r.party_id.as_ref().is_some_and(|p| {
                idx.iter()
                    .filter(|&&j| rows[j].party_id.as_ref() == Some(p))
                    .count()
                    >= 2
            });
            played_of[i] = (
                Played {
                    start_ms: r.start,
                    outcome: r.outcome,
                    score_diff,
                    perf_rank,
                    blowout_loss: r.outcome == Outcome3::Loss && score_diff < -margin,
                },
                party,
            );
        }
    }
    let mut by_player: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        by_player.entry(&r.player).or_default().push(i);
    }
    let end = rows.iter().map(|r| r.start).max().unwrap();
    let mut out = HashMap::new();
    for idx in by_player.values_mut() {
        idx.sort_by(|&a, &b| {
            (rows[a].start, &rows[a].match_id).cmp(&(rows[b].start, &rows[b].match_id))
        });
        let played: Vec<Played> = idx.iter().map(|&i| played_of[i].0).collect();
        for (k, &i) in idx.iter().enumerate() {
            let r = &rows[i];
            let mut feats = Vec::new();
            spec.push_row(
                &played,
                &Upcoming {
                    start_ms: r.start,
                    party: played_of[i].1,
                    skill_percentile: f64::NAN,
                },
                r.outcome,
                &mut feats,
            );
            let next = idx.get(k + 1).map(|&j| rows[j].start);
            out.insert(
                (r.player.clone(), r.match_id.clone()),
                (feats, label(r.start, next, end, horizon_ms)),
            );
        }
    }
    out
}

/// Every feature and label of the polars query equals the row-at-a-time reference, on both
/// simulated modes (6v6 with parties and team scores; 1v1 with draws).
#[test]
fn polars_query_matches_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        players: 1_500,
        days: 6,
        ..SimConfig::default()
    })
    .unwrap();
    let horizon_ms = 8 * 3_600_000;
    for mode in ["tdm-6v6", "duel-1v1"] {
        let rows = read_rows(&lake, mode);
        assert!(rows.len() > 1000, "{mode}: {} rows", rows.len());
        // Count windows reaching before the mode's first match are censored.
        let spec = FeatureSpec {
            history: 4,
            data_start_ms: rows.iter().map(|r| r.start).min(),
            outcome_interactions: 3,
            past_churn_horizon_ms: Some(horizon_ms),
            outcome_pattern: 3,
        };
        let want = reference(&rows, spec, horizon_ms, 30.0);
        let q = FeatureQuery {
            until_ms: None,
            files: Lake::open(&lake).unwrap().matches_files().unwrap(),
            mode: Some(mode.into()),
            history: spec.history,
            outcome_interactions: spec.outcome_interactions,
            outcome_pattern: spec.outcome_pattern,
            past_churn: true,
            censor_windows: true,
            horizon_ms,
            blowout_margin: 30.0,
            skill: None,
            data_start_ms: None,
            data_end_ms: None,
            truth: false,
        };
        let df = query(&q).unwrap().collect().unwrap();
        assert_eq!(df.height(), rows.len(), "{mode}");
        let names = spec.names();
        let pid = df.column("player_id").unwrap().str().unwrap().clone();
        let mid = df.column("match_id").unwrap().str().unwrap().clone();
        let churned: Vec<Option<bool>> = df
            .column("churned")
            .unwrap()
            .bool()
            .unwrap()
            .iter()
            .collect();
        let cols: Vec<Vec<Option<f32>>> = names
            .iter()
            .map(|n| {
                df.column(n.as_str())
                    .unwrap()
                    .f32()
                    .unwrap()
                    .iter()
                    .collect()
            })
            .collect();
        let (mut blowouts, mut parties, mut censored) = (0, 0, 0);
        let mut logodds_range = (f64::INFINITY, f64::NEG_INFINITY);
        for i in 0..df.height() {
            let key = (
                pid.get(i).unwrap().to_string(),
                mid.get(i).unwrap().to_string(),
            );
            let (feats, lab) = &want[&key];
            assert_eq!(churned[i], *lab, "{mode} {key:?}: label");
            censored += usize::from(lab.is_none());
            for (k, name) in names.iter().enumerate() {
                let got = f64::from(cols[k][i].unwrap());
                let w = feats[k];
                assert!(
                    (got - w).abs() <= 1e-4 * w.abs().max(1.0),
                    "{mode} {key:?}: {name} = {got}, reference {w}"
                );
                if name == "last_blowout_loss" {
                    blowouts += usize::from(w > 0.5);
                }
                if name == "party" {
                    parties += usize::from(w > 0.5);
                }
                if name == "past_churn_logodds" {
                    logodds_range = (logodds_range.0.min(w), logodds_range.1.max(w));
                }
            }
        }
        // The state a service starts from counts, per player, the consecutive matches more
        // than the horizon apart, as a count over the lake's rows by hand does.
        let mut starts: HashMap<&str, Vec<i64>> = HashMap::new();
        for r in &rows {
            starts.entry(r.player.as_str()).or_default().push(r.start);
        }
        let st = state_query(&q).unwrap().collect().unwrap();
        let (sp, sg) = (
            st.column("player_id").unwrap().str().unwrap(),
            st.column("churned_gaps").unwrap().i64().unwrap(),
        );
        let mut with_gaps = 0;
        for i in 0..st.height() {
            let mut t = starts[sp.get(i).unwrap()].clone();
            t.sort_unstable();
            let want = t.windows(2).filter(|w| w[1] - w[0] > horizon_ms).count() as i64;
            assert_eq!(sg.get(i), Some(want), "{mode} {:?}", sp.get(i));
            with_gaps += usize::from(want > 0);
        }
        assert!(
            with_gaps > 100,
            "{mode}: {with_gaps} players with a churned gap"
        );
        // The comparison exercised what it checks.
        assert!(censored > 0, "{mode}: no censored rows");
        assert!(
            logodds_range.1 - logodds_range.0 > 1.0,
            "{mode}: churn history log-odds only in {logodds_range:?}"
        );
        if mode == "tdm-6v6" {
            assert!(
                blowouts > 0 && parties > 0,
                "{blowouts} blowouts, {parties} party rows"
            );
        }
    }
}

/// On a simulated 6v6 lake, the 8-hour churn model scored on the last quarter is calibrated
/// against the simulator's true churn probabilities, and ranks nearly as well as they do.
#[test]
fn churn_model_is_calibrated_against_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        players: 5_000,
        days: 21,
        duel_share: 0.0,
        ..SimConfig::default()
    })
    .unwrap();
    // The skill fit first (no tuning, no baselines): its pre-match percentiles are a feature.
    let skill = dir.path().join("skill");
    let mut sc = SkillConfig::new(lake.clone(), skill.clone());
    sc.mode = Some("tdm-6v6".into());
    sc.tune = false;
    sc.baselines = Vec::new();
    sc.html = false;
    fit_skill(&sc).unwrap();
    let out = dir.path().join("churn");
    let mut cfg = ChurnConfig::new(&lake, &out);
    cfg.mode = Some("tdm-6v6".into());
    cfg.skill = Some(skill);
    cfg.fit.c_grid = vec![0.001, 0.1, 10.0];
    let r = fit_churn(&cfg).unwrap();
    let t = r.truth.as_ref().unwrap();
    eprintln!(
        "rows {} censored {} train {} score {}: AUC {:.4} (truth {:.4}), ECE vs labels {:.4}, vs truth {:.4}, mean |diff| {:.4}, C {}",
        r.rows,
        r.censored,
        r.train_rows,
        r.score_rows,
        r.auc,
        t.truth_auc,
        r.scored.ece,
        t.ece_vs_truth,
        t.mean_abs_diff,
        r.c
    );
    assert_eq!(t.rows, r.score_rows, "every scored row has its truth");
    assert!(r.censored > 0);
    assert!(
        t.ece_vs_truth < 0.01,
        "calibration error vs truth {}",
        t.ece_vs_truth
    );
    assert!(
        r.auc > 0.55 && r.auc <= t.truth_auc + 0.01,
        "{} vs {}",
        r.auc,
        t.truth_auc
    );
    // A constant prediction at the training rows' churn rate is calibrated too: the model must
    // be much nearer the true probabilities, row by row, than that constant is (checked here
    // from the written table, and in the report).
    let (model_mad, constant_mad) = mad_vs_constant(&out.join("churn_features.parquet"));
    assert!(
        (t.mean_abs_diff - model_mad).abs() < 1e-9,
        "{} vs {model_mad}",
        t.mean_abs_diff
    );
    assert!(
        (t.constant_mean_abs_diff - constant_mad).abs() < 1e-3,
        "{} vs {constant_mad}",
        t.constant_mean_abs_diff
    );
    assert!(
        model_mad < 0.75 * constant_mad,
        "mean |p - truth| {model_mad:.4}, the training churn rate's {constant_mad:.4}"
    );
    // TDM has draws (the time limit): every pattern of wins and losses is there, and some with D.
    for pat in ["WWW", "WWL", "WLW", "LWW", "WLL", "LWL", "LLW", "LLL"] {
        assert!(r.by_last_three.iter().any(|g| g.group == pat), "{pat}");
    }
    assert_eq!(r.by_skill_decile.len(), 10, "{:?}", r.by_skill_decile);
    assert_eq!(r.by_party.len(), 2);
    for f in [
        "churn_model.json",
        "churn_metrics.json",
        "churn_report.html",
        "churn_features.parquet",
    ] {
        assert!(out.join(f).exists(), "{f}");
    }
    let html = std::fs::read_to_string(out.join("churn_report.html")).unwrap();
    assert!(html.contains("Reliability") && html.contains("<svg"));
}

/// Online equals batch for what a match adds to a player's history: the service's live update
/// (`mm_artifact::online::played_of`, on the matches read back from the lake's files) gives
/// every player-match the outcome, score difference, performance rank and blowout flag that the
/// churn feature query's per-match step (`played_query`, polars) computes, on both simulated
/// modes (6v6 with parties and team scores; 1v1 with draws).
#[test]
fn the_live_update_computes_the_feature_query_values() {
    use mm_artifact::online::played_of;
    use mm_fit::churn::features::played_query;
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        players: 800,
        days: 3,
        ..SimConfig::default()
    })
    .unwrap();
    let l = Lake::open(&lake).unwrap();
    let margin = 30.0;
    for mode in ["tdm-6v6", "duel-1v1"] {
        let mut online = HashMap::new();
        for f in l.matches_files().unwrap() {
            for (m_mode, m) in mm_lake::results::read_finished(&f).unwrap() {
                if m_mode != mode {
                    continue;
                }
                for (r, p) in m.rows.iter().zip(played_of(&m, margin)) {
                    online.insert((r.player_id.clone(), m.match_id.clone()), p);
                }
            }
        }
        let q = FeatureQuery {
            until_ms: None,
            files: l.matches_files().unwrap(),
            mode: Some(mode.into()),
            history: 1,
            outcome_interactions: 0,
            outcome_pattern: 0,
            past_churn: false,
            censor_windows: true,
            horizon_ms: 8 * 3_600_000,
            blowout_margin: margin,
            skill: None,
            data_start_ms: None,
            data_end_ms: None,
            truth: false,
        };
        let df = played_query(&q).unwrap().collect().unwrap();
        assert_eq!(df.height(), online.len(), "{mode}");
        let s = |n: &str| df.column(n).unwrap().str().unwrap().clone();
        let b = |n: &str| -> Vec<Option<bool>> {
            df.column(n).unwrap().bool().unwrap().iter().collect()
        };
        let f =
            |n: &str| -> Vec<Option<f64>> { df.column(n).unwrap().f64().unwrap().iter().collect() };
        let (pid, mid) = (s("player_id"), s("match_id"));
        let (win, draw, blow) = (b("win"), b("draw"), b("blowout_loss"));
        let (diff, rank) = (f("score_diff"), f("perf_rank"));
        let same = |x: Option<f64>, y: f64| match x {
            None => y.is_nan(),
            Some(x) => (x - y).abs() <= 1e-12 * x.abs().max(1.0),
        };
        let (mut ranked, mut blowouts) = (0, 0);
        for i in 0..df.height() {
            let key = (
                pid.get(i).unwrap().to_string(),
                mid.get(i).unwrap().to_string(),
            );
            let p = &online[&key];
            let outcome = match (win[i], draw[i]) {
                (Some(true), _) => mm_artifact::Outcome::Win,
                (_, Some(true)) => mm_artifact::Outcome::Draw,
                _ => mm_artifact::Outcome::Loss,
            };
            assert_eq!(p.outcome, outcome, "{mode} {key:?}");
            assert!(
                same(diff[i], p.score_diff),
                "{mode} {key:?}: score_diff {:?} {}",
                diff[i],
                p.score_diff
            );
            assert!(
                same(rank[i], p.perf_rank),
                "{mode} {key:?}: perf_rank {:?} {}",
                rank[i],
                p.perf_rank
            );
            assert_eq!(blow[i], Some(p.blowout_loss), "{mode} {key:?}");
            ranked += usize::from(p.perf_rank.is_finite());
            blowouts += usize::from(p.blowout_loss);
        }
        // The comparison saw ranks, and (in the team mode) blowouts.
        assert!(ranked > df.height() / 2, "{mode}: {ranked} ranked");
        if mode == "tdm-6v6" {
            assert!(blowouts > 0, "{mode}: no blowout");
        }
    }
}

/// The scored rows' mean absolute difference to the simulator's churn probability: the
/// model's, and a constant's at the training rows' churn rate.
fn mad_vs_constant(table: &std::path::Path) -> (f64, f64) {
    use mm_fit::columns::{bools, f64s, read_frame, strings};
    let df = read_frame(table).unwrap();
    let split = strings(&df, table, "split").unwrap();
    let churned = bools(&df, table, "churned").unwrap();
    let p = f64s(&df, table, "p_churn").unwrap();
    let truth = f64s(&df, table, "truth_p_churn").unwrap();
    let train: Vec<f64> = (0..split.len())
        .filter(|&i| split[i] == "train")
        .filter_map(|i| churned[i].map(f64::from))
        .collect();
    let rate = train.iter().sum::<f64>() / train.len() as f64;
    let (mut m, mut c, mut n) = (0.0, 0.0, 0.0);
    for i in (0..split.len()).filter(|&i| split[i] == "score") {
        if let (Some(p), Some(t)) = (p[i], truth[i]) {
            m += (p - t).abs();
            c += (rate - t).abs();
            n += 1.0;
        }
    }
    assert!(n > 1_000.0, "{n} scored rows with their truth");
    (m / n, c / n)
}
