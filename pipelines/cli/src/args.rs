//! Flags as plain values, and their validation into library configs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use mm_ingest::{Format, IngestConfig, IngestError};

#[derive(Debug, Parser)]
#[command(
    name = "mm",
    version,
    about = "Matchmaking trainer: match history to skill and churn models"
)]
pub struct Cli {
    #[command(flatten)]
    pub out: Output,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Ingest match history (CSV, JSON lines, Parquet; the real-data sets) into the lake.
    Ingest(IngestArgs),
    /// Inspect the lake.
    #[command(subcommand)]
    Lake(LakeCmd),
    /// Simulate a seeded player population into a new lake, with its ground truth.
    Simulate(SimulateArgs),
    /// Fit models from the lake.
    #[command(subcommand)]
    Fit(FitCmd),
    /// Bundle the skill and churn fits into a versioned, checksummed artifact
    /// (`<models>/<name>/<version>/`), published atomically and promoted to LATEST.
    Export(ExportArgs),
    /// List, show, verify, promote, roll back and diff exported artifacts.
    #[command(subcommand)]
    Models(ModelsCmd),
    /// Pair a 1v1 pool (EOMM or a baseline policy) and print the pairs, objective and solve time.
    Pair(PairArgs),
    /// Benchmarks that print figures (and ratios to the Python peers when they are installed).
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Evaluate an artifact's policies offline on pools drawn from later history (EOMM Table 2
    /// protocol), with the real lobbies as a reference; writes evaluation.json and .html.
    Evaluate(EvaluateArgs),
    /// The whole chain for a scheduler: ingest new data, fit skill and churn on all but the
    /// held-out days, export, evaluate against LATEST on the held-out days, and promote only
    /// if not worse by the margin. Locked against overlap, resumable after a crash.
    Retrain(RetrainArgs),
    /// The config file (`mm.toml`): `mm config show [COMMAND…]` prints every setting a command
    /// would run with and where it came from (flag, config file, environment, default).
    #[command(subcommand)]
    Config(ConfigCmd),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCmd {
    /// Every setting of a command (e.g. `mm config show retrain --rounds 5`) and its source.
    Show(ConfigShowArgs),
}

#[derive(Debug, Args)]
pub struct ConfigShowArgs {
    /// The command line to resolve, without `mm` (none: the global settings only).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct RetrainArgs {
    /// New input files or directories to ingest first (none: retrain on the lake as it is).
    pub inputs: Vec<PathBuf>,
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
    #[arg(long, value_enum, default_value = "kills-per-enemy-death")]
    pub metric: MetricArg,
    /// Evaluation rounds per pool size (1v1 modes).
    #[arg(long, default_value_t = 200)]
    pub rounds: usize,
    #[arg(long, value_delimiter = ',', default_value = "100,200")]
    pub pool_sizes: Vec<usize>,
    /// Test hook: exit right after this stage, as a crash would.
    #[arg(long, hide = true)]
    pub crash_after: Option<String>,
}

impl RetrainArgs {
    pub fn to_config(&self) -> anyhow::Result<mm_eval::retrain::RetrainConfig> {
        if self.holdout_days < 1 {
            anyhow::bail!(mm_eval::retrain::RetrainError::Input(format!(
                "--holdout-days is {}: at least one day is held out",
                self.holdout_days
            )));
        }
        Ok(mm_eval::retrain::RetrainConfig {
            lake: self.lake.clone(),
            inputs: self.inputs.clone(),
            models: self.models.clone(),
            work: self.work.clone(),
            mode: self.mode.clone(),
            name: self.name.clone(),
            holdout_ms: self.holdout_days * 86_400_000,
            margin: self.margin,
            metric: metric_of(self.metric),
            rounds: self.rounds,
            pool_sizes: self.pool_sizes.clone(),
            crash_after: self.crash_after.clone(),
            run_id: None,
        })
    }
}

pub fn metric_of(m: MetricArg) -> mm_fit::Metric {
    match m {
        MetricArg::KillsPerEnemyDeath => mm_fit::Metric::KillsPerEnemyDeath,
        MetricArg::ScorePerMinute => mm_fit::Metric::ScorePerMinute,
        MetricArg::Perf => mm_fit::Metric::Perf,
        MetricArg::Outcome => mm_fit::Metric::Outcome,
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
        c
    }
}

#[derive(Debug, Subcommand)]
pub enum FitCmd {
    /// Raw skill (CoD style), percentiles, team win model, party adjustment, and the baselines
    /// (Elo, Glicko-2, TrueSkill, Weng-Lin), all scored on a later window than they were tuned on.
    Skill(FitSkillArgs),
    /// The EOMM churn model: features from the lake (polars), L2 logistic regression with C by
    /// player-grouped cross-validation, scored on a later window, with a calibration report.
    Churn(FitChurnArgs),
}

#[derive(Debug, Args)]
pub struct FitChurnArgs {
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Read the lake as it was: a table version (`17`), a time (`2024-01-07T12:00:00Z`) or a
    /// day (`2024-01-07`, its end). Default: the latest version. `mm lake show` lists versions.
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// Output directory (churn_model.json, churn_metrics.json, churn_report.html,
    /// churn_features.parquet).
    #[arg(long, default_value = "out/churn")]
    pub out: PathBuf,
    /// Only this mode (e.g. tdm-6v6); all modes when absent.
    #[arg(long)]
    pub mode: Option<String>,
    /// Only matches starting before this day (UTC, YYYY-MM-DD): fit on the data up to a
    /// cutoff, and evaluate on what follows (`mm evaluate`).
    #[arg(long)]
    pub until: Option<chrono::NaiveDate>,
    /// Churn = no match within this long after a match: 8h, 1d, 7d, 14d (any Nm, Nh, Nd, Nw).
    #[arg(long, default_value = "8h")]
    pub horizon: String,
    /// Earlier matches described per row.
    #[arg(long, default_value_t = 10)]
    pub history: usize,
    /// How many of the most recent earlier outcomes are crossed with the upcoming one
    /// (`now_loss_x_last1_loss`, ...): how sensitive a player is to a loss depends on the
    /// outcomes before it (EOMM Table 1). 0 makes the model additive in the outcome.
    #[arg(long, default_value_t = 3)]
    pub interactions: usize,
    /// A loss by more than this many team-score points is a blowout (CoD: 30 in TDM).
    #[arg(long, default_value_t = 30.0)]
    pub blowout_margin: f64,
    /// First day of the scoring window (YYYY-MM-DD); earlier rows train. Default: the last
    /// quarter of the data's span.
    #[arg(long)]
    pub score_from: Option<chrono::NaiveDate>,
    /// Inverse L2 strengths to cross-validate (scikit-learn's C), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.0001,0.001,0.01,0.1,1,10"
    )]
    pub c_grid: Vec<f64>,
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Cross-validate on at most this many rows (whole players).
    #[arg(long, default_value_t = 1_000_000)]
    pub cv_rows: usize,
    /// Train on at most this many rows (whole players, a fixed hash sample). The sample is
    /// held in memory as float64: 2M rows of 106 features is 1.7 GB.
    #[arg(long, default_value_t = 2_000_000)]
    pub max_train_rows: usize,
    /// The skill fit's output directory: its match_skill.parquet gives each row's pre-match
    /// skill percentile (a feature, and the report's skill deciles).
    #[arg(long)]
    pub skill: Option<PathBuf>,
    /// Do not write churn_report.html.
    #[arg(long)]
    pub no_html: bool,
    /// Do not write churn_features.parquet.
    #[arg(long)]
    pub no_table: bool,
    /// Where the feature and state tables (Delta) live: a directory or an object-store URL
    /// (`s3://bucket/prefix`). Default: `<out>/tables`. Shards and the fit need the same one.
    #[arg(long, env = "MM_TABLES")]
    pub tables: Option<PathBuf>,
    /// Only build and commit shard K of N of the feature table (players by id hash), then exit;
    /// run all N (any order, any machines), then `mm fit churn` without --shard fits on them.
    #[arg(long, conflicts_with = "shards")]
    pub shard: Option<mm_fit::churn_build::Shard>,
    /// Like `--shard K/N` with K from the environment variable JOB_COMPLETION_INDEX (a
    /// Kubernetes Indexed Job sets it).
    #[arg(long)]
    pub shards: Option<u32>,
    /// Rows per player-hash bucket of the feature build: memory grows with it.
    #[arg(long, default_value_t = 1_000_000)]
    pub chunk_rows: usize,
    /// Build the feature table in this process even when some shards of it are committed
    /// and others are not.
    #[arg(long)]
    pub rebuild: bool,
}

