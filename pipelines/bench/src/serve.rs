//! `mm bench serve`: `mm serve` in a child process on loopback, driven by tonic clients in this
//! process. Each phase is bounded in time and count, and the server stops by itself
//! (`--max-seconds`) if this process dies.
//!
//! Phases: `Score` of 12 players and `Pair` of 200 and 1,000 players, each by `concurrency`
//! clients calling back to back for `seconds` (closed loop: the offered load is the
//! concurrency); a team queue of `queue_searches` 6v6 searches with `arrivals` new searches a
//! second and one `Tick` a second; `reloads` new versions published (and promoted) during a
//! Score load, then a corrupt version promoted by hand, counting failed requests and the
//! versions seen; and a soak of `soak_seconds` at the Score load, with the server's resident
//! memory at its start and end.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use mm_artifact::Store;
use mm_serve::proto;
use mm_serve::proto::matcher_client::MatcherClient;
use serde::Serialize;
use tonic::transport::Channel;

use crate::args::BenchServeArgs;

/// Kills the server when the benchmark ends, however it ends.
struct Server {
    child: Child,
    grpc: String,
    metrics: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server's resident memory, MiB (Linux).
    fn rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb: f64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kb / 1024.0)
    }

    /// The server's CPU seconds (user and system) so far, by thread name (Linux; empty
    /// elsewhere): the request threads (`tokio-rt-worker`), the flush (`mm-serve-flush` and its
    /// background thread, `mm-serve-flushbg`), the log's writer (`mm-serve-wal`), the lake's
    /// I/O (`mm-lake-io`).
    fn cpu_by_thread(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) else {
            return out;
        };
        for t in tasks.flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            if let Some((name, seconds)) = mm_run::stat_cpu(&stat) {
                *out.entry(name.to_string()).or_default() += seconds;
            }
        }
        out
    }
}

/// CPU seconds by thread name between two readings of [`Server::cpu_by_thread`] (a name's
/// threads that ended meanwhile are no longer counted: at least 0).
fn cpu_between(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (k.clone(), d.max(0.0))
        })
        .collect()
}

fn start(root: &Path, max_seconds: f64) -> Result<Server> {
    start_with(root, max_seconds, &[])
}

fn start_with(root: &Path, max_seconds: f64, extra: &[&str]) -> Result<Server> {
    let mut child = Command::new(std::env::current_exe()?)
        .env("MM_SERVE_TOKEN", TOKEN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics",
            "127.0.0.1:0",
        ])
        .args([
            "--reload-ms",
            "100",
            "--max-seconds",
            &max_seconds.to_string(),
        ])
        .arg("--models")
        .arg(root)
        .args(extra)
        .stdout(Stdio::piped())
        // The server's log, when asked for (MM_BENCH_SERVER_LOG=1): the results phase's flushes.
        .stderr(if std::env::var_os("MM_BENCH_SERVER_LOG").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().context("the server's stdout")?);
    let mut line = |prefix: &str| -> Result<String> {
        let mut l = String::new();
        out.read_line(&mut l)?;
        l.trim()
            .strip_prefix(prefix)
            .map(str::to_string)
            .with_context(|| format!("the server printed {l:?}, not {prefix:?}"))
    };
    let grpc = line("listening on ")?;
    let metrics = line("metrics on ")?;
    Ok(Server {
        child,
        grpc,
        metrics,
    })
}

fn publish(root: &Path, version: &str, players: usize, seed: u64) -> Result<()> {
    let (m, files) = mm_artifact::synthetic::artifact(players, seed);
    Store::new(root).publish(version, m, &files, true, None)?;
    Ok(())
}

/// Latency figures of one phase.
#[derive(Debug, Serialize)]
struct Phase {
    name: String,
    /// Closed loop: this many requests in flight at any time.
    concurrency: usize,
    requests: u64,
    failed: u64,
    seconds: f64,
    per_second: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
}

/// The phases as a table, the names in a column `name_width` wide.
fn print_phases<'a>(name_width: usize, phases: impl IntoIterator<Item = &'a Phase>) {
    mm_run::outln!(
        "{:<name_width$} {:>5} {:>9} {:>7} {:>10} {:>9} {:>9} {:>9}",
        "phase",
        "conc",
        "requests",
        "failed",
        "req/s",
        "p50 ms",
        "p99 ms",
        "max ms"
    );
    for p in phases {
        mm_run::outln!(
            "{:<name_width$} {:>5} {:>9} {:>7} {:>10.0} {:>9.3} {:>9.3} {:>9.3}",
            p.name,
            p.concurrency,
            p.requests,
            p.failed,
            p.per_second,
            p.p50_ms,
            p.p99_ms,
            p.max_ms
        );
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn phase(name: &str, concurrency: usize, mut ms: Vec<f64>, failed: u64, seconds: f64) -> Phase {
    ms.sort_by(f64::total_cmp);
    Phase {
        name: name.to_string(),
        concurrency,
        requests: ms.len() as u64 + failed,
        failed,
        seconds,
        per_second: ms.len() as f64 / seconds,
        p50_ms: quantile(&ms, 0.5),
        p99_ms: quantile(&ms, 0.99),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
    }
}

/// What one closed-loop client saw: latencies (ms), failures, versions.
type ClientRun = (Vec<f64>, u64, BTreeSet<String>);

/// `concurrency` clients call `call` back to back until `stop` is set.
async fn closed_loop<F, Fut>(
    client: &MatcherClient<Channel>,
    concurrency: usize,
    stop: Arc<AtomicBool>,
    call: F,
) -> Vec<tokio::task::JoinHandle<ClientRun>>
where
    F: Fn(MatcherClient<Channel>) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = std::result::Result<String, tonic::Status>> + Send,
{
    (0..concurrency)
        .map(|_| {
            let (c, stop, call) = (client.clone(), Arc::clone(&stop), call.clone());
            tokio::spawn(async move {
                let (mut ms, mut failed, mut versions) = (Vec::new(), 0u64, BTreeSet::new());
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    match call(c.clone()).await {
                        Ok(v) => {
                            ms.push(t.elapsed().as_secs_f64() * 1e3);
                            versions.insert(v);
                        }
                        Err(_) => failed += 1,
                    }
                }
                (ms, failed, versions)
            })
        })
        .collect()
}

async fn gather(tasks: Vec<tokio::task::JoinHandle<ClientRun>>) -> Result<ClientRun> {
    let (mut ms, mut failed, mut versions) = (Vec::new(), 0, BTreeSet::new());
    for t in tasks {
        let (m, f, v) = t.await?;
        ms.extend(m);
        failed += f;
        versions.extend(v);
    }
    Ok((ms, failed, versions))
}

fn score_call(ids: Arc<Vec<String>>) -> impl Fn(MatcherClient<Channel>) -> ScoreFut + Clone {
    move |mut c| {
        let req = proto::ScoreRequest::of_ids(&ids, true);
        Box::pin(async move { Ok(c.score(req).await?.into_inner().model_version) })
    }
}

type ScoreFut = std::pin::Pin<
    Box<dyn std::future::Future<Output = std::result::Result<String, tonic::Status>> + Send>,
>;

/// Runs a closed-loop phase for `seconds`.
async fn timed_phase<F>(
    client: &MatcherClient<Channel>,
    name: &str,
    concurrency: usize,
    seconds: f64,
    call: F,
) -> Result<(Phase, BTreeSet<String>)>
where
    F: Fn(MatcherClient<Channel>) -> ScoreFut + Send + Sync + Clone + 'static,
{
    let (ms, failed, versions, took) = timed_loop(client, concurrency, seconds, call).await?;
    Ok((phase(name, concurrency, ms, failed, took), versions))
}

/// A closed loop for `seconds`: its latencies (ms), failures, versions and how long it took.
async fn timed_loop<F>(
    client: &MatcherClient<Channel>,
    concurrency: usize,
    seconds: f64,
    call: F,
) -> Result<(Vec<f64>, u64, BTreeSet<String>, f64)>
where
    F: Fn(MatcherClient<Channel>) -> ScoreFut + Send + Sync + Clone + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let tasks = closed_loop(client, concurrency, Arc::clone(&stop), call).await;
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let (ms, failed, versions) = gather(tasks).await?;
    Ok((ms, failed, versions, t0.elapsed().as_secs_f64()))
}

