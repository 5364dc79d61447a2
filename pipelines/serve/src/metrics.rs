//! The service's metrics in Prometheus' text format (prometheus-client), served over HTTP/1.1
//! at `/metrics` by axum: requests by method and status, latency histograms by method (`Tick`'s
//! is the tick time), searches waiting by queue, the model version served, and reloads by
//! outcome.

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

/// The service's metrics; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<Request, Counter>,
    latency: Family<Method, Histogram>,
    model: Family<Version, Gauge>,
    reloads: Family<ReloadOutcome, Counter>,
    queued: Family<QueueName, Gauge>,
    served: Arc<Mutex<String>>,
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
        Metrics {
            registry: Arc::new(registry),
            requests,
            latency,
            model,
            reloads,
            queued,
            served: Arc::new(Mutex::new(String::new())),
        }
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
