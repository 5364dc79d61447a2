//! `mm fit churn`: the EOMM churn model from the lake.
//!
//! Features come from the polars query of [`crate::churn_features`], built per player-hash
//! bucket and shard by [`crate::churn_build`] into the Delta tables of [`crate::churn_table`];
//! the model is `mm_trainer::churn::model` (L2 logistic regression, C by player-grouped
//! cross-validation on a bounded sample of whole players). Rows before `score_from` train the
//! model, rows from it on score it (a later time window); censored rows (too close to the end
//! of the data to know) are counted and left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use mm_lake::Lake;
use mm_trainer::churn::features::FeatureSpec;
use mm_trainer::churn::model::{ChurnFitConfig, ChurnFitError, ChurnModel, FitChurnModel};
use mm_trainer::stats::{AucCounts, BinaryMetrics, BinaryScore, ReliabilityBin};
use ndarray::Array2;
use polars::io::parquet::write::BatchedWriter;
use polars::prelude::*;
use serde::Serialize;

use crate::churn_build::{self, BuildInput, BuildStats, Shard, player_share};
use crate::churn_features::{FeatureQuery, scan};
use crate::churn_table::{CompleteBuild, build_key, commit_shard, complete_build};
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
    /// Where the feature and state Delta tables live (a path or an object-store URL); default
    /// `<out>/tables`. Shard runs and the fit must be given the same one.
    pub tables: Option<PathBuf>,
    /// Rows per player-hash bucket of the feature build: its memory grows with this.
    pub chunk_rows: usize,
    /// Build the feature table in this process even when shards of it are present but not all.
    pub rebuild: bool,
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
            max_train_rows: 2_000_000,
            skill: None,
            html: true,
            table: true,
            tables: None,
            chunk_rows: 1_000_000,
            rebuild: false,
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
    /// The feature table this fit read.
    pub build: BuildInfo,
    /// Building the feature table (0 when a complete build was found).
    pub features_seconds: f64,
    pub fit_seconds: f64,
    pub total_seconds: f64,
    pub peak_rss_bytes: Option<u64>,
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

fn out_err(p: &Path) -> impl Fn(std::io::Error) -> FitError + '_ {
    move |e| FitError::Output {
        path: p.to_path_buf(),
        reason: e.to_string(),
    }
}

/// Accumulates a group's predictions in bounded memory.
#[derive(Default)]
struct Group {
    score: BinaryScore,
    auc: AucCounts,
    sum_pred: f64,
    observed_n: u64,
    observed_pos: u64,
}

