//! The lake's match-history schema: one row per player per match.
//!
//! `data/README.md` documents every column (type, unit, meaning); this module is the one place
//! the code spells them out. Readers should select columns by name, never by position.

use std::sync::{Arc, LazyLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// Column names of the `matches` table, in storage order.
pub mod col {
    pub const MATCH_ID: &str = "match_id";
    pub const MODE: &str = "mode";
    pub const START_TIME: &str = "start_time";
    pub const TEAM: &str = "team";
    pub const PLAYER_ID: &str = "player_id";
    pub const OUTCOME: &str = "outcome";
    pub const END_TIME: &str = "end_time";
    pub const SECONDS_PLAYED: &str = "seconds_played";
    pub const PARTY_ID: &str = "party_id";
    pub const TEAM_NAME: &str = "team_name";
    pub const ROLE: &str = "role";
    pub const KILLS: &str = "kills";
    pub const DEATHS: &str = "deaths";
    pub const DEATHS_BY_ENEMY: &str = "deaths_by_enemy";
    pub const SELF_KILLS: &str = "self_kills";
    pub const ASSISTS: &str = "assists";
    pub const SCORE: &str = "score";
    pub const TEAM_SCORE: &str = "team_score";
    pub const PERF: &str = "perf";
    pub const QUIT_EARLY: &str = "quit_early";
    pub const INPUT_DEVICE: &str = "input_device";
    pub const PLATFORM: &str = "platform";
    pub const REGION: &str = "region";
    pub const LAT: &str = "lat";
    pub const LON: &str = "lon";
    pub const PING_MS: &str = "ping_ms";
    pub const RATING: &str = "rating";
    pub const EXTRA: &str = "extra";
    pub const SOURCE_FILE: &str = "source_file";
    pub const SOURCE_LINE: &str = "source_line";
}

/// The timestamp type of `start_time` and `end_time`: milliseconds since the Unix epoch, UTC.
pub fn timestamp_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

static MATCHES: LazyLock<SchemaRef> = LazyLock::new(|| {
    use col::*;
    let ts = timestamp_type();
    Arc::new(Schema::new(vec![
        Field::new(MATCH_ID, DataType::Utf8, false),
        Field::new(MODE, DataType::Utf8, false),
        Field::new(START_TIME, ts.clone(), false),
        Field::new(TEAM, DataType::Int32, false),
        Field::new(PLAYER_ID, DataType::Utf8, false),
        Field::new(OUTCOME, DataType::Utf8, false),
        Field::new(END_TIME, ts, true),
        Field::new(SECONDS_PLAYED, DataType::Float64, true),
        Field::new(PARTY_ID, DataType::Utf8, true),
        Field::new(TEAM_NAME, DataType::Utf8, true),
        Field::new(ROLE, DataType::Utf8, true),
        Field::new(KILLS, DataType::Int32, true),
        Field::new(DEATHS, DataType::Int32, true),
        Field::new(DEATHS_BY_ENEMY, DataType::Int32, true),
        Field::new(SELF_KILLS, DataType::Int32, true),
        Field::new(ASSISTS, DataType::Int32, true),
        Field::new(SCORE, DataType::Float64, true),
        Field::new(TEAM_SCORE, DataType::Float64, true),
        Field::new(PERF, DataType::Float64, true),
        Field::new(QUIT_EARLY, DataType::Boolean, true),
        Field::new(INPUT_DEVICE, DataType::Utf8, true),
        Field::new(PLATFORM, DataType::Utf8, true),
        Field::new(REGION, DataType::Utf8, true),
        Field::new(LAT, DataType::Float64, true),
        Field::new(LON, DataType::Float64, true),
        Field::new(PING_MS, DataType::Float64, true),
        Field::new(RATING, DataType::Float64, true),
        Field::new(EXTRA, DataType::Utf8, true),
        Field::new(SOURCE_FILE, source_file_type(), false),
        Field::new(SOURCE_LINE, DataType::Int64, false),
    ]))
});

/// The type of `source_file`: dictionary-encoded text (one value per input file).
pub fn source_file_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// The schema of the `matches` table.
pub fn matches_schema() -> SchemaRef {
    MATCHES.clone()
}

/// Column names of the `quarantine` table.
pub mod qcol {
    pub const RUN_ID: &str = "run_id";
    pub const SOURCE_FILE: &str = "source_file";
    pub const SOURCE_SHA256: &str = "source_sha256";
    pub const LINE: &str = "line";
    pub const STAGE: &str = "stage";
    pub const FIELD: &str = "field";
    pub const REASON: &str = "reason";
    pub const MATCH_ID: &str = "match_id";
    pub const PLAYER_ID: &str = "player_id";
    pub const RAW: &str = "raw";
}

static QUARANTINE: LazyLock<SchemaRef> = LazyLock::new(|| {
    use qcol::*;
    Arc::new(Schema::new(vec![
        Field::new(RUN_ID, DataType::Utf8, false),
        Field::new(SOURCE_FILE, DataType::Utf8, false),
        Field::new(SOURCE_SHA256, DataType::Utf8, false),
        Field::new(LINE, DataType::Int64, false),
        Field::new(STAGE, DataType::Utf8, false),
        Field::new(FIELD, DataType::Utf8, true),
        Field::new(REASON, DataType::Utf8, false),
        Field::new(MATCH_ID, DataType::Utf8, true),
        Field::new(PLAYER_ID, DataType::Utf8, true),
        Field::new(RAW, DataType::Utf8, true),
    ]))
});

/// The schema of the `quarantine` table: one row per rejected source record (or lake row).
pub fn quarantine_schema() -> SchemaRef {
    QUARANTINE.clone()
}

/// The outcome of a match for the player's team (one definition, shared with the artifacts).
pub use mm_artifact::Outcome;

/// Milliseconds in a day: the lake's times are milliseconds since 1970-01-01 UTC.
pub const DAY_MS: i64 = 86_400_000;

/// Partition key of a start time: the UTC day, as days since 1970-01-01.
#[must_use]
pub fn day_of(start_ms: i64) -> i32 {
    // div_euclid keeps times before 1970 in the right day.
    i32::try_from(start_ms.div_euclid(DAY_MS)).unwrap_or(i32::MAX)
}

/// A time as reports print it: `YYYY-MM-DD HH:MM` (UTC); empty when out of range.
#[must_use]
pub fn ms_time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

/// The partition directory name of a day: `day=YYYY-MM-DD`.
#[must_use]
pub fn day_dir_name(day: i32) -> String {
    format!("day={}", day_date(day))
}

/// Inverse of [`day_dir_name`].
#[must_use]
pub fn parse_day_dir_name(name: &str) -> Option<i32> {
    parse_day_date(name.strip_prefix("day=")?)
}

/// A day (days since 1970-01-01) as its UTC date, `YYYY-MM-DD`.
#[must_use]
pub fn day_date(day: i32) -> String {
    chrono::DateTime::from_timestamp(i64::from(day) * 86_400, 0)
        .map(|d| d.date_naive())
        .unwrap_or_default()
        .format("%Y-%m-%d")
        .to_string()
}

/// Inverse of [`day_date`].
#[must_use]
pub fn parse_day_date(date: &str) -> Option<i32> {
    let date = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()?;
    let secs = date.and_hms_opt(0, 0, 0)?.and_utc().timestamp();
    i32::try_from(secs / 86_400).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_partition_names_round_trip_including_before_1970() {
        for ms in [0_i64, 1_704_067_200_000, -1, -86_400_001, 1_500_000_000_123] {
            let d = day_of(ms);
            assert_eq!(parse_day_dir_name(&day_dir_name(d)), Some(d), "ms={ms}");
        }
        assert_eq!(day_dir_name(day_of(1_704_067_200_000)), "day=2024-01-01");
        assert_eq!(day_dir_name(day_of(-1)), "day=1969-12-31");
    }

    #[test]
    fn schemas_have_unique_column_names() {
        for s in [matches_schema(), quarantine_schema()] {
            let mut names: Vec<_> = s.fields().iter().map(|f| f.name().clone()).collect();
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n);
        }
    }
}
