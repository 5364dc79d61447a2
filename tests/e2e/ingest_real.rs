//! The four real sets of `../shared/data/real/`: every row accounted for, the figures their
//! READMEs state, and corrupted copies (bad types, missing fields, duplicated rows, truncation)
//! quarantined line by line while a failed run leaves the lake exactly as it was.

use std::path::{Path, PathBuf};

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;

use crate::util::{self, assert_balanced, counts, ingest, ingest_ok};

struct RealSet {
    file: &'static str,
    /// Source records, as the set's README states.
    readme_rows: u64,
    /// A column that must be a number, and one that is required.
    typed_col: &'static str,
    required_col: &'static str,
    /// Whether a record may be corrupted for the test: accepted when clean, and alone in its
    /// match's team or match (so corrupting it quarantines exactly that record).
    eligible: fn(&[String], &[String]) -> bool,
}

fn col<'a>(h: &[String], r: &'a [String], name: &str) -> &'a str {
    h.iter()
        .position(|x| x == name)
        .map_or("", |i| r[i].as_str())
}

const SETS: [RealSet; 4] = [
    RealSet {
        file: "atp-tour/atp_matches_1991_2019.csv.gz",
        readme_rows: 95_201,
        typed_col: "match_num",
        required_col: "winner_id",
        eligible: |h, r| {
            let score = col(h, r, "score");
            let minutes: f64 = col(h, r, "minutes").parse().unwrap_or(0.0);
            !score.contains("W/O") && !score.contains("Walkover") && minutes <= 720.0
        },
    },
    RealSet {
        file: "lichess-kaggle-20k/games.csv.gz",
        readme_rows: 15_092,
        typed_col: "created_at",
        required_col: "white_id",
        eligible: |h, r| col(h, r, "white_id") != col(h, r, "black_id"),
    },
    RealSet {
        file: "lol-pro-oracleselixir-jan/games_players.csv.gz",
        readme_rows: 7_320,
        typed_col: "kills",
        required_col: "gameid",
        eligible: |h, r| {
            col(h, r, "position") != "team"
                && col(h, r, "datacompleteness") == "complete"
                && !col(h, r, "playerid").is_empty()
        },
    },
    RealSet {
        file: "csgo-hltv-pro-2022q4/player_maps.csv.gz",
        readme_rows: 1_230,
        typed_col: "kills",
        required_col: "player",
        eligible: |_, _| true,
    },
];

fn parse_csv_line(line: &str) -> Vec<String> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(line.as_bytes());
    r.records()
        .next()
        .map(|x| x.unwrap().iter().map(str::to_string).collect())
        .unwrap_or_default()
}

fn write_csv_line(fields: &[String]) -> String {
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    w.write_record(fields).unwrap();
    String::from_utf8(w.into_inner().unwrap())
        .unwrap()
        .trim_end()
        .to_string()
}

