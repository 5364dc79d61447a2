//! Live queues of party searches, and what every queue policy shares.
//!
//! A [`Search`] is a party waiting for a lobby: its members (raw skill, percentile, games played
//! and churn after each outcome, from the artifact snapshot via [`Member::from_state`] or from
//! the service), when it started, where it is, its input device and platform, and its pings to
//! data centres where known. A [`Queue`] holds the searches of one mode (two teams of
//! `team_size`). A [`Policy`] turns the queue into lobbies, tick by tick:
//! `tick(now, queue) -> lobbies` removes the searches it placed and leaves the rest queued.
//!
//! Shared here:
//! - [`Backoff`]: piecewise-linear curves of search age, for rules that loosen as searches wait.
//! - [`LobbyModels`]: the exported team win model and party adjustment, which score a split.
//! - [`Quality`]: the weighted quality score of a lobby (Dota 2 post, Awesomenauts post),
//!   reported for every lobby whatever formed it, and the threshold policy's objective.
//! - Candidate selection: the top K searches by the Call of Duty paper's N-dimensional distance
//!   (great-circle km + weight x skill-percentile difference + input-device penalty), exact, from
//!   a k-d tree ([`crate::knn`]).
//! - The maximum-wait rule: a search that has waited `max_wait` is placed in any lobby that fits
//!   the mode (full, equal teams, parties intact, platforms compatible), by an exact search over
//!   the whole queue, so no search waits past the maximum while a feasible lobby exists.
//! - [`Explanation`]: for a queued search, which rule blocks it and when backoff relaxes it.
//!
//! Files by concept: `member` (members and searches), `backoff`, `tick` (a tick's views, the
//! candidate index and the maximum-wait search), `lobby` (scoring, splitting and recording a
//! lobby), `explain` (rules and explanations) and `policy` (the trait and the rescue every
//! policy ends its tick with). Geography lives in [`crate::geo`], below this module and the
//! index.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

mod backoff;
mod explain;
mod lobby;
mod member;
mod policy;
#[cfg(test)]
mod tests;
mod tick;

pub use crate::geo::{EARTH_RADIUS_KM, great_circle_km, unit_xyz};
pub use backoff::Backoff;
pub use explain::{Blocker, Explanation, Rule};
pub use lobby::{Lobby, LobbyModels, Quality, QualityWeights, groupable};
pub(crate) use lobby::{
    Scored, balanced_split, best_data_centre, even_split, make_lobby, score_split, split_churn,
    team_churn, team_sample,
};
pub use member::{Input, Member, Search};
pub(crate) use policy::check_structure;
pub use policy::{BackfillRule, MaxWaitRule, Policy, rescue_overdue};
pub(crate) use tick::{Deadline, TickState, View, fill_exact, index_point};
pub use tick::{Distance, platforms_compatible};

/// A search's id, unique within a queue.
pub type SearchId = u64;

/// The most players per team a queue accepts (the exhaustive split's limit, 12v12).
pub const MAX_TEAM_SIZE: usize = 12;

/// A game mode: two teams of `team_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mode {
    pub team_size: usize,
}

impl Mode {
    #[must_use]
    pub fn lobby_players(&self) -> usize {
        2 * self.team_size
    }
}

/// Why a search or a mode was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueueError {
    #[error("team size {0} is outside 1..={MAX_TEAM_SIZE}")]
    BadMode(usize),
    #[error("search {0} is already queued")]
    DuplicateId(SearchId),
    #[error("search {0} has no members")]
    EmptyParty(SearchId),
    #[error("search {id} has {size} players, more than a team of {team_size}")]
    PartyTooLarge {
        id: SearchId,
        size: usize,
        team_size: usize,
    },
    #[error("search {id}: {field} = {value} is not allowed ({why})")]
    BadValue {
        id: SearchId,
        field: &'static str,
        value: f64,
        why: &'static str,
    },
    #[error("search {0} is not queued")]
    Unknown(SearchId),
}

/// The searches of one mode, in arrival order.
#[derive(Debug, Clone)]
pub struct Queue {
    mode: Mode,
    searches: Vec<Search>,
    ids: HashSet<SearchId>,
}

