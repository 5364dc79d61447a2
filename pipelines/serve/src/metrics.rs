//! The service's metrics in Prometheus' text format (prometheus-client), served over HTTP/1.1
//! at `/metrics` by axum: requests by method and status, latency histograms by method (`Tick`'s
//! is the tick time), searches waiting by queue, the model version served, reloads by outcome,
//! and the results side: reports by result and rule, the log's size, flushes and their time, the
//! flush and follow lags and the lake version caught up with.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Request {
    method: String,
    code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Method {
    method: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Version {
    version: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueName {
    queue: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReloadOutcome {
    outcome: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReportResult {
    /// recorded, duplicate, refused or unauthenticated.
    result: String,
    /// The rule a refused report broke (empty otherwise).
    rule: String,
}

/// The results side of the service: reports, the log, flushes into the lake and the follow of
/// other writers' commits.
#[derive(Debug, Clone)]
struct Results {
    reports: Family<ReportResult, Counter>,
    log_bytes: Gauge,
    pending: Gauge,
    flushes: Family<ReloadOutcome, Counter>,
    flush_seconds: Histogram,
    flush_lag_ms: Gauge,
    follow_lag_ms: Gauge,
    lake_version: Gauge,
    dedupe_ids: Gauge,
    lake_lookups: Counter,
    log_syncs: Counter,
}

/// The service's metrics; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<Request, Counter>,
    latency: Family<Method, Histogram>,
    model: Family<Version, Gauge>,
    reloads: Family<ReloadOutcome, Counter>,
    queued: Family<QueueName, Gauge>,
    open_slots: Family<QueueName, Gauge>,
    backfills: Family<QueueName, Counter>,
    backfill_seconds: Histogram,
    served: Arc<Mutex<String>>,
    results: Results,
}

impl Metrics {
    #[must_use]
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("mm_serve");
        let requests = Family::<Request, Counter>::default();
        // 50 µs to about 3.4 s, doubling.
        let latency = Family::<Method, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 17))
        });
        let model = Family::<Version, Gauge>::default();
        let reloads = Family::<ReloadOutcome, Counter>::default();
        let queued = Family::<QueueName, Gauge>::default();
        registry.register(
            "queued_searches",
            "Searches waiting, by queue",
            queued.clone(),
        );
        let open_slots = Family::<QueueName, Gauge>::default();
        registry.register(
            "backfill_open_slots",
            "Slots open in the lobbies offered for backfill, by queue",
            open_slots.clone(),
        );
        let backfills = Family::<QueueName, Counter>::default();
        registry.register(
            "backfills",
            "Searches placed in open lobbies, by queue",
            backfills.clone(),
        );
        // 1 s to about 17 min, doubling.
        let backfill_seconds = Histogram::new(exponential_buckets(1.0, 2.0, 11));
        registry.register(
            "backfill_fill_seconds",
            "Time a lobby's slots had been offered when a search joined it, seconds",
            backfill_seconds.clone(),
        );
        registry.register(
            "requests",
            "Requests by method and gRPC status",
            requests.clone(),
        );
        registry.register(
            "request_seconds",
            "Request latency by method, seconds",
            latency.clone(),
        );
        registry.register("model", "The model version served (1)", model.clone());
        registry.register(
            "reloads",
            "Reload checks that swapped in a new version or refused one",
            reloads.clone(),
        );
        let results = Results::new();
        results.register(&mut registry);
        Metrics {
            registry: Arc::new(registry),
            requests,
            latency,
            model,
            reloads,
            queued,
            open_slots,
            backfills,
            backfill_seconds,
            served: Arc::new(Mutex::new(String::new())),
            results,
        }
    }

    /// Counts a report by its result (`recorded`, `duplicate`, `refused`, `unauthenticated`)
    /// and, for a refused one, the rule it broke.
    pub fn report(&self, result: &str, rule: &str) {
        self.results
            .reports
            .get_or_create(&ReportResult {
                result: result.to_string(),
                rule: rule.to_string(),
            })
            .inc();
    }

    /// The log's size and syncs so far, the matches waiting for a flush, and the age of the
    /// oldest.
    pub fn backlog(&self, log_bytes: u64, syncs: u64, pending: usize, oldest_ms: u64) {
        let g = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
        let seen = self.results.log_syncs.get();
        if syncs > seen {
            self.results.log_syncs.inc_by(syncs - seen);
        }
        self.results.log_bytes.set(g(log_bytes));
        self.results.pending.set(g(pending as u64));
        self.results.flush_lag_ms.set(g(oldest_ms));
    }

    /// One flush's outcome (`committed`, `failed`) and time.
    pub fn flush(&self, outcome: &str, took: Duration) {
        self.results
            .flushes
            .get_or_create(&ReloadOutcome {
                outcome: outcome.to_string(),
            })
            .inc();
        self.results.flush_seconds.observe(took.as_secs_f64());
    }

    /// The lake version the players have caught up with.
    pub fn followed(&self, version: i64) {
        self.results.lake_version.set(version);
    }

    /// The ids of recent matches kept.
    pub fn dedupe_ids(&self, ids: usize) {
        self.results
            .dedupe_ids
            .set(i64::try_from(ids).unwrap_or(i64::MAX));
    }

    /// One report looked up in the lake (its match older than the kept ids' horizon).
    pub fn lake_lookup(&self) {
        self.results.lake_lookups.inc();
    }

    /// How long ago the players last caught up with the lake, ms.
    pub fn follow_lag(&self, lag_ms: u64) {
        self.results
            .follow_lag_ms
            .set(i64::try_from(lag_ms).unwrap_or(i64::MAX));
    }

    /// Records one finished request.
    pub fn request(&self, method: &str, code: tonic::Code, took: Duration) {
        self.requests
            .get_or_create(&Request {
                method: method.to_string(),
                code: format!("{code:?}"),
            })
            .inc();
        self.latency
            .get_or_create(&Method {
                method: method.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// Sets the version served (the previous one's gauge drops to 0).
    pub fn serving(&self, version: &str) {
        let mut served = match self.served.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if !served.is_empty() {
            self.model
                .get_or_create(&Version {
                    version: served.clone(),
                })
                .set(0);
        }
        self.model
            .get_or_create(&Version {
                version: version.to_string(),
            })
            .set(1);
        *served = version.to_string();
    }

    /// Sets the number of searches waiting in `queue`.
    pub fn queue_size(&self, queue: &str, searches: usize) {
        self.queued
            .get_or_create(&QueueName {
                queue: queue.to_string(),
            })
            .set(i64::try_from(searches).unwrap_or(i64::MAX));
    }

    /// One tick's backfills of `queue` (how long each slot had been offered, ms) and the slots
    /// still open after it.
    pub fn backfilled(&self, queue: &str, slot_open_ms: &[i64], open_slots: u64) {
        let name = QueueName {
            queue: queue.to_string(),
        };
        self.backfills
            .get_or_create(&name)
            .inc_by(slot_open_ms.len() as u64);
        for &ms in slot_open_ms {
            self.backfill_seconds.observe(ms as f64 / 1000.0);
        }
        self.open_slots
            .get_or_create(&name)
            .set(i64::try_from(open_slots).unwrap_or(i64::MAX));
    }

    /// Counts a reload check's outcome: `swapped` or `refused`.
    pub fn reload(&self, outcome: &str) {
        self.reloads
            .get_or_create(&ReloadOutcome {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// The metrics as Prometheus text.
    #[must_use]
    pub fn text(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Serves `/metrics` on `listener` until `shutdown` resolves.
pub(crate) async fn serve_http(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    m.text(),
                )
            }
        }),
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

/// The address the metrics are served on, for the log.
pub(crate) fn describe(addr: SocketAddr) -> String {
    format!("http://{addr}/metrics")
}

impl Results {
    fn new() -> Results {
        Results {
            reports: Family::default(),
            log_bytes: Gauge::default(),
            pending: Gauge::default(),
            flushes: Family::default(),
            // 1 ms to about 65 s, doubling.
            flush_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            flush_lag_ms: Gauge::default(),
            follow_lag_ms: Gauge::default(),
            lake_version: Gauge::default(),
            dedupe_ids: Gauge::default(),
            lake_lookups: Counter::default(),
            log_syncs: Counter::default(),
        }
    }

    /// Registers the results' metrics in `registry`.
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "reports",
            "Reported matches (ReportMatch calls and the matches of ReportMatches calls) by result (recorded, duplicate, refused; unauthenticated: a refused call) and the rule a refused one broke",
            self.reports.clone(),
        );
        registry.register(
            "log_bytes",
            "Size of the write-ahead log on disk",
            self.log_bytes.clone(),
        );
        registry.register(
            "pending_matches",
            "Reported matches not yet committed to the lake",
            self.pending.clone(),
        );
        registry.register(
            "flushes",
            "Flushes of the log into the lake by outcome (committed, failed)",
            self.flushes.clone(),
        );
        registry.register(
            "flush_seconds",
            "Time of a flush into the lake (write and Delta commit), seconds",
            self.flush_seconds.clone(),
        );
        registry.register(
            "flush_lag_ms",
            "Age of the oldest reported match not yet in the lake, ms",
            self.flush_lag_ms.clone(),
        );
        registry.register(
            "follow_lag_ms",
            "Time since the players last caught up with the lake's commits, ms",
            self.follow_lag_ms.clone(),
        );
        registry.register(
            "lake_version",
            "The matches table version the players have caught up with",
            self.lake_version.clone(),
        );
        registry.register(
            "dedupe_ids",
            "Ids of the recent matches the lake holds, kept to answer a retried report",
            self.dedupe_ids.clone(),
        );
        registry.register(
            "log_syncs",
            "Syncs of the write-ahead log (each acknowledges a group of reports)",
            self.log_syncs.clone(),
        );
        registry.register(
            "lake_lookups",
            "Reports of matches older than the kept ids' horizon, looked up in the lake",
            self.lake_lookups.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_counts_requests_versions_and_reloads() {
        let m = Metrics::new();
        m.serving("v0001");
        m.request("Score", tonic::Code::Ok, Duration::from_micros(300));
        m.request("Score", tonic::Code::Ok, Duration::from_micros(900));
        m.request(
            "Pair",
            tonic::Code::InvalidArgument,
            Duration::from_micros(80),
        );
        m.serving("v0002");
        m.reload("swapped");
        let t = m.text();
        assert!(
            t.contains("mm_serve_requests_total{method=\"Score\",code=\"Ok\"} 2"),
            "{t}"
        );
        assert!(
            t.contains("mm_serve_requests_total{method=\"Pair\",code=\"InvalidArgument\"} 1"),
            "{t}"
        );
        assert!(
            t.contains("mm_serve_request_seconds_count{method=\"Score\"} 2"),
            "{t}"
        );
        assert!(t.contains("mm_serve_model{version=\"v0001\"} 0"), "{t}");
        assert!(t.contains("mm_serve_model{version=\"v0002\"} 1"), "{t}");
        assert!(
            t.contains("mm_serve_reloads_total{outcome=\"swapped\"} 1"),
            "{t}"
        );
    }
}
