//! The players as the service knows them, kept current by finished matches.
//!
//! A player's state is the artifact's snapshot, then every match the lake's matches table gained
//! after the artifact's lake version (`manifest.data.lake_version`), in commit order, then the
//! matches reported here and not yet seen in the lake, in the order of the log:
//!
//! - **settled**: the snapshot plus the lake's commits, read commit by commit from the Delta log
//!   ([`mm_lake::Lake::changes_since`]): this replica's flushes, other replicas' and `mm ingest`
//!   runs alike. Every replica reads the same commits in the same order, so once reports stop
//!   and the last flush is in, every replica holds the same state for every player.
//! - **pending**: the reports in the write-ahead log that the lake does not hold yet, applied on
//!   top of the settled state. A report is applied at once (the next request sees it); when the
//!   lake gains commits, the pending reports are applied again on the new settled state.
//!
//! A new artifact is switched to only once its settled state is built (its snapshot plus the
//! lake's commits after its version, plus the pending reports), so no player's state goes back
//! in time across a reload.
//!
//! **Flushes** write the pending reports into the lake as one Delta commit per flush (a Parquet
//! file per day, rows in the lake's order) with Delta's application transaction `(app id,
//! last sequence number)`, as kafka-delta-ingest does: after a crash, the reports at or below
//! the lake's recorded number are in the lake and the others are flushed again, so each lands
//! exactly once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use mm_artifact::Artifact;
use mm_artifact::online::{FinishedMatch, LiveUpdater};
use mm_artifact::snapshot::PlayerState;
use mm_lake::{Lake, LakeError, PlayerRow};
use mm_matcher::queue::Member;
use prost::Message;
use tokio::sync::oneshot::{Receiver, Sender};
use tonic::Status;

use crate::metrics::Metrics;
use crate::report::{self, Checked};
use crate::seen::{MatchKey, Seen, key};
use crate::wal::Wal;
use crate::{ServeError, proto};

/// Where the results go and how often.
#[derive(Debug, Clone)]
pub struct ResultsConfig {
    /// The lake (a path or an object-store URL).
    pub lake: String,
    /// The write-ahead log's directory (local disk: a volume of its own in a container).
    pub wal: PathBuf,
    /// This replica's name: its log's application id in the lake is `mm-serve/<replica>`. Stable
    /// across restarts of the same replica (with the same log); unique among replicas.
    pub replica: String,
    /// Flush at least this often (ms) while reports wait.
    pub flush_ms: u64,
    /// Flush as soon as this many reports wait.
    pub flush_matches: usize,
    /// How often the lake's new commits are read (other replicas' reports, ingest runs), ms.
    pub follow_ms: u64,
    /// The ids of matches that started this long (ms) before the latest start are not kept:
    /// a report of one is asked of the lake ([`crate::seen`]).
    pub dedupe_ms: i64,
    /// Log segments roll over at this size, bytes.
    pub segment_bytes: u64,
    /// Group commit: under concurrent reports a log sync waits this long after its first
    /// report for more to share it (fewer syncs for more acknowledgement latency).
    pub group_wait: Duration,
}

impl ResultsConfig {
    /// The application id this replica's flushes record in the lake.
    #[must_use]
    pub fn app_id(&self) -> String {
        format!("mm-serve/{}", self.replica)
    }
}

/// The state the lake's commits built: the snapshot's players as they moved since.
#[derive(Debug, Clone)]
struct Settled {
    players: HashMap<String, PlayerState>,
    updater: LiveUpdater,
    /// The matches table version applied through.
    version: i64,
}

#[derive(Debug)]
struct State {
    art: Arc<Artifact>,
    settled: Settled,
    /// The recent matches the lake holds (any mode), as of the settled version.
    seen: Seen,
    /// Reports in the log the lake does not hold yet, by sequence number, with the time each
    /// was received.
    pending: BTreeMap<u64, (Arc<Checked>, Instant)>,
    pending_ids: HashSet<String>,
    /// Match ids being written to the log right now.
    reserved: HashSet<String>,
    /// The highest sequence number committed to the lake (every one at or below it is in the
    /// lake, or needed no row there).
    flushed: u64,
    /// Sequence numbers above `flushed` that need no row: duplicates of matches the lake holds
    /// already, and logged reports that no longer pass the rules.
    dropped: BTreeSet<u64>,
    /// The settled state with the pending reports applied: the players they moved.
    overlay: HashMap<String, PlayerState>,
    overlay_updater: LiveUpdater,
}

/// The players, the log and the lake of one service.
#[derive(Debug)]
pub struct Live {
    cfg: ResultsConfig,
    app_id: String,
    wal: Wal,
    state: RwLock<State>,
    /// One sync (or flush, or switch) at a time: the only changer of the settled state. Holds
    /// the lake as last read, moved to its latest version by reading the new log entries only.
    syncing: std::sync::Mutex<Option<Lake>>,
    metrics: Metrics,
    last_sync: std::sync::Mutex<Instant>,
    background: Background,
}

