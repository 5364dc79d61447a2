//! # mm-serve: the matcher as a gRPC service (`mm serve`)
//!
//! Game backends in any language call the matcher over gRPC (tonic and prost; the protos are
//! `proto/mm/v1/matcher.proto` at the repository root). The service loads one model's
//! `LATEST` artifact and answers:
//!
//! - `Score`: each player's raw skill, percentile and churn after a win, a draw and a loss (a
//!   player the snapshot does not hold is a new player), and, given two teams, team A's
//!   P(win/draw/loss) from the team win model;
//! - `Pair`: a 1v1 pool paired by EOMM or a baseline policy, with its objective (the expected
//!   number of players who churn after these games);
//! - a team queue per name, with its team size and policy (Call of Duty rules, quality
//!   threshold or team EOMM): `Enqueue` and `Cancel` party searches, `Tick` forms lobbies (each
//!   with its outcome probabilities, expected churn, quality criteria and whether the
//!   maximum-wait rule formed it), `Explain` says why a search still waits.
//!
//! Every response carries the `model_version` that produced it. **Hot reload:** a background
//! task checks `LATEST` every `reload_ms` through [`mm_artifact::store::Reloader`], which swaps in
//! a new version only after it verifies; a request takes the current artifact (a reference
//! count) when it starts and finishes on it, so a swap drops no request and never mixes two
//! versions in one response. A version that fails verification is refused and logged, and the
//! current one keeps serving. The standard gRPC health service reports `SERVING`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mm_serve::ServeError> {
//! let cfg = mm_serve::ServeConfig {
//!     model_dir: "out/models/tdm-6v6".into(),
//!     listen: "127.0.0.1:50051".parse().expect("an address"),
//!     reload_ms: 1000,
//!     max_seconds: None,
//!     metrics: Some("127.0.0.1:9100".parse().expect("an address")),
//!     sync: None,
//!     results: None,
//!     auth: mm_serve::Auth::default(),
//!     tls: None,
//! };
//! mm_serve::serve(cfg.check()?, |b| println!("listening on {}", b.grpc)).await
//! # }
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mm_artifact::store::{Reload, Reloader, Store};
use tonic::transport::Server;

mod auth;
mod live;
mod metrics;
mod queues;
mod report;
mod seen;
mod service;
pub mod wal;

pub use auth::Auth;
pub use live::{Live, ResultsConfig};
pub use metrics::Metrics;
pub use service::MatcherService;

/// The generated protocol: messages, the server trait and a client.
#[allow(
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic,
    unreachable_pub
)]
pub mod proto {
    tonic::include_proto!("mm.v1");
}

impl proto::ScoreRequest {
    /// Scores the players `ids` by id (no states), at the snapshot's time; with `teams`, the
    /// players alternate between team A and team B.
    #[must_use]
    pub fn of_ids(ids: &[String], teams: bool) -> proto::ScoreRequest {
        proto::ScoreRequest {
            players: ids
                .iter()
                .map(|id| proto::Player {
                    id: id.clone(),
                    state: None,
                })
                .collect(),
            teams: if teams {
                (0..ids.len()).map(|k| u32::from(k % 2 == 1)).collect()
            } else {
                Vec::new()
            },
            now_ms: 0,
        }
    }
}

/// The largest pool `Pair` accepts: its weight matrix grows with the square of the pool.
pub const MAX_PAIR_POOL: usize = 4096;
/// The largest number of players `Score` accepts in one request.
pub const MAX_SCORE_PLAYERS: usize = 10_000;
/// The largest number of matches `ReportMatches` accepts in one request.
pub const MAX_REPORT_BATCH: usize = 1000;