impl FitChurnArgs {
    /// The shard to build, if this run builds one (`--shard`, or `--shards` with the index
    /// from JOB_COMPLETION_INDEX).
    pub fn shard(&self) -> anyhow::Result<Option<mm_fit::churn_build::Shard>> {
        match (self.shard, self.shards) {
            (Some(s), _) => Ok(Some(s)),
            (None, Some(n)) => {
                let k = std::env::var("JOB_COMPLETION_INDEX").map_err(|_| {
                    anyhow::anyhow!(
                        "--shards {n}: JOB_COMPLETION_INDEX is not set (use --shard K/N)"
                    )
                })?;
                let s = format!("{}/{n}", k.trim()).parse().map_err(|e: String| {
                    anyhow::anyhow!("--shards with JOB_COMPLETION_INDEX={k}: {e}")
                })?;
                Ok(Some(s))
            }
            (None, None) => Ok(None),
        }
    }

    pub fn to_config(&self) -> anyhow::Result<mm_fit::churn::ChurnConfig> {
        let horizon_ms = mm_fit::churn::parse_horizon(&self.horizon)?;
        if self.interactions > self.history {
            return Err(mm_fit::FitError::Config {
                field: "interactions",
                reason: format!(
                    "{} is more than --history {}: only described matches can be crossed \
                     with the outcome",
                    self.interactions, self.history
                ),
            }
            .into());
        }
        if self.history == 0 || self.history > 50 {
            return Err(mm_fit::FitError::Config {
                field: "history",
                reason: format!("{} is not between 1 and 50", self.history),
            }
            .into());
        }
        let base = mm_fit::churn::ChurnConfig::new(self.lake.clone(), self.out.clone());
        Ok(mm_fit::churn::ChurnConfig {
            as_of: self.as_of.unwrap_or_default(),
            until_ms: day_ms(self.until),
            mode: self.mode.clone(),
            horizon: self.horizon.clone(),
            horizon_ms,
            // The data's start is set by the fit, from the lake.
            spec: mm_trainer::churn::features::FeatureSpec {
                history: self.history,
                data_start_ms: None,
                outcome_interactions: self.interactions,
            },
            blowout_margin: self.blowout_margin,
            score_from_ms: day_ms(self.score_from),
            fit: mm_trainer::churn::model::ChurnFitConfig {
                c_grid: self.c_grid.clone(),
                folds: self.folds,
                cv_max_rows: self.cv_rows,
                ..base.fit.clone()
            },
            max_train_rows: self.max_train_rows,
            skill: self.skill.clone(),
            html: !self.no_html,
            table: !self.no_table,
            tables: self.tables.clone(),
            chunk_rows: self.chunk_rows.max(1),
            rebuild: self.rebuild,
            ..base
        })
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MetricArg {
    /// (kills + 1) / (deaths by enemy + 1): self-kills never help; time-invariant.
    KillsPerEnemyDeath,
    /// Score per minute played.
    ScorePerMinute,
    /// The lake's perf column (tennis: share of points won).
    Perf,
    /// Win/draw/loss only.
    Outcome,
}

#[derive(Debug, Args)]
pub struct FitSkillArgs {
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Read the lake as it was: a table version (`17`), a time (`2024-01-07T12:00:00Z`) or a
    /// day (`2024-01-07`, its end). Default: the latest version. `mm lake show` lists versions.
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// Output directory (players.parquet, percentiles.json, team_model.json, skill_metrics.json,
    /// skill_report.html).
    #[arg(long, default_value = "out/skill")]
    pub out: PathBuf,
    /// Only this mode (e.g. tdm-6v6); all modes when absent.
    #[arg(long)]
    pub mode: Option<String>,
    /// Only matches starting before this day (UTC, YYYY-MM-DD): fit on the data up to a
    /// cutoff, and evaluate on what follows (`mm evaluate`).
    #[arg(long)]
    pub until: Option<chrono::NaiveDate>,
    #[arg(long, value_enum, default_value = "kills-per-enemy-death")]
    pub metric: MetricArg,
    /// Matches for an established player to move halfway to a new level.
    #[arg(long, default_value_t = 12.0)]
    pub half_life: f64,
    /// Log-odds of outperforming per unit of raw-skill difference. Default: chosen so the
    /// established players' raw skill has the CoD spread (sd 0.119: 80th minus 50th percentile
    /// is 0.1).
    #[arg(long)]
    pub scale: Option<f64>,
    /// Days since last played for the active population of the percentile map.
    #[arg(long, default_value_t = 28)]
    pub active_days: u32,
    #[arg(long, default_value_t = 101)]
    pub knots: usize,
    /// Start of the tuning window (YYYY-MM-DD); earlier matches are burn-in. Default: the 20%
    /// point of the matches in time.
    #[arg(long)]
    pub tune_from: Option<chrono::NaiveDate>,
    /// End of the tuning window (exclusive). Default: the 60% point.
    #[arg(long)]
    pub tune_to: Option<chrono::NaiveDate>,
    /// Start of the scoring window (not before --tune-to). Default: --tune-to.
    #[arg(long)]
    pub score_from: Option<chrono::NaiveDate>,
    /// Last day of the scoring window (inclusive). Default: the end of the data.
    #[arg(long)]
    pub score_to: Option<chrono::NaiveDate>,
    /// Do not tune: our model as given (--half-life, --margin), the baselines' defaults.
    #[arg(long)]
    pub no_tune: bool,
    /// Metric margin for scoring comparisons, in the metric's units (0: only the ordering
    /// counts). Tuned unless --no-tune.
    #[arg(long, default_value_t = 0.0)]
    pub margin: f64,
    /// Baselines to run, comma-separated (elo, glicko2, trueskill, weng-lin), or none.
    #[arg(long, default_value = "elo,glicko2,trueskill,weng-lin")]
    pub baselines: String,
    /// Refits of the party adjustment with parties credited in the raw-skill replay.
    #[arg(long, default_value_t = 2)]
    pub party_iterations: u32,
    /// Do not write skill_report.html.
    #[arg(long)]
    pub no_html: bool,
}

fn day_ms(d: Option<chrono::NaiveDate>) -> Option<i64> {
    d.and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc().timestamp_millis())
}

impl FitSkillArgs {
    pub fn to_config(&self) -> anyhow::Result<mm_fit::SkillConfig> {
        use mm_trainer::skill::baselines::BaselineKind;
        let mut baselines = Vec::new();
        for name in self
            .baselines
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if name == "none" {
                continue;
            }
            match BaselineKind::ALL.iter().find(|k| k.name() == name) {
                Some(&k) => baselines.push(k),
                None => {
                    return Err(mm_fit::FitError::Config {
                        field: "baselines",
                        reason: format!(
                            "unknown baseline '{name}' (elo, glicko2, trueskill, weng-lin, none)"
                        ),
                    }
                    .into());
                }
            }
        }
        Ok(mm_fit::SkillConfig {
            as_of: self.as_of.unwrap_or_default(),
            until_ms: day_ms(self.until),
            mode: self.mode.clone(),
            metric: match self.metric {
                MetricArg::KillsPerEnemyDeath => mm_fit::Metric::KillsPerEnemyDeath,
                MetricArg::ScorePerMinute => mm_fit::Metric::ScorePerMinute,
                MetricArg::Perf => mm_fit::Metric::Perf,
                MetricArg::Outcome => mm_fit::Metric::Outcome,
            },
            params: mm_trainer::skill::raw::RawSkillParams {
                half_life_matches: self.half_life,
                scale: self.scale.unwrap_or(6.0),
                margin: self.margin,
                ..Default::default()
            },
            tune: !self.no_tune,
            baselines,
            party_iterations: self.party_iterations,
            active_days: self.active_days,
            knots: self.knots,
            tune_from_ms: day_ms(self.tune_from),
            tune_to_ms: day_ms(self.tune_to),
            score_from_ms: day_ms(self.score_from),
            // The last day counts whole.
            score_to_ms: day_ms(self.score_to).map(|t| t + 86_399_999),
            html: !self.no_html,
            target_sd: self.scale.is_none().then_some(mm_fit::COD_SKILL_SD),
            ..mm_fit::SkillConfig::new(self.lake.clone(), self.out.clone())
        })
    }
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The lake to write (created if missing; it must hold no matches yet).
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    #[arg(long, default_value_t = 20_240_601)]
    pub seed: u64,
    #[arg(long, default_value_t = 20_000)]
    pub players: usize,
    #[arg(long, default_value_t = 14)]
    pub days: u32,
    /// Share of friend groups playing the 1v1 mode (the rest play 6v6 team deathmatch).
    #[arg(long, default_value_t = 0.3)]
    pub duel_share: f64,
    /// First simulated day (UTC), YYYY-MM-DD.
    #[arg(long, default_value = "2024-01-01")]
    pub start: chrono::NaiveDate,
    /// Matchmaker tick in seconds.
    #[arg(long, default_value_t = 15)]
    pub tick_s: i64,
}

