//! The Delta commit protocol against a model, over many random histories (proptest).
//!
//! Each step opens the latest snapshot, stages two runs from it (as two `mm ingest` processes
//! started at once would, each already deduplicated against that snapshot), and commits them
//! in turn. The model: the first always commits; the second commits exactly when it shares no
//! (match, player) key with the first, and otherwise adds nothing. Checked after every step:
//! the latest snapshot holds exactly the model's keys, never a duplicate, and every earlier
//! version still reads exactly what the model held at that version.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::BTreeSet;
use std::path::Path;

use arrow_array::cast::AsArray;
use mm_lake::schema::Outcome;
use mm_lake::{AsOf, Lake, LakeError, PlayerRow, RowsBuilder, to_lake_batch};
use proptest::prelude::*;

/// A key: (day offset, match number within the day, player number).
type Key = (i32, u8, u8);

const DAY0: i32 = 19_000;

/// One staged file per day for `keys`.
fn stage(lake: &Lake, run: &str, keys: &BTreeSet<Key>) -> mm_lake::Txn {
    let mut txn = lake.begin(run).unwrap();
    let days: BTreeSet<i32> = keys.iter().map(|k| k.0).collect();
    for day in days {
        let rows: Vec<&Key> = keys.iter().filter(|k| k.0 == day).collect();
        let mut b = RowsBuilder::with_capacity(rows.len());
        for &&(d, m, p) in &rows {
            let row = PlayerRow {
                match_id: format!("d{d}-m{m}").into(),
                mode: "duel".into(),
                start_ms: i64::from(DAY0 + d) * 86_400_000 + i64::from(m) * 1000,
                team: i32::from(p % 2),
                player_id: format!("p{p}").into(),
                outcome: Some(if p % 2 == 0 {
                    Outcome::Win
                } else {
                    Outcome::Loss
                }),
                ..Default::default()
            };
            b.push(&row, "model", 1, 0, 1);
        }
        let rel = Lake::partition_rel(DAY0 + day).join(format!("part-{run}.parquet"));
        txn.write_parquet(&rel, &[to_lake_batch(&b.finish()).unwrap()])
            .unwrap();
    }
    txn
}

/// Every key of the lake at `as_of`; panics on a duplicate.
fn read_keys(root: &Path, as_of: AsOf) -> BTreeSet<Key> {
    let lake = Lake::open_as_of(root, as_of).unwrap();
    let mut out = BTreeSet::new();
    for f in lake.matches_files().unwrap() {
        for b in
            mm_lake::parquet_io::read_parquet_columns(&f, Some(&["match_id", "player_id"])).unwrap()
        {
            let (m, p) = (
                b.column_by_name("match_id").unwrap().as_string::<i32>(),
                b.column_by_name("player_id").unwrap().as_string::<i32>(),
            );
            for i in 0..b.num_rows() {
                let (d, mm) = m.value(i)[1..].split_once("-m").unwrap();
                let key = (
                    d.parse().unwrap(),
                    mm.parse().unwrap(),
                    p.value(i)[1..].parse().unwrap(),
                );
                assert!(out.insert(key), "duplicate key {key:?}");
            }
        }
    }
    out
}