fn quarantined_lines(lake: &Path) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    for b in util::read_tree(&lake.join("quarantine")) {
        let line = b
            .column_by_name("line")
            .unwrap()
            .as_primitive::<Int64Type>();
        let field = b.column_by_name("field").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            out.push((
                line.value(i),
                if field.is_null(i) {
                    String::new()
                } else {
                    field.value(i).to_string()
                },
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn real_sets_ingest_with_every_row_accounted_for_and_corruption_is_caught() {
    let Some(real) = util::real_dir() else { return };
    for set in &SETS {
        check_set(&real, set);
    }
}

fn check_set(real: &Path, set: &RealSet) {
    let src = real.join(set.file);
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");

    // 1. The clean file: balanced, with the README's record count.
    let clean = ingest_ok(&lake, &[&src]);
    assert_balanced(&clean);
    let c0 = counts(&clean);
    assert_eq!(c0[0], set.readme_rows, "{}: records read", set.file);
    assert_eq!(
        util::rows(&lake.join("matches")) as u64,
        clean["lake_rows_written"].as_u64().unwrap()
    );
    set_specific(set.file, &clean, c0);

    // 2. Re-ingesting changes no data.
    let before = util::data_snapshot(&lake);
    let again = ingest_ok(&lake, &[&src]);
    assert_eq!(
        counts(&again)[1],
        0,
        "{}: nothing new the second time",
        set.file
    );
    assert_eq!(util::data_snapshot(&lake), before);

    // 3. A corrupted copy: two wrong types, two missing fields, three duplicated lines.
    let lines = util::read_lines(&src);
    let header = parse_csv_line(&lines[0]);
    let eligible: Vec<usize> = (1..lines.len())
        .filter(|&i| (set.eligible)(&header, &parse_csv_line(&lines[i])))
        .collect();
    let already_bad: Vec<i64> = quarantined_lines(&lake).iter().map(|(l, _)| *l).collect();
    let pick: Vec<usize> = (1..=7)
        .map(|k| eligible[k * eligible.len() / 8])
        .filter(|i| !already_bad.contains(&(*i as i64 + 1)))
        .collect();
    assert_eq!(pick.len(), 7, "{}: not enough eligible lines", set.file);
    let mut out = lines.clone();
    for (n, &i) in pick[..4].iter().enumerate() {
        let mut f = parse_csv_line(&lines[i]);
        let (name, value) = if n < 2 {
            (set.typed_col, "not-a-number")
        } else {
            (set.required_col, "")
        };
        let k = header.iter().position(|h| h == name).unwrap();
        f[k] = value.to_string();
        out[i] = write_csv_line(&f);
    }
    for &i in &pick[4..] {
        out.push(lines[i].clone());
    }
    let corrupt = dir.path().join(
        Path::new(set.file)
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .trim_end_matches(".gz"),
    );
    std::fs::write(&corrupt, out.join("\n") + "\n").unwrap();
    let lake2 = dir.path().join("lake2");
    let bad = ingest_ok(&lake2, &[&corrupt]);
    assert_balanced(&bad);
    let c1 = counts(&bad);
    assert_eq!(c1[0], c0[0] + 3, "{}: read", set.file);
    assert_eq!(c1[2], c0[2] + 4, "{}: quarantined", set.file);
    assert_eq!(
        c1[1] + c1[3],
        c0[1] + c0[3] - 4 + 3,
        "{}: accepted + duplicates",
        set.file
    );
    assert_eq!(c1[4], c0[4], "{}: skipped", set.file);
    let q = quarantined_lines(&lake2);
    for (n, &i) in pick[..4].iter().enumerate() {
        let want = if n < 2 {
            set.typed_col
        } else {
            set.required_col
        };
        let line = i as i64 + 1;
        assert!(
            q.contains(&(line, want.to_string())),
            "{}: line {line} should be quarantined for {want}: {q:?}",
            set.file
        );
    }

    // 4. Truncated files fail with exit code 2, name the file, and leave the lake as it was.
    let before = util::snapshot(&lake2);
    let gz_cut = dir.path().join("cut.csv.gz");
    let raw = std::fs::read(&src).unwrap();
    std::fs::write(&gz_cut, &raw[..raw.len() / 2]).unwrap();
    let text = out.join("\n");
    let mid = text[..text.len() / 2].rfind('\n').unwrap() + 5;
    let csv_cut = dir.path().join("cut.csv");
    std::fs::write(&csv_cut, &text[..mid]).unwrap();
    for cut in [&gz_cut, &csv_cut] {
        let (code, _, err) = ingest(&lake2, &[&src, cut], &[]);
        assert_eq!(code, 2, "{}: {err}", cut.display());
        assert!(
            err.contains(&cut.display().to_string()) && err.contains("truncated"),
            "{err}"
        );
        assert_eq!(
            util::snapshot(&lake2),
            before,
            "{}: lake changed",
            cut.display()
        );
    }
}

/// Figures each README states, or that follow from the source's own rules.
fn set_specific(file: &str, report: &serde_json::Value, c: [u64; 5]) {
    let f = &report["files"][0];
    let lake_rows = report["lake_rows_written"].as_u64().unwrap();
    if file.starts_with("atp") {
        assert_eq!(f["format"], "atp");
        // walkovers: 420 scores contain "W/O", 5 read "Walkover" (counted from the file)
        assert_eq!(c[4], 425, "{f}");
        assert_eq!(lake_rows, 2 * c[1], "two players per match");
    } else if file.starts_with("lichess") {
        assert_eq!(f["format"], "lichess");
        // README: 560 exact-duplicate rows; two games list the same player on both sides
        assert_eq!(c[3], 560, "{f}");
        assert_eq!(f["quarantine_by_reason"]["bad black_id"], 2, "{f}");
        assert_eq!(lake_rows, 2 * c[1]);
    } else if file.starts_with("lol") {
        assert_eq!(f["format"], "lol");
        // README: 6,100 player rows and 1,220 team rows; 41 player rows lack a player id
        assert_eq!(c[4], 1220, "{f}");
        assert!(
            f["quarantine_by_reason"]["bad playerid"].as_u64() == Some(41),
            "{f}"
        );
        assert_eq!(lake_rows, c[1]);
    } else {
        assert_eq!(f["format"], "csgo");
        assert_eq!(c, [1230, 1230, 0, 0, 0], "{f}");
    }
}

/// The one ATP row worked by hand in the adapter's unit test, read back from the lake.
#[test]
fn atp_points_won_share_reaches_the_lake() {
    let Some(real) = util::real_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let src: PathBuf = real.join(SETS[0].file);
    let lines = util::read_lines(&src);
    let small = dir.path().join("atp_first.csv");
    std::fs::write(&small, lines[..3].join("\n") + "\n").unwrap();
    let lake = dir.path().join("lake");
    ingest_ok(&lake, &[&small]);
    let batches = util::read_tree(&lake.join("matches"));
    let b = &batches[0];
    let p = b.column_by_name("player_id").unwrap().as_string::<i32>();
    let perf = b
        .column_by_name("perf")
        .unwrap()
        .as_primitive::<arrow_array::types::Float64Type>();
    let larsson = (0..b.num_rows()).find(|&i| p.value(i) == "101723").unwrap();
    assert!((perf.value(larsson) - 92.0 / 191.0).abs() < 1e-12);
}
