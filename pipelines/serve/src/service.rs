//! The `Matcher` service: each request scores with the artifact that was current when it
//! started, and says which version that was.

use std::sync::Arc;

use mm_artifact::features::Played;
use mm_artifact::snapshot::PlayerState;
use mm_artifact::store::Reloader;
use mm_artifact::team::TeamSample;
use mm_artifact::{Artifact, Outcome};
use mm_matcher::from_artifact::{PairPoolError, pair_pool_with};
use mm_matcher::pairing::PairPolicy;
use mm_matcher::queue::Member;
use tonic::{Request, Response, Status};

use crate::auth::{Access, Auth};
use crate::live::Live;
use crate::metrics::Metrics;
use crate::proto;
use crate::queues::{Known, Queues, first_twice};
use crate::{MAX_PAIR_POOL, MAX_REPORT_BATCH, MAX_SCORE_PLAYERS};

/// A Score of at most this many players (a lobby's worth) runs on the request's own thread
/// ([`MatcherService::inline`]): its work is shorter than a hand-over to the blocking pool. A
/// larger one takes a turn on the CPU in the pool.
pub const INLINE_SCORE_PLAYERS: usize = 64;

/// The service over one model's hot-reloaded artifact.
#[derive(Debug, Clone)]
pub struct MatcherService {
    reloader: Arc<Reloader>,
    metrics: Metrics,
    queues: Arc<Queues>,
    /// The players kept current by reported matches (`None`: the snapshot's, as exported).
    live: Option<Arc<Live>>,
    auth: Auth,
    /// Requests whose CPU-bound work may run at once: one per core. The others wait their turn
    /// here rather than as threads on the cores, where they would delay everything else the
    /// service does (acknowledging reports above all) by the length of the run queue. (A
    /// lobby-sized Score runs inline: [`INLINE_SCORE_PLAYERS`].)
    cpu: Arc<tokio::sync::Semaphore>,
}

impl MatcherService {
    #[must_use]
    pub fn new(reloader: Arc<Reloader>, metrics: Metrics) -> MatcherService {
        MatcherService {
            reloader,
            metrics,
            queues: Arc::new(Queues::default()),
            live: None,
            auth: Auth::default(),
            cpu: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZero::get),
            )),
        }
    }

    /// The service with live players and a credential.
    #[must_use]
    pub fn with_results(mut self, live: Option<Arc<Live>>, auth: Auth) -> MatcherService {
        self.live = live;
        self.auth = auth;
        self
    }

    /// The artifact to answer with: the one the live players are built on, else the reloader's.
    fn art(&self) -> Arc<Artifact> {
        self.live
            .as_ref()
            .map_or_else(|| self.reloader.current(), |l| l.art())
    }

    /// Refuses a call without the credential it needs (counted as the method's
    /// `Unauthenticated`).
    fn allow<T>(&self, method: &str, r: &Request<T>, access: Access) -> Result<(), Status> {
        // The handshake verified the chain against the service's CA before any call came.
        let verified = r.peer_certs().is_some_and(|c| !c.is_empty());
        self.auth
            .check(r.metadata(), access, verified)
            .inspect_err(|e| {
                self.metrics
                    .request(method, e.code(), std::time::Duration::ZERO);
                if method == "ReportMatch" || method == "ReportMatches" {
                    self.metrics.report("unauthenticated", "");
                }
            })
    }
}

/// The live state of a player, for a service without live players: none.
fn no_state(_: &str) -> Option<PlayerState> {
    None
}

/// The request's search time, or the snapshot's when it gives none.
fn now_of(art: &Artifact, now_ms: i64) -> i64 {
    if now_ms > 0 {
        now_ms
    } else {
        art.manifest.snapshot_as_of_ms
    }
}