/// The team-queue phase: `searches` 6v6 solo searches queued, then each second `arrivals` new
/// ones and one tick, for `seconds`.
#[derive(Debug, Serialize)]
struct QueuePhase {
    searches_at_start: usize,
    arrivals_per_second: usize,
    ticks: usize,
    tick_p50_ms: f64,
    tick_p99_ms: f64,
    lobbies_per_tick: f64,
    queued_at_end: u64,
    enqueue_p50_ms: f64,
    enqueue_p99_ms: f64,
}

async fn queue_phase(
    client: &mut MatcherClient<Channel>,
    ids: &[String],
    a: &BenchServeArgs,
) -> Result<QueuePhase> {
    let spec = proto::QueueSpec {
        name: "tdm".into(),
        team_size: 6,
        policy: proto::QueuePolicy::Cod as i32,
        ..Default::default()
    };
    // Each search is a player of its own: the service refuses a player in two searches.
    let searches = a.queue_searches + a.arrivals * a.seconds.ceil() as usize;
    if searches > ids.len() {
        bail!(
            "the queue phase needs {searches} players (--queue-searches + --arrivals x \
             --seconds), more than the {} it draws on (--players, at most 20,000)",
            ids.len()
        );
    }
    let mut next = 0u64;
    let t0 = 1_700_000_000_000i64;
    let mut enqueue_ms = Vec::new();
    let mut enqueue = |c: &mut MatcherClient<Channel>, now: i64| {
        let k = next;
        next += 1;
        // Spread over a continent, skill from the snapshot's players.
        let req = proto::EnqueueRequest {
            queue: Some(spec.clone()),
            party: Some(proto::Party {
                search_id: k,
                player_ids: vec![ids[(k as usize * 7919) % ids.len()].clone()],
                start_ms: now,
                lat: 35.0 + ((k * 37) % 30) as f64,
                lon: -10.0 + ((k * 53) % 40) as f64,
                crossplay: true,
                ..Default::default()
            }),
        };
        let mut c = c.clone();
        async move {
            let t = Instant::now();
            c.enqueue(authorized(tonic::Request::new(req)))
                .await
                .map(|_| t.elapsed().as_secs_f64() * 1e3)
        }
    };
    for _ in 0..a.queue_searches {
        enqueue_ms.push(enqueue(client, t0).await?);
    }
    let mut tick_ms = Vec::new();
    let mut lobbies = 0usize;
    let mut queued = 0;
    let seconds = a.seconds.ceil() as usize;
    for s in 1..=seconds {
        let now = t0 + s as i64 * 1000;
        for _ in 0..a.arrivals {
            enqueue_ms.push(enqueue(client, now).await?);
        }
        let t = Instant::now();
        let r = client
            .tick(authorized(tonic::Request::new(proto::TickRequest {
                queue: "tdm".into(),
                now_ms: now,
            })))
            .await?
            .into_inner();
        tick_ms.push(t.elapsed().as_secs_f64() * 1e3);
        lobbies += r.lobbies.len();
        queued = r.queued_searches;
    }
    tick_ms.sort_by(f64::total_cmp);
    enqueue_ms.sort_by(f64::total_cmp);
    Ok(QueuePhase {
        searches_at_start: a.queue_searches,
        arrivals_per_second: a.arrivals,
        ticks: tick_ms.len(),
        tick_p50_ms: quantile(&tick_ms, 0.5),
        tick_p99_ms: quantile(&tick_ms, 0.99),
        lobbies_per_tick: lobbies as f64 / tick_ms.len().max(1) as f64,
        queued_at_end: queued,
        enqueue_p50_ms: quantile(&enqueue_ms, 0.5),
        enqueue_p99_ms: quantile(&enqueue_ms, 0.99),
    })
}

