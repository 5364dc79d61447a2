//! The lake as Delta tables: a crash at any step of a commit leaves a committed version, two
//! runs from one snapshot commit both when disjoint and one when they overlap, and every
//! version stays readable.

use std::path::Path;

use mm_lake::txn::CrashPoint;
use mm_lake::{AsOf, Lake, LakeError, RowsBuilder, to_lake_batch};

use crate::util;

/// The two lake rows of match `match_id` on `day`: player `a` wins against player `b`.
fn two_rows(match_id: &str, day: i32) -> arrow_array::RecordBatch {
    let mut b = RowsBuilder::with_capacity(2);
    for (team, p) in [(0, "a"), (1, "b")] {
        let row = mm_lake::PlayerRow {
            match_id: match_id.into(),
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
    to_lake_batch(&b.finish()).unwrap()
}

/// Stages two rows per day, for players `a` and `b` of match `<tag>-<day>`.
fn stage_run(lake: &Lake, run: &str, tag: &str, days: &[i32]) -> mm_lake::Txn {
    let mut txn = lake.begin(run).unwrap();
    for &day in days {
        let rel = Lake::partition_rel(day).join(format!("part-{run}.parquet"));
        txn.write_parquet(&rel, &[two_rows(&format!("{tag}-{day}"), day)])
            .unwrap();
    }
    txn
}

fn rows(root: &Path) -> usize {
    util::rows(&root.join("matches"))
}

#[test]
fn a_crash_at_any_commit_step_leaves_the_last_committed_version() {
    for crash in [
        CrashPoint::BeforePublish,
        CrashPoint::AfterFirstPublish,
        CrashPoint::BeforeMatchesCommit,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open_or_create(dir.path()).unwrap();
        let v1 = stage_run(&lake, "r1", "r1", &[19_000, 19_001])
            .commit(&serde_json::json!({"run_id": "r1"}))
            .unwrap()
            .version;
        assert_eq!(rows(dir.path()), 4);

        let lake = Lake::open_or_create(dir.path()).unwrap();
        stage_run(&lake, "r2", "r2", &[19_001, 19_002, 19_003])
            .commit_crashing_at(&serde_json::json!({"run_id": "r2"}), crash)
            .unwrap();
        // Readers see the last committed version and none of the dead run's files.
        let after = Lake::open(dir.path()).unwrap();
        assert_eq!(after.version(), Some(v1), "{crash:?}");
        assert_eq!(rows(dir.path()), 4, "{crash:?}");
        assert_eq!(after.runs().unwrap().len(), 1, "{crash:?}");
        // The dead run's staging is removed once (its owner's lock is gone), then never again.
        assert_eq!(after.recover().unwrap().removed, vec!["r2".to_string()]);
        assert_eq!(after.recover().unwrap(), mm_lake::Recovery::default());
        // Rerunning the same rows commits them all.
        stage_run(&after, "r2-again", "r2", &[19_001, 19_002, 19_003])
            .commit(&serde_json::json!({"run_id": "r2-again"}))
            .unwrap();
        assert_eq!(rows(dir.path()), 10, "{crash:?}");
    }
}

#[test]
fn a_live_runs_staging_is_left_alone_by_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open_or_create(dir.path()).unwrap();
    let live = stage_run(&lake, "live", "x", &[19_000]);
    assert_eq!(lake.recover().unwrap(), mm_lake::Recovery::default());
    live.commit(&serde_json::json!({"run_id": "live"})).unwrap();
    assert_eq!(rows(dir.path()), 2);
}

/// A run starting while another process recovers the lake: recovery may look at the new run's
/// owner file between its creation and its lock, and must still leave the run alone.
#[test]
fn a_run_starting_during_recovery_keeps_its_staging() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open_or_create(dir.path()).unwrap();
    use std::sync::atomic::{AtomicBool, Ordering};
    /// Stops the recovering thread however the main loop ends (a failed assertion included).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = AtomicBool::new(false);
    let (started, removed) = std::thread::scope(|s| {
        let recoverer = s.spawn(|| {
            let mut removed = 0;
            while !stop.load(Ordering::Relaxed) {
                removed += lake.recover().map(|r| r.removed.len()).unwrap_or(1);
            }
            removed
        });
        let guard = Stop(&stop);
        let started = (0..300)
            .filter(|k| {
                let run = format!("r{k}");
                lake.begin(&run).is_ok_and(|txn| {
                    let alive = dir.path().join("_txn").join(&run).join("data").is_dir();
                    drop(txn);
                    alive
                })
            })
            .count();
        drop(guard);
        (started, recoverer.join().unwrap())
    });
    assert_eq!(started, 300, "every run started and kept its staging");
    assert_eq!(removed, 0, "no live run was taken for dead");
}