/// The state a request gives for player `k`, checked: raw skill in [-1, 1], four window counts
/// or none, at most the model's history of recent matches, in time order, with ranks in [0, 1].
fn state_of(
    art: &Artifact,
    k: usize,
    id: &str,
    s: &proto::PlayerState,
) -> Result<PlayerState, Status> {
    let bad = |what: String| Status::invalid_argument(format!("player {k} ({id}): {what}"));
    if !(s.raw_skill.is_finite() && (-1.0..=1.0).contains(&s.raw_skill)) {
        return Err(bad(format!("raw_skill {} is not in [-1, 1]", s.raw_skill)));
    }
    let win_skill = match s.win_skill {
        Some(w) if !w.is_finite() => return Err(bad(format!("win_skill {w} is not finite"))),
        Some(w) => w,
        None => art.snapshot.get(id).map_or(0.0, |p| p.win_skill),
    };
    let window_counts = match s.window_counts.as_slice() {
        [] => [0; 4],
        &[a, b, c, d] => [a, b, c, d],
        other => {
            return Err(bad(format!(
                "{} window counts: give 4 or none",
                other.len()
            )));
        }
    };
    if s.churned_gaps > s.games.saturating_sub(1) {
        return Err(bad(format!(
            "churned_gaps {} is more than the gaps between {} games",
            s.churned_gaps, s.games
        )));
    }
    let history = art.churn.model.spec.history;
    if s.recent.len() > history {
        return Err(bad(format!(
            "{} recent matches: the model keeps {history}",
            s.recent.len()
        )));
    }
    let mut recent = Vec::with_capacity(s.recent.len());
    for (j, m) in s.recent.iter().enumerate() {
        if !(m.perf_rank.is_nan() || (0.0..=1.0).contains(&m.perf_rank)) {
            return Err(bad(format!(
                "recent[{j}].perf_rank {} is not in [0, 1]",
                m.perf_rank
            )));
        }
        if m.score_diff.is_infinite() {
            return Err(bad(format!("recent[{j}].score_diff is infinite")));
        }
        if recent
            .last()
            .is_some_and(|p: &Played| p.start_ms > m.start_ms)
        {
            return Err(bad("recent matches are not oldest first".into()));
        }
        let outcome = match proto::Outcome::try_from(m.outcome) {
            Ok(proto::Outcome::Win) => Outcome::Win,
            Ok(proto::Outcome::Draw) => Outcome::Draw,
            Ok(proto::Outcome::Loss) => Outcome::Loss,
            Err(_) => return Err(bad(format!("recent[{j}].outcome {} is unknown", m.outcome))),
        };
        recent.push(Played {
            start_ms: m.start_ms,
            outcome,
            score_diff: m.score_diff,
            perf_rank: m.perf_rank,
            blowout_loss: m.blowout_loss,
        });
    }
    Ok(PlayerState {
        player_id: id.to_string(),
        raw_skill: s.raw_skill,
        win_skill,
        // Only the update after a match reads the mass, and a given state is only scored.
        win_mass: 0.0,
        percentile: art.percentiles.percentile(s.raw_skill),
        games: s.games,
        last_seen_ms: s.last_seen_ms,
        first_seen_ms: s.first_seen_ms,
        counts_as_of_ms: s.counts_as_of_ms,
        window_counts,
        recent,
        before_recent_ms: s.before_recent_ms,
        churned_gaps: s.churned_gaps,
    })
}

fn check_id(k: usize, id: &str) -> Result<(), Status> {
    if id.is_empty() {
        return Err(Status::invalid_argument(format!(
            "player {k}: the id is empty"
        )));
    }
    Ok(())
}

/// Refuses a request that names a player twice (`what` says where).
fn once_each(ids: &[String], what: &str) -> Result<(), Status> {
    match first_twice(ids) {
        Some(id) => Err(Status::invalid_argument(format!(
            "player {id} is twice in the {what}"
        ))),
        None => Ok(()),
    }
}

/// Scores a request with one artifact and the players' live states (no I/O; run off the async
/// threads).
fn score(
    art: &Artifact,
    req: &proto::ScoreRequest,
    known: Known<'_>,
) -> Result<proto::ScoreResponse, Status> {
    let n = req.players.len();
    if n == 0 {
        return Err(Status::invalid_argument("no players to score"));
    }
    if n > MAX_SCORE_PLAYERS {
        return Err(Status::invalid_argument(format!(
            "{n} players: at most {MAX_SCORE_PLAYERS} in one request"
        )));
    }
    if !req.teams.is_empty() && req.teams.len() != n {
        return Err(Status::invalid_argument(format!(
            "{} teams for {n} players: give one team (0 or 1) per player, or none",
            req.teams.len()
        )));
    }
    let ids: Vec<String> = req.players.iter().map(|p| p.id.clone()).collect();
    once_each(
        &ids,
        if req.teams.is_empty() {
            "request"
        } else {
            "lobby"
        },
    )?;
    let now = now_of(art, req.now_ms);
    let mut players = Vec::with_capacity(n);
    let mut sums = [0.0f64; 2];
    for (k, p) in req.players.iter().enumerate() {
        check_id(k, &p.id)?;
        // The live state, read once: it scores the player and says whether we know them.
        let live = known(&p.id);
        let is_known = live.is_some() || art.snapshot.position(&p.id).is_some();
        let m = match (&p.state, live) {
            (Some(s), _) => Member::from_state(art, &state_of(art, k, &p.id, s)?, now, false),
            (None, Some(s)) => Member::from_state(art, &s, now, false),
            (None, None) => Member::lookup(art, &p.id, now, false),
        };
        if let Some(&t) = req.teams.get(k) {
            let t = usize::try_from(t).ok().filter(|&t| t < 2).ok_or_else(|| {
                Status::invalid_argument(format!("player {k}: team {t} is not 0 or 1"))
            })?;
            sums[t] += m.outcome_skill;
        }
        players.push(crate::report::player_score(&p.id, is_known, &m));
    }
    let lobby = if req.teams.is_empty() {
        None
    } else {
        let win = art.team_win.ok_or_else(|| {
            Status::failed_precondition(
                "the artifact has no team win model (too few matches when it was fitted)",
            )
        })?;
        let (w, d, l) = win.probs(&TeamSample {
            skill_diff: sums[0] - sums[1],
            ..TeamSample::default()
        });
        Some(proto::OutcomeProbs {
            win: w,
            draw: d,
            loss: l,
        })
    };
    Ok(proto::ScoreResponse {
        model_version: art.manifest.model_version.clone(),
        players,
        lobby,
    })
}

fn policy_of(p: proto::PairPolicy, seed: u64) -> PairPolicy {
    match p {
        proto::PairPolicy::Eomm => PairPolicy::Eomm,
        proto::PairPolicy::Skill => PairPolicy::Skill,
        proto::PairPolicy::Random => PairPolicy::Random { seed },
        proto::PairPolicy::Worst => PairPolicy::Worst,
        proto::PairPolicy::Greedy => PairPolicy::Greedy,
    }
}