#[derive(Debug, Serialize)]
struct ReloadPhase {
    published: usize,
    requests: u64,
    failed: u64,
    /// Versions that answered; every one was published.
    versions_seen: Vec<String>,
    /// Serving after the corrupt version was promoted by hand.
    served_after_corrupt: String,
    refusals_in_metrics: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    players: usize,
    phases: Vec<Phase>,
    queue: QueuePhase,
    reload: ReloadPhase,
    soak: Option<Phase>,
    /// The server's resident memory before the phases, and at the end.
    rss_mib_start: Option<f64>,
    rss_mib_end: Option<f64>,
    /// At the soak's start and after each tenth of it.
    soak_rss_mib: Vec<f64>,
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

fn http_get(url: &str) -> Result<String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").context("an http URL")?;
    let (host, path) = rest.split_at(rest.find('/').context("a path")?);
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}

const TOKEN: &str = "bench-token";

/// `req` with the service's token: the queue calls and ReportMatch need it.
fn authorized<T>(mut req: tonic::Request<T>) -> tonic::Request<T> {
    if let Ok(v) = format!("Bearer {TOKEN}").parse() {
        req.metadata_mut().insert("authorization", v);
    }
    req
}

/// One 6v6 match of 12 players drawn from `ids`, with kills, deaths and team scores, numbered
/// `k` (its players and figures from a splitmix64 seeded by `k`), starting 50 ms after match
/// `k - 1`; with `omit_players`, asking for no players in the answer.
fn bench_match(
    ids: &[String],
    k: u64,
    start_ms: i64,
    omit_players: bool,
) -> proto::ReportMatchRequest {
    let mut mix = mm_artifact::synthetic::Mix(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut rnd = move || mix.next();
    let first = (rnd() % (ids.len() as u64 / 12)) as usize * 12;
    let scores = [(rnd() % 100) as f64, (rnd() % 100) as f64];
    let players = (0..12)
        .map(|j| proto::PlayerResult {
            player_id: ids[first + j].clone(),
            team: (j % 2) as i32,
            team_score: Some(scores[j % 2]),
            kills: Some((rnd() % 20) as i32),
            deaths: Some(10),
            deaths_by_enemy: Some((rnd() % 10) as i32),
            seconds_played: Some(600.0),
            ..Default::default()
        })
        .collect();
    proto::ReportMatchRequest {
        match_id: format!("bench-{k:010}"),
        mode: "tdm-6v6".into(),
        start_ms: start_ms + i64::try_from(k).unwrap_or(0) * 50,
        end_ms: None,
        players,
        omit_players,
    }
}

/// An open-loop call that reports `batch` new matches ([`bench_match`], numbered by `next`):
/// one ReportMatch call when `batch` is 1, else one ReportMatches call of `batch` matches (an
/// error when any of them was refused).
fn report_call(
    ids: Arc<Vec<String>>,
    next: Arc<std::sync::atomic::AtomicU64>,
    start_ms: i64,
    (omit_players, batch): (bool, u32),
) -> impl Fn(MatcherClient<Channel>) -> ScoreFut + Clone {
    move |mut c| {
        let k = next.fetch_add(u64::from(batch), Ordering::Relaxed);
        let mut matches: Vec<proto::ReportMatchRequest> = (k..k + u64::from(batch))
            .map(|k| bench_match(&ids, k, start_ms, omit_players))
            .collect();
        Box::pin(async move {
            if matches.len() == 1
                && let Some(one) = matches.pop()
            {
                let req = authorized(tonic::Request::new(one));
                return Ok(c.report_match(req).await?.into_inner().model_version);
            }
            let req = authorized(tonic::Request::new(proto::ReportMatchesRequest { matches }));
            let results = c.report_matches(req).await?.into_inner().results;
            if results.len() != usize::try_from(batch).unwrap_or(0) {
                let n = results.len();
                return Err(tonic::Status::internal(format!(
                    "{n} results for {batch} matches"
                )));
            }
            match results.iter().find(|r| r.error_code != 0) {
                Some(r) => Err(tonic::Status::new(r.error_code.into(), r.error.clone())),
                None => Ok(results
                    .into_iter()
                    .next()
                    .and_then(|r| r.response)
                    .map(|r| r.model_version)
                    .unwrap_or_default()),
            }
        })
    }
}

/// Calls `call` at `rate / per_call` a second for `seconds`, each call in a task of its own and
/// carrying `per_call` items (matches) due at `rate` a second: a call is sent when its last item
/// is due. Latency counts from when each item was due (so that a slow answer does not hide the
/// calls it delays, and a batch's filling time is in its items'). Returns the latencies (ms) of
/// the answered items and the number of items that failed.
async fn open_loop<F>(
    client: &MatcherClient<Channel>,
    (rate, per_call): (f64, u32),
    seconds: f64,
    call: F,
) -> Result<(Vec<f64>, u64)>
where
    F: Fn(MatcherClient<Channel>) -> ScoreFut + Send + Sync + Clone + 'static,
{
    let t0 = tokio::time::Instant::now();
    let per = u64::from(per_call.max(1));
    let n = (rate * seconds / per as f64).round() as u64;
    let mut tasks = Vec::with_capacity(n as usize);
    for k in 0..n {
        let due = t0 + Duration::from_secs_f64(((k + 1) * per - 1) as f64 / rate);
        tokio::time::sleep_until(due).await;
        let (c, call) = (client.clone(), call.clone());
        tasks.push(tokio::spawn(async move {
            let r = call(c).await;
            (r.is_ok(), due.elapsed().as_secs_f64() * 1e3)
        }));
    }
    let (mut ms, mut failed) = (Vec::with_capacity((n * per) as usize), 0u64);
    for t in tasks {
        let (ok, took) = t.await?;
        if ok {
            // Item j of the call was due (per - 1 - j) / rate seconds before the call.
            ms.extend((0..per).map(|j| took + (per - 1 - j) as f64 / rate * 1e3));
        } else {
            failed += per;
        }
    }
    Ok((ms, failed))
}

/// [`open_loop`] on a connection and a runtime (one thread) of its own, as the game servers that
/// report results are processes of their own: the closed loop's latencies then include no wait
/// behind the open loop's tasks in one scheduler.
fn open_loop_thread<F>(
    url: String,
    rate: (f64, u32),
    seconds: f64,
    call: F,
) -> std::io::Result<OpenLoopThread>
where
    F: Fn(MatcherClient<Channel>) -> ScoreFut + Send + Sync + Clone + 'static,
{
    std::thread::Builder::new()
        .name("bench-open-loop".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let client = MatcherClient::new(Channel::from_shared(url)?.connect().await?);
                open_loop(&client, rate, seconds, call).await
            })
        })
}

