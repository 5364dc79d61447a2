//! The threshold quality policy (the Dota 2 post's "What Makes a Good Match?" and the
//! Awesomenauts post's scores, swaps and restarts).
//!
//! Every lobby gets a weighted quality score in [0, 1] ([`crate::queue::Quality`]): team
//! balance (win probability near one half), skill spread, experience spread (log games played),
//! top-player parity, party parity, ping and wait. A lobby forms when its score reaches a
//! threshold that falls as the oldest of its searches waits (the Dota 2 post's "good enough";
//! Heroes of the Storm's start-when-good-enough as the Awesomenauts post describes it).
//!
//! Every tick, each search in turn (oldest first) is the anchor of a candidate lobby:
//! 1. its top K candidates by the CoD N-dimensional distance;
//! 2. a first lobby: candidates nearest first, each taken while two full teams can still be
//!    completed (exactly, by a small table of reachable team sizes), first from the nearest
//!    `2 x team_size` candidates alone (a lobby that passes there forms at once), then from all K;
//! 3. the split of each lobby is the exhaustive lobby-phase split, and the lobby is scored;
//! 4. **swap search**: when the score is within `swap_margin` of the threshold, the best swap of
//!    one of the lobby's searches (never the anchor) for a candidate of the same party size is
//!    made while it improves the score, up to `max_swaps` swaps;
//! 5. **restarts**: `restarts` more first lobbies from shuffled candidate orders, each improved by
//!    swaps; the best lobby found is kept (the Awesomenauts post found a couple of restarts
//!    nearly as good as tens of thousands);
//! 6. it forms if its score reaches the threshold.
//!
//! With `time_budget` set, restarts and swaps stop when the tick's budget is spent (results then
//! depend on the machine's speed); without it the policy is deterministic for its seed. Searches
//! that reach `max_wait_s` are then placed by the maximum-wait rule.

use std::time::Duration;

use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::queue::{
    BackfillRule, Backoff, Blocker, Deadline, Distance, Explanation, Lobby, LobbyModels,
    MaxWaitRule, Policy, QualityWeights, Queue, QueueError, Rule, SearchId, TickState,
    balanced_split, check_structure, fill_exact, make_lobby, score_split,
};

/// Settings of the threshold policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdConfig {
    pub team_size: usize,
    /// Candidates per anchor.
    pub k: usize,
    pub distance: Distance,
    pub weights: QualityWeights,
    /// The score a lobby needs, by the wait (s) of its oldest search.
    pub threshold: Backoff,
    /// Restarts from shuffled candidate orders after the first lobby.
    pub restarts: usize,
    /// Swaps per lobby at most.
    pub max_swaps: usize,
    /// Swap search runs only on lobbies scoring within this of the threshold.
    pub swap_margin: f64,
    /// Stop restarts and swaps when a tick has spent this long (`None`: deterministic).
    pub time_budget: Option<Duration>,
    pub max_wait_s: f64,
    pub seed: u64,
}

impl ThresholdConfig {
    #[must_use]
    pub fn new(team_size: usize) -> ThresholdConfig {
        ThresholdConfig {
            team_size,
            k: 24,
            distance: Distance::default(),
            weights: QualityWeights::default(),
            threshold: Backoff::new(&[(0.0, 0.85), (30.0, 0.8), (60.0, 0.7), (120.0, 0.5)]),
            restarts: 2,
            max_swaps: 4,
            swap_margin: 0.05,
            time_budget: None,
            max_wait_s: 120.0,
            seed: 0,
        }
    }
}

/// The threshold quality policy.
#[derive(Debug, Clone)]
pub struct ThresholdPolicy {
    pub config: ThresholdConfig,
    pub models: LobbyModels,
    rng: ChaCha8Rng,
}

/// A candidate lobby: its searches (anchor first), split and score.
#[derive(Debug, Clone)]
struct Candidate {
    ids: Vec<usize>,
    teams: [Vec<usize>; 2],
    score: f64,
}

impl ThresholdPolicy {
    #[must_use]
    pub fn new(config: ThresholdConfig, models: LobbyModels) -> ThresholdPolicy {
        let rng = ChaCha8Rng::seed_from_u64(config.seed);
        ThresholdPolicy {
            config,
            models,
            rng,
        }
    }

    fn evaluate(&self, st: &TickState<'_>, ids: Vec<usize>) -> Option<Candidate> {
        let c = &self.config;
        let teams = balanced_split(&st.views, &ids, c.team_size)?;
        let q = score_split(
            st,
            &self.models,
            &c.weights,
            &teams,
            c.team_size,
            c.max_wait_s,
        );
        Some(Candidate {
            ids,
            teams,
            score: q.quality.total,
        })
    }

