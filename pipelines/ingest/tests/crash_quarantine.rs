//! A run that dies at any step of its commit, with rows to quarantine: the quarantine table is
//! committed before the matches table, so a crash between the two leaves the quarantine entries
//! in and the matches out. The rerun must then commit the matches and add no quarantine entry
//! twice; after a crash earlier than that, it must add them all once.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use mm_ingest::{IngestConfig, NoProgress, ingest};
use mm_lake::Lake;
use mm_lake::txn::CrashPoint;

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/sample/with_errors.csv")
}

/// Rows of the quarantine and the matches tables at their latest versions.
fn rows(root: &Path) -> (usize, usize) {
    let lake = Lake::open(root).unwrap();
    let count = |files: Vec<PathBuf>| -> usize {
        files
            .iter()
            .flat_map(|f| mm_lake::parquet_io::read_parquet_columns(f, None).unwrap())
            .map(|b| b.num_rows())
            .sum()
    };
    (
        count(lake.quarantine_files().unwrap()),
        count(lake.matches_files().unwrap()),
    )
}

#[test]
fn a_rerun_after_a_crash_between_the_two_commits_stores_each_quarantined_row_once() {
    // The clean run's figures.
    let clean = tempfile::tempdir().unwrap();
    let r = ingest(
        &IngestConfig::new(clean.path(), vec![sample()]),
        &NoProgress,
    )
    .unwrap();
    let (quarantined, accepted) = (r.totals.quarantined, r.totals.accepted);
    assert!(quarantined > 0 && accepted > 0, "{:?}", r.totals);
    let want = rows(clean.path());
    assert_eq!(want.0 as u64, quarantined);

    for crash in [
        CrashPoint::BeforePublish,
        CrashPoint::AfterFirstPublish,
        CrashPoint::BeforeMatchesCommit,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = IngestConfig::new(dir.path(), vec![sample()]);
        cfg.crash_at = Some(crash);
        let err = ingest(&cfg, &NoProgress).unwrap_err().to_string();
        assert!(err.contains("test hook"), "{crash:?}: {err}");
        let after_crash = rows(dir.path());
        match crash {
            CrashPoint::BeforeMatchesCommit => {
                assert_eq!(
                    after_crash,
                    (want.0, 0),
                    "{crash:?}: quarantine in, matches out"
                );
            }
            _ => assert_eq!(after_crash, (0, 0), "{crash:?}: nothing committed"),
        }
        // The rerun: every accepted row once, every quarantined row once.
        let r = ingest(&IngestConfig::new(dir.path(), vec![sample()]), &NoProgress).unwrap();
        assert_eq!(r.totals.accepted, accepted, "{crash:?}");
        assert_eq!(rows(dir.path()), want, "{crash:?}");
        // And a third run changes nothing.
        ingest(&IngestConfig::new(dir.path(), vec![sample()]), &NoProgress).unwrap();
        assert_eq!(rows(dir.path()), want, "{crash:?}");
    }
}