/// An open loop's thread: the latencies (ms) of its answered calls, and how many failed.
type OpenLoopThread = std::thread::JoinHandle<Result<(Vec<f64>, u64)>>;

fn joined(h: OpenLoopThread) -> Result<(Vec<f64>, u64)> {
    h.join()
        .map_err(|_| anyhow::anyhow!("the open loop's thread panicked"))?
}

/// Score's closed loop (twelve players, `--concurrency` clients) beside an open loop of `call`
/// at `--report-rate` for `--seconds`, on a thread and a connection of its own.
struct Beside {
    stop: Arc<AtomicBool>,
    scores: Vec<tokio::task::JoinHandle<ClientRun>>,
    open: OpenLoopThread,
    t0: Instant,
}

impl Beside {
    async fn start<F>(
        client: &MatcherClient<Channel>,
        url: &str,
        a: &BenchServeArgs,
        twelve: &Arc<Vec<String>>,
        (call, per_call): (F, u32),
    ) -> Result<Beside>
    where
        F: Fn(MatcherClient<Channel>) -> ScoreFut + Send + Sync + Clone + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let scores = closed_loop(
            client,
            a.concurrency,
            Arc::clone(&stop),
            score_call(Arc::clone(twelve)),
        )
        .await;
        let open = open_loop_thread(url.to_string(), (a.report_rate, per_call), a.seconds, call)?;
        Ok(Beside {
            stop,
            scores,
            open,
            t0,
        })
    }

    /// Waits for the open loop to end, then stops Score's: Score's latencies (ms) and failures,
    /// the open loop's, and the seconds both ran.
    async fn finish(self) -> Result<((Vec<f64>, u64), (Vec<f64>, u64), f64)> {
        let open = self.open;
        let (om, of) = tokio::task::spawn_blocking(move || joined(open)).await??;
        self.stop.store(true, Ordering::Relaxed);
        let (sm, sf, _) = gather(self.scores).await?;
        Ok(((sm, sf), (om, of), self.t0.elapsed().as_secs_f64()))
    }
}

/// The control of the results phase: the closed loop of Score beside an open loop of Score
/// calls (12 other players) at the reports' rate. Any call at that rate costs Score at least
/// this much on a shared machine; what the reports cost beyond it is theirs.
async fn control_phase(
    client: &MatcherClient<Channel>,
    url: &str,
    a: &BenchServeArgs,
    twelve: &Arc<Vec<String>>,
    others: Arc<Vec<String>>,
) -> Result<(Phase, Phase)> {
    let both = Beside::start(client, url, a, twelve, (score_call(others), 1)).await?;
    let ((sm, sf), (om, of), seconds) = both.finish().await?;
    Ok((
        phase("Score 12 + Score open", a.concurrency, sm, sf, seconds),
        phase("Score 12 (open)", 0, om, of, seconds),
    ))
}

#[derive(Debug, Serialize)]
struct ReportsReport {
    players: usize,
    /// Matches a call (`--report-batch`): 1 for ReportMatch, more for ReportMatches.
    report_batch: u32,
    /// Rounds of Score alone and Score beside the reports (`--report-rounds`); the phases below pool
    /// every round's calls.
    rounds: usize,
    score_alone: Phase,
    /// The control: Score beside Score calls at the reports' rate, and those calls.
    score_beside_score_calls: Phase,
    score_calls: Phase,
    score_beside_reports: Phase,
    reports: Phase,
    player_results_per_second: f64,
    /// Score's p99 beside the reports over its p99 alone, over all rounds' calls.
    score_p99_ratio: f64,
    /// The same, each round's calls alone.
    score_p99_ratio_by_round: Vec<f64>,
    /// Score's p99 beside the control's calls over its p99 alone.
    score_p99_ratio_control: f64,
    /// Matches acknowledged, and the lake's rows and distinct (match, player) keys once the last
    /// flush is in.
    acknowledged: u64,
    lake_rows: u64,
    lake_keys: u64,
    /// From the last acknowledgement to the lake holding every acknowledged match, s.
    drain_seconds: f64,
    /// Syncs of the server's log over the reports (each acknowledges a group of them).
    log_syncs: f64,
    /// The log's largest size seen by the metrics during the load, MiB.
    log_mib_max: f64,
    rss_mib_start: Option<f64>,
    /// Resident memory halfway through the reports, and its growth over their second half
    /// (MiB a minute): flat once every player the reports draw on has a state.
    rss_mib_half: Option<f64>,
    rss_mib_per_minute_second_half: Option<f64>,
    rss_mib_end: Option<f64>,
    /// The server's CPU seconds from the start of the reports to the lake's last flush, by
    /// thread name, summed over the rounds (empty off Linux): robust to the machine's noise
    /// where latencies are not.
    server_cpu_seconds: BTreeMap<String, f64>,
}

/// Samples the server while the load runs until `seconds` after `t0`: the log's largest size
/// in the metrics (bytes) and, over the second half, its resident memory (seconds, MiB).
async fn sample_load(server: &Server, t0: Instant, seconds: f64) -> (f64, Vec<(f64, f64)>) {
    let mut log_max = 0.0f64;
    let mut rss: Vec<(f64, f64)> = Vec::new();
    while t0.elapsed().as_secs_f64() < seconds {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Ok(text) = http_get(&server.metrics) {
            log_max = log_max.max(metric(&text, "mm_serve_log_bytes"));
        }
        let at = t0.elapsed().as_secs_f64();
        if at >= seconds / 2.0
            && let Some(m) = server.rss_mib()
        {
            rss.push((at, m));
        }
    }
    (log_max, rss)
}