/// What to serve.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// One model's directory (its `LATEST` names the version served).
    pub model_dir: PathBuf,
    pub listen: SocketAddr,
    /// How often `LATEST` is checked, ms.
    pub reload_ms: u64,
    /// Stop after this many seconds (tests and bounded runs); `None`: until Ctrl-C.
    pub max_seconds: Option<f64>,
    /// Where to serve the Prometheus text at `/metrics` (HTTP/1.1); `None`: not served.
    pub metrics: Option<SocketAddr>,
    /// Run before each check of `LATEST` (a remote store: refresh its local mirror).
    pub sync: Option<SyncHook>,
    /// Where reported matches go (`None`: `ReportMatch` is refused and players stay as the
    /// artifact holds them).
    pub results: Option<ResultsConfig>,
    /// The credential writes (and, if asked, reads) need.
    pub auth: Auth,
    /// gRPC over TLS (`None`: plain text).
    pub tls: Option<Tls>,
}

/// The service's TLS: its certificate chain and key, and the CA its clients' certificates must
/// be signed by, when it asks for them (PEM files).
#[derive(Debug, Clone)]
pub struct Tls {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

impl Tls {
    /// tonic's server TLS configuration from the files. Client certificates are required when
    /// they are the only credential (`auth` has no token), else optional.
    fn server_config(&self, auth: &Auth) -> Result<tonic::transport::ServerTlsConfig, ServeError> {
        let read = |field: &'static str, p: &PathBuf| {
            std::fs::read(p).map_err(|e| ServeError::Config {
                field,
                reason: format!("{}: {e}", p.display()),
            })
        };
        let identity = tonic::transport::Identity::from_pem(
            read("tls-cert", &self.cert)?,
            read("tls-key", &self.key)?,
        );
        // rustls picks no provider by itself where more than one is compiled in (the AWS SDK
        // brings aws-lc): ring, the one tonic's TLS is built with. Installed once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut c = tonic::transport::ServerTlsConfig::new().identity(identity);
        if let Some(ca) = &self.client_ca {
            c = c
                .client_ca_root(tonic::transport::Certificate::from_pem(read(
                    "client-ca",
                    ca,
                )?))
                .client_auth_optional(auth.token.is_some());
        }
        Ok(c)
    }
}

/// A refresh of `model_dir` from where it really lives (an object store's prefix, through the
/// lake's mirror): this crate stays free of storage code.
#[derive(Clone)]
pub struct SyncHook(pub Arc<dyn Fn() -> Result<(), String> + Send + Sync>);

impl std::fmt::Debug for SyncHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SyncHook")
    }
}

/// The addresses bound, given to `serve`'s `ready` callback (port 0 resolved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub grpc: SocketAddr,
    pub metrics: Option<SocketAddr>,
}

/// Why the service could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid --{field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error(transparent)]
    Artifact(#[from] mm_artifact::ArtifactError),
    #[error("{addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

impl ServeError {
    /// Bad input (exit code 2): an invalid setting, or an artifact that cannot be served.
    #[must_use]
    pub fn is_input(&self) -> bool {
        matches!(self, ServeError::Config { .. } | ServeError::Artifact(_))
    }
}

impl ServeConfig {
    /// Checks the settings: a reload interval of at least 10 ms, a positive time limit.
    ///
    /// # Errors
    /// The first setting out of range, named as its flag.
    pub fn check(&self) -> Result<&ServeConfig, ServeError> {
        if self.reload_ms < 10 {
            return Err(ServeError::Config {
                field: "reload-ms",
                reason: format!("{} is below 10 ms", self.reload_ms),
            });
        }
        if let Some(s) = self.max_seconds
            && !(s.is_finite() && s > 0.0)
        {
            return Err(ServeError::Config {
                field: "max-seconds",
                reason: format!("{s} is not a positive number of seconds"),
            });
        }
        if let Some(r) = &self.results {
            let bad = |field, reason: &str| {
                Err(ServeError::Config {
                    field,
                    reason: reason.to_string(),
                })
            };
            if r.flush_ms < 10 {
                return bad("flush-ms", "below 10 ms");
            }
            if r.flush_matches == 0 {
                return bad("flush-matches", "must be at least 1");
            }
            if r.follow_ms < 10 {
                return bad("follow-ms", "below 10 ms");
            }
            if r.replica.is_empty()
                || !r
                    .replica
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return bad(
                    "replica",
                    "letters, digits, '-', '_' and '.' only, and not empty",
                );
            }
        }
        if self.auth.token.as_deref() == Some("") {
            return Err(ServeError::Config {
                field: "token",
                reason: "the token is empty".into(),
            });
        }
        Ok(self)
    }
}