impl Group {
    fn add(&mut self, p: f64, y: bool) {
        self.score.add(p, f64::from(u8::from(y)));
        self.auc.add(p, y);
        self.sum_pred += p;
    }
    fn result(&self, name: String) -> GroupScore {
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

/// The simulator's truth column for a horizon (`truth/player_matches` of a simulated lake).
fn truth_column(horizon: &str) -> Option<&'static str> {
    match horizon {
        "8h" => Some("churn_8h"),
        "1d" | "24h" => Some("churn_1d"),
        "7d" | "1w" | "168h" => Some("churn_7d"),
        "14d" | "2w" | "336h" => Some("churn_14d"),
        _ => None,
    }
}

/// The feature query of a config, and the truth column it carries.
fn feature_query(cfg: &ChurnConfig) -> Result<(FeatureQuery, Option<String>), FitError> {
    let skill = match &cfg.skill {
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
    };
    let truth = truth_column(&cfg.horizon).map(str::to_string);
    let q = FeatureQuery {
        files: Vec::new(),
        mode: cfg.mode.clone(),
        until_ms: cfg.until_ms,
        history: cfg.spec.history,
        outcome_interactions: cfg.spec.interactions(),
        censor_windows: true,
        horizon_ms: cfg.horizon_ms,
        blowout_margin: cfg.blowout_margin,
        skill,
        data_start_ms: None,
        data_end_ms: None,
        truth: truth.is_some(),
    };
    Ok((q, truth))
}

impl ChurnConfig {
    /// Where the feature and state tables live: `--tables`, or `<out>/tables`.
    #[must_use]
    pub fn tables_root(&self) -> PathBuf {
        self.tables
            .clone()
            .unwrap_or_else(|| self.out.join("tables"))
    }
}

/// A local directory for a build's spill and part files: inside a local tables root (so that
/// committing is a rename), in the cache for a remote one.
fn build_scratch(root: &Path, run_id: &str) -> Result<PathBuf, FitError> {
    let text = root.to_string_lossy();
    let loc = mm_lake::Location::parse(&text)?;
    Ok(match loc.local() {
        Some(dir) => dir.join("_mm_scratch").join(format!("build-{run_id}")),
        None => mm_lake::location::cache_root()
            .join("build-scratch")
            .join(run_id),
    })
}

/// What one shard run did (`mm fit churn --shard K/N`).
#[derive(Debug, Clone, Serialize)]
pub struct ShardRun {
    pub tables: String,
    pub build: String,
    pub shard: String,
    pub run_id: String,
    pub stats: BuildStats,
    pub features_version: i64,
    pub state_version: i64,
    pub seconds: f64,
    pub peak_rss_bytes: Option<u64>,
}

/// Builds shard `shard` of the churn feature and state tables for `cfg` and commits it (one
/// Delta commit per table, replacing an earlier attempt of the same shard). Shards share
/// nothing but the lake and the tables: run them in any order, on any machines.
pub fn build_churn_shard(cfg: &ChurnConfig, shard: Shard) -> Result<ShardRun, FitError> {
    let t0 = Instant::now();
    let lake = Lake::open_as_of(&cfg.lake, cfg.as_of)?;
    let (q, truth) = feature_query(cfg)?;
    let (key, options) = build_key(&lake, &q, truth.as_deref())?;
    let root = cfg.tables_root();
    let run_id = mm_lake::new_run_id();
    let scratch = build_scratch(&root, &run_id)?;
    let built = churn_build::build(
        &lake,
        &BuildInput {
            query: q,
            truth_column: truth,
            shard,
            chunk_rows: cfg.chunk_rows,
            scratch: scratch.clone(),
        },
    );
    let committed = built.and_then(|stats| {
        let v = commit_shard(&root, &key, &options, shard, &stats, &run_id)?;
        Ok((stats, v))
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let (stats, (state_version, features_version)) = committed?;
    Ok(ShardRun {
        tables: root.to_string_lossy().into_owned(),
        build: key,
        shard: shard.to_string(),
        run_id,
        stats,
        features_version,
        state_version,
        seconds: t0.elapsed().as_secs_f64(),
        peak_rss_bytes: mm_lake::peak_rss_bytes(),
    })
}

/// Where the fit's feature table came from.
#[derive(Debug, Clone, Serialize)]
pub struct BuildInfo {
    pub tables: String,
    /// The build key (a digest of the options the rows depend on).
    pub key: String,
    pub shards: u32,
    /// Whether a complete build was found (rows built by shards or an earlier run).
    pub reused: bool,
    pub features_version: Option<i64>,
    pub state_version: Option<i64>,
    pub files: usize,
    /// When this run built the table: the rows read from the lake and the buckets.
    pub rows_read: Option<u64>,
    pub buckets: Option<usize>,
}

/// The complete build of `cfg`'s feature table: found in the tables, or built here as shard
/// `0/1`. Shards of another count present but incomplete are an error (a scheduler's run is
/// unfinished) unless `cfg.rebuild`.
fn ensure_build(cfg: &ChurnConfig, lake: &Lake) -> Result<(CompleteBuild, BuildInfo), FitError> {
    let (q, truth) = feature_query(cfg)?;
    let (key, _) = build_key(lake, &q, truth.as_deref())?;
    let root = cfg.tables_root();
    let (found, missing) = complete_build(&root, &key)?;
    let (build, built) = match (found, missing) {
        (Some(b), _) if !cfg.rebuild => (b, None),
        (None, Some(m)) if !cfg.rebuild => {
            return Err(FitError::Config {
                field: "shards",
                reason: format!(
                    "{m} in {}: run the missing shards (`mm fit churn --shard K/N` with the same \
                     options), or pass --rebuild to build the whole table in this process",
                    root.display()
                ),
            });
        }
        _ => {
            // The default tables (`<out>/tables`) are this output folder's own: they keep one
            // build, so that scheduled reruns do not pile up the builds of every lake version
            // (and the files an earlier rebuild replaced). Shared `--tables` are left as they
            // are: other option sets may be using them (a Delta tool deletes a build and vacuums).
            if cfg.tables.is_none() {
                let _ = std::fs::remove_dir_all(&root);
            }
            let run = build_churn_shard(cfg, Shard::default())?;
            let (b, m) = complete_build(&root, &key)?;
            let b = b.ok_or_else(|| {
                FitError::Query(m.unwrap_or_else(|| {
                    format!("build {key}: committed but not found in {}", root.display())
                }))
            })?;
            (b, Some(run.stats))
        }
    };
    let info = BuildInfo {
        tables: root.to_string_lossy().into_owned(),
        key: build.key.clone(),
        shards: build.shards,
        reused: built.is_none(),
        features_version: build.features_version,
        state_version: build.state_version,
        files: build.features.len(),
        rows_read: built.as_ref().map(|s| s.rows_read),
        buckets: built.as_ref().map(|s| s.buckets),
    };
    Ok((build, info))
}

/// One part file of the feature table, read whole (a bucket: about `chunk_rows` rows).
fn read_part(p: &Path, columns: Option<&[String]>) -> Result<DataFrame, FitError> {
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

fn labels(df: &DataFrame) -> Result<Vec<Option<bool>>, FitError> {
    Ok(df
        .column("churned")
        .and_then(|c| c.bool())
        .map_err(pl_err)?
        .iter()
        .collect())
}

fn starts(df: &DataFrame) -> Result<&[i64], FitError> {
    df.column("start_ms")
        .and_then(|c| c.i64())
        .and_then(|c| c.cont_slice())
        .map_err(pl_err)
}

/// The training sample: whole players whose share is below `keep`, labelled rows before the
/// scoring window, in the order of the players' ids (the same matrix whatever the shards and
/// buckets that built the table).
struct Sample {
    x: Array2<f64>,
    y: Vec<bool>,
    groups: Vec<u32>,
    unused: u64,
}

fn training_sample(
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
    let mut x = Array2::<f64>::zeros((n, names.len()));
    let (mut y, mut groups) = (vec![false; n], vec![0u32; n]);
    for f in files {
        let df = read_part(f, Some(&cols))?;
        let ids = df
            .column("player_id")
            .and_then(|c| c.str())
            .map_err(pl_err)?;
        let (label, start, fc) = (labels(&df)?, starts(&df)?, f32_cols(&df, names)?);
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
            groups[*r] = *g;
            *r += 1;
        }
    }
    Ok(Sample {
        x,
        y,
        groups,
        unused,
    })
}

/// Counts over the labelled rows, before the fit.
#[derive(Default)]
struct Counts {
    rows: u64,
    censored: u64,
    candidates: u64,
    score: u64,
    score_pos: u64,
}

fn count_rows(files: &[PathBuf], score_from: i64) -> Result<Counts, FitError> {
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

/// Against the simulator's truth.
#[derive(Default)]
struct TruthAcc {
    vs: BinaryScore,
    truth_score: BinaryScore,
    truth_auc: AucCounts,
    model_auc: AucCounts,
    diff: f64,
}

/// A streaming writer of a Parquet file published by rename when finished.
struct StreamOut {
    tmp: PathBuf,
    path: PathBuf,
    w: Option<BatchedWriter<std::fs::File>>,
}

impl StreamOut {
    fn new(path: PathBuf) -> StreamOut {
        StreamOut {
            tmp: mm_artifact::fsio::temp_path(&path),
            path,
            w: None,
        }
    }
    fn write(&mut self, df: &DataFrame) -> Result<(), FitError> {
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
    fn finish(mut self, empty: &DataFrame) -> Result<PathBuf, FitError> {
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

/// Runs the churn fit and writes its outputs into `cfg.out`.
///
/// The feature table is built (or found complete, when shards or an earlier run built it) as
/// Delta tables under [`ChurnConfig::tables_root`]; the fit then streams its part files three
/// times: counts, the bounded training sample, and scoring. Memory depends on `chunk_rows`,
/// `max_train_rows` and the number of players, not on the number of rows.
pub fn fit_churn(cfg: &ChurnConfig) -> Result<ChurnReport, FitError> {
    let t0 = Instant::now();
    let lake = Lake::open_as_of(&cfg.lake, cfg.as_of)?;
    if lake.match_entries().is_empty() {
        return Err(FitError::Empty(cfg.lake.clone()));
    }
    let (build, build_info) = ensure_build(cfg, &lake)?;
    let features_seconds = t0.elapsed().as_secs_f64();
    let files = &build.features;
    if build.rows == 0 {
        return Err(FitError::Empty(cfg.lake.clone()));
    }
    let (tmin, tmax) = (build.data_start_ms, build.data_end_ms);
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
    tracing::info!(
        build = %build_info.key,
        rows = build.rows,
        reused = build_info.reused,
        seconds = (features_seconds * 10.0).round() / 10.0,
        "churn features ready: {} rows",
        build.rows
    );
    let counts = count_rows(files, score_from)?;
    let keep = (cfg.max_train_rows as f64 / counts.candidates.max(1) as f64).min(1.0);
    let t_fit = Instant::now();
    let sample = training_sample(files, &names, score_from, keep)?;
    tracing::info!(
        train_rows = sample.y.len(),
        candidates = counts.candidates,
        score_rows = counts.score,
        "churn training sample: {} rows; fitting with cross-validation",
        sample.y.len()
    );
    if sample.y.is_empty() || counts.score == 0 {
        return Err(FitError::Config {
            field: "score-from",
            reason: format!(
                "{} labelled training rows and {} scoring rows: both windows need rows",
                sample.y.len(),
                counts.score
            ),
        });
    }
    let model = ChurnModel::fit(spec, sample.x.view(), &sample.y, &sample.groups, &cfg.fit)
        .map_err(fit_err)?;
    let train_rows = sample.y.len() as u64;
    let churn_rate_train = sample.y.iter().filter(|&&v| v).count() as f64 / train_rows as f64;
    let unused = sample.unused;
    drop(sample);
    let fit_seconds = t_fit.elapsed().as_secs_f64();
    tracing::info!(
        c = model.c,
        seconds = (fit_seconds * 10.0).round() / 10.0,
        "churn model fitted (C = {})",
        model.c
    );

    std::fs::create_dir_all(&cfg.out).map_err(out_err(&cfg.out))?;
    // Score the later window, one part at a time.
    let col_of = |name: &str| names.iter().position(|x| x == name);
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
    let mut by_party: BTreeMap<&str, Group> = BTreeMap::new();
    let mut by_skill: BTreeMap<usize, Group> = BTreeMap::new();
    let mut by_three: BTreeMap<String, Group> = BTreeMap::new();
    let mut truth = TruthAcc::default();
    let mut table_out = cfg
        .table
        .then(|| StreamOut::new(cfg.out.join("churn_features.parquet")));
    let mut empty_table: Option<DataFrame> = None;
    let mut row = vec![0.0; names.len()];
    let mut meter = mm_lake::progress::Meter::new("churn: scoring", "rows", Some(build.rows));
    for f in files {
        let mut df = read_part(f, None)?;
        meter.add(df.height() as u64);
        let (label, start, fc) = (labels(&df)?, starts(&df)?, f32_cols(&df, &names)?);
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
                split.push(match label[i] {
                    None => "censored",
                    Some(_) if start[i] >= score_from => "score",
                    Some(_) if inside => "train",
                    Some(_) => "train_unused",
                });
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
                    truth.vs.add(p, t);
                    truth.truth_score.add(t, f64::from(u8::from(y)));
                    truth.truth_auc.add(t, y);
                    truth.model_auc.add(p, y);
                    truth.diff += (p - t).abs();
                }
            }
            // EOMM Table 1: the last three outcomes, oldest first.
            if slots.len() == 3 {
                let mut pat = String::with_capacity(3);
                for [pr, w, d] in slots.iter().rev() {
                    let (Some(pr), Some(w), Some(d)) = (pr, w, d) else {
                        continue;
                    };
                    if fc[*pr][i] < 0.5 {
                        pat.clear();
                        break;
                    }
                    pat.push(if fc[*w][i] > 0.5 {
                        'W'
                    } else if fc[*d][i] > 0.5 {
                        'D'
                    } else {
                        'L'
                    });
                }
                if pat.len() == 3 {
                    let e = by_three.entry(pat).or_default();
                    e.observed_n += 1;
                    e.observed_pos += u64::from(y);
                    if scored {
                        e.add(p, y);
                    }
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
    }
    let scored = all.score.metrics();
    let model_auc = all.auc.auc();
    let truth = (truth.vs.n > 0).then(|| TruthCheck {
        column: truth_column(&cfg.horizon).unwrap_or_default().to_string(),
        rows: truth.vs.n,
        ece_vs_truth: truth.vs.metrics().ece,
        mean_abs_diff: truth.diff / truth.vs.n as f64,
        truth_auc: truth.truth_auc.auc(),
        truth_log_loss: truth.truth_score.metrics().log_loss,
        model_auc: truth.model_auc.auc(),
        reliability_vs_truth: truth.vs.reliability(),
    });

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
    if let (Some(out), Some(empty)) = (table_out, empty_table) {
        outputs.push(out.finish(&empty)?);
    }
    // The players' state at the end of the data: what `mm export` puts in the snapshot.
    let mut state_out = StreamOut::new(cfg.out.join("churn_state.parquet"));
    let mut empty_state = None;
    for f in &build.state {
        let df = read_part(f, None)?;
        if empty_state.is_none() {
            empty_state = Some(df.clear());
        }
        if df.height() > 0 {
            state_out.write(&df)?;
        }
    }
    if let Some(empty) = empty_state {
        outputs.push(state_out.finish(&empty)?);
    }
    let mut report = ChurnReport {
        lake: cfg.lake.clone(),
        lake_version: lake.version(),
        mode: cfg.mode.clone(),
        horizon: cfg.horizon.clone(),
        rows: counts.rows,
        censored: counts.censored,
        train_rows,
        train_rows_unused: unused,
        score_rows: counts.score,
        train_from_ms: tmin,
        score_from_ms: score_from,
        data_end_ms: tmax,
        churn_rate_train,
        churn_rate_score: counts.score_pos as f64 / counts.score as f64,
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
        build: build_info,
        features_seconds,
        fit_seconds,
        total_seconds: 0.0,
        peak_rss_bytes: None,
        outputs: Vec::new(),
    };
    if cfg.html {
        let html = crate::report::churn_html(&report, &model);
        write("churn_report.html", html.as_bytes(), &mut outputs)?;
    }
    report.total_seconds = t0.elapsed().as_secs_f64();
    report.peak_rss_bytes = mm_lake::peak_rss_bytes();
    report.outputs = outputs.clone();
    let metrics = serde_json::to_string_pretty(&report).unwrap_or_default();
    write("churn_metrics.json", metrics.as_bytes(), &mut outputs)?;
    report.outputs = outputs;
    Ok(report)
}
