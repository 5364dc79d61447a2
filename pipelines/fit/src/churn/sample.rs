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

/// Calls `each` on every file's frame (every column) in order, the next file read on a thread
/// of its own while `each` works on the current one (one frame ahead: the memory of one more
/// part). The scoring pass reads every column of every row; reading, its work and its writes
/// then overlap on the two cores instead of taking turns.
pub(super) fn for_each_part(
    files: &[PathBuf],
    mut each: impl FnMut(DataFrame) -> Result<(), FitError>,
) -> Result<(), FitError> {
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<DataFrame, FitError>>(1);
        s.spawn(move || {
            for f in files {
                let df = read_part(f, None);
                let failed = df.is_err();
                // A closed channel: the consumer stopped on an error of its own.
                if tx.send(df).is_err() || failed {
                    break;
                }
            }
        });
        for df in rx {
            each(df?)?;
        }
        Ok(())
    })
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
    // The files holding a sampled row: pass 2 reads only these. The table's files are buckets
    // of `player_share` ranges, so a sample of a few per cent of the players lies in a few per
    // cent of the files (at 111.4M rows, pass 2 had read all 120 feature columns of every row).
    let mut wanted = vec![false; files.len()];
    for (fi, f) in files.iter().enumerate() {
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
                (true, Some(c)) => {
                    c.1 += 1;
                    wanted[fi] = true;
                }
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
    for f in files
        .iter()
        .zip(&wanted)
        .filter_map(|(f, &w)| w.then_some(f))
    {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests fail loudly by design

    use super::*;
    use proptest::prelude::*;

    /// One player's rows: start, label, features, blowout flag.
    type Rows = Vec<(i64, Option<bool>, [f32; 3], f32)>;

    fn names() -> Vec<String> {
        ["a", "b", "c"].iter().map(|s| (*s).to_string()).collect()
    }

    /// Writes each file's players (rows grouped by player, as the build writes them).
    fn write(dir: &Path, files: &[Vec<(String, Rows)>]) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for (i, players) in files.iter().enumerate() {
            let rows = players
                .iter()
                .flat_map(|(id, r)| r.iter().map(move |r| (id, r)));
            let rows: Vec<_> = rows.collect();
            let mut cols = vec![
                Column::new(
                    "player_id".into(),
                    rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
                ),
                Column::new(
                    "start_ms".into(),
                    rows.iter().map(|r| r.1.0).collect::<Vec<_>>(),
                ),
                Column::new(
                    "churned".into(),
                    rows.iter().map(|r| r.1.1).collect::<Vec<_>>(),
                ),
            ];
            for (j, n) in names().iter().enumerate() {
                let v: Vec<f32> = rows.iter().map(|r| r.1.2[j]).collect();
                cols.push(Column::new(n.as_str().into(), v));
            }
            let b: Vec<f32> = rows.iter().map(|r| r.1.3).collect();
            cols.push(Column::new(NOW_BLOWOUT_LOSS.into(), b));
            let mut df = DataFrame::new(rows.len(), cols).unwrap();
            let p = dir.join(format!("part-{i:03}.parquet"));
            ParquetWriter::new(std::fs::File::create(&p).unwrap())
                .finish(&mut df)
                .unwrap();
            paths.push(p);
        }
        paths
    }

    /// The sample by its definition, from every row at once: the players below `keep` by id,
    /// their labelled rows before `score_from` in file order, a group per player.
    fn reference(
        players: &[(String, Rows)],
        score_from: i64,
        keep: f64,
    ) -> (Vec<f64>, Vec<bool>, Vec<bool>, Vec<u32>, u64) {
        let mut sorted: Vec<&(String, Rows)> = players.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let (mut x, mut y, mut blown, mut groups, mut unused) = (vec![], vec![], vec![], vec![], 0);
        let mut g = 0u32;
        for (id, rows) in sorted {
            let rows: Vec<_> = rows
                .iter()
                .filter(|r| r.1.is_some() && r.0 < score_from)
                .collect();
            if keep < 1.0 && player_share(id) >= keep {
                unused += rows.len() as u64;
                continue;
            }
            for r in &rows {
                x.extend(r.2.iter().map(|&v| f64::from(v)));
                y.push(r.1.unwrap());
                blown.push(r.3 > 0.5);
                groups.push(g);
            }
            g += u32::from(!rows.is_empty());
        }
        (x, y, blown, groups, unused)
    }

    /// Frames come in the files' order; a file that cannot be read ends the pass with its
    /// error, naming it, and the consumer's own error ends it too (the reader then stops).
    #[test]
    fn parts_are_read_ahead_in_order_and_errors_end_the_pass() {
        let dir = tempfile::tempdir().unwrap();
        let players: Vec<Vec<(String, Rows)>> = (0..5)
            .map(|i| {
                vec![(
                    format!("p{i}"),
                    vec![(i64::from(i), Some(true), [0.0; 3], 0.0)],
                )]
            })
            .collect();
        let mut paths = write(dir.path(), &players);
        let mut seen = Vec::new();
        for_each_part(&paths, |df| {
            seen.push(starts(&df)?.to_vec());
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, (0..5).map(|i| vec![i]).collect::<Vec<_>>());
        let missing = dir.path().join("missing.parquet");
        paths.insert(2, missing.clone());
        let mut n = 0;
        let err = for_each_part(&paths, |_| {
            n += 1;
            Ok(())
        })
        .unwrap_err();
        assert_eq!(n, 2);
        assert!(
            matches!(err, FitError::Input { ref path, .. } if *path == missing),
            "{err}"
        );
        let mut n = 0;
        let err = for_each_part(&paths[..2], |_| {
            n += 1;
            Err(FitError::Empty(PathBuf::from("stop")))
        })
        .unwrap_err();
        assert_eq!(n, 1);
        assert!(matches!(err, FitError::Empty(_)), "{err}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// The sample is the same whether the files are the build's share ranges (pass 2 then
        /// skips the files with no sampled player) or any other grouping of whole players.
        #[test]
        fn the_sample_is_its_definition_whatever_the_files(
            players in prop::collection::vec(
                prop::collection::vec((0i64..100, prop::option::weighted(0.8, any::<bool>()),
                    prop::array::uniform3(-5.0f32..5.0), 0u8..2), 1..6),
                1..40),
            files in 1usize..8,
            keep in prop::sample::select(vec![0.05, 0.2, 0.5, 1.0]),
            score_from in 20i64..110,
            by_share in any::<bool>(),
        ) {
            let players: Vec<(String, Rows)> = players.into_iter().enumerate().map(|(i, mut r)| {
                r.sort_by_key(|r| r.0);
                let rows = r.into_iter().map(|(s, l, f, b)| (s, l, f, f32::from(b))).collect();
                (format!("p{i:04}"), rows)
            }).collect();
            let mut parts = vec![Vec::new(); files];
            for (i, p) in players.iter().enumerate() {
                let at = if by_share {
                    (player_share(&p.0) * files as f64) as usize
                } else {
                    i % files
                };
                parts[at].push(p.clone());
            }
            let dir = tempfile::tempdir().unwrap();
            let paths = write(dir.path(), &parts);
            let got = training_sample(&paths, &names(), score_from, keep).unwrap();
            let (x, y, blown, groups, unused) = reference(&players, score_from, keep);
            prop_assert_eq!(got.x.iter().copied().collect::<Vec<_>>(), x);
            prop_assert_eq!(got.y, y);
            prop_assert_eq!(got.blowout, blown);
            prop_assert_eq!(got.groups, groups);
            prop_assert_eq!(got.unused, unused);
        }
    }
}
