//! The daily `mm retrain`: the promoted model continued over the days it has not seen, on a
//! small simulated world (6v6 only). Two continued days give every player the raw skill of a
//! replay of the whole history with the first model's parameters (to 1e-12), and the same
//! state as a full fit of the same lake; a compaction is not taken for new matches, late
//! matches are counted; a day with nothing new keeps the model; a log cleaned up past the
//! model's version makes the run full, and says why.

use std::collections::HashMap;
use std::path::Path;

use mm_artifact::{Artifact, Store};
use mm_lake::Lake;

use crate::util::mm;

const MODE: &str = "tdm-6v6";

fn run(args: &[&str]) -> String {
    let (code, out, err) = mm(args);
    assert_eq!(code, 0, "mm {args:?}\n{out}{err}");
    out
}

fn latest(models: &Path) -> Artifact {
    Store::new(models.join(MODE)).open_latest().unwrap()
}

/// Two late 6v6 matches on the world's third day, of players nobody else plays with (so that
/// applying them after the model's own matches changes no one else's skill).
fn late_csv(path: &Path, tag: &str) {
    let mut s = String::from(
        "match_id,player_id,team,start_time,end_time,outcome,kills,deaths,deaths_by_enemy,mode\n",
    );
    for m in 0..2 {
        for p in 0..12 {
            let (team, outcome) = if p < 6 { (0, "win") } else { (1, "loss") };
            s += &format!(
                "late-{tag}-{m},late-{tag}-{m}-{p},{team},2024-01-03 1{m}:00:00,2024-01-03 1{m}:10:00,{outcome},{},{},{},{MODE}\n",
                3 + p % 4,
                1 + p % 3,
                1 + p % 3
            );
        }
    }
    std::fs::write(path, s).unwrap();
}

/// Every player's raw skill and games from a replay of the lake's matches before `until`,
/// from nothing, with `art`'s parameters and party offsets.
fn replay(art: &Artifact, lake: &Path, until: i64) -> HashMap<String, (f64, u32)> {
    let metric = mm_fit::Metric::parse(&art.skill.metric).unwrap();
    let h = mm_fit::skill::history::read_history(&Lake::open(lake).unwrap(), Some(MODE), metric)
        .unwrap();
    let none = mm_fit::skill::replay::Windows {
        tune_from: 0,
        tune_to: 0,
        score_from: 1,
        score_to: 0,
    };
    let params = art.skill.raw_skill.check().unwrap();
    let mut r = mm_fit::skill::replay::OursReplay::new(
        params,
        art.skill.party_offsets,
        until,
        none,
        None,
        0,
    );
    let mut pre = vec![f32::NAN; h.rows()];
    r.feed(&h, &mut pre);
    let run = r.finish();
    let players = run.model.players();
    h.ids
        .iter()
        .enumerate()
        .filter(|(i, _)| *i < players.len() && players[*i].games > 0)
        .map(|(i, id)| (id.clone(), (players[i].skill, players[i].games)))
        .collect()
}

