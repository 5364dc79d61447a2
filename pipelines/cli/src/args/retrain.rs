//! `mm retrain`.

use std::path::PathBuf;

use clap::Args;

use super::{MetricArg, metric_of};

#[derive(Debug, Args)]
pub struct RetrainArgs {
    /// New input files or directories to ingest first (none: retrain on the lake as it is).
    pub inputs: Vec<PathBuf>,
    /// A simulated world (a TOML file of `mm simulate` settings, e.g. data/world.toml) to
    /// write into the lake first, when the lake holds no matches yet.
    #[arg(long)]
    pub simulate: Option<PathBuf>,
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// The models root, a path or an s3://, gs://, az:// URL: the candidate is published, verified and promoted there.
    #[arg(long, env = "MM_MODELS", default_value = "out/models")]
    pub models: PathBuf,
    /// Working directory: lock, state, fits, evaluation and the run log (runs.jsonl).
    #[arg(long, env = "MM_WORK", default_value = "out/retrain")]
    pub work: PathBuf,
    /// The mode to fit (default: the lake's only mode; all modes when it has several).
    #[arg(long)]
    pub mode: Option<String>,
    /// The model's name under --models (default: the mode).
    #[arg(long)]
    pub name: Option<String>,
    /// Whole days held out at the end of the lake for the evaluation.
    #[arg(long, default_value_t = 1)]
    pub holdout_days: i64,
    /// Promote unless the candidate's holdout churn or win log-loss is worse than LATEST's by
    /// more than this.
    #[arg(long, default_value_t = 0.002)]
    pub margin: f64,
    /// The skill metric (default: kills-per-enemy-death for a mode whose rows carry kills,
    /// outcome for one whose rows do not).
    #[arg(long, value_enum)]
    pub metric: Option<MetricArg>,
    /// Evaluation rounds per pool size (1v1 modes), as `mm evaluate`'s.
    #[arg(long, default_value_t = mm_eval::DEFAULT_ROUNDS)]
    pub rounds: usize,
    /// Pool sizes (players per round) of the evaluation.
    #[arg(long, value_delimiter = ',', default_value = "100,200")]
    pub pool_sizes: Vec<usize>,
    /// Team modes: the evaluation's queue replay tick, seconds (as `mm evaluate --tick-s`; a
    /// longer tick evaluates a large lake's holdout day faster, in larger pools).
    #[arg(long, default_value_t = 5.0)]
    pub tick_s: f64,
    /// Fit every mode on the whole history, even where the promoted model could be continued
    /// over the new days only.
    #[arg(long)]
    pub full: bool,
    /// Continue a promoted model (raw skill, player states and percentiles over the new days;
    /// the other models kept) only while the last full fit of its chain ended less than this
    /// long before the run's cutoff; then fit in full. A duration: 7d, 1w, 36h.
    #[arg(long, default_value = "7d", value_parser = parse_duration)]
    pub full_every: i64,
    /// Fit in full when more than this share of the rows since the promoted model started
    /// before the end of its data (late matches, which a continued run applies after the
    /// model's own).
    #[arg(long, default_value_t = 0.05)]
    pub late_max: f64,
    /// A continued run refits the team win model and party adjustment on the two-team
    /// matches of the last this many days of continued runs (once they hold 1,000 decisive
    /// ones; the promoted model's are kept until then).
    #[arg(long, default_value_t = 7)]
    pub window_days: i64,
    /// A continued run refits the churn model (at its C, from its coefficients) on the
    /// labelled feature rows of the last this many days (the full run it continues seeds them
    /// with its own). Longer than the team window: the refit samples at most 500,000 rows
    /// whatever the window, and a 7-day window lost 0.001-0.0035 of AUC against full fits
    /// (docs/daily.md)
    #[arg(long, default_value_t = 14)]
    pub churn_window_days: i64,
    /// A continued run refits the churn model once its window holds at least this many
    /// labelled rows; the promoted model's is kept until then.
    #[arg(long, default_value_t = 20_000)]
    pub churn_min_rows: usize,
    /// Fit and evaluate this many modes at once, each mode's chain (fit skill to promote) on a
    /// thread of its own; 1 runs them one after another. Peak memory is about that of this many
    /// modes' fits together (the churn fit holds its training sample in memory:
    /// `--max-train-rows` in `[fit.churn]`)
    #[arg(long, default_value_t = 2)]
    pub parallel_modes: usize,
    /// Test hook: exit right after this stage, as a crash would.
    #[arg(long, hide = true)]
    pub crash_after: Option<String>,
}

/// A duration such as `7d`, `1w`, `36h` or `90m`, in milliseconds.
fn parse_duration(s: &str) -> Result<i64, String> {
    mm_fit::churn::parse_horizon(s).map_err(|e| e.to_string())
}

impl RetrainArgs {
    pub fn to_config(&self) -> anyhow::Result<mm_retrain::RetrainConfig> {
        let cfg = mm_retrain::RetrainConfig {
            lake: self.lake.clone(),
            inputs: self.inputs.clone(),
            simulate: self.simulate.clone(),
            models: self.models.clone(),
            work: crate::place::local("work", &self.work)?,
            mode: self.mode.clone(),
            name: self.name.clone(),
            holdout_days: self.holdout_days,
            margin: self.margin,
            metric: self.metric.map(metric_of),
            rounds: self.rounds,
            pool_sizes: self.pool_sizes.clone(),
            tick_s: self.tick_s,
            full: self.full,
            full_every_ms: self.full_every,
            late_max: self.late_max,
            window_days: self.window_days,
            churn_window_days: self.churn_window_days,
            churn_min_rows: self.churn_min_rows,
            parallel_modes: self.parallel_modes,
            // The stages' own settings come from the config file's tables (`retrain::run`).
            ingest: None,
            skill: None,
            churn: None,
            crash_after: self.crash_after.clone(),
            run_id: None,
        };
        cfg.check()?;
        Ok(cfg)
    }
}