#[test]
fn two_runs_from_one_snapshot_both_commit_when_disjoint_and_one_when_they_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open_or_create(dir.path()).unwrap();
    let v0 = lake.version().unwrap();
    // Disjoint: same day, different matches. The loser re-checks the winner's keys and retries.
    let a = stage_run(&lake, "a", "a", &[19_000]);
    let b = stage_run(&lake, "b", "b", &[19_000, 19_001]);
    assert_eq!(
        a.commit(&serde_json::json!({"run_id": "a"}))
            .unwrap()
            .version,
        v0 + 1
    );
    assert_eq!(
        b.commit(&serde_json::json!({"run_id": "b"}))
            .unwrap()
            .version,
        v0 + 2
    );
    assert_eq!(rows(dir.path()), 6);

    // Overlapping: both hold match c-19002; the second to commit is refused and adds nothing.
    let lake = Lake::open(dir.path()).unwrap();
    let c1 = stage_run(&lake, "c1", "c", &[19_002]);
    let c2 = stage_run(&lake, "c2", "c", &[19_002, 19_003]);
    c1.commit(&serde_json::json!({"run_id": "c1"})).unwrap();
    let err = c2.commit(&serde_json::json!({"run_id": "c2"})).unwrap_err();
    assert!(matches!(err, LakeError::Conflict { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("c1") && msg.contains("match c-19002"), "{msg}");
    assert_eq!(rows(dir.path()), 8);
    // No duplicate key, and the refused run's published files were taken back out.
    let keys = util::read_tree(&dir.path().join("matches"))
        .iter()
        .map(arrow_array::RecordBatch::num_rows)
        .sum::<usize>();
    assert_eq!(keys, 8);
    let c2_files: Vec<_> = walk_files(&dir.path().join("matches"))
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("part-c2"))
        .collect();
    assert!(c2_files.is_empty(), "{c2_files:?}");
}

fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk_files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn every_version_stays_readable_and_compaction_changes_no_rows() {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open_or_create(dir.path()).unwrap();
    let v1 = stage_run(&lake, "r1", "r1", &[19_000, 19_001])
        .commit(&serde_json::json!({"run_id": "r1"}))
        .unwrap()
        .version;
    let lake = Lake::open(dir.path()).unwrap();
    let v2 = stage_run(&lake, "r2", "r2", &[19_001])
        .commit(&serde_json::json!({"run_id": "r2"}))
        .unwrap()
        .version;
    let lake = Lake::open(dir.path()).unwrap();
    assert_eq!(lake.partition_files(19_001).unwrap().len(), 2);
    let opt = lake.optimize(2).unwrap();
    assert_eq!((opt.days_compacted, opt.files_removed, opt.rows), (1, 2, 4));
    let now = Lake::open(dir.path()).unwrap();
    assert_eq!(now.version(), opt.version);
    assert_eq!(now.partition_files(19_001).unwrap().len(), 1);
    assert_eq!(rows(dir.path()), 6);
    // Time travel: each version as it was, by number and by time.
    let at = |v: i64| Lake::open_as_of(dir.path(), AsOf::Version(v)).unwrap();
    let n = |l: &Lake| -> usize {
        l.matches_files()
            .unwrap()
            .iter()
            .flat_map(|f| mm_lake::parquet_io::read_parquet_columns(f, None).unwrap())
            .map(|b| b.num_rows())
            .sum()
    };
    assert_eq!((n(&at(v1)), n(&at(v2))), (4, 6));
    assert_eq!(at(v2).partition_files(19_001).unwrap().len(), 2);
    let future = Lake::open_as_of(dir.path(), AsOf::Time(4_102_444_800_000)).unwrap();
    assert_eq!(future.version(), opt.version);
    let missing = Lake::open_as_of(dir.path(), AsOf::Version(99)).unwrap_err();
    assert!(missing.is_input(), "{missing}");
    // The run records come from the log, oldest first (the compaction records itself too).
    let runs: Vec<String> = now
        .runs()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(&runs[..2], ["r1", "r2"]);
}

#[test]
fn a_lake_of_the_old_layout_is_refused_until_converted_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let day = root.join(Lake::partition_rel(19_000));
    std::fs::create_dir_all(&day).unwrap();
    mm_lake::parquet_io::write_parquet_file(
        &day.join("part-old.parquet"),
        &[two_rows("old-1", 19_000)],
    )
    .unwrap();
    std::fs::create_dir_all(root.join("_runs")).unwrap();
    std::fs::write(root.join("_runs/old.json"), r#"{"run_id":"old"}"#).unwrap();
    let err = Lake::open(root).unwrap_err();
    assert!(
        err.is_input() && err.to_string().contains("mm lake convert"),
        "{err}"
    );
    let lake = Lake::convert_legacy(root).unwrap();
    assert_eq!(lake.partition_files(19_000).unwrap().len(), 1);
    assert_eq!(rows(root), 2);
    let runs = lake.runs().unwrap();
    assert_eq!(runs[0]["runs_before"][0]["run_id"], "old");
    // Now an ordinary Delta lake: a new run adds to it.
    stage_run(&lake, "new", "new", &[19_000])
        .commit(&serde_json::json!({"run_id": "new"}))
        .unwrap();
    assert_eq!(rows(root), 4);
}
