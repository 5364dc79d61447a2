//! EOMM for team lobbies: the EOMM paper leaves it open ("Instead of a pair assignment, we seek a
//! grouping assignment on a complete graph"). This policy chooses lobbies and splits that
//! minimise the total expected churn of the players it places, under the same balance and party
//! rules as the other policies: full lobbies of two equal teams, parties never split, platforms
//! compatible, and optionally a cap on how uneven a lobby may be (`max_imbalance`, on
//! `|P(A wins | decisive) - 1/2|`).
//!
//! A lobby's expected churn, for a split, is `sum over players of P(own team wins) churn(win) +
//! P(draw) churn(draw) + P(own team loses) churn(loss)`, with the probabilities from the team
//! win model (raw-skill sums and party terms) and each player's churn by outcome from the churn
//! model, as the paper proposes: a player's churn depends on the others only through the
//! outcome. The best split of a set of parties is found by enumerating every split of equal team
//! sizes (Gray-code order, sums updated by one party per step) up to `exact_split_parties`
//! parties; larger sets use the skill-balanced split.
//!
//! Each tick:
//! 1. **Construction**: every search in turn (oldest first) anchors a lobby drawn from its top K
//!    candidates (CoD distance, so lobbies stay geographically sensible); `restarts` + 1 fills
//!    (nearest first, then shuffled) are tried and the one of least expected churn is kept.
//! 2. **Local search**: swaps of same-size searches between neighbouring lobbies (lobbies that
//!    hold candidates of each other's anchors), each lobby re-split for least churn, accepted when
//!    the total falls, pass after pass until none improves or the budget is spent.
//!
//! [`exhaustive_min_churn`] solves small queues exactly (every partition into lobbies, every
//! split) so that the gap can be measured; the README reports it.

use std::time::Duration;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::queue::{
    Blocker, Deadline, Distance, Explanation, Lobby, LobbyModels, MaxWaitRule, Policy,
    QualityWeights, Queue, QueueError, Rule, SearchId, TickState, View, balanced_split,
    check_structure, fill_exact, make_lobby, score_split, split_churn, team_sample,
};
use mm_artifact::team::{TeamSample, sigmoid};

/// Settings of the EOMM team policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EommTeamsConfig {
    pub team_size: usize,
    pub k: usize,
    pub distance: Distance,
    /// Largest `|P(A wins | decisive) - 1/2|` allowed; `None` for no cap.
    pub max_imbalance: Option<f64>,
    /// Extra shuffled fills per anchor.
    pub restarts: usize,
    /// Local-search passes at most.
    pub passes: usize,
    /// Largest party count whose splits are all enumerated.
    pub exact_split_parties: usize,
    pub time_budget: Option<Duration>,
    pub max_wait_s: f64,
    /// Weights of the quality score reported with each lobby (not this policy's objective).
    pub quality: QualityWeights,
    pub seed: u64,
}

impl EommTeamsConfig {
    #[must_use]
    pub fn new(team_size: usize) -> EommTeamsConfig {
        EommTeamsConfig {
            team_size,
            k: 24,
            distance: Distance::default(),
            max_imbalance: Some(0.3),
            restarts: 2,
            passes: 3,
            exact_split_parties: 14,
            time_budget: None,
            max_wait_s: 120.0,
            quality: QualityWeights::default(),
            seed: 0,
        }
    }
}