impl SimulateArgs {
    pub fn to_config(&self) -> mm_sim::SimConfig {
        mm_sim::SimConfig {
            lake: self.lake.clone(),
            seed: self.seed,
            players: self.players,
            days: self.days,
            duel_share: self.duel_share,
            start: self.start,
            tick_s: self.tick_s,
        }
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

/// Flags every command takes, anywhere on the command line.
#[derive(Debug, Clone, Args)]
pub struct Output {
    /// Print the result as one JSON object on stdout (and no progress bar).
    #[arg(long, global = true)]
    pub json: bool,
    /// No progress bar and no progress or info log lines: warnings and errors only.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    /// Log lines on stderr: `text` for people, `json` for one JSON object per line (run id,
    /// stage, model version, level, message and fields). Levels: `RUST_LOG`.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "MM_LOG_FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// A config file with the same keys as the flags (default: `mm.toml` in the working
    /// directory, when it exists). Flags override it; it overrides the environment.
    #[arg(long, global = true, env = "MM_CONFIG")]
    pub config: Option<PathBuf>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// Recognise the real-data sets by their header; canonical otherwise.
    Auto,
    Canonical,
    Atp,
    Lichess,
    Lol,
    Csgo,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Files or directories to ingest (directories are searched recursively).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The lake directory (created if missing).
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: FormatArg,
    /// Mode (playlist) of canonical rows without a `mode` column.
    #[arg(long, default_value = "default")]
    pub mode: String,
    /// Rows staged in memory; past it, every day but the newest is finalised early (about 200 bytes a row).
    #[arg(long, default_value_t = 500_000)]
    pub stage_rows: usize,
    /// Size in MiB of the chunks parsed in parallel.
    #[arg(long, default_value_t = 2)]
    pub chunk_mib: usize,
}

impl IngestArgs {
    pub fn to_config(&self) -> Result<IngestConfig, IngestError> {
        let format = match self.format {
            FormatArg::Auto => None,
            FormatArg::Canonical => Some(Format::Canonical),
            FormatArg::Atp => Some(Format::Atp),
            FormatArg::Lichess => Some(Format::Lichess),
            FormatArg::Lol => Some(Format::Lol),
            FormatArg::Csgo => Some(Format::Csgo),
        };
        let chunk_bytes = self
            .chunk_mib
            .checked_mul(1 << 20)
            .filter(|b| *b > 0)
            .ok_or(IngestError::Config {
                field: "chunk_mib",
                reason: format!("{} is not a usable chunk size", self.chunk_mib),
            })?;
        Ok(IngestConfig {
            format,
            default_mode: self.mode.clone(),
            stage_rows: self.stage_rows,
            chunk_bytes,
            ..IngestConfig::new(self.lake.clone(), self.inputs.clone())
        })
    }
}

#[derive(Debug, Subcommand)]
pub enum LakeCmd {
    /// Versions, history, days, files, rows, quarantine and runs of a lake (from the Delta log;
    /// reads no data).
    Show(LakeShowArgs),
    /// Compacts each day's files into one (Delta OPTIMIZE: remove + add, no data change).
    Optimize(LakeOptimizeArgs),
    /// Deletes files that no retained version needs (Delta VACUUM, as delta-rs does it).
    Vacuum(LakeVacuumArgs),
    /// Turns a local lake of the layout before Delta Lake into Delta tables, in place.
    Convert(LakeShowArgs),
}

/// Parses `--as-of`: a version, an RFC 3339 time or a day.
pub fn parse_as_of(s: &str) -> Result<mm_lake::AsOf, String> {
    s.parse()
}

#[derive(Debug, Args)]
pub struct LakeShowArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Show the lake as of a version, time or day (default: the latest).
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// How many of the newest commits to list.
    #[arg(long, default_value_t = 10)]
    pub history: usize,
}

#[derive(Debug, Args)]
pub struct LakeOptimizeArgs {
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Compact a day only when it has at least this many files.
    #[arg(long, default_value_t = 2)]
    pub min_files: usize,
}

#[derive(Debug, Args)]
pub struct LakeVacuumArgs {
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Keep files needed by the versions of the last this many hours (Delta's default: 168).
    #[arg(long, default_value_t = 168)]
    pub retention_hours: u64,
    /// Also delete files in the table directories that no version committed (runs that died
    /// or were refused), once older than the retention.
    #[arg(long)]
    pub full: bool,
    /// List what would be deleted, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Allow a retention below 168 hours (time travel to older versions may then fail).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The skill fit's output folder.
    #[arg(long, default_value = "out/skill")]
    pub skill: PathBuf,
    /// The churn fit's output folder.
    #[arg(long, default_value = "out/churn")]
    pub churn: PathBuf,
    /// The models root: artifacts go to <models>/<name>/<version>/.
    #[arg(long, env = "MM_MODELS", default_value = "out/models")]
    pub models: PathBuf,
    /// The model's name. Default: the fits' mode (e.g. tdm-6v6), else `all-modes`.
    #[arg(long)]
    pub name: Option<String>,
    /// The version's name. Default: v0001, or one more than the highest vNNNN there.
    #[arg(long)]
    pub version: Option<String>,
    /// Publish without moving LATEST (promote later with `mm models promote`).
    #[arg(long)]
    pub no_promote: bool,
}

/// Which model: `--models` root and `--name` (optional when the root holds one model).
#[derive(Debug, Clone, Args)]
pub struct ModelSel {
    /// The models root: a path, or an s3://, gs://, az:// URL.
    #[arg(long, env = "MM_MODELS", default_value = "out/models")]
    pub models: PathBuf,
    #[arg(long)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ModelsCmd {
    /// Versions with their main metrics; `*` marks LATEST.
    List(ModelSel),
    /// One version's manifest (LATEST by default).
    Show {
        version: Option<String>,
        #[command(flatten)]
        sel: ModelSel,
    },
    /// Verify checksums, format and contents of one version (LATEST by default) or all.
    Verify {
        version: Option<String>,
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        sel: ModelSel,
    },
    /// Point LATEST at a version, after verifying it.
    Promote {
        version: String,
        #[command(flatten)]
        sel: ModelSel,
    },
    /// Point LATEST back at the version promoted before the current one.
    Rollback(ModelSel),
    /// What changed between two versions: metrics and parameters (the churn coefficients that
    /// moved most, the team win model, the party adjustment, the percentile table).
    Diff {
        a: String,
        b: String,
        /// Churn coefficients to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
        #[command(flatten)]
        sel: ModelSel,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Canonical CSV to the lake: rows per second and peak memory at each size, beside Python
    /// polars' CSV-to-Parquet on the same file when the peers' venv is installed.
    Ingest(BenchIngestArgs),
    /// EOMM pairing (exact blossom) on the peers' pools, beside networkx max_weight_matching run
    /// by the peers' own script on the same pools in the same run.
    Pair(BenchPairArgs),
    /// Skill fitting throughput: raw skill and each baseline on simulated 6v6 lobbies from
    /// Parquet, and on ATP beside the peers' Python rating loops run in the same run.
    Skill(BenchSkillArgs),
    /// Every stage at several lake sizes, each in its own process: rows/s, peak RSS, and the
    /// ratios of the largest size to the smallest (linear time, bounded memory).
    Scale(BenchScaleArgs),
    /// The churn model's solver on the peers' synthetic 1M x 40 churn table, beside
    /// scikit-learn's 200-iteration lbfgs on the same files in the same run.
    Logistic(BenchLogisticArgs),
    /// Loading (verify + parse) of an artifact with a synthetic population: time and memory.
    Artifact(BenchArtifactArgs),
}

#[derive(Debug, Args)]
pub struct BenchArtifactArgs {
    /// Players in the synthetic snapshot (10 recent matches each, most of them).
    #[arg(long, default_value_t = 1_000_000)]
    pub players: usize,
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// Where to write the artifact (default: a temporary directory).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Internal: load the artifact in `--dir` once and print time and memory as JSON.
    #[arg(long, hide = true)]
    pub load_only: bool,
}

#[derive(Debug, Args)]
pub struct BenchLogisticArgs {
    /// Total rows N of the peers' table (`lr_N{N}_train.parquet`, 80% of them, is fitted).
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: usize,
    /// Where the tables are (generated there with the peers' bench_lr.py when missing).
    #[arg(long, default_value = "/tmp/peers-data")]
    pub data: PathBuf,
    /// The peers' folder (bench_lr.py and results/lr_N{N}.json).
    #[arg(long, default_value = "../shared/peers")]
    pub peers: PathBuf,
    /// Runs of our fit (median).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Runs of scikit-learn's fit (median).
    #[arg(long, default_value_t = 1)]
    pub peer_reps: usize,
    /// Skip scikit-learn.
    #[arg(long)]
    pub no_peer: bool,
    /// Also time linfa-logistic (slow on raw features).
    #[arg(long)]
    pub linfa: bool,
    /// linfa-logistic's iteration cap.
    #[arg(long, default_value_t = 200)]
    pub linfa_iterations: u64,
    /// Python with scikit-learn (default: $PEERS_VENV/bin/python, else ~/.venvs/peers/bin/python).
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BenchScaleArgs {
    /// Lake sizes in player-match rows (10M, 300k, 2500000). Lakes are simulated with
    /// --players players over as many days as the size needs, and reused from --work.
    #[arg(long, value_delimiter = ',', value_parser = crate::bench_scale::parse_rows,
          default_value = "10M,30M,100M")]
    pub rows: Vec<u64>,
    /// Players of every simulated lake (sizes grow by days, not by players).
    #[arg(long, default_value_t = 250_000)]
    pub players: usize,
    /// The mode fitted and evaluated.
    #[arg(long, default_value = "tdm-6v6")]
    pub mode: String,
    /// Stages to run after the simulation (which is measured when it runs).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ingest,fit-skill,fit-churn,export,evaluate"
    )]
    pub stages: Vec<String>,
    /// Work directory (lakes, generated CSV, fitted outputs), reused between runs.
    #[arg(long, default_value = "/tmp/mm-bench-scale")]
    pub work: PathBuf,
}

