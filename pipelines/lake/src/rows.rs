//! The typed player-match row, its row-level validation, and the columnar builder that turns rows
//! into Arrow batches of the lake schema.

use std::borrow::Cow;
use std::sync::{Arc, LazyLock};

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Int32Builder, Int64Builder, PrimitiveBuilder, StringBuilder,
    UInt8Builder, UInt32Builder,
};
use arrow_array::types::{Float64Type, Int32Type, TimestampMillisecondType};
use arrow_array::{
    ArrayRef, ArrowPrimitiveType, DictionaryArray, Int32Array, RecordBatch, StringArray,
    new_null_array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::schema::{Outcome, matches_schema};

/// One player's row of one match, with borrowed strings so that parsing allocates little.
///
/// `outcome` is `None` only when the source gives team scores instead: the match-level step
/// derives it from `team_score` before anything is written to the lake.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlayerRow<'a> {
    pub match_id: Cow<'a, str>,
    pub mode: Cow<'a, str>,
    /// Match start, milliseconds since the Unix epoch (UTC).
    pub start_ms: i64,
    pub team: i32,
    pub player_id: Cow<'a, str>,
    pub outcome: Option<Outcome>,
    pub end_ms: Option<i64>,
    pub seconds_played: Option<f64>,
    pub party_id: Option<Cow<'a, str>>,
    pub team_name: Option<Cow<'a, str>>,
    /// The player's role or position in the match (`top`, `sup`, `sniper`, ...), when the game
    /// has them: role-aware raw skill compares players within a role.
    pub role: Option<Cow<'a, str>>,
    pub kills: Option<i32>,
    pub deaths: Option<i32>,
    pub deaths_by_enemy: Option<i32>,
    pub self_kills: Option<i32>,
    pub assists: Option<i32>,
    pub score: Option<f64>,
    pub team_score: Option<f64>,
    pub perf: Option<f64>,
    pub quit_early: Option<bool>,
    pub input_device: Option<Cow<'a, str>>,
    pub platform: Option<Cow<'a, str>>,
    pub region: Option<Cow<'a, str>>,
    pub lat: Option<f64>,
    pub lon: Option<f64>,
    pub ping_ms: Option<f64>,
    pub rating: Option<f64>,
    /// Source columns with no lake column, as one JSON object.
    pub extra: Option<String>,
}

/// Why a row was rejected: the field at fault (if one) and a sentence a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowError {
    pub field: Option<String>,
    pub reason: String,
}

