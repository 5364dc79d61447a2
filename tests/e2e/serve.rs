//! `mm serve` over the real binary with a tonic client: Score and Pair agree with the library on
//! the same artifact; the health service reports SERVING; bad requests get a clear status; new
//! versions published while clients keep calling are picked up with no failed request and no
//! response of a version that was not published; a corrupt version promoted by hand is refused
//! while the last good one keeps serving. The server is started with `--max-seconds` and killed
//! at the end, so it never outlives the test.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mm_artifact::Store;
use mm_matcher::from_artifact::pair_pool;
use mm_matcher::pairing::PairPolicy;
use mm_matcher::queue::Member;
use mm_serve::proto;
use mm_serve::proto::matcher_client::MatcherClient;
use tonic::transport::Channel;

use crate::util::Killed;

fn publish(root: &Path, version: &str, seed: u64, promote: bool) {
    let (m, files) = mm_artifact::synthetic::artifact(80, seed);
    Store::new(root)
        .publish(version, m, &files, promote, None)
        .unwrap();
}

/// Starts `mm serve` on free ports; returns it, its gRPC address and its metrics URL.
fn start(models: &Path) -> (Killed, String, String) {
    let models = models.as_os_str();
    let args: [&std::ffi::OsStr; 5] = [
        "--reload-ms".as_ref(),
        "50".as_ref(),
        "--max-seconds".as_ref(),
        "120".as_ref(),
        "--models".as_ref(),
    ];
    let mut all: Vec<&std::ffi::OsStr> = args.to_vec();
    all.push(models);
    crate::util::start_serve(&all, &[])
}

/// The text at a `http://host:port/path` URL, by a plain HTTP/1.0 GET.
pub(crate) fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap());
    let mut s = std::net::TcpStream::connect(host).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(
        text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200"),
        "{text}"
    );
    text
}

fn score_request(ids: &[String]) -> proto::ScoreRequest {
    proto::ScoreRequest::of_ids(ids, true)
}

#[test]
fn serve_scores_pairs_and_reloads_without_dropping_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("duel");
    publish(&root, "v0001", 1, true);
    let art = Store::new(&root).open_latest().unwrap();
    let (_server, addr, metrics_url) = start(&root);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let channel = Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = MatcherClient::new(channel.clone());

        // Health: the standard service.
        let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
        let h = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: "mm.v1.Matcher".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            h.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );

        // Score: the library's numbers on the same artifact, new players included.
        let mut ids: Vec<String> = (0..11)
            .map(|i| art.snapshot.id(i * 3).to_string())
            .collect();
        ids.push("newcomer".into());
        let r = client
            .score(score_request(&ids))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.model_version, "v0001");
        let now = art.manifest.snapshot_as_of_ms;
        for (p, id) in r.players.iter().zip(&ids) {
            let m = Member::lookup(&art, id, now, false);
            assert_eq!(p.id, *id);
            assert_eq!(p.raw_skill, m.raw_skill);
            assert_eq!(p.percentile, m.percentile);
            assert_eq!(
                [p.churn_after_win, p.churn_after_draw, p.churn_after_loss],
                m.churn
            );
            assert_eq!(p.known, id != "newcomer");
        }
        let lobby = r.lobby.unwrap();
        assert!((lobby.win + lobby.draw + lobby.loss - 1.0).abs() < 1e-9);

        // Pair: the facade's pairing and objective.
        let pool: Vec<String> = (0..40).map(|i| art.snapshot.id(i).to_string()).collect();
        let p = client
            .pair(proto::PairRequest {
                ids: pool.clone(),
                policy: proto::PairPolicy::Eomm as i32,
                now_ms: 0,
                seed: 0,
            })
            .await
            .unwrap()
            .into_inner();
        let direct = pair_pool(&art, &pool, now, PairPolicy::Eomm).unwrap();
        assert_eq!(p.pairs.len(), 20);
        assert!((p.objective - direct.pairing.objective).abs() < 1e-9);
        let got: HashSet<(String, String)> =
            p.pairs.iter().map(|x| (x.a.clone(), x.b.clone())).collect();
        let want: HashSet<(String, String)> = direct
            .pairing
            .pairs
            .iter()
            .map(|&(a, b)| (pool[a].clone(), pool[b].clone()))
            .collect();
        assert_eq!(got, want);

        // Bad requests: a clear status, and the server keeps serving.
        let one = client
            .pair(proto::PairRequest {
                ids: vec![pool[0].clone()],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(one.code(), tonic::Code::InvalidArgument);
        assert!(one.message().contains("at least 2"), "{}", one.message());
        let bad_teams = client
            .score(proto::ScoreRequest {
                teams: vec![0, 1, 2],
                ..score_request(&ids[..3])
            })
            .await
            .unwrap_err();
        assert_eq!(bad_teams.code(), tonic::Code::InvalidArgument);
        let huge = client
            .pair(proto::PairRequest {
                ids: vec!["x".repeat(1_000); 10_000],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(
            matches!(
                huge.code(),
                tonic::Code::ResourceExhausted | tonic::Code::OutOfRange
            ),
            "a 10 MB message: {huge:?}"
        );

        // A queue's size reaches the metrics (checked at the end).
        client
            .enqueue(proto::EnqueueRequest {
                queue: Some(proto::QueueSpec {
                    name: "duos".into(),
                    team_size: 2,
                    policy: proto::QueuePolicy::Cod as i32,
                    ..Default::default()
                }),
                party: Some(proto::Party {
                    search_id: 1,
                    player_ids: vec![ids[0].clone()],
                    start_ms: 1_000,
                    ..Default::default()
                }),
            })
            .await
            .unwrap();

        // Clients call without pause while new versions are published and promoted.
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let mut workers = Vec::new();
        for _ in 0..4 {
            let mut c = client.clone();
            let (stop, calls, ids) = (Arc::clone(&stop), Arc::clone(&calls), ids.clone());
            workers.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let r = c.score(score_request(&ids)).await.map(|r| r.into_inner());
                    let r = r.expect("no request fails during reloads");
                    seen.push(r.model_version);
                    calls.fetch_add(1, Ordering::Relaxed);
                }
                seen
            }));
        }
        let published: Vec<String> = (2..=6).map(|k| format!("v{k:04}")).collect();
        for (k, v) in published.iter().enumerate() {
            let root = root.clone();
            let v = v.clone();
            tokio::task::spawn_blocking(move || publish(&root, &v, 10 + k as u64, true))
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        // The last version is served once the reload has picked it up.
        wait_for_version(&mut client, &ids, "v0006").await;

        // A corrupt version promoted by hand: refused, v0006 keeps serving.
        let root2 = root.clone();
        tokio::task::spawn_blocking(move || {
            publish(&root2, "v0007", 77, false);
            let f = root2.join("v0007").join("percentiles.json");
            let mut bytes = std::fs::read(&f).unwrap();
            bytes[0] ^= 0x20;
            std::fs::write(&f, bytes).unwrap();
            std::fs::write(root2.join("LATEST"), "v0007\n").unwrap();
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        stop.store(true, Ordering::Relaxed);
        let mut versions: HashSet<String> = HashSet::new();
        for w in workers {
            versions.extend(w.await.unwrap());
        }
        assert!(calls.load(Ordering::Relaxed) > 20);
        let allowed: HashSet<String> = std::iter::once("v0001".to_string())
            .chain(published.iter().cloned())
            .collect();
        assert!(versions.is_subset(&allowed), "{versions:?}");
        assert!(versions.contains("v0006"), "{versions:?}");
        let after = client
            .score(score_request(&ids))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            after.model_version, "v0006",
            "the corrupt v0007 is not served"
        );

        // A good version after the corrupt one is picked up again.
        let root3 = root.clone();
        tokio::task::spawn_blocking(move || publish(&root3, "v0008", 88, true))
            .await
            .unwrap();
        wait_for_version(&mut client, &ids, "v0008").await;
    });

    // The metrics endpoint: requests by method and status, the version served, reloads.
    let m = http_get(&metrics_url);
    let value = |series: &str| -> f64 {
        m.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
            .unwrap_or_else(|| panic!("no {series} in\n{m}"))
    };
    assert!(value("mm_serve_requests_total{method=\"Score\",code=\"Ok\"}") > 20.0);
    // The pool of one; the 10 MB message was refused by tonic before the handler.
    assert_eq!(
        value("mm_serve_requests_total{method=\"Pair\",code=\"InvalidArgument\"}"),
        1.0
    );
    assert_eq!(
        value("mm_serve_requests_total{method=\"Score\",code=\"InvalidArgument\"}"),
        1.0
    );
    assert_eq!(
        value("mm_serve_request_seconds_count{method=\"Pair\"}"),
        2.0
    );
    assert_eq!(value("mm_serve_model{version=\"v0008\"}"), 1.0);
    assert_eq!(value("mm_serve_queued_searches{queue=\"duos\"}"), 1.0);
    assert_eq!(value("mm_serve_model{version=\"v0006\"}"), 0.0);
    assert_eq!(value("mm_serve_reloads_total{outcome=\"refused\"}"), 1.0);
    assert!(value("mm_serve_reloads_total{outcome=\"swapped\"}") >= 6.0);
}