thread_local! {
    /// Whether this thread is the flush thread (see [`Background`]).
    static FLUSHER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A report's place in a `ReportMatches` batch ([`Live::report_in_turn`]): the previous
/// match's signals to wait for, before queuing the record in the log and before moving the
/// players, and this one's, each dropped when that step is done (or the report ends). The
/// default (a lone report) waits for nothing.
#[derive(Debug, Default)]
pub struct Turn {
    /// Ends when the previous match of the batch has queued its log record.
    after_queued: Option<Receiver<()>>,
    /// Ends when the previous match of the batch is done.
    after_done: Option<Receiver<()>>,
    /// Dropped when this match has queued its log record.
    queued: Option<Sender<()>>,
    /// Dropped when this match is done.
    done: Option<Sender<()>>,
}

impl Turn {
    /// The next turn of a batch: it waits for the turn `previous` last made (none for the
    /// batch's first), and leaves its own signals in `previous` for the one after.
    #[must_use]
    pub fn after(previous: &mut Option<(Receiver<()>, Receiver<()>)>) -> Turn {
        let (queued, next_queued) = tokio::sync::oneshot::channel();
        let (done, next_done) = tokio::sync::oneshot::channel();
        let (after_queued, after_done) = previous
            .replace((next_queued, next_done))
            .map_or((None, None), |(q, d)| (Some(q), Some(d)));
        Turn {
            after_queued,
            after_done,
            queued: Some(queued),
            done: Some(done),
        }
    }
}

/// Where the flush thread's work off the players' lock runs: one thread in the background
/// (Linux's `SCHED_IDLE`, else nice 10), which takes only the cores' idle time.
///
/// The flush thread itself keeps the service's priority. A thread in the background that holds
/// the players' lock, or waits for it (which holds back the readers queued behind it), keeps
/// every request waiting until a core is idle; so the flush takes the lock at the service's
/// priority and hands its longer work (reading and writing the lake, encoding the files,
/// applying the matches, freeing the states replaced) to this thread, waiting for each piece.
/// Called from any other thread (an overdue flush, which runs because the cores have had no
/// idle time for long; a follow; a reload), the work runs on the caller, at its priority.
#[derive(Debug)]
struct Background {
    pool: rayon::ThreadPool,
}

impl Background {
    fn start() -> Result<Background, ServeError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "mm-serve-flushbg".into())
            .start_handler(|_| crate::lower_priority())
            .build()
            .map_err(|e| ServeError::Config {
                field: "wal",
                reason: format!("cannot start the flush's background thread: {e}"),
            })?;
        Ok(Background { pool })
    }

    /// Runs `f` in the background when called from the flush thread, else on the caller.
    fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        if FLUSHER.with(std::cell::Cell::get) {
            self.pool.install(f)
        } else {
            f()
        }
    }
}

fn live_err(e: impl std::fmt::Display) -> ServeError {
    ServeError::Config {
        field: "lake",
        reason: e.to_string(),
    }
}

/// Whether `art` serves matches of `mode` (an artifact of every mode serves every mode).
fn serves(art: &Artifact, mode: &str) -> bool {
    art.manifest.mode.as_deref().is_none_or(|m| m == mode)
}

impl Settled {
    fn new(art: &Artifact, version: i64) -> Result<Settled, ServeError> {
        Ok(Settled {
            players: HashMap::new(),
            updater: LiveUpdater::new(art).map_err(|e| ServeError::Config {
                field: "models",
                reason: e.to_string(),
            })?,
            version,
        })
    }

    /// Applies the lake's matches `new` (read from commits after `self.version`, up to `to`;
    /// each with whether it is of the artifact's mode), each once.
    fn advance(&mut self, art: &Artifact, new: &[(FinishedMatch, bool)], to: i64) {
        let mut applied = HashSet::new();
        for (m, ours) in new {
            if !applied.insert(key(&m.match_id)) || !ours {
                continue;
            }
            apply_on(&mut self.updater, art, m, |_| None, &mut self.players);
        }
        self.version = self.version.max(to);
    }
}

/// The recent matches the lake holds: the matches of the horizon before its latest start.
fn seen_of(lake: &Lake, horizon_ms: i64) -> Result<Seen, LakeError> {
    let mut seen = Seen::new(horizon_ms);
    if let Some(t) = lake.latest_start()? {
        seen.saw_start(t);
    }
    lake.for_each_match_since(seen.floor_ms(), |id, t| {
        seen.insert(t, key(id));
    })?;
    Ok(seen)
}

/// Matches (or reports) whose players' settled states are read under one hold of the players'
/// lock while the settled state or the overlay is rebuilt off it. Small: a hold keeps the
/// reports (writers) waiting, and the requests queued behind them, so it shows in Score's tail
/// beside the reports (`mm bench serve --reports`).
const BASE_CHUNK: usize = 32;

/// Matches (of up to 12 players) the overlay has room for beyond the pending reports when it is
/// rebuilt: a flush's worth (`--flush-matches`) up to this many.
const OVERLAY_HEADROOM_MATCHES: usize = 10_000;

/// The settled states before `matches` of their players that `moved` does not hold (read under
/// one hold of the players' lock, by the caller). A player the lake never moved is left out:
/// [`apply_on`] takes the artifact's state for it, off the lock.
fn settled_base<'a>(
    settled: &Settled,
    matches: impl Iterator<Item = &'a FinishedMatch>,
    moved: &HashMap<String, PlayerState>,
) -> HashMap<&'a str, PlayerState> {
    let mut base = HashMap::new();
    for r in matches.flat_map(|m| &m.rows) {
        if !moved.contains_key(&r.player_id)
            && !base.contains_key(r.player_id.as_str())
            && let Some(s) = settled.players.get(&r.player_id)
        {
            base.insert(r.player_id.as_str(), s.clone());
        }
    }
    base
}

/// Applies `m` to its players' states in `moved`, else in `base`, else the artifact's, and
/// records the states after it in `moved`. The states before are taken, not copied: a state
/// in `moved` is replaced by the one after, and `base` hands over its own (or a copy).
fn apply_on(
    updater: &mut LiveUpdater,
    art: &Artifact,
    m: &FinishedMatch,
    mut base: impl FnMut(&str) -> Option<PlayerState>,
    moved: &mut HashMap<String, PlayerState>,
) {
    let before = m
        .rows
        .iter()
        .map(|r| {
            moved
                .remove(&r.player_id)
                .or_else(|| base(&r.player_id))
                .unwrap_or_else(|| art.player_or_new(&r.player_id))
        })
        .collect();
    for s in updater.apply(m, before) {
        moved.insert(s.player_id.clone(), s);
    }
}

