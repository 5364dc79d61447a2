//! Reading the feature table's part files for the fit: the row counts of each window and the
//! bounded training sample of whole players.

use std::path::{Path, PathBuf};

use ndarray::Array2;
use polars::prelude::*;

use crate::churn::build::player_share;
use crate::churn::features::{NOW_BLOWOUT_LOSS, scan};
use crate::error::FitError;
use crate::error::pl_err;

/// One part file of the feature table, read whole (a bucket: about `chunk_rows` rows).
pub(super) fn read_part(p: &Path, columns: Option<&[String]>) -> Result<DataFrame, FitError> {
    let lf = scan(std::slice::from_ref(&p.to_path_buf())).map_err(pl_err)?;
    let lf = match columns {
        Some(c) => lf.select(c.iter().map(|n| col(n.as_str())).collect::<Vec<_>>()),
        None => lf,
    };
    let mut df = lf.collect().map_err(|e| FitError::Input {
        path: p.to_path_buf(),
        reason: e.to_string(),
    })?;
    df.rechunk_mut_par();
    Ok(df)
}

pub(super) fn f32_cols<'a>(
    df: &'a DataFrame,
    names: &[String],
) -> Result<Vec<&'a [f32]>, FitError> {
    names
        .iter()
        .map(|n| {
            df.column(n.as_str())
                .and_then(|c| c.f32())
                .and_then(|c| c.cont_slice())
                .map_err(pl_err)
        })
        .collect()
}

pub(super) fn labels(df: &DataFrame) -> Result<Vec<Option<bool>>, FitError> {
    Ok(df
        .column("churned")
        .and_then(|c| c.bool())
        .map_err(pl_err)?
        .iter()
        .collect())
}

pub(super) fn starts(df: &DataFrame) -> Result<&[i64], FitError> {
    df.column("start_ms")
        .and_then(|c| c.i64())
        .and_then(|c| c.cont_slice())
        .map_err(pl_err)
}

/// The training sample: whole players whose share is below `keep`, labelled rows before the
/// scoring window, in the order of the players' ids (the same matrix whatever the shards and
/// buckets that built the table).
pub(super) struct Sample {
    pub x: Array2<f64>,
    pub y: Vec<bool>,
    /// Whether the row's own match was a blowout loss (not a feature).
    pub blowout: Vec<bool>,
    pub groups: Vec<u32>,
    pub unused: u64,
}

pub(super) fn training_sample(
    files: &[PathBuf],
    names: &[String],
    score_from: i64,
    keep: f64,
) -> Result<Sample, FitError> {
    let key_cols: Vec<String> = ["player_id", "start_ms", "churned"]
        .iter()
        .map(|s| (*s).to_string())
        .collect();
    // Which rows a row of the table contributes: labelled, before the window, in the sample.
    let eligible = |label: Option<bool>, start: i64| label.is_some() && start < score_from;
    // Pass 1: the sample's players and their row counts; their order in the matrix (by id) and
    // so each player's first row. Only the matrix itself is held at full size.
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut unused = 0u64;
    for f in files {
        let df = read_part(f, Some(&key_cols))?;
        let ids = df
            .column("player_id")
            .and_then(|c| c.str())
            .map_err(pl_err)?;
        let (label, start) = (labels(&df)?, starts(&df)?);
        let (mut prev, mut inside) = (None::<&str>, false);
        for (i, id) in ids.iter().enumerate() {
            let id = id.unwrap_or("");
            if prev != Some(id) {
                prev = Some(id);
                inside = keep >= 1.0 || player_share(id) < keep;
                if inside {
                    counts.push((id.to_string(), 0));
                }
            }
            if !eligible(label[i], start[i]) {
                continue;
            }
            match (inside, counts.last_mut()) {
                (true, Some(c)) => c.1 += 1,
                _ => unused += 1,
            }
        }
    }
    counts.retain(|c| c.1 > 0);
    counts.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let n: usize = counts.iter().map(|c| c.1).sum();
    let mut first: hashbrown::HashMap<String, (usize, u32)> =
        hashbrown::HashMap::with_capacity(counts.len());
    let mut at = 0;
    for (g, (id, len)) in counts.into_iter().enumerate() {
        first.insert(id, (at, u32::try_from(g).unwrap_or(u32::MAX)));
        at += len;
    }
    // Pass 2: each sampled row straight into its place.
    let mut cols = key_cols;
    cols.extend(names.iter().cloned());
    cols.push(NOW_BLOWOUT_LOSS.to_string());
    let mut x = Array2::<f64>::zeros((n, names.len()));
    let (mut y, mut groups) = (vec![false; n], vec![0u32; n]);
    let mut blowout = vec![false; n];
    for f in files {
        let df = read_part(f, Some(&cols))?;
        let ids = df
            .column("player_id")
            .and_then(|c| c.str())
            .map_err(pl_err)?;
        let (label, start, fc) = (labels(&df)?, starts(&df)?, f32_cols(&df, names)?);
        let blown = f32_cols(&df, &[NOW_BLOWOUT_LOSS.to_string()])?[0];
        let (mut prev, mut slot) = (None::<&str>, None::<(usize, u32)>);
        for (i, id) in ids.iter().enumerate() {
            let id = id.unwrap_or("");
            if prev != Some(id) {
                prev = Some(id);
                slot = first.get(id).copied();
            }
            let (Some((r, g)), Some(l)) = (slot.as_mut(), label[i]) else {
                continue;
            };
            if start[i] >= score_from {
                continue;
            }
            for (j, c) in fc.iter().enumerate() {
                x[[*r, j]] = f64::from(c[i]);
            }
            y[*r] = l;
            blowout[*r] = blown[i] > 0.5;
            groups[*r] = *g;
            *r += 1;
        }
    }
    Ok(Sample {
        x,
        y,
        blowout,
        groups,
        unused,
    })
}

/// Counts over the labelled rows, before the fit.
#[derive(Default)]
pub(super) struct Counts {
    pub rows: u64,
    pub censored: u64,
    pub candidates: u64,
    pub score: u64,
    pub score_pos: u64,
}

pub(super) fn count_rows(files: &[PathBuf], score_from: i64) -> Result<Counts, FitError> {
    let cols = ["start_ms".to_string(), "churned".to_string()];
    let mut c = Counts::default();
    for f in files {
        let df = read_part(f, Some(&cols))?;
        let (label, start) = (labels(&df)?, starts(&df)?);
        c.rows += df.height() as u64;
        for (l, &s) in label.iter().zip(start) {
            match l {
                None => c.censored += 1,
                Some(y) if s >= score_from => {
                    c.score += 1;
                    c.score_pos += u64::from(*y);
                }
                Some(_) => c.candidates += 1,
            }
        }
    }
    Ok(c)
}