/// Pairs a request's pool with one artifact and the players' live states (no I/O; run off the
/// async threads).
fn pair(
    art: &Artifact,
    req: &proto::PairRequest,
    known: Known<'_>,
) -> Result<proto::PairResponse, Status> {
    let n = req.ids.len();
    if n < 2 {
        return Err(Status::invalid_argument(format!(
            "a pool of {n}: pairing needs at least 2 players"
        )));
    }
    if n > MAX_PAIR_POOL {
        return Err(Status::invalid_argument(format!(
            "a pool of {n}: at most {MAX_PAIR_POOL} players in one request"
        )));
    }
    for (k, id) in req.ids.iter().enumerate() {
        check_id(k, id)?;
    }
    once_each(&req.ids, "pool")?;
    let states: Vec<Option<PlayerState>> = req.ids.iter().map(|id| known(id)).collect();
    let policy = proto::PairPolicy::try_from(req.policy)
        .map_err(|_| Status::invalid_argument(format!("unknown policy {}", req.policy)))?;
    let now = now_of(art, req.now_ms);
    let paired =
        pair_pool_with(art, &req.ids, &states, now, policy_of(policy, req.seed)).map_err(|e| {
            match e {
                PairPoolError::Scoring(e) => Status::failed_precondition(e.to_string()),
                PairPoolError::Pairing(e) => Status::internal(e.to_string()),
            }
        })?;
    let id = |i: usize| req.ids[i].clone();
    Ok(proto::PairResponse {
        model_version: art.manifest.model_version.clone(),
        pairs: paired
            .pairing
            .pairs
            .iter()
            .map(|&(a, b)| proto::Pair { a: id(a), b: id(b) })
            .collect(),
        waiting: paired.pairing.waiting.map(id).unwrap_or_default(),
        objective: paired.pairing.objective,
        unknown: paired.unknown.iter().map(|&i| id(i)).collect(),
    })
}

impl MatcherService {
    /// Runs `f` on the blocking pool (the matcher's work is CPU-bound), at most one request a
    /// core at a time, and records the request's status and latency (its wait included) as
    /// `method`.
    async fn timed<R: Send + 'static>(
        &self,
        method: &str,
        f: impl FnOnce() -> Result<R, Status> + Send + 'static,
    ) -> Result<Response<R>, Status> {
        let t0 = std::time::Instant::now();
        let _turn = Arc::clone(&self.cpu)
            .acquire_owned()
            .await
            .map_err(|e| Status::internal(e.to_string()))?;
        let out = tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| Status::internal(format!("the request stopped: {e}")))
            .and_then(|r| r);
        self.answered(method, t0, out)
    }

    /// Runs `f` on the request's own thread, for work shorter than a turn on the CPU and a
    /// hand-over to the blocking pool ([`Self::timed`]), and records it as `timed` does.
    fn inline<R>(
        &self,
        method: &str,
        f: impl FnOnce() -> Result<R, Status>,
    ) -> Result<Response<R>, Status> {
        let t0 = std::time::Instant::now();
        let out = f();
        self.answered(method, t0, out)
    }

    /// Records a request's status and its latency since `t0` as `method`; the answer.
    fn answered<R>(
        &self,
        method: &str,
        t0: std::time::Instant,
        out: Result<R, Status>,
    ) -> Result<Response<R>, Status> {
        let code = out.as_ref().map_or_else(Status::code, |_| tonic::Code::Ok);
        self.metrics.request(method, code, t0.elapsed());
        out.map(Response::new)
    }

    /// Sets the queue's gauge from the size its response reports (no second look at the queues).
    fn queue_size<R>(&self, queue: &str, r: &Result<Response<R>, Status>, size: fn(&R) -> u64) {
        if let Ok(r) = r {
            self.metrics.queue_size(
                queue,
                usize::try_from(size(r.get_ref())).unwrap_or(usize::MAX),
            );
        }
    }
}

#[tonic::async_trait]
impl proto::matcher_server::Matcher for MatcherService {
    async fn score(
        &self,
        request: Request<proto::ScoreRequest>,
    ) -> Result<Response<proto::ScoreResponse>, Status> {
        self.allow("Score", &request, Access::Read)?;
        let req = request.into_inner();
        if req.players.len() <= INLINE_SCORE_PLAYERS {
            // The artifact and the players' states as of one moment, read at once.
            let f = || match &self.live {
                Some(l) => {
                    let (art, states) = l.art_and_states(req.players.iter().map(|p| &*p.id));
                    let states = std::cell::RefCell::new(states);
                    score(&art, &req, &|id| states.borrow_mut().remove(id))
                }
                None => score(&self.art(), &req, &no_state),
            };
            return self.inline("Score", f);
        }
        // The artifact current now: the whole request uses it.
        let (art, live) = (self.art(), self.live.clone());
        self.timed("Score", move || match &live {
            Some(l) => score(&art, &req, &|id| l.state(id)),
            None => score(&art, &req, &no_state),
        })
        .await
    }

    async fn pair(
        &self,
        request: Request<proto::PairRequest>,
    ) -> Result<Response<proto::PairResponse>, Status> {
        self.allow("Pair", &request, Access::Read)?;
        let (art, req, live) = (self.art(), request.into_inner(), self.live.clone());
        self.timed("Pair", move || match &live {
            Some(l) => pair(&art, &req, &|id| l.state(id)),
            None => pair(&art, &req, &no_state),
        })
        .await
    }

