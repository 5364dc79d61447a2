//! Crashes at every step of a commit: after recovery the lake holds all of the run or none of it.

use std::path::Path;

use mm_lake::store::CrashPoint;
use mm_lake::{Lake, RowsBuilder, to_lake_batch};

use crate::util;

fn stage_run(lake: &Lake, run: &str, days: &[i32]) -> mm_lake::Txn {
    let lock = lake.lock().unwrap();
    let mut txn = lake.begin(&lock, run).unwrap();
    for &day in days {
        let mut b = RowsBuilder::with_capacity(2);
        for (team, p) in [(0, "a"), (1, "b")] {
            let row = mm_lake::PlayerRow {
                match_id: format!("{run}-{day}").into(),
                mode: "m".into(),
                start_ms: i64::from(day) * 86_400_000,
                team,
                player_id: p.into(),
                outcome: Some(if team == 0 {
                    mm_lake::schema::Outcome::Win
                } else {
                    mm_lake::schema::Outcome::Loss
                }),
                ..Default::default()
            };
            b.push(&row, "t", 1, 0, 1);
        }
        let rel = Lake::partition_rel(day).join(format!("part-{run}.parquet"));
        txn.write_parquet(&rel, &[to_lake_batch(&b.finish()).unwrap()])
            .unwrap();
    }
    drop(lock);
    txn
}

fn rows(root: &Path) -> usize {
    util::rows(&root.join("matches"))
}

#[test]
fn a_crash_at_any_commit_step_leaves_all_or_nothing_after_recovery() {
    for (crash, survives) in [
        (CrashPoint::BeforeCommitRecord, false),
        (CrashPoint::AfterCommitRecord, true),
        (CrashPoint::AfterFirstMove, true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open(dir.path()).unwrap();
        stage_run(&lake, "r1", &[19_000, 19_001])
            .commit(&serde_json::json!({"run": 1}))
            .unwrap();
        assert_eq!(rows(dir.path()), 4);
        let before = util::snapshot(dir.path());

        stage_run(&lake, "r2", &[19_001, 19_002, 19_003])
            .commit_crashing_at(&serde_json::json!({"run": 2}), crash)
            .unwrap();
        let lock = lake.lock().unwrap();
        let rec = lake.recover(&lock).unwrap();
        if survives {
            assert_eq!(rec.rolled_forward, vec!["r2".to_string()], "{crash:?}");
            assert_eq!(rows(dir.path()), 10, "{crash:?}");
            assert_eq!(lake.runs().unwrap().len(), 2);
        } else {
            assert_eq!(rec.rolled_back, vec!["r2".to_string()], "{crash:?}");
            assert_eq!(util::snapshot(dir.path()), before, "{crash:?}");
        }
        // recovery is idempotent
        assert_eq!(lake.recover(&lock).unwrap(), mm_lake::Recovery::default());
    }
}

#[test]
fn a_second_writer_is_refused_while_the_lock_is_held() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open(dir.path()).unwrap();
    let _held = lake.lock().unwrap();
    let err = lake.lock().unwrap_err();
    assert!(
        err.to_string().contains("another run holds the lake lock"),
        "{err}"
    );
}