#[derive(Debug, Args)]
pub struct BenchSkillArgs {
    /// A lake of team lobbies to read (default: simulate one into --work, reused next time).
    #[arg(long)]
    pub lake: Option<PathBuf>,
    /// Mode of the lobbies.
    #[arg(long, default_value = "tdm-6v6")]
    pub mode: String,
    /// Players and days of the simulated lake (250,000 x 28 days is about 10M rows).
    #[arg(long, default_value_t = 250_000)]
    pub players: usize,
    #[arg(long, default_value_t = 28)]
    pub days: u32,
    /// Runs of read + fit; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Skip the ATP comparison with the peers.
    #[arg(long)]
    pub no_atp: bool,
    /// The peers' folder (bench_ratings.py; the real data beside it).
    #[arg(long, default_value = "../shared/peers")]
    pub peers: PathBuf,
    /// Repetitions of the peers' script (median).
    #[arg(long, default_value_t = 1)]
    pub peer_reps: usize,
    /// Python with openskill and trueskill (default: $PEERS_VENV/bin/python, else
    /// ~/.venvs/peers/bin/python).
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
    /// Work directory (simulated lake, ATP lake, the peers' output).
    #[arg(long, default_value = "/tmp/mm-bench-skill")]
    pub work: PathBuf,
}

