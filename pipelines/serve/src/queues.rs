//! The team queues of the service: named queues of party searches, each with its team size and
//! policy (Call of Duty rules, quality threshold, or team EOMM), ticked by the client.
//!
//! A party's members are scored with the artifact current when it enqueues (skill, percentile,
//! churn after each outcome as of its search start); a queue's lobby models (team win model,
//! party adjustment) are those of the artifact current when the queue was created.

use std::collections::HashMap;
use std::sync::Mutex;

use mm_artifact::Artifact;
use mm_matcher::backfill::{Lobbies, LobbyId, tick_with_backfill};
use mm_matcher::cod::{CodConfig, CodRules, PartialLobbies};
use mm_matcher::eomm_teams::{EommTeams, EommTeamsConfig};
use mm_matcher::queue::{
    Input, Lobby, LobbyModels, MAX_TEAM_SIZE, Member, Mode, Policy, Queue, QueueError, Search,
    SearchId,
};
use mm_matcher::threshold::{ThresholdConfig, ThresholdPolicy};
use tonic::Status;

use crate::proto;

/// The most searches one queue holds.
pub const MAX_QUEUED: usize = 100_000;

/// The most lobbies in play one queue keeps for backfill: past it, the oldest are ended (a
/// client that never ends its lobbies does not grow the service without bound).
pub const MAX_IN_PLAY: usize = 100_000;

struct QueueState {
    team_size: usize,
    policy_kind: proto::QueuePolicy,
    /// Partial lobbies (the CoD policy's; `None`: off).
    partial: Option<PartialLobbies>,
    queue: Queue,
    policy: Box<dyn Policy + Send>,
    /// The search each queued player is in, and each search's players: a player is in one
    /// search of a queue at a time.
    searching: HashMap<String, u64>,
    players: HashMap<u64, Vec<String>>,
    /// The lobbies in play (formed by a tick, not yet ended) and the CoD rules that backfill
    /// them; each placed search's lobby and players, in the order of its members.
    lobbies: Lobbies,
    cod: CodConfig,
    in_play: HashMap<u64, (LobbyId, Vec<String>)>,
}

impl QueueState {
    /// Forgets the players of searches that left the queue.
    fn left(&mut self, search: u64) {
        for p in self.players.remove(&search).unwrap_or_default() {
            self.searching.remove(&p);
        }
    }

    /// A search placed in lobby `lobby`: its players leave the queue and play there.
    fn placed(&mut self, search: u64, lobby: LobbyId) {
        let players = self.players.remove(&search).unwrap_or_default();
        for p in &players {
            self.searching.remove(p);
        }
        self.in_play.insert(search, (lobby, players));
    }

    /// Ends a lobby in play and forgets its searches.
    fn end(&mut self, lobby: LobbyId) -> Result<(), Status> {
        let l = self
            .lobbies
            .close(lobby)
            .map_err(|e| Status::not_found(e.to_string()))?;
        for s in l.teams.iter().flatten() {
            self.in_play.remove(&s.id);
        }
        Ok(())
    }
}

/// The player's current state, when the service knows one fresher than the artifact's.
pub type Known<'a> = &'a dyn Fn(&str) -> Option<mm_artifact::snapshot::PlayerState>;

/// Every queue of the service, by name.
#[derive(Default)]
pub struct Queues {
    inner: Mutex<HashMap<String, QueueState>>,
}

impl std::fmt::Debug for Queues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queues").finish_non_exhaustive()
    }
}

fn queue_status(e: &QueueError) -> Status {
    match e {
        QueueError::DuplicateId(_) => Status::already_exists(e.to_string()),
        QueueError::Unknown(_) => Status::not_found(e.to_string()),
        _ => Status::invalid_argument(e.to_string()),
    }
}

fn input_of(s: &str) -> Result<Input, Status> {
    match s {
        "" | "controller" => Ok(Input::Controller),
        "keyboard_mouse" => Ok(Input::KeyboardMouse),
        "touch" => Ok(Input::Touch),
        other => Err(Status::invalid_argument(format!(
            "input {other:?} is not controller, keyboard_mouse or touch"
        ))),
    }
}

/// A player's member record: from the state the service keeps (reported matches included), or
/// the artifact's snapshot, or a new player's.
fn member_of(art: &Artifact, known: Known<'_>, id: &str, now_ms: i64, in_party: bool) -> Member {
    match known(id) {
        Some(s) => Member::from_state(art, &s, now_ms, in_party),
        None => Member::lookup(art, id, now_ms, in_party),
    }
}