/// The EOMM team policy.
#[derive(Debug, Clone)]
pub struct EommTeams {
    pub config: EommTeamsConfig,
    pub models: LobbyModels,
    rng: ChaCha8Rng,
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
    let ok = |s: &TeamSample| {
        max_imbalance.is_none_or(|cap| (sigmoid(models.win.logit(s)) - 0.5).abs() <= cap + 1e-12)
    };
    let p = ids.len();
    if p == 0 {
        return None;
    }
    if p > exact_parties {
        let teams = balanced_split(views, ids, team_size)?;
        let s = team_sample(views, &teams);
        if !ok(&s) {
            return None;
        }
        let (w, d, l) = models.win.probs(&s);
        return Some((split_churn(views, &teams, [w, d, l]), teams));
    }
    // Totals, then team A's sums, starting with party 0 alone on A.
    let v = |k: usize| &views[ids[k]];
    let total = |f: &dyn Fn(&View) -> f64| (0..p).map(|k| f(v(k))).sum::<f64>();
    let (t_raw, t_mem, t_spr) = (
        total(&|x| x.raw_sum),
        total(&|x| x.party_members),
        total(&|x| x.party_spread),
    );
    let t_churn = [
        total(&|x| x.churn[0]),
        total(&|x| x.churn[1]),
        total(&|x| x.churn[2]),
    ];
    let t_size: usize = (0..p).map(|k| v(k).size).sum();
    if t_size != 2 * team_size {
        return None;
    }
    let mut size = v(0).size;
    let (mut raw, mut mem, mut spr) = (v(0).raw_sum, v(0).party_members, v(0).party_spread);
    let mut ch = v(0).churn;
    let mut in_a = vec![false; p];
    in_a[0] = true;
    let mut best: Option<(f64, Vec<bool>)> = None;
    let rest = p - 1;
    for m in 0u64..(1u64 << rest) {
        if m > 0 {
            // Gray code: flip party 1 + trailing_zeros(m).
            let k = 1 + m.trailing_zeros() as usize;
            let x = v(k);
            let sign = if in_a[k] { -1.0 } else { 1.0 };
            in_a[k] = !in_a[k];
            if in_a[k] {
                size += x.size;
            } else {
                size -= x.size;
            }
            raw += sign * x.raw_sum;
            mem += sign * x.party_members;
            spr += sign * x.party_spread;
            for (c, &xc) in ch.iter_mut().zip(&x.churn) {
                *c += sign * xc;
            }
        }
        if size != team_size {
            continue;
        }
        let s = TeamSample {
            skill_diff: 2.0 * raw - t_raw,
            party_members_diff: 2.0 * mem - t_mem,
            party_spread_diff: 2.0 * spr - t_spr,
            outcome: 0.0,
        };
        if !ok(&s) {
            continue;
        }
        let (w, d, l) = models.win.probs(&s);
        let cb = [t_churn[0] - ch[0], t_churn[1] - ch[1], t_churn[2] - ch[2]];
        let c = w * ch[0] + d * ch[1] + l * ch[2] + l * cb[0] + d * cb[1] + w * cb[2];
        if best.as_ref().is_none_or(|b| c < b.0 - 1e-15) {
            best = Some((c, in_a.clone()));
        }
    }
    let (c, mask) = best?;
    let mut teams: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for k in 0..p {
        teams[usize::from(!mask[k])].push(ids[k]);
    }
    Some((c, teams))
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
        }
    }

    fn cost(&self, views: &[View], ids: &[usize]) -> Option<(f64, [Vec<usize>; 2])> {
        let c = &self.config;
        best_churn_split(
            views,
            ids,
            c.team_size,
            &self.models,
            c.max_imbalance,
            c.exact_split_parties,
        )
    }

    fn construct(
        &self,
        st: &TickState<'_>,
        anchor: usize,
        rng: &mut ChaCha8Rng,
        deadline: Deadline,
    ) -> Result<Tentative, Rule> {
        let c = &self.config;
        let nearest: Vec<usize> = st.nearest(anchor, c.k).into_iter().map(|x| x.1).collect();
        let start = (st.views[anchor].size, 0);
        let mut best: Option<Tentative> = None;
        let mut filled = false;
        for mut pool in st.platform_groups(anchor, &nearest) {
            for round in 0..=c.restarts {
                if round > 0 {
                    if deadline.passed() {
                        break;
                    }
                    pool.shuffle(rng);
                }
                let Some(fill) = fill_exact(&pool, |j| st.views[j].size, c.team_size, start) else {
                    break;
                };
                filled = true;
                let mut ids = vec![anchor];
                ids.extend(fill);
                if let Some((churn, teams)) = self.cost(&st.views, &ids)
                    && best.as_ref().is_none_or(|b| churn < b.churn)
                {
                    best = Some(Tentative {
                        ids,
                        teams,
                        churn,
                        pool: nearest.clone(),
                    });
                }
            }
        }
        if !filled {
            return Err(Rule::NotEnoughPlayers);
        }
        best.ok_or(Rule::Imbalance)
    }

    /// Swaps between neighbouring lobbies while the total expected churn falls.
    fn local_search(&self, st: &TickState<'_>, lobbies: &mut [Tentative], deadline: Deadline) {
        let mut owner = vec![usize::MAX; st.views.len()];
        for (l, t) in lobbies.iter().enumerate() {
            for &i in &t.ids {
                owner[i] = l;
            }
        }
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
                            if !compatible(st, &ia) || !compatible(st, &ib) {
                                continue;
                            }
                            let (Some(ca), Some(cb)) =
                                (self.cost(&st.views, &ia), self.cost(&st.views, &ib))
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
                                improved = true;
                                break 'pairs;
                            }
                        }
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }
}

