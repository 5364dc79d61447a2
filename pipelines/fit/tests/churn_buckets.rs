//! The bucketed, sharded feature build against the one-query reference: on a simulated lake,
//! every shard count and bucket size gives exactly the rows and values of `query()` over the
//! whole lake (which `polars_query_matches_the_reference` checks against a row-at-a-time
//! reference).

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use mm_fit::churn_build::{BuildInput, Shard, build};
use mm_fit::churn_features::{FeatureQuery, query};
use mm_fit::{SkillConfig, fit_skill};
use mm_lake::Lake;
use mm_sim::{SimConfig, simulate};
use polars::prelude::*;

fn sorted(df: DataFrame) -> DataFrame {
    df.sort(
        ["player_id", "match_id"],
        SortMultipleOptions::default().with_maintain_order(true),
    )
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
            censor_windows: true,
            horizon_ms: 8 * 3_600_000,
            blowout_margin: 30.0,
            skill,
            data_start_ms: None,
            data_end_ms: None,
            truth: false,
        };
        let whole = sorted(query(&q).unwrap().collect().unwrap());
        assert!(whole.height() > 2_000, "{mode}: {} rows", whole.height());
        for (n, chunk_rows) in [(1, usize::MAX), (1, 900), (3, 2_000), (4, 150)] {
            let mut files = Vec::new();
            let (mut rows, mut buckets) = (0, 0);
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
                        scratch,
                    },
                )
                .unwrap();
                assert_eq!(stats.parts.iter().map(|p| p.rows).sum::<u64>(), stats.rows);
                rows += stats.rows;
                buckets += stats.buckets;
                files.extend(stats.parts.iter().map(|p| p.features.clone()));
            }
            assert_eq!(rows, whole.height() as u64, "{mode} {n} shards");
            if chunk_rows == 150 {
                assert!(buckets > 20, "{buckets} buckets");
            }
            let got = sorted(read(&files));
            assert_eq!(got.get_column_names(), whole.get_column_names());
            assert!(
                got.equals_missing(&whole),
                "{mode}, {n} shards of buckets of {chunk_rows} rows: the table differs"
            );
        }
    }
}