/// Loads the model's `LATEST`, binds `cfg.listen` (and `cfg.metrics`), calls `ready` with the
/// bound addresses (port 0 resolved), and serves until Ctrl-C or `cfg.max_seconds`.
///
/// # Errors
/// `LATEST` is missing or refused, the address cannot be bound, or the server fails.
pub async fn serve(cfg: &ServeConfig, ready: impl FnOnce(Bound)) -> Result<(), ServeError> {
    let store = Store::new(&cfg.model_dir);
    let reloader = Arc::new(
        tokio::task::spawn_blocking(move || Reloader::start(store))
            .await
            .map_err(|e| ServeError::Config {
                field: "models",
                reason: format!("loading the artifact stopped: {e}"),
            })??,
    );
    tracing::info!(
        model_version = %reloader.current().manifest.model_version,
        "serving {}",
        cfg.model_dir.display()
    );
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: cfg.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: cfg.listen,
        source,
    })?;
    if !cfg.listen.ip().is_loopback() && cfg.tls.is_none() {
        tracing::warn!(
            "listening on {} in plain text: give it --tls-cert and --tls-key, or put TLS in \
             front of it (a service mesh or a proxy), before it leaves a trusted network",
            cfg.listen
        );
    }
    let metrics = Metrics::new();
    metrics.serving(&reloader.current().manifest.model_version);
    let live = open_live(cfg, &reloader, &metrics).await?;
    let (metrics_addr, metrics_task) = start_metrics(cfg, &reloader, &metrics).await?;
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<proto::matcher_server::MatcherServer<MatcherService>>()
        .await;
    let reload_task = tokio::spawn(reload_loop(
        Arc::clone(&reloader),
        Duration::from_millis(cfg.reload_ms),
        metrics.clone(),
        cfg.sync.clone(),
        live.clone(),
    ));
    let stop_flushing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let results_tasks = match &live {
        Some(l) => Some((
            flush_thread(Arc::clone(l), Arc::clone(&stop_flushing))?,
            tokio::spawn(follow_loop(Arc::clone(l))),
        )),
        None => None,
    };
    let service = MatcherService::new(Arc::clone(&reloader), metrics)
        .with_results(live.clone(), cfg.auth.clone());
    let shutdown = stop_signal(cfg.max_seconds, Arc::clone(&reloader));
    ready(Bound {
        grpc: addr,
        metrics: metrics_addr,
    });
    let mut builder = Server::builder();
    if let Some(t) = &cfg.tls {
        builder = builder
            .tls_config(t.server_config(&cfg.auth)?)
            .map_err(|e| ServeError::Config {
                field: "tls-cert",
                reason: e.to_string(),
            })?;
    }
    let served = builder
        .add_service(health)
        .add_service(proto::matcher_server::MatcherServer::new(service))
        .serve_with_incoming_shutdown(
            // No Nagle delay: small responses go out at once (with it, a request waits for
            // the client's delayed ACK, about 40 ms on Linux).
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await;
    reload_task.abort();
    if let Some(t) = metrics_task {
        t.abort();
    }
    if let Some((flush, follow)) = results_tasks {
        stop_flushing.store(true, std::sync::atomic::Ordering::Relaxed);
        follow.abort();
        // Its flush in progress, if any, ends first (it holds the lake).
        let _ = tokio::task::spawn_blocking(move || flush.join()).await;
    }
    if let Some(l) = live {
        // What was acknowledged is durable in the log already; this only saves the next start
        // a flush.
        let last = tokio::task::spawn_blocking(move || l.flush()).await;
        if let Ok(Err(e)) = last {
            tracing::warn!(error = %e, "the last flush failed; the log keeps the reports for the next start");
        }
    }
    served?;
    Ok(())
}