impl Queue {
    /// # Errors
    /// The team size is 0 or above [`MAX_TEAM_SIZE`].
    pub fn new(mode: Mode) -> Result<Queue, QueueError> {
        if mode.team_size == 0 || mode.team_size > MAX_TEAM_SIZE {
            return Err(QueueError::BadMode(mode.team_size));
        }
        Ok(Queue {
            mode,
            searches: Vec::new(),
            ids: HashSet::new(),
        })
    }

    #[must_use]
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Adds a search after checking it.
    ///
    /// # Errors
    /// A duplicate id, an empty or oversized party, or a value out of range (percentile outside
    /// [0, 1], churn outside [0, 1], a non-finite skill, latitude or longitude out of range, a
    /// negative or non-finite ping).
    pub fn push(&mut self, s: Search) -> Result<(), QueueError> {
        validate_search(&s, self.mode)?;
        if !self.ids.insert(s.id) {
            return Err(QueueError::DuplicateId(s.id));
        }
        self.searches.push(s);
        Ok(())
    }

    #[must_use]
    pub fn searches(&self) -> &[Search] {
        &self.searches
    }

    #[must_use]
    pub fn get(&self, id: SearchId) -> Option<&Search> {
        self.searches.iter().find(|s| s.id == id)
    }

    /// The index of search `id` in [`Queue::searches`].
    ///
    /// # Errors
    /// The search is not queued.
    pub fn position(&self, id: SearchId) -> Result<usize, QueueError> {
        self.searches
            .iter()
            .position(|s| s.id == id)
            .ok_or(QueueError::Unknown(id))
    }

    /// Removes the searches of these lobbies (the end of a tick).
    pub fn remove_placed(&mut self, lobbies: &[Lobby]) {
        let placed: Vec<SearchId> = lobbies.iter().flat_map(Lobby::search_ids).collect();
        self.remove(&placed);
    }

    /// Removes the searches with these ids (a player cancelled, or a lobby formed).
    pub fn remove(&mut self, ids: &[SearchId]) {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        self.searches
            .retain(|s| sorted.binary_search(&s.id).is_err());
        for id in &sorted {
            self.ids.remove(id);
        }
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.searches.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.searches.is_empty()
    }

    /// Players queued.
    #[must_use]
    pub fn players(&self) -> usize {
        self.searches.iter().map(|s| s.members.len()).sum()
    }
}

fn validate_search(s: &Search, mode: Mode) -> Result<(), QueueError> {
    let bad = |field, value: f64, why| QueueError::BadValue {
        id: s.id,
        field,
        value,
        why,
    };
    if s.members.is_empty() {
        return Err(QueueError::EmptyParty(s.id));
    }
    if s.members.len() > mode.team_size {
        return Err(QueueError::PartyTooLarge {
            id: s.id,
            size: s.members.len(),
            team_size: mode.team_size,
        });
    }
    if !(-90.0..=90.0).contains(&s.lat) {
        return Err(bad("lat", s.lat, "must be within [-90, 90]"));
    }
    if !(-180.0..=180.0).contains(&s.lon) {
        return Err(bad("lon", s.lon, "must be within [-180, 180]"));
    }
    for m in &s.members {
        if !(0.0..=1.0).contains(&m.percentile) {
            return Err(bad("percentile", m.percentile, "must be within [0, 1]"));
        }
        if !m.raw_skill.is_finite() {
            return Err(bad("raw_skill", m.raw_skill, "must be finite"));
        }
        if !m.outcome_skill.is_finite() {
            return Err(bad("outcome_skill", m.outcome_skill, "must be finite"));
        }
        for &c in &m.churn {
            if !(0.0..=1.0).contains(&c) {
                return Err(bad("churn", c, "must be a probability"));
            }
        }
        for &c in m.churn_by_loss.iter().flatten() {
            if !(0.0..=1.0).contains(&c) {
                return Err(bad("churn_by_loss", c, "must be a probability"));
            }
        }
    }
    for &(_, p) in &s.pings {
        if !(p.is_finite() && p >= 0.0) {
            return Err(bad("ping", f64::from(p), "must be finite and >= 0"));
        }
    }
    Ok(())
}
