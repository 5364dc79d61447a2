//! The benchmarks' flags (`mm bench ...`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

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
    /// `mm serve` under load on loopback: Score and Pair latency and throughput, a ticking team
    /// queue, hot reloads and a corrupt version during load, and a soak's resident memory.
    Serve(BenchServeArgs),
}

#[derive(Debug, Args)]
pub struct BenchServeArgs {
    /// Players in the synthetic artifact served.
    #[arg(long, default_value_t = 100_000)]
    pub players: usize,
    /// Seconds of each load phase (and ticks of the queue phase).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Clients calling back to back (the offered load of a closed loop).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// 6v6 searches queued before the queue phase ticks.
    #[arg(long, default_value_t = 10_000)]
    pub queue_searches: usize,
    /// New searches a second during the queue phase.
    #[arg(long, default_value_t = 500)]
    pub arrivals: usize,
    /// Versions published during load.
    #[arg(long, default_value_t = 20)]
    pub reloads: usize,
    /// Seconds of the soak at the Score load (0: none; the soak is 600).
    #[arg(long, default_value_t = 0.0)]
    pub soak_seconds: f64,
    /// Work directory (the artifacts served).
    #[arg(long, default_value = "/tmp/mm-bench-serve")]
    pub work: PathBuf,
    /// Instead of the phases above: results under load. The server records into a lake in the
    /// work directory; Score (12 players) runs alone, then beside an open loop of Score calls
    /// at the report rate (the control: what any call at that rate costs it), then beside an
    /// open loop of ReportMatch (6v6 matches, 12 player-results each); the lake is checked to
    /// hold every acknowledged match exactly once.
    #[arg(long)]
    pub reports: bool,
    /// Matches reported a second in the results phase, sent at that rate whatever the answers'
    /// times (an open loop; latency counted from when each match was due). The default is
    /// 20,000 player-results a second in 6v6 matches.
    #[arg(long, default_value_t = 1667.0)]
    pub report_rate: f64,
    /// Rounds of the results phase (with `--reports`): Score alone and Score beside the reports alternate this many
    /// times, each `--seconds` long (the lake caught up before the next Score alone), and the
    /// p99 ratio is taken over all rounds' calls together, so that a machine that speeds up or
    /// slows down during the run biases neither side. Each round's own ratio is printed too.
    #[arg(long, default_value_t = 1)]
    pub report_rounds: usize,
    /// The server's `--dedupe-hours` in the results phase: the reported matches start 50 ms
    /// of match time apart, so 1,667 a second cover 24 hours in about 17 minutes.
    #[arg(long, default_value_t = 24.0)]
    pub dedupe_hours: f64,
    /// The server's `--flush-s` in the results phase: flush the reported matches into the lake
    /// at least this often, seconds. A large value with a large `--serve-flush-matches` leaves the
    /// lake alone during the phase, which says what the flushes cost the other calls (the lake
    /// check then waits its 120 s and reports the rows missing: they are still in the log).
    #[arg(long, default_value_t = 1.0)]
    pub serve_flush_s: f64,
    /// The server's `--flush-matches` in the results phase: flush as soon as this many matches
    /// wait.
    #[arg(long, default_value_t = 1000)]
    pub serve_flush_matches: usize,
    /// The reports ask for no players in the answers (`omit_players`), as a game server that
    /// does not read them would.
    #[arg(long)]
    pub report_omit_players: bool,
    /// Matches a call in the results phase: 1 sends each with ReportMatch; more sends them that
    /// many at a time with ReportMatches, as a results relay would (a call every batch's worth
    /// of `--report-rate`; each match's latency still counts from when it was due, so the
    /// time its batch took to fill is in it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub report_batch: u32,
    /// The server's `--wal-group-us` in the results phase: how long a log sync waits for more
    /// reports under concurrent reports (group commit), microseconds.
    #[arg(long, default_value_t = 2000)]
    pub serve_wal_group_us: u64,
}

#[derive(Debug, Args)]
pub struct BenchArtifactArgs {
    /// Players in the synthetic snapshot (10 recent matches each, most of them).
    #[arg(long, default_value_t = 1_000_000)]
    pub players: usize,
    /// Repetitions of the save and the load; the median is reported.
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
    #[arg(long, value_delimiter = ',', value_parser = parse_rows,
          default_value = "10M,30M,100M")]
    pub rows: Vec<u64>,
    /// Players of every simulated lake (sizes grow by days, not by players).
    #[arg(long, default_value_t = 250_000)]
    pub players: usize,
    /// The mode fitted and evaluated.
    #[arg(long, default_value = "tdm-6v6")]
    pub mode: String,
    /// Stages to run after the simulation (which is measured when it runs). `churn-features`
    /// is the churn feature build alone (`mm fit churn --shard 0/1`, into a table of its own),
    /// which `fit-churn` runs again before its fit. `retrain` is `mm retrain` on the lake (the
    /// fits, export and evaluation chained in one process, its last day held out).
    /// `retrain-daily` is the nightly pair: `mm retrain --full` with two days held out, then
    /// the next day's run, which continues that model over one day (not in the default list).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ingest,fit-skill,churn-features,fit-churn,export,evaluate,retrain"
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
    /// Days of the simulated lake.
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

/// Parses `10M`, `300k`, `1.5G` or a plain number of rows.
pub fn parse_rows(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G' | 'b' | 'B') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a row count (e.g. 10M, 300k, 2500000)"))?;
    if v.is_nan() || v <= 0.0 {
        return Err(format!("{s:?}: a row count must be positive"));
    }
    Ok((v * mult).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_counts_take_suffixes_and_refuse_nonsense() {
        assert_eq!(parse_rows("10M"), Ok(10_000_000));
        assert_eq!(parse_rows("300k"), Ok(300_000));
        assert_eq!(parse_rows("1.5G"), Ok(1_500_000_000));
        assert_eq!(parse_rows("2500000"), Ok(2_500_000));
        assert!(parse_rows("ten").is_err());
        assert!(parse_rows("0").is_err());
        assert!(parse_rows("-3M").is_err());
    }
}
