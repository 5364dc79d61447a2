//! EOMM for team lobbies, inside the queue's rules. The EOMM paper leaves teams open ("Instead
//! of a pair assignment, we seek a grouping assignment on a complete graph"). This policy is not
//! a separate rule-free queue: among the lobbies and splits that the Call of Duty rules accept
//! (candidates by distance, skill similarity, skill disparity and delta ping, each loosening with
//! the search's age; full lobbies of two equal teams, parties never split, platforms compatible)
//! and that are balanced enough, it chooses those of least total expected churn.
//!
//! **Balance bound.** A lobby's `|P(A wins | decisive) - 1/2|` must not exceed the least
//! allowance of its searches, read from a backoff curve of their age (`balance`; `None` for no
//! bound). Without a blowout model the default is 0.05 at once, loosening to 0.1 at two
//! minutes ([`BALANCE`]): replayed on the main job's held-out 6v6 day under the simulator's
//! truth, looser bounds then buy predicted churn with real blowouts (0.1 to 0.2: true blowouts
//! 1.3 times the CoD rules', no true gain; no bound: 46% blowouts and 1.3 points more true
//! churn). With one (artifact format 6) the objective weighs blowouts itself and the default is
//! 0.1 to 0.2 ([`BALANCE_WITH_BLOWOUTS`], [`EommTeamsConfig::for_models`]): on the same day
//! its true blowouts are 1.10 times the CoD rules' and its true gain the largest of the bounds
//! tried (docs/eomm.md). Neither admits a predicted blowout (a favourite at 0.75 or more).
//!
//! A lobby's expected churn, for a split, is `sum over players of P(own team wins) churn(win) +
//! P(draw) churn(draw) + P(own team loses) churn(loss)`, where with a blowout model (artifact
//! format 6) `churn(loss)` is `(1 - q) churn(close loss) + q churn(blowout loss)` and `q` the
//! chance that the team's loss is a blowout, with the probabilities from the team
//! win model (raw-skill sums and party terms) and each player's churn by outcome from the churn
//! model, as the paper proposes: a player's churn depends on the others only through the
//! outcome. The best split of a set of parties is found by enumerating every split of equal team
//! sizes (depth first over the parties, team sums carried, only subsets of team size reached)
//! up to `exact_split_parties` parties; larger sets use the skill-balanced split.
//!
//! Each tick:
//! 1. **Construction**: every search in turn (oldest first) anchors a lobby grown from its top K
//!    candidates under the rules. The first fill takes them nearest first, exactly as the CoD
//!    rules policy does, so a lobby forms whenever the CoD policy would form one there (unless
//!    every split of it is beyond the balance bound); `restarts` more fills take them in
//!    shuffled orders, and the admitted lobby of least expected churn is kept.
//! 2. **Local search** (`passes`, off by default): swaps of same-size searches between
//!    neighbouring lobbies (lobbies that hold candidates of each other's anchors), kept only when
//!    both lobbies still pass every rule, each re-split for least churn, accepted when the total
//!    falls, pass after pass until none improves or the budget is spent.
//!
//! The defaults (one shuffled fill, no local search) come from the replays of docs/eomm.md: on
//! a live queue ticking every 5 s, few lobbies can form at once, and more restarts (2, 4) or
//! three passes of local search changed the realised gain within noise, while the local search
//! made a cold tick of 10,000 searches 20 times slower than the CoD rules'. With these
//! defaults that tick takes about 1.4 times the CoD rules'.
//!
//! [`exhaustive_min_churn`] solves small queues exactly under the same rules (every partition
//! into admitted lobbies, every split within the bound), so that the gap can be measured.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::cod::{Candidate, CodConfig, CodRules, LobbyBuilder};
use crate::queue::{
    BackfillRule, Backoff, Blocker, Deadline, Explanation, Lobby, LobbyModels, MaxWaitRule, Policy,
    Queue, QueueError, Rule, SearchId, TickState, View, balanced_split, check_structure,
    make_lobby, score_split, split_churn, team_churn, team_sample,
};
use mm_artifact::team::{TeamSample, sigmoid};

