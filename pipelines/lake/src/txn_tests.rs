//! Unit tests of `txn.rs`: what a run's commit leaves in the tables, the log and the staging
//! area, at the end and at each simulated crash point; the application transaction of an
//! idempotent writer; a file name already taken; a concurrent winner's quarantine keys.

use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, StringArray};
use tempfile::TempDir;

use super::*;
use crate::rows::{PlayerRow, RowsBuilder, to_lake_batch};
use crate::schema::{DAY_MS, Outcome, quarantine_schema};
use crate::store::TXN_DIR;

const DAY0: i32 = 19_700;

/// One 1v1 match per pair of `players` on `DAY0` (ids `m<k>`, the first of each pair wins).
fn matches_batch(players: &[&str]) -> RecordBatch {
    let mut b = RowsBuilder::with_capacity(players.len());
    for (k, p) in players.iter().enumerate() {
        let row = PlayerRow {
            match_id: format!("m{}", k / 2).into(),
            mode: "duel".into(),
            start_ms: i64::from(DAY0) * DAY_MS + (k / 2) as i64 * 1000,
            team: (k % 2) as i32,
            player_id: (*p).into(),
            outcome: Some(if k % 2 == 0 {
                Outcome::Win
            } else {
                Outcome::Loss
            }),
            ..PlayerRow::default()
        };
        b.push(&row, "test.csv", k as u64 + 1, 0, 1);
    }
    to_lake_batch(&b.finish()).unwrap()
}

/// Quarantine entries of run `run`: the lines `lines` of a source file whose content hash is
/// `sha`.
fn quarantine_batch(run: &str, sha: &str, lines: &[i64]) -> RecordBatch {
    let n = lines.len();
    let text = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v; n])) };
    let none = || -> ArrayRef { Arc::new(StringArray::from(vec![None::<&str>; n])) };
    let cols: Vec<ArrayRef> = vec![
        text(run),
        text("bad.csv"),
        text(sha),
        Arc::new(Int64Array::from(lines.to_vec())),
        text("validate"),
        text("kills"),
        text("kills is negative"),
        none(),
        none(),
        none(),
    ];
    RecordBatch::try_new(quarantine_schema(), cols).unwrap()
}

const SHA: &str = "abcdef0123456789abcdef0123456789";

fn matches_rel(run: &str) -> PathBuf {
    Lake::partition_rel(DAY0).join(format!("part-{run}.parquet"))
}

fn quarantine_rel(run: &str) -> PathBuf {
    Path::new(QUARANTINE_DIR).join(format!("part-{run}.parquet"))
}

/// A run from `lake`'s snapshot staging one matches file of `players` and, when `lines` is not
/// empty, one quarantine file of those lines.
fn stage(lake: &Lake, run: &str, players: &[&str], lines: &[i64]) -> Txn {
    let mut txn = lake.begin(run).unwrap();
    txn.write_parquet(&matches_rel(run), &[matches_batch(players)])
        .unwrap();
    if !lines.is_empty() {
        txn.write_parquet(&quarantine_rel(run), &[quarantine_batch(run, SHA, lines)])
            .unwrap();
    }
    txn
}