impl RowError {
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        RowError {
            field: Some(field.into()),
            reason: reason.into(),
        }
    }
    pub fn record(reason: impl Into<String>) -> Self {
        RowError {
            field: None,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for RowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(f, "{field}: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

/// Earliest and latest start times the lake accepts: 1970-01-01 to 2100-01-01 (UTC).
pub const MIN_START_MS: i64 = 0;
pub const MAX_START_MS: i64 = 4_102_444_800_000;

impl PlayerRow<'_> {
    /// The same row with owned strings.
    #[must_use]
    pub fn into_owned(self) -> PlayerRow<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        PlayerRow {
            match_id: own(self.match_id),
            mode: own(self.mode),
            player_id: own(self.player_id),
            party_id: self.party_id.map(own),
            team_name: self.team_name.map(own),
            role: self.role.map(own),
            input_device: self.input_device.map(own),
            platform: self.platform.map(own),
            region: self.region.map(own),
            start_ms: self.start_ms,
            team: self.team,
            outcome: self.outcome,
            end_ms: self.end_ms,
            seconds_played: self.seconds_played,
            kills: self.kills,
            deaths: self.deaths,
            deaths_by_enemy: self.deaths_by_enemy,
            self_kills: self.self_kills,
            assists: self.assists,
            score: self.score,
            team_score: self.team_score,
            perf: self.perf,
            quit_early: self.quit_early,
            lat: self.lat,
            lon: self.lon,
            ping_ms: self.ping_ms,
            rating: self.rating,
            extra: self.extra,
        }
    }

    /// Row-level checks: required fields present, counts not negative, times in order,
    /// coordinates on the globe, numbers finite. Match-level checks (two teams, one row per
    /// player, consistent outcomes) need the whole match and live in the ingest step.
    pub fn validate(&self) -> Result<(), RowError> {
        if self.match_id.trim().is_empty() {
            return Err(RowError::field("match_id", "missing required field"));
        }
        if self.player_id.trim().is_empty() {
            return Err(RowError::field("player_id", "missing required field"));
        }
        if self.mode.trim().is_empty() {
            return Err(RowError::field("mode", "missing required field"));
        }
        if !(MIN_START_MS..MAX_START_MS).contains(&self.start_ms) {
            return Err(RowError::field(
                "start_time",
                format!("{} ms is outside 1970..2100", self.start_ms),
            ));
        }
        if self.team < 0 {
            return Err(RowError::field(
                "team",
                format!("{} is negative", self.team),
            ));
        }
        if self.outcome.is_none() && self.team_score.is_none() {
            return Err(RowError::field(
                "outcome",
                "missing required field (no outcome and no team_score)",
            ));
        }
        for (name, v) in [
            ("kills", self.kills),
            ("deaths", self.deaths),
            ("deaths_by_enemy", self.deaths_by_enemy),
            ("self_kills", self.self_kills),
            ("assists", self.assists),
        ] {
            if let Some(v) = v
                && v < 0
            {
                return Err(RowError::field(name, format!("{v} is negative")));
            }
        }
        if let (Some(dbe), Some(d)) = (self.deaths_by_enemy, self.deaths)
            && dbe > d
        {
            return Err(RowError::field(
                "deaths_by_enemy",
                format!("{dbe} exceeds deaths ({d})"),
            ));
        }
        if let (Some(sk), Some(d)) = (self.self_kills, self.deaths)
            && sk > d
        {
            return Err(RowError::field(
                "self_kills",
                format!("{sk} exceeds deaths ({d})"),
            ));
        }
        if let Some(end) = self.end_ms
            && end < self.start_ms
        {
            return Err(RowError::field(
                "end_time",
                format!(
                    "ends {} s before it starts",
                    (self.start_ms - end) as f64 / 1000.0
                ),
            ));
        }
        for (name, v) in [
            ("seconds_played", self.seconds_played),
            ("score", self.score),
            ("team_score", self.team_score),
            ("perf", self.perf),
            ("lat", self.lat),
            ("lon", self.lon),
            ("ping_ms", self.ping_ms),
            ("rating", self.rating),
        ] {
            if let Some(v) = v
                && !v.is_finite()
            {
                return Err(RowError::field(name, format!("{v} is not a finite number")));
            }
        }
        if let Some(s) = self.seconds_played
            && s < 0.0
        {
            return Err(RowError::field(
                "seconds_played",
                format!("{s} is negative"),
            ));
        }
        if let Some(p) = self.ping_ms
            && p < 0.0
        {
            return Err(RowError::field("ping_ms", format!("{p} is negative")));
        }
        if let Some(lat) = self.lat
            && !(-90.0..=90.0).contains(&lat)
        {
            return Err(RowError::field(
                "lat",
                format!("{lat} is outside [-90, 90]"),
            ));
        }
        if let Some(lon) = self.lon
            && !(-180.0..=180.0).contains(&lon)
        {
            return Err(RowError::field(
                "lon",
                format!("{lon} is outside [-180, 180]"),
            ));
        }
        Ok(())
    }
}

/// Internal columns that travel with rows between ingest's two passes; never written to the lake.
pub mod internal {
    /// Index of the source file in the run's input list.
    pub const FILE_IDX: &str = "_file_idx";
    /// How many lake rows the source record produced (2 for a one-row-per-match source).
    pub const RECORD_ROWS: &str = "_record_rows";
}

static STAGING: LazyLock<SchemaRef> = LazyLock::new(|| {
    let mut fields: Vec<Field> = matches_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(Field::new(internal::FILE_IDX, DataType::UInt32, false));
    fields.push(Field::new(internal::RECORD_ROWS, DataType::UInt8, false));
    Arc::new(Schema::new(fields))
});

/// The schema of batches between ingest's passes: the lake columns (all nullable, because
/// `outcome` may still be pending) followed by the [`internal`] columns.
pub fn staging_schema() -> SchemaRef {
    STAGING.clone()
}

/// Projects a staging batch onto the lake schema, checking that required columns are filled.
pub fn to_lake_batch(staging: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let n = matches_schema().fields().len();
    let cols: Vec<ArrayRef> = staging.columns()[..n].to_vec();
    RecordBatch::try_new(matches_schema(), cols)
}

/// An optional primitive column that allocates nothing until its first value: inputs leave most
/// optional columns empty, and an all-null column is made in one step at the end.
#[derive(Debug)]
struct OptPrim<T: ArrowPrimitiveType> {
    b: Option<PrimitiveBuilder<T>>,
    cap: usize,
}

impl<T: ArrowPrimitiveType> OptPrim<T> {
    fn new(cap: usize) -> Self {
        OptPrim { b: None, cap }
    }
    #[inline]
    fn push(&mut self, v: Option<T::Native>, row: usize) {
        match (&mut self.b, v) {
            (Some(b), v) => b.append_option(v),
            (None, None) => {}
            (None, Some(v)) => {
                let mut b = PrimitiveBuilder::<T>::with_capacity(self.cap.max(row + 1));
                b.append_nulls(row);
                b.append_value(v);
                self.b = Some(b);
            }
        }
    }
    fn finish(&mut self, len: usize, dt: &DataType) -> ArrayRef {
        match self.b.take() {
            Some(mut b) => {
                b.append_nulls(len - b.len());
                Arc::new(b.finish().with_data_type(dt.clone()))
            }
            None => new_null_array(dt, len),
        }
    }
}

/// The string counterpart of [`OptPrim`].
#[derive(Debug)]
struct OptStr {
    b: Option<StringBuilder>,
    cap: usize,
}

impl OptStr {
    fn new(cap: usize) -> Self {
        OptStr { b: None, cap }
    }
    #[inline]
    fn push(&mut self, v: Option<&str>, row: usize) {
        match (&mut self.b, v) {
            (Some(b), v) => b.append_option(v),
            (None, None) => {}
            (None, Some(v)) => {
                let mut b =
                    StringBuilder::with_capacity(self.cap.max(row + 1), self.cap.max(row + 1) * 8);
                b.append_nulls(row);
                b.append_value(v);
                self.b = Some(b);
            }
        }
    }
    fn finish(&mut self, len: usize) -> ArrayRef {
        match self.b.take() {
            Some(mut b) => {
                b.append_nulls(len - b.len());
                Arc::new(b.finish())
            }
            None => new_null_array(&DataType::Utf8, len),
        }
    }
}

/// Builds staging batches (see [`staging_schema`]) row by row.
#[derive(Debug)]
pub struct RowsBuilder {
    match_id: StringBuilder,
    mode: StringBuilder,
    start_time: PrimitiveBuilder<TimestampMillisecondType>,
    team: Int32Builder,
    player_id: StringBuilder,
    outcome: StringBuilder,
    end_time: OptPrim<TimestampMillisecondType>,
    seconds_played: OptPrim<Float64Type>,
    party_id: OptStr,
    team_name: OptStr,
    role: OptStr,
    kills: OptPrim<Int32Type>,
    deaths: OptPrim<Int32Type>,
    deaths_by_enemy: OptPrim<Int32Type>,
    self_kills: OptPrim<Int32Type>,
    assists: OptPrim<Int32Type>,
    score: OptPrim<Float64Type>,
    team_score: OptPrim<Float64Type>,
    perf: OptPrim<Float64Type>,
    quit_early: Option<BooleanBuilder>,
    input_device: OptStr,
    platform: OptStr,
    region: OptStr,
    lat: OptPrim<Float64Type>,
    lon: OptPrim<Float64Type>,
    ping_ms: OptPrim<Float64Type>,
    rating: OptPrim<Float64Type>,
    extra: OptStr,
    /// Source file names as runs of (name, rows): consecutive rows almost always share one.
    source_file: Vec<(String, usize)>,
    /// Address and length of the last `source_file` argument.
    last_source: (usize, usize),
    source_line: Int64Builder,
    file_idx: UInt32Builder,
    record_rows: UInt8Builder,
    cap: usize,
    len: usize,
}

impl RowsBuilder {
    pub fn with_capacity(cap: usize) -> Self {
        Self::with_capacities(cap, cap * 8)
    }

    /// Room for `cap` rows and `bytes` bytes in each of the main string columns. Reserving
    /// generously is cheap: memory is only touched as it is filled, and a builder that never
    /// grows never copies.
    pub fn with_capacities(cap: usize, bytes: usize) -> Self {
        let s = || StringBuilder::with_capacity(cap, bytes);
        RowsBuilder {
            match_id: s(),
            mode: StringBuilder::with_capacity(cap, cap * 8),
            start_time: PrimitiveBuilder::with_capacity(cap),
            team: Int32Builder::with_capacity(cap),
            player_id: s(),
            outcome: StringBuilder::with_capacity(cap, cap * 4),
            end_time: OptPrim::new(cap),
            seconds_played: OptPrim::new(cap),
            party_id: OptStr::new(cap),
            team_name: OptStr::new(cap),
            role: OptStr::new(cap),
            kills: OptPrim::new(cap),
            deaths: OptPrim::new(cap),
            deaths_by_enemy: OptPrim::new(cap),
            self_kills: OptPrim::new(cap),
            assists: OptPrim::new(cap),
            score: OptPrim::new(cap),
            team_score: OptPrim::new(cap),
            perf: OptPrim::new(cap),
            quit_early: None,
            input_device: OptStr::new(cap),
            platform: OptStr::new(cap),
            region: OptStr::new(cap),
            lat: OptPrim::new(cap),
            lon: OptPrim::new(cap),
            ping_ms: OptPrim::new(cap),
            rating: OptPrim::new(cap),
            extra: OptStr::new(cap),
            source_file: Vec::new(),
            last_source: (0, 0),
            source_line: Int64Builder::with_capacity(cap),
            file_idx: UInt32Builder::with_capacity(cap),
            record_rows: UInt8Builder::with_capacity(cap),
            cap,
            len: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends one row with its provenance.
    pub fn push(
        &mut self,
        row: &PlayerRow<'_>,
        source_file: &str,
        source_line: u64,
        file_idx: u32,
        record_rows: u8,
    ) {
        let i = self.len;
        self.match_id.append_value(&row.match_id);
        self.mode.append_value(&row.mode);
        self.start_time.append_value(row.start_ms);
        self.team.append_value(row.team);
        self.player_id.append_value(&row.player_id);
        self.outcome.append_option(row.outcome.map(Outcome::as_str));
        self.end_time.push(row.end_ms, i);
        self.seconds_played.push(row.seconds_played, i);
        self.party_id.push(row.party_id.as_deref(), i);
        self.team_name.push(row.team_name.as_deref(), i);
        self.role.push(row.role.as_deref(), i);
        self.kills.push(row.kills, i);
        self.deaths.push(row.deaths, i);
        self.deaths_by_enemy.push(row.deaths_by_enemy, i);
        self.self_kills.push(row.self_kills, i);
        self.assists.push(row.assists, i);
        self.score.push(row.score, i);
        self.team_score.push(row.team_score, i);
        self.perf.push(row.perf, i);
        match (&mut self.quit_early, row.quit_early) {
            (Some(b), v) => b.append_option(v),
            (None, None) => {}
            (None, Some(v)) => {
                let mut b = BooleanBuilder::with_capacity(self.cap.max(i + 1));
                b.append_nulls(i);
                b.append_value(v);
                self.quit_early = Some(b);
            }
        }
        self.input_device.push(row.input_device.as_deref(), i);
        self.platform.push(row.platform.as_deref(), i);
        self.region.push(row.region.as_deref(), i);
        self.lat.push(row.lat, i);
        self.lon.push(row.lon, i);
        self.ping_ms.push(row.ping_ms, i);
        self.rating.push(row.rating, i);
        self.extra.push(row.extra.as_deref(), i);
        // Callers pass the same `&str` row after row: compare addresses before bytes.
        let key = (source_file.as_ptr() as usize, source_file.len());
        match self.source_file.last_mut() {
            Some((name, n)) if self.last_source == key || name == source_file => *n += 1,
            _ => self.source_file.push((source_file.to_string(), 1)),
        }
        self.last_source = key;
        self.source_line
            .append_value(i64::try_from(source_line).unwrap_or(i64::MAX));
        self.file_idx.append_value(file_idx);
        self.record_rows.append_value(record_rows);
        self.len += 1;
    }

    /// Finishes the rows pushed so far into one staging batch and resets the builder.
    pub fn finish(&mut self) -> RecordBatch {
        let n = self.len;
        let f64t = DataType::Float64;
        let i32t = DataType::Int32;
        let ts = crate::schema::timestamp_type();
        let quit: ArrayRef = match self.quit_early.take() {
            Some(mut b) => {
                b.append_nulls(n - b.len());
                Arc::new(b.finish())
            }
            None => new_null_array(&DataType::Boolean, n),
        };
        // One dictionary value per distinct file, and a key per row.
        self.last_source = (0, 0);
        let mut names: Vec<String> = Vec::new();
        let mut keys: Vec<i32> = Vec::with_capacity(n);
        for (name, k) in self.source_file.drain(..) {
            let key = match names.iter().position(|x| *x == name) {
                Some(p) => p,
                None => {
                    names.push(name);
                    names.len() - 1
                }
            };
            keys.extend(std::iter::repeat_n(
                i32::try_from(key).unwrap_or(i32::MAX),
                k,
            ));
        }
        let files = DictionaryArray::<Int32Type>::new(
            Int32Array::from(keys),
            Arc::new(StringArray::from(names)),
        );
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.match_id.finish()),
            Arc::new(self.mode.finish()),
            Arc::new(self.start_time.finish().with_data_type(ts.clone())),
            Arc::new(self.team.finish()),
            Arc::new(self.player_id.finish()),
            Arc::new(self.outcome.finish()),
            self.end_time.finish(n, &ts),
            self.seconds_played.finish(n, &f64t),
            self.party_id.finish(n),
            self.team_name.finish(n),
            self.role.finish(n),
            self.kills.finish(n, &i32t),
            self.deaths.finish(n, &i32t),
            self.deaths_by_enemy.finish(n, &i32t),
            self.self_kills.finish(n, &i32t),
            self.assists.finish(n, &i32t),
            self.score.finish(n, &f64t),
            self.team_score.finish(n, &f64t),
            self.perf.finish(n, &f64t),
            quit,
            self.input_device.finish(n),
            self.platform.finish(n),
            self.region.finish(n),
            self.lat.finish(n, &f64t),
            self.lon.finish(n, &f64t),
            self.ping_ms.finish(n, &f64t),
            self.rating.finish(n, &f64t),
            self.extra.finish(n),
            Arc::new(files),
            Arc::new(self.source_line.finish()),
            Arc::new(self.file_idx.finish()),
            Arc::new(self.record_rows.finish()),
        ];
        self.len = 0;
        // The builders above are typed to match `staging_schema` column for column, so this
        // cannot fail short of a programming error, which the unit tests would catch.
        RecordBatch::try_new(staging_schema(), cols)
            .expect("RowsBuilder columns match staging_schema")
    }
}

/// A batch of a lake file in the current lake schema: a file written before a column was added
/// (such as `role`) gets that column as nulls. A missing required column is an error.
pub fn conform_to_lake(b: &RecordBatch) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let schema = matches_schema();
    if b.schema() == schema {
        return Ok(b.clone());
    }
    let cols = schema
        .fields()
        .iter()
        .map(|f| match b.column_by_name(f.name()) {
            Some(c) if c.data_type() == f.data_type() => Ok(c.clone()),
            Some(c) => arrow_cast::cast(c, f.data_type()),
            None if f.is_nullable() => Ok(new_null_array(f.data_type(), b.num_rows())),
            None => Err(arrow_schema::ArrowError::SchemaError(format!(
                "lake batch lacks column {}",
                f.name()
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    RecordBatch::try_new(schema, cols)
}

/// Concatenates lake batches (each conformed to the lake schema) and orders the rows in lake
/// order, (start_time, match_id, team), keeping the input order within a team (a stable sort),
/// as each lake file is written.
pub fn sort_lake_order(batches: &[RecordBatch]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int32Type, TimestampMillisecondType};
    if batches.is_empty() {
        return Err(arrow_schema::ArrowError::InvalidArgumentError(
            "no batches".into(),
        ));
    }
    let batches = batches
        .iter()
        .map(conform_to_lake)
        .collect::<Result<Vec<_>, _>>()?;
    let all = arrow_select::concat::concat_batches(&matches_schema(), &batches)?;
    let col = |name: &str| {
        all.column_by_name(name).ok_or_else(|| {
            arrow_schema::ArrowError::SchemaError(format!("lake batch lacks column {name}"))
        })
    };
    let start = col(crate::schema::col::START_TIME)?.as_primitive::<TimestampMillisecondType>();
    let mid = col(crate::schema::col::MATCH_ID)?.as_string::<i32>();
    let team = col(crate::schema::col::TEAM)?.as_primitive::<Int32Type>();
    let mut order: Vec<u32> = (0..all.num_rows() as u32).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        (start.value(a), mid.value(a), team.value(a)).cmp(&(
            start.value(b),
            mid.value(b),
            team.value(b),
        ))
    });
    if order.windows(2).all(|w| w[0] < w[1]) {
        return Ok(all);
    }
    arrow_select::take::take_record_batch(&all, &arrow_array::UInt32Array::from(order))
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;