    async fn enqueue(
        &self,
        request: Request<proto::EnqueueRequest>,
    ) -> Result<Response<proto::EnqueueResponse>, Status> {
        self.allow("Enqueue", &request, Access::Write)?;
        let (art, req, live) = (self.art(), request.into_inner(), self.live.clone());
        let name = req
            .queue
            .as_ref()
            .map(|q| q.name.clone())
            .unwrap_or_default();
        let queues = Arc::clone(&self.queues);
        let r = self
            .timed("Enqueue", move || match &live {
                Some(l) => queues.enqueue(&art, &req, &|id| l.state(id)),
                None => queues.enqueue(&art, &req, &no_state),
            })
            .await;
        self.queue_size(&name, &r, |x| x.queued_searches);
        r
    }

    async fn cancel(
        &self,
        request: Request<proto::CancelRequest>,
    ) -> Result<Response<proto::CancelResponse>, Status> {
        self.allow("Cancel", &request, Access::Write)?;
        let (queues, req) = (Arc::clone(&self.queues), request.into_inner());
        let name = req.queue.clone();
        let r = self.timed("Cancel", move || queues.cancel(&req)).await;
        self.queue_size(&name, &r, |x| x.queued_searches);
        r
    }

    async fn tick(
        &self,
        request: Request<proto::TickRequest>,
    ) -> Result<Response<proto::TickResponse>, Status> {
        self.allow("Tick", &request, Access::Write)?;
        let version = self.art().manifest.model_version.clone();
        let (queues, req) = (Arc::clone(&self.queues), request.into_inner());
        let name = req.queue.clone();
        let r = self
            .timed("Tick", move || queues.tick(&version, &req))
            .await;
        self.queue_size(&name, &r, |x| x.queued_searches);
        if let Ok(t) = &r {
            let t = t.get_ref();
            let waited: Vec<i64> = t.backfills.iter().map(|b| b.slot_open_ms).collect();
            self.metrics.backfilled(&name, &waited, t.open_slots);
        }
        r
    }

    async fn open_backfill(
        &self,
        request: Request<proto::OpenBackfillRequest>,
    ) -> Result<Response<proto::OpenBackfillResponse>, Status> {
        self.allow("OpenBackfill", &request, Access::Write)?;
        let (art, req, live) = (self.art(), request.into_inner(), self.live.clone());
        let queues = Arc::clone(&self.queues);
        self.timed("OpenBackfill", move || match &live {
            Some(l) => queues.open_backfill(&art, &req, &|id| l.state(id)),
            None => queues.open_backfill(&art, &req, &no_state),
        })
        .await
    }

    async fn close_backfill(
        &self,
        request: Request<proto::CloseBackfillRequest>,
    ) -> Result<Response<proto::CloseBackfillResponse>, Status> {
        self.allow("CloseBackfill", &request, Access::Write)?;
        let (queues, req) = (Arc::clone(&self.queues), request.into_inner());
        self.timed("CloseBackfill", move || queues.close_backfill(&req))
            .await
    }

    async fn explain(
        &self,
        request: Request<proto::ExplainRequest>,
    ) -> Result<Response<proto::ExplainResponse>, Status> {
        self.allow("Explain", &request, Access::Read)?;
        let (queues, req) = (Arc::clone(&self.queues), request.into_inner());
        self.timed("Explain", move || queues.explain(&req)).await
    }

    async fn report_match(
        &self,
        request: Request<proto::ReportMatchRequest>,
    ) -> Result<Response<proto::ReportMatchResponse>, Status> {
        self.allow("ReportMatch", &request, Access::Write)?;
        let t0 = std::time::Instant::now();
        let out = match &self.live {
            Some(l) => l.report_detached(request.into_inner()).await,
            None => Err(Status::failed_precondition(
                "this service records no results: start it with --lake",
            )),
        };
        self.answered("ReportMatch", t0, out)
    }

    async fn report_matches(
        &self,
        request: Request<proto::ReportMatchesRequest>,
    ) -> Result<Response<proto::ReportMatchesResponse>, Status> {
        self.allow("ReportMatches", &request, Access::Write)?;
        let t0 = std::time::Instant::now();
        let out = match &self.live {
            Some(l) => report_batch(l, request.into_inner().matches).await,
            None => Err(Status::failed_precondition(
                "this service records no results: start it with --lake",
            )),
        };
        self.answered("ReportMatches", t0, out)
    }
}

