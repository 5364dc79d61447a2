//! `mm export` and `mm models`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};

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

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub sel: ModelSel,
    /// The address to listen on (port 0: any free port, printed when bound).
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,
    /// How often LATEST is checked for a new version, ms.
    #[arg(long, default_value_t = 1000)]
    pub reload_ms: u64,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Serve Prometheus metrics at http://ADDR/metrics (port 0: any free port, printed).
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// Record reported matches (ReportMatch) into this lake, a path or an s3://, gs://, az://
    /// URL, and keep every player current with them and with the lake's new commits. Without
    /// it, ReportMatch is refused and players stay as the artifact holds them.
    #[arg(long)]
    pub lake: Option<String>,
    /// The write-ahead log's directory (a reported match is durable here before it is
    /// acknowledged; give each replica its own volume).
    #[arg(long, default_value = "mm-wal")]
    pub wal: PathBuf,
    /// This replica's name, stable across its restarts and unique among replicas: its
    /// flushes are recorded in the lake as application `mm-serve/<replica>` (default: the
    /// host name, a StatefulSet pod's name).
    #[arg(long, env = "MM_REPLICA")]
    pub replica: Option<String>,
    /// Flush reported matches into the lake at least this often while any wait, seconds.
    #[arg(long, default_value_t = 5.0)]
    pub flush_s: f64,
    /// Flush as soon as this many reported matches wait.
    #[arg(long, default_value_t = 1000)]
    pub flush_matches: usize,
    /// How often the lake's new commits (other replicas' reports, ingest runs) are applied to
    /// the players, ms.
    #[arg(long, default_value_t = 2000)]
    pub follow_ms: u64,
    /// A file holding the bearer token that ReportMatch and the queue calls need (clients send
    /// `authorization: Bearer <token>`). The environment variable MM_SERVE_TOKEN gives it too.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Read calls (Score, Pair, Explain) need the token too.
    #[arg(long)]
    pub auth_reads: bool,
}
