//! Lobbies that outlive the tick that formed them, and backfill under the Call of Duty rules
//! ("Team Balance", Grouping Phase, in the CoD paper).
//!
//! A formed lobby is recorded in [`Lobbies`] with its parties by team. A player who leaves
//! ([`Lobbies::leave`]) opens a slot; [`Lobbies::open_backfill`] offers the lobby's open slots to
//! the queue, and [`Lobbies::close`] ends the lobby. Each tick, [`tick_with_backfill`] fills the
//! open lobbies from the queue before the policy forms new lobbies from what is left.
//!
//! A backfill adds a set of queued searches to a lobby at once. The paper's grouping phase, for
//! "any prospective new lobby or backfill", needs one assignment of the parties to the teams
//! that fits, and its third goal is that "backfills never increase an existing team imbalance":
//! "Backfills will accept a search if the existing team size differential is not worsened". So a
//! 6v5 lobby takes a single player on the short team, while a 5v5 lobby takes two singles (or a
//! pair split, which parties never are: a pair does not fit) together, never one alone. The
//! searches join whole, each to the team the assignment gives it: of the assignments with the
//! least size differential, the one with the least difference of the teams' raw-skill sums.
//!
//! Each search in a backfill passes the CoD rules against every party already there, with the
//! backoff of its own wait and, for the lobby's parties, of the wait each had when it joined the
//! lobby plus the time the lobby's slots have been open (the bounds the lobby formed at, loosening
//! while its slots stay open; a lobby the maximum-wait rule formed, which placed its searches
//! whatever their own bounds, reads every party's at the lobby's longest wait when it formed):
//! skill similarity (each of the two within the other's accepted range), skill disparity (the
//! lobby's spread of player percentiles within every party's acceptable disparity, unless the
//! search does not widen it), delta ping to the lobby's data centre, and platforms. Toward a
//! lobby open for joins a search accepts the skill range it would accept
//! [`CodConfig::join_head_start_s`] seconds later (30 s by default): the paper's skill
//! similarity is "modified by ... if there is a high-quality lobby open for joins". Every lobby
//! offered for backfill formed under these rules (or the maximum-wait rule's, read as above)
//! and its team size differential was never worsened, so every one counts as such a lobby.
//!
//! Between two matches, [`Lobbies::intermission`] lets the leavers go and balances the teams
//! again (the seed: skill is considered "in team balancing at intermission"), by the lobby
//! phase's rule with the parties whole, and offers the slots the leavers opened.
//!
//! A partial lobby (the CoD policy's [`crate::cod::PartialLobbies`], off by default) is offered
//! for backfill as soon as [`tick_with_backfill`] records it.
//!
//! The CoD policy backfills by these rules alone; a policy may bring its own
//! ([`Policy::backfill_rule`], [`Lobbies::backfill_by`]). The threshold policy's replaces skill
//! similarity, disparity and delta ping, as its own lobbies form without them: a lobby takes
//! its K nearest searches by the policy's N-dimensional distance from the lobby's centre (its
//! players' mean location and percentile), nearest first while they fit, and the set must reach
//! the policy's lobby threshold at the age of its oldest (a joiner, or the lobby's parties'
//! longest wait when they joined plus the time its slots have been open, the age the CoD rules
//! give its parties), with the lobby's players fixed: the first such fill, starting from each
//! candidate in turn (nearest first), that fills every open slot. Team
//! EOMM's, which forms its lobbies inside the CoD rules, keeps them and chooses, among the
//! oldest-first fill, the fill nearest to the raw skill that evens the teams and alternatives
//! that each leave out one of the first's searches, the set that fills the most slots and then
//! leaves the lobby the least expected churn, within its balance bound or, for a lobby already
//! beyond it, not more uneven than it is (the seed's "backfills never increase an existing team
//! imbalance"). Under every rule the team size differential is never worsened and parties stay
//! whole. Slots open for the policy's maximum wait are filled by the CoD rules alone, as the
//! maximum-wait rule places a search its policy could not.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::cod::CodConfig;
use crate::geo::{EARTH_RADIUS_KM, unit_xyz};
use crate::knn::KdIndex;
use crate::queue::{
    BackfillRule, Distance, Lobby, MaxWaitRule, Mode, Policy, Queue, Rule, Scored, Search,
    SearchId, TickState, index_point, platforms_compatible, rescue_overdue, score_split,
};
use crate::teams::{Party, best_split};

/// A lobby's id, unique within [`Lobbies`].
pub type LobbyId = u64;

/// The most searches one backfill adds (the assignment search enumerates their subsets).
pub const MAX_BACKFILL_SEARCHES: usize = 16;

const EPS: f64 = 1e-9;

/// A lobby in play.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveLobby {
    pub id: LobbyId,
    /// The parties of each team as they are now (a party keeps the players who stay).
    pub teams: [Vec<Search>; 2],
    /// When its open slots were offered for backfill, ms since the epoch (`None`: not offered).
    pub open_since_ms: Option<i64>,
    /// The data centre it plays on, when pings are known.
    pub data_centre: Option<u16>,
    /// How long each party had searched when it joined the lobby (formed with it, or
    /// backfilled), ms, by search id; none for a lobby formed elsewhere ([`Lobbies::insert`]).
    /// A party's backoff in a backfill starts from there ([`Lobbies::backfill`]).
    pub waited_ms: BTreeMap<SearchId, i64>,
    /// Formed by the maximum-wait rule, which placed its searches whatever their own bounds: a
    /// backfill reads every party's backoff at the lobby's longest wait when it formed (the
    /// search the rule placed it for), not at the party's own.
    pub rescued: bool,
}

impl LiveLobby {
    /// Players on each team.
    #[must_use]
    pub fn players(&self) -> [usize; 2] {
        [0, 1].map(|t| self.teams[t].iter().map(|s| s.members.len()).sum())
    }

    /// The team size differential.
    #[must_use]
    pub fn differential(&self) -> usize {
        let [a, b] = self.players();
        a.abs_diff(b)
    }

    /// The parties of both teams, team A's first.
    pub fn parties(&self) -> impl Iterator<Item = &Search> {
        self.teams[0].iter().chain(&self.teams[1])
    }
}

/// One search placed in a lobby by a backfill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Backfill {
    pub lobby: LobbyId,
    pub search: SearchId,
    /// The team it joins (0 or 1).
    pub team: usize,
    /// How long the lobby's slots had been offered when it joined, ms.
    pub slot_open_ms: i64,
}

/// Why a lobby call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LobbyError {
    #[error("lobby {0} is not in play")]
    Unknown(LobbyId),
    #[error("lobby {lobby} has no member {member} in search {search}")]
    NotInLobby {
        lobby: LobbyId,
        search: SearchId,
        member: usize,
    },
    #[error("a lobby formed of search {0}, which the queue did not hold")]
    UnknownSearch(SearchId),
}

/// The lobbies in play of one mode.
#[derive(Debug, Clone)]
pub struct Lobbies {
    mode: Mode,
    live: BTreeMap<LobbyId, LiveLobby>,
    next: LobbyId,
}

impl Lobbies {
    #[must_use]
    pub fn new(mode: Mode) -> Lobbies {
        Lobbies {
            mode,
            live: BTreeMap::new(),
            next: 1,
        }
    }

