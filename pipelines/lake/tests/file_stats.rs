//! The statistics a matches file's add action records (its mode range and rows without kills)
//! agree with the file's rows, over random files, before and after a checkpoint of the log.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::BTreeMap;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use mm_lake::{Lake, PlayerRow, RowsBuilder, to_lake_batch};
use proptest::prelude::*;

const DAY0: i32 = 19_000;

/// One file: its day and its rows' (mode, kills).
type File = (i32, Vec<(u8, Option<i32>)>);

fn files() -> impl Strategy<Value = Vec<File>> {
    prop::collection::vec(
        (
            0..3i32,
            prop::collection::vec((0..2u8, prop::option::of(0..9i32)), 1..20),
        ),
        1..6,
    )
}

/// Each file's mode counts and rows with kills, read from the file itself.
fn read(lake: &Lake, rel: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out = BTreeMap::new();
    let path = lake.match_file(rel).unwrap();
    for b in mm_lake::parquet_io::read_parquet_columns(&path, Some(&["mode", "kills"])).unwrap() {
        let modes = b.column_by_name("mode").unwrap().as_string::<i32>();
        let kills = b.column_by_name("kills").unwrap();
        for i in 0..b.num_rows() {
            let c = out.entry(modes.value(i).to_string()).or_insert((0, 0));
            c.0 += 1;
            c.1 += u64::from(kills.is_valid(i));
        }
    }
    out
}

fn check(lake: &Lake, files: &[File]) -> Result<(), TestCaseError> {
    prop_assert_eq!(lake.match_entries().len(), files.len());
    for f in lake.match_entries() {
        let counts = read(lake, &f.path);
        let (lo, hi) = f.mode_range.clone().unwrap();
        prop_assert_eq!(&lo, counts.keys().next().unwrap());
        prop_assert_eq!(&hi, counts.keys().last().unwrap());
        let rows: u64 = counts.values().map(|c| c.0).sum();
        let with_kills: u64 = counts.values().map(|c| c.1).sum();
        prop_assert_eq!(f.rows, Some(rows));
        prop_assert_eq!(f.rows_without_kills, Some(rows - with_kills));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn the_log_counts_modes_and_kills_as_the_files_hold_them(files in files()) {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::open_or_create(dir.path()).unwrap();
        let mut txn = lake.begin("stats").unwrap();
        for (k, (day, rows)) in files.iter().enumerate() {
            let mut b = RowsBuilder::with_capacity(rows.len());
            for (i, &(mode, kills)) in rows.iter().enumerate() {
                let row = PlayerRow {
                    match_id: format!("f{k}-m{i}").into(),
                    mode: if mode == 0 { "duel-1v1".into() } else { "tdm-6v6".into() },
                    start_ms: i64::from(DAY0 + day) * 86_400_000 + i as i64 * 1000,
                    team: 0,
                    player_id: format!("p{i}").into(),
                    outcome: Some(mm_lake::schema::Outcome::Win),
                    kills,
                    ..Default::default()
                };
                b.push(&row, "model", 1, 0, 1);
            }
            let rel = Lake::partition_rel(DAY0 + day).join(format!("part-stats-{k}.parquet"));
            txn.write_parquet(&rel, &[to_lake_batch(&b.finish()).unwrap()]).unwrap();
        }
        txn.commit(&serde_json::json!({"run_id": "stats"})).unwrap();
        check(&Lake::open(dir.path()).unwrap(), &files)?;
        // From a checkpoint, the statistics come back from its parsed form.
        Lake::open(dir.path()).unwrap().checkpoint_matches().unwrap();
        check(&Lake::open(dir.path()).unwrap(), &files)?;
    }
}