/// Settings of the EOMM team policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EommTeamsConfig {
    /// The queue's rules, which every lobby this policy forms passes: team size, K candidates,
    /// distance, skill similarity, disparity and delta ping with their backoff, the maximum
    /// wait and the weights of the quality reported with each lobby.
    pub rules: CodConfig,
    /// Largest `|P(A wins | decisive) - 1/2|` a search accepts, by its age; a lobby takes the
    /// least of its searches'. `None` for no bound.
    pub balance: Option<Backoff>,
    /// Extra shuffled fills per anchor.
    pub restarts: usize,
    /// Local-search passes at most.
    pub passes: usize,
    /// Largest party count whose splits are all enumerated.
    pub exact_split_parties: usize,
    pub time_budget: Option<Duration>,
    pub seed: u64,
}

/// The default balance bound for lobby models without a blowout model: `|P(A wins | decisive)
/// - 1/2|` at most 0.05 at once, 0.1 from 120 s (module docs).
pub const BALANCE: [(f64, f64); 2] = [(0.0, 0.05), (120.0, 0.1)];

/// The default balance bound for lobby models with a blowout model (artifact format 6, whose
/// churn model tells a blowout loss from a close one): 0.1 at once, 0.2 from 120 s. The
/// objective then weighs blowouts itself, and a looser bound leaves it more to choose from.
pub const BALANCE_WITH_BLOWOUTS: [(f64, f64); 2] = [(0.0, 0.1), (120.0, 0.2)];

impl EommTeamsConfig {
    /// The CoD rules' defaults for the mode, and the default balance bound for models without
    /// a blowout model ([`BALANCE`]); [`EommTeamsConfig::for_models`] chooses by the models.
    #[must_use]
    pub fn new(team_size: usize) -> EommTeamsConfig {
        EommTeamsConfig {
            rules: CodConfig::new(team_size),
            balance: Some(Backoff::new(&BALANCE)),
            restarts: 1,
            passes: 0,
            exact_split_parties: 14,
            time_budget: None,
            seed: 0,
        }
    }

    /// [`EommTeamsConfig::new`] with the default balance bound for `models`:
    /// [`BALANCE_WITH_BLOWOUTS`] when they have a blowout model, else [`BALANCE`].
    #[must_use]
    pub fn for_models(team_size: usize, models: &LobbyModels) -> EommTeamsConfig {
        let mut c = EommTeamsConfig::new(team_size);
        if models.win.blowout.is_some() {
            c.balance = Some(Backoff::new(&BALANCE_WITH_BLOWOUTS));
        }
        c
    }

    /// No rule but structure and platforms, and no balance bound: the EOMM objective alone, for
    /// measuring what the rules cost. Not for a live queue (it forms blowouts).
    #[must_use]
    pub fn unruled(team_size: usize) -> EommTeamsConfig {
        EommTeamsConfig {
            rules: CodConfig::open(team_size),
            balance: None,
            ..EommTeamsConfig::new(team_size)
        }
    }

    /// The balance bound of a lobby of the searches `ids`: the least of their allowances.
    fn cap(&self, views: &[View], ids: &[usize]) -> Option<f64> {
        let b = self.balance.as_ref()?;
        Some(
            ids.iter()
                .map(|&i| b.at(views[i].age_s))
                .fold(f64::INFINITY, f64::min),
        )
    }
}

/// Another objective for the same search: the cost of a split given team A's and team B's
/// search ids, the same with the teams swapped (mirror splits are not scored twice). The offline evaluation passes the simulator's true expected churn, which makes
/// the policy the team oracle: the same rules, balance bound and search, scored by the truth.
#[derive(Clone)]
pub struct Objective(pub Arc<SplitCost>);

/// The cost of a split: team A's and team B's search ids.
pub type SplitCost = dyn Fn(&[SearchId], &[SearchId]) -> f64 + Send + Sync;

impl std::fmt::Debug for Objective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Objective(..)")
    }
}

/// The EOMM team policy.
#[derive(Debug, Clone)]
pub struct EommTeams {
    pub config: EommTeamsConfig,
    pub models: LobbyModels,
    rng: ChaCha8Rng,
    /// When set, splits are chosen by it instead of the churn model's expected churn.
    objective: Option<Objective>,
}

