//! `mm evaluate`, `mm retrain` and `mm pair`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::{MetricArg, day_ms, metric_of, parse_as_of};

#[derive(Debug, Args)]
pub struct RetrainArgs {
    /// New input files or directories to ingest first (none: retrain on the lake as it is).
    pub inputs: Vec<PathBuf>,
    /// A simulated world (a TOML file of `mm simulate` settings, e.g. data/world.toml) to
    /// write into the lake first, when the lake holds no matches yet.
    #[arg(long)]
    pub simulate: Option<PathBuf>,
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
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
    /// Evaluation rounds per pool size (1v1 modes).
    #[arg(long, default_value_t = 200)]
    pub rounds: usize,
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
            holdout_ms: self.holdout_days * 86_400_000,
            margin: self.margin,
            metric: self.metric.map(metric_of),
            rounds: self.rounds,
            pool_sizes: self.pool_sizes.clone(),
            tick_s: self.tick_s,
            full: self.full,
            full_every_ms: self.full_every,
            late_max: self.late_max,
            window_days: self.window_days,
            crash_after: self.crash_after.clone(),
            run_id: None,
        };
        cfg.check()?;
        Ok(cfg)
    }
}

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Read the lake as it was: a table version (`17`), a time (`2024-01-07T12:00:00Z`) or a
    /// day (`2024-01-07`, its end). Default: the latest version. `mm lake show` lists versions.
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// The artifact: a version directory, or a model directory (its LATEST).
    #[arg(long)]
    pub artifact: PathBuf,
    /// A second artifact, evaluated on the same pools and draws (e.g. the current LATEST).
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Output directory (evaluation.json, evaluation.html).
    #[arg(long, default_value = "out/evaluation")]
    pub out: PathBuf,
    /// The mode (default: the artifact's).
    #[arg(long)]
    pub mode: Option<String>,
    /// First day of the evaluation window (UTC, YYYY-MM-DD). Default: just after the
    /// artifact's data. It must be after the artifact's data in any case.
    #[arg(long)]
    pub from: Option<chrono::NaiveDate>,
    /// Day after the window's last (UTC, YYYY-MM-DD). Default: the end of the lake.
    #[arg(long)]
    pub to: Option<chrono::NaiveDate>,
    /// Pool sizes (players per round).
    #[arg(long, value_delimiter = ',', default_value = "100,200,300,400,500")]
    pub pool_sizes: Vec<usize>,
    /// Rounds per pool size.
    #[arg(long, default_value_t = 1000)]
    pub rounds: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Pools come from the players searching within windows of this many minutes; 0: from
    /// the whole evaluation window (the EOMM paper's collection of states).
    #[arg(long, default_value_t = 60)]
    pub pool_window_min: i64,
    /// A match is a predicted blowout when its favourite wins a decisive result with at least
    /// this probability.
    #[arg(long, default_value_t = 0.75)]
    pub blowout_p: f64,
    /// Policies (1v1): eomm, skill, random, worst, greedy.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "worst,skill,random,eomm,greedy"
    )]
    pub policies: Vec<String>,
    /// Team modes: the queue replay's tick, seconds (every team-queue policy runs: cod,
    /// threshold, eomm).
    #[arg(long, default_value_t = 5.0)]
    pub tick_s: f64,
    /// Team modes: how long the replay runs on after the last arrival, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub drain_s: f64,
    /// Team modes: team EOMM's balance bound, the largest |P(win) - 1/2| a search accepts at
    /// 0 s and from 120 s of waiting (linear between), or `none` for no bound. Default: the
    /// library's, `0.05,0.1`.
    #[arg(long, value_parser = parse_balance)]
    pub eomm_balance: Option<Balance>,
}

/// `--eomm-balance`: the bound's curve, or none.
#[derive(Debug, Clone)]
pub struct Balance(pub Option<mm_matcher::queue::Backoff>);

fn parse_balance(s: &str) -> Result<Balance, String> {
    if s == "none" {
        return Ok(Balance(None));
    }
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>().map_err(|e| format!("{x:?}: {e}")))
        .collect::<Result<_, _>>()?;
    match v[..] {
        [a, b] if (0.0..=0.5).contains(&a) && (a..=0.5).contains(&b) => {
            Ok(Balance(Some(mm_matcher::queue::Backoff::new(&[
                (0.0, a),
                (120.0, b),
            ]))))
        }
        _ => Err(format!(
            "{s:?}: give two bounds in [0, 0.5], the second at least the first (`0.05,0.1`), or \
             `none`"
        )),
    }
}

impl EvaluateArgs {
    pub fn to_config(&self) -> mm_eval::EvalConfig {
        let mut c = mm_eval::EvalConfig::new(&self.lake, &self.artifact, &self.out);
        c.compare.clone_from(&self.compare);
        c.mode.clone_from(&self.mode);
        c.as_of = self.as_of.unwrap_or_default();
        c.from_ms = day_ms(self.from);
        c.to_ms = day_ms(self.to);
        c.pool_sizes.clone_from(&self.pool_sizes);
        c.rounds = self.rounds;
        c.seed = self.seed;
        c.pool_window_ms = (self.pool_window_min > 0).then(|| self.pool_window_min * 60_000);
        c.blowout_p = self.blowout_p;
        c.policies.clone_from(&self.policies);
        c.tick_s = self.tick_s;
        c.drain_s = self.drain_s;
        if let Some(b) = &self.eomm_balance {
            c.eomm_balance.clone_from(&b.0);
        }
        c
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Exact minimum expected churn (engagement-optimised matchmaking).
    Eomm,
    /// Exact maximum expected churn (the worst case).
    Worst,
    /// Sort by skill, pair neighbours (needs skills: a --players pool).
    Skill,
    /// Neighbours of a seeded random permutation.
    Random,
    /// Cheapest edge first.
    Greedy,
    /// Every policy on the same pool.
    All,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["costs", "players"])))]
pub struct PairArgs {
    /// A P x P row-major little-endian int32 cost matrix (the peers' pools/*.i32 format).
    #[arg(long)]
    pub costs: Option<PathBuf>,
    /// Players with states, CSV `id,skill,c_win,c_lose,c_draw` (the peers' pool CSV): churn per
    /// outcome and an Elo skill, scored with the Elo-with-draws win model. With --artifact,
    /// only the `id` (or `player_id`) column is read and the artifact scores the pool.
    #[arg(long)]
    pub players: Option<PathBuf>,
    /// Score --players with an exported artifact: a version directory, or a model directory
    /// (its LATEST). Win model: the team win model on raw skills; churn: the churn model on
    /// each player's snapshot state.
    #[arg(long, requires = "players")]
    pub artifact: Option<PathBuf>,
    /// Search time for --artifact, ms since the Unix epoch. Default: the snapshot's time.
    #[arg(long, requires = "artifact")]
    pub now_ms: Option<i64>,
    /// Draw probability of the win model (with --players).
    #[arg(long, default_value_t = 0.2)]
    pub p_draw: f64,
    /// Elo scale of the win model (with --players).
    #[arg(long, default_value_t = 400.0)]
    pub elo_scale: f64,
    #[arg(long, value_enum, default_value = "eomm")]
    pub policy: PolicyArg,
    /// Seed of the random policy.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Check the exact policies' optimality certificate (LP duality) and report it.
    #[arg(long)]
    pub verify: bool,
    /// Print only the summary, not the pairs.
    #[arg(long)]
    pub summary: bool,
}
