//! The same matches as CSV, JSON lines and Parquet land as the same lake rows and the same
//! quarantine: the CSV path is the reference for the other two readers. Each file is read in
//! small chunks, so JSON lines' line numbers cross chunk boundaries; the JSON file also holds a
//! blank line (skipped, not read), a value that is not an object and a line that is not JSON.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMillisecondType};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use mm_ingest::{IngestConfig, NoProgress, RunReport, ingest};
use mm_lake::Lake;
use mm_lake::parquet_io::read_parquet_columns;

const DAY: i64 = 86_400;
const T0: i64 = 1_704_067_200; // 2024-01-01
const MATCHES: i64 = 200;

/// One input row: match, player, team, start (s), outcome, kills, server (an unknown column,
/// kept in `extra`).
type Row = (String, String, i64, i64, String, String, String);

/// 200 two-player matches over two days in time order, but for match 3 (day 0) whose rows come
/// after match 150's (day 1); match 10's loser has kills "x" and match 20's winner the outcome
/// "maybe".
fn rows() -> Vec<Row> {
    let start = |m: i64| T0 + m * (2 * DAY / MATCHES);
    let two = |m: i64| -> Vec<Row> {
        let kills = |p: &str| {
            if m == 10 && p == "b" {
                "x".to_string()
            } else {
                (m % 7).to_string()
            }
        };
        let outcome = if m == 20 { "maybe" } else { "win" };
        vec![
            (
                format!("m{m}"),
                format!("a{m}"),
                0,
                start(m),
                outcome.into(),
                kills("a"),
                "eu".into(),
            ),
            (
                format!("m{m}"),
                format!("b{m}"),
                1,
                start(m),
                "loss".into(),
                kills("b"),
                "na".into(),
            ),
        ]
    };
    let mut out = Vec::new();
    for m in (0..MATCHES).filter(|&m| m != 3) {
        out.extend(two(m));
        if m == 150 {
            out.extend(two(3));
        }
    }
    out
}

const HEADER: [&str; 7] = [
    "match_id",
    "player_id",
    "team",
    "start_ts",
    "outcome",
    "kills",
    "server",
];

fn csv_line(r: &Row) -> String {
    format!("{},{},{},{},{},{},{}", r.0, r.1, r.2, r.3, r.4, r.5, r.6)
}

fn json_line(r: &Row) -> String {
    format!(
        r#"{{"match_id": "{}", "player_id": "{}", "team": {}, "start_ts": {}, "outcome": "{}", "kills": "{}", "server": "{}"}}"#,
        r.0, r.1, r.2, r.3, r.4, r.5, r.6
    )
}

/// The JSON file's lines: a blank line after the 100th row, and at the end a value that is not
/// an object and a line that is not JSON. Returns the path and each row's line number.
fn write_jsonl(dir: &Path, rows: &[Row]) -> (PathBuf, Vec<u64>) {
    let mut text = String::new();
    let mut lines = Vec::new();
    let mut line = 0u64;
    for (k, r) in rows.iter().enumerate() {
        if k == 100 {
            text.push_str("   \n");
            line += 1;
        }
        line += 1;
        lines.push(line);
        writeln!(text, "{}", json_line(r)).unwrap();
    }
    text.push_str("[1, 2]\n{\"match_id\": \n");
    let path = dir.join("rows.jsonl");
    std::fs::write(&path, text).unwrap();
    (path, lines)
}

fn write_csv(dir: &Path, rows: &[Row]) -> PathBuf {
    let mut text = HEADER.join(",") + "\n";
    for r in rows {
        writeln!(text, "{}", csv_line(r)).unwrap();
    }
    let path = dir.join("rows.csv");
    std::fs::write(&path, text).unwrap();
    path
}

