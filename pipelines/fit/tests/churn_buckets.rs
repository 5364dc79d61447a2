//! The bucketed, sharded feature build against the one-query reference: on a simulated lake,
//! every shard count and bucket size gives exactly the rows and values of `query()` over the
//! whole lake (which `polars_query_matches_the_reference` checks against a row-at-a-time
//! reference), and of `state_query()` for the players' state.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use mm_fit::churn::build::{BuildInput, Shard, WIDE_ROWS, build};
use mm_fit::churn::features::{FeatureQuery, query, state_query};
use mm_fit::{SkillConfig, fit_skill};
use mm_lake::Lake;
use mm_sim::{SimConfig, simulate};
use polars::prelude::*;

fn sorted(df: DataFrame) -> DataFrame {
    sorted_by(df, ["player_id", "match_id"])
}

fn sorted_by(df: DataFrame, by: [&str; 2]) -> DataFrame {
    df.sort(by, SortMultipleOptions::default().with_maintain_order(true))
        .unwrap()
}

fn read(files: &[std::path::PathBuf]) -> DataFrame {
    let mut out: Option<DataFrame> = None;
    for f in files {
        let df = ParquetReader::new(std::fs::File::open(f).unwrap())
            .finish()
            .unwrap();
        match out.as_mut() {
            None => out = Some(df),
            Some(o) => {
                o.vstack_mut(&df).unwrap();
            }
        }
    }
    out.unwrap()
}