    /// Records a lobby a tick formed, its searches as `queue` held them before the tick
    /// removed them; returns its id.
    ///
    /// # Errors
    /// A search of the lobby is not in `queue`.
    pub fn record(&mut self, lobby: &Lobby, queue: &[Search]) -> Result<LobbyId, LobbyError> {
        Ok(self.record_all(std::slice::from_ref(lobby), queue)?[0])
    }

    /// [`Lobbies::record`] for the lobbies of one tick (the queue indexed once).
    ///
    /// # Errors
    /// A search of a lobby is not in `queue` (then none is recorded).
    pub fn record_all(
        &mut self,
        lobbies: &[Lobby],
        queue: &[Search],
    ) -> Result<Vec<LobbyId>, LobbyError> {
        let index: HashMap<SearchId, &Search> = queue.iter().map(|s| (s.id, s)).collect();
        let find = |id: SearchId| {
            index
                .get(&id)
                .map(|&s| s.clone())
                .ok_or(LobbyError::UnknownSearch(id))
        };
        let mut teams = Vec::with_capacity(lobbies.len());
        for lobby in lobbies {
            let a: Vec<Search> = lobby.teams[0]
                .iter()
                .map(|&id| find(id))
                .collect::<Result<_, _>>()?;
            let b: Vec<Search> = lobby.teams[1]
                .iter()
                .map(|&id| find(id))
                .collect::<Result<_, _>>()?;
            let waited = a
                .iter()
                .chain(&b)
                .map(|s| (s.id, (lobby.formed_ms - s.start_ms).max(0)))
                .collect();
            teams.push(([a, b], lobby.data_centre, waited, lobby.rescued));
        }
        Ok(teams
            .into_iter()
            .map(|(t, dc, waited, rescued)| {
                let id = self.insert(t, dc);
                let l = self.live.get_mut(&id).expect("just inserted");
                l.waited_ms = waited;
                l.rescued = rescued;
                id
            })
            .collect())
    }

    /// Adds a lobby in play from its teams (a lobby formed elsewhere); returns its id.
    pub fn insert(&mut self, teams: [Vec<Search>; 2], data_centre: Option<u16>) -> LobbyId {
        let id = self.next;
        self.next += 1;
        self.live.insert(
            id,
            LiveLobby {
                id,
                teams,
                open_since_ms: None,
                data_centre,
                waited_ms: BTreeMap::new(),
                rescued: false,
            },
        );
        id
    }

    #[must_use]
    pub fn get(&self, id: LobbyId) -> Option<&LiveLobby> {
        self.live.get(&id)
    }

    /// The slots open in the lobbies offered for backfill.
    #[must_use]
    pub fn open_slots(&self) -> usize {
        let t = self.mode.team_size;
        self.live
            .values()
            .filter(|l| l.open_since_ms.is_some())
            .map(|l| (2 * t).saturating_sub(l.players()[0] + l.players()[1]))
            .sum()
    }

    /// The lobbies in play, by id.
    pub fn iter(&self) -> impl Iterator<Item = &LiveLobby> {
        self.live.values()
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.live.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Member `member` of search `search` leaves lobby `id` (a party of one leaves whole).
    ///
    /// # Errors
    /// The lobby is not in play, or holds no such member.
    pub fn leave(
        &mut self,
        id: LobbyId,
        search: SearchId,
        member: usize,
    ) -> Result<(), LobbyError> {
        let l = self.live.get_mut(&id).ok_or(LobbyError::Unknown(id))?;
        let missing = LobbyError::NotInLobby {
            lobby: id,
            search,
            member,
        };
        for team in &mut l.teams {
            if let Some(k) = team.iter().position(|s| s.id == search) {
                if member >= team[k].members.len() {
                    return Err(missing);
                }
                team[k].members.remove(member);
                if team[k].members.is_empty() {
                    team.remove(k);
                    l.waited_ms.remove(&search);
                }
                return Ok(());
            }
        }
        Err(missing)
    }

    /// Replaces the members of search `search` in lobby `id` (their state refreshed, say from
    /// the matches reported since the lobby formed); a search with no members leaves.
    ///
    /// # Errors
    /// The lobby is not in play, or the search is not in it.
    pub fn set_members(
        &mut self,
        id: LobbyId,
        search: SearchId,
        members: Vec<crate::queue::Member>,
    ) -> Result<(), LobbyError> {
        let l = self.live.get_mut(&id).ok_or(LobbyError::Unknown(id))?;
        for team in &mut l.teams {
            if let Some(s) = team.iter_mut().find(|s| s.id == search) {
                s.members = members;
                team.retain(|s| !s.members.is_empty());
                if !team.iter().any(|s| s.id == search) {
                    l.waited_ms.remove(&search);
                }
                return Ok(());
            }
        }
        Err(LobbyError::NotInLobby {
            lobby: id,
            search,
            member: 0,
        })
    }

    /// Offers lobby `id`'s open slots to the queue from `now_ms` (kept if already offered).
    ///
    /// # Errors
    /// The lobby is not in play.
    pub fn open_backfill(&mut self, id: LobbyId, now_ms: i64) -> Result<(), LobbyError> {
        let l = self.live.get_mut(&id).ok_or(LobbyError::Unknown(id))?;
        l.open_since_ms.get_or_insert(now_ms);
        Ok(())
    }

    /// Stops offering lobby `id`'s slots.
    ///
    /// # Errors
    /// The lobby is not in play.
    pub fn close_backfill(&mut self, id: LobbyId) -> Result<(), LobbyError> {
        let l = self.live.get_mut(&id).ok_or(LobbyError::Unknown(id))?;
        l.open_since_ms = None;
        Ok(())
    }

    /// Ends lobby `id` and returns it.
    ///
    /// # Errors
    /// The lobby is not in play.
    pub fn close(&mut self, id: LobbyId) -> Result<LiveLobby, LobbyError> {
        self.live.remove(&id).ok_or(LobbyError::Unknown(id))
    }

    /// Fills the open lobbies from `queue` under the CoD backfill rules of `cfg`, lobbies in
    /// the order their slots opened, searches oldest first; removes the searches placed from the
    /// queue. A lobby whose slots are all filled stops being offered.
    pub fn backfill(&mut self, now_ms: i64, queue: &mut Queue, cfg: &CodConfig) -> Vec<Backfill> {
        self.backfill_by(now_ms, queue, cfg, None)
    }

    /// [`Lobbies::backfill`] under a policy's own rule too ([`Policy::backfill_rule`]): a
    /// quality floor the searches a lobby takes are cut back to reach (or none are taken), or
    /// the churn-aware choice among the candidate sets that fit.
    pub fn backfill_by(
        &mut self,
        now_ms: i64,
        queue: &mut Queue,
        cfg: &CodConfig,
        own: Option<&BackfillRule>,
    ) -> Vec<Backfill> {
        let t = self.mode.team_size;
        let mut order: Vec<usize> = (0..queue.len()).collect();
        let searches = queue.searches();
        order.sort_by_key(|&i| (searches[i].start_ms, searches[i].id));
        let mut open: Vec<(i64, LobbyId)> = self
            .live
            .values()
            .filter_map(|l| l.open_since_ms.map(|t0| (t0, l.id)))
            .collect();
        open.sort_unstable();
        let mut taken = vec![false; searches.len()];
        let mut out = Vec::new();
        if open.is_empty() {
            return out;
        }
        let ages: Vec<f64> = searches.iter().map(|s| age_s(now_ms, s.start_ms)).collect();
        let sides: Vec<Side> = searches
            .iter()
            .zip(&ages)
            .map(|(s, &a)| joiner_side(s, a, cfg))
            .collect();
        // Oldest first within each party size: a lobby reads only the sizes that still fit.
        let mut by_size: Vec<Vec<usize>> = vec![Vec::new(); t + 1];
        let mut rank = vec![0; searches.len()];
        for (r, &i) in order.iter().enumerate() {
            rank[i] = r;
            if let Some(list) = by_size.get_mut(searches[i].members.len()) {
                list.push(i);
            }
        }
        // The threshold policy's rule takes each lobby's nearest searches: one index a tick.
        let index = match own {
            Some(BackfillRule::Quality { rule, .. }) => {
                Some(search_index(searches, &sides, &rule.distance))
            }
            _ => None,
        };
        // Team EOMM's rule also reads the searches by skill, to try the fill that balances.
        let mut by_skill: Vec<usize> = Vec::new();
        if matches!(own, Some(BackfillRule::Churn { .. })) {
            let mut keyed: Vec<(f64, f64, usize)> = (0..searches.len())
                .map(|i| (sides[i].skill, raw_mean(&searches[i]), i))
                .collect();
            keyed.sort_by(|a, b| a.partial_cmp(b).expect("finite skills"));
            by_skill = keyed.into_iter().map(|k| k.2).collect();
        }
        let cands = Candidates {
            searches,
            by_size: &by_size,
            rank: &rank,
            ages: &ages,
            sides: &sides,
            index: index.as_ref(),
            by_skill: &by_skill,
        };
        for (since, id) in open {
            let l = self.live.get_mut(&id).expect("listed above");
            let added = fill_one(l, t, now_ms, cfg, &cands, &taken, own);
            for (i, team) in added {
                taken[i] = true;
                l.waited_ms
                    .insert(searches[i].id, (now_ms - searches[i].start_ms).max(0));
                l.teams[team].push(searches[i].clone());
                out.push(Backfill {
                    lobby: id,
                    search: searches[i].id,
                    team,
                    slot_open_ms: (now_ms - since).max(0),
                });
            }
            if l.players() == [t, t] {
                l.open_since_ms = None;
            }
        }
        let placed: Vec<SearchId> = out.iter().map(|b| b.search).collect();
        queue.remove(&placed);
        out
    }
}

/// What an intermission did to a lobby.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Intermission {
    pub lobby: LobbyId,
    /// The searches that changed team, with the team each joined (0 or 1), by search id.
    pub moved: Vec<(SearchId, usize)>,
    /// Players on each team for the next match.
    pub players: [usize; 2],
    /// The slots the leavers opened (offered for backfill when there are any).
    pub open_slots: usize,
}