/// Team and start as integers, the other columns as text.
fn write_parquet(dir: &Path, rows: &[Row]) -> PathBuf {
    let text = |f: &dyn Fn(&Row) -> String| -> ArrayRef {
        Arc::new(StringArray::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let int = |f: &dyn Fn(&Row) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    let batch = RecordBatch::try_from_iter([
        (HEADER[0], text(&|r| r.0.clone())),
        (HEADER[1], text(&|r| r.1.clone())),
        (HEADER[2], int(&|r| r.2)),
        (HEADER[3], int(&|r| r.3)),
        (HEADER[4], text(&|r| r.4.clone())),
        (HEADER[5], text(&|r| r.5.clone())),
        (HEADER[6], text(&|r| r.6.clone())),
    ])
    .unwrap();
    let path = dir.join("rows.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    path
}

fn run(lake: &Path, input: &Path) -> RunReport {
    let mut cfg = IngestConfig::new(lake, vec![input.to_path_buf()]);
    cfg.chunk_bytes = 4096; // the minimum: about 30 JSON lines a chunk
    ingest(&cfg, &NoProgress).unwrap()
}

/// (match, player) -> (team, start ms, outcome, kills, extra) of every lake row.
type LakeRows = BTreeMap<(String, String), (i64, i64, String, String, String)>;

fn lake_rows(root: &Path) -> LakeRows {
    let lake = Lake::open(root).unwrap();
    let mut out = BTreeMap::new();
    let cols = [
        "match_id",
        "player_id",
        "team",
        "start_time",
        "outcome",
        "kills",
        "extra",
    ];
    for f in lake.matches_files().unwrap() {
        for b in read_parquet_columns(&f, Some(&cols)).unwrap() {
            let text = |c: &str, i: usize| -> String {
                let a =
                    arrow_cast::cast(b.column_by_name(c).unwrap(), &arrow_schema::DataType::Utf8)
                        .unwrap();
                let a = a.as_string::<i32>();
                if a.is_null(i) {
                    "null".into()
                } else {
                    a.value(i).to_string()
                }
            };
            let start = b
                .column_by_name("start_time")
                .unwrap()
                .as_primitive::<TimestampMillisecondType>();
            for i in 0..b.num_rows() {
                let key = (text("match_id", i), text("player_id", i));
                let team: i64 = text("team", i).parse().unwrap();
                let v = (
                    team,
                    start.value(i),
                    text("outcome", i),
                    text("kills", i),
                    text("extra", i),
                );
                assert!(out.insert(key, v).is_none(), "stored twice");
            }
        }
    }
    out
}

/// line -> (stage, field, reason, raw) of every quarantine entry.
type Quarantine = BTreeMap<i64, (String, String, String, String)>;

fn quarantine(root: &Path) -> Quarantine {
    let lake = Lake::open(root).unwrap();
    let mut out = BTreeMap::new();
    for f in lake.quarantine_files().unwrap() {
        for b in
            read_parquet_columns(&f, Some(&["line", "stage", "field", "reason", "raw"])).unwrap()
        {
            let line = b
                .column_by_name("line")
                .unwrap()
                .as_primitive::<Int64Type>();
            let text = |c: &str, i: usize| -> String {
                let a = b.column_by_name(c).unwrap().as_string::<i32>();
                if a.is_null(i) {
                    String::new()
                } else {
                    a.value(i).to_string()
                }
            };
            for i in 0..b.num_rows() {
                let v = (
                    text("stage", i),
                    text("field", i),
                    text("reason", i),
                    text("raw", i),
                );
                assert!(
                    out.insert(line.value(i), v).is_none(),
                    "line quarantined twice"
                );
            }
        }
    }
    out
}

#[test]
fn json_lines_and_parquet_land_as_csv_does() {
    let dir = tempfile::tempdir().unwrap();
    let rows = rows();
    let n = rows.len() as u64;
    let csv = write_csv(dir.path(), &rows);
    let (jsonl, json_lines) = write_jsonl(dir.path(), &rows);
    let parquet = write_parquet(dir.path(), &rows);
    let reports: Vec<RunReport> = [("csv", &csv), ("jsonl", &jsonl), ("parquet", &parquet)]
        .iter()
        .map(|(name, input)| run(&dir.path().join(name), input))
        .collect();
    let lakes: Vec<LakeRows> = ["csv", "jsonl", "parquet"]
        .iter()
        .map(|name| lake_rows(&dir.path().join(name)))
        .collect();
    let qs: Vec<Quarantine> = ["csv", "jsonl", "parquet"]
        .iter()
        .map(|name| quarantine(&dir.path().join(name)))
        .collect();

    // The reference: the CSV run. Matches 10 and 20 each lose one row to a bad field, and their
    // other row, a match of one team, with it.
    let c = reports[0].totals;
    assert_eq!((c.read, c.accepted, c.quarantined), (n, n - 4, 4));
    assert_eq!(lakes[0].len() as u64, n - 4);
    // The report's groups: a bad field by its name, a match rule by its own.
    let by_reason = |r: &RunReport| -> Vec<(String, u64)> {
        let q = &r.files[0].quarantine_by_reason;
        q.iter().map(|(k, v)| (k.clone(), *v)).collect()
    };
    let groups = |extra: &[(&str, u64)]| -> Vec<(String, u64)> {
        let mut g: Vec<(String, u64)> =
            [("bad kills", 1), ("bad outcome", 1), ("match: one team", 2)]
                .iter()
                .chain(extra)
                .map(|&(k, v)| (k.to_string(), v))
                .collect();
        g.sort();
        g
    };
    assert_eq!(by_reason(&reports[0]), groups(&[]));
    assert_eq!(by_reason(&reports[2]), groups(&[]));
    // A record-level reason by its text up to the first colon.
    assert_eq!(
        by_reason(&reports[1]),
        groups(&[("invalid JSON", 1), ("not a JSON object", 1)])
    );
    // The late match (day 0, after day-1 rows in the file) is stored on its own day.
    assert_eq!(
        lakes[0][&("m3".into(), "a3".into())].1,
        (T0 + 3 * 864) * 1000
    );
    assert!(
        lakes[0][&("m5".into(), "a5".into())]
            .4
            .contains("\"server\":\"eu\"")
    );

    // The same lake rows from every format.
    assert_eq!(lakes[1], lakes[0], "JSON lines");
    assert_eq!(lakes[2], lakes[0], "Parquet");

    // JSON lines: every line read but the blank one, two more quarantined (not an object, not
    // JSON), at their own line numbers.
    let j = reports[1].totals;
    assert_eq!((j.read, j.accepted, j.quarantined), (n + 2, n - 4, 6));
    let last = json_lines[json_lines.len() - 1];
    assert_eq!(qs[1][&((last + 1) as i64)].2, "not a JSON object");
    assert!(
        qs[1][&((last + 2) as i64)].2.starts_with("invalid JSON"),
        "{:?}",
        qs[1]
    );
    let p = reports[2].totals;
    assert_eq!((p.read, p.accepted, p.quarantined), (n, n - 4, 4));

    // The same quarantine at each format's own line of the same row (CSV: after its header;
    // JSON lines: the line written; Parquet: the 1-based row), with each format's raw text.
    let bad_kills = rows.iter().position(|r| r.5 == "x").unwrap();
    for (k, r) in rows.iter().enumerate() {
        let at = [(k + 2) as i64, json_lines[k] as i64, (k + 1) as i64];
        let got: Vec<Option<&(String, String, String, String)>> =
            (0..3).map(|f| qs[f].get(&at[f])).collect();
        let strip = |q: Option<&(String, String, String, String)>| {
            q.map(|q| (q.0.clone(), q.1.clone(), q.2.clone()))
        };
        assert_eq!(strip(got[1]), strip(got[0]), "JSON line {}: {r:?}", at[1]);
        assert_eq!(strip(got[2]), strip(got[0]), "Parquet row {}: {r:?}", at[2]);
        if k == bad_kills {
            assert_eq!(got[0].unwrap().1, "kills");
            assert_eq!(got[0].unwrap().3, csv_line(r));
            assert_eq!(got[1].unwrap().3, json_line(r));
            assert_eq!(
                got[2].unwrap().3,
                format!(
                    "match_id={},player_id={},team={},start_ts={},outcome={},kills={},server={}",
                    r.0, r.1, r.2, r.3, r.4, r.5, r.6
                )
            );
        }
    }
}

/// Each JSON line is read by its own keys: a line with one more key than the line before (a
/// column kept in `extra`) keeps it.
#[test]
fn each_json_line_is_read_by_its_own_keys() {
    let dir = tempfile::tempdir().unwrap();
    let line = |m: &str, p: &str, team: u8, outcome: &str, zone: Option<&str>| {
        let zone = zone.map_or(String::new(), |z| format!(r#", "zone": "{z}""#));
        format!(
            r#"{{"match_id": "{m}", "player_id": "{p}", "team": {team}, "start_ts": {T0}, "outcome": "{outcome}"{zone}}}"#
        )
    };
    let text = [
        line("m1", "a", 0, "win", None),
        line("m1", "b", 1, "loss", Some("north")),
        line("m2", "c", 0, "win", Some("south")),
        line("m2", "d", 1, "loss", None),
    ]
    .join("\n")
        + "\n";
    let path = dir.path().join("keys.jsonl");
    std::fs::write(&path, text).unwrap();
    let r = run(&dir.path().join("lake"), &path);
    assert_eq!((r.totals.read, r.totals.accepted), (4, 4));
    let rows = lake_rows(&dir.path().join("lake"));
    let extra = |p: &str| rows.iter().find(|(k, _)| k.1 == p).unwrap().1.4.clone();
    assert_eq!(extra("a"), "null");
    assert!(extra("b").contains(r#""zone":"north""#), "{}", extra("b"));
    assert!(extra("c").contains(r#""zone":"south""#), "{}", extra("c"));
    assert_eq!(extra("d"), "null");
}

/// A JSON-lines file whose last line is cut off (no newline after it) is refused, naming that
/// line; a bad line before it is only quarantined.
#[test]
fn a_json_lines_file_cut_off_mid_line_is_refused_at_its_last_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.jsonl");
    let good = format!(
        r#"{{"match_id": "m1", "player_id": "a", "team": 0, "start_ts": {T0}, "outcome": "win"}}"#
    );
    std::fs::write(&path, format!("{good}\n{{bad}}\n{{\"match_id\": \"m")).unwrap();
    let mut cfg = IngestConfig::new(dir.path().join("lake"), vec![path.clone()]);
    cfg.chunk_bytes = 4096;
    let e = ingest(&cfg, &NoProgress).unwrap_err().to_string();
    assert!(e.contains("the last line (3) is cut off"), "{e}");
    assert!(e.contains("cut.jsonl"), "{e}");
}

/// A Parquet file read in more than one batch (65,536 rows each) numbers its rows across the
/// batches: a bad row in the second batch is quarantined at its own 1-based row.
#[test]
fn parquet_rows_are_numbered_across_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows: Vec<Row> = Vec::new();
    for m in 0..35_000i64 {
        for (p, team, outcome) in [("a", 0, "win"), ("b", 1, "loss")] {
            let kills = if m == 34_000 && p == "b" { "x" } else { "1" };
            rows.push((
                format!("m{m}"),
                format!("{p}{m}"),
                team,
                T0 + m,
                outcome.into(),
                kills.into(),
                "eu".into(),
            ));
        }
    }
    let bad = rows.iter().position(|r| r.5 == "x").unwrap() as i64 + 1;
    assert!(bad > 65_536);
    let path = write_parquet(dir.path(), &rows);
    let r = run(&dir.path().join("lake"), &path);
    assert_eq!((r.totals.read, r.totals.quarantined), (70_000, 2));
    let q = quarantine(&dir.path().join("lake"));
    assert_eq!(q[&bad].1, "kills");
    // The bad row's teammate in the match (the row before it) goes with it.
    assert_eq!(q.keys().copied().collect::<Vec<_>>(), [bad - 1, bad]);
}