/// Matches read from the lake's new commits, each with whether it is of the artifact's mode,
/// and the version they were read up to.
type NewMatches = (Vec<(FinishedMatch, bool)>, i64);

/// The matches the lake gained after `version`, up to the lake's latest, each with whether it
/// is of the artifact's mode, and that latest version. `Ok(None)` when nothing is new.
fn read_new(lake: &Lake, art: &Artifact, version: i64) -> Result<Option<NewMatches>, LakeError> {
    let Some(top) = lake.version() else {
        return Ok(None);
    };
    if top <= version {
        return Ok(None);
    }
    let mut out = Vec::new();
    for change in lake.changes_since(version)? {
        for f in &change.added {
            for (mode, m) in mm_lake::results::read_finished(&lake.matches_file(f)?)? {
                out.push((m, serves(art, &mode)));
            }
        }
    }
    Ok(Some((out, top)))
}

impl State {
    /// A player's state as a match moved it since the artifact: the overlay's (a pending
    /// report's), else the settled one.
    fn current(&self, id: &str) -> Option<&PlayerState> {
        self.overlay
            .get(id)
            .or_else(|| self.settled.players.get(id))
    }

    /// The highest sequence number a flush may cover: the end of the run of numbers after
    /// `flushed` that are all pending or dropped. A report is added to `pending` only after its
    /// log append returns, and concurrent appends return in any order: a flush that covered a
    /// number whose predecessor was not added yet would record that predecessor as in the lake.
    fn flushable(&self) -> u64 {
        let mut k = self.flushed;
        while self.pending.contains_key(&(k + 1)) || self.dropped.contains(&(k + 1)) {
            k += 1;
        }
        k
    }

    /// How long the oldest pending report has waited (sequence numbers are given in arrival
    /// order, give or take a group of the log).
    fn oldest_wait(&self) -> Option<Duration> {
        self.pending.values().next().map(|(_, t)| t.elapsed())
    }

    /// The pending reports a flush would write (0: only numbers that need no row, such as
    /// duplicates, which the lake's number for this replica should pass); `None` when there is
    /// nothing to flush.
    fn waiting(&self) -> Option<usize> {
        let last = self.flushable();
        if last <= self.flushed {
            // Nothing to flush (and a range `flushed + 1..=flushed` of a non-empty map would
            // panic).
            return None;
        }
        Some(self.pending.range(self.flushed + 1..=last).count())
    }

    /// Applies the pending reports again on the settled state, dropping those the lake now
    /// holds (under the players' lock: at a start or a switch of artifacts).
    fn reapply(&mut self) {
        self.drop_settled();
        self.overlay.clear();
        self.overlay_updater = self.settled.updater.clone();
        let (art, settled) = (&self.art, &self.settled);
        for (c, _) in self.pending.values().filter(|(c, _)| serves(art, &c.mode)) {
            let base = |id: &str| settled.players.get(id).cloned();
            apply_on(
                &mut self.overlay_updater,
                art,
                &c.finished,
                base,
                &mut self.overlay,
            );
        }
    }

    /// Forgets the pending reports whose matches the lake now holds.
    fn drop_settled(&mut self) {
        let settled_ids = &self.seen;
        let flushed = self.flushed;
        let (pending_ids, dropped) = (&mut self.pending_ids, &mut self.dropped);
        self.pending.retain(|&seq, (c, _)| {
            let keep = !settled_ids.contains(key(&c.match_id));
            if !keep {
                pending_ids.remove(&c.match_id);
                if seq > flushed {
                    dropped.insert(seq);
                }
            }
            keep
        });
    }
}

impl Live {
    /// Opens the log and the lake and builds the players' state for `art`: the lake's commits
    /// after its version, then every report in the log the lake does not hold yet (flushed
    /// soon after). Blocking.
    ///
    /// # Errors
    /// The lake or the log cannot be opened, or the artifact cannot update players.
    pub fn start(
        art: Arc<Artifact>,
        cfg: ResultsConfig,
        metrics: Metrics,
    ) -> Result<Live, ServeError> {
        let app_id = cfg.app_id();
        let lake = Lake::open_or_create(&cfg.lake).map_err(live_err)?;
        let committed = lake
            .app_transaction(&app_id)
            .map_err(live_err)?
            .unwrap_or(0);
        let floor = u64::try_from(committed).unwrap_or(0);
        let (wal, records) = Wal::open(&cfg.wal, cfg.segment_bytes, cfg.group_wait, floor)
            .map_err(|e| ServeError::Config {
                field: "wal",
                reason: format!("{}: {e}", cfg.wal.display()),
            })?;
        wal.truncate_through(floor)
            .map_err(|e| ServeError::Config {
                field: "wal",
                reason: e.to_string(),
            })?;
        let settled = settled_for(&art, &lake)?;
        let seen = seen_of(&lake, cfg.dedupe_ms).map_err(live_err)?;
        let mut pending = BTreeMap::new();
        let mut pending_ids = HashSet::new();
        let mut dropped = BTreeSet::new();
        let now = Instant::now();
        for r in records.into_iter().filter(|r| r.seq > floor) {
            let checked = proto::ReportMatchRequest::decode(r.payload.as_slice())
                .map_err(|e| e.to_string())
                .and_then(|req| report::check(&req).map_err(|r| r.status.message().to_string()));
            match checked {
                Ok(c) => {
                    pending_ids.insert(c.match_id.clone());
                    pending.insert(r.seq, (Arc::new(c), now));
                }
                // Checked when it was reported: only a change of the rules since can refuse it.
                Err(e) => {
                    dropped.insert(r.seq);
                    tracing::warn!(sequence = r.seq, error = %e, "a logged report no longer passes the rules; dropped")
                }
            }
        }
        tracing::info!(
            app_id = %app_id,
            committed,
            pending = pending.len(),
            lake_version = settled.version,
            "results: the lake holds this replica's reports through {committed}; {} to flush",
            pending.len()
        );
        let overlay_updater = settled.updater.clone();
        let mut state = State {
            art,
            settled,
            seen,
            pending,
            pending_ids,
            reserved: HashSet::new(),
            flushed: floor,
            dropped,
            overlay: HashMap::new(),
            overlay_updater,
        };
        state.reapply();
        Ok(Live {
            cfg,
            app_id,
            wal,
            state: RwLock::new(state),
            syncing: std::sync::Mutex::new(Some(lake)),
            metrics,
            last_sync: std::sync::Mutex::new(Instant::now()),
            background: Background::start()?,
        })
    }

