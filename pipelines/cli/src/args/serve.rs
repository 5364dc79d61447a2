//! `mm serve`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use super::ModelSel;

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
    /// Record reported matches (ReportMatch, ReportMatches) into this lake, a path or an s3://,
    /// gs://, az:// URL, and keep every player current with them and with the lake's new
    /// commits. Without it, reports are refused and players stay as the artifact holds them.
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
    /// Flush as soon as this many reported matches wait. Fewer, larger commits cost the other
    /// calls less and leave the lake fewer files: at 1,667 matches a second, a flush every 3 s.
    #[arg(long, default_value_t = 5000)]
    pub flush_matches: usize,
    /// Group commit of the write-ahead log: while reports arrive concurrently, a sync waits
    /// until this many microseconds after its first report so that more reports share it
    /// (fewer syncs, less CPU, for up to this much more acknowledgement latency). A lone
    /// report is synced at once; 0 never waits.
    #[arg(long, default_value_t = 2000)]
    pub wal_group_us: u64,
    /// How often the lake's new commits (other replicas' reports, ingest runs) are applied to
    /// the players, ms.
    #[arg(long, default_value_t = 2000)]
    pub follow_ms: u64,
    /// Answer a retried report from memory when its match started within this many hours of
    /// the latest match start known; an older match is looked up in the lake. Memory grows
    /// with the matches of this horizon (about 32 bytes each).
    #[arg(long, default_value_t = 24.0)]
    pub dedupe_hours: f64,
    /// A file holding the bearer token that the reports and the queue calls need (clients send
    /// `authorization: Bearer <token>`). The environment variable MM_SERVE_TOKEN gives it too.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Read calls (Score, Pair, Explain) need the token too.
    #[arg(long)]
    pub auth_reads: bool,
    /// Serve gRPC over TLS with this certificate chain (PEM); with --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Ask clients for a certificate signed by this CA (PEM; needs --tls-cert): a verified
    /// client certificate is a credential, as the token is. Without a token every client must
    /// present one; with a token, either will do.
    #[arg(long, requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
}