    fn needed(&self, st: &TickState<'_>, cand: &Candidate) -> f64 {
        let oldest = cand
            .ids
            .iter()
            .map(|&i| st.views[i].age_s)
            .fold(0.0f64, f64::max);
        self.config.threshold.at(oldest)
    }

    /// Best-improvement swaps of a lobby's searches (not the anchor) for outside candidates of
    /// the same party size.
    fn improve(
        &self,
        st: &TickState<'_>,
        mut best: Candidate,
        pool: &[usize],
        deadline: Deadline,
    ) -> Candidate {
        for _ in 0..self.config.max_swaps {
            if deadline.passed() {
                break;
            }
            let mut step: Option<Candidate> = None;
            for pos in 1..best.ids.len() {
                let out = best.ids[pos];
                for &inn in pool {
                    if st.views[inn].size != st.views[out].size || best.ids.contains(&inn) {
                        continue;
                    }
                    let mut ids = best.ids.clone();
                    ids[pos] = inn;
                    if let Some(c) = self.evaluate(st, ids) {
                        let bar = step.as_ref().map_or(best.score, |s| s.score);
                        if c.score > bar + 1e-12 {
                            step = Some(c);
                        }
                    }
                }
            }
            match step {
                Some(s) => best = s,
                None => break,
            }
        }
        best
    }

    /// The best lobby found around `anchor`, or `None` when its candidates cannot fill one.
    fn search_lobby(
        &self,
        st: &TickState<'_>,
        anchor: usize,
        rng: &mut ChaCha8Rng,
        deadline: Deadline,
    ) -> Option<Candidate> {
        let c = &self.config;
        let start = (st.views[anchor].size, 0);
        let mut walk = st.nearest_iter(anchor);
        // First the nearest few: when they already make a lobby that passes, nothing more is
        // needed. Otherwise all K, with swaps and restarts.
        let few = (2 * c.team_size).min(c.k);
        let mut nearest: Vec<usize> = walk.by_ref().take(few).map(|x| x.1).collect();
        let mut best: Option<Candidate> = None;
        for pool in st.platform_groups(anchor, &nearest) {
            if let Some(fill) = fill_exact(&pool, |j| st.views[j].size, c.team_size, start)
                && let Some(cand) = self.evaluate(st, std::iter::once(anchor).chain(fill).collect())
                && best.as_ref().is_none_or(|b| cand.score > b.score)
            {
                best = Some(cand);
            }
        }
        if best.as_ref().is_some_and(|b| b.score >= self.needed(st, b)) {
            return best;
        }
        nearest.extend(walk.take(c.k - few).map(|x| x.1));
        for mut pool in st.platform_groups(anchor, &nearest) {
            for round in 0..=c.restarts {
                if round > 0 {
                    if deadline.passed() {
                        break;
                    }
                    pool.shuffle(rng);
                }
                let Some(fill) = fill_exact(&pool, |j| st.views[j].size, c.team_size, start) else {
                    // No order of these candidates fills a lobby.
                    break;
                };
                let mut ids = vec![anchor];
                ids.extend(fill);
                let Some(mut cand) = self.evaluate(st, ids) else {
                    continue;
                };
                let needed = self.needed(st, &cand);
                if cand.score + c.swap_margin >= needed && cand.score < needed {
                    cand = self.improve(st, cand, &pool, deadline);
                }
                let passes = cand.score >= needed;
                if best.as_ref().is_none_or(|b| cand.score > b.score) {
                    best = Some(cand);
                }
                if passes {
                    // Good enough: the threshold matcher forms the first lobby that passes.
                    break;
                }
            }
        }
        best
    }
}

