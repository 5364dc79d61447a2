//! Unit tests of `rows.rs`.

use super::*;
use arrow_array::Array;
use arrow_array::cast::AsArray;

fn row() -> PlayerRow<'static> {
    PlayerRow {
        match_id: "m1".into(),
        mode: "tdm".into(),
        start_ms: 1_704_067_200_000,
        team: 0,
        player_id: "p1".into(),
        outcome: Some(Outcome::Win),
        kills: Some(3),
        deaths: Some(2),
        deaths_by_enemy: Some(2),
        ..Default::default()
    }
}

#[test]
fn builder_output_matches_staging_and_projects_to_lake_schema() {
    let mut b = RowsBuilder::with_capacity(4);
    b.push(&row(), "a.csv", 2, 0, 1);
    b.push(
        &PlayerRow {
            player_id: "p2".into(),
            lat: Some(10.0),
            ..row()
        },
        "b.csv",
        3,
        0,
        1,
    );
    b.push(
        &PlayerRow {
            player_id: "p3".into(),
            ..row()
        },
        "b.csv",
        4,
        0,
        1,
    );
    let batch = b.finish();
    assert_eq!(batch.num_rows(), 3);
    // a lazily created optional column keeps its nulls in the right places
    let lat = batch
        .column_by_name("lat")
        .unwrap()
        .as_primitive::<Float64Type>();
    assert_eq!(
        (lat.is_null(0), lat.value(1), lat.is_null(2)),
        (true, 10.0, true)
    );
    assert_eq!(batch.column_by_name("assists").unwrap().null_count(), 3);
    let files = batch
        .column_by_name("source_file")
        .unwrap()
        .as_dictionary::<Int32Type>();
    let names = files.values().as_string::<i32>();
    let name = |i: usize| names.value(files.keys().value(i) as usize);
    assert_eq!((name(0), name(1), name(2)), ("a.csv", "b.csv", "b.csv"));
    assert_eq!(names.len(), 2, "one dictionary value per file");
    assert_eq!(batch.schema(), staging_schema());
    let lake = to_lake_batch(&batch).unwrap();
    assert_eq!(lake.schema(), matches_schema());
    assert!(b.is_empty());
}

#[test]
fn lake_projection_refuses_a_pending_outcome() {
    let mut b = RowsBuilder::with_capacity(1);
    b.push(
        &PlayerRow {
            outcome: None,
            team_score: Some(3.0),
            ..row()
        },
        "a.csv",
        2,
        0,
        1,
    );
    assert!(to_lake_batch(&b.finish()).is_err());
}

#[test]
fn validation_names_the_field() {
    let cases: Vec<(PlayerRow<'static>, &str)> = vec![
        (
            PlayerRow {
                kills: Some(-1),
                ..row()
            },
            "kills",
        ),
        (
            PlayerRow {
                deaths_by_enemy: Some(5),
                ..row()
            },
            "deaths_by_enemy",
        ),
        (
            PlayerRow {
                end_ms: Some(row().start_ms - 1000),
                ..row()
            },
            "end_time",
        ),
        (
            PlayerRow {
                player_id: "".into(),
                ..row()
            },
            "player_id",
        ),
        (
            PlayerRow {
                outcome: None,
                ..row()
            },
            "outcome",
        ),
        (
            PlayerRow {
                lat: Some(91.0),
                ..row()
            },
            "lat",
        ),
        (
            PlayerRow {
                score: Some(f64::NAN),
                ..row()
            },
            "score",
        ),
        (PlayerRow { team: -2, ..row() }, "team"),
        (
            PlayerRow {
                start_ms: -5,
                ..row()
            },
            "start_time",
        ),
    ];
    for (r, field) in cases {
        let e = r.validate().unwrap_err();
        assert_eq!(e.field.as_deref(), Some(field), "{e}");
    }
    assert!(row().validate().is_ok());
}