#[test]
fn a_continued_retrain_equals_the_full_history() {
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s).to_str().unwrap().to_string();
    std::fs::write(
        dir.path().join("world.toml"),
        "seed = 11\nplayers = 1000\ndays = 10\nduel_share = 0.3\nstart = \"2024-01-01\"\n",
    )
    .unwrap();
    let (lake, models, work) = (p("lake"), p("models"), p("work"));
    let retrain = |extra: &[&str]| {
        let mut a = vec![
            "retrain", "--mode", MODE, "--lake", &lake, "--models", &models, "--work", &work,
            "--margin", "1",
        ];
        a.extend_from_slice(extra);
        run(&a)
    };

    // Day 0: a full fit (nothing to continue) on the days before the last three.
    let world = p("world.toml");
    let out = retrain(&[
        "--simulate",
        &world,
        "--holdout-days",
        "3",
        "--churn-window-days",
        "3",
    ]);
    assert!(
        out.contains("full fit  no promoted model to continue"),
        "{out}"
    );
    let v1 = latest(Path::new(&models));
    // The full run seeded the churn window (a Delta table) with its own rows of its last 3
    // days (`--churn-window-days`), in one partition: its cutoff day.
    let window = dir.path().join("work/tdm-6v6/churn-window");
    let seeded = window_partitions(&window);
    assert_eq!(seeded.len(), 1, "{seeded:?}");
    let (seed_day, seed_rows) = seeded.iter().next().map(|(d, n)| (d.clone(), *n)).unwrap();
    assert!(seed_rows > 1_000, "{seed_rows} seeded rows");
    let today = chrono::NaiveDate::parse_from_str(&seed_day, "%Y-%m-%d")
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis();
    let fit_rows = feature_rows(&dir.path().join("work/tdm-6v6/churn/churn_features.parquet"));
    let last3 = fit_rows
        .keys()
        .filter(|(_, start)| *start >= today - 3 * 86_400_000)
        .count() as u64;
    assert_eq!(seed_rows, last3);
    assert!(
        last3 < fit_rows.len() as u64,
        "the fit's rows are all in its last 3 days"
    );

    // Two late matches arrive for an old day, and the day is compacted (a rewrite with no new
    // data): the next run counts 24 late rows, not the compacted day's.
    late_csv(&dir.path().join("late-a.csv"), "a");
    run(&["ingest", &p("late-a.csv"), "--lake", &lake, "-q"]);
    let out = run(&["lake", "optimize", "--lake", &lake]);
    assert!(out.contains("1 days compacted"), "{out}");

    // Day 1 and day 2: continued.
    let out = retrain(&["--holdout-days", "2", "--churn-min-rows", "1000"]);
    assert!(out.contains("continued v0001"), "{out}");
    assert!(out.contains(", 2 late (24 rows)"), "{out}");
    // The first continued day refits the churn model: the seed fills its window.
    assert!(out.contains("churn model refitted at C"), "{out}");
    let after = window_partitions(&window);
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after[&seed_day], seed_rows);
    let out = retrain(&["--holdout-days", "1"]);
    assert!(out.contains("continued v0002"), "{out}");
    assert!(out.contains(", 0 late (0 rows)"), "{out}");
    let v3 = latest(Path::new(&models));
    assert_eq!(v3.manifest.model_version, "v0003");
    let c = &v3.manifest.metrics["continued"];
    assert_eq!(c["base"], "v0002");

    // Raw skill: a replay of the whole history with v0001's parameters, to 1e-12.
    let cutoff = (v3.manifest.snapshot_as_of_ms / 86_400_000 + 1) * 86_400_000;
    let full = replay(&v1, Path::new(&lake), cutoff);
    assert_eq!(full.len(), v3.snapshot.len());
    for s in v3.snapshot.iter() {
        let (skill, games) = full[&s.player_id];
        assert!(
            (s.raw_skill - skill).abs() <= 1e-12,
            "{}: {} vs {skill}",
            s.player_id,
            s.raw_skill
        );
        assert_eq!(s.games, u64::from(games), "{}", s.player_id);
    }

    // The state: a full fit of the same lake at the same cutoff holds the same players with
    // the same history, window counts and churned gaps.
    let (models2, work2) = (p("models-full"), p("work-full"));
    let out = run(&[
        "retrain",
        "--mode",
        MODE,
        "--lake",
        &lake,
        "--models",
        &models2,
        "--work",
        &work2,
        "--holdout-days",
        "1",
        "--full",
    ]);
    assert!(out.contains("full fit  --full"), "{out}");
    let f = latest(Path::new(&models2));
    assert_eq!(f.manifest.snapshot_as_of_ms, v3.manifest.snapshot_as_of_ms);
    assert_eq!(f.snapshot.len(), v3.snapshot.len());
    for (a, b) in f.snapshot.iter().zip(v3.snapshot.iter()) {
        assert_eq!(a.player_id, b.player_id);
        let key = |s: &mm_artifact::snapshot::PlayerState| {
            format!(
                "{} {} {:?} {:?} {:?} {} {:?}",
                s.games,
                s.last_seen_ms,
                s.first_seen_ms,
                s.window_counts,
                s.before_recent_ms,
                s.churned_gaps,
                s.recent
            )
        };
        assert_eq!(key(&a), key(&b), "{}", a.player_id);
    }

    // The churn feature rows of the two continued days equal the full fit's rows of the same
    // player-matches, feature by feature, to 1e-6 (the polars query and the row-at-a-time
    // code round the log-hours differently in the last bits), but the skill percentile: the
    // continued rows read the promoted model's percentile map, the full fit its own.
    let full_rows = feature_rows(
        &dir.path()
            .join("work-full/tdm-6v6/churn/churn_features.parquet"),
    );
    let mut continued = HashMap::new();
    let table = mm_lake::derived::DerivedTable::open(&window)
        .unwrap()
        .unwrap();
    for f in table.files().unwrap() {
        if f.partition["run"] != seed_day {
            // Out of its `run=...` folder, which polars would read as a column.
            let copy = dir.path().join("window-part.parquet");
            std::fs::copy(table.local_file(&f.path).unwrap(), &copy).unwrap();
            continued.extend(feature_rows(&copy));
        }
    }
    assert!(
        continued.len() > 2_000,
        "{} continued rows",
        continued.len()
    );
    for (key, row) in &continued {
        let full = full_rows
            .get(key)
            .unwrap_or_else(|| panic!("{key:?} is not in the full fit's table"));
        for (name, v) in row {
            if name.contains("skill") {
                continue;
            }
            let w = full[name];
            assert!(
                (v - w).abs() <= 1e-6 * w.abs().max(1.0) || (v.is_nan() && w.is_nan()),
                "{key:?} {name}: {v} continued, {w} full"
            );
        }
    }

    // Nothing new: the model is kept and no stage runs.
    let out = retrain(&["--holdout-days", "1"]);
    assert!(
        out.contains("kept v0003: no match of this mode since"),
        "{out}"
    );
    assert!(!Path::new(&models).join(MODE).join("v0004").exists());

    // The log cleaned up past v0003's version (two commits after it, then a checkpoint that
    // deletes every entry before the last): the run cannot tell what is new, so it is full.
    late_csv(&dir.path().join("late-b.csv"), "b");
    run(&["ingest", &p("late-b.csv"), "--lake", &lake, "-q"]);
    run(&["lake", "optimize", "--lake", &lake]);
    run(&["lake", "checkpoint", "--lake", &lake, "--expire-hours", "0"]);
    let out = retrain(&["--holdout-days", "1"]);
    assert!(
        out.contains("full fit  the lake's log no longer holds version"),
        "{out}"
    );
}

