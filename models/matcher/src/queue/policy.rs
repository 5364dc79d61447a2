//! The policy trait, the maximum-wait rescue every policy ends its tick with, and the structural
//! checks every policy's lobbies pass.

use std::collections::HashSet;

use super::Backoff;
use super::explain::{Explanation, Rule};
use super::lobby::{Lobby, LobbyModels, QualityWeights, balanced_split, make_lobby, score_split};
use super::tick::{Distance, TickState, platforms_compatible};
use super::{Queue, QueueError, SearchId};

/// The settings of the maximum-wait rule, which every policy applies at the end of its tick:
/// the models and quality weights that score a rescued lobby, the team size, the maximum wait
/// and the candidate distance (which orders a rescued search's candidates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxWaitRule {
    pub models: LobbyModels,
    pub weights: QualityWeights,
    pub team_size: usize,
    pub max_wait_s: f64,
    pub distance: Distance,
}

/// A policy's own rule for backfills, until the lobby's slots have been open for the rule's
/// maximum wait (then the CoD backfill rules alone fill them, as the maximum-wait rule places a
/// search its policy could not).
#[derive(Debug, Clone, PartialEq)]
pub enum BackfillRule {
    /// The threshold policy's, in place of the CoD rules' skill similarity, disparity and ping
    /// (its own lobbies form without them, by their quality alone): the lobby's `candidates`
    /// nearest searches by the policy's N-dimensional distance from the lobby's centre (its
    /// players' mean location and percentile), platform-compatible with its parties, are taken
    /// nearest first while they fit, and the lobby with them added, its players fixed, must
    /// score at least `threshold` at the age of its oldest (a joiner, or the lobby's parties'
    /// longest wait when they joined plus the time its slots have been open; a new lobby needs
    /// its oldest search's threshold), by the rule's weights and models (the maximum wait
    /// scales the wait criterion). The fill starts from each candidate in turn, nearest first,
    /// and the first that passes and fills every open slot is taken (the policy forms the
    /// first lobby that passes), else the first that fills the most.
    Quality {
        rule: MaxWaitRule,
        threshold: Backoff,
        candidates: usize,
    },
    /// Team EOMM's, beside the CoD backfill rules: of the candidate sets that fit (the
    /// oldest-first fill; the fill from the `candidates` searches nearest to the raw skill that
    /// evens the teams; and `alternatives` more, each leaving out one search of the first), the
    /// one that fills the most slots and then leaves the lobby the least expected churn, within
    /// the balance bound (`|P(A wins | decisive) - 1/2|` at most `balance` at the least of the
    /// lobby's open age and the joiners' ages; `None`: no bound) or, beyond it, no more uneven
    /// than the lobby is with its slots empty (the CoD paper's "backfills never increase an
    /// existing team imbalance").
    Churn {
        rule: MaxWaitRule,
        balance: Option<Backoff>,
        alternatives: usize,
        candidates: usize,
    },
}

/// A matchmaking policy for a live queue. Deterministic for a seed when no time budget is set.
pub trait Policy {
    fn name(&self) -> &'static str;

    /// The lobbies the policy's own rules form from the queue at `now_ms`, each search in one
    /// lobby at most; the queue is not changed. [`Policy::tick`] adds the maximum-wait rule's.
    fn form_lobbies(&mut self, now_ms: i64, queue: &Queue) -> Vec<Lobby>;

    /// The settings of the maximum-wait rule the policy ends each tick with.
    fn max_wait_rule(&self) -> MaxWaitRule;

    /// The policy's own rule for backfills ([`BackfillRule`]; `None`, the default: the CoD
    /// backfill rules alone).
    fn backfill_rule(&self) -> Option<BackfillRule> {
        None
    }

    /// Forms lobbies from the queue at `now_ms`: the policy's own ([`Policy::form_lobbies`]), then the
    /// maximum-wait rule's for every search still unplaced that has waited the maximum
    /// ([`rescue_overdue`]). Removes their searches from the queue and returns them.
    fn tick(&mut self, now_ms: i64, queue: &mut Queue) -> Vec<Lobby> {
        let mut lobbies = self.form_lobbies(now_ms, queue);
        lobbies.extend(rescue_overdue(
            queue,
            &lobbies,
            &self.max_wait_rule(),
            now_ms,
        ));
        queue.remove_placed(&lobbies);
        lobbies
    }

