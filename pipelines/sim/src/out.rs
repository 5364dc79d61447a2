//! Writing a day of simulated history: lake rows and the ground truth beside them.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, StringBuilder, TimestampMillisecondBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use mm_lake::{Lake, PlayerRow, RowsBuilder, to_lake_batch};

use crate::SimError;

/// The truth of one player-match (a row of `truth/player_matches`).
#[derive(Debug, Clone)]
pub struct TruthRow<'a> {
    pub match_id: &'a str,
    pub player_id: &'a str,
    pub mode: &'static str,
    pub start_ms: i64,
    pub true_skill: f64,
    pub party_bonus: f64,
    pub effective_skill: f64,
    pub rating: f64,
    /// 1v1: the player's P(win); TDM: null.
    pub p_win: Option<f64>,
    /// TDM: the player's team's chance of each kill.
    pub kill_share: Option<f64>,
    pub p_stop: f64,
    pub p_long: f64,
    /// P(no match in the next 8 h, 1 day, 7 days, 14 days).
    pub churn: [f64; 4],
    /// The 8-h churn probability had the match ended in a win, a draw, a loss (all else as it
    /// was, a loss a blowout if this match was one), a close loss and a blowout loss: the truth
    /// an oracle pairs on. `churn[0]` is the realised outcome's.
    pub churn_8h_if: [f64; 5],
    pub stopped: bool,
}

/// The horizons of the exported churn truth, hours.
pub const HORIZONS_H: [f64; 4] = [8.0, 24.0, 168.0, 336.0];

#[derive(Default)]
struct TruthCols {
    match_id: StringBuilder,
    player_id: StringBuilder,
    mode: StringBuilder,
    start: TimestampMillisecondBuilder,
    f: Vec<Float64Builder>,
    p_win: Float64Builder,
    kill_share: Float64Builder,
    stopped: BooleanBuilder,
}

const TRUTH_F64: [&str; 16] = [
    "true_skill",
    "true_raw_skill",
    "party_bonus",
    "effective_skill",
    "rating",
    "p_stop",
    "p_long_break",
    "churn_8h",
    "churn_1d",
    "churn_7d",
    "churn_14d",
    "churn_8h_if_win",
    "churn_8h_if_draw",
    "churn_8h_if_loss",
    "churn_8h_if_close_loss",
    "churn_8h_if_blowout_loss",
];

/// Raw skill (the CoD scale, in [-1, 1]) per unit of latent skill: the 80th and 50th
/// percentiles of a standard normal differ by 0.8416, and by 0.1 in raw skill (CoD paper).
pub const RAW_PER_SKILL: f64 = 0.1 / 0.841_621;

/// One day's output, written when the day is over.
pub struct Day {
    pub day: i32,
    pub rows: RowsBuilder,
    truth: TruthCols,
    pub n: usize,
}

impl Day {
    pub fn new(day: i32) -> Self {
        Day {
            day,
            rows: RowsBuilder::with_capacity(1 << 16),
            truth: TruthCols {
                f: (0..TRUTH_F64.len())
                    .map(|_| Float64Builder::new())
                    .collect(),
                ..TruthCols::default()
            },
            n: 0,
        }
    }

    pub fn push(&mut self, row: &PlayerRow<'_>, truth: &TruthRow<'_>, source: &str) {
        self.n += 1;
        self.rows.push(row, source, self.n as u64, 0, 1);
        let t = &mut self.truth;
        t.match_id.append_value(truth.match_id);
        t.player_id.append_value(truth.player_id);
        t.mode.append_value(truth.mode);
        t.start.append_value(truth.start_ms);
        let vals = [
            truth.true_skill,
            truth.true_skill * RAW_PER_SKILL,
            truth.party_bonus,
            truth.effective_skill,
            truth.rating,
            truth.p_stop,
            truth.p_long,
            truth.churn[0],
            truth.churn[1],
            truth.churn[2],
            truth.churn[3],
            truth.churn_8h_if[0],
            truth.churn_8h_if[1],
            truth.churn_8h_if[2],
            truth.churn_8h_if[3],
            truth.churn_8h_if[4],
        ];
        for (b, v) in t.f.iter_mut().zip(vals) {
            b.append_value(v);
        }
        t.p_win.append_option(truth.p_win);
        t.kill_share.append_option(truth.kill_share);
        t.stopped.append_value(truth.stopped);
    }

    /// The day's lake partition and truth file, as (path in the lake, batch).
    pub fn finish(mut self, tag: &str) -> Result<Vec<(PathBuf, RecordBatch)>, SimError> {
        if self.n == 0 {
            return Ok(Vec::new());
        }
        let batch =
            to_lake_batch(&self.rows.finish()).map_err(|e| SimError::Internal(e.to_string()))?;
        let rel = Lake::partition_rel(self.day).join(format!("part-{tag}-0.parquet"));
        let mut files = vec![(rel, batch)];
        let t = &mut self.truth;
        let utc: Arc<str> = "UTC".into();
        let mut fields = vec![
            Field::new("match_id", DataType::Utf8, false),
            Field::new("player_id", DataType::Utf8, false),
            Field::new("mode", DataType::Utf8, false),
            Field::new(
                "start_time",
                DataType::Timestamp(TimeUnit::Millisecond, Some(utc.clone())),
                false,
            ),
        ];
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(t.match_id.finish()),
            Arc::new(t.player_id.finish()),
            Arc::new(t.mode.finish()),
            Arc::new(t.start.finish().with_timezone(utc)),
        ];
        for (name, b) in TRUTH_F64.iter().zip(&mut t.f) {
            fields.push(Field::new(*name, DataType::Float64, false));
            cols.push(Arc::new(b.finish()));
        }
        fields.push(Field::new("p_win", DataType::Float64, true));
        cols.push(Arc::new(t.p_win.finish()));
        fields.push(Field::new("kill_share", DataType::Float64, true));
        cols.push(Arc::new(t.kill_share.finish()));
        fields.push(Field::new("stopped", DataType::Boolean, false));
        cols.push(Arc::new(t.stopped.finish()));
        let truth = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
            .map_err(|e| SimError::Internal(e.to_string()))?;
        let rel = PathBuf::from("truth/player_matches")
            .join(mm_lake::schema::day_dir_name(self.day))
            .join(format!("part-{tag}-0.parquet"));
        files.push((rel, truth));
        Ok(files)
    }
}

/// A batch of plain columns: (name, values) for f64, u32-as-i64 and strings.
pub enum Col {
    F64(&'static str, Vec<f64>),
    I64(&'static str, Vec<i64>),
    Str(&'static str, Vec<String>),
}

pub fn batch(cols: Vec<Col>) -> Result<RecordBatch, SimError> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for c in cols {
        match c {
            Col::F64(n, v) => {
                fields.push(Field::new(n, DataType::Float64, false));
                arrays.push(Arc::new(arrow_array::Float64Array::from(v)));
            }
            Col::I64(n, v) => {
                fields.push(Field::new(n, DataType::Int64, false));
                arrays.push(Arc::new(arrow_array::Int64Array::from(v)));
            }
            Col::Str(n, v) => {
                fields.push(Field::new(n, DataType::Utf8, false));
                arrays.push(Arc::new(arrow_array::StringArray::from(v)));
            }
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| SimError::Internal(e.to_string()))
}