/// The least expected churn of a lobby of the parties `ids` over its valid splits, with that
/// split. `None` when no split has equal teams within the imbalance cap.
fn best_churn_split(
    views: &[View],
    ids: &[usize],
    team_size: usize,
    models: &LobbyModels,
    max_imbalance: Option<f64>,
    exact_parties: usize,
) -> Option<(f64, [Vec<usize>; 2])> {
    let p = ids.len();
    if p == 0 {
        return None;
    }
    if p > exact_parties.min(63) {
        let teams = balanced_split(views, ids, team_size)?;
        let s = team_sample(views, &teams);
        let decisive = sigmoid(models.win.logit(&s));
        if !within_cap(decisive, max_imbalance) {
            return None;
        }
        let (w, d, l) = models.win.probs_given_decisive(&s, decisive);
        let q = models.win.blowout_given_loss(models.win.logit(&s));
        return Some((split_churn(views, &teams, [w, d, l], q), teams));
    }
    // Each party's size and sums (outcome skill, party members, party spread, churn by outcome),
    // contiguous; then every subset of team size holding party 0 (the mirror splits are the
    // same lobbies), depth first with the sums carried, so only subsets of the right size are
    // reached.
    let parts: Vec<(usize, Sums)> = ids
        .iter()
        .map(|&i| {
            let x = &views[i];
            let c = x.churn;
            (
                x.size,
                [
                    x.outcome_sum,
                    x.party_members,
                    x.party_spread,
                    c[0],
                    c[1],
                    c[2],
                    c[3],
                    c[4],
                ],
            )
        })
        .collect();
    let mut total = [0.0; 8];
    for (_, x) in &parts {
        add(&mut total, x);
    }
    if parts.iter().map(|x| x.0).sum::<usize>() != 2 * team_size {
        return None;
    }
    // `rest[k]`: the players of parties k and after.
    let mut rest = vec![0; p + 1];
    for k in (0..p).rev() {
        rest[k] = rest[k + 1] + parts[k].0;
    }
    let mut search = SplitSearch {
        parts: &parts,
        rest: &rest,
        team_size,
        total,
        models,
        max_imbalance,
        best: None,
    };
    search.visit(1, parts[0].0, parts[0].1, 1);
    let (c, mask) = search.best?;
    let mut teams: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for (k, &id) in ids.iter().enumerate() {
        teams[usize::from(mask >> k & 1 == 0)].push(id);
    }
    Some((c, teams))
}

/// The split of least `objective` among every split of the parties `ids` into equal teams
/// within the balance cap (read from the lobby models, as the rules are).
fn objective_split(
    st: &TickState<'_>,
    ids: &[usize],
    team_size: usize,
    models: &LobbyModels,
    cap: Option<f64>,
    objective: &Objective,
) -> Option<(f64, [Vec<usize>; 2])> {
    let p = ids.len();
    if p == 0 || p > 24 {
        return None;
    }
    let mut best: Option<(f64, [Vec<usize>; 2])> = None;
    // Team A holds party 0 (mirror splits are the same lobbies).
    for mask in (1u32..1 << p).step_by(2) {
        let mut teams: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        for (k, &i) in ids.iter().enumerate() {
            teams[usize::from(mask >> k & 1 == 0)].push(i);
        }
        let size = |t: usize| teams[t].iter().map(|&i| st.views[i].size).sum::<usize>();
        if size(0) != team_size || size(1) != team_size {
            continue;
        }
        let decisive = sigmoid(models.win.logit(&team_sample(&st.views, &teams)));
        if !within_cap(decisive, cap) {
            continue;
        }
        let sid =
            |t: usize| -> Vec<SearchId> { teams[t].iter().map(|&i| st.searches[i].id).collect() };
        let c = (objective.0)(&sid(0), &sid(1));
        if best.as_ref().is_none_or(|b| c < b.0 - 1e-15) {
            best = Some((c, teams));
        }
    }
    best
}

/// Whether a split with `P(A wins | decisive)` = `decisive` is within the imbalance cap.
fn within_cap(decisive: f64, max_imbalance: Option<f64>) -> bool {
    max_imbalance.is_none_or(|cap| (decisive - 0.5).abs() <= cap + 1e-12)
}

/// A party's (or a team's) raw-skill sum, party members, party spread and churn sums after a
/// win, a draw, a loss, a close loss and a blowout loss.
type Sums = [f64; 8];