    /// Why the search `id` is still queued.
    ///
    /// # Errors
    /// The search is not in the queue.
    fn explain(&self, now_ms: i64, queue: &Queue, id: SearchId) -> Result<Explanation, QueueError>;

    /// The policy's own rules for a lobby formed at `now_ms` from `queue` (the queue as it was
    /// before the tick); `Err` names the rule the lobby breaks. Rescued lobbies are checked
    /// against the maximum-wait rule instead.
    ///
    /// # Errors
    /// The rule the lobby breaks.
    fn check(&self, now_ms: i64, queue: &Queue, lobby: &Lobby) -> Result<(), Rule>;
}

/// Shared structural checks of a lobby: each search once, full equal teams (or, with partial
/// lobbies, equal teams of at least `partial_min` players in all), parties intact, platforms
/// compatible; returns the search indices per team.
pub(crate) fn check_structure(
    queue: &Queue,
    lobby: &Lobby,
    partial_min: Option<usize>,
) -> Result<[Vec<usize>; 2], Rule> {
    let t = queue.mode().team_size;
    let idx = |id: SearchId| queue.searches().iter().position(|s| s.id == id);
    let mut teams: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for (team, ids) in teams.iter_mut().zip(&lobby.teams) {
        for &id in ids {
            team.push(idx(id).ok_or(Rule::TeamBalance)?);
        }
    }
    let mut all: Vec<usize> = teams[0].iter().chain(&teams[1]).copied().collect();
    let size = |i: usize| queue.searches()[i].members.len();
    let n = [0, 1].map(|k| teams[k].iter().map(|&i| size(i)).sum::<usize>());
    let sized = match partial_min {
        None => n == [t, t],
        Some(m) => n[0] == n[1] && n[0] <= t && 2 * n[0] >= m.max(2),
    };
    if !sized {
        return Err(Rule::TeamBalance);
    }
    all.sort_unstable();
    if all.windows(2).any(|w| w[0] == w[1]) {
        return Err(Rule::TeamBalance);
    }
    let s = queue.searches();
    for (x, &i) in all.iter().enumerate() {
        for &j in &all[x + 1..] {
            if !platforms_compatible(&s[i], &s[j]) {
                return Err(Rule::Platform);
            }
        }
    }
    Ok(teams)
}

/// The maximum-wait rule: places every search of `queue` that is not in `placed`, has waited
/// `max_wait_s` or more, oldest first, in the nearest feasible lobby (see `TickState::rescue`),
/// split by the CoD lobby-phase rule. The tick's working state is built only when some search
/// is overdue.
#[must_use]
pub fn rescue_overdue(
    queue: &Queue,
    placed: &[Lobby],
    rule: &MaxWaitRule,
    now_ms: i64,
) -> Vec<Lobby> {
    let taken: HashSet<SearchId> = placed.iter().flat_map(Lobby::search_ids).collect();
    let age_s = |start_ms: i64| ((now_ms - start_ms) as f64 / 1000.0).max(0.0);
    let overdue = queue
        .searches()
        .iter()
        .any(|s| !taken.contains(&s.id) && age_s(s.start_ms) >= rule.max_wait_s);
    if !overdue {
        return Vec::new();
    }
    let mut st = TickState::new(queue, now_ms, rule.models.party, rule.distance);
    let done: Vec<usize> = (0..queue.len())
        .filter(|&i| taken.contains(&queue.searches()[i].id))
        .collect();
    st.take(&done);
    let t = rule.team_size;
    let mut out = Vec::new();
    for a in st.age_order() {
        if st.taken[a] || st.views[a].age_s < rule.max_wait_s {
            continue;
        }
        let Some(ids) = st.rescue(a, t) else {
            continue;
        };
        let Some(teams) = balanced_split(&st.views, &ids, t) else {
            continue;
        };
        let scored = score_split(&st, &rule.models, &rule.weights, &teams, t, rule.max_wait_s);
        out.push(make_lobby(&st, teams, &scored, now_ms, true));
        st.take(&ids);
    }
    out
}