#[derive(Debug, Args)]
pub struct BenchPairArgs {
    /// Pool sizes (the shipped pools of ../shared/peers/results/pools, seed 20240601).
    #[arg(long, value_delimiter = ',', default_value = "100,200,500,1000,2000")]
    pub sizes: Vec<usize>,
    /// Repetitions of our solve per size; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    /// The peers' folder (pools, reference optima and bench_mwpm.py).
    #[arg(long, default_value = "../shared/peers")]
    pub peers: PathBuf,
    /// Run networkx up to this pool size (it takes ~7 s at 200, ~100 s at 500, ~15 min at 1000).
    #[arg(long, default_value_t = 200)]
    pub nx_max: usize,
    /// networkx repetitions (median).
    #[arg(long, default_value_t = 3)]
    pub nx_reps: usize,
    /// Python with networkx (default: $PEERS_VENV/bin/python, else ~/.venvs/peers/bin/python).
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
    /// Scratch directory for the peer's outputs.
    #[arg(long, default_value = "/tmp/mm-bench-pair")]
    pub work: PathBuf,
}

#[derive(Debug, Args)]
pub struct BenchIngestArgs {
    /// Row counts to measure (generated with a fixed seed, in the polars peer's shape).
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000")]
    pub rows: Vec<u64>,
    /// Repetitions per size; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Generator seed.
    #[arg(long, default_value_t = 20240603)]
    pub seed: u64,
    /// Scratch directory for the generated CSV files and lakes.
    #[arg(long, default_value = "/tmp/mm-bench")]
    pub work: PathBuf,
    /// Python with polars for the peer run (default: $PEERS_VENV/bin/python, else ~/.venvs/peers/bin/python).
    #[arg(long)]
    pub peer_python: Option<PathBuf>,
    /// Skip the peer even if it is installed.
    #[arg(long)]
    pub no_peer: bool,
}