/// The search of an enqueued party, its players' ids, data centres and platform checked.
fn search_of(art: &Artifact, party: &proto::Party, known: Known<'_>) -> Result<Search, Status> {
    if let Some((k, _)) = party
        .player_ids
        .iter()
        .enumerate()
        .find(|(_, id)| id.is_empty())
    {
        return Err(Status::invalid_argument(format!(
            "player {k}: the id is empty"
        )));
    }
    if let Some(id) = first_twice(&party.player_ids) {
        return Err(Status::invalid_argument(format!(
            "player {id} is twice in the party"
        )));
    }
    let in_party = party.player_ids.len() > 1;
    let members: Vec<Member> = party
        .player_ids
        .iter()
        .map(|id| member_of(art, known, id, party.start_ms, in_party))
        .collect();
    let mut pings: Vec<(u16, f32)> = Vec::with_capacity(party.pings_ms.len());
    for (&dc, &ms) in &party.pings_ms {
        let dc = u16::try_from(dc)
            .map_err(|_| Status::invalid_argument(format!("data centre {dc} is above 65535")))?;
        pings.push((dc, ms));
    }
    pings.sort_by_key(|p| p.0);
    Ok(Search {
        id: party.search_id,
        members,
        start_ms: party.start_ms,
        lat: party.lat,
        lon: party.lon,
        input: input_of(&party.input)?,
        platform: u8::try_from(party.platform).map_err(|_| {
            Status::invalid_argument(format!("platform {} is above 255", party.platform))
        })?,
        crossplay: party.crossplay,
        pings,
    })
}

/// The partial lobbies a queue spec asks for.
fn partial_of(
    spec: &proto::QueueSpec,
    kind: proto::QueuePolicy,
    team_size: usize,
) -> Result<Option<PartialLobbies>, Status> {
    let Some(after_s) = spec.partial_after_s else {
        return Ok(None);
    };
    if kind != proto::QueuePolicy::Cod {
        return Err(Status::invalid_argument(format!(
            "partial lobbies are for QUEUE_POLICY_COD only, not {kind:?}"
        )));
    }
    if !after_s.is_finite() || after_s < 0.0 {
        return Err(Status::invalid_argument(format!(
            "partial_after_s {after_s} is not a wait in seconds"
        )));
    }
    let min_players = usize::try_from(spec.partial_min_players)
        .unwrap_or(usize::MAX)
        .max(2);
    if min_players > 2 * team_size {
        return Err(Status::invalid_argument(format!(
            "partial_min_players {min_players} is more than a {team_size}v{team_size} lobby holds"
        )));
    }
    Ok(Some(PartialLobbies {
        after_s,
        min_players,
    }))
}

fn new_policy(
    kind: proto::QueuePolicy,
    team_size: usize,
    partial: Option<PartialLobbies>,
    models: LobbyModels,
) -> Box<dyn Policy + Send> {
    match kind {
        proto::QueuePolicy::Cod => Box::new(CodRules::new(
            CodConfig {
                partial,
                ..CodConfig::new(team_size)
            },
            models,
        )),
        proto::QueuePolicy::Threshold => Box::new(ThresholdPolicy::new(
            ThresholdConfig::new(team_size),
            models,
        )),
        proto::QueuePolicy::Eomm => Box::new(EommTeams::new(
            EommTeamsConfig::for_models(team_size, &models),
            models,
        )),
    }
}

/// `SkillSimilarity` as `skill_similarity`.
fn snake(debug_name: &str) -> String {
    let mut out = String::new();
    for (i, c) in debug_name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn lobby_of(id: LobbyId, l: &Lobby) -> proto::Lobby {
    let q = &l.quality;
    let criteria = [
        ("balance", q.balance),
        ("skill_spread", q.skill_spread),
        ("experience", q.experience),
        ("top_player", q.top_player),
        ("parties", q.parties),
        ("ping", q.ping),
        ("wait", q.wait),
    ];
    proto::Lobby {
        team_a: l.teams[0].clone(),
        team_b: l.teams[1].clone(),
        team_a_outcome: Some(proto::OutcomeProbs {
            win: l.p[0],
            draw: l.p[1],
            loss: l.p[2],
        }),
        expected_churn: l.expected_churn,
        quality: q.total,
        quality_criteria: criteria.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        rescued: l.rescued,
        max_wait_ms: l.max_wait_ms,
        data_centre: l.data_centre.map(u32::from),
        worst_ping_ms: l.worst_ping_ms,
        lobby_id: id,
    }
}

/// The first id that appears twice in `ids`.
pub(crate) fn first_twice(ids: &[String]) -> Option<&str> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    ids.iter()
        .find(|id| !seen.insert(id.as_str()))
        .map(String::as_str)
}

