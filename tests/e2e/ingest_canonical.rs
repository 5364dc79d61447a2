//! Canonical inputs: every validation rule on a hand-built file, idempotency, overlapping inputs,
//! outcomes from team scores, and CSV / JSON lines / Parquet giving the same lake.

use std::collections::BTreeMap;
use std::path::Path;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, TimestampMillisecondType};

use crate::util::{self, assert_balanced, counts, ingest, ingest_ok, rows};

/// Lines 2-17; the comment after each says its fate, worked out by hand from the rules.
const RULES_CSV: &str = "\
match_id,player_id,team,start_time,end_time,outcome,kills,deaths,deaths_by_enemy,mode,colour
m1,a,0,2024-01-01 10:00:00,2024-01-01 10:10:00,win,5,2,2,tdm,red
m1,b,1,2024-01-01 10:00:00,2024-01-01 10:10:00,loss,1,3,3,tdm,
m2,c,0,2024-01-01 11:00:00,2024-01-01 11:10:00,win,-3,2,2,tdm,
m2,d,1,2024-01-01 11:00:00,2024-01-01 10:10:00,loss,1,3,3,tdm,
m2,e,1,2024-01-01 11:00:00,2024-01-01 11:10:00,loss,x,3,3,tdm,
m2,f,1,2024-01-01 11:00:00,,forfeit,1,3,3,tdm,
m2,,1,2024-01-01 11:00:00,,loss,1,3,3,tdm,
m2,g,0,2024-01-01 11:00:00,,win,2,1,1,tdm,
m3,h,0,2024-01-02 09:00:00,,win,2,1,1,tdm,
m3,i,1,2024-01-02 09:00:00,,loss,2,1,1,tdm,
m3,i,1,2024-01-02 09:00:00,,loss,2,1,1,tdm,
m3,h,0,2024-01-02 09:00:00,,win,9,1,1,tdm,
m4,j,0,2024-01-02 12:00:00,,win,1,1,1,tdm,
m4,k,1,2024-01-02 12:00:00,,win,1,1,1,tdm,
m5,l,0,2024-01-02 13:00:00,,loss,1,1,1,tdm,
m5,m,1,2024-01-02 13:00:00,,win,1,1,1,tdm,5,extra
";
// 2, 3: accepted (m1).  4: kills negative.  5: end before start.  6: kills not an integer.
// 7: unknown outcome code.  8: missing player_id.  9: m2 is left with team 0 only -> one team.
// 10 and 13: h twice in m3 with different kills -> both out.  12: exact copy of 11 -> duplicate.
// 11: m3 is then left with team 1 only -> one team.  14, 15: both teams won -> inconsistent.
// 17: wrong number of fields.  16: m5 left with one team.

fn quarantine_by_line(lake: &Path) -> BTreeMap<i64, (Option<String>, String)> {
    let mut out = BTreeMap::new();
    for b in util::read_tree(&lake.join("quarantine")) {
        let line = b
            .column_by_name("line")
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>();
        let field = b.column_by_name("field").unwrap().as_string::<i32>();
        let reason = b.column_by_name("reason").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            let f = (!field.is_null(i)).then(|| field.value(i).to_string());
            out.insert(line.value(i), (f, reason.value(i).to_string()));
        }
    }
    out
}

#[test]
fn every_rule_quarantines_the_hand_computed_lines_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("rules.csv");
    std::fs::write(&csv, RULES_CSV).unwrap();
    let lake = dir.path().join("lake");
    let r = ingest_ok(&lake, &[&csv]);
    assert_balanced(&r);
    assert_eq!(counts(&r), [16, 2, 13, 1, 0]);
    assert_eq!(r["lake_rows_written"], 2);
    let q = quarantine_by_line(&lake);
    let expect: [(i64, &str, &str); 13] = [
        (4, "kills", "negative"),
        (5, "end_time", "before it starts"),
        (6, "kills", "not an integer"),
        (7, "outcome", "unknown outcome code 'forfeit'"),
        (8, "player_id", "missing required field"),
        (9, "match: one team", "only one team"),
        (10, "match: player twice", "lines 10 and 13"),
        (11, "match: one team", "only one team"),
        (13, "match: player twice", "lines 10 and 13"),
        (14, "match: inconsistent outcomes", "team 0 win, team 1 win"),
        (15, "match: inconsistent outcomes", "team 0 win, team 1 win"),
        (16, "match: one team", "only one team"),
        (17, "", "wrong number of fields: expected 11, found 12"),
    ];
    assert_eq!(q.len(), expect.len(), "{q:#?}");
    for (line, field, reason) in expect {
        let (f, why) = &q[&line];
        assert_eq!(f.as_deref().unwrap_or(""), field, "line {line}: {why}");
        assert!(
            why.contains(reason),
            "line {line}: '{why}' lacks '{reason}'"
        );
    }
    // the unknown column is kept in `extra`
    let lake_rows = util::read_tree(&lake.join("matches"));
    let extra = lake_rows[0]
        .column_by_name("extra")
        .unwrap()
        .as_string::<i32>();
    assert_eq!(extra.value(0), r#"{"colour":"red"}"#);

    // Idempotent: the same input again changes no data file and stores no quarantine twice.
    let before = util::data_snapshot(&lake);
    let again = ingest_ok(&lake, &[&csv]);
    assert_eq!(counts(&again), [16, 0, 13, 3, 0]);
    assert_eq!(again["quarantine_entries_written"], 0);
    assert_eq!(util::data_snapshot(&lake), before);
}