impl Policy for ThresholdPolicy {
    fn name(&self) -> &'static str {
        "threshold"
    }

    fn form_lobbies(&mut self, now_ms: i64, queue: &Queue) -> Vec<Lobby> {
        let deadline = Deadline::after(self.config.time_budget);
        let c = self.config.clone();
        let mut st = TickState::new(queue, now_ms, self.models.party, c.distance);
        let mut rng = self.rng.clone();
        let mut lobbies = Vec::new();
        for a in st.age_order() {
            if st.taken[a] {
                continue;
            }
            let Some(best) = self.search_lobby(&st, a, &mut rng, deadline) else {
                continue;
            };
            if best.score + 1e-12 >= self.needed(&st, &best) {
                let scored = score_split(
                    &st,
                    &self.models,
                    &c.weights,
                    &best.teams,
                    c.team_size,
                    c.max_wait_s,
                );
                lobbies.push(make_lobby(&st, best.teams, &scored, now_ms, false));
                st.take(&best.ids);
            }
        }
        self.rng = rng;
        lobbies
    }

    fn max_wait_rule(&self) -> MaxWaitRule {
        MaxWaitRule {
            models: self.models,
            weights: self.config.weights,
            team_size: self.config.team_size,
            max_wait_s: self.config.max_wait_s,
            distance: self.config.distance,
        }
    }

    /// Backfills come from the lobby's K nearest searches and reach the lobby threshold at the
    /// age of their oldest (a joiner, or the lobby's longest wait when it formed plus the time
    /// its slots have been open), with its players fixed (the swap search's quality criteria),
    /// as the policy's own lobbies form: not under the CoD rules' similarity and disparity.
    fn backfill_rule(&self) -> Option<BackfillRule> {
        Some(BackfillRule::Quality {
            rule: self.max_wait_rule(),
            threshold: self.config.threshold.clone(),
            candidates: self.config.k,
        })
    }

    fn explain(&self, now_ms: i64, queue: &Queue, id: SearchId) -> Result<Explanation, QueueError> {
        let a = queue.position(id)?;
        let st = TickState::new(queue, now_ms, self.models.party, self.config.distance);
        let mut rng = self.rng.clone();
        let s = &queue.searches()[a];
        let needed = 2 * self.config.team_size;
        let max_wait_at_ms = s.start_ms + (self.config.max_wait_s * 1000.0).ceil() as i64;
        let blocker = match self.search_lobby(&st, a, &mut rng, Deadline::after(None)) {
            None => Blocker {
                rule: Rule::NotEnoughPlayers,
                candidates: st.nearest(a, self.config.k).len(),
                relaxes_at_ms: None,
                detail: "the nearest candidates cannot fill two teams".into(),
            },
            Some(best) => {
                let oldest = best
                    .ids
                    .iter()
                    .map(|&i| queue.searches()[i].start_ms)
                    .min()
                    .unwrap_or(s.start_ms);
                let q = score_split(
                    &st,
                    &self.models,
                    &self.config.weights,
                    &best.teams,
                    self.config.team_size,
                    self.config.max_wait_s,
                )
                .quality;
                let parts = [
                    ("balance", q.balance),
                    ("skill spread", q.skill_spread),
                    ("experience", q.experience),
                    ("top player", q.top_player),
                    ("parties", q.parties),
                    ("ping", q.ping),
                ];
                let weakest = parts
                    .iter()
                    .min_by(|x, y| x.1.total_cmp(&y.1))
                    .map_or(("none", 1.0), |x| *x);
                Blocker {
                    rule: Rule::Quality,
                    candidates: best.ids.len() - 1,
                    relaxes_at_ms: self
                        .config
                        .threshold
                        .age_at_most(best.score)
                        .map(|age| oldest + (age * 1000.0).ceil() as i64),
                    detail: format!(
                        "best lobby scores {:.3} < threshold {:.3}; weakest criterion: {} ({:.2})",
                        best.score,
                        self.needed(&st, &best),
                        weakest.0,
                        weakest.1
                    ),
                }
            }
        };
        let found = if blocker.rule == Rule::Quality {
            needed
        } else {
            0
        };
        Ok(Explanation {
            search: id,
            wait_ms: (now_ms - s.start_ms).max(0),
            players_found: found,
            players_needed: needed,
            blockers: vec![blocker],
            max_wait_at_ms,
        })
    }

    fn check(&self, now_ms: i64, queue: &Queue, lobby: &Lobby) -> Result<(), Rule> {
        let teams = check_structure(queue, lobby, None)?;
        if lobby.rescued {
            return Ok(());
        }
        let c = &self.config;
        let st = TickState::new(queue, now_ms, self.models.party, c.distance);
        let q = score_split(
            &st,
            &self.models,
            &c.weights,
            &teams,
            c.team_size,
            c.max_wait_s,
        );
        let oldest = teams[0]
            .iter()
            .chain(&teams[1])
            .map(|&i| st.views[i].age_s)
            .fold(0.0f64, f64::max);
        if q.quality.total + 1e-9 >= c.threshold.at(oldest) {
            Ok(())
        } else {
            Err(Rule::Quality)
        }
    }
}