/// The Parquet files under a table directory (outside its log), relative to it, sorted.
fn data_files(table: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![table.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if !p.ends_with("_delta_log") {
                    dirs.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "parquet") {
                let rel = p.strip_prefix(table).unwrap().to_string_lossy();
                out.push(rel.replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

fn new_lake() -> (TempDir, Lake) {
    let dir = tempfile::tempdir().unwrap();
    let lake = Lake::open_or_create(dir.path()).unwrap();
    (dir, lake)
}

fn run_record(run: &str) -> serde_json::Value {
    serde_json::json!({"run_id": run, "rows": 2})
}

#[test]
fn a_run_commits_its_matches_and_its_quarantine_in_one_version_each() {
    let (dir, lake) = new_lake();
    assert_eq!(
        (lake.version(), lake.quarantine_version()),
        (Some(0), Some(0))
    );
    let txn = stage(&lake, "r1", &["p1", "p2"], &[3, 4]);
    assert_eq!(txn.run_id(), "r1");
    let staging = dir.path().join(TXN_DIR).join("r1");
    assert!(staging.join(OWNER_FILE).is_file());
    let scratch = txn.scratch_dir().unwrap();
    assert!(scratch.starts_with(&staging) && scratch.is_dir());
    let c = txn.commit(&run_record("r1")).unwrap();
    assert_eq!(
        c,
        Committed {
            version: 1,
            quarantine_version: Some(1)
        }
    );
    assert!(!staging.exists(), "the staging is removed after the commit");

    let lake = Lake::open(dir.path()).unwrap();
    assert_eq!(
        (lake.version(), lake.quarantine_version()),
        (Some(1), Some(1))
    );
    assert_eq!(
        data_files(&dir.path().join(MATCHES_DIR)),
        vec!["day=2023-12-09/part-r1.parquet"]
    );
    assert_eq!(
        data_files(&dir.path().join(QUARANTINE_DIR)),
        vec!["part-r1.parquet"]
    );
    let entry = &lake.match_entries()[0];
    assert_eq!((entry.day, entry.rows), (Some(DAY0), Some(2)));
    let h = lake.history(1).unwrap();
    assert_eq!(
        (h[0].version, h[0].run_id.as_deref(), h[0].rows_added),
        (1, Some("r1"), Some(2))
    );

    // A run that quarantines nothing leaves the quarantine table where it was.
    let c = stage(&lake, "r2", &["p3", "p4"], &[])
        .commit(&run_record("r2"))
        .unwrap();
    assert_eq!(
        c,
        Committed {
            version: 2,
            quarantine_version: Some(1)
        }
    );
}

/// What `write_parquet` returns is the size of the file the table then holds.
#[test]
fn the_bytes_written_are_the_published_file_s_size() {
    let (dir, lake) = new_lake();
    let mut txn = lake.begin("r1").unwrap();
    let bytes = txn
        .write_parquet(&matches_rel("r1"), &[matches_batch(&["p1", "p2"])])
        .unwrap();
    txn.commit(&run_record("r1")).unwrap();
    let published = dir.path().join(matches_rel("r1"));
    assert_eq!(fs::metadata(published).unwrap().len(), bytes);
    assert!(bytes > 0);
}

/// An idempotent writer (kafka-delta-ingest's way): the matches commit records the writer's
/// application transaction; a run that records the same writer at that version or an earlier
/// one, staged from a snapshot before it, is refused as already committed and leaves nothing;
/// a later version, or another writer, commits.
#[test]
fn a_writer_s_application_transaction_makes_a_retried_flush_commit_nothing() {
    let (dir, lake) = new_lake();
    let with_app = |run: &str, player: &str, app: &str, v: i64| {
        let rival = format!("{player}-rival");
        let mut t = stage(&lake, run, &[player, rival.as_str()], &[]);
        t.set_app_transaction(app, v);
        t
    };
    let first = with_app("r1", "a", "replica-a", 3);
    let again = with_app("r2", "b", "replica-a", 3);
    let older = with_app("r3", "c", "replica-a", 2);
    let newer = with_app("r4", "d", "replica-a", 4);
    let other = with_app("r5", "e", "replica-b", 3);
    assert_eq!(first.commit(&run_record("r1")).unwrap().version, 1);
    assert_eq!(
        Lake::open(dir.path())
            .unwrap()
            .app_transaction("replica-a")
            .unwrap(),
        Some(3)
    );
    for (txn, version) in [(again, 3), (older, 2)] {
        match txn.commit(&run_record("retry")) {
            Err(LakeError::AlreadyCommitted {
                app_id,
                version: v,
                committed,
                ..
            }) => assert_eq!((app_id.as_str(), v, committed), ("replica-a", version, 3)),
            other => panic!("expected AlreadyCommitted, got {other:?}"),
        }
    }
    assert_eq!(newer.commit(&run_record("r4")).unwrap().version, 2);
    assert_eq!(other.commit(&run_record("r5")).unwrap().version, 3);
    let lake = Lake::open(dir.path()).unwrap();
    assert_eq!(lake.app_transaction("replica-a").unwrap(), Some(4));
    assert_eq!(lake.app_transaction("replica-b").unwrap(), Some(3));
    assert_eq!(lake.app_transaction("replica-c").unwrap(), None);
    // The refused runs' files were removed again: only committed files are in the table.
    let day = "day=2023-12-09";
    assert_eq!(
        data_files(&dir.path().join(MATCHES_DIR)),
        ["r1", "r4", "r5"].map(|r| format!("{day}/part-{r}.parquet"))
    );
}

/// Two runs from one snapshot quarantine the same line of the same file content: the second
/// commits nothing, names the line and the content, and removes what it published.
#[test]
fn a_quarantine_line_a_concurrent_winner_holds_makes_the_run_commit_nothing() {
    let (dir, lake) = new_lake();
    let first = stage(&lake, "r1", &["p1", "p2"], &[7, 8]);
    let second = stage(&lake, "r2", &["p3", "p4"], &[9, 7]);
    let disjoint = stage(&lake, "r3", &["p5", "p6"], &[10]);
    first.commit(&run_record("r1")).unwrap();
    let err = second.commit(&run_record("r2")).unwrap_err();
    let LakeError::Conflict { reason, .. } = &err else {
        panic!("expected a conflict, got {err:?}");
    };
    assert!(
        reason.starts_with("another run (r1) committed version 1 with rows this run also holds")
            && reason.contains("(source line 7 of file content abcdef012345)"),
        "{reason}"
    );
    assert_eq!(
        data_files(&dir.path().join(QUARANTINE_DIR)),
        vec!["part-r1.parquet"]
    );
    assert_eq!(data_files(&dir.path().join(MATCHES_DIR)).len(), 1);
    let c = disjoint.commit(&run_record("r3")).unwrap();
    assert_eq!(
        c,
        Committed {
            version: 2,
            quarantine_version: Some(2)
        }
    );
}

/// A run whose file name is already taken in the table refuses to replace it, commits nothing,
/// and the file there keeps its rows.
#[test]
fn a_lake_file_is_never_overwritten() {
    let (dir, lake) = new_lake();
    stage(&lake, "r1", &["p1", "p2"], &[])
        .commit(&run_record("r1"))
        .unwrap();
    let path = dir.path().join(matches_rel("r1"));
    let before = fs::read(&path).unwrap();
    let lake = Lake::open(dir.path()).unwrap();
    let mut txn = lake.begin("r2").unwrap();
    txn.write_parquet(
        &matches_rel("r1"),
        &[matches_batch(&["p3", "p4", "p5", "p6"])],
    )
    .unwrap();
    let err = txn.commit(&run_record("r2")).unwrap_err();
    assert!(
        matches!(&err, LakeError::Corrupt { path: p, reason }
            if p == &path && reason == "refusing to overwrite an existing lake file"),
        "{err:?}"
    );
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(Lake::open(dir.path()).unwrap().version(), Some(1));
}

/// A file beside the tables (the simulator's truth) is placed at the root and rewritten whole
/// by the next run that writes it; it is in no table.
#[test]
fn a_side_file_is_placed_beside_the_tables_and_rewritten_whole() {
    let (dir, _) = new_lake();
    let side = Path::new("truth").join("players.parquet");
    let mut sizes = Vec::new();
    for (run, truth) in [
        ("r1", vec!["p1", "p2"]),
        ("r2", vec!["p1", "p2", "p3", "p4"]),
    ] {
        let lake = Lake::open(dir.path()).unwrap();
        let (a, b) = (format!("{run}-a"), format!("{run}-b"));
        let mut txn = stage(&lake, run, &[a.as_str(), b.as_str()], &[]);
        let bytes = txn.write_parquet(&side, &[matches_batch(&truth)]).unwrap();
        txn.commit(&run_record(run)).unwrap();
        assert_eq!(fs::metadata(dir.path().join(&side)).unwrap().len(), bytes);
        sizes.push(bytes);
    }
    assert_ne!(sizes[0], sizes[1]);
    // In no table: the matches table holds the two runs' files only.
    assert_eq!(Lake::open(dir.path()).unwrap().match_entries().len(), 2);
}

/// A run dropped without committing removes its staging and adds nothing.
#[test]
fn a_run_dropped_without_commit_leaves_nothing() {
    let (dir, lake) = new_lake();
    let txn = stage(&lake, "r1", &["p1", "p2"], &[1]);
    let staging = dir.path().join(TXN_DIR).join("r1");
    assert!(staging.is_dir());
    drop(txn);
    assert!(!staging.exists());
    assert!(data_files(&dir.path().join(MATCHES_DIR)).is_empty());
    assert_eq!(Lake::open(dir.path()).unwrap().version(), Some(0));
}

/// Each crash point leaves what a process dying there would: the staging (which `recover`
/// removes), the files published so far (in no version), and the commits made so far.
#[test]
fn each_crash_point_leaves_what_a_dead_process_would() {
    let m = |d: &TempDir| data_files(&d.path().join(MATCHES_DIR));
    let q = |d: &TempDir| data_files(&d.path().join(QUARANTINE_DIR));
    for (crash, matches, quarantine, versions) in [
        (CrashPoint::BeforePublish, 0, 0, (0, 0)),
        // Files publish in sorted order: the matches file (`matches/...`) first.
        (CrashPoint::AfterFirstPublish, 1, 0, (0, 0)),
        (CrashPoint::BeforeMatchesCommit, 1, 1, (0, 1)),
    ] {
        let (dir, lake) = new_lake();
        stage(&lake, "r1", &["p1", "p2"], &[5])
            .commit_crashing_at(&run_record("r1"), crash)
            .unwrap();
        assert_eq!(
            (m(&dir).len(), q(&dir).len()),
            (matches, quarantine),
            "{crash:?}"
        );
        let lake = Lake::open(dir.path()).unwrap();
        assert_eq!(
            (lake.version(), lake.quarantine_version()),
            (Some(versions.0), Some(versions.1)),
            "{crash:?}"
        );
        assert!(dir.path().join(TXN_DIR).join("r1").is_dir(), "{crash:?}");
        assert_eq!(lake.recover().unwrap().removed, vec!["r1".to_string()]);
    }
}

#[test]
fn partition_values_come_from_the_day_directory() {
    assert_eq!(
        partition_of("day=2024-01-01/part-x.parquet"),
        Some("2024-01-01".to_string())
    );
    assert_eq!(partition_of("part-x.parquet"), None);
}

/// Files written from other threads: `write_staged` (synced in the background) or the caller's
/// own file at `staged_path`, each registered with `add_staged`, are published like
/// `write_parquet`'s; the run's debug form names it and counts its files.
#[test]
fn files_staged_by_other_writers_are_published_when_registered() {
    let (dir, lake) = new_lake();
    let mut txn = lake.begin("r1").unwrap();
    let (a, b) = (matches_rel("r1-a"), matches_rel("r1-b"));
    let bytes = std::thread::scope(|s| {
        s.spawn(|| txn.write_staged(&a, &[matches_batch(&["p1", "p2"])]))
            .join()
            .unwrap()
    })
    .unwrap();
    let own = txn.staged_path(&b).unwrap();
    assert!(own.starts_with(dir.path().join(TXN_DIR).join("r1")));
    crate::parquet_io::write_parquet_file(&own, &[matches_batch(&["p3", "p4"])]).unwrap();
    txn.add_staged(&a);
    txn.add_staged(&b);
    let debug = format!("{txn:?}");
    assert!(
        debug.starts_with("Txn {")
            && debug.contains("run_id: \"r1\"")
            && debug.contains("files: 2"),
        "{debug}"
    );
    txn.commit(&run_record("r1")).unwrap();
    assert_eq!(
        data_files(&dir.path().join(MATCHES_DIR)),
        ["r1-a", "r1-b"].map(|r| format!("day=2023-12-09/part-{r}.parquet"))
    );
    assert_eq!(fs::metadata(dir.path().join(&a)).unwrap().len(), bytes);
    assert_eq!(Lake::open(dir.path()).unwrap().match_entries().len(), 2);
}

/// A compaction's remove actions carry what the Delta protocol asks of a remove with
/// `extendedFileMetadata`: the partition values and the size of the file removed, its deletion
/// time (which VACUUM's retention counts from) and `dataChange: false` (the rows are the same).
#[test]
fn a_compaction_s_remove_actions_are_complete() {
    let (dir, lake) = new_lake();
    for (run, players) in [("r1", ["p1", "p2"]), ("r2", ["p3", "p4"])] {
        let lake = Lake::open(dir.path()).unwrap();
        stage(&lake, run, &players, &[])
            .commit(&run_record(run))
            .unwrap();
    }
    drop(lake);
    let lake = Lake::open(dir.path()).unwrap();
    let before: HashMap<String, u64> = lake
        .match_entries()
        .iter()
        .map(|f| (f.path.clone(), f.bytes))
        .collect();
    let t0 = chrono::Utc::now().timestamp_millis();
    let report = lake.optimize(2).unwrap();
    assert_eq!((report.version, report.files_removed), (Some(3), 2));
    let log = dir
        .path()
        .join(MATCHES_DIR)
        .join("_delta_log")
        .join("00000000000000000003.json");
    let mut removed = HashMap::new();
    for line in fs::read_to_string(log).unwrap().lines() {
        let action: serde_json::Value = serde_json::from_str(line).unwrap();
        let Some(r) = action.get("remove") else {
            continue;
        };
        let path = r["path"].as_str().unwrap().to_string();
        assert_eq!(r["dataChange"], false, "{r}");
        assert_eq!(r["extendedFileMetadata"], true, "{r}");
        assert_eq!(r["partitionValues"]["day"], "2023-12-09", "{r}");
        let at = r["deletionTimestamp"].as_i64().unwrap();
        assert!(
            at >= t0 && at <= chrono::Utc::now().timestamp_millis(),
            "{r}"
        );
        removed.insert(path, r["size"].as_u64().unwrap());
    }
    assert_eq!(removed, before);
    assert_eq!(Lake::open(dir.path()).unwrap().match_entries().len(), 1);
}
