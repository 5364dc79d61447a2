//! `mm simulate`, `mm ingest` and `mm lake`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use mm_ingest::{Format, IngestConfig, IngestError};

use super::parse_as_of;

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The lake to write (created if missing; it must hold no matches yet).
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Seed of the simulated world: the same seed, players and days give the same lake.
    #[arg(long, default_value_t = 20_240_601)]
    pub seed: u64,
    /// Players in the simulated population.
    #[arg(long, default_value_t = 20_000)]
    pub players: usize,
    /// Days of matches to simulate.
    #[arg(long, default_value_t = 14)]
    pub days: u32,
    /// Share of friend groups playing the 1v1 mode (the rest play 6v6 team deathmatch).
    #[arg(long, default_value_t = 0.3)]
    pub duel_share: f64,
    /// First simulated day (UTC), YYYY-MM-DD.
    #[arg(long, default_value = "2024-01-01")]
    pub start: chrono::NaiveDate,
    /// Matchmaker tick in seconds (whole seconds: the simulator's clock).
    #[arg(long, default_value_t = 15.0)]
    pub tick_s: f64,
}

impl SimulateArgs {
    /// # Errors
    /// `--tick-s` is not a whole number of seconds (the simulator's clock).
    pub fn to_config(&self) -> Result<mm_sim::SimConfig, mm_sim::SimError> {
        if self.tick_s.fract() != 0.0 || !self.tick_s.is_finite() {
            return Err(mm_sim::SimError::Config {
                field: "tick-s",
                reason: format!("{} is not a whole number of seconds", self.tick_s),
            });
        }
        Ok(mm_sim::SimConfig {
            lake: self.lake.clone(),
            seed: self.seed,
            players: self.players,
            days: self.days,
            duel_share: self.duel_share,
            start: self.start,
            // Whole and finite (checked above); the range is the simulator's check.
            tick_s: self.tick_s as i64,
        })
    }
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
    /// Files or directories to ingest (directories are searched recursively), or object-store
    /// URLs: a glob (`'s3://bucket/raw/*.csv.gz'`), one object, or a prefix.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The lake directory (created if missing).
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value = "auto")]
    pub format: FormatArg,
    /// Mode (playlist) of canonical rows without a `mode` column. (Was `--mode`, which the other
    /// commands use to choose one mode; still accepted, with a warning.)
    #[arg(long = "default-mode", alias = "mode", default_value = "default")]
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
    /// Writes a checkpoint of the log and deletes its entries older than it and than
    /// --expire-hours (Delta's log cleanup; the data files stay).
    Checkpoint(LakeCheckpointArgs),
    /// Turns a local lake of the layout before Delta Lake into Delta tables, in place.
    Convert(LakeShowArgs),
}

#[derive(Debug, Args)]
pub struct LakeCheckpointArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Delete log entries older than this many hours, before the checkpoint (Delta's default
    /// log retention: 720). A continued `mm retrain` or a `mm serve` replica whose version's
    /// commits are gone reads the table whole instead.
    #[arg(long, default_value_t = 720)]
    pub expire_hours: u64,
}

#[derive(Debug, Args)]
pub struct LakeShowArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Show the lake as of a version, time or day (default: the latest).
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// How many of the newest commits to list. (Was `--history`, which `mm fit churn` uses for
    /// matches; still accepted, with a warning.)
    #[arg(long = "commits", alias = "history", default_value_t = 10)]
    pub history: usize,
}

#[derive(Debug, Args)]
pub struct LakeOptimizeArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Compact a day only when it has at least this many files.
    #[arg(long, default_value_t = 2)]
    pub min_files: usize,
}

#[derive(Debug, Args)]
pub struct LakeVacuumArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Keep files needed by the versions of the last this many hours (Delta's default: 168).
    #[arg(long, default_value_t = 168)]
    pub retention_hours: u64,
    /// Also delete files in the table directories that no version committed (runs that died
    /// or were refused), once older than the retention. (Was `--full`, which `mm retrain` uses
    /// for a full fit; still accepted, with a warning.)
    #[arg(long = "uncommitted", alias = "full")]
    pub full: bool,
    /// List what would be deleted, delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Allow a retention below 168 hours (time travel to older versions may then fail).
    #[arg(long)]
    pub force: bool,
}