    /// Marks the calling thread as the flush thread: from then on its work off the players'
    /// lock runs in the background (see [`Background`]).
    pub fn become_flusher() {
        FLUSHER.with(|f| f.set(true));
    }

    /// Runs `f` (work off the players' lock) in the background when called from the flush
    /// thread, else on the caller (see [`Background`]).
    fn off_peak<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.background.run(f)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The artifact the players' state is built on (the one to score with).
    #[must_use]
    pub fn art(&self) -> Arc<Artifact> {
        Arc::clone(&self.read().art)
    }

    /// A player's current state (`None` for a player no match has moved since the artifact:
    /// its snapshot state, or a new player's, applies).
    #[must_use]
    pub fn state(&self, id: &str) -> Option<PlayerState> {
        self.read().current(id).cloned()
    }

    /// The artifact and the current states of `ids` (those a match moved since the artifact,
    /// as [`Live::state`]), read under one hold of the players' lock: a request that reads
    /// several players takes it once, not once a player, so it waits behind a report's update
    /// at most once.
    #[must_use]
    pub fn art_and_states<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> (Arc<Artifact>, HashMap<String, PlayerState>) {
        let st = self.read();
        let states = ids
            .filter_map(|id| Some((id.to_string(), st.current(id)?.clone())))
            .collect();
        (Arc::clone(&st.art), states)
    }

    /// Records one reported match ([`Live::report`]) in a task of its own, so that it runs to
    /// its end even when the caller stops waiting (a client that goes away mid-call): a report
    /// stopped between its log append and its application would leave its sequence number a
    /// gap that holds back every flush. The task starts at once; the future waits for it.
    pub fn report_detached(
        self: &Arc<Self>,
        req: proto::ReportMatchRequest,
    ) -> impl std::future::Future<Output = Result<proto::ReportMatchResponse, Status>> + use<> {
        self.report_in_turn(req, Turn::default())
    }

    /// [`Live::report_detached`] for one match of a batch ([`Turn`]): it queues its log record
    /// after the batch's previous match has queued its own, and moves its players after that
    /// match is done, so that a batch gets its log numbers and moves its players in the
    /// request's order whatever the scheduling. The log syncs still cover the batch's records
    /// together.
    pub fn report_in_turn(
        self: &Arc<Self>,
        req: proto::ReportMatchRequest,
        turn: Turn,
    ) -> impl std::future::Future<Output = Result<proto::ReportMatchResponse, Status>> + use<> {
        let live = Arc::clone(self);
        let task = tokio::spawn(async move { live.report(req, turn).await });
        async move {
            task.await
                .unwrap_or_else(|e| Err(Status::internal(format!("the report stopped: {e}"))))
        }
    }

    /// Records one reported match: checks it, refuses a duplicate, logs it durably and applies
    /// it to its players. Only through [`Live::report_detached`]: it must not stop midway.
    ///
    /// # Errors
    /// `INVALID_ARGUMENT` for a report that breaks a rule; `UNAVAILABLE` when the log cannot
    /// be written.
    async fn report(
        self: &Arc<Self>,
        req: proto::ReportMatchRequest,
        turn: Turn,
    ) -> Result<proto::ReportMatchResponse, Status> {
        // Dropped on every return: the batch's next match may go on.
        let (turn, _done) = (Turn { done: None, ..turn }, turn.done);
        let checked = match report::check(&req) {
            Ok(c) => c,
            Err(r) => {
                self.metrics.report("refused", &r.rule);
                return Err(r.status);
            }
        };
        let k = key(&checked.match_id);
        // The lake version a match older than the recent ids' horizon was looked up at.
        let mut asked: Option<i64> = None;
        let version = loop {
            {
                let mut st = self.write();
                let id = &checked.match_id;
                if st.seen.contains(k) || st.pending_ids.contains(id) || st.reserved.contains(id) {
                    return Ok(self.duplicate(st.art.manifest.model_version.clone()));
                }
                // The lookup holds when no commit was applied since the version it read (the
                // ids of an old match a later commit held may have been evicted already).
                if st.seen.covers(checked.start_ms)
                    || asked.is_some_and(|v| v >= st.settled.version)
                {
                    st.reserved.insert(id.clone());
                    break st.art.manifest.model_version.clone();
                }
            }
            let (live, id, start) = (Arc::clone(self), checked.match_id.clone(), checked.start_ms);
            let looked = tokio::task::spawn_blocking(move || live.lake_holds(&id, start))
                .await
                .map_err(|e| Status::internal(format!("the lake lookup failed: {e}")))?
                .map_err(|e| {
                    Status::unavailable(format!(
                        "match {} started before the recent matches kept in memory, and the \
                         lake could not be read to check it: {e}",
                        checked.match_id
                    ))
                })?;
            self.metrics.lake_lookup();
            match looked {
                (true, _) => {
                    return Ok(self.duplicate(self.read().art.manifest.model_version.clone()));
                }
                (false, v) => asked = Some(v),
            }
        };
        let req_end = req.end_ms;
        let logged = self.log_in_turn(req.encode_to_vec(), turn).await;
        let mut st = self.write();
        st.reserved.remove(&checked.match_id);
        let seq = logged
            .map_err(|e| Status::unavailable(format!("the report could not be logged: {e}")))?;
        if st.seen.contains(k) {
            // The lake gained this match (another writer's) while it was being logged.
            st.dropped.insert(seq);
            return Ok(self.duplicate(version));
        }
        st.pending_ids.insert(checked.match_id.clone());
        let art = Arc::clone(&st.art);
        let mut after = Vec::new();
        if serves(&art, &checked.mode) {
            let st = &mut *st;
            // Each player's current state: moved by a pending report (taken: the state after
            // replaces it), else by the lake, else the artifact's.
            let before = checked
                .finished
                .rows
                .iter()
                .map(|r| {
                    st.overlay
                        .remove(&r.player_id)
                        .or_else(|| st.settled.players.get(&r.player_id).cloned())
                        .unwrap_or_else(|| art.player_or_new(&r.player_id))
                })
                .collect();
            let moved = st.overlay_updater.apply(&checked.finished, before);
            if !req.omit_players {
                after.clone_from(&moved);
            }
            for s in moved {
                st.overlay.insert(s.player_id.clone(), s);
            }
        }
        let start_ms = checked.start_ms;
        st.pending.insert(seq, (Arc::new(checked), Instant::now()));
        drop(st);
        // Scored as of the match's end: the churn a search right after it would see.
        let now = req_end.unwrap_or(start_ms);
        let players = after.iter().map(|s| score_of(&art, s, now)).collect();
        self.metrics.report("recorded", "");
        Ok(proto::ReportMatchResponse {
            status: proto::ReportStatus::Recorded as i32,
            model_version: version,
            sequence: seq,
            players,
        })
    }

