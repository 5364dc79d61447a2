//! `mm fit churn`: the EOMM churn model from the lake.
//!
//! Features come from the polars query of [`crate::churn_features`]; the model is
//! `mm_trainer::churn::model` (L2 logistic regression, C by player-grouped cross-validation).
//! Rows before `score_from` train the model, rows from it on score it (a later time window);
//! censored rows (too close to the end of the data to know) are counted and left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use mm_lake::Lake;
use mm_trainer::churn::features::FeatureSpec;
use mm_trainer::churn::model::{ChurnFitConfig, ChurnFitError, ChurnModel, FitChurnModel};
use mm_trainer::stats::{BinaryMetrics, BinaryScore, ReliabilityBin, auc};
use ndarray::Array2;
use polars::prelude::*;
use serde::Serialize;

use crate::churn_features::{FeatureQuery, query, state_query};
use crate::skill::FitError;

/// What `fit_churn` does.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    pub lake: PathBuf,
    /// The lake snapshot to read (latest by default; a version or time reproduces an old fit).
    pub as_of: mm_lake::AsOf,
    pub out: PathBuf,
    pub mode: Option<String>,
    /// Only matches starting before this time (ms since the epoch).
    pub until_ms: Option<i64>,
    /// The horizon as written (`8h`, `1d`, `7d`, `14d`, ...) and in milliseconds.
    pub horizon: String,
    pub horizon_ms: i64,
    pub spec: FeatureSpec,
    pub blowout_margin: f64,
    /// First start (ms) of the scoring window; default: the last quarter of the data's span.
    pub score_from_ms: Option<i64>,
    pub fit: ChurnFitConfig,
    /// Train on at most this many rows (whole players, a fixed hash sample).
    pub max_train_rows: usize,
    /// The skill fit's output folder (`match_skill.parquet`): each row's pre-match skill
    /// percentile, a feature and the report's skill deciles.
    pub skill: Option<PathBuf>,
    pub html: bool,
    /// Write `churn_features.parquet` (the table, split and predictions).
    pub table: bool,
}

/// Writes a frame as zstd Parquet, atomically (a temporary file renamed).
fn write_parquet(df: &mut DataFrame, p: &std::path::Path) -> Result<(), FitError> {
    let name = p
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = p.with_file_name(format!(".{name}.tmp"));
    let file = std::fs::File::create(&tmp).map_err(|e| FitError::Output {
        path: tmp.clone(),
        reason: e.to_string(),
    })?;
    ParquetWriter::new(file)
        .with_compression(ParquetCompression::Zstd(None))
        .finish(df)
        .map_err(pl_err)?;
    std::fs::rename(&tmp, p).map_err(|e| FitError::Output {
        path: p.to_path_buf(),
        reason: e.to_string(),
    })
}

/// Parses a horizon such as `8h`, `1d`, `7d`, `14d` or `90m` into milliseconds.
pub fn parse_horizon(s: &str) -> Result<i64, FitError> {
    let bad = || FitError::Config {
        field: "horizon",
        reason: format!("'{s}' is not a duration such as 8h, 1d, 7d or 14d"),
    };
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?);
    let n: i64 = num.parse().map_err(|_| bad())?;
    let ms = match unit {
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return Err(bad()),
    };
    if n <= 0 {
        return Err(bad());
    }
    Ok(n * ms)
}

impl ChurnConfig {
    #[must_use]
    pub fn new(lake: impl Into<PathBuf>, out: impl Into<PathBuf>) -> Self {
        ChurnConfig {
            until_ms: None,
            as_of: mm_lake::AsOf::Latest,
            lake: lake.into(),
            out: out.into(),
            mode: None,
            horizon: "8h".into(),
            horizon_ms: 8 * 3_600_000,
            spec: FeatureSpec::default(),
            blowout_margin: 30.0,
            score_from_ms: None,
            fit: ChurnFitConfig::default(),
            max_train_rows: 4_000_000,
            skill: None,
            html: true,
            table: true,
        }
    }
}

/// Calibration of the model against the simulator's true churn probabilities.
#[derive(Debug, Clone, Serialize)]
pub struct TruthCheck {
    pub column: String,
    pub rows: u64,
    /// Expected calibration error against the true probabilities (10 equal-width bins of the
    /// prediction, each `|mean predicted - mean true|`, weighted by count).
    pub ece_vs_truth: f64,
    pub mean_abs_diff: f64,
    /// How well the true probabilities themselves rank the observed labels: the ceiling.
    pub truth_auc: f64,
    pub truth_log_loss: f64,
    pub model_auc: f64,
    pub reliability_vs_truth: Vec<ReliabilityBin>,
}