impl Lobbies {
    /// The intermission of lobby `id` at `now_ms`, between two matches: the members `leaving`
    /// (search, member index as the lobby holds them now) leave, and the parties who stay are
    /// split into teams again by the lobby phase's rule (`teams::best_split` on raw-skill
    /// sums): parties whole, the fewest size difference, then the smallest skill difference.
    /// The teams as they stand are kept when they are as good (no one moves for nothing);
    /// otherwise, of the splits as good as the best, the one that moves the fewest players (all
    /// splits are compared up to [`MAX_BACKFILL_SEARCHES`] parties; beyond, the two labellings
    /// of the best split). Slots left open are
    /// offered for backfill from `now_ms` (kept if already offered).
    ///
    /// # Errors
    /// The lobby is not in play, or a leaver is not in it (then nothing changes).
    pub fn intermission(
        &mut self,
        id: LobbyId,
        leaving: &[(SearchId, usize)],
        now_ms: i64,
    ) -> Result<Intermission, LobbyError> {
        let t = self.mode.team_size;
        let l = self.live.get_mut(&id).ok_or(LobbyError::Unknown(id))?;
        let mut gone: Vec<(SearchId, usize)> = leaving.to_vec();
        gone.sort_unstable();
        gone.dedup();
        for &(search, member) in &gone {
            let held = l.parties().find(|s| s.id == search);
            if held.is_none_or(|s| member >= s.members.len()) {
                return Err(LobbyError::NotInLobby {
                    lobby: id,
                    search,
                    member,
                });
            }
        }
        // Highest member first, so that the indices still to remove stay valid.
        for &(search, member) in gone.iter().rev() {
            for team in &mut l.teams {
                if let Some(s) = team.iter_mut().find(|s| s.id == search) {
                    s.members.remove(member);
                }
                team.retain(|s| !s.members.is_empty());
            }
        }
        let moved = rebalance(l, t);
        let players = l.players();
        let open_slots = (2 * t).saturating_sub(players[0] + players[1]);
        if open_slots > 0 {
            l.open_since_ms.get_or_insert(now_ms);
        }
        Ok(Intermission {
            lobby: id,
            moved,
            players,
            open_slots,
        })
    }
}

/// Splits lobby `l`'s parties into teams of at most `t` again (see [`Lobbies::intermission`]);
/// returns the searches that changed team, by id.
fn rebalance(l: &mut LiveLobby, t: usize) -> Vec<(SearchId, usize)> {
    let now: Vec<(usize, &Search)> = (0..2)
        .flat_map(|k| l.teams[k].iter().map(move |s| (k, s)))
        .collect();
    let parties: Vec<Party> = now
        .iter()
        .map(|(_, s)| Party {
            size: s.members.len(),
            skill: raw_sum(s),
        })
        .collect();
    let Ok(split) = best_split(&parties, t) else {
        return Vec::new();
    };
    let key = |n: [usize; 2], k: [f64; 2]| (n[0].abs_diff(n[1]), (k[0] - k[1]).abs());
    let skill = [0, 1].map(|k| l.teams[k].iter().map(raw_sum).sum::<f64>());
    let (d_now, x_now) = key(l.players(), skill);
    let (d_best, x_best) = key(split.sizes, split.skill);
    if d_now < d_best || (d_now == d_best && x_now <= x_best + EPS) {
        return Vec::new();
    }
    let mut team_of = vec![0; now.len()];
    for &i in &split.teams[1] {
        team_of[i] = 1;
    }
    let moves = |team_of: &dyn Fn(usize) -> usize| -> usize {
        (0..now.len())
            .filter(|&i| now[i].0 != team_of(i))
            .map(|i| now[i].1.members.len())
            .sum()
    };
    if now.len() <= MAX_BACKFILL_SEARCHES {
        // Of all the splits as good as the best, the one that moves the fewest players.
        let mut fewest = (usize::MAX, 0u32);
        for mask in 0u32..1 << now.len() {
            let side = |i: usize| (mask >> i & 1) as usize;
            let (mut n, mut k) = ([0; 2], [0.0; 2]);
            for (i, p) in parties.iter().enumerate() {
                n[side(i)] += p.size;
                k[side(i)] += p.skill;
            }
            let (d, x) = key(n, k);
            if n[0] <= t && n[1] <= t && d == d_best && x <= x_best + EPS {
                let m = moves(&side);
                if m < fewest.0 {
                    fewest = (m, mask);
                }
            }
        }
        if fewest.0 < usize::MAX {
            for (i, team) in team_of.iter_mut().enumerate() {
                *team = (fewest.1 >> i & 1) as usize;
            }
        }
    } else if moves(&|i| 1 - team_of[i]) < moves(&|i| team_of[i]) {
        // Of the two labellings of the split, the one that moves fewer players.
        for team in &mut team_of {
            *team = 1 - *team;
        }
    }
    let mut moved = Vec::new();
    let mut teams: [Vec<Search>; 2] = [Vec::new(), Vec::new()];
    for (i, &(k, s)) in now.iter().enumerate() {
        let n = team_of[i];
        if n != k {
            moved.push((s.id, n));
        }
        teams[n].push(s.clone());
    }
    moved.sort_unstable();
    l.teams = teams;
    moved
}

