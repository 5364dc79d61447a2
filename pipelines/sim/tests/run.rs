//! The simulator as a job: determinism, the lake it writes, the truth beside it, bad configs.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mm_sim::{SimConfig, SimError, simulate};

fn small(lake: PathBuf, seed: u64) -> SimConfig {
    SimConfig {
        lake,
        seed,
        players: 1_500,
        days: 3,
        ..SimConfig::default()
    }
}

/// Every Parquet file under `dir`, by path relative to it.
fn parquet_files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

#[test]
fn same_seed_writes_byte_identical_parquet_and_another_seed_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let a = simulate(&small(dir.path().join("a"), 7)).unwrap();
    let b = simulate(&small(dir.path().join("b"), 7)).unwrap();
    let c = simulate(&small(dir.path().join("c"), 8)).unwrap();
    assert_eq!(a.rows, b.rows);
    let (fa, fb, fc) = (
        parquet_files(&dir.path().join("a")),
        parquet_files(&dir.path().join("b")),
        parquet_files(&dir.path().join("c")),
    );
    assert!(
        fa.len() >= 3 * 3,
        "lake, truth and skill files for 3 days: {:?}",
        fa.keys()
    );
    assert_eq!(fa.keys().collect::<Vec<_>>(), fb.keys().collect::<Vec<_>>());
    for (k, v) in &fa {
        assert!(
            fb[k] == *v,
            "{} differs between two runs of one seed",
            k.display()
        );
    }
    assert!(
        fa.values().zip(fc.values()).any(|(x, y)| x != y),
        "another seed gives other data"
    );
    assert!(c.rows > 0);
}

#[test]
fn writes_a_lake_that_the_lake_reads_with_truth_for_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = small(dir.path().join("lake"), 3);
    let report = simulate(&cfg).unwrap();
    let s = mm_lake::summary::summarize(&mm_lake::Lake::open(&cfg.lake).unwrap(), 0).unwrap();
    assert_eq!(s.match_rows, report.rows);
    assert!(report.matches_tdm > 0 && report.matches_duel > 0);
    // One truth row per lake row.
    let truth: usize = parquet_files(&cfg.lake.join("truth/player_matches"))
        .keys()
        .map(|k| {
            let p = cfg.lake.join("truth/player_matches").join(k);
            mm_lake::parquet_io::read_parquet_columns(&p, Some(&["p_stop"]))
                .unwrap()
                .iter()
                .map(|b| b.num_rows())
                .sum::<usize>()
        })
        .sum();
    assert_eq!(truth as u64, report.rows);
    let params: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cfg.lake.join("truth/params.json")).unwrap())
            .unwrap();
    assert_eq!(params["config"]["seed"], 3);
    assert!(cfg.lake.join("truth/players.parquet").exists());
    // Simulating into a lake that already holds matches is refused; nothing changes.
    let before = parquet_files(&cfg.lake);
    assert!(matches!(simulate(&cfg), Err(SimError::LakeNotEmpty(_))));
    assert_eq!(parquet_files(&cfg.lake), before);
}

#[test]
fn bad_configs_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let base = small(dir.path().join("lake"), 1);
    for (cfg, field) in [
        (
            SimConfig {
                players: 5,
                ..base.clone()
            },
            "players",
        ),
        (
            SimConfig {
                days: 0,
                ..base.clone()
            },
            "days",
        ),
        (
            SimConfig {
                duel_share: 1.5,
                ..base.clone()
            },
            "duel-share",
        ),
        (
            SimConfig {
                tick_s: 0,
                ..base.clone()
            },
            "tick-s",
        ),
    ] {
        let e = simulate(&cfg).unwrap_err();
        assert!(e.to_string().contains(field), "{e}");
    }
    assert!(
        !dir.path().join("lake").exists(),
        "a bad config touches nothing"
    );
}