/// Regression: a CRLF header used to shift every line number of the first chunk by one.
#[test]
fn line_numbers_are_physical_lines_with_crlf_bom_and_quoted_newlines() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("crlf.csv");
    let text = "\u{feff}match_id,player_id,team,start_time,outcome,note\r\n\
                m1,a,0,2024-01-01,win,\"multi\r\nline\"\r\n\
                m1,b,1,2024-01-01,loss,ok\r\n\
                m1,c,1,2024-01-01,loss,-\r\n\
                m2,d,0,2024-01-01,oops,x\r\n";
    std::fs::write(&csv, text).unwrap();
    let lake = dir.path().join("lake");
    let r = ingest_ok(&lake, &[&csv]);
    assert_eq!(counts(&r), [4, 3, 1, 0, 0]);
    let mut lines = BTreeMap::new();
    for b in util::read_tree(&lake.join("matches")) {
        let p = b.column_by_name("player_id").unwrap().as_string::<i32>();
        let l = b
            .column_by_name("source_line")
            .unwrap()
            .as_primitive::<arrow_array::types::Int64Type>();
        for i in 0..b.num_rows() {
            lines.insert(p.value(i).to_string(), l.value(i));
        }
    }
    // the header is line 1; a's record spans lines 2-3
    assert_eq!(lines["a"], 2);
    assert_eq!(lines["b"], 4);
    assert_eq!(lines["c"], 5);
    assert_eq!(
        quarantine_by_line(&lake)
            .keys()
            .copied()
            .collect::<Vec<_>>(),
        vec![6]
    );
}

#[test]
fn outcomes_are_derived_from_team_scores() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("scores.csv");
    std::fs::write(&csv, "match_id,player_id,team,start_ts,team_score\nx1,a,0,1704067200,10\nx1,b,1,1704067200,7\nx2,c,0,1704067300,5\nx2,d,1,1704067300,5\nx3,e,0,1704067400,5\nx3,f,1,1704067400,\n").unwrap();
    let lake = dir.path().join("lake");
    let r = ingest_ok(&lake, &[&csv]);
    // x3: f has neither outcome nor team_score -> row rule; e is then alone -> one team
    assert_eq!(counts(&r), [6, 4, 2, 0, 0]);
    let mut got = BTreeMap::new();
    for b in util::read_tree(&lake.join("matches")) {
        let p = b.column_by_name("player_id").unwrap().as_string::<i32>();
        let o = b.column_by_name("outcome").unwrap().as_string::<i32>();
        for i in 0..b.num_rows() {
            got.insert(p.value(i).to_string(), o.value(i).to_string());
        }
    }
    let want: BTreeMap<String, String> =
        [("a", "win"), ("b", "loss"), ("c", "draw"), ("d", "draw")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
    assert_eq!(got, want);
}

fn generate_csv(dir: &Path, rows: u64) -> std::path::PathBuf {
    let p = dir.join(format!("gen{rows}.csv"));
    mm_ingest::generate::write_peer_shaped_csv(&p, rows, 11).unwrap();
    p
}