    /// Appends a report's record to the log in its batch's turn ([`Turn`]): queued after the
    /// previous match's record, and returned once synced and once the previous match is done.
    async fn log_in_turn(&self, payload: Vec<u8>, turn: Turn) -> std::io::Result<u64> {
        // Ended or dropped: either way the previous match has taken its step, or never will.
        if let Some(previous) = turn.after_queued {
            let _ = previous.await;
        }
        let logged = match self.wal.enqueue(payload) {
            Ok(synced) => {
                drop(turn.queued);
                synced.await
            }
            Err(e) => Err(e),
        };
        if let Some(previous) = turn.after_done {
            let _ = previous.await;
        }
        logged
    }

    /// The answer to a report of a match the lake or the log holds already.
    fn duplicate(&self, model_version: String) -> proto::ReportMatchResponse {
        self.metrics.report("duplicate", "");
        proto::ReportMatchResponse {
            status: proto::ReportStatus::Duplicate as i32,
            model_version,
            sequence: 0,
            players: Vec::new(),
        }
    }

    /// Whether the lake, at its latest version, holds match `id` started at `start_ms`, and
    /// that version. Blocking (it holds the syncing lock while it reads).
    fn lake_holds(&self, id: &str, start_ms: i64) -> Result<(bool, i64), LakeError> {
        let mut held = self.lake();
        let lake = self.latest(&mut held)?;
        Ok((
            lake.holds_match(id, start_ms)?,
            lake.version().unwrap_or(-1),
        ))
    }

    /// Reads the lake's new commits and applies them (other replicas' reports, ingest runs,
    /// this replica's flushes), then the pending reports again. Blocking.
    ///
    /// # Errors
    /// The lake cannot be read.
    pub fn sync(&self) -> Result<(), LakeError> {
        let mut lake = self.lake();
        self.sync_locked(&mut lake)
    }