/// Flushes the pending reports into the lake when due (enough of them, or the oldest old
/// enough), on a thread of its own until `stop`; a failed flush is retried with a growing
/// pause, up to 30 s. The flush's work off the players' lock runs in the background (Linux's
/// `SCHED_IDLE`: it takes only the cores' idle time, else nice 10; see `live::Background`): a
/// flush has seconds of slack behind the log, while the requests it would take the cores from
/// are answered in milliseconds. When the cores have no idle time for so long that the flushes
/// fall far behind, [`follow_loop`] flushes at the service's own priority.
fn flush_thread(
    live: Arc<Live>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Result<std::thread::JoinHandle<()>, ServeError> {
    let every = Duration::from_millis((live.config().flush_ms / 4).clamp(5, 50));
    std::thread::Builder::new()
        .name("mm-serve-flush".into())
        .spawn(move || {
            Live::become_flusher();
            let mut pause = Duration::ZERO;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(every + pause);
                if !live.flush_due() {
                    continue;
                }
                match live.flush() {
                    Ok(_) => pause = Duration::ZERO,
                    Err(e) => {
                        pause = (pause * 2)
                            .clamp(Duration::from_millis(100), Duration::from_secs(30));
                        tracing::warn!(error = %e, retry_ms = pause.as_millis() as u64, "results: the flush failed; retrying");
                    }
                }
            }
        })
        .map_err(|e| ServeError::Config {
            field: "wal",
            reason: format!("cannot start the flush thread: {e}"),
        })
}

/// Runs the calling thread in the background: Linux's `SCHED_IDLE` policy, else nice 10 (a
/// thread's policy and nice value are its own on Linux).
pub(crate) fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{
            NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
            set_thread_priority_and_policy, thread_native_id,
        };
        let idle = set_thread_priority_and_policy(
            thread_native_id(),
            ThreadPriority::Min,
            ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle),
        );
        let Err(e) = idle else { return };
        tracing::debug!(error = ?e, "results: the flush thread cannot run as SCHED_IDLE; nice 10");
        if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10) {
            tracing::debug!(error = %e, "results: the flush thread keeps the service's priority");
        }
    }
}

/// Reads the lake's new commits every `follow_ms` (other replicas' reports, ingest runs). When
/// the background flushes have fallen far behind ([`Live::flush_overdue`]: cores busy with
/// requests for that long), it flushes instead, at the service's priority: a flush follows the
/// lake first.
async fn follow_loop(live: Arc<Live>) {
    let every = Duration::from_millis(live.config().follow_ms);
    loop {
        tokio::time::sleep(every).await;
        let l = Arc::clone(&live);
        let done = tokio::task::spawn_blocking(move || {
            if l.flush_overdue() {
                tracing::info!("results: the background flushes fell behind; flushing now");
                l.flush().map(|_| ())
            } else {
                l.sync()
            }
        })
        .await;
        if let Ok(Err(e)) = done {
            tracing::warn!(error = %e, "results: could not follow the lake");
        }
    }
}

/// Checks `LATEST` every `every`; a refused version is logged and the current one kept.
async fn reload_loop(
    reloader: Arc<Reloader>,
    every: Duration,
    metrics: Metrics,
    sync: Option<SyncHook>,
    live: Option<Arc<Live>>,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A refused version is logged once, not at every check while LATEST still names it.
    let mut refused: Option<String> = None;
    loop {
        tick.tick().await;
        if let Some(l) = &live {
            catch_up(l, &reloader, &metrics).await;
        }
        let r = Arc::clone(&reloader);
        let hook = sync.clone();
        let Ok(checked) = tokio::task::spawn_blocking(move || {
            if let Some(SyncHook(f)) = hook {
                f()?;
            }
            Ok::<Reload, String>(r.check())
        })
        .await
        else {
            continue;
        };
        let outcome = match checked {
            Ok(o) => o,
            Err(e) => {
                // The store could not be read: keep serving, say it once.
                if refused.as_deref() != Some(e.as_str()) {
                    tracing::warn!(
                        model_version = %reloader.current().manifest.model_version,
                        error = %e,
                        "could not refresh the models; still serving the current version"
                    );
                    refused = Some(e);
                }
                continue;
            }
        };
        match outcome {
            Reload::Unchanged => refused = None,
            Reload::Swapped { from, to } => {
                refused = None;
                metrics.reload("swapped");
                match &live {
                    Some(l) => catch_up(l, &reloader, &metrics).await,
                    None => {
                        metrics.serving(&to);
                        tracing::info!(model_version = %to, from = %from, "reloaded: now serving {to}");
                    }
                }
            }
            Reload::Kept { current, error } => {
                let text = error.to_string();
                if refused.as_deref() == Some(text.as_str()) {
                    continue;
                }
                refused = Some(text);
                metrics.reload("refused");
                tracing::warn!(
                    model_version = %current,
                    error = %error,
                    "refused the version LATEST names; still serving {current}"
                );
            }
        }
    }
}

