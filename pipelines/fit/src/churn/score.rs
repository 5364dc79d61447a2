//! Scoring the later window, one part file at a time: overall and by group (party, skill
//! decile, the last three outcomes), against the simulator's truth where the lake has it, and
//! the feature table written with each row's split and prediction.

use std::collections::BTreeMap;
use std::path::PathBuf;

use mm_trainer::churn::model::ChurnModel;
use mm_trainer::stats::{AucCounts, BinaryScore};
use polars::io::parquet::write::BatchedWriter;
use polars::prelude::*;

use super::sample::{f32_cols, for_each_part, labels, starts};
use super::{ChurnConfig, truth_column};
use crate::churn::build::player_share;
use crate::churn::report::{GroupScore, TruthCheck};
use crate::error::FitError;
use crate::error::{out_err, pl_err};

/// Accumulates a group's predictions in bounded memory.
#[derive(Default)]
pub(super) struct Group {
    pub score: BinaryScore,
    pub auc: AucCounts,
    sum_pred: f64,
    observed_n: u64,
    observed_pos: u64,
}

impl Group {
    pub(super) fn add(&mut self, p: f64, y: bool) {
        self.score.add(p, f64::from(u8::from(y)));
        self.auc.add(p, y);
        self.sum_pred += p;
    }
    pub(super) fn result(&self, name: String) -> GroupScore {
        let m = self.score.metrics();
        let n = self.auc.n();
        let (rows, observed) = if self.observed_n > 0 {
            (
                self.observed_n,
                self.observed_pos as f64 / self.observed_n as f64,
            )
        } else {
            (n, self.auc.positives() as f64 / n.max(1) as f64)
        };
        GroupScore {
            group: name,
            rows,
            observed,
            mean_predicted: self.sum_pred / n.max(1) as f64,
            auc: self.auc.auc(),
            ece: m.ece,
        }
    }
}

/// Against the simulator's truth.
#[derive(Default)]
struct TruthAcc {
    vs: BinaryScore,
    truth_score: BinaryScore,
    truth_auc: AucCounts,
    model_auc: AucCounts,
    diff: f64,
    /// The same against a constant prediction at the training rows' churn rate.
    constant_diff: f64,
}

/// A streaming writer of a Parquet file published by rename when finished.
pub(super) struct StreamOut {
    tmp: PathBuf,
    path: PathBuf,
    w: Option<BatchedWriter<std::fs::File>>,
}

impl StreamOut {
    pub(super) fn new(path: PathBuf) -> StreamOut {
        StreamOut {
            tmp: mm_artifact::fsio::temp_path(&path),
            path,
            w: None,
        }
    }
    pub(super) fn write(&mut self, df: &DataFrame) -> Result<(), FitError> {
        if self.w.is_none() {
            let f = std::fs::File::create(&self.tmp).map_err(out_err(&self.tmp))?;
            self.w = Some(
                ParquetWriter::new(f)
                    .with_compression(ParquetCompression::Zstd(None))
                    .batched(df.schema())
                    .map_err(pl_err)?,
            );
        }
        if let Some(w) = self.w.as_mut() {
            w.write_batch(df).map_err(pl_err)?;
        }
        Ok(())
    }
    /// Finishes and publishes the file; `empty` is written when no batch came.
    pub(super) fn finish(mut self, empty: &DataFrame) -> Result<PathBuf, FitError> {
        if self.w.is_none() {
            self.write(empty)?;
        }
        if let Some(w) = self.w.as_mut() {
            w.finish().map_err(pl_err)?;
        }
        drop(self.w.take());
        mm_artifact::fsio::publish(&self.tmp, &self.path).map_err(out_err(&self.path))?;
        Ok(self.path)
    }
}

/// What scoring the later window gave.
pub(super) struct Scores {
    pub all: Group,
    pub by_party: BTreeMap<&'static str, Group>,
    pub by_skill: BTreeMap<usize, Group>,
    pub by_three: BTreeMap<String, Group>,
    pub truth: Option<TruthCheck>,
    /// `churn_features.parquet`, when `cfg.table`.
    pub table: Option<PathBuf>,
}

