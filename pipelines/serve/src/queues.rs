//! The team queues of the service: named queues of party searches, each with its team size and
//! policy (Call of Duty rules, quality threshold, or team EOMM), ticked by the client.
//!
//! A party's members are scored with the artifact current when it enqueues (skill, percentile,
//! churn after each outcome as of its search start); a queue's lobby models (team win model,
//! party adjustment) are those of the artifact current when the queue was created.

use std::collections::HashMap;
use std::sync::Mutex;

use mm_artifact::Artifact;
use mm_matcher::cod::{CodConfig, CodRules};
use mm_matcher::eomm_teams::{EommTeams, EommTeamsConfig};
use mm_matcher::queue::{
    Input, Lobby, LobbyModels, MAX_TEAM_SIZE, Member, Mode, Policy, Queue, QueueError, Search,
};
use mm_matcher::threshold::{ThresholdConfig, ThresholdPolicy};
use tonic::Status;

use crate::proto;

/// The most searches one queue holds.
pub const MAX_QUEUED: usize = 100_000;

struct QueueState {
    team_size: usize,
    policy_kind: proto::QueuePolicy,
    queue: Queue,
    policy: Box<dyn Policy + Send>,
    /// The search each queued player is in, and each search's players: a player is in one
    /// search of a queue at a time.
    searching: HashMap<String, u64>,
    players: HashMap<u64, Vec<String>>,
}

impl QueueState {
    /// Forgets the players of searches that left the queue.
    fn left(&mut self, search: u64) {
        for p in self.players.remove(&search).unwrap_or_default() {
            self.searching.remove(&p);
        }
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

fn new_policy(
    kind: proto::QueuePolicy,
    team_size: usize,
    models: LobbyModels,
) -> Box<dyn Policy + Send> {
    match kind {
        proto::QueuePolicy::Cod => Box::new(CodRules::new(CodConfig::new(team_size), models)),
        proto::QueuePolicy::Threshold => Box::new(ThresholdPolicy::new(
            ThresholdConfig::new(team_size),
            models,
        )),
        proto::QueuePolicy::Eomm => {
            Box::new(EommTeams::new(EommTeamsConfig::new(team_size), models))
        }
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

fn lobby_of(l: &Lobby) -> proto::Lobby {
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
            .map(|id| match known(id) {
                Some(s) => Member::from_state(art, &s, party.start_ms, in_party),
                None => Member::lookup(art, id, party.start_ms, in_party),
            })
            .collect();
        let mut pings: Vec<(u16, f32)> = Vec::with_capacity(party.pings_ms.len());
        for (&dc, &ms) in &party.pings_ms {
            let dc = u16::try_from(dc).map_err(|_| {
                Status::invalid_argument(format!("data centre {dc} is above 65535"))
            })?;
            pings.push((dc, ms));
        }
        pings.sort_by_key(|p| p.0);
        let search = Search {
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
        };
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
                    policy: new_policy(kind, team_size, models),
                    searching: HashMap::new(),
                    players: HashMap::new(),
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

    /// Forms the lobbies of one tick at `now_ms` and removes their searches.
    pub fn tick(
        &self,
        version: &str,
        req: &proto::TickRequest,
    ) -> Result<proto::TickResponse, Status> {
        let mut queues = self.lock();
        let q = queues
            .get_mut(&req.queue)
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue)))?;
        let lobbies = q.policy.tick(req.now_ms, &mut q.queue);
        for l in &lobbies {
            for &s in l.teams.iter().flatten() {
                q.left(s);
            }
        }
        Ok(proto::TickResponse {
            model_version: version.to_string(),
            lobbies: lobbies.iter().map(lobby_of).collect(),
            queued_searches: q.queue.len() as u64,
        })
    }

    /// Why a search is still queued.
    pub fn explain(&self, req: &proto::ExplainRequest) -> Result<proto::ExplainResponse, Status> {
        let queues = self.lock();
        let q = queues
            .get(&req.queue)
            .ok_or_else(|| Status::not_found(format!("no queue {:?}", req.queue)))?;
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

    fn artifact() -> (Artifact, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("mm-serve-queues-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (m, files) = mm_artifact::synthetic::artifact(60, 9);
        mm_artifact::Store::new(&dir)
            .publish("v1", m, &files, true, None)
            .unwrap();
        (mm_artifact::Store::new(&dir).open_latest().unwrap(), dir)
    }

    fn enqueue(id: u64, players: &[String], policy: proto::QueuePolicy) -> proto::EnqueueRequest {
        proto::EnqueueRequest {
            queue: Some(proto::QueueSpec {
                name: "duos".into(),
                team_size: 2,
                policy: policy as i32,
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
        let (art, dir) = artifact();
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
}