#[test]
fn bucketed_shards_give_the_whole_query() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    simulate(&SimConfig {
        lake: lake.clone(),
        players: 1_200,
        days: 5,
        ..SimConfig::default()
    })
    .unwrap();
    let skill = dir.path().join("skill");
    let mut sc = SkillConfig::new(lake.clone(), skill.clone());
    sc.mode = Some("tdm-6v6".into());
    sc.tune = false;
    sc.baselines = Vec::new();
    sc.html = false;
    fit_skill(&sc).unwrap();
    let opened = Lake::open(&lake).unwrap();
    let days = opened.days().unwrap().len();
    for (mode, skill) in [
        ("tdm-6v6", Some(skill.join("match_skill.parquet"))),
        ("duel-1v1", None),
    ] {
        let q = FeatureQuery {
            files: opened.matches_files().unwrap(),
            mode: Some(mode.into()),
            until_ms: None,
            history: 4,
            outcome_interactions: 2,
            outcome_pattern: 3,
            past_churn: mode == "tdm-6v6",
            censor_windows: true,
            horizon_ms: 8 * 3_600_000,
            blowout_margin: 30.0,
            skill,
            data_start_ms: None,
            data_end_ms: None,
            truth: false,
        };
        let whole = sorted(query(&q).unwrap().collect().unwrap());
        let whole_state = sorted_by(
            state_query(&q).unwrap().collect().unwrap(),
            ["player_id", "slot"],
        );
        assert!(whole.height() > 2_000, "{mode}: {} rows", whole.height());
        // The state's window counts, recounted by hand: each player's matches in the 8 hours
        // and the week before the data's last match start.
        let ids = whole.column("player_id").unwrap().str().unwrap();
        let starts = whole.column("start_ms").unwrap().i64().unwrap();
        let end = starts.max().unwrap();
        let mut want: std::collections::HashMap<&str, [i64; 2]> = Default::default();
        for (id, t) in ids.iter().zip(starts.iter()) {
            let c = want.entry(id.unwrap()).or_default();
            let t = t.unwrap();
            c[0] += i64::from(t >= end - 8 * 3_600_000 && t < end);
            c[1] += i64::from(t >= end - 168 * 3_600_000 && t < end);
        }
        let last = whole_state
            .clone()
            .lazy()
            .filter(col("slot").eq(lit(1i64)))
            .collect()
            .unwrap();
        let (ids, m8, m1w) = (
            last.column("player_id").unwrap().str().unwrap(),
            last.column("matches_8h").unwrap().i64().unwrap(),
            last.column("matches_1w").unwrap().i64().unwrap(),
        );
        assert_eq!(last.height(), want.len());
        let mut recent = 0;
        for i in 0..last.height() {
            let w = want[ids.get(i).unwrap()];
            assert_eq!([m8.get(i).unwrap(), m1w.get(i).unwrap()], w, "{mode}");
            recent += usize::from(w[0] > 0);
        }
        assert!(
            recent > 10,
            "{mode}: {recent} players played in the last 8 hours"
        );
        // Feature rows written at a time: the default, a few players, one player. Each slice
        // is a query of its own (about 20 ms) and the slicing does not depend on the mode, so
        // one player a slice runs on the 1v1 mode only; 6v6 takes wider slices there.
        let narrowest = if mode == "duel-1v1" { 1 } else { 700 };
        for (n, chunk_rows, wide_rows) in [
            (1, usize::MAX, WIDE_ROWS),
            (1, 900, 40),
            (3, 2_000, 700),
            (4, 150, narrowest),
        ] {
            let (mut files, mut state) = (Vec::new(), Vec::new());
            let (mut rows, mut buckets, mut sliced, mut spills) = (0, 0, 0, 0);
            for k in 0..n {
                let scratch = dir
                    .path()
                    .join(format!("scratch-{mode}-{n}-{chunk_rows}-{k}"));
                let stats = build(
                    &opened,
                    &BuildInput {
                        query: q.clone(),
                        truth_column: None,
                        shard: Shard { k, n },
                        chunk_rows,
                        wide_rows,
                        scratch,
                    },
                )
                .unwrap();
                assert_eq!(stats.parts.iter().map(|p| p.rows).sum::<u64>(), stats.rows);
                rows += stats.rows;
                buckets += stats.buckets;
                spills += stats.spill_files;
                for p in &stats.parts {
                    // A part holds one row group per slice of whole players: one per player
                    // when a slice may hold one row, one when the part is smaller than a slice.
                    let groups = ParquetReader::new(std::fs::File::open(&p.features).unwrap())
                        .get_metadata()
                        .unwrap()
                        .row_groups
                        .len();
                    let players = read(std::slice::from_ref(&p.features))
                        .column("player_id")
                        .unwrap()
                        .n_unique()
                        .unwrap();
                    if wide_rows == 1 {
                        assert_eq!(groups, players);
                    } else if p.rows <= wide_rows as u64 {
                        assert!(groups <= 1, "{groups} row groups of {} rows", p.rows);
                    }
                    sliced += usize::from(groups > 1);
                }
                files.extend(stats.parts.iter().map(|p| p.features.clone()));
                state.extend(stats.parts.iter().map(|p| p.state.clone()));
            }
            assert_eq!(rows, whole.height() as u64, "{mode} {n} shards");
            if chunk_rows == 150 {
                assert!(buckets > 20, "{buckets} buckets");
            }
            // Days are held until this shard's rows reach a bucket's size, then spilled as one
            // file (every bucket's rows): all days at once without a limit; more than once at
            // 900 rows when a day holds more (about 2,000 6v6 rows), but never more than once
            // a day, whatever the buckets.
            match chunk_rows {
                usize::MAX => assert_eq!(spills, 1, "{mode}: one bucket, one spill"),
                900 if mode == "tdm-6v6" => assert!(
                    spills > 1 && spills <= days && buckets > 1,
                    "{mode}: {spills} spill files for {days} days and {buckets} buckets"
                ),
                _ => {}
            }
            let got = sorted(read(&files));
            assert_eq!(got.get_column_names(), whole.get_column_names());
            assert!(
                got.equals_missing(&whole),
                "{mode}, {n} shards of buckets of {chunk_rows} rows, slices of {wide_rows}: the table differs"
            );
            if wide_rows < 1000 {
                assert!(
                    sliced > 0,
                    "{mode}, slices of {wide_rows}: no part was written in slices"
                );
            }
            let got_state = sorted_by(read(&state), ["player_id", "slot"]);
            assert!(whole_state.height() > 500);
            assert!(
                got_state.equals_missing(&whole_state),
                "{mode}, {n} shards of buckets of {chunk_rows} rows: the state differs"
            );
        }
    }
}
