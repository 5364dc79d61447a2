//! The skill fit's Parquet outputs: `players.parquet` (one row per player) and
//! `match_skill.parquet` (one row per replayed player-match), the latter written a day at a time
//! so that its memory is one day's rows.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use mm_trainer::skill::percentile::PercentileMap;
use mm_trainer::skill::raw::RawSkill;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::{FitError, output_err};
use crate::skill::history::History;

fn props() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build()
}

fn match_skill_schema(with_percentile: bool) -> SchemaRef {
    let mut fields = vec![
        Field::new("player_id", DataType::Utf8, false),
        Field::new("start_ms", DataType::Int64, false),
        Field::new("raw_skill", DataType::Float64, false),
    ];
    if with_percentile {
        fields.push(Field::new("percentile", DataType::Float64, false));
    }
    Arc::new(Schema::new(fields))
}

/// `match_skill.parquet`: every replayed row's raw skill just before its match and its
/// percentile on the final map, keyed by player and match start (the churn fit joins it).
/// Rows come a stretch of history at a time ([`push`](Self::push)) into a hidden file without
/// the percentile, which [`finish`](Self::finish) copies batch by batch with the percentile
/// added once the map is known, then publishes atomically.
pub struct MatchSkillWriter {
    path: PathBuf,
    raw: PathBuf,
    w: Option<ArrowWriter<File>>,
}

impl std::fmt::Debug for MatchSkillWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatchSkillWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl MatchSkillWriter {
    pub fn new(out: &Path) -> Result<Self, FitError> {
        let path = out.join("match_skill.parquet");
        let raw = mm_artifact::fsio::temp_path(&out.join("match_skill.raw.parquet"));
        let file = File::create(&raw).map_err(|e| output_err(&raw, e))?;
        let w = ArrowWriter::try_new(file, match_skill_schema(false), Some(props()))
            .map_err(|e| output_err(&raw, e))?;
        Ok(MatchSkillWriter {
            path,
            raw,
            w: Some(w),
        })
    }

    /// The rows of `h` whose pre-match skill `pre` is known (`ids` names `h`'s players).
    pub fn push(&mut self, ids: &[String], h: &History, pre: &[f32]) -> Result<(), FitError> {
        let mut pid = Vec::with_capacity(h.rows());
        let mut start = Vec::with_capacity(h.rows());
        let mut skill = Vec::with_capacity(h.rows());
        for m in &h.matches {
            let rows = m.lo as usize..m.hi as usize;
            for (r, &s) in rows.clone().zip(&pre[rows]) {
                let s = f64::from(s);
                if s.is_finite() {
                    pid.push(ids[h.player[r] as usize].as_str());
                    start.push(m.start_ms);
                    skill.push(s);
                }
            }
        }
        if pid.is_empty() {
            return Ok(());
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(pid)),
            Arc::new(Int64Array::from(start)),
            Arc::new(Float64Array::from(skill)),
        ];
        let b = RecordBatch::try_new(match_skill_schema(false), cols)
            .map_err(|e| output_err(&self.raw, e))?;
        if let Some(w) = self.w.as_mut() {
            w.write(&b).map_err(|e| output_err(&self.raw, e))?;
        }
        Ok(())
    }

    /// Adds each row's percentile on `map` and publishes the file.
    pub fn finish(mut self, map: &PercentileMap) -> Result<PathBuf, FitError> {
        let raw = self.raw.clone();
        let err = |e: &dyn std::fmt::Display| output_err(&raw, e);
        if let Some(w) = self.w.take() {
            w.close().map_err(|e| err(&e))?;
        }
        let tmp = mm_artifact::fsio::temp_path(&self.path);
        let out = File::create(&tmp).map_err(|e| output_err(&tmp, e))?;
        let schema = match_skill_schema(true);
        let mut w = ArrowWriter::try_new(out, schema.clone(), Some(props()))
            .map_err(|e| output_err(&tmp, e))?;
        let reader =
            ParquetRecordBatchReaderBuilder::try_new(File::open(&self.raw).map_err(|e| err(&e))?)
                .and_then(|b| b.with_batch_size(64 * 1024).build())
                .map_err(|e| err(&e))?;
        for b in reader {
            let b = b.map_err(|e| err(&e))?;
            let pct: Float64Array = b
                .column(2)
                .as_primitive::<Float64Type>()
                .iter()
                .map(|s| s.map(|s| map.percentile(s)))
                .collect();
            let mut cols = b.columns().to_vec();
            cols.push(Arc::new(pct));
            let b = RecordBatch::try_new(schema.clone(), cols).map_err(|e| output_err(&tmp, e))?;
            w.write(&b).map_err(|e| output_err(&tmp, e))?;
        }
        let f = w.into_inner().map_err(|e| output_err(&tmp, e))?;
        f.sync_all().map_err(|e| output_err(&tmp, e))?;
        drop(f);
        mm_artifact::fsio::publish(&tmp, &self.path).map_err(|e| output_err(&self.path, e))?;
        let _ = std::fs::remove_file(&self.raw);
        Ok(self.path.clone())
    }
}

impl Drop for MatchSkillWriter {
    /// A writer dropped before `finish` (an error on the way) leaves no hidden file behind.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.raw);
    }
}

/// `players.parquet`: each player's raw skill, percentile, matches and last match, and their win
/// skill when the exported team win model reads it, with its mass as of their last match.
pub fn write_players(
    out: &Path,
    ids: &[String],
    model: &RawSkill,
    last_seen: &[i64],
    map: &PercentileMap,
    win: Option<&crate::skill::win::WinFit>,
) -> Result<(), FitError> {
    let skill: Vec<f64> = (0..ids.len()).map(|i| model.skill(i)).collect();
    let games: Vec<i64> = (0..ids.len())
        .map(|i| model.players().get(i).map_or(0, |p| i64::from(p.games)))
        .collect();
    let pct: Vec<f64> = skill.iter().map(|&s| map.percentile(s)).collect();
    let mut fields = vec![
        Field::new("player_id", DataType::Utf8, false),
        Field::new("raw_skill", DataType::Float64, false),
        Field::new("percentile", DataType::Float64, false),
        Field::new("games", DataType::Int64, false),
        Field::new("last_seen_ms", DataType::Int64, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(ids.to_vec())),
        Arc::new(Float64Array::from(skill)),
        Arc::new(Float64Array::from(pct)),
        Arc::new(Int64Array::from(games)),
        Arc::new(Int64Array::from(last_seen.to_vec())),
    ];
    if let Some(w) = win {
        fields.push(Field::new("win_skill", DataType::Float64, false));
        cols.push(Arc::new(Float64Array::from(w.theta.clone())));
        let mass: Vec<f64> = w
            .mass
            .iter()
            .zip(last_seen)
            .map(|(&m, &t)| {
                if m > 0.0 {
                    w.update.mass_moved(m, w.as_of_ms, t)
                } else {
                    0.0
                }
            })
            .collect();
        fields.push(Field::new("win_mass", DataType::Float64, false));
        cols.push(Arc::new(Float64Array::from(mass)));
    }
    let schema = Arc::new(Schema::new(fields));
    let path = out.join("players.parquet");
    let batch = RecordBatch::try_new(schema, cols).map_err(|e| output_err(&path, e))?;
    let tmp = mm_artifact::fsio::temp_path(&path);
    mm_lake::parquet_io::write_parquet_file(&tmp, &[batch])?;
    mm_artifact::fsio::publish(&tmp, &path).map_err(|e| output_err(&path, e))?;
    Ok(())
}