/// Records the matches of one `ReportMatches` call at once, each as `ReportMatch` records one
/// (so that the log syncs them in one group), gives them log numbers and moves their players
/// in the request's order (as the same matches sent one call after another would), and answers
/// each in that order. A match id given twice in one call is recorded at its first place and
/// answered as a duplicate at the later ones (reported once the first is done).
async fn report_batch(
    live: &Arc<Live>,
    matches: Vec<proto::ReportMatchRequest>,
) -> Result<proto::ReportMatchesResponse, Status> {
    if matches.len() > MAX_REPORT_BATCH {
        return Err(Status::invalid_argument(format!(
            "matches: {} matches in one call; at most {MAX_REPORT_BATCH}",
            matches.len()
        )));
    }
    let mut first = std::collections::HashSet::new();
    // Each match recorded takes its log number and moves its players after the one before it
    // (a repeated id, answered later, takes no turn).
    let mut previous = None;
    let tasks: Vec<Result<_, proto::ReportMatchRequest>> = matches
        .into_iter()
        .map(|req| {
            if first.insert(req.match_id.clone()) {
                let turn = crate::live::Turn::after(&mut previous);
                Ok(live.report_in_turn(req, turn))
            } else {
                Err(req)
            }
        })
        .collect();
    let mut results = Vec::with_capacity(tasks.len());
    for t in tasks {
        let r = match t {
            Ok(started) => started.await,
            Err(later) => live.report_detached(later).await,
        };
        results.push(match r {
            Ok(response) => proto::ReportMatchResult {
                response: Some(response),
                error_code: 0,
                error: String::new(),
            },
            Err(s) => proto::ReportMatchResult {
                response: None,
                error_code: s.code() as i32,
                error: s.message().to_string(),
            },
        });
    }
    Ok(proto::ReportMatchesResponse { results })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use mm_matcher::from_artifact::pair_pool;

    use super::*;

    fn artifact(test: &str) -> (Artifact, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("mm-serve-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (m, files) = mm_artifact::synthetic::artifact(60, 4);
        mm_artifact::Store::new(&dir)
            .publish("v1", m, &files, true, None)
            .unwrap();
        (mm_artifact::Store::new(&dir).open_latest().unwrap(), dir)
    }

    /// A 3v3 report of `ids` (team 0 the first three, winning), started at `start_ms`.
    fn report_of(
        art: &Artifact,
        id: &str,
        ids: &[String],
        start_ms: i64,
    ) -> proto::ReportMatchRequest {
        let players = ids
            .iter()
            .enumerate()
            .map(|(j, p)| proto::PlayerResult {
                player_id: p.clone(),
                team: i32::from(j >= 3),
                team_score: Some(if j < 3 { 30.0 } else { 10.0 }),
                kills: Some(2 + j as i32),
                deaths: Some(5),
                deaths_by_enemy: Some(4),
                seconds_played: Some(600.0),
                ..Default::default()
            })
            .collect();
        proto::ReportMatchRequest {
            match_id: id.into(),
            mode: art.manifest.mode.clone().unwrap(),
            start_ms,
            end_ms: Some(start_ms + 600_000),
            players,
            omit_players: false,
        }
    }

    /// A service on `art` with a lake and a log of its own under `dir`, whose lake holds one
    /// match at `latest_ms`; matches that started an hour before that are asked of the lake.
    async fn live_with_one_match(
        art: &Arc<Artifact>,
        dir: &std::path::Path,
        latest_ms: i64,
    ) -> Arc<Live> {
        let cfg = crate::live::ResultsConfig {
            lake: dir.join("lake").to_str().unwrap().to_string(),
            wal: dir.join("wal"),
            replica: "r".into(),
            flush_ms: 3_600_000,
            flush_matches: 1_000_000,
            follow_ms: 3_600_000,
            dedupe_ms: 3_600_000,
            segment_bytes: 1 << 20,
            group_wait: std::time::Duration::from_micros(500),
        };
        let live = Arc::new(Live::start(Arc::clone(art), cfg, Metrics::new()).unwrap());
        let ids: Vec<String> = (40..46).map(|i| art.snapshot.id(i).to_string()).collect();
        let first = live.report_detached(report_of(art, "m-latest", &ids, latest_ms));
        assert_eq!(
            first.await.unwrap().status,
            proto::ReportStatus::Recorded as i32
        );
        let flusher = Arc::clone(&live);
        let version = tokio::task::spawn_blocking(move || flusher.flush())
            .await
            .unwrap();
        assert!(version.unwrap().is_some());
        live
    }

    /// A `ReportMatches` batch whose first match is older than the recent ids kept in memory
    /// (so its duplicate check reads the lake, the slow way, while the others need not): the
    /// batch still takes its log numbers and moves its players in the request's order, so every
    /// player ends as the same reports sent one call after another leave them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_is_logged_and_applied_in_request_order() {
        let (art, dir) = artifact("batch-order");
        let art = Arc::new(art);
        let latest = 1_704_067_200_000 + 10 * 86_400_000;
        // Every match shares players with the one before it.
        let ids = |k: usize| -> Vec<String> {
            (0..6)
                .map(|j| art.snapshot.id((3 * k + j) % 30).to_string())
                .collect()
        };
        let mut batch: Vec<proto::ReportMatchRequest> = (0..12)
            .map(|k| {
                let start = if k == 0 {
                    latest - 7_200_000
                } else {
                    latest - 600_000 + k as i64
                };
                report_of(&art, &format!("b{k:02}"), &ids(k), start)
            })
            .collect();
        // A match given twice: a duplicate at its second place, which holds up no turn.
        batch.insert(6, batch[2].clone());
        let (batched, one_by_one) = (dir.join("batched"), dir.join("one-by-one"));
        let a = live_with_one_match(&art, &batched, latest).await;
        let answers = report_batch(&a, batch.clone()).await.unwrap();
        let seqs: Vec<(i32, u64)> = answers
            .results
            .iter()
            .map(|r| {
                let r = r.response.as_ref().expect("every match is answered");
                (r.status, r.sequence)
            })
            .collect();
        let b = live_with_one_match(&art, &one_by_one, latest).await;
        let mut one_seqs = Vec::new();
        for req in batch {
            let r = b.report_detached(req).await.unwrap();
            one_seqs.push((r.status, r.sequence));
        }
        assert_eq!(seqs, one_seqs, "log numbers in the request's order");
        let recorded = proto::ReportStatus::Recorded as i32;
        assert_eq!(seqs[6], (proto::ReportStatus::Duplicate as i32, 0));
        let logged: Vec<u64> = seqs
            .iter()
            .filter(|s| s.0 == recorded)
            .map(|s| s.1)
            .collect();
        assert_eq!(logged.len(), 12);
        assert!(logged.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        for i in 0..30 {
            let id = art.snapshot.id(i);
            let (x, y) = (a.state(id), b.state(id));
            assert!(x.is_some(), "{id} was moved");
            // Compared as printed: a state holds NaN (a draw's score difference), and `{:?}`
            // prints every float exactly.
            assert_eq!(format!("{x:?}"), format!("{y:?}"), "{id}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn score_matches_the_library_and_refuses_bad_requests() {
        let (art, dir) = artifact("score");
        let ids = [art.snapshot.id(0).to_string(), "newcomer".to_string()];
        let req = proto::ScoreRequest::of_ids(&ids, true);
        let r = score(&art, &req, &no_state).unwrap();
        assert_eq!(r.model_version, art.manifest.model_version);
        let now = art.manifest.snapshot_as_of_ms;
        for (p, id) in r.players.iter().zip(&ids) {
            let m = Member::lookup(&art, id, now, false);
            assert_eq!(
                (p.raw_skill, p.percentile, p.games),
                (m.raw_skill, m.percentile, m.games)
            );
            assert_eq!(
                [p.churn_after_win, p.churn_after_draw, p.churn_after_loss],
                m.churn
            );
        }
        assert!(r.players[0].known && !r.players[1].known);
        // The snapshot's own state of player 0, sent as a request's state: the same scores.
        let st = art.snapshot.get(&ids[0]).unwrap();
        let given = proto::PlayerState {
            raw_skill: st.raw_skill,
            games: st.games,
            last_seen_ms: st.last_seen_ms,
            first_seen_ms: st.first_seen_ms,
            counts_as_of_ms: st.counts_as_of_ms,
            window_counts: st.window_counts.to_vec(),
            recent: st
                .recent
                .iter()
                .map(|m| proto::PlayedMatch {
                    start_ms: m.start_ms,
                    outcome: match m.outcome {
                        Outcome::Win => proto::Outcome::Win,
                        Outcome::Draw => proto::Outcome::Draw,
                        Outcome::Loss => proto::Outcome::Loss,
                    } as i32,
                    score_diff: m.score_diff,
                    perf_rank: m.perf_rank,
                    blowout_loss: m.blowout_loss,
                })
                .collect(),
            before_recent_ms: st.before_recent_ms,
            churned_gaps: st.churned_gaps,
            win_skill: Some(st.win_skill),
        };
        let with_state = proto::ScoreRequest {
            players: vec![proto::Player {
                id: "someone-else".into(),
                state: Some(given.clone()),
            }],
            teams: vec![],
            now_ms: 0,
        };
        let p = &score(&art, &with_state, &no_state).unwrap().players[0];
        // The state is used as given, its percentile from the artifact's table.
        let expect = Member::from_state(
            &art,
            &PlayerState {
                player_id: "someone-else".into(),
                percentile: art.percentiles.percentile(st.raw_skill),
                ..st.clone()
            },
            now,
            false,
        );
        assert_eq!(
            [p.churn_after_win, p.churn_after_draw, p.churn_after_loss],
            expect.churn
        );
        assert_eq!((p.raw_skill, p.games), (st.raw_skill, st.games));
        assert!(!p.known);
        // More churned gaps than gaps between the games played: refused, with the field named.
        let mut gaps = given.clone();
        gaps.churned_gaps = gaps.games;
        let e = score(
            &art,
            &proto::ScoreRequest {
                players: vec![proto::Player {
                    id: "x".into(),
                    state: Some(gaps),
                }],
                teams: vec![],
                now_ms: 0,
            },
            &no_state,
        )
        .unwrap_err();
        assert!(e.message().contains("churned_gaps"), "{e:?}");
        let mut wrong = given;
        wrong.raw_skill = 1.5;
        let refused = proto::ScoreRequest {
            players: vec![proto::Player {
                id: "x".into(),
                state: Some(wrong),
            }],
            teams: vec![],
            now_ms: 0,
        };
        assert_eq!(
            score(&art, &refused, &no_state).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let lobby = r.lobby.unwrap();
        assert!((lobby.win + lobby.draw + lobby.loss - 1.0).abs() < 1e-12);
        let code = |q: proto::ScoreRequest| score(&art, &q, &no_state).unwrap_err().code();
        let bad_team = proto::ScoreRequest {
            teams: vec![0, 2],
            ..req.clone()
        };
        assert_eq!(code(bad_team), tonic::Code::InvalidArgument);
        let short = proto::ScoreRequest {
            teams: vec![0],
            ..req.clone()
        };
        assert_eq!(code(short), tonic::Code::InvalidArgument);
        let empty_id = proto::ScoreRequest {
            players: vec![proto::Player {
                id: String::new(),
                state: None,
            }],
            teams: vec![],
            now_ms: 0,
        };
        assert_eq!(code(empty_id), tonic::Code::InvalidArgument);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A lobby-sized Score runs inline, a larger one through the blocking pool: both answer
    /// each player as the library scores it, and both are counted in the metrics.
    #[tokio::test]
    async fn inline_and_pooled_scores_answer_alike() {
        use proto::matcher_server::Matcher;
        let (art, dir) = artifact("inline");
        let store = mm_artifact::Store::new(&dir);
        let metrics = Metrics::new();
        let svc = MatcherService::new(
            Arc::new(mm_artifact::store::Reloader::start(store).unwrap()),
            metrics.clone(),
        );
        let ids: Vec<String> = (0..INLINE_SCORE_PLAYERS + 6)
            .map(|i| format!("p{i}"))
            .chain((0..12).map(|i| art.snapshot.id(i).to_string()))
            .collect();
        let few = &ids[ids.len() - 12..];
        assert!(few.len() <= INLINE_SCORE_PLAYERS && ids.len() > INLINE_SCORE_PLAYERS);
        let ask = |ids: &[String]| {
            let svc = svc.clone();
            let req = proto::ScoreRequest::of_ids(ids, true);
            async move { svc.score(Request::new(req)).await.unwrap().into_inner() }
        };
        let (inline, pooled) = (ask(few).await, ask(&ids).await);
        let want = score(&art, &proto::ScoreRequest::of_ids(few, true), &no_state).unwrap();
        assert_eq!(inline.players, want.players);
        assert_eq!(pooled.players[ids.len() - 12..], want.players[..]);
        assert!(inline.players.iter().all(|p| p.known));
        let text = metrics.text();
        assert!(
            text.contains("mm_serve_requests_total{method=\"Score\",code=\"Ok\"} 2"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn pair_matches_the_facade_and_refuses_a_pool_of_one() {
        let (art, dir) = artifact("pair");
        let ids: Vec<String> = (0..7).map(|i| art.snapshot.id(i).to_string()).collect();
        let req = proto::PairRequest {
            ids: ids.clone(),
            policy: proto::PairPolicy::Eomm as i32,
            now_ms: 0,
            seed: 0,
        };
        let r = pair(&art, &req, &no_state).unwrap();
        let direct =
            pair_pool(&art, &ids, art.manifest.snapshot_as_of_ms, PairPolicy::Eomm).unwrap();
        assert_eq!(r.pairs.len(), 3);
        assert!((r.objective - direct.pairing.objective).abs() < 1e-12);
        assert_eq!(r.waiting, ids[direct.pairing.waiting.unwrap()]);
        let one = proto::PairRequest {
            ids: vec![ids[0].clone()],
            ..req.clone()
        };
        assert_eq!(
            pair(&art, &one, &no_state).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let unknown_policy = proto::PairRequest { policy: 99, ..req };
        assert_eq!(
            pair(&art, &unknown_policy, &no_state).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    mod fuzz {
        use proptest::prelude::*;
        use prost::Message;

        use super::*;
        use crate::queues::{Queues, first_twice};

        fn art() -> &'static Artifact {
            static ART: std::sync::OnceLock<(Artifact, std::path::PathBuf)> =
                std::sync::OnceLock::new();
            &ART.get_or_init(|| artifact("fuzz")).0
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(300))]

            /// Any bytes: either not a request, or a request answered with a status; never a
            /// panic.
            #[test]
            fn any_bytes_decode_to_an_answer_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
                let a = art();
                if let Ok(r) = proto::ScoreRequest::decode(bytes.as_slice()) {
                    let _ = score(a, &r, &no_state);
                }
                if let Ok(r) = proto::PairRequest::decode(bytes.as_slice()) {
                    let _ = pair(a, &r, &no_state);
                }
                let qs = Queues::default();
                if let Ok(r) = proto::EnqueueRequest::decode(bytes.as_slice()) {
                    let _ = qs.enqueue(a, &r, &no_state);
                }
                if let Ok(r) = proto::TickRequest::decode(bytes.as_slice()) {
                    let _ = qs.tick("v", &r);
                }
            }

            /// Requests whose players come from a small set, so that many name a player twice:
            /// those are refused with INVALID_ARGUMENT naming the player, and every other answer
            /// holds each player once (a pool's pairs and waiting player, a lobby's scores, the
            /// searches of a tick's lobbies).
            #[test]
            fn no_answer_puts_a_player_in_two_places(
                picks in proptest::collection::vec(0usize..12, 2..14),
                seed in any::<u64>(),
            ) {
                let a = art();
                let ids: Vec<String> = picks.iter().map(|&i| a.snapshot.id(i).to_string()).collect();
                let twice = first_twice(&ids).map(str::to_string);
                let q = proto::PairRequest { ids: ids.clone(), policy: 0, now_ms: 0, seed };
                match (pair(a, &q, &no_state), &twice) {
                    (Err(e), Some(id)) => {
                        prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
                        prop_assert!(e.message().contains(id.as_str()));
                    }
                    (Ok(r), None) => {
                        let mut seen: Vec<&str> = r.pairs.iter().flat_map(|p| [p.a.as_str(), p.b.as_str()]).collect();
                        if !r.waiting.is_empty() {
                            seen.push(&r.waiting);
                        }
                        seen.sort_unstable();
                        let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
                        want.sort_unstable();
                        prop_assert_eq!(seen, want);
                    }
                    (r, t) => prop_assert!(false, "{:?} for a pool with {:?} twice", r.map(|_| ()), t),
                }
                let s = proto::ScoreRequest::of_ids(&ids, true);
                match (score(a, &s, &no_state), &twice) {
                    (Err(e), Some(id)) => prop_assert!(e.message().contains(id.as_str())),
                    (Ok(r), None) => prop_assert_eq!(r.players.len(), ids.len()),
                    (r, t) => prop_assert!(false, "{:?} for a lobby with {:?} twice", r.map(|_| ()), t),
                }
                // Solo searches, one per pick: a player already searching is refused.
                let qs = Queues::default();
                let mut searching: Vec<(u64, &str)> = Vec::new();
                for (k, id) in ids.iter().enumerate() {
                    let e = proto::EnqueueRequest {
                        queue: Some(proto::QueueSpec { name: "q".into(), team_size: 2, policy: (seed % 3) as i32, ..Default::default() }),
                        party: Some(proto::Party {
                            search_id: k as u64,
                            player_ids: vec![id.clone()],
                            start_ms: 1_000,
                            crossplay: true,
                            ..Default::default()
                        }),
                    };
                    let r = qs.enqueue(a, &e, &no_state);
                    if searching.iter().any(|(_, p)| p == id) {
                        let e = r.expect_err("a player searching twice");
                        prop_assert!(e.message().contains(id.as_str()));
                    } else {
                        prop_assert!(r.is_ok());
                        searching.push((k as u64, id.as_str()));
                    }
                }
                let t = qs.tick("v", &proto::TickRequest { queue: "q".into(), now_ms: 10_000_000 }).unwrap();
                let mut placed: Vec<&str> = t
                    .lobbies
                    .iter()
                    .flat_map(|l| l.team_a.iter().chain(&l.team_b))
                    .map(|s| searching.iter().find(|(k, _)| k == s).map_or("?", |x| x.1))
                    .collect();
                let n = placed.len();
                placed.sort_unstable();
                placed.dedup();
                prop_assert_eq!(placed.len(), n, "a player in two lobbies");
                prop_assert!(!placed.contains(&"?"));
            }

            /// Well-formed requests with any values: ids known, unknown or empty, any team,
            /// any time, any policy code.
            #[test]
            fn any_values_are_answered_or_refused(
                picks in proptest::collection::vec((0usize..80, any::<bool>()), 0..30),
                teams in proptest::collection::vec(0u32..4, 0..30),
                now_ms in any::<i64>(),
                policy in -2i32..8,
                seed in any::<u64>(),
            ) {
                let a = art();
                let ids: Vec<String> = picks
                    .iter()
                    .map(|&(i, known)| if known { a.snapshot.id(i % a.snapshot.len()).to_string() } else { format!("new{i}") })
                    .collect();
                let s = proto::ScoreRequest {
                    players: ids.iter().map(|id| proto::Player { id: id.clone(), state: None }).collect(),
                    teams,
                    now_ms,
                };
                // What the rules say of this request, worked out here on their own: Score needs
                // players, one team (0 or 1) per player or none, and each player once.
                let distinct = first_twice(&ids).is_none();
                let score_ok = !ids.is_empty()
                    && (s.teams.is_empty() || s.teams.len() == ids.len())
                    && s.teams.iter().all(|&t| t < 2)
                    && distinct;
                match score(a, &s, &no_state) {
                    Ok(r) => {
                        prop_assert!(score_ok, "answered {:?}", s);
                        prop_assert_eq!(r.players.len(), ids.len());
                        for (p, id) in r.players.iter().zip(&ids) {
                            prop_assert_eq!(&p.id, id);
                            prop_assert!(p.churn_after_win.is_finite() && p.percentile.is_finite());
                        }
                        prop_assert_eq!(r.lobby.is_some(), !s.teams.is_empty());
                    }
                    Err(e) => {
                        prop_assert!(!score_ok, "refused {:?}: {}", s, e.message());
                        prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
                        prop_assert!(!e.message().is_empty());
                    }
                }
                // Pair needs two players or more, each once, and a known policy code.
                let q = proto::PairRequest { ids, policy, now_ms, seed };
                let pair_ok = q.ids.len() >= 2 && distinct && (0..=4).contains(&policy);
                match pair(a, &q, &no_state) {
                    Ok(r) => {
                        prop_assert!(pair_ok, "answered {:?}", q);
                        prop_assert!(r.objective.is_finite());
                        prop_assert_eq!(r.pairs.len(), q.ids.len() / 2);
                        prop_assert_eq!(r.waiting.is_empty(), q.ids.len().is_multiple_of(2));
                    }
                    Err(e) => {
                        prop_assert!(!pair_ok, "refused {:?}: {}", q, e.message());
                        prop_assert_eq!(e.code(), tonic::Code::InvalidArgument);
                    }
                }
                let qs = Queues::default();
                let e = proto::EnqueueRequest {
                    queue: Some(proto::QueueSpec { name: "q".into(), team_size: (seed % 14) as u32, policy, ..Default::default() }),
                    party: Some(proto::Party {
                        search_id: seed,
                        player_ids: q.ids.iter().take((seed % 5) as usize).cloned().collect(),
                        start_ms: now_ms,
                        lat: (seed % 400) as f64 - 200.0,
                        lon: 0.0,
                        ..Default::default()
                    }),
                };
                if qs.enqueue(a, &e, &no_state).is_ok() {
                    let _ = qs.tick("v", &proto::TickRequest { queue: "q".into(), now_ms });
                }
            }
        }
    }
}