    /// The syncing lock, with the lake it holds.
    fn lake(&self) -> std::sync::MutexGuard<'_, Option<Lake>> {
        self.syncing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The held lake moved to its latest version (opened again when that fails: a log cleaned
    /// up past the held version, a lake replaced).
    /// On the flush thread, the reading runs in the background ([`Live::off_peak`]).
    fn latest<'a>(&self, held: &'a mut Option<Lake>) -> Result<&'a Lake, LakeError> {
        self.off_peak(|| {
            if let Some(l) = held.as_mut()
                && let Err(e) = l.refresh()
            {
                tracing::warn!(error = %e, "results: reading the lake's new log entries failed; opening it again");
                *held = None;
            }
            if held.is_none() {
                *held = Some(Lake::open(&self.cfg.lake)?);
            }
            Ok::<_, LakeError>(())
        })?;
        Ok(held.as_ref().expect("set above"))
    }

    fn sync_locked(&self, held: &mut Option<Lake>) -> Result<(), LakeError> {
        let lake = self.latest(held)?;
        self.sync_with(lake)
    }

    /// Applies the commits of `lake` (a snapshot opened by the caller) after the settled
    /// version.
    fn sync_with(&self, lake: &Lake) -> Result<(), LakeError> {
        let (art, version) = {
            let st = self.read();
            (Arc::clone(&st.art), st.settled.version)
        };
        let new = match self.off_peak(|| read_new(lake, &art, version)) {
            Ok(n) => n,
            Err(LakeError::LogTruncated { .. }) => {
                tracing::warn!(
                    from = version,
                    "the lake's log no longer holds the commits after version {version}; \
                     players keep their state and follow from the latest version"
                );
                lake.version().map(|v| (Vec::new(), v))
            }
            Err(e) => return Err(e),
        };
        if let Some((matches, to)) = new {
            self.advance_settled(&art, version, &matches, to);
        }
        let st = self.read();
        self.metrics.followed(st.settled.version);
        if let Ok(mut t) = self.last_sync.lock() {
            *t = Instant::now();
        }
        Ok(())
    }

    /// Applies the lake's matches `new` (read after `from`, up to `to`) to the settled state,
    /// then the pending reports again on top. The caller holds the syncing lock, the only
    /// changer of the settled state: the players' new states are computed off the players'
    /// lock (which requests need), reading the settled states a chunk of matches at a time,
    /// and moved in a batch at a time. A player's state only moves forward meanwhile: a
    /// pending report's player reads its overlay state, newer than either.
    fn advance_settled(
        &self,
        art: &Arc<Artifact>,
        from: i64,
        new: &[(FinishedMatch, bool)],
        to: i64,
    ) {
        // States moved in a batch at a time: each batch is one short hold of the players' lock.
        const BATCH: usize = 128;
        let mut updater = {
            let st = self.read();
            if !Arc::ptr_eq(&st.art, art) || st.settled.version != from {
                return;
            }
            st.settled.updater.clone()
        };
        // Sized up front: grown from empty, these maps rehashed often enough to show in a
        // profile of the flush.
        let rows: usize = new
            .iter()
            .filter(|(_, ours)| *ours)
            .map(|(m, _)| m.rows.len())
            .sum();
        let mut moved: HashMap<String, PlayerState> = HashMap::with_capacity(rows);
        let mut ids: HashSet<MatchKey> = HashSet::with_capacity(new.len());
        let mut starts: Vec<(i64, MatchKey)> = Vec::with_capacity(new.len());
        for chunk in new.chunks(BASE_CHUNK) {
            let (fresh, mut base) = {
                let st = self.read();
                let fresh: Vec<bool> = chunk
                    .iter()
                    .map(|(m, _)| !st.seen.contains(key(&m.match_id)))
                    .collect();
                let ours = chunk.iter().filter(|(_, ours)| *ours).map(|(m, _)| m);
                (fresh, settled_base(&st.settled, ours, &moved))
            };
            self.off_peak(|| {
                for ((m, ours), fresh) in chunk.iter().zip(fresh) {
                    let k = key(&m.match_id);
                    if !fresh || !ids.insert(k) {
                        continue;
                    }
                    starts.push((m.start_ms, k));
                    if !ours {
                        continue;
                    }
                    apply_on(&mut updater, art, m, |id| base.remove(id), &mut moved);
                }
            });
        }
        let mut moved = moved.into_iter();
        loop {
            let batch: Vec<(String, PlayerState)> = moved.by_ref().take(BATCH).collect();
            if batch.is_empty() {
                break;
            }
            let replaced: Vec<PlayerState> = {
                let mut st = self.write();
                let players = &mut st.settled.players;
                batch
                    .into_iter()
                    .filter_map(|(id, s)| players.insert(id, s))
                    .collect()
            };
            // The states replaced are freed off the lock.
            self.off_peak(move || drop(replaced));
        }
        let evicted = {
            let mut st = self.write();
            for (t, k) in starts {
                st.seen.insert(t, k);
            }
            st.settled.updater = updater;
            st.settled.version = st.settled.version.max(to);
            st.drop_settled();
            st.seen.evict()
        };
        self.metrics.dedupe_ids(self.read().seen.len());
        // The evicted ids are freed off the lock.
        self.off_peak(move || drop((evicted, ids)));
        self.rebuild_overlay(art);
    }

    /// Applies the pending reports again on the settled state (which the caller, holding the
    /// syncing lock, just moved). The new overlay is built off the players' lock and swapped
    /// in; the reports that arrive meanwhile are applied to it at the swap (until then they
    /// land on the old overlay, whose states are as new).
    fn rebuild_overlay(&self, art: &Arc<Artifact>) {
        let (reports, mut updater) = {
            let st = self.read();
            let reports: Vec<(u64, Arc<Checked>)> = st
                .pending
                .iter()
                .map(|(&seq, (c, _))| (seq, Arc::clone(c)))
                .collect();
            (reports, st.settled.updater.clone())
        };
        // Room for the players of the reports until the next flush too: the overlay grows on
        // the reports' path, under the players' lock, where each doubling of its table would
        // move every state in it while the requests wait.
        let rows: usize = reports.iter().map(|(_, c)| c.finished.rows.len()).sum();
        let next = self.cfg.flush_matches.min(OVERLAY_HEADROOM_MATCHES) * 12;
        let mut overlay: HashMap<String, PlayerState> = HashMap::with_capacity(rows + next);
        for chunk in reports.chunks(BASE_CHUNK) {
            let ours: Vec<&FinishedMatch> = chunk
                .iter()
                .filter(|(_, c)| serves(art, &c.mode))
                .map(|(_, c)| &c.finished)
                .collect();
            let mut base = settled_base(&self.read().settled, ours.iter().copied(), &overlay);
            self.off_peak(|| {
                for m in ours {
                    apply_on(&mut updater, art, m, |id| base.remove(id), &mut overlay);
                }
            });
        }
        let applied: HashSet<u64> = reports.iter().map(|(seq, _)| *seq).collect();
        let old = {
            let mut st = self.write();
            let st = &mut *st;
            if !Arc::ptr_eq(&st.art, art) {
                return;
            }
            let late = st
                .pending
                .iter()
                .filter(|(seq, (c, _))| !applied.contains(seq) && serves(art, &c.mode));
            for (_, (c, _)) in late {
                let base = |id: &str| st.settled.players.get(id).cloned();
                apply_on(&mut updater, art, &c.finished, base, &mut overlay);
            }
            st.overlay_updater = updater;
            std::mem::replace(&mut st.overlay, overlay)
        };
        // The old overlay's states are freed off the lock.
        self.off_peak(move || drop(old));
    }

    /// Switches to a new artifact once its players' state is built (the lake's commits after
    /// its version, then the pending reports). Blocking.
    ///
    /// # Errors
    /// The lake cannot be read, or the artifact cannot update players (the current one stays).
    pub fn switch_to(&self, art: Arc<Artifact>) -> Result<(), ServeError> {
        let mut held = self.lake();
        let lake = self.latest(&mut held).map_err(live_err)?;
        // The recent ids move to this lake version first (they follow the lake, not the
        // artifact); the new settled state is built on the same version.
        self.sync_with(lake).map_err(live_err)?;
        let settled = settled_for(&art, lake)?;
        let mut st = self.write();
        st.art = art;
        st.settled = settled;
        st.reapply();
        Ok(())
    }

    /// Whether a flush is due: enough reports wait, or the oldest has waited long enough, or
    /// only duplicates wait (the lake's number for this replica should pass them).
    #[must_use]
    pub fn flush_due(&self) -> bool {
        let st = self.read();
        let oldest = st.oldest_wait();
        self.metrics.backlog(
            self.wal.bytes(),
            self.wal.syncs(),
            st.pending.len(),
            oldest.map_or(0, |d| d.as_millis() as u64),
        );
        self.metrics.follow_lag(self.follow_lag_ms());
        st.waiting().is_some_and(|waiting| {
            waiting >= self.cfg.flush_matches
                || oldest.is_some_and(|d| d >= Duration::from_millis(self.cfg.flush_ms))
                || waiting == 0
        })
    }

    /// Whether the flushes are far behind: `OVERDUE` times as many reports wait as a flush
    /// takes, or the oldest has waited `OVERDUE` flush intervals.
    #[must_use]
    pub fn flush_overdue(&self) -> bool {
        /// Times the flush's own thresholds.
        const OVERDUE: u32 = 10;
        let st = self.read();
        let oldest = st.oldest_wait();
        st.waiting().is_some_and(|waiting| {
            waiting >= self.cfg.flush_matches.saturating_mul(OVERDUE as usize)
                || oldest.is_some_and(|d| d >= Duration::from_millis(self.cfg.flush_ms) * OVERDUE)
        })
    }

    /// Writes the pending reports into the lake as one commit with this replica's application
    /// transaction, then removes the log's segments the lake now holds and follows the lake.
    /// Returns the lake version committed (`None`: nothing to flush). Blocking.
    ///
    /// # Errors
    /// The lake refused the commit (a concurrent run holding the same rows: the next flush
    /// tries again without the matches the lake now holds) or could not be written.
    pub fn flush(&self) -> Result<Option<i64>, LakeError> {
        let mut held = self.lake();
        let t0 = Instant::now();
        // What the lake gained since the last follow comes first: a pending report whose match
        // another writer committed meanwhile is dropped, not written again. The commit below is
        // made on this same snapshot, so a writer that commits after it is seen by the commit's
        // re-check of keys.
        let lake = self.latest(&mut held)?;
        self.sync_with(lake)?;
        let art = self.art();
        let (reports, last) = {
            let st = self.read();
            let last = st.flushable();
            if last <= st.flushed {
                return Ok(None);
            }
            let reports: Vec<(u64, Arc<Checked>)> = st
                .pending
                .range(st.flushed + 1..=last)
                .map(|(&seq, (c, _))| (seq, Arc::clone(c)))
                .collect();
            (reports, last)
        };
        let result = self.off_peak(|| self.commit(lake, &reports, last));
        match &result {
            Ok(_) | Err(LakeError::AlreadyCommitted { .. }) => {
                {
                    let mut st = self.write();
                    st.flushed = last;
                    st.dropped = st.dropped.split_off(&(last + 1));
                }
                if let Err(e) = self.wal.truncate_through(last) {
                    tracing::warn!(error = %e, "could not remove the log's flushed segments");
                }
                let version = result.as_ref().ok().map(|(v, _)| *v);
                // The commit's own matches, from the batches just written: when no other commit
                // came between, they are all the lake gained (no need to read the files back).
                let own = match result {
                    Ok((v, batches)) if self.read().settled.version == v - 1 => self
                        .off_peak(|| own_matches(&art, &batches))
                        .map(|m| (m, v)),
                    _ => None,
                };
                match own {
                    Some((m, v)) => self.advance_settled(&art, v - 1, &m, v),
                    None => self.sync_locked(&mut held)?,
                }
                self.metrics.flush("committed", t0.elapsed());
                tracing::info!(
                    lake_version = ?version,
                    sequence = last,
                    "results: flushed through {last}"
                );
                if let Some(v) = version.filter(|v| v % mm_lake::upkeep::CHECKPOINT_INTERVAL == 0) {
                    let held: &mut Option<Lake> = &mut held;
                    self.off_peak(move || self.checkpoint(held, v));
                }
                Ok(version)
            }
            Err(_) => {
                self.metrics.flush("failed", t0.elapsed());
                // A concurrent run may hold some of these matches: learn them, so that the next
                // flush leaves them out.
                let _ = self.sync_locked(&mut held);
                result.map(|(v, _)| Some(v))
            }
        }
    }

    /// A checkpoint of the matches table at `version` (or later), so that opening the lake
    /// does not read every flush's log entry. A failure is only logged: the next interval
    /// tries again, and readers read the log entries meanwhile.
    fn checkpoint(&self, held: &mut Option<Lake>, version: i64) {
        let done = self
            .latest(held)
            .and_then(mm_lake::Lake::checkpoint_matches);
        match done {
            Ok(at) => tracing::info!(lake_version = ?at, "results: checkpointed the lake's log"),
            Err(e) => {
                tracing::warn!(error = %e, version, "results: could not checkpoint the lake's log");
            }
        }
    }

    /// Commits the rows as one Delta commit with this replica's application transaction;
    /// returns its version and the batches written, in the commit's order.
    fn commit(
        &self,
        lake: &Lake,
        reports: &[(u64, Arc<Checked>)],
        last: u64,
    ) -> Result<(i64, Vec<arrow_array::RecordBatch>), LakeError> {
        let span = tracing::info_span!(
            "flush",
            sequence = last,
            lake_version = tracing::field::Empty
        );
        let _e = span.enter();
        // A file per day, its rows in the lake's order (the lake's own sort, as compaction's);
        // each row recorded as its report's sequence number.
        let mut days: BTreeMap<i32, (Vec<&PlayerRow<'static>>, Vec<u64>)> = BTreeMap::new();
        for (seq, c) in reports {
            for r in &c.rows {
                let day = days.entry(mm_lake::schema::day_of(r.start_ms)).or_default();
                day.0.push(r);
                day.1.push(*seq);
            }
        }
        let run_id = mm_run::new_run_id();
        let mut txn = lake.begin(&run_id)?;
        let source = format!("{}#{}", self.app_id, run_id);
        let written: usize = days.values().map(|d| d.0.len()).sum();
        let mut batches = Vec::with_capacity(days.len());
        for (day, (rows, lines)) in &days {
            let batch = mm_lake::results::lake_batch(rows.iter().copied(), &source, lines)?;
            let batch = mm_lake::rows::sort_lake_order(&[batch]).map_err(|e| LakeError::Arrow {
                path: source.clone().into(),
                source: e,
            })?;
            let rel = Lake::partition_rel(*day).join(format!("part-{run_id}.parquet"));
            txn.write_parquet(&rel, std::slice::from_ref(&batch))?;
            batches.push(batch);
        }
        txn.set_app_transaction(&self.app_id, i64::try_from(last).unwrap_or(i64::MAX));
        let done = txn.commit(&serde_json::json!({
            "run_id": run_id,
            "kind": "serve-flush",
            "app_id": self.app_id,
            "last_sequence": last,
            "lake_rows_written": written,
        }))?;
        span.record("lake_version", done.version);
        Ok((done.version, batches))
    }

    /// Milliseconds since the players last caught up with the lake.
    #[must_use]
    pub fn follow_lag_ms(&self) -> u64 {
        self.last_sync
            .lock()
            .map_or(0, |t| t.elapsed().as_millis() as u64)
    }

    #[must_use]
    pub fn config(&self) -> &ResultsConfig {
        &self.cfg
    }
}