fn add(a: &mut Sums, b: &Sums) {
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// The exact split search of [`best_churn_split`]: team A's parties as a bit mask.
struct SplitSearch<'a> {
    parts: &'a [(usize, Sums)],
    rest: &'a [usize],
    team_size: usize,
    total: Sums,
    models: &'a LobbyModels,
    max_imbalance: Option<f64>,
    best: Option<(f64, u64)>,
}

impl SplitSearch<'_> {
    /// Parties from `k` on, with team A at `size` players, sums `a` and parties `mask`.
    fn visit(&mut self, k: usize, size: usize, a: Sums, mask: u64) {
        if size == self.team_size {
            self.leaf(&a, mask);
            return;
        }
        // Too many players on A (a party larger than a team), or too few left to fill it.
        if size > self.team_size || size + self.rest[k] < self.team_size {
            return;
        }
        let (n, x) = &self.parts[k];
        if size + n <= self.team_size {
            let mut with = a;
            add(&mut with, x);
            self.visit(k + 1, size + n, with, mask | 1 << k);
        }
        self.visit(k + 1, size, a, mask);
    }

    /// Team A is full: the rest are team B.
    fn leaf(&mut self, a: &Sums, mask: u64) {
        let t = &self.total;
        let s = TeamSample {
            skill_diff: 2.0 * a[0] - t[0],
            party_members_diff: 2.0 * a[1] - t[1],
            party_spread_diff: 2.0 * a[2] - t[2],
            ..TeamSample::default()
        };
        let z = self.models.win.logit(&s);
        let decisive = sigmoid(z);
        if !within_cap(decisive, self.max_imbalance) {
            return;
        }
        let (w, d, l) = self.models.win.probs_given_decisive(&s, decisive);
        let q = self.models.win.blowout_given_loss(z);
        let mut b = [0.0; 5];
        for (k, x) in b.iter_mut().enumerate() {
            *x = t[3 + k] - a[3 + k];
        }
        let c = team_churn(&a[3..], [w, d, l], q.map(|q| q[0]))
            + team_churn(&b, [l, d, w], q.map(|q| q[1]));
        if self.best.is_none_or(|(bc, _)| c < bc - 1e-15) {
            self.best = Some((c, mask));
        }
    }
}

#[derive(Debug, Clone)]
struct Tentative {
    ids: Vec<usize>,
    teams: [Vec<usize>; 2],
    churn: f64,
    /// The anchor's candidate pool (for neighbourhoods).
    pool: Vec<usize>,
}

impl EommTeams {
    #[must_use]
    pub fn new(config: EommTeamsConfig, models: LobbyModels) -> EommTeams {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        EommTeams {
            config,
            models,
            rng,
            objective: None,
        }
    }

    /// The same policy choosing splits and lobbies by `objective` (see [`Objective`]); the
    /// rules and the balance bound still read the lobby models.
    #[must_use]
    pub fn with_objective(mut self, objective: Objective) -> EommTeams {
        self.objective = Some(objective);
        self
    }

    /// The candidate records of every search at this tick (the rules' view of each).
    fn candidates(&self, st: &TickState<'_>) -> Vec<Candidate> {
        st.views
            .iter()
            .enumerate()
            .map(|(i, v)| self.config.rules.candidate(v, i))
            .collect()
    }

    /// The least expected churn of the lobby `ids` over the splits within its balance bound.
    fn cost(&self, st: &TickState<'_>, ids: &[usize]) -> Option<(f64, [Vec<usize>; 2])> {
        let c = &self.config;
        let cap = c.cap(&st.views, ids);
        if let Some(obj) = &self.objective {
            return objective_split(st, ids, c.rules.team_size, &self.models, cap, obj);
        }
        best_churn_split(
            &st.views,
            ids,
            c.rules.team_size,
            &self.models,
            cap,
            c.exact_split_parties,
        )
    }