/// One group of a breakdown (skill decile, party or solo, last three outcomes).
#[derive(Debug, Clone, Serialize)]
pub struct GroupScore {
    pub group: String,
    pub rows: u64,
    pub observed: f64,
    pub mean_predicted: f64,
    pub auc: f64,
    pub ece: f64,
}

/// Everything `mm fit churn` reports (`churn_metrics.json`).
#[derive(Debug, Clone, Serialize)]
pub struct ChurnReport {
    pub lake: PathBuf,
    /// The version of the lake's matches table the fit read (`--as-of` reproduces the fit).
    pub lake_version: Option<i64>,
    pub mode: Option<String>,
    pub horizon: String,
    pub rows: u64,
    pub censored: u64,
    pub train_rows: u64,
    /// Training rows left out by `max_train_rows`.
    pub train_rows_unused: u64,
    pub score_rows: u64,
    pub train_from_ms: i64,
    pub score_from_ms: i64,
    pub data_end_ms: i64,
    pub churn_rate_train: f64,
    pub churn_rate_score: f64,
    pub c: f64,
    pub grid: Vec<mm_trainer::churn::model::GridPoint>,
    pub scored: BinaryMetrics,
    pub auc: f64,
    pub reliability: Vec<ReliabilityBin>,
    pub truth: Option<TruthCheck>,
    pub by_party: Vec<GroupScore>,
    pub by_skill_decile: Vec<GroupScore>,
    /// EOMM Table 1: observed churn after each pattern of the last three outcomes (oldest
    /// first), over all labelled rows; predictions over the scored rows.
    pub by_last_three: Vec<GroupScore>,
    pub features_seconds: f64,
    pub fit_seconds: f64,
    pub total_seconds: f64,
    pub outputs: Vec<PathBuf>,
}

fn pl_err(e: PolarsError) -> FitError {
    FitError::Query(e.to_string())
}

fn fit_err(e: ChurnFitError) -> FitError {
    FitError::Config {
        field: "churn model",
        reason: e.to_string(),
    }
}

/// Accumulates a group's predictions.
#[derive(Default)]
struct Group {
    score: BinaryScore,
    preds: Vec<f64>,
    labels: Vec<bool>,
    observed_n: u64,
    observed_pos: u64,
}

impl Group {
    fn add(&mut self, p: f64, y: bool) {
        self.score.add(p, f64::from(u8::from(y)));
        self.preds.push(p);
        self.labels.push(y);
    }
    fn result(&self, name: String) -> GroupScore {
        let m = self.score.metrics();
        let (rows, observed) = if self.observed_n > 0 {
            (
                self.observed_n,
                self.observed_pos as f64 / self.observed_n as f64,
            )
        } else {
            (
                m.n,
                self.labels.iter().filter(|&&v| v).count() as f64 / m.n.max(1) as f64,
            )
        };
        GroupScore {
            group: name,
            rows,
            observed,
            mean_predicted: self.preds.iter().sum::<f64>() / self.preds.len().max(1) as f64,
            auc: auc(&self.preds, &self.labels),
            ece: m.ece,
        }
    }
}

