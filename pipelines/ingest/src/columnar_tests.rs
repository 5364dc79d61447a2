//! Unit tests of `columnar.rs`.

use std::path::Path;

use proptest::prelude::*;

use crate::adapters::Format;
use crate::parse::{FileCtx, Parsed, parse_csv_records, split_days};
use crate::source::Chunk;

use super::*;

/// Column layouts: the polars peer's, every canonical column, and outcomes from team scores.
const HEADERS: [&str; 3] = [
    "match_id,player_id,team,party_id,start_ts,end_ts,kills,deaths,deaths_by_enemy,score,won",
    "match_id,mode,start_time,team,player_id,outcome,end_time,seconds_played,party_id,team_name,\
     role,kills,deaths,deaths_by_enemy,self_kills,assists,score,team_score,perf,quit_early,\
     input_device,platform,region,lat,lon,ping_ms,rating,source_line",
    "game_id,start,side,player,team_score,kills,deaths,self_kills",
];

/// Values a clean row may hold in a column.
fn clean(name: &str, k: usize) -> String {
    let start = 1_704_067_200 + 3600 * (k as i64 % 50);
    match name {
        "match_id" | "game_id" => format!("m{}", k / 4),
        "player_id" | "player" => format!("p{k}"),
        "party_id" => format!("q{}", k / 2),
        "team" | "side" => (k % 2).to_string(),
        "start_ts" | "start" => start.to_string(),
        "start_time" => match k % 3 {
            0 => "2024-01-01 10:00:00".into(),
            1 => "2024-01-02T03:04:05Z".into(),
            _ => format!("{}", start * 1000),
        },
        "end_ts" | "end_time" => (start + 1800).to_string(),
        "kills" | "assists" => (k % 9).to_string(),
        "deaths" => (3 + k % 5).to_string(),
        "deaths_by_enemy" | "self_kills" => (k % 4).to_string(),
        "score" | "perf" | "rating" => ["480", "12.5", "-3", "1e3", ""][k % 5].into(),
        "team_score" => ["16", "9", "2.5", ""][k % 4].into(),
        "won" => ["1", "0", "true", "F"][k % 4].into(),
        "outcome" => ["win", "loss", "draw", "Win"][k % 4].into(),
        "mode" => ["tdm", "", "ranked duel"][k % 3].into(),
        "seconds_played" | "ping_ms" => ["600.5", "0", "42", ""][k % 4].into(),
        "lat" => ["45.5", "-90", ""][k % 3].into(),
        "lon" => ["-3.25", "180", ""][k % 3].into(),
        "quit_early" => ["false", "1", "", "yes"][k % 4].into(),
        "team_name" | "role" | "input_device" | "platform" | "region" => {
            ["red", "", "eu west", "\"quoted\""][k % 4].into()
        }
        _ => (k % 1000).to_string(),
    }
}

/// Values that some rule of the exact path treats specially (or that look like it might).
const NASTY: [&str; 29] = [
    "0",
    "12",
    "0.0",
    "",
    " ",
    " 3",
    "3 ",
    "-1",
    "+2",
    "3.0",
    "1e2",
    "inf",
    "NaN",
    "abc",
    "99999999999",
    "\"4\"",
    "2024-01-01 10:00:00",
    "1704067200000",
    "-5",
    "+1704067200",
    "WIN",
    " win",
    "yes",
    "ñ",
    "a b",
    "\"x,y\"",
    "\"a\nb\"",
    "\u{a0}p\u{a0}",
    "2099-12-31T23:59:59Z",
];

fn chunk_of(text: &str) -> Chunk {
    Chunk {
        bytes: text.as_bytes().to_vec(),
        len: text.len(),
        start: 0,
        first_line: 2,
        last: true,
        seq: 0,
    }
}

/// The fast path's rows by day, or `None`; and the exact path's result on the same chunk.
fn both(header: &str, body: &str) -> (Option<Vec<(i32, RecordBatch)>>, Parsed) {
    let names: Vec<&str> = header.split(',').collect();
    let adapter = Format::Canonical.csv_adapter(&names, "default").unwrap();
    let ctx = FileCtx {
        file_idx: 3,
        name: "t.csv",
        header_len: names.len(),
        adapter: Some(adapter.as_ref()),
        default_mode: "default",
    };
    let (map, mode) = adapter.canonical().unwrap();
    let fast = decode_chunk(map, names.len(), mode, body.as_bytes(), 2, "t.csv", 3)
        .map(|b| split_days(b).unwrap());
    let exact = parse_csv_records(&ctx, &chunk_of(body), Path::new("t.csv")).unwrap();
    (fast, exact)
}

