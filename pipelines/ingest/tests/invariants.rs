//! Invariants of ingest over many random inputs (proptest): whatever the rows, every record is
//! accounted for, the lake holds each (match, player) once, every stored match has two teams and
//! consistent outcomes, and ingesting the same file again changes no data.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use mm_ingest::{IngestConfig, NoProgress, ingest};
use mm_lake::Lake;
use mm_lake::parquet_io::read_parquet_columns;
use proptest::prelude::*;

/// One CSV line of random, often bad, canonical data: few match and player ids so that
/// matches have several players and collide; some values are invalid on purpose.
fn line() -> impl Strategy<Value = String> {
    (
        0..12_u32,
        0..10_u32,
        0..3_i32,
        0..3_i64,
        prop::sample::select(vec!["win", "loss", "draw", "WIN", "forfeit", ""]),
        prop::sample::select(vec!["3", "0", "-1", "x", ""]),
        prop::bool::weighted(0.05),
    )
        .prop_map(|(m, p, team, day, outcome, kills, short)| {
            let start = 1_704_067_200 + day * 86_400 + i64::from(m) * 60;
            if short {
                format!("m{m},p{p},{team}")
            } else {
                format!("m{m},p{p},{team},{start},{outcome},{kills}")
            }
        })
}

/// (match, player) -> (team, outcome) of every lake row, failing on a repeated key.
fn lake_rows(root: &Path) -> BTreeMap<(String, String), (i32, String)> {
    let lake = Lake::open(root).unwrap();
    let mut out = BTreeMap::new();
    for f in lake.matches_files().unwrap() {
        for b in
            read_parquet_columns(&f, Some(&["match_id", "player_id", "team", "outcome"])).unwrap()
        {
            let m = b
                .column_by_name("match_id")
                .unwrap()
                .as_string::<i32>()
                .clone();
            let p = b
                .column_by_name("player_id")
                .unwrap()
                .as_string::<i32>()
                .clone();
            let t = b
                .column_by_name("team")
                .unwrap()
                .as_primitive::<Int32Type>()
                .clone();
            let o = b
                .column_by_name("outcome")
                .unwrap()
                .as_string::<i32>()
                .clone();
            for i in 0..b.num_rows() {
                assert!(!o.is_null(i));
                let prev = out.insert(
                    (m.value(i).to_string(), p.value(i).to_string()),
                    (t.value(i), o.value(i).to_string()),
                );
                assert!(
                    prev.is_none(),
                    "({}, {}) stored twice",
                    m.value(i),
                    p.value(i)
                );
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn accounting_balances_and_the_lake_keeps_its_invariants(lines in prop::collection::vec(line(), 1..160)) {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("random.csv");
        std::fs::write(&csv, format!("match_id,player_id,team,start_ts,outcome,kills\n{}\n", lines.join("\n"))).unwrap();
        let root = dir.path().join("lake");
        let cfg = IngestConfig::new(&root, vec![csv.clone()]);
        let r = ingest(&cfg, &NoProgress).unwrap();
        let c = r.totals;
        prop_assert_eq!(c.read, lines.len() as u64);
        prop_assert!(c.balanced(), "{:?}", c);
        prop_assert_eq!(c.skipped, 0);
        prop_assert_eq!(r.quarantine_entries_written, c.quarantined);

        let rows = lake_rows(&root);
        prop_assert_eq!(rows.len() as u64, c.accepted);
        prop_assert_eq!(r.lake_rows_written, c.accepted);
        // every stored match has two teams, teammates agree, and at most one team won
        let mut matches: BTreeMap<&str, BTreeMap<i32, BTreeSet<&str>>> = BTreeMap::new();
        for ((m, _), (t, o)) in &rows {
            matches.entry(m).or_default().entry(*t).or_default().insert(o);
        }
        for (m, teams) in &matches {
            prop_assert!(teams.len() >= 2, "match {} has one team", m);
            prop_assert!(teams.values().all(|o| o.len() == 1), "match {} teammates disagree", m);
            let wins = teams.values().filter(|o| o.contains("win")).count();
            let draws = teams.values().filter(|o| o.contains("draw")).count();
            prop_assert!(wins <= 1 && !(wins == 1 && draws > 0), "match {}: {:?}", m, teams);
        }

        // the same file again: nothing new, no data file changed
        let before: Vec<_> = Lake::open(&root).unwrap().matches_files().unwrap();
        let again = ingest(&cfg, &NoProgress).unwrap();
        prop_assert_eq!(again.totals.accepted, 0);
        prop_assert_eq!(again.totals.read, c.read);
        prop_assert_eq!(again.totals.quarantined, c.quarantined);
        prop_assert_eq!(again.quarantine_entries_written, 0);
        prop_assert_eq!(Lake::open(&root).unwrap().matches_files().unwrap(), before);
    }
}