impl Queues {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, QueueState>> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Adds a party to its queue (created on first use).
    pub fn enqueue(
        &self,
        art: &Artifact,
        req: &proto::EnqueueRequest,
        known: Known<'_>,
    ) -> Result<proto::EnqueueResponse, Status> {
        let spec = req
            .queue
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no queue given"))?;
        let party = req
            .party
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("no party given"))?;
        if spec.name.is_empty() {
            return Err(Status::invalid_argument("the queue has no name"));
        }
        let team_size = usize::try_from(spec.team_size).unwrap_or(usize::MAX);
        if team_size == 0 || team_size > MAX_TEAM_SIZE {
            return Err(Status::invalid_argument(format!(
                "team size {} is outside 1..={MAX_TEAM_SIZE}",
                spec.team_size
            )));
        }
        let kind = proto::QueuePolicy::try_from(spec.policy)
            .map_err(|_| Status::invalid_argument(format!("unknown policy {}", spec.policy)))?;
        let partial = partial_of(spec, kind, team_size)?;
        let search = search_of(art, party, known)?;
        let mut queues = self.lock();
        if !queues.contains_key(&spec.name) {
            let models = LobbyModels::from_artifact(art).ok_or_else(|| {
                Status::failed_precondition(
                    "the artifact has no team win model (too few matches when it was fitted)",
                )
            })?;
            let queue = Queue::new(Mode { team_size }).map_err(|e| queue_status(&e))?;
            queues.insert(
                spec.name.clone(),
                QueueState {
                    team_size,
                    policy_kind: kind,
                    queue,
                    policy: new_policy(kind, team_size, partial, models),
                    partial,
                    searching: HashMap::new(),
                    players: HashMap::new(),
                    lobbies: Lobbies::new(Mode { team_size }),
                    cod: CodConfig::new(team_size),
                    in_play: HashMap::new(),
                },
            );
        }
        let q = queues
            .get_mut(&spec.name)
            .ok_or_else(|| Status::internal("the queue vanished"))?;
        if q.team_size != team_size || q.policy_kind != kind {
            return Err(Status::failed_precondition(format!(
                "queue {:?} runs {}v{} under {:?}, not {team_size}v{team_size} under {kind:?}",
                spec.name, q.team_size, q.team_size, q.policy_kind
            )));
        }
        if q.partial != partial {
            return Err(Status::failed_precondition(format!(
                "queue {:?} runs with partial lobbies {:?}, not {partial:?}",
                spec.name, q.partial
            )));
        }
        if q.queue.len() >= MAX_QUEUED {
            return Err(Status::resource_exhausted(format!(
                "queue {:?} holds {MAX_QUEUED} searches",
                spec.name
            )));
        }
        if let Some((id, other)) = party
            .player_ids
            .iter()
            .find_map(|id| q.searching.get(id).map(|s| (id, s)))
        {
            return Err(Status::invalid_argument(format!(
                "player {id} is already searching in queue {:?} (search {other})",
                spec.name
            )));
        }
        q.queue.push(search).map_err(|e| queue_status(&e))?;
        for id in &party.player_ids {
            q.searching.insert(id.clone(), party.search_id);
        }
        q.players.insert(party.search_id, party.player_ids.clone());
        Ok(proto::EnqueueResponse {
            model_version: art.manifest.model_version.clone(),
            queued_searches: q.queue.len() as u64,
        })
    }

    /// Removes a search; `removed` is false when it was not queued.
    pub fn cancel(&self, req: &proto::CancelRequest) -> Result<proto::CancelResponse, Status> {
        let mut queues = self.lock();
        let q = queues
            .get_mut(&req.queue)
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue)))?;
        let removed = q.queue.get(req.search_id).is_some();
        q.queue.remove(&[req.search_id]);
        q.left(req.search_id);
        Ok(proto::CancelResponse {
            removed,
            queued_searches: q.queue.len() as u64,
        })
    }

    /// Fills the open lobbies, then forms the lobbies of one tick at `now_ms`; removes their
    /// searches from the queue and keeps the new lobbies in play.
    pub fn tick(
        &self,
        version: &str,
        req: &proto::TickRequest,
    ) -> Result<proto::TickResponse, Status> {
        let mut queues = self.lock();
        let q = queues
            .get_mut(&req.queue)
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue)))?;
        let (filled, formed) = tick_with_backfill(
            q.policy.as_mut(),
            &mut q.lobbies,
            &q.cod,
            req.now_ms,
            &mut q.queue,
        );
        for b in &filled {
            q.placed(b.search, b.lobby);
        }
        for (id, l) in &formed {
            for s in l.search_ids() {
                q.placed(s, *id);
            }
        }
        let over = q.lobbies.len().saturating_sub(MAX_IN_PLAY);
        let oldest: Vec<LobbyId> = q.lobbies.iter().take(over).map(|l| l.id).collect();
        for id in oldest {
            q.end(id)?;
        }
        Ok(proto::TickResponse {
            model_version: version.to_string(),
            lobbies: formed.iter().map(|(id, l)| lobby_of(*id, l)).collect(),
            queued_searches: q.queue.len() as u64,
            backfills: filled
                .iter()
                .map(|b| proto::BackfillAssignment {
                    lobby_id: b.lobby,
                    search_id: b.search,
                    team: u32::from(b.team == 1),
                    slot_open_ms: b.slot_open_ms,
                })
                .collect(),
            open_slots: q.lobbies.open_slots() as u64,
        })
    }

    /// Players leave a lobby in play and its open slots are offered to the queue. Every
    /// leaving player is checked before any leaves.
    pub fn open_backfill(
        &self,
        art: &Artifact,
        req: &proto::OpenBackfillRequest,
        known: Known<'_>,
    ) -> Result<proto::OpenBackfillResponse, Status> {
        let mut queues = self.lock();
        let q = queues
            .get_mut(&req.queue)
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue)))?;
        let lobby = q
            .lobbies
            .get(req.lobby_id)
            .ok_or_else(|| Status::not_found(format!("no lobby {} in play", req.lobby_id)))?;
        if let Some(id) = first_twice(&req.leaving_player_ids) {
            return Err(Status::invalid_argument(format!(
                "player {id} leaves twice"
            )));
        }
        // Each leaver's (search, member index) as the lobby holds them before anyone leaves.
        let mut leaving = Vec::with_capacity(req.leaving_player_ids.len());
        for id in &req.leaving_player_ids {
            let place = lobby.teams.iter().flatten().find_map(|s| {
                let (_, ps) = q.in_play.get(&s.id)?;
                Some((s.id, ps.iter().position(|p| p == id)?))
            });
            leaving.push(place.ok_or_else(|| {
                Status::invalid_argument(format!("player {id} is not in lobby {}", req.lobby_id))
            })?);
        }
        // Highest member first when they leave, so that the indices still to remove stay valid.
        leaving.sort_unstable();
        let mut moved = Vec::new();
        if req.intermission {
            // The players' current state (reported matches included) for the balance.
            let searches: Vec<SearchId> = lobby.parties().map(|s| s.id).collect();
            for search in searches {
                let Some((_, players)) = q.in_play.get(&search) else {
                    continue;
                };
                let in_party = players.len() > 1;
                let fresh: Vec<Member> = players
                    .iter()
                    .map(|id| member_of(art, known, id, req.now_ms, in_party))
                    .collect();
                q.lobbies
                    .set_members(req.lobby_id, search, fresh)
                    .map_err(|e| Status::internal(e.to_string()))?;
            }
            moved = q
                .lobbies
                .intermission(req.lobby_id, &leaving, req.now_ms)
                .map_err(|e| Status::internal(e.to_string()))?
                .moved;
        } else {
            for &(search, member) in leaving.iter().rev() {
                q.lobbies
                    .leave(req.lobby_id, search, member)
                    .map_err(|e| Status::internal(e.to_string()))?;
            }
        }
        for &(search, member) in leaving.iter().rev() {
            if let Some((_, players)) = q.in_play.get_mut(&search) {
                players.remove(member);
                if players.is_empty() {
                    q.in_play.remove(&search);
                }
            }
        }
        q.lobbies
            .open_backfill(req.lobby_id, req.now_ms)
            .map_err(|e| Status::not_found(e.to_string()))?;
        let l = q
            .lobbies
            .get(req.lobby_id)
            .ok_or_else(|| Status::internal("the lobby vanished"))?;
        let [a, b] = l.players();
        let u = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        Ok(proto::OpenBackfillResponse {
            players_a: u(a),
            players_b: u(b),
            open_slots: u((2 * q.team_size).saturating_sub(a + b)),
            moved: moved
                .into_iter()
                .map(|(search_id, team)| proto::TeamMove {
                    search_id,
                    team: u(team),
                })
                .collect(),
        })
    }

    /// Stops offering a lobby's slots, or ends it.
    pub fn close_backfill(
        &self,
        req: &proto::CloseBackfillRequest,
    ) -> Result<proto::CloseBackfillResponse, Status> {
        let mut queues = self.lock();
        let q = queues
            .get_mut(&req.queue)
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue)))?;
        if req.end_lobby {
            q.end(req.lobby_id)?;
        } else {
            q.lobbies
                .close_backfill(req.lobby_id)
                .map_err(|e| Status::not_found(e.to_string()))?;
        }
        Ok(proto::CloseBackfillResponse {})
    }

    /// Why a search is still queued.
    pub fn explain(&self, req: &proto::ExplainRequest) -> Result<proto::ExplainResponse, Status> {
        let queues = self.lock();
        let q = queues
            .get(&req.queue)
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue)))?;
        if let Some(lobby) = req.lobby_id {
            let e = q
                .lobbies
                .explain_by(
                    lobby,
                    req.now_ms,
                    &q.queue,
                    &q.cod,
                    q.policy.backfill_rule().as_ref(),
                )
                .map_err(|e| Status::not_found(e.to_string()))?;
            return Ok(proto::ExplainResponse {
                wait_ms: e.open_since_ms.map_or(0, |t| (req.now_ms - t).max(0)),
                players_found: (e.players[0] + e.players[1]) as u64,
                players_needed: 2 * q.team_size as u64,
                blockers: e
                    .refused
                    .iter()
                    .map(|&(rule, n)| proto::Blocker {
                        rule: snake(&format!("{rule:?}")),
                        candidates: n as u64,
                        relaxes_at_ms: None,
                        detail: format!(
                            "{n} queued searches refused; {} would join alone",
                            e.admissible
                        ),
                    })
                    .collect(),
                max_wait_at_ms: 0,
            });
        }
        let e = q
            .policy
            .explain(req.now_ms, &q.queue, req.search_id)
            .map_err(|e| queue_status(&e))?;
        Ok(proto::ExplainResponse {
            wait_ms: e.wait_ms,
            players_found: e.players_found as u64,
            players_needed: e.players_needed as u64,
            blockers: e
                .blockers
                .iter()
                .map(|b| proto::Blocker {
                    rule: snake(&format!("{:?}", b.rule)),
                    candidates: b.candidates as u64,
                    relaxes_at_ms: b.relaxes_at_ms,
                    detail: b.detail.clone(),
                })
                .collect(),
            max_wait_at_ms: e.max_wait_at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn none(_: &str) -> Option<mm_artifact::snapshot::PlayerState> {
        None
    }

    fn artifact(tag: &str) -> (Artifact, std::path::PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("mm-serve-queues-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (m, files) = mm_artifact::synthetic::artifact(60, 9);
        mm_artifact::Store::new(&dir)
            .publish("v1", m, &files, true, None)
            .unwrap();
        (mm_artifact::Store::new(&dir).open_latest().unwrap(), dir)
    }

    /// One tick of the tests' queue "duos".
    fn tick_duos(qs: &Queues, now_ms: i64) -> proto::TickResponse {
        qs.tick(
            "v1",
            &proto::TickRequest {
                queue: "duos".into(),
                now_ms,
            },
        )
        .unwrap()
    }

    fn enqueue(id: u64, players: &[String], policy: proto::QueuePolicy) -> proto::EnqueueRequest {
        proto::EnqueueRequest {
            queue: Some(proto::QueueSpec {
                name: "duos".into(),
                team_size: 2,
                policy: policy as i32,
                ..Default::default()
            }),
            party: Some(proto::Party {
                search_id: id,
                player_ids: players.to_vec(),
                start_ms: 1_000,
                lat: 48.8,
                lon: 2.3,
                crossplay: true,
                ..Default::default()
            }),
        }
    }

    #[test]
    fn parties_queue_tick_into_a_lobby_and_bad_requests_are_refused() {
        let (art, dir) = artifact("tick");
        let qs = Queues::default();
        let id = |i: usize| art.snapshot.id(i).to_string();
        let cod = proto::QueuePolicy::Cod;
        for k in 0..2 {
            qs.enqueue(&art, &enqueue(k, &[id(k as usize)], cod), &none)
                .unwrap();
        }
        // A party of two fills the second team.
        let r = qs
            .enqueue(&art, &enqueue(9, &[id(10), id(11)], cod), &none)
            .unwrap();
        assert_eq!(r.queued_searches, 3);
        let code = |r: Result<proto::EnqueueResponse, Status>| r.unwrap_err().code();
        assert_eq!(
            code(qs.enqueue(&art, &enqueue(9, &[id(20)], cod), &none)),
            tonic::Code::AlreadyExists
        );
        let three: Vec<String> = (30..33).map(id).collect();
        assert_eq!(
            code(qs.enqueue(&art, &enqueue(7, &three, cod), &none)),
            tonic::Code::InvalidArgument
        );
        let threshold = proto::QueuePolicy::Threshold;
        assert_eq!(
            code(qs.enqueue(&art, &enqueue(8, &[id(40)], threshold), &none)),
            tonic::Code::FailedPrecondition
        );
        let mut nan = enqueue(6, &[id(41)], cod);
        nan.party.as_mut().unwrap().lat = f64::NAN;
        assert_eq!(
            code(qs.enqueue(&art, &nan, &none)),
            tonic::Code::InvalidArgument
        );

        // Explain a queued search before the tick, then tick well past the searches' start.
        let e = qs
            .explain(&proto::ExplainRequest {
                queue: "duos".into(),
                search_id: 0,
                now_ms: 1_000,
                lobby_id: None,
            })
            .unwrap();
        assert_eq!(e.players_needed, 4);
        assert!(e.max_wait_at_ms > 1_000);
        let t = qs
            .tick(
                "v1",
                &proto::TickRequest {
                    queue: "duos".into(),
                    now_ms: 301_000,
                },
            )
            .unwrap();
        assert_eq!(t.lobbies.len(), 1, "{t:?}");
        assert_eq!(t.queued_searches, 0);
        let l = &t.lobbies[0];
        assert_eq!(
            l.team_a.len() + l.team_b.len(),
            3,
            "two solo searches and the duo"
        );
        let p = l.team_a_outcome.as_ref().unwrap();
        assert!((p.win + p.draw + p.loss - 1.0).abs() < 1e-9);
        assert_eq!(l.quality_criteria.len(), 7);

        // Cancel: a queued search goes, an unknown one is reported as not removed.
        qs.enqueue(&art, &enqueue(50, &[id(50)], cod), &none)
            .unwrap();
        let c = qs
            .cancel(&proto::CancelRequest {
                queue: "duos".into(),
                search_id: 50,
            })
            .unwrap();
        assert!(c.removed && c.queued_searches == 0);
        let c = qs
            .cancel(&proto::CancelRequest {
                queue: "duos".into(),
                search_id: 50,
            })
            .unwrap();
        assert!(!c.removed);

        // A player is in one search of a queue at a time: a second search with them is refused
        // by id, and so is a party that names a player twice. A player whose search was
        // cancelled, or formed a lobby, may search again.
        qs.enqueue(&art, &enqueue(51, &[id(50)], cod), &none)
            .unwrap();
        let e = qs
            .enqueue(&art, &enqueue(52, &[id(55), id(50)], cod), &none)
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains(&id(50)), "{e:?}");
        let e = qs
            .enqueue(&art, &enqueue(53, &[id(56), id(56)], cod), &none)
            .unwrap_err();
        assert!(e.message().contains(&id(56)), "{e:?}");
        qs.enqueue(&art, &enqueue(54, &[id(0), id(10)], cod), &none)
            .unwrap();
        let none = qs.tick(
            "v1",
            &proto::TickRequest {
                queue: "solo".into(),
                now_ms: 0,
            },
        );
        assert_eq!(none.unwrap_err().code(), tonic::Code::NotFound);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn rule_names_are_snake_case() {
        assert_eq!(snake("SkillSimilarity"), "skill_similarity");
        assert_eq!(snake("Ping"), "ping");
        assert_eq!(snake("NotEnoughPlayers"), "not_enough_players");
    }

    /// A queue with partial lobbies: two singles in a 2v2 queue form a 1v1 lobby once the
    /// oldest has waited, its two open slots are offered, and two more singles are backfilled at
    /// the next tick. Partial lobbies under another policy, a bad wait or too many players, and a
    /// second spec for the same queue that differs, are refused.
    #[test]
    fn a_partial_lobby_forms_and_is_backfilled() {
        let (art, _dir) = artifact("partial");
        let qs = Queues::default();
        let id = |i: usize| art.snapshot.id(i).to_string();
        let with = |k: u64, player: usize, policy, after: Option<f64>, min: u32| {
            let mut r = enqueue(k, &[id(player)], policy);
            let spec = r.queue.as_mut().unwrap();
            (spec.partial_after_s, spec.partial_min_players) = (after, min);
            r
        };
        let cod = proto::QueuePolicy::Cod;
        for (policy, after, min) in [
            (proto::QueuePolicy::Threshold, Some(60.0), 2),
            (cod, Some(-1.0), 2),
            (cod, Some(f64::NAN), 2),
            (cod, Some(60.0), 5),
        ] {
            let e = qs
                .enqueue(&art, &with(0, 0, policy, after, min), &none)
                .unwrap_err();
            assert_eq!(
                e.code(),
                tonic::Code::InvalidArgument,
                "{policy:?} {after:?} {min}"
            );
        }
        qs.enqueue(&art, &with(0, 0, cod, Some(60.0), 2), &none)
            .unwrap();
        let e = qs
            .enqueue(&art, &with(1, 1, cod, None, 0), &none)
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::FailedPrecondition);
        qs.enqueue(&art, &with(1, 1, cod, Some(60.0), 2), &none)
            .unwrap();
        let tick = |now_ms| tick_duos(&qs, now_ms);
        let t = tick(200_000);
        assert_eq!(t.lobbies.len(), 1, "{t:?}");
        assert_eq!(
            (t.lobbies[0].team_a.len(), t.lobbies[0].team_b.len()),
            (1, 1)
        );
        assert_eq!(t.open_slots, 2);
        // A single alone would make it 2v1: two join together.
        qs.enqueue(&art, &with(2, 2, cod, Some(60.0), 2), &none)
            .unwrap();
        qs.enqueue(&art, &with(3, 3, cod, Some(60.0), 2), &none)
            .unwrap();
        let t = tick(330_000);
        assert_eq!((t.backfills.len(), t.open_slots), (2, 0), "{t:?}");
    }

    /// Intermission: the teams are balanced again on the players' current raw skill (here the
    /// state the service learned since the lobby formed: team A's two players are now the
    /// strongest, team B's the weakest), one player of each side moves, and a leaver's slot is
    /// offered; without `intermission` nobody moves.
    #[test]
    fn intermission_balances_the_lobby_on_current_skill() {
        let (art, _dir) = artifact("intermission");
        let qs = Queues::default();
        let id = |i: usize| art.snapshot.id(i).to_string();
        for k in 0..4 {
            qs.enqueue(
                &art,
                &enqueue(k, &[id(k as usize)], proto::QueuePolicy::Cod),
                &none,
            )
            .unwrap();
        }
        let t = tick_duos(&qs, 200_000);
        let l = &t.lobbies[0];
        let team_a: Vec<String> = l.team_a.iter().map(|&k| id(k as usize)).collect();
        let states: HashMap<String, mm_artifact::snapshot::PlayerState> = (0..4)
            .map(|k| {
                let mut s = art.snapshot.get(&id(k)).unwrap();
                s.raw_skill = if team_a.contains(&id(k)) { 0.9 } else { -0.9 };
                (id(k), s)
            })
            .collect();
        let now = |pid: &str| states.get(pid).cloned();
        let ask = |leaving: Vec<String>, intermission| proto::OpenBackfillRequest {
            queue: "duos".into(),
            lobby_id: l.lobby_id,
            leaving_player_ids: leaving,
            now_ms: 300_000,
            intermission,
        };
        let kept = qs.open_backfill(&art, &ask(vec![], false), &now).unwrap();
        assert!(kept.moved.is_empty());
        let r = qs.open_backfill(&art, &ask(vec![], true), &now).unwrap();
        let mut moved: Vec<(u64, u32)> = r.moved.iter().map(|m| (m.search_id, m.team)).collect();
        moved.sort_unstable();
        assert_eq!(moved.len(), 2, "{r:?}");
        assert_eq!(
            moved.iter().map(|m| m.1).sum::<u32>(),
            1,
            "one each way: {moved:?}"
        );
        assert_eq!((r.players_a, r.players_b, r.open_slots), (2, 2, 0));
        // Balanced now: the next intermission moves nobody, and a leaver's slot is offered.
        let leaver = id(usize::try_from(l.team_b[0]).unwrap());
        let r = qs
            .open_backfill(&art, &ask(vec![leaver], true), &now)
            .unwrap();
        assert!(r.moved.is_empty(), "{r:?}");
        assert_eq!(r.players_a + r.players_b, 3);
        assert_eq!(r.open_slots, 1);
    }

    /// A lobby in play: a player leaves, its slot is offered, the next tick fills it before it
    /// forms new lobbies; a request naming a player not in the lobby changes nothing; an ended
    /// lobby is gone.
    #[test]
    fn a_leaver_s_slot_is_backfilled_at_the_next_tick() {
        let (art, dir) = artifact("backfill");
        let qs = Queues::default();
        let id = |i: usize| art.snapshot.id(i).to_string();
        let open = proto::QueuePolicy::Cod;
        for k in 0..4 {
            qs.enqueue(&art, &enqueue(k, &[id(k as usize)], open), &none)
                .unwrap();
        }
        let tick = |now_ms| tick_duos(&qs, now_ms);
        // Past the maximum wait: the four form one lobby whatever their skills.
        let t = tick(200_000);
        assert_eq!((t.lobbies.len(), t.backfills.len()), (1, 0));
        let lobby = t.lobbies[0].lobby_id;
        let leaver = usize::try_from(t.lobbies[0].team_a[0]).unwrap();
        let ask = |ids: &[String]| proto::OpenBackfillRequest {
            queue: "duos".into(),
            lobby_id: lobby,
            leaving_player_ids: ids.to_vec(),
            now_ms: 200_000,
            intermission: false,
        };
        // One unknown player among them: refused, and nobody left.
        let bad = qs
            .open_backfill(&art, &ask(&[id(leaver), id(50)]), &none)
            .unwrap_err();
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
        assert!(bad.message().contains(&id(50)), "{}", bad.message());
        let r = qs.open_backfill(&art, &ask(&[id(leaver)]), &none).unwrap();
        assert_eq!((r.players_a, r.players_b, r.open_slots), (1, 2, 1));
        let why = qs
            .explain(&proto::ExplainRequest {
                queue: "duos".into(),
                now_ms: 200_000,
                lobby_id: Some(lobby),
                ..Default::default()
            })
            .unwrap();
        assert_eq!((why.players_found, why.players_needed), (3, 4));
        assert!(why.blockers.is_empty(), "nobody is queued: {why:?}");
        // A newcomer fills the slot once the lobby's backoff (from when its slot opened) admits
        // any skill: 120 s on.
        qs.enqueue(&art, &enqueue(10, &[id(20)], open), &none)
            .unwrap();
        let t = tick(320_000);
        assert_eq!(t.backfills.len(), 1, "{t:?}");
        assert_eq!(
            (
                t.backfills[0].lobby_id,
                t.backfills[0].search_id,
                t.backfills[0].team
            ),
            (lobby, 10, 0)
        );
        assert_eq!((t.backfills[0].slot_open_ms, t.open_slots), (120_000, 0));
        assert_eq!(t.queued_searches, 0);
        let end = |end_lobby| proto::CloseBackfillRequest {
            queue: "duos".into(),
            lobby_id: lobby,
            end_lobby,
        };
        qs.close_backfill(&end(false)).unwrap();
        qs.close_backfill(&end(true)).unwrap();
        assert_eq!(
            qs.close_backfill(&end(true)).unwrap_err().code(),
            tonic::Code::NotFound
        );
        assert_eq!(
            qs.open_backfill(&art, &ask(&[]), &none).unwrap_err().code(),
            tonic::Code::NotFound
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
