//! A lake whose `matches` table was created before the `role` column existed: the next writer
//! adds the column, old files read as null in it, and compaction merges old and new files.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::Schema;

use super::{Lake, MATCHES_DIR};
use crate::delta::{self, AsOf};
use crate::rows::{PlayerRow, RowsBuilder, to_lake_batch};
use crate::schema::{Outcome, col, matches_schema};

fn match_rows(match_id: &str, day: i32, role: Option<&str>) -> RecordBatch {
    let mut b = RowsBuilder::with_capacity(2);
    for (team, p) in [(0, "a"), (1, "b")] {
        let row = PlayerRow {
            match_id: match_id.into(),
            mode: "m".into(),
            start_ms: i64::from(day) * 86_400_000,
            team,
            player_id: p.into(),
            outcome: Some(if team == 0 {
                Outcome::Win
            } else {
                Outcome::Loss
            }),
            role: role.map(Into::into),
            ..Default::default()
        };
        b.push(&row, "t", 1, 0, 1);
    }
    to_lake_batch(&b.finish()).unwrap()
}

/// The lake schema as it was before `role`.
fn old_schema() -> Schema {
    let s = matches_schema();
    Schema::new(
        s.fields()
            .iter()
            .filter(|f| f.name() != col::ROLE)
            .cloned()
            .collect::<Vec<_>>(),
    )
}

fn without_role(b: &RecordBatch) -> RecordBatch {
    let k = b.schema().index_of(col::ROLE).unwrap();
    let mut b = b.clone();
    b.remove_column(k);
    RecordBatch::try_new(Arc::new(old_schema()), b.columns().to_vec()).unwrap()
}

fn table_columns(lake: &Lake) -> Vec<String> {
    let t = delta::open_table(&lake.root().join(MATCHES_DIR), AsOf::Latest)
        .unwrap()
        .unwrap();
    let s = t.snapshot().unwrap().schema();
    s.fields().map(|f| f.name().clone()).collect()
}

#[test]
fn an_old_table_gains_the_role_column_and_its_files_read_as_null() {
    let dir = tempfile::tempdir().unwrap();
    let root = crate::location::Location::from_path(dir.path()).unwrap();
    // A table created by an older mm, with one file of the old schema.
    delta::create_table(
        &root.join(MATCHES_DIR),
        MATCHES_DIR,
        &old_schema(),
        &[("day", deltalake_core::kernel::DataType::DATE)],
    )
    .unwrap();
    delta::create_table(
        &root.join(crate::store::QUARANTINE_DIR),
        crate::store::QUARANTINE_DIR,
        &crate::schema::quarantine_schema(),
        &[],
    )
    .unwrap();
    let old = Lake::open(dir.path()).unwrap();
    assert!(!table_columns(&old).contains(&col::ROLE.to_string()));
    let mut txn = old.begin("old").unwrap();
    txn.write_parquet(
        &Lake::partition_rel(19_000).join("part-old.parquet"),
        &[without_role(&match_rows("m1", 19_000, None))],
    )
    .unwrap();
    txn.commit(&serde_json::json!({"run_id": "old"})).unwrap();

    // The next writer adds the column, in one commit, once.
    let lake = Lake::open_or_create(dir.path()).unwrap();
    let cols = table_columns(&lake);
    assert_eq!(
        cols.iter().filter(|c| *c == col::ROLE).count(),
        1,
        "{cols:?}"
    );
    let v = lake.version();
    assert_eq!(Lake::open_or_create(dir.path()).unwrap().version(), v);
    let mut txn = lake.begin("new").unwrap();
    txn.write_parquet(
        &Lake::partition_rel(19_000).join("part-new.parquet"),
        &[match_rows("m2", 19_000, Some("sup"))],
    )
    .unwrap();
    txn.commit(&serde_json::json!({"run_id": "new"})).unwrap();

    // Compaction merges the file without the column and the file with it.
    let lake = Lake::open(dir.path()).unwrap();
    let opt = lake.optimize(2).unwrap();
    assert_eq!((opt.files_removed, opt.rows), (2, 4));
    let lake = Lake::open(dir.path()).unwrap();
    let files = lake.partition_files(19_000).unwrap();
    assert_eq!(files.len(), 1);
    let b = &crate::parquet_io::read_parquet_columns(&files[0], Some(&["match_id", "role"]))
        .unwrap()[0];
    let (mid, role) = (
        b.column(0).as_string::<i32>(),
        b.column(1).as_string::<i32>(),
    );
    for i in 0..b.num_rows() {
        match mid.value(i) {
            "m1" => assert!(role.is_null(i)),
            _ => assert_eq!(role.value(i), "sup"),
        }
    }
}
