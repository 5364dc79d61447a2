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

/// A row at every bound of the row checks (the cases `cargo mutants` found untested;
/// CONTRIBUTING.md, Mutation testing): zero counts, deaths by enemy and self-kills equal to
/// deaths, an end at the start, zero seconds and ping, the poles and the date line.
fn edge() -> PlayerRow<'static> {
    PlayerRow {
        kills: Some(0),
        deaths: Some(2),
        deaths_by_enemy: Some(2),
        self_kills: Some(2),
        assists: Some(0),
        end_ms: Some(row().start_ms),
        seconds_played: Some(0.0),
        ping_ms: Some(0.0),
        lat: Some(-90.0),
        lon: Some(180.0),
        ..row()
    }
}

/// Every bound passes, with the first and last start times and a team score for an outcome.
#[test]
fn validation_accepts_every_bound() {
    let edge = edge();
    assert!(edge.validate().is_ok(), "{:?}", edge.validate());
    for ok in [
        PlayerRow {
            lat: Some(90.0),
            lon: Some(-180.0),
            ..edge.clone()
        },
        PlayerRow {
            start_ms: MIN_START_MS,
            end_ms: None,
            ..edge.clone()
        },
        PlayerRow {
            start_ms: MAX_START_MS - 1,
            end_ms: None,
            ..edge.clone()
        },
        PlayerRow {
            outcome: None,
            team_score: Some(3.0),
            ..edge.clone()
        },
    ] {
        assert!(ok.validate().is_ok(), "{ok:?}: {:?}", ok.validate());
    }
}

/// One step past each bound fails, naming its field; a row error prints as field and reason.
#[test]
fn validation_refuses_one_step_past_each_bound() {
    let edge = edge();
    let past: Vec<(PlayerRow<'static>, &str)> = vec![
        (
            PlayerRow {
                assists: Some(-1),
                ..edge.clone()
            },
            "assists",
        ),
        (
            PlayerRow {
                self_kills: Some(3),
                ..edge.clone()
            },
            "self_kills",
        ),
        (
            PlayerRow {
                deaths_by_enemy: Some(3),
                ..edge.clone()
            },
            "deaths_by_enemy",
        ),
        (
            PlayerRow {
                end_ms: Some(row().start_ms - 1),
                ..edge.clone()
            },
            "end_time",
        ),
        (
            PlayerRow {
                seconds_played: Some(-0.5),
                ..edge.clone()
            },
            "seconds_played",
        ),
        (
            PlayerRow {
                ping_ms: Some(-1.0),
                ..edge.clone()
            },
            "ping_ms",
        ),
        (
            PlayerRow {
                lat: Some(-90.5),
                ..edge.clone()
            },
            "lat",
        ),
        (
            PlayerRow {
                lon: Some(180.5),
                ..edge.clone()
            },
            "lon",
        ),
        (
            PlayerRow {
                lon: Some(-180.5),
                ..edge.clone()
            },
            "lon",
        ),
        (
            PlayerRow {
                start_ms: MAX_START_MS,
                end_ms: None,
                ..edge.clone()
            },
            "start_time",
        ),
        (
            PlayerRow {
                mode: " ".into(),
                ..edge.clone()
            },
            "mode",
        ),
        (
            PlayerRow {
                match_id: "".into(),
                ..edge.clone()
            },
            "match_id",
        ),
        (
            PlayerRow {
                team: -1,
                ..edge.clone()
            },
            "team",
        ),
        (
            PlayerRow {
                rating: Some(f64::INFINITY),
                ..edge.clone()
            },
            "rating",
        ),
    ];
    for (r, field) in past {
        let e = r.validate().unwrap_err();
        assert_eq!(e.field.as_deref(), Some(field), "{e}");
    }
    let e = PlayerRow {
        kills: Some(-1),
        ..edge
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.to_string(), "kills: -1 is negative");
}

/// A lake batch of `rows` (start times in seconds after the row's), through the builder.
fn lake_of(rows: &[PlayerRow<'static>]) -> RecordBatch {
    let mut b = RowsBuilder::with_capacity(rows.len());
    for (k, r) in rows.iter().enumerate() {
        b.push(r, "a.csv", k as u64 + 2, 0, 1);
    }
    assert_eq!(b.len(), rows.len());
    assert!(!b.is_empty());
    to_lake_batch(&b.finish()).unwrap()
}

/// The builder's bookkeeping and the lake helpers the mutation run found untested: a row made
/// owned is the same row; the lazily created `quit_early` column keeps its nulls on both sides;
/// a batch of an older schema is conformed (a missing optional column as nulls, a column of
/// another integer type cast), one missing a required column is refused; rows out of lake order
/// are sorted.
#[test]
fn builder_bookkeeping_and_lake_helpers() {
    let borrowed = PlayerRow {
        match_id: std::borrow::Cow::Borrowed("m9"),
        ..row()
    };
    assert_eq!(borrowed.clone().into_owned(), borrowed);
    let lake = lake_of(&[
        row(),
        PlayerRow {
            player_id: "p2".into(),
            quit_early: Some(true),
            ..row()
        },
        PlayerRow {
            player_id: "p3".into(),
            ..row()
        },
    ]);
    let quit = lake.column_by_name("quit_early").unwrap().as_boolean();
    assert_eq!(
        (quit.is_null(0), quit.value(1), quit.is_null(2)),
        (true, true, true)
    );

    let schema = lake.schema();
    let keep = |drop: &str| -> Vec<usize> {
        (0..schema.fields().len())
            .filter(|&i| schema.field(i).name() != drop)
            .collect()
    };
    let without_role = lake.project(&keep(crate::schema::col::ROLE)).unwrap();
    let back = conform_to_lake(&without_role).unwrap();
    assert_eq!(back.schema(), matches_schema());
    assert_eq!(back.column_by_name("role").unwrap().null_count(), 3);
    let k = schema.index_of(crate::schema::col::KILLS).unwrap();
    let mut cols = lake.columns().to_vec();
    cols[k] = arrow_cast::cast(&cols[k], &DataType::Int64).unwrap();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields[k] = Field::new(crate::schema::col::KILLS, DataType::Int64, true);
    let wide = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    let back = conform_to_lake(&wide).unwrap();
    assert_eq!(back.schema(), matches_schema());
    assert_eq!(
        back.column_by_name("kills")
            .unwrap()
            .as_primitive::<arrow_array::types::Int32Type>()
            .value(0),
        3
    );
    let without_id = lake.project(&keep(crate::schema::col::MATCH_ID)).unwrap();
    let e = conform_to_lake(&without_id).unwrap_err().to_string();
    assert!(e.contains("lake batch lacks column match_id"), "{e}");

    let later = lake_of(&[PlayerRow {
        match_id: "m0".into(),
        start_ms: row().start_ms + 60_000,
        ..row()
    }]);
    // Two rows in reverse order, then the later one among three.
    for (earlier, want) in [
        (lake_of(&[row()]), vec!["m1", "m0"]),
        (lake, vec!["m1", "m1", "m1", "m0"]),
    ] {
        let sorted = sort_lake_order(&[later.clone(), earlier]).unwrap();
        let ids = sorted
            .column_by_name("match_id")
            .unwrap()
            .as_string::<i32>();
        assert_eq!(
            (0..want.len()).map(|i| ids.value(i)).collect::<Vec<_>>(),
            want
        );
    }
}