    /// The admitted lobby of least expected churn around `anchor`, or the rule that kept every
    /// fill from one.
    fn construct(
        &self,
        st: &TickState<'_>,
        cands: &[Candidate],
        anchor: usize,
        rng: &mut ChaCha8Rng,
        deadline: Deadline,
    ) -> Result<Tentative, Rule> {
        let c = &self.config;
        let r = &c.rules;
        // The first fill walks the candidates nearest first and stops when the lobby is full,
        // as the CoD policy does; the candidates it saw are the pool of the shuffled fills
        // (walking all K for every anchor was most of the tick). With the local search on, the
        // walk goes on to all K: they are the lobby's neighbourhood for the swaps, and the
        // shuffled fills draw from them too.
        let mut nearest: Vec<usize> = Vec::with_capacity(r.k);
        let mut walk = st.nearest_iter(anchor).take(r.k).map(|x| x.1);
        let mut order = Vec::new();
        let mut best: Option<Tentative> = None;
        let mut filled = false;
        for round in 0..=c.restarts {
            if round > 0 {
                if deadline.passed() {
                    break;
                }
                if c.passes > 0 {
                    nearest.extend(walk.by_ref());
                }
                order.clone_from(&nearest);
                order.shuffle(rng);
            }
            let mut b = LobbyBuilder::new(r.team_size);
            b.try_add(&cands[anchor], st.searches)?;
            if round == 0 {
                for j in walk.by_ref() {
                    nearest.push(j);
                    // A refused candidate leaves the lobby as it was.
                    let _ = b.try_add(&cands[j], st.searches);
                    if b.is_full() {
                        break;
                    }
                }
            } else {
                for &j in &order {
                    if b.is_full() {
                        break;
                    }
                    let _ = b.try_add(&cands[j], st.searches);
                }
            }
            if !b.is_full() {
                continue;
            }
            filled = true;
            let mut ids = b.members().to_vec();
            ids.sort_unstable();
            if best.as_ref().is_some_and(|t| t.ids == ids) {
                continue;
            }
            if let Some((churn, teams)) = self.cost(st, &ids)
                && best.as_ref().is_none_or(|t| churn < t.churn)
            {
                best = Some(Tentative {
                    ids,
                    teams,
                    churn,
                    pool: Vec::new(),
                });
            }
        }
        if !filled {
            return Err(Rule::NotEnoughPlayers);
        }
        let mut best = best.ok_or(Rule::Imbalance)?;
        if c.passes > 0 {
            nearest.extend(walk);
        }
        best.pool = nearest;
        Ok(best)
    }

