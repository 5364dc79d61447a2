//! `mm serve`: the matcher as a gRPC service.

use anyhow::{Result, bail};

use crate::args::ServeArgs;

/// `mm serve`: the model's directory (`--models` itself when it holds a LATEST, else the one
/// model under it or `--name`), served until Ctrl-C or `--max-seconds`. Prints the bound
/// address as its first line on stdout, and the metrics address as the second when served.
pub fn run(a: &ServeArgs) -> Result<()> {
    // mimalloc in this process, the system's allocator in the batch jobs (pipelines/alloc).
    tracing::info!(allocator = ?crate::ALLOCATOR.choice(), "memory allocator");
    // A remote store (s3://, gs://, az://) is served from its local mirror, refreshed before
    // each check of LATEST (new versions are downloaded once, the pointers every time).
    let crate::place::Served { remote, dir } =
        crate::place::served_model(&a.sel.models, a.sel.name.as_deref())?;
    let sync = remote.is_remote().then(|| {
        mm_serve::SyncHook(std::sync::Arc::new(move || {
            mm_lake::mirror::Mirror::pull(&remote)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }))
    });
    let wal = crate::place::local("wal", &a.wal)?;
    let results = a.lake.as_ref().map(|lake| mm_serve::ResultsConfig {
        lake: lake.clone(),
        wal,
        replica: a.replica.clone().unwrap_or_else(host_name),
        flush_ms: (a.flush_s * 1000.0).round().max(0.0) as u64,
        flush_matches: a.flush_matches,
        follow_ms: a.follow_ms,
        dedupe_ms: (a.dedupe_hours * 3_600_000.0).round() as i64,
        segment_bytes: 64 << 20,
        group_wait: std::time::Duration::from_micros(a.wal_group_us),
    });
    if !(a.dedupe_hours.is_finite() && a.dedupe_hours > 0.0) {
        bail!(
            "invalid --dedupe-hours: {} is not a positive number of hours",
            a.dedupe_hours
        );
    }
    if !(a.flush_s.is_finite() && a.flush_s > 0.0) {
        bail!(
            "invalid --flush-s: {} is not a positive number of seconds",
            a.flush_s
        );
    }
    let token = match &a.token_file {
        Some(f) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", f.display()))?
                .trim()
                .to_string(),
        ),
        None => std::env::var("MM_SERVE_TOKEN").ok(),
    };
    if a.auth_reads && token.is_none() {
        bail!("--auth-reads needs a token (--token-file or MM_SERVE_TOKEN)");
    }
    let cfg = mm_serve::ServeConfig {
        model_dir: dir,
        listen: a.listen,
        reload_ms: a.reload_ms,
        max_seconds: a.max_seconds,
        metrics: a.metrics,
        sync,
        results,
        auth: mm_serve::Auth {
            token,
            reads: a.auth_reads,
            client_certs: a.client_ca.is_some(),
        },
        tls: match (&a.tls_cert, &a.tls_key) {
            (Some(cert), Some(key)) => Some(mm_serve::Tls {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: a.client_ca.clone(),
            }),
            _ => None,
        },
    };
    cfg.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(mm_serve::serve(&cfg, |b| {
        mm_run::outln!("listening on {}", b.grpc);
        if let Some(m) = b.metrics {
            mm_run::outln!("metrics on http://{m}/metrics");
        }
    }))?;
    Ok(())
}

/// This machine's name (a Kubernetes pod's name), for the default replica name.
fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "mm-serve".to_string())
}