/// The churn window's partitions (run days) and their rows, from its Delta log.
fn window_partitions(table: &Path) -> std::collections::BTreeMap<String, u64> {
    let t = mm_lake::derived::DerivedTable::open(table)
        .unwrap()
        .unwrap();
    let mut out = std::collections::BTreeMap::new();
    for f in t.files().unwrap() {
        *out.entry(f.partition["run"].clone()).or_insert(0) += f.rows.unwrap();
    }
    out
}

/// The feature rows of a churn table (the fit's, or a continued run's window), by player and
/// match start: each feature's value by name.
fn feature_rows(path: &Path) -> HashMap<(String, i64), HashMap<String, f64>> {
    use mm_fit::columns::{f64s, i64s, read_frame, strings};
    let df = read_frame(path).unwrap();
    let players = strings(&df, path, "player_id").unwrap();
    let starts = i64s(&df, path, "start_ms").unwrap();
    let names: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|n| n.to_string())
        .filter(|n| {
            ![
                "player_id",
                "match_id",
                "start_ms",
                "churned",
                "truth_p_churn",
                "split",
                "p_churn",
            ]
            .contains(&n.as_str())
        })
        .collect();
    let cols: Vec<Vec<Option<f64>>> = names.iter().map(|n| f64s(&df, path, n).unwrap()).collect();
    let mut out = HashMap::new();
    for i in 0..players.len() {
        let row = names
            .iter()
            .zip(&cols)
            .map(|(n, c)| (n.clone(), c[i].unwrap_or(f64::NAN)))
            .collect();
        out.insert((players[i].clone(), starts[i].unwrap()), row);
    }
    out
}