/// The player's position in [0, 1) by id: the fixed sample when training rows are capped.
fn player_share(id: &str) -> f64 {
    // FNV-1a: stable across runs and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn f32_cols<'a>(df: &'a DataFrame, names: &[String]) -> Result<Vec<&'a [f32]>, FitError> {
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

fn matrix(cols: &[&[f32]], rows: &[usize]) -> Array2<f64> {
    let mut x = Array2::<f64>::zeros((rows.len(), cols.len()));
    for (r, &i) in rows.iter().enumerate() {
        for (j, c) in cols.iter().enumerate() {
            x[[r, j]] = f64::from(c[i]);
        }
    }
    x
}

/// A truth column's name and its value per scored row (null where the truth has no row).
type TruthColumn = (String, Vec<Option<f64>>);

/// The simulator's true churn probability of each scored row, when the lake has it.
fn truth_probs(
    lake: &Path,
    horizon: &str,
    keys: &DataFrame,
) -> Result<Option<TruthColumn>, FitError> {
    let column = match horizon {
        "8h" => "churn_8h",
        "1d" | "24h" => "churn_1d",
        "7d" | "1w" | "168h" => "churn_7d",
        "14d" | "2w" | "336h" => "churn_14d",
        _ => return Ok(None),
    };
    let dir = lake.join("truth/player_matches");
    let mut files = Vec::new();
    let Ok(days) = std::fs::read_dir(&dir) else {
        return Ok(None);
    };
    for d in days.flatten() {
        for f in std::fs::read_dir(d.path()).into_iter().flatten().flatten() {
            if f.path().extension().is_some_and(|e| e == "parquet") {
                files.push(PlRefPath::from(f.path().to_string_lossy().as_ref()));
            }
        }
    }
    if files.is_empty() {
        return Ok(None);
    }
    files.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    let args = ScanArgsParquet {
        hive_options: HiveOptions::new_disabled(),
        ..ScanArgsParquet::default()
    };
    let truth = LazyFrame::scan_parquet_files(files.into_iter().collect(), args)
        .map_err(pl_err)?
        .select([
            col("match_id"),
            col("player_id"),
            col(column).alias("truth"),
        ]);
    let joined = keys
        .clone()
        .lazy()
        .join(
            truth,
            [col("match_id"), col("player_id")],
            [col("match_id"), col("player_id")],
            JoinArgs {
                maintain_order: MaintainOrderJoin::Left,
                ..JoinArgs::new(JoinType::Left)
            },
        )
        .collect()
        .map_err(pl_err)?;
    let t = joined
        .column("truth")
        .and_then(|c| c.f64())
        .map_err(pl_err)?;
    Ok(Some((column.to_string(), t.iter().collect())))
}

/// Runs the churn fit and writes its outputs into `cfg.out`.
pub fn fit_churn(cfg: &ChurnConfig) -> Result<ChurnReport, FitError> {
    let t0 = Instant::now();
    let lake = Lake::open_as_of(&cfg.lake, cfg.as_of)?;
    let files = lake.matches_files()?;
    if files.is_empty() {
        return Err(FitError::Empty(cfg.lake.clone()));
    }
    let q = FeatureQuery {
        files,
        mode: cfg.mode.clone(),
        until_ms: cfg.until_ms,
        history: cfg.spec.history,
        outcome_interactions: cfg.spec.interactions(),
        censor_windows: true,
        horizon_ms: cfg.horizon_ms,
        blowout_margin: cfg.blowout_margin,
        skill: match &cfg.skill {
            Some(dir) => {
                let p = dir.join("match_skill.parquet");
                if !p.exists() {
                    return Err(FitError::Config {
                        field: "skill",
                        reason: format!("{} not found (run `mm fit skill` first)", p.display()),
                    });
                }
                Some(p)
            }
            None => None,
        },
    };
    let mut df = query(&q).and_then(LazyFrame::collect).map_err(pl_err)?;
    df.rechunk_mut_par();
    let features_seconds = t0.elapsed().as_secs_f64();
    let n = df.height();
    if n == 0 {
        return Err(FitError::Empty(cfg.lake.clone()));
    }
    let label: Vec<Option<bool>> = df
        .column("churned")
        .and_then(|c| c.bool())
        .map_err(pl_err)?
        .iter()
        .collect();
    let start = df
        .column("start_ms")
        .and_then(|c| c.i64())
        .and_then(|c| c.cont_slice())
        .map_err(pl_err)?;
    let players = df
        .column("player_id")
        .and_then(|c| c.str())
        .map_err(pl_err)?;
    let (tmin, tmax) = start
        .iter()
        .fold((i64::MAX, i64::MIN), |(a, b), &s| (a.min(s), b.max(s)));
    // The query censored the count windows that reach before this first match.
    let spec = FeatureSpec {
        data_start_ms: Some(tmin),
        ..cfg.spec
    };
    let names = spec.names();
    let score_from = cfg.score_from_ms.unwrap_or(tmin + (tmax - tmin) / 4 * 3);
    if score_from <= tmin || score_from > tmax {
        return Err(FitError::Config {
            field: "score-from",
            reason: "the scoring window must start after the first match and by the last".into(),
        });
    }
    // Player ids as groups (rows are sorted by player), and the capped training sample.
    let keep = (cfg.max_train_rows as f64
        / label
            .iter()
            .zip(start)
            .filter(|(l, s)| l.is_some() && **s < score_from)
            .count()
            .max(1) as f64)
        .min(1.0);
    let mut group = Vec::with_capacity(n);
    let mut in_sample = Vec::with_capacity(n);
    let (mut g, mut prev, mut share): (u32, Option<&str>, f64) = (0, None, 0.0);
    for id in players.iter() {
        let id = id.unwrap_or("");
        if prev != Some(id) {
            g += u32::from(prev.is_some());
            share = player_share(id);
            prev = Some(id);
        }
        group.push(g);
        in_sample.push(keep >= 1.0 || share < keep);
    }
    let (mut train, mut score, mut unused, mut censored) = (Vec::new(), Vec::new(), 0u64, 0u64);
    for i in 0..n {
        match label[i] {
            None => censored += 1,
            Some(_) if start[i] >= score_from => score.push(i),
            Some(_) if in_sample[i] => train.push(i),
            Some(_) => unused += 1,
        }
    }
    if train.is_empty() || score.is_empty() {
        return Err(FitError::Config {
            field: "score-from",
            reason: format!(
                "{} labelled training rows and {} scoring rows: both windows need rows",
                train.len(),
                score.len()
            ),
        });
    }
    let cols = f32_cols(&df, &names)?;
    let t_fit = Instant::now();
    let ytr: Vec<bool> = train.iter().map(|&i| label[i] == Some(true)).collect();
    let gtr: Vec<u32> = train.iter().map(|&i| group[i]).collect();
    let model = {
        let xtr = matrix(&cols, &train);
        ChurnModel::fit(spec, xtr.view(), &ytr, &gtr, &cfg.fit).map_err(fit_err)?
    };
    let fit_seconds = t_fit.elapsed().as_secs_f64();

    // Score the later window.
    let mut row = vec![0.0; names.len()];
    let mut preds = vec![f64::NAN; n];
    let mut all = Group::default();
    for &i in &score {
        for (v, c) in row.iter_mut().zip(&cols) {
            *v = f64::from(c[i]);
        }
        let p = model.predict(&row);
        preds[i] = p;
        all.add(p, label[i] == Some(true));
    }
    let scored = all.score.metrics();
    let model_auc = auc(&all.preds, &all.labels);

    // Breakdowns.
    let col_of = |name: &str| names.iter().position(|x| x == name).map(|k| cols[k]);
    let mut by_party: BTreeMap<&str, Group> = BTreeMap::new();
    if let Some(party) = col_of("party") {
        for &i in &score {
            let k = if party[i] > 0.5 { "party" } else { "solo" };
            by_party
                .entry(k)
                .or_default()
                .add(preds[i], label[i] == Some(true));
        }
    }
    let mut by_skill: BTreeMap<usize, Group> = BTreeMap::new();
    if let (Some(pct), Some(known)) = (col_of("skill_percentile"), col_of("skill_known")) {
        for &i in &score {
            if known[i] > 0.5 {
                let d = ((pct[i] * 10.0) as usize).min(9);
                by_skill
                    .entry(d)
                    .or_default()
                    .add(preds[i], label[i] == Some(true));
            }
        }
    }
    let mut by_three: BTreeMap<String, Group> = BTreeMap::new();
    let slot = |k: usize| {
        let f = |s: &str| col_of(&format!("last{k}_{s}"));
        (f("present"), f("win"), f("draw"))
    };
    let slots: Vec<_> = (1..=3.min(cfg.spec.history)).map(slot).collect();
    if slots.len() == 3 {
        for i in 0..n {
            let Some(y) = label[i] else { continue };
            let mut pat = String::new();
            for (pr, w, d) in slots.iter().rev() {
                let (Some(pr), Some(w), Some(d)) = (pr, w, d) else {
                    continue;
                };
                if pr[i] < 0.5 {
                    pat.clear();
                    break;
                }
                pat.push(if w[i] > 0.5 {
                    'W'
                } else if d[i] > 0.5 {
                    'D'
                } else {
                    'L'
                });
            }
            if pat.len() != 3 {
                continue;
            }
            let e = by_three.entry(pat).or_default();
            e.observed_n += 1;
            e.observed_pos += u64::from(y);
            if start[i] >= score_from {
                e.add(preds[i], y);
            }
        }
    }

    // Against the simulator's truth, when the lake has it.
    let matches = df
        .column("match_id")
        .and_then(|c| c.str())
        .map_err(pl_err)?;
    let keys = DataFrame::new(
        score.len(),
        vec![
            Column::new(
                "match_id".into(),
                score
                    .iter()
                    .map(|&i| matches.get(i).unwrap_or("").to_string())
                    .collect::<Vec<String>>(),
            ),
            Column::new(
                "player_id".into(),
                score
                    .iter()
                    .map(|&i| players.get(i).unwrap_or("").to_string())
                    .collect::<Vec<String>>(),
            ),
        ],
    )
    .map_err(pl_err)?;
    let truth = match truth_probs(&cfg.lake, &cfg.horizon, &keys)? {
        Some((column, t)) => {
            let mut vs = BinaryScore::default();
            let (mut tp, mut tl, mut mp) = (Vec::new(), Vec::new(), Vec::new());
            let mut truth_score = BinaryScore::default();
            let mut diff = 0.0;
            for (&i, t) in score.iter().zip(&t) {
                let Some(t) = *t else { continue };
                let y = label[i] == Some(true);
                vs.add(preds[i], t);
                truth_score.add(t, f64::from(u8::from(y)));
                diff += (preds[i] - t).abs();
                tp.push(t);
                mp.push(preds[i]);
                tl.push(y);
            }
            (vs.n > 0).then(|| TruthCheck {
                column,
                rows: vs.n,
                ece_vs_truth: vs.metrics().ece,
                mean_abs_diff: diff / vs.n as f64,
                truth_auc: auc(&tp, &tl),
                truth_log_loss: truth_score.metrics().log_loss,
                model_auc: auc(&mp, &tl),
                reliability_vs_truth: vs.reliability(),
            })
        }
        None => None,
    };

    std::fs::create_dir_all(&cfg.out).map_err(|e| FitError::Output {
        path: cfg.out.clone(),
        reason: e.to_string(),
    })?;
    let mut outputs = Vec::new();
    let write = |name: &str, bytes: &[u8], outputs: &mut Vec<PathBuf>| {
        let p = cfg.out.join(name);
        mm_lake::store::write_atomic(&p, bytes).map_err(|e| FitError::Output {
            path: p.clone(),
            reason: e.to_string(),
        })?;
        outputs.push(p);
        Ok::<(), FitError>(())
    };
    let model_json = serde_json::json!({
        "kind": "churn-logistic",
        "horizon": cfg.horizon,
        "horizon_ms": cfg.horizon_ms,
        "mode": cfg.mode,
        "blowout_margin": cfg.blowout_margin,
        "model": model,
    });
    write(
        "churn_model.json",
        serde_json::to_string_pretty(&model_json)
            .unwrap_or_default()
            .as_bytes(),
        &mut outputs,
    )?;
    if cfg.table {
        let split: Vec<&str> = (0..n)
            .map(|i| match label[i] {
                None => "censored",
                Some(_) if start[i] >= score_from => "score",
                Some(_) if in_sample[i] => "train",
                Some(_) => "train_unused",
            })
            .collect();
        let mut table = df.clone();
        table
            .with_column(Column::new("split".into(), split))
            .and_then(|t| {
                t.with_column(Column::new(
                    "p_churn".into(),
                    preds
                        .iter()
                        .map(|p| (!p.is_nan()).then_some(*p))
                        .collect::<Vec<Option<f64>>>(),
                ))
            })
            .map_err(pl_err)?;
        let p = cfg.out.join("churn_features.parquet");
        write_parquet(&mut table, &p)?;
        outputs.push(p);
    }
    // The players' state at the end of the data: what `mm export` puts in the snapshot.
    let mut state = state_query(&q)
        .and_then(LazyFrame::collect)
        .map_err(pl_err)?;
    let p = cfg.out.join("churn_state.parquet");
    write_parquet(&mut state, &p)?;
    outputs.push(p);
    let rate = |rows: &[usize]| {
        rows.iter().filter(|&&i| label[i] == Some(true)).count() as f64 / rows.len() as f64
    };
    let mut report = ChurnReport {
        lake: cfg.lake.clone(),
        lake_version: lake.version(),
        mode: cfg.mode.clone(),
        horizon: cfg.horizon.clone(),
        rows: n as u64,
        censored,
        train_rows: train.len() as u64,
        train_rows_unused: unused,
        score_rows: score.len() as u64,
        train_from_ms: tmin,
        score_from_ms: score_from,
        data_end_ms: tmax,
        churn_rate_train: rate(&train),
        churn_rate_score: rate(&score),
        c: model.c,
        grid: model.grid.clone(),
        scored,
        auc: model_auc,
        reliability: all.score.reliability(),
        truth,
        by_party: by_party
            .iter()
            .map(|(k, g)| g.result((*k).to_string()))
            .collect(),
        by_skill_decile: by_skill
            .iter()
            .map(|(d, g)| g.result(format!("{}-{}", d * 10, d * 10 + 10)))
            .collect(),
        by_last_three: by_three.iter().map(|(k, g)| g.result(k.clone())).collect(),
        features_seconds,
        fit_seconds,
        total_seconds: 0.0,
        outputs: Vec::new(),
    };
    if cfg.html {
        let html = crate::report::churn_html(&report, &model);
        write("churn_report.html", html.as_bytes(), &mut outputs)?;
    }
    report.total_seconds = t0.elapsed().as_secs_f64();
    report.outputs = outputs.clone();
    let metrics = serde_json::to_string_pretty(&report).unwrap_or_default();
    write("churn_metrics.json", metrics.as_bytes(), &mut outputs)?;
    report.outputs = outputs;
    Ok(report)
}