fn compatible(st: &TickState<'_>, ids: &[usize]) -> bool {
    ids.iter().enumerate().all(|(x, &i)| {
        ids[x + 1..]
            .iter()
            .all(|&j| crate::queue::platforms_compatible(&st.searches[i], &st.searches[j]))
    })
}

impl Policy for EommTeams {
    fn name(&self) -> &'static str {
        "eomm"
    }

    fn form_lobbies(&mut self, now_ms: i64, queue: &Queue) -> Vec<Lobby> {
        let deadline = Deadline::after(self.config.time_budget);
        let c = self.config.clone();
        let mut st = TickState::new(queue, now_ms, self.models.party, c.distance);
        let mut rng = self.rng.clone();
        let mut tentative = Vec::new();
        for a in st.age_order() {
            if st.taken[a] {
                continue;
            }
            if let Ok(t) = self.construct(&st, a, &mut rng, deadline) {
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
                    &c.quality,
                    &t.teams,
                    c.team_size,
                    c.max_wait_s,
                );
                make_lobby(&st, t.teams, &scored, now_ms, false)
            })
            .collect();
        self.rng = rng;
        lobbies
    }

    fn max_wait_rule(&self) -> MaxWaitRule {
        MaxWaitRule {
            models: self.models,
            weights: self.config.quality,
            team_size: self.config.team_size,
            max_wait_s: self.config.max_wait_s,
            distance: self.config.distance,
        }
    }

    fn explain(&self, now_ms: i64, queue: &Queue, id: SearchId) -> Result<Explanation, QueueError> {
        let a = queue.position(id)?;
        let st = TickState::new(queue, now_ms, self.models.party, self.config.distance);
        let mut rng = self.rng.clone();
        let s = &queue.searches()[a];
        let rule = match self.construct(&st, a, &mut rng, Deadline::after(None)) {
            Ok(_) => Rule::NotEnoughPlayers,
            Err(r) => r,
        };
        let detail = match rule {
            Rule::Imbalance => format!(
                "every split of the lobbies found is more uneven than the cap {:?}",
                self.config.max_imbalance
            ),
            _ => "the nearest candidates cannot fill two teams, or were placed in other lobbies"
                .to_string(),
        };
        Ok(Explanation {
            search: id,
            wait_ms: (now_ms - s.start_ms).max(0),
            players_found: 0,
            players_needed: 2 * self.config.team_size,
            blockers: vec![Blocker {
                rule,
                candidates: st.nearest(a, self.config.k).len(),
                relaxes_at_ms: None,
                detail,
            }],
            max_wait_at_ms: s.start_ms + (self.config.max_wait_s * 1000.0).ceil() as i64,
        })
    }

    fn check(&self, now_ms: i64, queue: &Queue, lobby: &Lobby) -> Result<(), Rule> {
        let teams = check_structure(queue, lobby)?;
        if lobby.rescued {
            return Ok(());
        }
        let st = TickState::new(queue, now_ms, self.models.party, self.config.distance);
        let s = team_sample(&st.views, &teams);
        if self
            .config
            .max_imbalance
            .is_some_and(|cap| (sigmoid(self.models.win.logit(&s)) - 0.5).abs() > cap + 1e-9)
        {
            return Err(Rule::Imbalance);
        }
        Ok(())
    }
}

/// The exact optimum for a small queue: the least total expected churn over every partition of
/// all its searches into full lobbies (platforms compatible) and every valid split, by dynamic
/// programming over subsets. `None` when the searches cannot all be placed. Up to 20 searches.
#[must_use]
pub fn exhaustive_min_churn(
    queue: &Queue,
    models: &LobbyModels,
    max_imbalance: Option<f64>,
    now_ms: i64,
) -> Option<f64> {
    let t = queue.mode().team_size;
    let n = queue.len();
    if n > 20 {
        return None;
    }
    let st = TickState::new(queue, now_ms, models.party, Distance::default());
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
            if !compatible(&st, &ids) {
                continue;
            }
            if let Some((c, _)) = best_churn_split(&st.views, &ids, t, models, max_imbalance, 64) {
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