/// Why an open lobby's slots are still open: the queued searches each rule refuses (the first
/// rule each breaks), and those that would join it alone at the next tick.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SlotExplanation {
    pub lobby: LobbyId,
    /// Players on each team and the slots open.
    pub players: [usize; 2],
    pub open_slots: usize,
    /// When the slots were offered (`None`: they are not).
    pub open_since_ms: Option<i64>,
    /// (rule, searches it refuses), most first. A search larger than the open slots counts
    /// under [`Rule::LobbyFull`]; one that passes every rule but on its own would worsen the
    /// team size differential (it needs a partner search) under [`Rule::TeamBalance`]; with
    /// [`Lobbies::explain_by`], one the policy's own rule refuses under its rule.
    pub refused: Vec<(Rule, usize)>,
    /// Searches that would join on their own.
    pub admissible: usize,
}

impl Lobbies {
    /// Why lobby `id`'s open slots are still open at `now_ms`, against the searches of `queue`.
    ///
    /// # Errors
    /// The lobby is not in play.
    pub fn explain(
        &self,
        id: LobbyId,
        now_ms: i64,
        queue: &Queue,
        cfg: &CodConfig,
    ) -> Result<SlotExplanation, LobbyError> {
        self.explain_by(id, now_ms, queue, cfg, None)
    }

    /// [`Lobbies::explain`] under a policy's own backfill rule too: a search the CoD rules
    /// admit alone but team EOMM's balance bound refuses counts under [`Rule::Imbalance`]; under
    /// the threshold policy's rule, which replaces the CoD rules' skill similarity, disparity
    /// and ping, a search of a compatible platform that would leave the lobby under its quality
    /// floor counts under [`Rule::Quality`] (its fill tries the lobby's nearest searches only,
    /// so an admissible search far from the lobby may still wait).
    ///
    /// # Errors
    /// The lobby is not in play.
    pub fn explain_by(
        &self,
        id: LobbyId,
        now_ms: i64,
        queue: &Queue,
        cfg: &CodConfig,
        own: Option<&BackfillRule>,
    ) -> Result<SlotExplanation, LobbyError> {
        let l = self.live.get(&id).ok_or(LobbyError::Unknown(id))?;
        let t = self.mode.team_size;
        let players = l.players();
        let open = (2 * t).saturating_sub(players[0] + players[1]);
        let skill = [0, 1].map(|k| l.teams[k].iter().map(raw_sum).sum::<f64>());
        let open_age = age_s(now_ms, l.open_since_ms.unwrap_or(now_ms));
        let group = lobby_group(l, open_age, cfg);
        let own = own.filter(|r| in_force(r, open_age));
        let quality = matches!(own, Some(BackfillRule::Quality { .. }));
        let ages: Vec<f64> = queue
            .searches()
            .iter()
            .map(|s| age_s(now_ms, s.start_ms))
            .collect();
        let judge = own.map(|own| Judge::new(own, l, queue.searches(), &ages, now_ms, open_age, t));
        let mut counts: BTreeMap<Rule, usize> = BTreeMap::new();
        let mut admissible = 0;
        for (i, s) in queue.searches().iter().enumerate() {
            let rule = if s.members.len() > open {
                Some(Rule::LobbyFull)
            } else {
                let age = ages[i];
                let admitted = if quality {
                    if l.parties().all(|p| platforms_compatible(p, s)) {
                        Ok(())
                    } else {
                        Err(Rule::Platform)
                    }
                } else {
                    group.admits(cfg, l.data_centre, s, &joiner_side(s, age, cfg), age)
                };
                match admitted {
                    Err(r) => Some(r),
                    Ok(()) => match assign(players, skill, &[s.members.len()], &[raw_sum(s)], t) {
                        Some((team, d)) if d <= l.differential() => {
                            judge.as_ref().and_then(|j| j.judge(&[(i, team[0])]).err())
                        }
                        _ => Some(Rule::TeamBalance),
                    },
                }
            };
            match rule {
                Some(r) => *counts.entry(r).or_default() += 1,
                None => admissible += 1,
            }
        }
        let mut refused: Vec<(Rule, usize)> = counts.into_iter().collect();
        refused.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(SlotExplanation {
            lobby: id,
            players,
            open_slots: open,
            open_since_ms: l.open_since_ms,
            refused,
            admissible,
        })
    }
}

/// A search or a lobby party as the backfill rules see it: mean percentile, range, player
/// percentiles, acceptable disparity.
struct Side {
    skill: f64,
    range: f64,
    pct_min: f64,
    pct_max: f64,
    max_disparity: f64,
}

fn side(s: &Search, age_s: f64, cfg: &CodConfig) -> Side {
    let n = s.members.len().max(1) as f64;
    let (lo, hi) = s
        .members
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), m| {
            (lo.min(m.percentile), hi.max(m.percentile))
        });
    Side {
        skill: s.members.iter().map(|m| m.percentile).sum::<f64>() / n,
        range: cfg.skill_range.at(age_s),
        pct_min: lo,
        pct_max: hi,
        max_disparity: (hi - lo) + cfg.disparity.at(age_s),
    }
}

/// Search `s` at `age_s` as a lobby open for joins sees it: its [`Side`], with the skill range of
/// [`CodConfig::join_head_start_s`] more seconds of search (the paper's similarity "modified by
/// ... if there is a high-quality lobby open for joins"); its disparity reads its real age.
fn joiner_side(s: &Search, age_s: f64, cfg: &CodConfig) -> Side {
    Side {
        range: cfg.skill_range.at(age_s + cfg.join_head_start_s.max(0.0)),
        ..side(s, age_s, cfg)
    }
}

/// The parties a search must agree with, summed up so that a candidate is checked in constant
/// time (platforms aside): it is within every party's range when it is within their
/// intersection, and every party is within its range when the least and greatest are.
struct Group<'a> {
    parties: Vec<&'a Search>,
    lo: f64,
    hi: f64,
    s_min: f64,
    s_max: f64,
    p_min: f64,
    p_max: f64,
    cap: f64,
}