    /// Swaps between neighbouring lobbies while the total expected churn falls; both lobbies
    /// of a swap must still pass every rule.
    fn local_search(&self, st: &TickState<'_>, lobbies: &mut [Tentative], deadline: Deadline) {
        let mut owner = vec![usize::MAX; st.views.len()];
        for (l, t) in lobbies.iter().enumerate() {
            for &i in &t.ids {
                owner[i] = l;
            }
        }
        let rules = &self.config.rules;
        // A pair of lobbies whose every swap was tried without improvement is not tried again
        // until one of the two changes: the outcome is the same, with far fewer re-splits
        // (every pair is reached from both sides, and again in each later pass).
        let mut version = vec![0u64; lobbies.len()];
        let mut settled: HashMap<(usize, usize), (u64, u64)> = HashMap::new();
        for _ in 0..self.config.passes {
            let mut improved = false;
            for a in 0..lobbies.len() {
                if deadline.passed() {
                    return;
                }
                let mut neigh: Vec<usize> = lobbies[a]
                    .pool
                    .iter()
                    .map(|&i| owner[i])
                    .filter(|&l| l != usize::MAX && l != a)
                    .collect();
                neigh.sort_unstable();
                neigh.dedup();
                for b in neigh {
                    let key = (a.min(b), a.max(b));
                    let versions = (version[key.0], version[key.1]);
                    if settled.get(&key) == Some(&versions) {
                        continue;
                    }
                    let mut swapped = false;
                    'pairs: for x in 0..lobbies[a].ids.len() {
                        for y in 0..lobbies[b].ids.len() {
                            let (i, j) = (lobbies[a].ids[x], lobbies[b].ids[y]);
                            if st.views[i].size != st.views[j].size {
                                continue;
                            }
                            let mut ia = lobbies[a].ids.clone();
                            let mut ib = lobbies[b].ids.clone();
                            ia[x] = j;
                            ib[y] = i;
                            if rules.admits(st, &ia, false).is_err()
                                || rules.admits(st, &ib, false).is_err()
                            {
                                continue;
                            }
                            let (Some(ca), Some(cb)) = (self.cost(st, &ia), self.cost(st, &ib))
                            else {
                                continue;
                            };
                            if ca.0 + cb.0 < lobbies[a].churn + lobbies[b].churn - 1e-12 {
                                owner[i] = b;
                                owner[j] = a;
                                lobbies[a].ids = ia;
                                lobbies[a].churn = ca.0;
                                lobbies[a].teams = ca.1;
                                lobbies[b].ids = ib;
                                lobbies[b].churn = cb.0;
                                lobbies[b].teams = cb.1;
                                version[a] += 1;
                                version[b] += 1;
                                improved = true;
                                swapped = true;
                                break 'pairs;
                            }
                        }
                    }
                    if !swapped {
                        settled.insert(key, versions);
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }
}

impl Policy for EommTeams {
    fn name(&self) -> &'static str {
        "eomm"
    }

    fn form_lobbies(&mut self, now_ms: i64, queue: &Queue) -> Vec<Lobby> {
        let deadline = Deadline::after(self.config.time_budget);
        let r = self.config.rules.clone();
        let mut st = TickState::new(queue, now_ms, self.models.party, r.distance);
        let mut rng = self.rng.clone();
        let cands = self.candidates(&st);
        let mut tentative = Vec::new();
        for a in st.age_order() {
            if st.taken[a] {
                continue;
            }
            if let Ok(t) = self.construct(&st, &cands, a, &mut rng, deadline) {
                st.take(&t.ids);
                tentative.push(t);
            }
        }
        self.local_search(&st, &mut tentative, deadline);
        let lobbies: Vec<Lobby> = tentative
            .into_iter()
            .map(|t| {
                let scored = score_split(
                    &st,
                    &self.models,
                    &r.quality,
                    &t.teams,
                    r.team_size,
                    r.max_wait_s,
                );
                make_lobby(&st, t.teams, &scored, now_ms, false)
            })
            .collect();
        self.rng = rng;
        lobbies
    }

    fn max_wait_rule(&self) -> MaxWaitRule {
        let r = &self.config.rules;
        MaxWaitRule {
            models: self.models,
            weights: r.quality,
            team_size: r.team_size,
            max_wait_s: r.max_wait_s,
            distance: r.distance,
        }
    }

    /// Backfills choose, among the candidate sets that fit, the least expected churn within
    /// the balance bound (as many alternatives as the policy's restarts, at least 2).
    fn backfill_rule(&self) -> Option<BackfillRule> {
        Some(BackfillRule::Churn {
            rule: self.max_wait_rule(),
            balance: self.config.balance.clone(),
            alternatives: self.config.restarts.max(2),
            candidates: self.config.rules.k,
        })
    }

    /// The CoD rules' explanation; when the rules admit a lobby but every split of it is beyond
    /// the balance bound, that blocker first.
    fn explain(&self, now_ms: i64, queue: &Queue, id: SearchId) -> Result<Explanation, QueueError> {
        let mut e =
            CodRules::new(self.config.rules.clone(), self.models).explain(now_ms, queue, id)?;
        let a = queue.position(id)?;
        let st = TickState::new(queue, now_ms, self.models.party, self.config.rules.distance);
        let mut rng = self.rng.clone();
        let cands = self.candidates(&st);
        if let Err(Rule::Imbalance) =
            self.construct(&st, &cands, a, &mut rng, Deadline::after(None))
        {
            let cap = self.config.cap(&st.views, &[a]).unwrap_or(f64::INFINITY);
            e.blockers.retain(|b| b.rule != Rule::NotEnoughPlayers);
            e.blockers.insert(
                0,
                Blocker {
                    rule: Rule::Imbalance,
                    candidates: st.nearest(a, self.config.rules.k).len(),
                    relaxes_at_ms: None,
                    detail: format!(
                        "every split of the lobbies found has |P(win) - 1/2| above the bound \
                         ({cap:.3} for this search now)"
                    ),
                },
            );
        }
        Ok(e)
    }

    fn check(&self, now_ms: i64, queue: &Queue, lobby: &Lobby) -> Result<(), Rule> {
        let teams = check_structure(queue, lobby, None)?;
        if lobby.rescued {
            return Ok(());
        }
        let st = TickState::new(queue, now_ms, self.models.party, self.config.rules.distance);
        let ids: Vec<usize> = teams[0].iter().chain(&teams[1]).copied().collect();
        self.config.rules.admits(&st, &ids, false)?;
        let s = team_sample(&st.views, &teams);
        if self
            .config
            .cap(&st.views, &ids)
            .is_some_and(|cap| (sigmoid(self.models.win.logit(&s)) - 0.5).abs() > cap + 1e-9)
        {
            return Err(Rule::Imbalance);
        }
        Ok(())
    }
}

/// The exact optimum for a small queue under the policy's rules: the least total expected churn
/// over every partition of all its searches into admitted lobbies and every split within the
/// balance bound, by dynamic programming over subsets. `None` when the searches cannot all be
/// placed so. Up to 20 searches.
#[must_use]
pub fn exhaustive_min_churn(
    queue: &Queue,
    models: &LobbyModels,
    config: &EommTeamsConfig,
    now_ms: i64,
) -> Option<f64> {
    let t = queue.mode().team_size;
    let n = queue.len();
    if n > 20 {
        return None;
    }
    let st = TickState::new(queue, now_ms, models.party, config.rules.distance);
    let full = (1usize << n) - 1;
    let mut f = vec![f64::INFINITY; 1 << n];
    f[0] = 0.0;
    // f[S]: least churn placing exactly the searches of S; extend by lobbies holding the lowest
    // search outside S.
    for s in 0..=full {
        if !f[s].is_finite() || s == full {
            continue;
        }
        let low = (!s).trailing_zeros() as usize;
        let rest: Vec<usize> = (low + 1..n).filter(|&j| s >> j & 1 == 0).collect();
        let mut lobbies = Vec::new();
        let need = 2 * t - st.views[low].size.min(2 * t);
        lobbies_with(
            &rest,
            &|i| st.views[i].size,
            need,
            &mut vec![low],
            &mut lobbies,
        );
        for ids in lobbies {
            if config.rules.admits(&st, &ids, false).is_err() {
                continue;
            }
            let cap = config.cap(&st.views, &ids);
            if let Some((c, _)) = best_churn_split(&st.views, &ids, t, models, cap, 64) {
                let ns = ids.iter().fold(s, |acc, &i| acc | 1 << i);
                f[ns] = f[ns].min(f[s] + c);
            }
        }
    }
    f[full].is_finite().then_some(f[full])
}

/// Every way to pick searches from `rest` (in order) whose sizes add to `need`, appended to
/// `cur`.
fn lobbies_with(
    rest: &[usize],
    size: &dyn Fn(usize) -> usize,
    need: usize,
    cur: &mut Vec<usize>,
    out: &mut Vec<Vec<usize>>,
) {
    if need == 0 {
        out.push(cur.clone());
        return;
    }
    for (k, &i) in rest.iter().enumerate() {
        let s = size(i);
        if s <= need {
            cur.push(i);
            lobbies_with(&rest[k + 1..], size, need - s, cur, out);
            cur.pop();
        }
    }
}

/// The total expected churn of lobbies formed from `queue` (before the tick), each re-scored
/// with its own split: for comparing policies.
#[must_use]
pub fn lobbies_churn(lobbies: &[Lobby]) -> f64 {
    lobbies.iter().map(|l| l.expected_churn).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm_artifact::team::{BlowoutModel, DrawModel, TeamWinModel};
    use proptest::prelude::*;

    fn view(size: usize, raw: f64, members: f64, spread: f64, churn: [f64; 5]) -> View {
        View {
            size,
            skill: 0.5,
            pct_min: 0.5,
            pct_max: 0.5,
            raw_sum: raw,
            adj_sum: raw,
            outcome_sum: raw,
            party_members: members,
            party_spread: spread,
            exp: 0.0,
            churn,
            age_s: 0.0,
            xyz: [0.0; 3],
        }
    }

    /// Every split by brute force: each of the 2^p team assignments with equal team sizes,
    /// scored through the lobby code's own sample, its expected churn written out here party by
    /// party (a loss split by the blowout model when there is one); the least expected churn.
    fn brute_force(
        views: &[View],
        team_size: usize,
        models: &LobbyModels,
        cap: Option<f64>,
    ) -> Option<f64> {
        let p = views.len();
        let mut best: Option<f64> = None;
        for mask in 0u32..(1 << p) {
            let mut teams: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
            for k in 0..p {
                teams[usize::from(mask >> k & 1 == 0)].push(k);
            }
            let size = |t: usize| teams[t].iter().map(|&i| views[i].size).sum::<usize>();
            if size(0) != team_size || size(1) != team_size {
                continue;
            }
            let s = team_sample(views, &teams);
            let pa = sigmoid(models.win.logit(&s));
            if cap.is_some_and(|c| (pa - 0.5).abs() > c + 1e-12) {
                continue;
            }
            let (w, d, l) = models.win.probs(&s);
            let z = models.win.logit(&s);
            let mut c = 0.0;
            for (t, (win, loss, z)) in [(w, l, z), (l, w, -z)].into_iter().enumerate() {
                for &i in &teams[t] {
                    let v = &views[i].churn;
                    let lost = match models.win.blowout {
                        Some(b) => {
                            let q = sigmoid(b.intercept + b.coef * z);
                            (1.0 - q) * v[3] + q * v[4]
                        }
                        None => v[2],
                    };
                    c += win * v[0] + d * v[1] + loss * lost;
                }
            }
            best = Some(best.map_or(c, |b: f64| b.min(c)));
        }
        best
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The depth-first split search finds the brute force's least expected churn, and the
        /// split it returns has equal team sizes and is scored at what it reports.
        #[test]
        fn the_split_search_matches_brute_force(
            parties in prop::collection::vec(
                (1usize..=3, -1.0f64..1.0, 0.0f64..0.4, 0.02f64..0.6, 0.0f64..0.2),
                2..=10,
            ),
            skill_coef in 0.5f64..6.0,
            party_coefs in (-0.5f64..0.5, -1.0f64..1.0),
            draw in prop::option::of((-4.0f64..-1.0, -3.0f64..0.0)),
            blowout in prop::option::of((-4.0f64..-1.0, -2.0f64..0.5)),
            cap in prop::option::of(0.05f64..0.45),
        ) {
            // The parties as drawn, and a solo player when their count of players is odd.
            let mut views = Vec::new();
            let mut players = 0;
            for (size, raw, spread, c, sens) in parties {
                let n = size as f64;
                let members = if size > 1 { n } else { 0.0 };
                // A blowout loss costs more than a close one, by a share of the sensitivity.
                let churn = [
                    n * c,
                    n * (c + sens / 2.0),
                    n * (c + sens),
                    n * (c + 0.9 * sens),
                    n * (c + 1.8 * sens),
                ];
                views.push(view(size, n * raw, members, members * spread, churn));
                players += size;
            }
            if players % 2 == 1 {
                views.push(view(1, 0.1, 0.0, 0.0, [0.2, 0.25, 0.3, 0.28, 0.4]));
                players += 1;
            }
            let team_size = players / 2;
            let models = LobbyModels {
                win: TeamWinModel {
                    basis: mm_artifact::team::SkillBasis::RawSkill,
                    skill_coef,
                    party_members_coef: party_coefs.0,
                    party_spread_coef: party_coefs.1,
                    draw: draw.map(|(intercept, abs_diff_coef)| DrawModel {
                        intercept,
                        abs_diff_coef,
                    }),
                    samples: 0,
                    draws: 0,
                    blowout: blowout.map(|(intercept, coef)| BlowoutModel {
                        margin: 30.0,
                        intercept,
                        coef,
                        samples: 0,
                        blowouts: 0,
                    }),
                },
                party: None,
            };
            let ids: Vec<usize> = (0..views.len()).collect();
            let got = best_churn_split(&views, &ids, team_size, &models, cap, 14);
            let want = brute_force(&views, team_size, &models, cap);
            prop_assert_eq!(got.is_some(), want.is_some());
            if let (Some((c, teams)), Some(w)) = (got, want) {
                prop_assert!((c - w).abs() < 1e-9, "search {c}, brute force {w}");
                let size = |t: usize| teams[t].iter().map(|&i| views[i].size).sum::<usize>();
                prop_assert_eq!((size(0), size(1)), (team_size, team_size));
                let s = team_sample(&views, &teams);
                let (pw, pd, pl) = models.win.probs(&s);
                let q = models.win.blowout_given_loss(models.win.logit(&s));
                prop_assert!((split_churn(&views, &teams, [pw, pd, pl], q) - c).abs() < 1e-9);
            }
        }
    }
}
