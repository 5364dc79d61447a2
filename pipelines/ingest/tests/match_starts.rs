//! The match-start rule over a whole run: the first row of a match (by file and line) fixes its
//! start, and a later row that disagrees is quarantined. The verdicts are only known after the
//! input has been read; when the staged rows pass the memory budget, days are written before
//! that, so a run with a refused row in such a day reads its input again. Whatever the budget,
//! the lake and the quarantine must come out the same.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType};
use mm_ingest::{IngestConfig, IngestError, NoProgress, Progress, RunReport, ingest};
use mm_lake::Lake;
use mm_lake::parquet_io::read_parquet_columns;

const DAY: i64 = 86_400;
const T0: i64 = 1_704_067_200; // 2024-01-01

/// (match, player) -> start ms of every lake row.
fn lake_rows(root: &Path) -> BTreeMap<(String, String), i64> {
    let lake = Lake::open(root).unwrap();
    let mut out = BTreeMap::new();
    for f in lake.matches_files().unwrap() {
        for b in read_parquet_columns(&f, Some(&["match_id", "player_id", "start_time"])).unwrap() {
            let m = b.column_by_name("match_id").unwrap().as_string::<i32>();
            let p = b.column_by_name("player_id").unwrap().as_string::<i32>();
            let s = b
                .column_by_name("start_time")
                .unwrap()
                .as_primitive::<TimestampMillisecondType>();
            for i in 0..b.num_rows() {
                let old = out.insert((m.value(i).to_string(), p.value(i).to_string()), s.value(i));
                assert!(old.is_none(), "stored twice");
            }
        }
    }
    out
}

/// line -> reason of every quarantine entry.
fn quarantine(root: &Path) -> BTreeMap<i64, String> {
    let lake = Lake::open(root).unwrap();
    let mut out = BTreeMap::new();
    for f in lake.quarantine_files().unwrap() {
        for b in read_parquet_columns(&f, Some(&["line", "reason"])).unwrap() {
            let l = b
                .column_by_name("line")
                .unwrap()
                .as_primitive::<Int64Type>();
            let r = b.column_by_name("reason").unwrap().as_string::<i32>();
            for i in 0..b.num_rows() {
                out.insert(l.value(i), r.value(i).to_string());
            }
        }
    }
    out
}

/// 1,500 two-player matches over five days in time order, and then three late rows (lines
/// 3002-3004): m5 again on its own first day at another time (refused), m10 again at its own
/// start (a new player, kept), and m1490 again, on the last day, at another time (refused).
fn input(dir: &Path, name: &str, with_m5: bool) -> std::path::PathBuf {
    let mut csv = String::from("match_id,player_id,team,start_ts,outcome\n");
    let start = |m: i64| T0 + m * (5 * DAY / 1500);
    for m in 0..1500 {
        let s = start(m);
        writeln!(csv, "m{m},a{},0,{s},win", m % 97).unwrap();
        writeln!(csv, "m{m},b{},1,{s},loss", m % 89).unwrap();
    }
    if with_m5 {
        writeln!(csv, "m5,c1,0,{},win", start(5) + 60).unwrap();
    }
    writeln!(csv, "m10,c2,1,{},loss", start(10)).unwrap();
    writeln!(csv, "m1490,c3,1,{},loss", start(1490) + 60).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, csv).unwrap();
    path
}

fn run(dir: &Path, name: &str, csv: &Path, stage_rows: usize) -> RunReport {
    let mut cfg = IngestConfig::new(dir.join(name), vec![csv.to_path_buf()]);
    cfg.stage_rows = stage_rows;
    cfg.chunk_bytes = 4096;
    ingest(&cfg, &NoProgress).unwrap()
}

