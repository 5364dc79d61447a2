//! The lake's match ids by start time (`latest_start`, `for_each_match_since`, `holds_match`)
//! agree with the rows written, over random files, before and after a checkpoint of the log
//! (the files' start ranges come from the log's statistics).

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::BTreeMap;

use mm_lake::{Lake, PlayerRow, RowsBuilder, to_lake_batch};
use proptest::prelude::*;

const DAY0: i64 = 19_000;
const DAY_MS: i64 = 86_400_000;

/// One file: its day and its matches' (id number, minute of the day, players).
type File = (i64, Vec<(u16, i64, u8)>);

fn files() -> impl Strategy<Value = Vec<File>> {
    prop::collection::vec(
        (
            0..3i64,
            prop::collection::vec((0..40u16, 0..1440i64, 1..3u8), 1..12),
        ),
        1..5,
    )
}

/// The (match id, start) pairs the files hold, each with its rows.
fn expected(files: &[File]) -> BTreeMap<(String, i64), u64> {
    let mut out = BTreeMap::new();
    for (day, ms) in files {
        for &(id, minute, players) in ms {
            *out.entry((format!("m{id}"), start(*day, minute)))
                .or_default() += u64::from(players);
        }
    }
    out
}

fn start(day: i64, minute: i64) -> i64 {
    (DAY0 + day) * DAY_MS + minute * 60_000
}

fn check(lake: &Lake, files: &[File], probe: i64) -> Result<(), TestCaseError> {
    let want = expected(files);
    prop_assert_eq!(lake.latest_start().unwrap(), want.keys().map(|k| k.1).max());
    let mut since: BTreeMap<(String, i64), u64> = BTreeMap::new();
    lake.for_each_match_since(probe, |id, t| {
        *since.entry((id.to_string(), t)).or_default() += 1;
    })
    .unwrap();
    let want_since: BTreeMap<_, _> = want
        .iter()
        .filter(|(k, _)| k.1 >= probe)
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    prop_assert_eq!(since, want_since);
    for (id, t) in want.keys() {
        prop_assert!(lake.holds_match(id, *t).unwrap(), "{id} at {t}");
        // The same id at another time, or another id at this time, is not held.
        if !want.contains_key(&(id.clone(), t + 1)) {
            prop_assert!(!lake.holds_match(id, t + 1).unwrap());
        }
        prop_assert!(!lake.holds_match("m-none", *t).unwrap());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn the_lake_answers_which_matches_it_holds_as_its_rows_say(
        files in files(),
        probe_day in 0..4i64,
        probe_minute in 0..1440i64,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open_or_create(dir.path()).unwrap();
        let mut txn = lake.begin("ids").unwrap();
        for (k, (day, ms)) in files.iter().enumerate() {
            let mut b = RowsBuilder::with_capacity(ms.len() * 2);
            for &(id, minute, players) in ms {
                for p in 0..players {
                    let row = PlayerRow {
                        match_id: format!("m{id}").into(),
                        mode: "tdm-6v6".into(),
                        start_ms: start(*day, minute),
                        team: i32::from(p),
                        player_id: format!("f{k}-p{p}-{minute}").into(),
                        outcome: Some(mm_lake::schema::Outcome::Win),
                        ..Default::default()
                    };
                    b.push(&row, "model", 1, 0, 1);
                }
            }
            let day = i32::try_from(DAY0 + day).unwrap();
            let rel = Lake::partition_rel(day).join(format!("part-ids-{k}.parquet"));
            txn.write_parquet(&rel, &[to_lake_batch(&b.finish()).unwrap()]).unwrap();
        }
        txn.commit(&serde_json::json!({"run_id": "ids"})).unwrap();
        let probe = start(probe_day, probe_minute);
        let opened = Lake::open(dir.path()).unwrap();
        prop_assert!(opened.match_entries().iter().all(|f| f.start_range.is_some()));
        check(&opened, &files, probe)?;
        Lake::open(dir.path()).unwrap().checkpoint_matches().unwrap();
        check(&Lake::open(dir.path()).unwrap(), &files, probe)?;
    }
}