/// Scores the rows from `score_from` on with `model`; with `cfg.table`, writes every row of
/// the feature table with its split (`train`, `train_unused` for rows outside the sample of
/// `keep`, `score`, `censored`) and prediction. `rows` is the table's size, for progress.
#[allow(clippy::too_many_arguments)]
pub(super) fn score(
    cfg: &ChurnConfig,
    files: &[PathBuf],
    names: &[String],
    model: &ChurnModel,
    score_from: i64,
    keep: f64,
    rows: u64,
) -> Result<Scores, FitError> {
    let col_of = |name: &str| names.iter().position(|x| x == name);
    let base_rate = model.positives as f64 / model.rows.max(1) as f64;
    let (party_k, pct_k, known_k) = (
        col_of("party"),
        col_of("skill_percentile"),
        col_of("skill_known"),
    );
    let slots: Vec<[Option<usize>; 3]> = (1..=3.min(cfg.spec.history))
        .map(|k| {
            let f = |s: &str| col_of(&format!("last{k}_{s}"));
            [f("present"), f("win"), f("draw")]
        })
        .collect();
    let mut all = Group::default();
    let mut by_party: BTreeMap<&'static str, Group> = BTreeMap::new();
    let mut by_skill: BTreeMap<usize, Group> = BTreeMap::new();
    let mut by_three: BTreeMap<String, Group> = BTreeMap::new();
    let mut truth = TruthAcc::default();
    let mut table_out = cfg
        .table
        .then(|| StreamOut::new(cfg.out.join("churn_features.parquet")));
    let mut empty_table: Option<DataFrame> = None;
    let mut row = vec![0.0; names.len()];
    let mut meter = mm_run::progress::Meter::new("churn: scoring", "rows", Some(rows));
    for_each_part(files, |mut df| {
        meter.add(df.height() as u64);
        let (label, start, fc) = (labels(&df)?, starts(&df)?, f32_cols(&df, names)?);
        let truth_col = df.column("truth_p_churn").ok().and_then(|c| c.f64().ok());
        let ids = df
            .column("player_id")
            .and_then(|c| c.str())
            .map_err(pl_err)?;
        let h = df.height();
        let mut preds: Vec<Option<f64>> = vec![None; h];
        let mut split: Vec<&str> = Vec::with_capacity(if cfg.table { h } else { 0 });
        let (mut prev, mut inside) = (None::<&str>, false);
        for i in 0..h {
            if cfg.table {
                let id = ids.get(i).unwrap_or("");
                if prev != Some(id) {
                    prev = Some(id);
                    inside = keep >= 1.0 || player_share(id) < keep;
                }
                split.push(split_of(label[i], start[i] >= score_from, inside));
            }
            let Some(y) = label[i] else { continue };
            let scored = start[i] >= score_from;
            let mut p = f64::NAN;
            if scored {
                for (v, c) in row.iter_mut().zip(&fc) {
                    *v = f64::from(c[i]);
                }
                p = model.predict(&row);
                preds[i] = Some(p);
                all.add(p, y);
                if let Some(k) = party_k {
                    let g = if fc[k][i] > 0.5 { "party" } else { "solo" };
                    by_party.entry(g).or_default().add(p, y);
                }
                if let (Some(pk), Some(kk)) = (pct_k, known_k)
                    && fc[kk][i] > 0.5
                {
                    let d = ((fc[pk][i] * 10.0) as usize).min(9);
                    by_skill.entry(d).or_default().add(p, y);
                }
                if let Some(t) = truth_col.and_then(|t| t.get(i)) {
                    truth.add(p, t, y, base_rate);
                }
            }
            // EOMM Table 1: the last three outcomes, oldest first.
            if let Some(pat) = last_three(&slots, &fc, i) {
                let e = by_three.entry(pat).or_default();
                e.observed_n += 1;
                e.observed_pos += u64::from(y);
                if scored {
                    e.add(p, y);
                }
            }
        }
        if let Some(out) = table_out.as_mut() {
            df.with_column(Column::new("split".into(), split))
                .and_then(|t| t.with_column(Column::new("p_churn".into(), preds)))
                .map_err(pl_err)?;
            if empty_table.is_none() {
                empty_table = Some(df.clear());
            }
            if df.height() > 0 {
                out.write(&df)?;
            }
        }
        Ok(())
    })?;
    let truth = truth.check(&cfg.horizon);

    let table = match (table_out, empty_table) {
        (Some(out), Some(empty)) => Some(out.finish(&empty)?),
        _ => None,
    };
    Ok(Scores {
        all,
        by_party,
        by_skill,
        by_three,
        truth,
        table,
    })
}

/// A row's split in the written table.
fn split_of(label: Option<bool>, scored: bool, in_sample: bool) -> &'static str {
    match label {
        None => "censored",
        Some(_) if scored => "score",
        Some(_) if in_sample => "train",
        Some(_) => "train_unused",
    }
}

/// Row `i`'s last three outcomes, oldest first (`W`, `D`, `L`), when it has three earlier
/// matches; `slots` are the columns of the most recent three's present, win and draw flags.
fn last_three(slots: &[[Option<usize>; 3]], fc: &[&[f32]], i: usize) -> Option<String> {
    if slots.len() != 3 {
        return None;
    }
    let mut pat = String::with_capacity(3);
    for [pr, w, d] in slots.iter().rev() {
        let (Some(pr), Some(w), Some(d)) = (pr, w, d) else {
            continue;
        };
        if fc[*pr][i] < 0.5 {
            return None;
        }
        pat.push(if fc[*w][i] > 0.5 {
            'W'
        } else if fc[*d][i] > 0.5 {
            'D'
        } else {
            'L'
        });
    }
    (pat.len() == 3).then_some(pat)
}

impl TruthAcc {
    /// A scored row's prediction `p` beside its true churn probability `t` and label `y`.
    fn add(&mut self, p: f64, t: f64, y: bool, base_rate: f64) {
        self.vs.add(p, t);
        self.truth_score.add(t, f64::from(u8::from(y)));
        self.truth_auc.add(t, y);
        self.model_auc.add(p, y);
        self.diff += (p - t).abs();
        self.constant_diff += (base_rate - t).abs();
    }

    /// The comparison with the truth (none when no scored row had it).
    fn check(&self, horizon: &str) -> Option<TruthCheck> {
        let truth = self;
        (truth.vs.n > 0).then(|| TruthCheck {
            column: truth_column(horizon).unwrap_or_default().to_string(),
            rows: truth.vs.n,
            ece_vs_truth: truth.vs.metrics().ece,
            mean_abs_diff: truth.diff / truth.vs.n as f64,
            constant_mean_abs_diff: truth.constant_diff / truth.vs.n as f64,
            truth_auc: truth.truth_auc.auc(),
            truth_log_loss: truth.truth_score.metrics().log_loss,
            model_auc: truth.model_auc.auc(),
            reliability_vs_truth: truth.vs.reliability(),
        })
    }
}