impl<'a> Group<'a> {
    fn new() -> Group<'a> {
        Group {
            parties: Vec::new(),
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
            s_min: f64::INFINITY,
            s_max: f64::NEG_INFINITY,
            p_min: f64::INFINITY,
            p_max: f64::NEG_INFINITY,
            cap: f64::INFINITY,
        }
    }

    fn push(&mut self, p: &'a Search, age_s: f64, cfg: &CodConfig) {
        self.push_side(p, &side(p, age_s, cfg));
    }

    /// Adds party `p` whose [`Side`] is `x`: a lobby's party, or a search joining with its
    /// [`joiner_side`].
    fn push_side(&mut self, p: &'a Search, x: &Side) {
        self.parties.push(p);
        self.lo = self.lo.max(x.skill - x.range);
        self.hi = self.hi.min(x.skill + x.range);
        self.s_min = self.s_min.min(x.skill);
        self.s_max = self.s_max.max(x.skill);
        self.p_min = self.p_min.min(x.pct_min);
        self.p_max = self.p_max.max(x.pct_max);
        self.cap = self.cap.min(x.max_disparity);
    }

    /// The rules for search `s`, whose [`Side`] is `c` at `age` (s).
    fn admits(
        &self,
        cfg: &CodConfig,
        data_centre: Option<u16>,
        s: &Search,
        c: &Side,
        age: f64,
    ) -> Result<(), Rule> {
        if !self.parties.is_empty()
            && (c.skill < self.lo - EPS
                || c.skill > self.hi + EPS
                || self.s_min < c.skill - c.range - EPS
                || self.s_max > c.skill + c.range + EPS)
        {
            return Err(Rule::SkillSimilarity);
        }
        let before = self.p_max - self.p_min;
        let after = self.p_max.max(c.pct_max) - self.p_min.min(c.pct_min);
        if after > self.cap.min(c.max_disparity) + EPS && after > before + EPS {
            return Err(Rule::SkillDisparity);
        }
        if self.parties.iter().any(|p| !platforms_compatible(p, s)) {
            return Err(Rule::Platform);
        }
        if let Some(dc) = data_centre
            && !s.pings.is_empty()
        {
            let best = s.pings.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
            let ok = s
                .pings
                .iter()
                .find(|x| x.0 == dc)
                .is_some_and(|&(_, p)| f64::from(p - best) <= cfg.delta_ping.at(age) + EPS);
            if !ok {
                return Err(Rule::Ping);
            }
        }
        Ok(())
    }
}

/// Lobby `l`'s parties as a backfill's rules see them when its slots have been open
/// `open_age` s: each with the backoff of the wait it had when it joined the lobby plus
/// `open_age`. A lobby's parties held together at those bounds when it formed; starting them
/// again from a fresh search's bounds would refuse every search until the parties' own ranges
/// overlapped again, which took them their whole wait the first time. A lobby the maximum-wait
/// rule formed held together at no party's bounds but its oldest's (the rule placed the others
/// whatever theirs), so every party reads the lobby's longest wait.
fn lobby_group<'a>(l: &'a LiveLobby, open_age: f64, cfg: &CodConfig) -> Group<'a> {
    let mut group = Group::new();
    let longest = if l.rescued {
        l.waited_ms.values().copied().max().unwrap_or(0)
    } else {
        0
    };
    for p in l.parties() {
        let waited = l.waited_ms.get(&p.id).map_or(0, |&w| w.max(longest)) as f64 / 1e3;
        group.push(p, waited + open_age, cfg);
    }
    group
}

/// Whether search `s` may join, at `now_ms`, a lobby playing on `data_centre` whose parties
/// (and the searches already added to this backfill) are `lobby`, each with the age (s) its
/// backoff reads: every CoD rule but the grouping, which [`assign`] checks on the whole set.
/// `s` reads its skill range with [`CodConfig::join_head_start_s`].
///
/// # Errors
/// The first rule that refuses it.
pub fn admits(
    cfg: &CodConfig,
    lobby: &[(&Search, f64)],
    data_centre: Option<u16>,
    s: &Search,
    now_ms: i64,
) -> Result<(), Rule> {
    let mut g = Group::new();
    for &(p, age) in lobby {
        g.push(p, age, cfg);
    }
    let age = age_s(now_ms, s.start_ms);
    g.admits(cfg, data_centre, s, &joiner_side(s, age, cfg), age)
}

/// Seconds from `start_ms` to `now_ms` (0 for a start in the future).
fn age_s(now_ms: i64, start_ms: i64) -> f64 {
    ((now_ms - start_ms) as f64 / 1000.0).max(0.0)
}

/// The assignment of new parties (`sizes`, `skills`: raw-skill sums) to teams that fits teams of
/// `t` beside the `players` and `skill` already there: of those with the least size
/// differential, the least skill difference. Returns (team of each party, differential).
///
/// # Panics
/// More than [`MAX_BACKFILL_SEARCHES`] parties, or `sizes` and `skills` of different lengths.
#[must_use]
pub fn assign(
    players: [usize; 2],
    skill: [f64; 2],
    sizes: &[usize],
    skills: &[f64],
    t: usize,
) -> Option<(Vec<usize>, usize)> {
    assert!(sizes.len() <= MAX_BACKFILL_SEARCHES && sizes.len() == skills.len());
    let mut best: Option<(usize, f64, u32)> = None;
    for mask in 0u32..1 << sizes.len() {
        let (mut n, mut k) = (players, skill);
        for (i, (&z, &x)) in sizes.iter().zip(skills).enumerate() {
            let team = (mask >> i & 1) as usize;
            n[team] += z;
            k[team] += x;
        }
        if n[0] > t || n[1] > t {
            continue;
        }
        let key = (n[0].abs_diff(n[1]), (k[0] - k[1]).abs());
        if best.is_none_or(|b| key.0 < b.0 || (key.0 == b.0 && key.1 < b.1 - EPS)) {
            best = Some((key.0, key.1, mask));
        }
    }
    best.map(|(d, _, mask)| {
        (
            (0..sizes.len()).map(|i| (mask >> i & 1) as usize).collect(),
            d,
        )
    })
}

fn raw_sum(s: &Search) -> f64 {
    s.members.iter().map(|m| m.raw_skill).sum()
}

fn raw_mean(s: &Search) -> f64 {
    raw_sum(s) / s.members.len().max(1) as f64
}

/// The queue's searches as one tick's backfills read them: oldest first, with their ages and
/// sides computed once.
struct Candidates<'a> {
    searches: &'a [Search],
    /// Search indices by party size, oldest first, and each search's place in that order.
    by_size: &'a [Vec<usize>],
    rank: &'a [usize],
    ages: &'a [f64],
    sides: &'a [Side],
    /// The nearest-candidate index of the searches (the threshold policy's rule only).
    index: Option<&'a KdIndex>,
    /// The searches by mean percentile, then mean raw skill (team EOMM's rule only).
    by_skill: &'a [usize],
}

impl Candidates<'_> {
    /// Players of the searches `joins`.
    fn players_in(&self, joins: &Joins) -> usize {
        joins
            .iter()
            .map(|&(i, _)| self.searches[i].members.len())
            .sum()
    }
}

/// The nearest-candidate index of `searches` by `dist` (the policies' N-dimensional distance),
/// each at its place and its mean percentile (its [`Side`]'s skill).
fn search_index(searches: &[Search], sides: &[Side], dist: &Distance) -> KdIndex {
    let points = searches
        .iter()
        .zip(sides)
        .map(|(s, x)| index_point(unit_xyz(s.lat, s.lon), x.skill, s, dist))
        .collect();
    KdIndex::new(points, dist.input_km)
}

/// The threshold policy's candidates for lobby `l`: its `k` nearest searches by `dist` from the
/// lobby's centre (its players' mean location on the sphere and mean percentile, the input
/// device most of them use), not taken, no larger than `room`, platform-compatible with every
/// party of the lobby; nearest first, drawn from the index only as far as they are read. None
/// for a lobby with no players (it has no centre).
struct Nearest<'a> {
    walk: Option<Box<dyn Iterator<Item = usize> + 'a>>,
    seen: Vec<usize>,
    k: usize,
}