/// Switches the live players to the reloader's version once their state for it is built (its
/// snapshot, the lake's matches after its lake version, the pending reports); until then the
/// previous version serves. Tried again at the next check if it fails.
async fn catch_up(live: &Arc<Live>, reloader: &Arc<Reloader>, metrics: &Metrics) {
    let (from, art) = (live.art(), reloader.current());
    if Arc::ptr_eq(&from, &art) {
        return;
    }
    let (l, a) = (Arc::clone(live), Arc::clone(&art));
    let to = art.manifest.model_version.clone();
    let from = from.manifest.model_version.clone();
    match tokio::task::spawn_blocking(move || l.switch_to(a)).await {
        Ok(Ok(())) => {
            metrics.serving(&to);
            tracing::info!(model_version = %to, from = %from, "reloaded: now serving {to}");
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "could not rebuild the players for {to}; still serving {from}");
        }
        Err(e) => tracing::error!(error = %e, "rebuilding the players for {to} stopped"),
    }
}

/// Opens the results' lake and write-ahead log (`--lake`), when the service records matches.
async fn open_live(
    cfg: &ServeConfig,
    reloader: &Arc<Reloader>,
    metrics: &Metrics,
) -> Result<Option<Arc<Live>>, ServeError> {
    let Some(r) = cfg.results.clone() else {
        return Ok(None);
    };
    let (art, m) = (reloader.current(), metrics.clone());
    let live = tokio::task::spawn_blocking(move || Live::start(art, r, m))
        .await
        .map_err(|e| ServeError::Config {
            field: "lake",
            reason: format!("opening the results stopped: {e}"),
        })??;
    Ok(Some(Arc::new(live)))
}

/// The HTTP task serving the metrics.
type MetricsTask = tokio::task::JoinHandle<std::io::Result<()>>;

/// Serves the metrics over HTTP (`--metrics`): the address bound and the task.
async fn start_metrics(
    cfg: &ServeConfig,
    reloader: &Arc<Reloader>,
    metrics: &Metrics,
) -> Result<(Option<SocketAddr>, Option<MetricsTask>), ServeError> {
    let Some(want) = cfg.metrics else {
        return Ok((None, None));
    };
    let l = tokio::net::TcpListener::bind(want)
        .await
        .map_err(|source| ServeError::Bind { addr: want, source })?;
    let at = l
        .local_addr()
        .map_err(|source| ServeError::Bind { addr: want, source })?;
    tracing::info!(
        model_version = %reloader.current().manifest.model_version,
        "metrics at {}",
        metrics::describe(at)
    );
    let task = tokio::spawn(metrics::serve_http(
        l,
        metrics.clone(),
        std::future::pending(),
    ));
    Ok((Some(at), Some(task)))
}

/// Resolves when the service should stop: Ctrl-C, or `--max-seconds` passed.
async fn stop_signal(limit: Option<f64>, reloader: Arc<Reloader>) {
    match limit {
        Some(s) => {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(s)) => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        None => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!(
        model_version = %reloader.current().manifest.model_version,
        "stopping"
    );
}
