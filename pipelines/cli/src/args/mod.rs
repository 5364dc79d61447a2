//! Flags as plain values, and their validation into library configs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

mod data;
mod eval;
mod fit;
mod models;
mod pair;
mod retrain;
mod serve;

pub use data::{IngestArgs, LakeCmd, SimulateArgs};
pub use eval::EvaluateArgs;
pub use fit::{FitChurnArgs, FitCmd, FitSkillArgs, MetricArg};
pub use models::{ExportArgs, ModelSel, ModelsCmd};
pub use pair::{PairArgs, PolicyArg};
pub use retrain::RetrainArgs;
pub use serve::ServeArgs;

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
    /// The matcher as a gRPC service: Score and Pair over the model's LATEST artifact, reloaded
    /// when LATEST moves (a version that fails verification is refused), with the standard
    /// health service.
    Serve(ServeArgs),
    /// Pair a 1v1 pool (EOMM or a baseline policy) and print the pairs, objective and solve time.
    Pair(PairArgs),
    /// Benchmarks that print figures (and ratios to the Python peers when they are installed).
    #[command(subcommand)]
    Bench(mm_bench::BenchCmd),
    /// Evaluate an artifact's policies offline on pools drawn from later history (EOMM Table 2
    /// protocol), with the real lobbies as a reference; writes evaluation.json and .html.
    Evaluate(EvaluateArgs),
    /// The whole chain for a scheduler: ingest new data, fit skill and churn on all but the
    /// held-out days, export, evaluate against LATEST on the held-out days, and promote only
    /// if not worse by the margin. Locked against overlap, resumable after a crash. The
    /// stages read the config file's `[ingest]`, `[fit.skill]` and `[fit.churn]` tables as
    /// those commands do on their own.
    Retrain(RetrainArgs),
    /// The config file (`mm.toml`): `mm config show [COMMAND…]` prints every setting a command
    /// would run with and where it came from (flag, config file, environment, default).
    #[command(subcommand)]
    Config(ConfigCmd),
    /// Print a shell completion script on stdout (e.g. `mm completions bash >
    /// ~/.local/share/bash-completion/completions/mm`). The man pages are in the repository's
    /// `docs/reference/man/`, generated from the same definitions.
    Completions(CompletionsArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
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
    /// directory, when it exists). Flags and the environment override it.
    #[arg(long, global = true, env = "MM_CONFIG")]
    pub config: Option<PathBuf>,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

pub fn metric_of(m: MetricArg) -> mm_fit::Metric {
    match m {
        MetricArg::KillsPerEnemyDeath => mm_fit::Metric::KillsPerEnemyDeath,
        MetricArg::ScorePerMinute => mm_fit::Metric::ScorePerMinute,
        MetricArg::Perf => mm_fit::Metric::Perf,
        MetricArg::Outcome => mm_fit::Metric::Outcome,
    }
}

pub(crate) fn day_ms(d: Option<chrono::NaiveDate>) -> Option<i64> {
    d.and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|d| d.and_utc().timestamp_millis())
}

/// Parses `--as-of`: a version, an RFC 3339 time or a day.
pub fn parse_as_of(s: &str) -> Result<mm_lake::AsOf, String> {
    s.parse()
}