impl<'a> Nearest<'a> {
    fn to(
        l: &'a LiveLobby,
        dist: &Distance,
        c: &'a Candidates<'a>,
        taken: &'a [bool],
        k: usize,
        room: usize,
    ) -> Nearest<'a> {
        let none = Nearest {
            walk: None,
            seen: Vec::new(),
            k,
        };
        let Some(ix) = c.index else {
            return none;
        };
        let (mut xyz, mut pct, mut n) = ([0.0; 3], 0.0, 0usize);
        let mut inputs: Vec<(crate::queue::Input, usize, &Search)> = Vec::new();
        for p in l.parties() {
            let m = p.members.len();
            for (acc, x) in xyz.iter_mut().zip(unit_xyz(p.lat, p.lon)) {
                *acc += m as f64 * x;
            }
            pct += p.members.iter().map(|x| x.percentile).sum::<f64>();
            n += m;
            match inputs.iter_mut().find(|e| e.0 == p.input) {
                Some(e) => e.1 += m,
                None => inputs.push((p.input, m, p)),
            }
        }
        // The party whose input device most players use (the first such on a tie) stands for
        // the lobby's device and, in the walk's own platform check, its platform.
        let Some(&(_, _, rep)) = inputs.iter().rev().max_by_key(|e| e.1) else {
            return none;
        };
        let norm = xyz.iter().map(|x| x * x).sum::<f64>().sqrt();
        let centre = if norm > 1e-9 {
            xyz.map(|x| x * EARTH_RADIUS_KM / norm)
        } else {
            unit_xyz(rep.lat, rep.lon)
        };
        let walk = ix
            .walk_from(index_point(centre, pct / n as f64, rep, dist))
            .map(|(_, i)| i)
            .filter(move |&i| {
                let s = &c.searches[i];
                !taken[i]
                    && s.members.len() <= room
                    && l.parties().all(|p| platforms_compatible(p, s))
            });
        Nearest {
            walk: Some(Box::new(walk)),
            ..none
        }
    }

    /// Team EOMM's candidates for lobby `l` whose slots have been open `open_age` s: searches
    /// not taken, no larger than `room`, that the CoD rules admit against the lobby's parties,
    /// nearest first to the raw skill a joiner needs to even the teams' raw-skill sums (each
    /// joiner alike: `(ΣA - ΣB) / (open B - open A)`, clamped to [-1, 1]; the lobby's mean when
    /// both teams have as many open slots), drawn from the searches by percentile within the
    /// lobby's parties' common skill range; at most `k`, after at most `8 k` searches read
    /// (`t`: the mode's team size).
    fn balancing(
        l: &'a LiveLobby,
        open_age: f64,
        cfg: &'a CodConfig,
        c: &'a Candidates<'a>,
        taken: &'a [bool],
        k: usize,
        t: usize,
    ) -> Nearest<'a> {
        let room = (2 * t).saturating_sub(l.players()[0] + l.players()[1]);
        let open = l.players().map(|n| t.saturating_sub(n) as f64);
        let sum = [0, 1].map(|team| l.teams[team].iter().map(raw_sum).sum::<f64>());
        let players = (l.players()[0] + l.players()[1]).max(1) as f64;
        let target = if (open[1] - open[0]).abs() > 0.5 {
            ((sum[0] - sum[1]) / (open[1] - open[0])).clamp(-1.0, 1.0)
        } else {
            (sum[0] + sum[1]) / players
        };
        let group = lobby_group(l, open_age, cfg);
        let order = c.by_skill;
        let from = order.partition_point(|&i| c.sides[i].skill < group.lo - EPS);
        let to = order.partition_point(|&i| c.sides[i].skill <= group.hi + EPS);
        let window = &order[from..to.max(from)];
        let start = window.partition_point(|&i| raw_mean(&c.searches[i]) < target);
        let (mut down, mut up) = (start, start);
        let mut read = 0;
        let next = std::iter::from_fn(move || {
            if read >= 8 * k {
                return None;
            }
            read += 1;
            let gap = |at: usize| (raw_mean(&c.searches[window[at]]) - target).abs();
            let take_up = match (down > 0, up < window.len()) {
                (false, false) => return None,
                (true, true) => gap(up) <= gap(down - 1),
                (false, true) => true,
                (true, false) => false,
            };
            Some(if take_up {
                up += 1;
                window[up - 1]
            } else {
                down -= 1;
                window[down]
            })
        });
        let walk = next.filter(move |&i| {
            let s = &c.searches[i];
            !taken[i]
                && s.members.len() <= room
                && group
                    .admits(cfg, l.data_centre, s, &c.sides[i], c.ages[i])
                    .is_ok()
        });
        Nearest {
            walk: Some(Box::new(walk)),
            seen: Vec::new(),
            k,
        }
    }

    /// The `at`-th nearest candidate (from 0), `None` past the `k` nearest or the last.
    fn get(&mut self, at: usize) -> Option<usize> {
        while self.seen.len() <= at && self.seen.len() < self.k {
            let next = self.walk.as_mut()?.next()?;
            self.seen.push(next);
        }
        self.seen.get(at).copied()
    }
}

/// The searches (indices into the queue, with their teams) one open lobby takes: by the CoD
/// rules alone, the oldest-first fill ([`grow`]); by the threshold policy's rule, the first
/// nearest-first fill that reaches its quality floor ([`BackfillRule::Quality`]); by team
/// EOMM's rule, the best of the oldest-first fill and its alternatives
/// ([`BackfillRule::Churn`]).
fn fill_one(
    l: &LiveLobby,
    t: usize,
    now_ms: i64,
    cfg: &CodConfig,
    c: &Candidates<'_>,
    taken: &[bool],
    own: Option<&BackfillRule>,
) -> Vec<(usize, usize)> {
    let players = l.players();
    let open = (2 * t).saturating_sub(players[0] + players[1]);
    if open == 0 {
        return Vec::new();
    }
    let open_age = age_s(now_ms, l.open_since_ms.unwrap_or(now_ms));
    let fill = Fill {
        l,
        t,
        open_age,
        cfg,
        c,
        taken,
    };
    let own = own.filter(|r| in_force(r, open_age));
    let judge = own.map(|own| Judge::new(own, l, c.searches, c.ages, now_ms, open_age, t));
    let judged = |joins: &Joins| judge.as_ref().map_or(Ok(0.0), |j| j.judge(joins));
    let filled = |joins: &Joins| c.players_in(joins);
    let (alternatives, candidates) = match own {
        None => return grow(&fill, Order::Oldest, None, &|joins| judged(joins).is_ok()),
        Some(BackfillRule::Quality {
            rule, candidates, ..
        }) => {
            // The nearest-first fill from each candidate in turn, nearest first: the first
            // that fills every open slot, as the policy forms the first lobby that passes.
            let near = std::cell::RefCell::new(Nearest::to(
                l,
                &rule.distance,
                c,
                taken,
                *candidates,
                open,
            ));
            let mut best = Vec::new();
            for j in 0..*candidates {
                if near.borrow_mut().get(j).is_none() {
                    break;
                }
                let from_j = |at: usize| near.borrow_mut().get(j + at);
                let joins = grow(&fill, Order::Nearest(&from_j), None, &|joins| {
                    judged(joins).is_ok()
                });
                if filled(&joins) > filled(&best) {
                    best = joins;
                    if filled(&best) == open {
                        break;
                    }
                }
            }
            return best;
        }
        Some(BackfillRule::Churn {
            alternatives,
            candidates,
            ..
        }) => (*alternatives, *candidates),
    };
    least_churn(&fill, &judged, alternatives, candidates)
}

