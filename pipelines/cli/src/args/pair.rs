//! `mm pair`.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Exact minimum expected churn (engagement-optimised matchmaking).
    Eomm,
    /// Exact maximum expected churn (the worst case).
    Worst,
    /// Sort by skill, pair neighbours (needs skills: a --pool CSV).
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
    /// only the `id` (or `player_id`) column is read and the artifact scores the pool. (Was
    /// `--players`, which other commands use for a count; still accepted, with a warning.)
    #[arg(long = "pool", alias = "players")]
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
    /// How the pool is paired: `eomm` (least total predicted churn) or a baseline.
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