/// `rows` clean rows (row `r` from seed `k + r`), with at most one value replaced by a nasty
/// one (`nasty`: row, column, which) and a line-level `damage`.
fn body(
    header: &str,
    k: usize,
    rows: usize,
    nasty: Option<(usize, usize, usize)>,
    damage: u8,
) -> String {
    let names: Vec<&str> = header.split(',').collect();
    let mut out = String::new();
    for r in 0..rows {
        let vals: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(c, n)| match nasty {
                Some((nr, nc, v)) if nr % rows == r && nc % names.len() == c => {
                    NASTY[v % NASTY.len()].to_string()
                }
                _ => clean(n, k + r),
            })
            .collect();
        out.push_str(&vals.join(","));
        match (damage, r) {
            (1, 0) => out.push_str(",extra"), // a field too many
            (2, 0) => out.push('\n'),         // a blank line
            (3, 0) => {
                out.push('\r'); // a lone carriage return ends the record
                continue;
            }
            (4, _) => out.push('\r'), // CRLF line ends: not damage
            _ => {}
        }
        out.push('\n');
    }
    out
}

fn assert_same(fast: &[(i32, RecordBatch)], exact: &Parsed) {
    assert!(exact.quarantine.is_empty(), "{:?}", exact.quarantine);
    assert!(exact.skipped.is_empty());
    let rows: usize = fast.iter().map(|(_, b)| b.num_rows()).sum();
    assert_eq!(exact.read as usize, rows);
    assert_eq!(fast.len(), exact.days.len());
    for ((d1, b1), (d2, b2)) in fast.iter().zip(&exact.days) {
        assert_eq!(d1, d2);
        assert_eq!(b1.schema(), b2.schema());
        for (k, f) in b1.schema().fields().iter().enumerate() {
            assert_eq!(
                b1.column(k).as_ref(),
                b2.column(k).as_ref(),
                "column {}",
                f.name()
            );
        }
    }
}

/// The chunk's batch from fields located by [`Split`] and by [`Decoded`] (arrow-csv).
fn both_tiers(header: &str, body: &str) -> (Option<RecordBatch>, Option<RecordBatch>) {
    let names: Vec<&str> = header.split(',').collect();
    let adapter = Format::Canonical.csv_adapter(&names, "default").unwrap();
    let (map, mode) = adapter.canonical().unwrap();
    let lines = body.matches('\n').count();
    let ctx = Ctx {
        map,
        default_mode: mode,
        n: lines,
        first_line: 2,
        source_name: "t.csv",
        file_idx: 3,
    };
    let data = body.as_bytes();
    let split = Split::new(data, names.len(), lines)
        .filter(|s| s.rows() == lines)
        .and_then(|s| convert(&s, &ctx));
    let decoded = Decoded::new(data, names.len(), lines).and_then(|d| convert(&d, &ctx));
    (split, decoded)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// On chunks without quotes, both means of locating fields give the same batch (or
    /// both decline).
    #[test]
    fn split_and_arrow_csv_agree(
        h in 0..HEADERS.len(),
        k in 0..10_000_usize,
        rows in 1..40_usize,
        nasty in prop::option::of((0..40_usize, 0..30_usize, 0..NASTY.len())),
        damage in 0..6_u8,
    ) {
        let text = body(HEADERS[h], k, rows, nasty, damage).replace('"', "");
        let (split, decoded) = both_tiers(HEADERS[h], &text);
        prop_assert_eq!(&split, &decoded, "{}", text);
        if h == 0 && nasty.is_none() && damage == 0 {
            prop_assert!(split.is_some());
        }
    }

    /// Whenever the fast path takes a chunk, its rows are the exact path's, value for value.
    #[test]
    fn fast_path_rows_are_the_exact_paths(
        h in 0..HEADERS.len(),
        k in 0..10_000_usize,
        rows in 1..40_usize,
        nasty in prop::option::of((0..40_usize, 0..30_usize, 0..NASTY.len())),
        damage in 0..6_u8,
    ) {
        let text = body(HEADERS[h], k, rows, nasty, damage);
        let (fast, exact) = both(HEADERS[h], &text);
        if let Some(fast) = fast {
            assert_same(&fast, &exact);
        } else {
            // Declining is always allowed; a clean chunk of the peer's shape must not be.
            prop_assert!(!(h == 0 && nasty.is_none() && damage != 1 && damage != 2 && damage != 3),
                "fast path declined a clean chunk:\n{text}");
        }
    }
}