/// Team EOMM's fill of one lobby ([`BackfillRule::Churn`]): of the oldest-first fill, the fill
/// from the `candidates` searches nearest to the skill that evens the teams and `alternatives`
/// fills that each leave out one search of the first, the one that fills the most slots and
/// then has the least expected churn by `judged` (an error: the rule refuses the set).
fn least_churn(
    fill: &Fill<'_>,
    judged: &dyn Fn(&Joins) -> Result<f64, Rule>,
    alternatives: usize,
    candidates: usize,
) -> Vec<(usize, usize)> {
    let Fill {
        l,
        t,
        open_age,
        cfg,
        c,
        taken,
        ..
    } = *fill;
    let filled = |joins: &Joins| c.players_in(joins);
    // The churn of the set `in_bound` last accepted (`grow` returns the set it accepts last).
    // The tries often meet the same sets: each is judged once.
    let last = std::cell::Cell::new(None);
    let seen: std::cell::RefCell<Vec<Judged>> = std::cell::RefCell::default();
    let in_bound = |joins: &Joins| {
        let known = seen.borrow().iter().find(|(j, _)| j == joins).map(|e| e.1);
        let churn = known.unwrap_or_else(|| {
            let churn = judged(joins).ok();
            seen.borrow_mut().push((joins.to_vec(), churn));
            churn
        });
        last.set(churn);
        churn.is_some()
    };
    // The searches to leave out one at a time: those of the fill without the bound. When that
    // fill is within the bound it is also the first try's (the longest prefix that fits).
    let base = grow(fill, Order::Oldest, None, &|_| true);
    let mut best: (Vec<(usize, usize)>, Option<f64>) = (Vec::new(), None);
    // The oldest-first fill, the fill nearest to the skill that evens the teams, then the
    // alternatives to the first.
    let near = std::cell::RefCell::new(Nearest::balancing(
        l, open_age, cfg, c, taken, candidates, t,
    ));
    let nth = |at: usize| near.borrow_mut().get(at);
    let tries = [Try::Oldest(None), Try::Balancing].into_iter().chain(
        base.iter()
            .take(alternatives)
            .map(|&(i, _)| Try::Oldest(Some(i))),
    );
    for try_ in tries {
        last.set(None);
        let joins = match try_ {
            Try::Balancing => grow(fill, Order::Ruled(&nth), None, &in_bound),
            Try::Oldest(None) if in_bound(&base) => base.clone(),
            Try::Oldest(left_out) => grow(fill, Order::Oldest, left_out, &in_bound),
        };
        let Some(churn) = last.get().filter(|_| !joins.is_empty()) else {
            continue;
        };
        let better = best.1.is_none_or(|y| {
            let (n, m) = (filled(&joins), filled(&best.0));
            n > m || (n == m && churn < y - EPS)
        });
        if better {
            best = (joins, Some(churn));
        }
    }
    best.0
}

/// One of team EOMM's candidate fills: oldest first (leaving out a search), or nearest to the
/// skill that evens the teams ([`Nearest::balancing`]).
#[derive(Clone, Copy)]
enum Try {
    Oldest(Option<usize>),
    Balancing,
}

/// Whether a policy's own backfill rule is in force for slots open `open_age` s: slots open
/// for the maximum wait are filled by the CoD rules alone, as the maximum-wait rule places a
/// search its policy could not.
fn in_force(own: &BackfillRule, open_age: f64) -> bool {
    let (BackfillRule::Quality { rule, .. } | BackfillRule::Churn { rule, .. }) = own;
    open_age < rule.max_wait_s
}

/// A policy's own rule on one lobby: the lobby, the queue's searches with their ages (s), the
/// tick's time, the time its slots have been open (s) and the mode's team size.
struct Judge<'a> {
    own: &'a BackfillRule,
    l: &'a LiveLobby,
    searches: &'a [Search],
    ages: &'a [f64],
    now_ms: i64,
    open_age: f64,
    t: usize,
    /// The lobby's imbalance with its slots empty (team EOMM's rule), once it is needed.
    before: std::cell::OnceCell<f64>,
}

impl<'a> Judge<'a> {
    fn new(
        own: &'a BackfillRule,
        l: &'a LiveLobby,
        searches: &'a [Search],
        ages: &'a [f64],
        now_ms: i64,
        open_age: f64,
        t: usize,
    ) -> Judge<'a> {
        Judge {
            own,
            l,
            searches,
            ages,
            now_ms,
            open_age,
            t,
            before: std::cell::OnceCell::new(),
        }
    }

    /// The rule on the lobby with `joins` added: the lobby's expected churn when it passes, or
    /// the rule it breaks (the threshold policy's [`Rule::Quality`], at the greatest of the
    /// joiners' ages and the lobby's (its parties' longest wait when they joined plus its open
    /// age), as a new lobby's threshold is its oldest search's; team EOMM's balance bound,
    /// [`Rule::Imbalance`], at the least of the lobby's open age and the joiners' ages, as a new
    /// lobby's bound is its youngest search's, unless the joiners leave the lobby no more uneven
    /// than it is with its slots empty).
    fn judge(&self, joins: &Joins) -> Result<f64, Rule> {
        let Judge {
            own,
            l,
            searches,
            ages,
            now_ms,
            open_age,
            t,
            ..
        } = *self;
        match own {
            BackfillRule::Quality {
                rule, threshold, ..
            } => {
                let s = score_joined(rule, l, joins, searches, now_ms, t).ok_or(Rule::Quality)?;
                // As for a new lobby, the threshold of its oldest search: a joiner, or the
                // lobby's longest wait when it formed (its parties' ages in the CoD rules) plus
                // the time its slots have been open.
                let waited = l.waited_ms.values().copied().max().unwrap_or(0) as f64 / 1e3;
                let oldest = joins
                    .iter()
                    .map(|&(i, _)| ages[i])
                    .fold(waited + open_age, f64::max);
                if s.quality.total >= threshold.at(oldest) - EPS {
                    Ok(s.churn)
                } else {
                    Err(Rule::Quality)
                }
            }
            BackfillRule::Churn { rule, balance, .. } => {
                let s = score_joined(rule, l, joins, searches, now_ms, t).ok_or(Rule::Imbalance)?;
                if let Some(b) = balance {
                    let cap = joins
                        .iter()
                        .map(|&(i, _)| b.at(ages[i]))
                        .fold(b.at(open_age), f64::min);
                    let after = imbalance(&s);
                    // Beyond the bound, a backfill still passes when it does not increase the
                    // lobby's existing imbalance (its players as they are, the open slots
                    // empty): the seed's "backfills never increase an existing team imbalance".
                    if after > cap + EPS {
                        let before = *self.before.get_or_init(|| {
                            score_joined(rule, l, &[], searches, now_ms, t)
                                .map_or(0.0, |s| imbalance(&s))
                        });
                        if after > before + EPS {
                            return Err(Rule::Imbalance);
                        }
                    }
                }
                Ok(s.churn)
            }
        }
    }
}