/// The matches of a flush's batches as a reader of the lake reads them back (the same rows in
/// the same order), each with whether it is of the artifact's mode. `None` when a batch cannot
/// be read so (the caller reads the lake instead).
fn own_matches(
    art: &Artifact,
    batches: &[arrow_array::RecordBatch],
) -> Option<Vec<(FinishedMatch, bool)>> {
    let mut out = Vec::new();
    for b in batches {
        match mm_lake::results::finished_of_batch(b, "flush") {
            Ok(ms) => out.extend(ms.into_iter().map(|(mode, m)| {
                let ours = serves(art, &mode);
                (m, ours)
            })),
            Err(e) => {
                tracing::warn!(error = %e, "results: a flushed batch could not be read back");
                return None;
            }
        }
    }
    Some(out)
}

/// The settled state of `art`: its snapshot plus the lake's commits after its version.
fn settled_for(art: &Arc<Artifact>, lake: &Lake) -> Result<Settled, ServeError> {
    let from = match art.manifest.data.lake_version {
        Some(v) => v,
        None => {
            let v = lake.version().unwrap_or(-1);
            tracing::warn!(
                model_version = %art.manifest.model_version,
                "the artifact records no lake version; players follow the lake from version {v}"
            );
            v
        }
    };
    let mut settled = Settled::new(art, from)?;
    match read_new(lake, art, from) {
        Ok(Some((m, to))) => settled.advance(art, &m, to),
        Ok(None) => {}
        Err(LakeError::LogTruncated { .. }) => {
            tracing::warn!(
                from,
                "the lake's log no longer holds the commits after the artifact's version; \
                 players start from the snapshot"
            );
            settled.version = lake.version().unwrap_or(from);
        }
        Err(e) => return Err(live_err(e)),
    }
    Ok(settled)
}