/// `mm serve --models s3://...` on the S3-compatible test server: the store is served through
/// its mirror, and a version uploaded later is picked up by the reload.
#[test]
fn serve_reloads_from_an_s3_bucket() {
    let Some(py) = crate::util::moto_python() else {
        return;
    };
    let s3 = crate::util::S3Server::start(&py);
    s3.create_bucket("models");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("duel");
    publish(&root, "v0001", 1, true);
    s3.upload_dir("models", "duel", &root);
    let art = Store::new(&root).open_latest().unwrap();
    let mut env = s3.env();
    env.push(("MM_CACHE", dir.path().join("cache").display().to_string()));
    let (_server, addr, _) = crate::util::start_serve(
        &[
            "--models",
            "s3://models",
            "--name",
            "duel",
            "--reload-ms",
            "200",
            "--max-seconds",
            "120",
        ],
        &env,
    );
    let ids: Vec<String> = (0..4).map(|i| art.snapshot.id(i).to_string()).collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut client = MatcherClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
        let r = client
            .score(score_request(&ids))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.model_version, "v0001");
        let root2 = root.clone();
        tokio::task::spawn_blocking(move || publish(&root2, "v0002", 2, true))
            .await
            .unwrap();
        s3.upload_dir("models", "duel", &root);
        wait_for_version(&mut client, &ids, "v0002").await;
    });
}

async fn wait_for_version(client: &mut MatcherClient<Channel>, ids: &[String], want: &str) {
    let t0 = Instant::now();
    loop {
        let r = client.score(score_request(ids)).await.unwrap().into_inner();
        if r.model_version == want {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "still {} after 20 s, waiting for {want}",
            r.model_version
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The service's process runs on mimalloc and a batch command on the system's allocator
/// (`pipelines/alloc`, chosen from the command line): `mm serve` says which in its first log
/// line, here before it refuses a models folder with no artifact.
#[test]
fn serve_runs_on_mimalloc() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = crate::util::mm(&[
        "serve",
        "--models",
        dir.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--max-seconds",
        "5",
    ]);
    assert_ne!(code, 0, "no artifact to serve: {err}");
    assert!(err.contains("allocator=Mimalloc"), "{err}");
}