/// A run's candidate keys: a few days, a few matches, a few players, so that runs overlap often.
fn keys() -> impl Strategy<Value = BTreeSet<Key>> {
    prop::collection::btree_set((0..3i32, 0..4u8, 0..3u8), 1..10)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn concurrent_runs_match_the_model(steps in prop::collection::vec((keys(), keys()), 1..5)) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut model: BTreeSet<Key> = BTreeSet::new();
        // What the model held at each version of the matches table.
        let mut at_version = vec![(Lake::open_or_create(root).unwrap().version().unwrap(), model.clone())];
        for (k, (a, b)) in steps.iter().enumerate() {
            let lake = Lake::open_or_create(root).unwrap();
            // Each run deduplicates against the snapshot it opened, as ingest does.
            let a: BTreeSet<Key> = a.difference(&model).copied().collect();
            let b: BTreeSet<Key> = b.difference(&model).copied().collect();
            let (ra, rb) = (format!("a{k}"), format!("b{k}"));
            let (ta, tb) = (stage(&lake, &ra, &a), stage(&lake, &rb, &b));
            let va = ta.commit(&serde_json::json!({"run_id": ra})).unwrap().version;
            model.extend(&a);
            at_version.push((va, model.clone()));
            let overlap = a.intersection(&b).next().is_some();
            match tb.commit(&serde_json::json!({"run_id": rb})) {
                Ok(c) => {
                    prop_assert!(!overlap, "step {k}: an overlapping run committed");
                    model.extend(&b);
                    at_version.push((c.version, model.clone()));
                }
                Err(LakeError::Conflict { reason, .. }) => {
                    prop_assert!(overlap, "step {k}: a disjoint run was refused: {reason}");
                    prop_assert!(reason.contains(&ra), "names the winner: {reason}");
                }
                Err(e) => return Err(TestCaseError::fail(format!("step {k}: {e}"))),
            }
            prop_assert_eq!(&read_keys(root, AsOf::Latest), &model, "step {}", k);
        }
        for (v, keys) in &at_version {
            prop_assert_eq!(&read_keys(root, AsOf::Version(*v)), keys, "version {}", v);
        }
    }
}

/// One step of an interleaved history: stage `stage.len()` runs from the latest snapshot (their
/// candidate keys), then commit the waiting runs picked by `commit` (indexes into the runs
/// staged so far and not yet committed, modulo their number), in that order.
#[derive(Debug, Clone)]
struct Step {
    stage: Vec<BTreeSet<Key>>,
    commit: Vec<usize>,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop::collection::vec(keys(), 0..4),
        prop::collection::vec(0..8usize, 0..4),
    )
        .prop_map(|(stage, commit)| Step { stage, commit })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Runs staged from several snapshots, committed in any order, some of them steps after
    /// they were staged. The model: a run commits exactly when none of its keys (deduplicated
    /// against its own snapshot) was committed since; a refused run adds nothing. After every
    /// commit the latest snapshot holds the model's keys, never a duplicate; at the end every
    /// version still reads what the model held at it.
    #[test]
    fn interleaved_runs_from_several_snapshots_match_the_model(
        steps in prop::collection::vec(step(), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let mut model: BTreeSet<Key> = BTreeSet::new();
        let mut at_version = vec![(Lake::open_or_create(root).unwrap().version().unwrap(), model.clone())];
        // Staged and not yet committed: (run id, its keys, its transaction).
        let mut waiting: Vec<(String, BTreeSet<Key>, mm_lake::Txn)> = Vec::new();
        for (k, s) in steps.iter().enumerate() {
            let lake = Lake::open_or_create(root).unwrap();
            for (j, keys) in s.stage.iter().enumerate() {
                let keys: BTreeSet<Key> = keys.difference(&model).copied().collect();
                let run = format!("r{k}x{j}");
                let txn = stage(&lake, &run, &keys);
                waiting.push((run, keys, txn));
            }
            for &pick in &s.commit {
                if waiting.is_empty() {
                    break;
                }
                let (run, keys, txn) = waiting.remove(pick % waiting.len());
                let clash = keys.intersection(&model).next().copied();
                match txn.commit(&serde_json::json!({"run_id": run})) {
                    Ok(c) => {
                        prop_assert!(clash.is_none(), "{}: committed though {:?} was committed since its snapshot", run, clash);
                        model.extend(&keys);
                        at_version.push((c.version, model.clone()));
                    }
                    Err(LakeError::Conflict { reason, .. }) => {
                        prop_assert!(clash.is_some(), "{}: a run with no key committed since was refused: {}", run, reason);
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("{run}: {e}"))),
                }
                prop_assert_eq!(&read_keys(root, AsOf::Latest), &model, "after {}", run);
            }
        }
        for (v, keys) in &at_version {
            prop_assert_eq!(&read_keys(root, AsOf::Version(*v)), keys, "version {}", v);
        }
    }
}