/// The lake's rows once they reach `want`, or after two minutes from `done`.
async fn lake_rows_when(lake: &Path, want: u64, done: Instant) -> Result<u64> {
    loop {
        let l = lake.to_path_buf();
        let rows = tokio::task::spawn_blocking(move || -> Result<u64> {
            let l = mm_lake::Lake::open(&l)?;
            Ok(l.match_entries().iter().filter_map(|f| f.rows).sum())
        })
        .await??;
        if rows >= want || done.elapsed() > Duration::from_secs(120) {
            return Ok(rows);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The distinct (match, player) keys of the lake's matches table.
async fn lake_keys(lake: &Path) -> Result<u64> {
    let l = lake.to_path_buf();
    tokio::task::spawn_blocking(move || -> Result<u64> {
        let l = mm_lake::Lake::open(&l)?;
        let mut keys = std::collections::HashSet::new();
        for f in l.matches_files()? {
            for b in
                mm_lake::parquet_io::read_parquet_columns(&f, Some(&["match_id", "player_id"]))?
            {
                use arrow_array::cast::AsArray;
                let (m, p) = (
                    b.column(0).as_string::<i32>(),
                    b.column(1).as_string::<i32>(),
                );
                for i in 0..b.num_rows() {
                    keys.insert((m.value(i).to_string(), p.value(i).to_string()));
                }
            }
        }
        Ok(keys.len() as u64)
    })
    .await?
}

/// The service with results on: a lake and a log under `a.work`, flushing every
/// `--serve-flush-s` (one second by default) or `--serve-flush-matches`.
fn start_results(a: &BenchServeArgs, root: &Path, lake: &Path, wal: &Path) -> Result<Server> {
    // Score alone, the control and the reports each round, and a lake check after each.
    let budget = 120.0
        + a.seconds * (2.0 + 2.0 * a.report_rounds.max(1) as f64)
        + 30.0 * a.report_rounds as f64;
    let (lake_s, wal_s) = (lake.to_string_lossy(), wal.to_string_lossy());
    let dedupe = a.dedupe_hours.to_string();
    let (flush_s, flush_matches, group_us) = (
        a.serve_flush_s.to_string(),
        a.serve_flush_matches.to_string(),
        a.serve_wal_group_us.to_string(),
    );
    start_with(
        root,
        budget,
        &[
            "--lake",
            &lake_s,
            "--wal",
            &wal_s,
            "--replica",
            "bench",
            "--flush-s",
            &flush_s,
            "--flush-matches",
            &flush_matches,
            "--dedupe-hours",
            &dedupe,
            "--wal-group-us",
            &group_us,
        ],
    )
}

/// `mm bench serve --reports`: results under load.
/// What the results phase gathers over its rounds: every call's latency, pooled.
#[derive(Default)]
struct Pooled {
    alone: (Vec<f64>, u64, f64),
    beside: (Vec<f64>, u64, f64),
    reports: (Vec<f64>, u64, f64),
    /// Score's p99 beside the reports over its p99 alone, round by round.
    by_round: Vec<f64>,
    cpu: BTreeMap<String, f64>,
    syncs: f64,
    log_max: f64,
    /// The first round's memory samples over its second half.
    rss: Option<Vec<(f64, f64)>>,
    drain: f64,
}

fn pool(into: &mut (Vec<f64>, u64, f64), ms: &[f64], failed: u64, seconds: f64) {
    into.0.extend_from_slice(ms);
    into.1 += failed;
    into.2 += seconds;
}

fn p99_of(ms: &[f64]) -> f64 {
    let mut v = ms.to_vec();
    v.sort_by(f64::total_cmp);
    quantile(&v, 0.99)
}

/// What every round of the results phase works with.
struct Round<'a> {
    client: &'a MatcherClient<Channel>,
    url: &'a str,
    a: &'a BenchServeArgs,
    server: &'a Server,
    /// The players the reports draw on, the twelve Score asks for, and the next match's number.
    ids: Arc<Vec<String>>,
    twelve: Arc<Vec<String>>,
    next: Arc<std::sync::atomic::AtomicU64>,
    /// The reported matches start after this time (the artifact's snapshot), ms.
    as_of_ms: i64,
    lake: &'a Path,
}

/// One round of Score beside the reports: the closed loop of Score and an open loop of
/// ReportMatch for `a.seconds`, then the wait for the lake to hold every match acknowledged so
/// far. Adds its calls, the server's CPU over it and the log's figures to `pooled`; returns
/// Score's latencies of the round.
async fn reports_round(r: &Round<'_>, pooled: &mut Pooled) -> Result<Vec<f64>> {
    let Round {
        client,
        url,
        a,
        server,
        ids,
        twelve,
        next,
        as_of_ms,
        lake,
    } = r;
    let (client, a, server, as_of_ms, lake) = (*client, *a, *server, *as_of_ms, *lake);
    // The results come from the game servers, not from the matchmaker that scores.
    let reports = report_call(
        Arc::clone(ids),
        Arc::clone(next),
        as_of_ms,
        (a.report_omit_players, a.report_batch),
    );
    let both = Beside::start(client, url, a, twelve, (reports, a.report_batch)).await?;
    let cpu_before = server.cpu_by_thread();
    let syncs_before = http_get(&server.metrics)
        .map(|t| metric(&t, "mm_serve_log_syncs_total"))
        .unwrap_or(0.0);
    let (log_max, rss) = sample_load(server, both.t0, a.seconds).await;
    let ((sm, sf), (rm, rf), seconds) = both.finish().await?;
    pool(&mut pooled.beside, &sm, sf, seconds);
    pool(&mut pooled.reports, &rm, rf, seconds);
    // The lake, once this round's last flush is in.
    let done = Instant::now();
    lake_rows_when(lake, pooled.reports.0.len() as u64 * 12, done).await?;
    pooled.drain = done.elapsed().as_secs_f64();
    for (k, v) in cpu_between(&cpu_before, &server.cpu_by_thread()) {
        *pooled.cpu.entry(k).or_default() += v;
    }
    pooled.syncs += http_get(&server.metrics)
        .map(|t| metric(&t, "mm_serve_log_syncs_total"))
        .unwrap_or(f64::NAN)
        - syncs_before;
    pooled.log_max = pooled.log_max.max(log_max);
    pooled.rss.get_or_insert(rss);
    Ok(sm)
}

fn run_reports(a: &BenchServeArgs, json: bool) -> Result<()> {
    let work: PathBuf = a.work.clone();
    let root = work.join("models").join("bench");
    let (lake, wal) = (work.join("lake"), work.join("wal"));
    for d in [&root, &lake, &wal] {
        let _ = std::fs::remove_dir_all(d);
    }
    publish(&root, "v0001", a.players, 1)?;
    let server = start_results(a, &root, &lake, &wal)?;
    let rt = tokio::runtime::Runtime::new()?;
    let url = format!("http://{}", server.grpc);
    let report = rt.block_on(async {
        let channel = Channel::from_shared(url.clone())?.connect().await?;
        let client = MatcherClient::new(channel);
        let art = Store::new(&root).open_latest()?;
        let ids: Arc<Vec<String>> = Arc::new(
            (0..art.snapshot.len().min(20_000))
                .map(|i| art.snapshot.id(i).to_string())
                .collect(),
        );
        if ids.len() < 24 {
            bail!(
                "--players {}: the results phase scores 24 players",
                a.players
            );
        }
        let twelve = Arc::new(ids[..12].to_vec());
        let rss_start = server.rss_mib();
        let next = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let as_of = art.manifest.snapshot_as_of_ms + 3_600_000;
        let round = Round {
            client: &client,
            url: &url,
            a,
            server: &server,
            ids: Arc::clone(&ids),
            twelve: Arc::clone(&twelve),
            next,
            as_of_ms: as_of,
            lake: &lake,
        };
        let mut pooled = Pooled::default();
        let mut control = None;
        for _ in 0..a.report_rounds.max(1) {
            let call = score_call(Arc::clone(&twelve));
            let (am, af, _, took) = timed_loop(&client, a.concurrency, a.seconds, call).await?;
            pool(&mut pooled.alone, &am, af, took);
            if control.is_none() {
                let others = Arc::new(ids[12..24].to_vec());
                control = Some(control_phase(&client, &url, a, &twelve, others).await?);
            }
            let sm = reports_round(&round, &mut pooled).await?;
            pooled.by_round.push(p99_of(&sm) / p99_of(&am));
        }
        let (control, control_calls) = control.ok_or_else(|| anyhow::anyhow!("no round ran"))?;
        let keys = lake_keys(&lake).await?;
        let lake_rows =
            lake_rows_when(&lake, pooled.reports.0.len() as u64 * 12, Instant::now()).await?;
        Ok::<ReportsReport, anyhow::Error>(reports_report(
            a,
            pooled,
            (control, control_calls),
            (lake_rows, keys),
            (rss_start, server.rss_mib()),
        ))
    })?;
    drop(server);
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_reports(&report);
    }
    Ok(())
}

/// The results phase's figures from its pooled rounds.
fn reports_report(
    a: &BenchServeArgs,
    p: Pooled,
    (control, control_calls): (Phase, Phase),
    (lake_rows, lake_keys): (u64, u64),
    (rss_mib_start, rss_mib_end): (Option<f64>, Option<f64>),
) -> ReportsReport {
    let c = a.concurrency;
    let alone = phase("Score 12", c, p.alone.0, p.alone.1, p.alone.2);
    let beside = phase("Score 12 + reports", c, p.beside.0, p.beside.1, p.beside.2);
    let name = if a.report_batch > 1 {
        format!("ReportMatches x{} (open)", a.report_batch)
    } else {
        "ReportMatch (open)".to_string()
    };
    let reports = phase(&name, 0, p.reports.0, p.reports.1, p.reports.2);
    let rss = p.rss.unwrap_or_default();
    ReportsReport {
        players: a.players,
        report_batch: a.report_batch,
        rounds: p.by_round.len(),
        player_results_per_second: reports.per_second * 12.0,
        score_p99_ratio: beside.p99_ms / alone.p99_ms,
        score_p99_ratio_by_round: p.by_round,
        score_p99_ratio_control: control.p99_ms / alone.p99_ms,
        score_alone: alone,
        score_beside_score_calls: control,
        score_calls: control_calls,
        score_beside_reports: beside,
        acknowledged: reports.requests - reports.failed,
        reports,
        lake_rows,
        lake_keys,
        drain_seconds: p.drain,
        log_syncs: p.syncs,
        log_mib_max: p.log_max / f64::from(1u32 << 20),
        rss_mib_start,
        rss_mib_half: rss.first().map(|r| r.1),
        rss_mib_per_minute_second_half: slope_per_minute(&rss),
        rss_mib_end,
        server_cpu_seconds: p.cpu,
    }
}

/// `mm bench serve --reports`'s figures, as text.
fn print_reports(report: &ReportsReport) {
    mm_run::outln!(
        "mm serve on loopback with results (a lake and a log on local disk), an artifact of {} players",
        report.players
    );
    print_phases(
        22,
        [
            &report.score_alone,
            &report.score_beside_score_calls,
            &report.score_calls,
            &report.score_beside_reports,
            &report.reports,
        ],
    );
    mm_run::outln!(
        "reports: {:.0} player-results/s acknowledged ({}; p99 {:.2} ms from when each match was due); Score p99 beside them {:.2}x alone",
        report.player_results_per_second,
        if report.report_batch > 1 {
            format!("{} matches a ReportMatches call", report.report_batch)
        } else {
            "a ReportMatch call each".to_string()
        },
        report.reports.p99_ms,
        report.score_p99_ratio
    );
    if report.rounds > 1 {
        let by: Vec<String> = report
            .score_p99_ratio_by_round
            .iter()
            .map(|r| format!("{r:.2}x"))
            .collect();
        mm_run::outln!(
            "rounds: Score alone and beside the reports alternated {} times (the phases above pool them); Score p99 ratio by round {}",
            report.rounds,
            by.join(", ")
        );
    }
    mm_run::outln!(
        "control: Score p99 beside as many Score calls a second as reports {:.2}x alone",
        report.score_p99_ratio_control
    );
    mm_run::outln!(
        "log: {:.0} syncs ({:.2} reports a sync)",
        report.log_syncs,
        report.acknowledged as f64 / report.log_syncs
    );
    mm_run::outln!(
        "lake: {} matches acknowledged, {} rows and {} distinct (match, player) keys {:.1} s after the last (want {}); log at most {:.1} MiB",
        report.acknowledged,
        report.lake_rows,
        report.lake_keys,
        report.drain_seconds,
        report.acknowledged * 12,
        report.log_mib_max
    );
    let cpu = &report.server_cpu_seconds;
    if !cpu.is_empty() {
        let of = |name: &str| cpu.get(name).copied().unwrap_or(0.0);
        // The flush thread and its background thread (`mm-serve-flushbg`, its name cut to 15
        // bytes by the kernel).
        let flush: f64 = cpu
            .iter()
            .filter(|(k, _)| k.starts_with("mm-serve-flush"))
            .map(|(_, v)| v)
            .sum();
        let per_k = 1000.0 / report.acknowledged.max(1) as f64;
        mm_run::outln!(
            "server CPU from the reports' start to the last flush: {:.2} s in all; request threads {:.2} s (Score and the reports alike), flush {:.2} s ({:.0} ms a 1,000 matches), log {:.2} s, lake I/O {:.2} s",
            cpu.values().sum::<f64>(),
            of("tokio-rt-worker"),
            flush,
            flush * per_k * 1000.0,
            of("mm-serve-wal"),
            of("mm-lake-io")
        );
    }
    if let (Some(s), Some(h), Some(e)) = (
        report.rss_mib_start,
        report.rss_mib_half,
        report.rss_mib_end,
    ) {
        mm_run::outln!(
            "server resident memory: {s:.0} MiB before, {h:.0} MiB halfway through the {}reports, {e:.0} MiB at the end; {:+.1} MiB a minute over that phase's second half (least squares)",
            if report.rounds > 1 {
                "first round's "
            } else {
                ""
            },
            report.rss_mib_per_minute_second_half.unwrap_or(f64::NAN)
        );
    }
}

/// The least-squares slope of `(seconds, MiB)` samples, in MiB a minute (`None`: fewer than
/// two samples, or all at one time).
fn slope_per_minute(xy: &[(f64, f64)]) -> Option<f64> {
    let n = xy.len() as f64;
    if xy.len() < 2 {
        return None;
    }
    let (mx, my) = (
        xy.iter().map(|p| p.0).sum::<f64>() / n,
        xy.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx * 60.0)
}

/// Runs `mm bench serve`.
///
/// # Errors
/// The server did not start, or a phase could not run.
pub fn run(a: &BenchServeArgs, json: bool) -> Result<()> {
    if a.reports {
        return run_reports(a, json);
    }
    let work: PathBuf = a.work.clone();
    let root = work.join("models").join("bench");
    let _ = std::fs::remove_dir_all(&root);
    publish(&root, "v0001", a.players, 1)?;
    let budget = 60.0 + a.seconds * 6.0 + a.soak_seconds + a.reloads as f64 * 2.0;
    let server = start(&root, budget)?;
    let rt = tokio::runtime::Runtime::new()?;
    let url = format!("http://{}", server.grpc);
    let report = rt.block_on(async {
        let channel = Channel::from_shared(url.clone())?.connect().await?;
        let mut client = MatcherClient::new(channel);
        let art = Store::new(&root).open_latest()?;
        let ids: Vec<String> = (0..art.snapshot.len().min(20_000))
            .map(|i| art.snapshot.id(i).to_string())
            .collect();
        let rss_start = server.rss_mib();
        let mut phases = Vec::new();
        let twelve = Arc::new(ids[..12].to_vec());
        let (p, _) = timed_phase(
            &client,
            "Score 12",
            a.concurrency,
            a.seconds,
            score_call(Arc::clone(&twelve)),
        )
        .await?;
        phases.push(p);
        phases.extend(pair_phases(&client, &ids, a).await?);
        let queue = queue_phase(&mut client, &ids, a).await?;

        let reload = reload_phase(&mut client, &server, &root, &ids, a).await?;
        let (soak, soak_rss) = soak_phase(&client, &server, &twelve, a).await?;
        Ok::<Report, anyhow::Error>(Report {
            players: a.players,
            phases,
            queue,
            reload,
            soak,
            rss_mib_start: rss_start,
            rss_mib_end: server.rss_mib(),
            soak_rss_mib: soak_rss,
        })
    })?;
    drop(server);
    if json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

/// EOMM pairing of pools of 200 and 1,000 players.
async fn pair_phases(
    client: &MatcherClient<Channel>,
    ids: &[String],
    a: &BenchServeArgs,
) -> Result<Vec<Phase>> {
    let mut phases = Vec::new();
    for &n in &[200usize, 1000] {
        let pool = Arc::new(ids[..n].to_vec());
        let call = move |mut c: MatcherClient<Channel>| -> ScoreFut {
            let req = proto::PairRequest {
                ids: pool.to_vec(),
                policy: proto::PairPolicy::Eomm as i32,
                now_ms: 0,
                seed: 0,
            };
            Box::pin(async move { Ok(c.pair(req).await?.into_inner().model_version) })
        };
        let conc = if n >= 1000 { 2 } else { a.concurrency };
        let (p, _) = timed_phase(client, &format!("Pair {n}"), conc, a.seconds, call).await?;
        phases.push(p);
    }
    Ok(phases)
}

/// Reloads under a Score load: `a.reloads` versions published, then a corrupt version
/// promoted by hand, which the server must refuse while it keeps serving.
async fn reload_phase(
    client: &mut MatcherClient<Channel>,
    server: &Server,
    root: &Path,
    ids: &[String],
    a: &BenchServeArgs,
) -> Result<ReloadPhase> {
    let twelve = Arc::new(ids[..12].to_vec());
    // Reloads under load, then a corrupt version promoted by hand.
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = closed_loop(
        client,
        a.concurrency,
        Arc::clone(&stop),
        score_call(Arc::clone(&twelve)),
    )
    .await;
    let mut published = vec!["v0001".to_string()];
    for k in 0..a.reloads {
        let v = format!("v{:04}", k + 2);
        let (root, v2, players) = (root.to_path_buf(), v.clone(), a.players);
        tokio::task::spawn_blocking(move || publish(&root, &v2, players, 100 + k as u64)).await??;
        published.push(v);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let corrupt = format!("v{:04}", a.reloads + 2);
    {
        let (root, corrupt) = (root.to_path_buf(), corrupt.clone());
        tokio::task::spawn_blocking(move || -> Result<()> {
            let (m, files) = mm_artifact::synthetic::artifact(1000, 999);
            Store::new(&root).publish(&corrupt, m, &files, false, None)?;
            let f = root.join(&corrupt).join("percentiles.json");
            let mut b = std::fs::read(&f)?;
            b[0] ^= 0x20;
            std::fs::write(&f, b)?;
            std::fs::write(root.join("LATEST"), format!("{corrupt}\n"))?;
            Ok(())
        })
        .await??;
    }
    // Under the load until the server has tried the corrupt version (its poll runs on its own
    // clock, later on a busy machine): at least a second, at most 30.
    let refused = "mm_serve_reloads_total{outcome=\"refused\"}";
    let t0 = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let seen = metric(&http_get(&server.metrics)?, refused) >= 1.0;
        if (seen && t0.elapsed() >= Duration::from_secs(1))
            || t0.elapsed() >= Duration::from_secs(30)
        {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (ms, failed, versions) = gather(tasks).await?;
    let after = client
        .score(proto::ScoreRequest {
            players: vec![proto::Player {
                id: ids[0].clone(),
                state: None,
            }],
            teams: vec![],
            now_ms: 0,
        })
        .await?
        .into_inner()
        .model_version;
    let metrics = http_get(&server.metrics)?;
    if let Some(v) = versions.iter().find(|v| !published.contains(v)) {
        bail!("a response came from {v}, which was never published");
    }
    Ok(ReloadPhase {
        published: a.reloads,
        requests: ms.len() as u64 + failed,
        failed,
        versions_seen: versions.into_iter().collect(),
        served_after_corrupt: after,
        refusals_in_metrics: metric(&metrics, refused),
    })
}

/// The soak: the Score load in ten slices, the server's resident memory before and after
/// each (none without `--soak-seconds`).
async fn soak_phase(
    client: &MatcherClient<Channel>,
    server: &Server,
    twelve: &Arc<Vec<String>>,
    a: &BenchServeArgs,
) -> Result<(Option<Phase>, Vec<f64>)> {
    let mut soak_rss = vec![server.rss_mib().unwrap_or(f64::NAN)];
    let soak = if a.soak_seconds > 0.0 {
        let (mut ms, mut failed, t0) = (Vec::new(), 0u64, Instant::now());
        for _ in 0..10 {
            let call = score_call(Arc::clone(twelve));
            let tenth = a.soak_seconds / 10.0;
            let (m, f, _, _) = timed_loop(client, a.concurrency, tenth, call).await?;
            ms.extend(m);
            failed += f;
            soak_rss.push(server.rss_mib().unwrap_or(f64::NAN));
        }
        Some(phase(
            "soak: Score 12",
            a.concurrency,
            ms,
            failed,
            t0.elapsed().as_secs_f64(),
        ))
    } else {
        None
    };
    Ok((soak, soak_rss))
}

/// `mm bench serve`'s figures, as text.
fn print_report(report: &Report) {
    mm_run::outln!(
        "mm serve on loopback, an artifact of {} players; closed loops (offered load = concurrency)",
        report.players
    );
    print_phases(16, report.phases.iter().chain(&report.soak));
    let q = &report.queue;
    mm_run::outln!(
        "queue: {} 6v6 searches, {} arrivals/s, {} ticks: tick p50 {:.1} ms, p99 {:.1} ms, {:.1} lobbies/tick, {} queued at the end; enqueue p50 {:.3} ms, p99 {:.3} ms",
        q.searches_at_start,
        q.arrivals_per_second,
        q.ticks,
        q.tick_p50_ms,
        q.tick_p99_ms,
        q.lobbies_per_tick,
        q.queued_at_end,
        q.enqueue_p50_ms,
        q.enqueue_p99_ms
    );
    let r = &report.reload;
    mm_run::outln!(
        "reloads: {} versions published under load: {} requests, {} failed, versions seen {:?}; after a corrupt version promoted by hand: serving {}, refusals in the metrics {}",
        r.published,
        r.requests,
        r.failed,
        r.versions_seen,
        r.served_after_corrupt,
        r.refusals_in_metrics
    );
    if let (Some(s), Some(e)) = (report.rss_mib_start, report.rss_mib_end) {
        mm_run::outln!(
            "server resident memory: {s:.0} MiB before the phases, {e:.0} MiB at the end"
        );
    }
    if report.soak.is_some() {
        let series: Vec<String> = report
            .soak_rss_mib
            .iter()
            .map(|m| format!("{m:.0}"))
            .collect();
        mm_run::outln!(
            "soak: resident memory (MiB) at its start and after each tenth: {}",
            series.join(", ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{cpu_between, slope_per_minute};

    /// Three MiB a minute, by hand; noise around a flat line gives a slope near 0.
    #[test]
    fn slope_by_hand() {
        let s = slope_per_minute(&[(0.0, 10.0), (60.0, 13.0), (120.0, 16.0)]).unwrap();
        assert!((s - 3.0).abs() < 1e-12, "{s}");
        let flat = slope_per_minute(&[(0.0, 10.0), (30.0, 11.0), (60.0, 9.0), (90.0, 10.0)]);
        assert!((flat.unwrap() - (-0.4)).abs() < 1e-12, "{flat:?}");
        assert_eq!(slope_per_minute(&[(1.0, 2.0)]), None);
        assert_eq!(slope_per_minute(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }

    /// A thread name gone between the readings counts 0, not less.
    #[test]
    fn cpu_between_two_readings() {
        let before = [("a".to_string(), 2.0), ("b".to_string(), 1.0)].into();
        let after = [("a".to_string(), 3.5), ("b".to_string(), 0.5)].into();
        let d = cpu_between(&before, &after);
        assert_eq!((d["a"], d["b"]), (1.5, 0.0));
    }
}