#[test]
fn a_late_row_at_another_start_is_refused_whatever_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    let csv = input(dir.path(), "late.csv", true);
    // Everything staged at once, then a budget that writes days early: the refused row of m5
    // is in a day already written when the input ends, so that run reads its input again.
    let whole = run(dir.path(), "whole", &csv, 1_000_000);
    let early = run(dir.path(), "early", &csv, 1000);

    for r in [&whole, &early] {
        let c = r.totals;
        assert_eq!(
            (c.read, c.accepted, c.quarantined, c.duplicates),
            (3003, 3001, 2, 0)
        );
        assert!(c.balanced());
    }
    assert!(!whole.read_twice);
    assert!(
        early.read_twice,
        "m5's day was written before the input ended"
    );

    let rows = lake_rows(&dir.path().join("whole"));
    assert_eq!(rows.len(), 3001);
    assert_eq!(rows, lake_rows(&dir.path().join("early")));
    assert!(rows.contains_key(&("m10".into(), "c2".into())));
    assert!(!rows.contains_key(&("m5".into(), "c1".into())));

    let q = quarantine(&dir.path().join("whole"));
    assert_eq!(q.keys().copied().collect::<Vec<_>>(), [3002, 3004]);
    assert!(q[&3002].contains("match m5 starts at 2024-01-01 00:25:00.000 UTC here but at 2024-01-01 00:24:00.000 UTC in an earlier row"), "{}", q[&3002]);
    assert_eq!(q, quarantine(&dir.path().join("early")));

    // Without m5's row, the one refused row is in the newest day, still in memory: the run
    // reads its input once although it wrote days early.
    let newest = input(dir.path(), "newest.csv", false);
    let once = run(dir.path(), "once", &newest, 1000);
    assert!(!once.read_twice);
    let c = once.totals;
    assert_eq!((c.read, c.accepted, c.quarantined), (3002, 3001, 1));
    assert_eq!(
        quarantine(&dir.path().join("once"))
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        [3003]
    );
    assert_eq!(lake_rows(&dir.path().join("once")), rows);

    // No scratch or staging is left behind by either run, the one read twice included.
    for name in ["whole", "early", "once"] {
        let txn = dir.path().join(name).join("_txn");
        let left = std::fs::read_dir(&txn).map_or(0, |d| d.count());
        assert_eq!(left, 0, "{name}: {} left", txn.display());
    }
}

/// Appends a row to the input when the run starts reading it a second time, as a writer that
/// is still filling the file would.
struct Rewriter<'a>(&'a Path);

impl Progress for Rewriter<'_> {
    fn stage(&self, what: &str) {
        if what.starts_with("reading again") {
            use std::io::Write as _;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(self.0)
                .unwrap();
            writeln!(f, "m1499,c9,0,{},win", T0 + 1499 * (5 * DAY / 1500)).unwrap();
        }
    }
}

#[test]
fn a_file_that_changes_between_the_two_reads_is_refused_and_the_lake_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    // The lake already holds a run of other matches.
    let first = dir.path().join("first.csv");
    let mut csv = String::from("match_id,player_id,team,start_ts,outcome\n");
    for m in 0..50 {
        writeln!(csv, "x{m},a{m},0,{},win", T0 + m * 3600).unwrap();
        writeln!(csv, "x{m},b{m},1,{},loss", T0 + m * 3600).unwrap();
    }
    std::fs::write(&first, csv).unwrap();
    let kept = run(dir.path(), "lake", &first, 1000);
    assert_eq!(kept.totals.accepted, 100);
    let before = (lake_rows(&lake), quarantine(&lake));
    let versions = |l: &Lake| (l.version(), l.quarantine_version());
    let version = versions(&Lake::open(&lake).unwrap());

    // A second file whose refused row makes the run read it again; it changes in between.
    let csv = input(dir.path(), "growing.csv", true);
    let mut cfg = IngestConfig::new(lake.clone(), vec![csv.clone()]);
    cfg.stage_rows = 1000;
    cfg.chunk_bytes = 4096;
    let err = ingest(&cfg, &Rewriter(&csv)).unwrap_err();
    assert!(
        matches!(&err, IngestError::Input { path, reason }
            if path == &csv && reason == "the file changed while it was being ingested"),
        "{err}"
    );
    assert!(err.is_input());
    // It was read twice (the row was appended), and nothing of the run reached the lake.
    assert!(std::fs::read_to_string(&csv).unwrap().contains("m1499,c9"));
    assert_eq!(versions(&Lake::open(&lake).unwrap()), version);
    assert_eq!((lake_rows(&lake), quarantine(&lake)), before);
    let left = std::fs::read_dir(lake.join("_txn")).map_or(0, |d| d.count());
    assert_eq!(left, 0, "staging or scratch left behind");
}