/// A lobby's `|P(A wins | decisive) - 1/2|`.
fn imbalance(s: &Scored) -> f64 {
    (s.p[0] / (s.p[0] + s.p[2]).max(1e-12) - 0.5).abs()
}

/// Searches joining a lobby: (index into the queue, team).
type Joins = [(usize, usize)];

/// A set of joins and the lobby's expected churn with them, when the rule lets them in.
type Judged = (Vec<(usize, usize)>, Option<f64>);

/// The order a fill ([`grow`]) reads its candidates in, and how it admits them.
#[derive(Clone, Copy)]
enum Order<'a> {
    /// Oldest first, each admitted by the CoD rules (against the lobby's parties and the
    /// searches added before it).
    Oldest,
    /// The `n`-th candidate by `n`, each admitted by the CoD rules.
    Ruled(&'a dyn Fn(usize) -> Option<usize>),
    /// The `n`-th candidate by `n`, each platform-compatible with the searches added before it
    /// (the threshold policy's: [`Nearest::to`] checked the lobby's parties).
    Nearest(&'a dyn Fn(usize) -> Option<usize>),
}

/// One open lobby's backfill: the lobby, its mode's team size, how long its slots have been
/// open, the rules and the queue's candidates with those already taken this tick.
struct Fill<'a> {
    l: &'a LiveLobby,
    t: usize,
    /// How long the lobby's slots have been open, s.
    open_age: f64,
    cfg: &'a CodConfig,
    c: &'a Candidates<'a>,
    taken: &'a [bool],
}

/// The fill of lobby `l`: searches grown in order (but `left_out`) while each is admitted and
/// some assignment still fits, then cut back to the longest prefix whose best assignment does
/// not worsen the lobby's differential and that `accepts`. The order and the admission are the
/// CoD rules' (oldest first, each search passing the rules against the lobby's parties and the
/// searches added before it) or, with `nearest` (its n-th candidate by n), the threshold
/// policy's (that order, each search platform-compatible with the searches added before it;
/// [`Nearest`] checked the lobby's).
fn grow(
    f: &Fill<'_>,
    order: Order<'_>,
    left_out: Option<usize>,
    accepts: &dyn Fn(&Joins) -> bool,
) -> Vec<(usize, usize)> {
    let Fill {
        l,
        t,
        open_age,
        cfg,
        c,
        taken,
        ..
    } = *f;
    let players = l.players();
    let open = (2 * t).saturating_sub(players[0] + players[1]);
    if open == 0 {
        return Vec::new();
    }
    let skill = [0, 1].map(|k| l.teams[k].iter().map(raw_sum).sum::<f64>());
    let mut group = (!matches!(order, Order::Nearest(_))).then(|| lobby_group(l, open_age, cfg));
    let mut added: Vec<usize> = Vec::new();
    let (mut sizes, mut skills) = (Vec::new(), Vec::new());
    let mut filled = 0;
    // The CoD order, oldest first, is a merge of the lists of the sizes that fit.
    let mut pos = vec![0; c.by_size.len()];
    let mut at = 0;
    while filled < open && added.len() < MAX_BACKFILL_SEARCHES {
        let room = open - filled;
        let i = match order {
            Order::Ruled(nth) | Order::Nearest(nth) => {
                let Some(i) = nth(at) else {
                    break;
                };
                at += 1;
                if c.searches[i].members.len() > room {
                    continue;
                }
                i
            }
            Order::Oldest => {
                let fits = room.min(c.by_size.len() - 1);
                let next = (1..=fits)
                    .filter_map(|z| c.by_size[z].get(pos[z]).map(|&i| (c.rank[i], z, i)))
                    .min();
                let Some((_, z, i)) = next else {
                    break;
                };
                pos[z] += 1;
                i
            }
        };
        let s = &c.searches[i];
        if taken[i] || left_out == Some(i) {
            continue;
        }
        let admitted = match &group {
            Some(g) => g
                .admits(cfg, l.data_centre, s, &c.sides[i], c.ages[i])
                .is_ok(),
            None => added
                .iter()
                .all(|&j| platforms_compatible(&c.searches[j], s)),
        };
        if !admitted {
            continue;
        }
        sizes.push(s.members.len());
        skills.push(raw_sum(s));
        if assign(players, skill, &sizes, &skills, t).is_none() {
            sizes.pop();
            skills.pop();
            continue;
        }
        added.push(i);
        filled += s.members.len();
        if let Some(g) = &mut group {
            g.push_side(s, &c.sides[i]);
        }
    }
    let before = l.differential();
    while !added.is_empty() {
        if let Some((teams, d)) = assign(players, skill, &sizes, &skills, t)
            && d <= before
        {
            let joins: Vec<(usize, usize)> = added.iter().copied().zip(teams).collect();
            if accepts(&joins) {
                return joins;
            }
        }
        added.pop();
        sizes.pop();
        skills.pop();
    }
    Vec::new()
}

/// Lobby `l` with the searches `joins` (queue index, team) added, its players fixed, scored
/// by `rule`'s models and weights (`None` when the searches do not make a valid queue).
fn score_joined(
    rule: &MaxWaitRule,
    l: &LiveLobby,
    joins: &[(usize, usize)],
    searches: &[Search],
    now_ms: i64,
    t: usize,
) -> Option<Scored> {
    let mut q = Queue::new(Mode { team_size: t }).ok()?;
    let mut teams: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    let parties = (0..2).flat_map(|k| l.teams[k].iter().map(move |s| (s, k)));
    let joining = joins.iter().map(|&(i, k)| (&searches[i], k));
    for (s, k) in parties.chain(joining) {
        teams[k].push(q.len());
        q.push(s.clone()).ok()?;
    }
    let st = TickState::for_scoring(&q, now_ms, rule.models.party, rule.distance);
    Some(score_split(
        &st,
        &rule.models,
        &rule.weights,
        &teams,
        t,
        rule.max_wait_s,
    ))
}

/// One tick with backfill: the open lobbies take their searches first
/// ([`Lobbies::backfill`]), then `policy` forms new lobbies from the rest (its own rules, then
/// the maximum-wait rule), which are recorded in `lobbies`; a new lobby short of full (a
/// partial lobby, [`crate::cod::PartialLobbies`]) is offered for backfill at once. Returns the backfills and the new
/// lobbies with their ids.
pub fn tick_with_backfill<P: Policy + ?Sized>(
    policy: &mut P,
    lobbies: &mut Lobbies,
    cfg: &CodConfig,
    now_ms: i64,
    queue: &mut Queue,
) -> (Vec<Backfill>, Vec<(LobbyId, Lobby)>) {
    let own = policy.backfill_rule();
    let filled = lobbies.backfill_by(now_ms, queue, cfg, own.as_ref());
    let mut formed = policy.form_lobbies(now_ms, queue);
    formed.extend(rescue_overdue(
        queue,
        &formed,
        &policy.max_wait_rule(),
        now_ms,
    ));
    let ids = lobbies
        .record_all(&formed, queue.searches())
        .expect("a policy forms its lobbies from the queue's searches");
    // A partial lobby's open slots are offered at once.
    let t = lobbies.mode.team_size;
    for &id in &ids {
        if lobbies.get(id).is_some_and(|l| l.players() != [t, t]) {
            lobbies.open_backfill(id, now_ms).expect("recorded above");
        }
    }
    queue.remove_placed(&formed);
    (filled, ids.into_iter().zip(formed).collect())
}