#[test]
fn overlapping_inputs_are_deduplicated_on_match_and_player() {
    let dir = tempfile::tempdir().unwrap();
    let full = generate_csv(dir.path(), 2000);
    let lines = util::read_lines(&full);
    let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
    std::fs::write(
        &a,
        [&lines[..1], &lines[1..1201]].concat().join("\n") + "\n",
    )
    .unwrap();
    std::fs::write(&b, [&lines[..1], &lines[801..]].concat().join("\n") + "\n").unwrap();
    // one run with both files
    let lake = dir.path().join("one");
    let r = ingest_ok(&lake, &[&a, &b]);
    assert_eq!(counts(&r), [2400, 2000, 0, 400, 0]);
    assert_eq!(rows(&lake.join("matches")), 2000);
    // two runs
    let lake2 = dir.path().join("two");
    ingest_ok(&lake2, &[&a]);
    let r2 = ingest_ok(&lake2, &[&b]);
    assert_eq!(counts(&r2), [1200, 800, 0, 400, 0]);
    assert_eq!(rows(&lake2.join("matches")), 2000);
    // a small memory budget finalises days early and still deduplicates across the parts
    let lake3 = dir.path().join("small-budget");
    let (code, r3, err) = ingest(&lake3, &[&a, &b], &["--stage-rows", "1000"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(counts(&r3), [2400, 2000, 0, 400, 0]);
    assert_eq!(rows(&lake3.join("matches")), 2000);
}

/// (match, player) -> (start ms, team, kills, outcome) for every lake row.
type Content = BTreeMap<(String, String), (i64, i32, Option<i32>, String)>;

fn lake_content(lake: &Path) -> Content {
    let mut out = BTreeMap::new();
    for b in util::read_tree(&lake.join("matches")) {
        let c = |n: &str| b.column_by_name(n).unwrap().clone();
        let (m, p, o) = (c("match_id"), c("player_id"), c("outcome"));
        let (s, t, k) = (c("start_time"), c("team"), c("kills"));
        let (m, p, o) = (
            m.as_string::<i32>(),
            p.as_string::<i32>(),
            o.as_string::<i32>(),
        );
        let (s, t, k) = (
            s.as_primitive::<TimestampMillisecondType>(),
            t.as_primitive::<Int32Type>(),
            k.as_primitive::<Int32Type>(),
        );
        for i in 0..b.num_rows() {
            let kills = (!k.is_null(i)).then(|| k.value(i));
            out.insert(
                (m.value(i).to_string(), p.value(i).to_string()),
                (s.value(i), t.value(i), kills, o.value(i).to_string()),
            );
        }
    }
    out
}

#[test]
fn csv_json_lines_and_parquet_inputs_give_the_same_lake() {
    let dir = tempfile::tempdir().unwrap();
    let csv = generate_csv(dir.path(), 1000);
    let lines = util::read_lines(&csv);
    let header: Vec<&str> = lines[0].split(',').collect();
    let jsonl = dir.path().join("m.jsonl");
    let mut text = String::new();
    for l in &lines[1..] {
        let obj: serde_json::Map<String, serde_json::Value> = header
            .iter()
            .zip(l.split(','))
            .map(|(h, v)| {
                (
                    h.to_string(),
                    serde_json::Value::from(v.parse::<i64>().unwrap()),
                )
            })
            .collect();
        text.push_str(&serde_json::Value::Object(obj).to_string());
        text.push('\n');
    }
    std::fs::write(&jsonl, text).unwrap();
    let (l1, l2, l3) = (
        dir.path().join("l1"),
        dir.path().join("l2"),
        dir.path().join("l3"),
    );
    let r1 = ingest_ok(&l1, &[&csv]);
    let r2 = ingest_ok(&l2, &[&jsonl]);
    assert_eq!(counts(&r1), [1000, 1000, 0, 0, 0]);
    assert_eq!(counts(&r2), counts(&r1));
    // the lake's own Parquet files are canonical input too
    let r3 = ingest_ok(&l3, &[&l1.join("matches")]);
    assert_eq!(counts(&r3), counts(&r1));
    let (c1, c2, c3) = (lake_content(&l1), lake_content(&l2), lake_content(&l3));
    assert_eq!(c1.len(), 1000);
    assert_eq!(c1, c2);
    assert_eq!(c1, c3);
}

#[test]
fn bad_files_exit_2_naming_the_file_and_leave_the_lake_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let good = generate_csv(dir.path(), 200);
    ingest_ok(&lake, &[&good]);
    let before = util::snapshot(&lake);
    let missing = dir.path().join("nope.csv");
    let no_header_col = dir.path().join("cols.csv");
    std::fs::write(
        &no_header_col,
        "player_id,team,start_time,outcome\np,0,2024-01-01,win\n",
    )
    .unwrap();
    let truncated = dir.path().join("cut.csv");
    let text = std::fs::read_to_string(&good).unwrap();
    let mid = text[..text.len() / 2].rfind('\n').unwrap() + 5; // five bytes into a line
    std::fs::write(&truncated, &text[..mid]).unwrap();
    let bad_json = dir.path().join("cut.jsonl");
    std::fs::write(&bad_json, "{\"match_id\": 1, \"player_id\": 2, \"team\": 0, \"start_ts\": 1704067200, \"won\": 1}\n{\"match_id\": 1, \"pla").unwrap();
    let wrong_kind = dir.path().join("m.txt");
    std::fs::write(&wrong_kind, "x").unwrap();
    for (f, needle) in [
        (&missing, "cannot read"),
        (&no_header_col, "missing required column 'match_id'"),
        (&truncated, "truncated"),
        (&bad_json, "truncated"),
        (&wrong_kind, "unknown file kind"),
    ] {
        // the bad file comes after a good one: the good one's rows must not land either
        let (code, _, err) = ingest(&lake, &[&good, f], &[]);
        assert_eq!(code, 2, "{}: {err}", f.display());
        assert!(
            err.contains(&f.display().to_string()) && err.contains(needle),
            "{err}"
        );
        assert_eq!(
            util::snapshot(&lake),
            before,
            "lake changed after failing on {}",
            f.display()
        );
    }
}