#[test]
fn clean_chunks_take_the_fast_path_and_damaged_ones_do_not() {
    for h in HEADERS {
        let text = body(h, 7, 30, None, 0);
        let (fast, exact) = both(h, &text);
        // The third layout's rows have no outcome where team_score is blank: the exact path
        // quarantines those, so the fast path must decline.
        match fast {
            Some(f) => assert_same(&f, &exact),
            None => assert!(!exact.quarantine.is_empty(), "declined a clean chunk: {h}"),
        }
    }
    let peer = HEADERS[0];
    assert!(both(peer, &body(peer, 0, 30, None, 0)).0.is_some());
    for damage in 1..=3 {
        assert!(
            both(peer, &body(peer, 0, 30, None, damage)).0.is_none(),
            "damage {damage}"
        );
    }
    let (fast, exact) = both(peer, &body(peer, 0, 30, None, 4));
    assert_same(&fast.expect("CRLF line ends take the fast path"), &exact);
    // One value the exact path rejects or reads differently from arrow: the chunk falls back.
    // Columns: 1 player_id, 2 team, 4 start_ts, 5 end_ts, 6 kills, 7 deaths, 10 won.
    let edit = |col: usize, v: &str| {
        let text = body(peer, 0, 30, None, 0);
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        let mut f: Vec<&str> = lines[5].split(',').collect();
        f[col] = v;
        lines[5] = f.join(",");
        lines.join("\n") + "\n"
    };
    // "3.0" is 3 to the exact path but not to arrow: the chunk falls back and the row lands.
    let (fast, exact) = both(peer, &edit(6, "3.0"));
    assert!(fast.is_none() && exact.quarantine.is_empty() && exact.read == 30);
    // Blanks around an integer: arrow and the exact path both read 3.
    let (fast, exact) = both(peer, &edit(2, " 3"));
    assert_same(&fast.expect("a padded integer takes the fast path"), &exact);
    for (col, bad) in [
        (1, " "),
        (2, "-1"),
        (4, "+1704067200"),
        (4, "-5"),
        (5, "1704067200"), // ends before it starts
        (6, "-1"),
        (7, "0"), // fewer deaths than deaths by enemies
        (9, "NaN"),
        (10, "maybe"),
    ] {
        let (fast, exact) = both(peer, &edit(col, bad));
        assert!(fast.is_none(), "{col}: {bad}");
        assert_eq!(exact.quarantine.len(), 1, "{col}: {bad}");
    }
}

#[test]
fn null_columns_are_slices_of_one_kept_array() {
    // A type no staging column has, so no other test running at once replaces its kept array.
    let t = DataType::Int16;
    let a = null_column(&t, 10);
    let b = null_column(&t, 700);
    for (x, n) in [(&a, 10), (&b, 700)] {
        assert_eq!(x.len(), n);
        assert_eq!(x.null_count(), n);
        assert_eq!(x.data_type(), &t);
    }
    // Longer than the kept one: a new kept array, still all null and of the asked length.
    let c = null_column(&t, 5_000);
    assert_eq!((c.len(), c.null_count()), (5_000, 5_000));
    // Two chunks of at most the kept length share its values buffer.
    let (d, e) = (null_column(&t, 3_000), null_column(&t, 4_000));
    let ptr = |x: &ArrayRef| x.to_data().buffers()[0].data_ptr();
    assert_eq!(ptr(&d), ptr(&e));
    let s = null_column(&DataType::Utf8, 5);
    assert_eq!((s.len(), s.null_count()), (5, 5));
    assert_eq!(s.as_string::<i32>().value_offsets(), [0; 6]);
}