/// A player's score as `Score` gives it.
#[must_use]
pub fn score_of(art: &Artifact, s: &PlayerState, now_ms: i64) -> proto::PlayerScore {
    let m = Member::from_state(art, s, now_ms, false);
    crate::report::player_score(
        &s.player_id,
        art.snapshot.position(&s.player_id).is_some(),
        &m,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thread's name and, on Linux, whether it runs as `SCHED_IDLE`.
    fn here() -> (Option<String>, bool) {
        let name = std::thread::current().name().map(str::to_string);
        #[cfg(target_os = "linux")]
        let idle = matches!(
            thread_priority::unix::thread_schedule_policy(),
            Ok(thread_priority::unix::ThreadSchedulePolicy::Normal(
                thread_priority::unix::NormalThreadSchedulePolicy::Idle
            ))
        );
        #[cfg(not(target_os = "linux"))]
        let idle = false;
        (name, idle)
    }

    #[test]
    fn only_the_flush_threads_work_runs_in_the_background() {
        let bg = Background::start().expect("the background thread starts");
        let caller = std::thread::Builder::new()
            .name("caller".into())
            .spawn(move || {
                let before = bg.run(here);
                Live::become_flusher();
                let mut borrowed = vec![1, 2];
                let after = bg.run(|| {
                    borrowed.push(3);
                    here()
                });
                (before, after, borrowed, here())
            })
            .expect("spawn");
        let (before, after, borrowed, own) = caller.join().expect("the caller runs");
        assert_eq!(
            before,
            (Some("caller".into()), false),
            "not the flush thread: inline"
        );
        assert_eq!(after.0.as_deref(), Some("mm-serve-flushbg"));
        // SCHED_IDLE needs no privilege on Linux; the flush thread keeps its own priority.
        assert_eq!(after.1, cfg!(target_os = "linux"));
        assert_eq!(own, (Some("caller".into()), false));
        assert_eq!(
            borrowed,
            vec![1, 2, 3],
            "the work borrows the caller's data"
        );
    }
}
