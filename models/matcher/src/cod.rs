//! The Call of Duty rules policy ("How is Skill Incorporated into Matchmaking?", Figures 9-11,
//! and "Team Balance" in the CoD paper).
//!
//! Every tick, each search in turn (oldest first) is the anchor of a forming lobby:
//! 1. **Heuristic selection** (Figure 9): its top K candidates by N-dimensional distance
//!    (great-circle km + weight x skill-percentile difference + input-device penalty).
//! 2. Candidates are tried nearest first; one is added when every rule still holds:
//!    - **skill similarity** (Figure 10): each search accepts the skill range
//!      `[skill - h, skill + h]` around its mean percentile, `h` from its backoff curve; the
//!      intersection of the lobby's ranges must contain every search's skill;
//!    - **skill disparity** (Figure 11): the lobby's disparity (best minus worst player
//!      percentile) must not exceed any search's acceptable disparity, its own disparity plus
//!      the allowance of its backoff curve;
//!    - **delta ping**: some data centre keeps every search within its allowed extra ping over
//!      its best data centre (searches that report no pings do not constrain it);
//!    - **grouping** ("Grouping Phase"): the parties can still be balanced into two teams
//!      (Karmarkar–Karp, confirmed by an exact subset sum when it refuses), and a full lobby has
//!      equal teams;
//!    - platforms compatible, and the party fits the players still needed.
//! 3. When the lobby is full it forms, split by the exhaustive lobby-phase rule (fewest size
//!    difference, then least skill-sum difference, parties intact).
//!
//! All allowances loosen with the search's age; by default skill loosens faster than ping, as the
//! paper says. Searches that reach `max_wait_s` are then placed by the maximum-wait rule.

use serde::{Deserialize, Serialize};

use crate::queue::{
    Backoff, Blocker, Distance, Explanation, Lobby, LobbyModels, MaxWaitRule, Policy,
    QualityWeights, Queue, QueueError, Rule, Search, SearchId, TickState, View, balanced_split,
    best_data_centre, check_structure, even_split, groupable, make_lobby, platforms_compatible,
    score_split,
};

/// Settings of the CoD rules policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodConfig {
    pub team_size: usize,
    /// Candidates per search (the paper's K).
    pub k: usize,
    pub distance: Distance,
    /// Half-width of the accepted skill range (percentile) by search age (s).
    pub skill_range: Backoff,
    /// Disparity allowance over the search's own disparity, by age.
    pub disparity: Backoff,
    /// Extra ping (ms) over the search's best data centre, by age.
    pub delta_ping: Backoff,
    pub max_wait_s: f64,
    /// Weights of the quality score reported with each lobby (not a rule of this policy).
    pub quality: QualityWeights,
    /// Partial lobbies (`None`, the default: off). This policy's only: team EOMM, which grows
    /// its lobbies under these rules, forms full lobbies.
    #[serde(default)]
    pub partial: Option<PartialLobbies>,
    /// Seconds of backoff a search is credited with when it is offered a lobby open for joins
    /// (a backfill): its skill range toward that lobby is the one it would accept this many
    /// seconds later. The paper: the skill similarity a search accepts is "modified by ... if
    /// there is a high-quality lobby open for joins". Only the search's skill range: its
    /// disparity and ping read its real wait, the lobby's parties their own. 0 turns it off.
    #[serde(default = "default_join_head_start_s")]
    pub join_head_start_s: f64,
}

/// [`CodConfig::join_head_start_s`]'s default: the skill range of a 30-s search (0.2).
#[must_use]
pub fn default_join_head_start_s() -> f64 {
    30.0
}

/// Partial lobbies, as the CoD paper allows them: "New lobbies are always created with a team
/// size differential of zero, even when we make a lobby that is not completely filled". A lobby
/// grown around a search that has waited `after_s` may form short of full when its teams can be
/// the same size and it holds at least `min_players`; its open slots are then offered for
/// backfill ([`crate::backfill::tick_with_backfill`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartialLobbies {
    /// The anchor search's wait before its lobby may form partial, s.
    pub after_s: f64,
    /// The fewest players of a partial lobby (at least 2).
    pub min_players: usize,
}

impl CodConfig {
    /// Defaults for a mode: skill reaches the full range by 90 s, ping its widest at 180 s.
    #[must_use]
    pub fn new(team_size: usize) -> CodConfig {
        CodConfig {
            team_size,
            k: 32,
            distance: Distance::default(),
            skill_range: Backoff::new(&[
                (0.0, 0.05),
                (10.0, 0.1),
                (30.0, 0.2),
                (60.0, 0.5),
                (90.0, 1.0),
            ]),
            disparity: Backoff::new(&[(0.0, 0.2), (60.0, 0.8), (120.0, 1.0)]),
            delta_ping: Backoff::new(&[(0.0, 20.0), (30.0, 40.0), (90.0, 80.0), (180.0, 200.0)]),
            max_wait_s: 120.0,
            quality: QualityWeights::default(),
            partial: None,
            join_head_start_s: default_join_head_start_s(),
        }
    }
}

/// A lobby being formed under the CoD rules: add searches one at a time with
/// [`LobbyBuilder::try_add`], which says which rule refuses a search. The figures of the paper
/// are tests of this type, step by step.
#[derive(Debug, Clone)]
pub struct LobbyBuilder {
    team_size: usize,
    members: Vec<usize>,
    sizes: Vec<usize>,
    players: usize,
    /// Intersection of the skill ranges.
    lo: f64,
    hi: f64,
    /// Least and greatest search skill.
    s_min: f64,
    s_max: f64,
    /// Least and greatest player percentile.
    p_min: f64,
    p_max: f64,
    /// Least acceptable disparity among the searches.
    disp_cap: f64,
    /// Searches with pings: (index, allowed extra ping).
    pinged: Vec<(usize, f64)>,
}

/// What a search brings to a forming lobby (see [`LobbyBuilder::try_add`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub index: usize,
    pub size: usize,
    /// Mean skill percentile.
    pub skill: f64,
    /// Half-width of its accepted skill range.
    pub range: f64,
    pub pct_min: f64,
    pub pct_max: f64,
    /// Its acceptable lobby disparity.
    pub max_disparity: f64,
    /// Its allowed extra ping.
    pub max_delta_ping: f64,
}

const EPS: f64 = 1e-9;

impl LobbyBuilder {
    #[must_use]
    pub fn new(team_size: usize) -> LobbyBuilder {
        LobbyBuilder {
            team_size,
            members: Vec::new(),
            sizes: Vec::new(),
            players: 0,
            lo: f64::NEG_INFINITY,
            hi: f64::INFINITY,
            s_min: f64::INFINITY,
            s_max: f64::NEG_INFINITY,
            p_min: f64::INFINITY,
            p_max: f64::NEG_INFINITY,
            disp_cap: f64::INFINITY,
            pinged: Vec::new(),
        }
    }

    /// The intersection of the skill ranges so far.
    #[must_use]
    pub fn skill_range(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// The lobby's skill disparity so far, and the least disparity its searches accept.
    #[must_use]
    pub fn disparity(&self) -> (f64, f64) {
        (self.p_max - self.p_min, self.disp_cap)
    }

    #[must_use]
    pub fn players(&self) -> usize {
        self.players
    }

    #[must_use]
    pub fn members(&self) -> &[usize] {
        &self.members
    }

    #[must_use]
    pub fn is_full(&self) -> bool {
        self.players == 2 * self.team_size
    }

    /// Tries to add `c`; on success the lobby includes it. `searches` resolves pings (pass an
    /// empty slice to leave ping out).
    ///
    /// # Errors
    /// The first rule that refuses `c`; the lobby is then unchanged.
    pub fn try_add(&mut self, c: &Candidate, searches: &[Search]) -> Result<(), Rule> {
        if self.players + c.size > 2 * self.team_size {
            return Err(Rule::LobbyFull);
        }
        if !searches.is_empty()
            && self
                .members
                .iter()
                .any(|&m| !platforms_compatible(&searches[m], &searches[c.index]))
        {
            return Err(Rule::Platform);
        }
        // Skill similarity: the new intersection must hold every search's skill.
        let (lo, hi) = (
            self.lo.max(c.skill - c.range),
            self.hi.min(c.skill + c.range),
        );
        let (s_min, s_max) = (self.s_min.min(c.skill), self.s_max.max(c.skill));
        if s_min < lo - EPS || s_max > hi + EPS {
            return Err(Rule::SkillSimilarity);
        }
        // Skill disparity: the lobby's spread of players within every search's bound.
        let (p_min, p_max) = (self.p_min.min(c.pct_min), self.p_max.max(c.pct_max));
        let cap = self.disp_cap.min(c.max_disparity);
        if p_max - p_min > cap + EPS {
            return Err(Rule::SkillDisparity);
        }
        // The last two rules are checked with the candidate pushed, and it is popped again
        // when one refuses (no copy of the lobby per candidate).
        let pinged = !searches.is_empty() && !searches[c.index].pings.is_empty();
        if pinged {
            self.pinged.push((c.index, c.max_delta_ping));
            if !ping_ok(searches, &self.pinged) {
                self.pinged.pop();
                return Err(Rule::Ping);
            }
        }
        self.sizes.push(c.size);
        let players = self.players + c.size;
        if !groupable(&self.sizes, self.team_size, players == 2 * self.team_size) {
            self.sizes.pop();
            if pinged {
                self.pinged.pop();
            }
            return Err(Rule::TeamBalance);
        }
        self.members.push(c.index);
        self.players = players;
        (self.lo, self.hi, self.s_min, self.s_max) = (lo, hi, s_min, s_max);
        (self.p_min, self.p_max, self.disp_cap) = (p_min, p_max, cap);
        Ok(())
    }
}

/// Some data centre keeps every pinged search within its allowed extra ping (so the searches
/// share a data centre, as [`best_data_centre`] requires).
fn ping_ok(searches: &[Search], pinged: &[(usize, f64)]) -> bool {
    let first = &searches[pinged[0].0];
    first.pings.iter().any(|&(dc, _)| {
        pinged.iter().all(|&(i, allowed)| {
            let s = &searches[i];
            let best = s.pings.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
            s.pings
                .iter()
                .find(|x| x.0 == dc)
                .is_some_and(|&(_, p)| f64::from(p - best) <= allowed + EPS)
        })
    })
}

/// The CoD rules policy.
#[derive(Debug, Clone)]
pub struct CodRules {
    pub config: CodConfig,
    pub models: LobbyModels,
}

impl CodConfig {
    /// Rules that refuse nothing a full lobby of compatible platforms can hold: every skill,
    /// every disparity and any ping accepted from the first second. For measuring what the rules
    /// cost (an unconstrained optimum) and for tests.
    #[must_use]
    pub fn open(team_size: usize) -> CodConfig {
        CodConfig {
            skill_range: Backoff::new(&[(0.0, 1.0)]),
            disparity: Backoff::new(&[(0.0, 1.0)]),
            delta_ping: Backoff::new(&[(0.0, 1e9)]),
            ..CodConfig::new(team_size)
        }
    }

    /// The candidate record of search `i` (view `v`) at this tick.
    pub(crate) fn candidate(&self, v: &View, i: usize) -> Candidate {
        let c = self;
        Candidate {
            index: i,
            size: v.size,
            skill: v.skill,
            range: c.skill_range.at(v.age_s),
            pct_min: v.pct_min,
            pct_max: v.pct_max,
            max_disparity: v.disparity() + c.disparity.at(v.age_s),
            max_delta_ping: c.delta_ping.at(v.age_s),
        }
    }

    /// Whether the searches `ids` (indices of this tick) make a full lobby every rule accepts.
    /// The rules hold for a set whatever the order its searches join in.
    ///
    /// # Errors
    /// The first rule that refuses; [`Rule::TeamBalance`] when the lobby is not full.
    /// Whether searches `ids`, added in this order, pass the rules and make a full lobby (or,
    /// with `short_ok`, any lobby).
    pub(crate) fn admits(
        &self,
        st: &TickState<'_>,
        ids: &[usize],
        short_ok: bool,
    ) -> Result<(), Rule> {
        let mut b = LobbyBuilder::new(self.team_size);
        for &i in ids {
            b.try_add(&self.candidate(&st.views[i], i), st.searches)?;
        }
        if b.is_full() || short_ok {
            Ok(())
        } else {
            Err(Rule::TeamBalance)
        }
    }
}

impl CodRules {
    #[must_use]
    pub fn new(config: CodConfig, models: LobbyModels) -> CodRules {
        CodRules { config, models }
    }

    /// The candidate records of every search at this tick.
    pub(crate) fn candidates(&self, st: &TickState<'_>) -> Vec<Candidate> {
        st.views
            .iter()
            .enumerate()
            .map(|(i, v)| self.config.candidate(v, i))
            .collect()
    }

    /// Grows a lobby around `anchor` from its candidates (`cands` from
    /// [`CodRules::candidates`]); returns it and, per candidate, the rule that refused it.
    fn grow(
        &self,
        st: &TickState<'_>,
        cands: &[Candidate],
        anchor: usize,
    ) -> (LobbyBuilder, Vec<(usize, Rule)>) {
        let mut b = LobbyBuilder::new(self.config.team_size);
        let mut refused = Vec::new();
        if b.try_add(&cands[anchor], st.searches).is_err() {
            return (b, refused);
        }
        for (_, j) in st.nearest_iter(anchor).take(self.config.k) {
            if b.is_full() {
                break;
            }
            if let Err(rule) = b.try_add(&cands[j], st.searches) {
                refused.push((j, rule));
            }
        }
        (b, refused)
    }

    /// Forms the lobby of a full builder (split by the exhaustive rule) and takes its searches;
    /// with partial lobbies on, a builder short of full whose anchor has waited long enough
    /// forms with teams of the same size, dropping its last searches when that needs it.
    fn form(
        &self,
        st: &mut TickState<'_>,
        lobbies: &mut Vec<Lobby>,
        b: &LobbyBuilder,
        now_ms: i64,
    ) {
        let c = &self.config;
        let (ids, teams) = if b.is_full() {
            let ids = b.members().to_vec();
            let Some(teams) = balanced_split(&st.views, &ids, c.team_size) else {
                return;
            };
            (ids, teams)
        } else {
            let Some(found) = self.partial(st, b, now_ms) else {
                return;
            };
            found
        };
        let scored = score_split(
            st,
            &self.models,
            &c.quality,
            &teams,
            c.team_size,
            c.max_wait_s,
        );
        lobbies.push(make_lobby(st, teams, &scored, now_ms, false));
        st.take(&ids);
    }

    /// The partial lobby of a builder short of full (see [`PartialLobbies`]): its searches, or
    /// the longest prefix of them (the anchor first) whose parties split into two teams of the
    /// same size with at least `min_players`, and that split.
    fn partial(
        &self,
        st: &TickState<'_>,
        b: &LobbyBuilder,
        now_ms: i64,
    ) -> Option<(Vec<usize>, [Vec<usize>; 2])> {
        let p = self.config.partial?;
        let anchor = *b.members().first()?;
        let waited = (now_ms - st.searches[anchor].start_ms) as f64 / 1000.0;
        if waited < p.after_s {
            return None;
        }
        let mut ids = b.members().to_vec();
        while !ids.is_empty() {
            let players: usize = ids.iter().map(|&i| st.views[i].size).sum();
            if players < p.min_players.max(2) {
                return None;
            }
            if let Some(teams) = even_split(&st.views, &ids, self.config.team_size) {
                return Some((ids, teams));
            }
            ids.pop();
        }
        None
    }

    /// When the pair (anchor, candidate) passes `rule` by backoff alone, ms since the epoch.
    fn relaxes_at(&self, st: &TickState<'_>, a: usize, j: usize, rule: Rule) -> Option<i64> {
        let c = &self.config;
        let (va, vj) = (&st.views[a], &st.views[j]);
        let (sa, sj) = (&st.searches[a], &st.searches[j]);
        let when = |curve: &Backoff, need: f64, start: i64| {
            curve
                .age_at_least(need)
                .map(|age| start + (age * 1000.0).ceil() as i64)
        };
        let both = |x: Option<i64>, y: Option<i64>| Some(x?.max(y?));
        match rule {
            Rule::SkillSimilarity => {
                let need = (va.skill - vj.skill).abs();
                both(
                    when(&c.skill_range, need, sa.start_ms),
                    when(&c.skill_range, need, sj.start_ms),
                )
            }
            Rule::SkillDisparity => {
                let d = va.pct_max.max(vj.pct_max) - va.pct_min.min(vj.pct_min);
                both(
                    when(&c.disparity, d - va.disparity(), sa.start_ms),
                    when(&c.disparity, d - vj.disparity(), sj.start_ms),
                )
            }
            Rule::Ping => {
                let ids = [a, j];
                let need = best_data_centre(st.searches, &ids).ok().flatten()?.1;
                both(
                    when(&c.delta_ping, need, sa.start_ms),
                    when(&c.delta_ping, need, sj.start_ms),
                )
            }
            _ => None,
        }
    }
}

impl Policy for CodRules {
    fn name(&self) -> &'static str {
        "cod"
    }

    fn form_lobbies(&mut self, now_ms: i64, queue: &Queue) -> Vec<Lobby> {
        let c = &self.config;
        let mut st = TickState::new(queue, now_ms, self.models.party, c.distance);
        let cands = self.candidates(&st);
        let mut lobbies = Vec::new();
        for a in st.age_order() {
            if st.taken[a] {
                continue;
            }
            let (b, _) = self.grow(&st, &cands, a);
            self.form(&mut st, &mut lobbies, &b, now_ms);
        }
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
        let (b, refused) = self.grow(&st, &self.candidates(&st), a);
        let mut blockers: Vec<Blocker> = Vec::new();
        for &(j, rule) in &refused {
            let at = self.relaxes_at(&st, a, j, rule);
            if let Some(x) = blockers.iter_mut().find(|x| x.rule == rule) {
                x.candidates += 1;
                x.relaxes_at_ms = match (x.relaxes_at_ms, at) {
                    (Some(p), Some(q)) => Some(p.min(q)),
                    (p, q) => p.or(q),
                };
            } else {
                blockers.push(Blocker {
                    rule,
                    candidates: 1,
                    relaxes_at_ms: at,
                    detail: String::new(),
                });
            }
        }
        let needed = self.config.team_size * 2;
        // Candidates seen: those refused and those taken into the lobby (besides the anchor).
        let seen = refused.len() + b.members().len().saturating_sub(1);
        if blockers.is_empty() || seen < self.config.k {
            blockers.push(Blocker {
                rule: Rule::NotEnoughPlayers,
                candidates: 0,
                relaxes_at_ms: None,
                detail: format!("{seen} of {} compatible candidates found", self.config.k),
            });
        }
        let (lo, hi) = b.skill_range();
        let (disp, cap) = b.disparity();
        for x in &mut blockers {
            x.detail = match x.rule {
                Rule::SkillSimilarity => format!(
                    "lobby skill range [{lo:.3}, {hi:.3}]; search skill {:.3} accepts +-{:.3}",
                    st.views[a].skill,
                    self.config.skill_range.at(st.views[a].age_s)
                ),
                Rule::SkillDisparity => {
                    format!("lobby disparity {disp:.3}, accepted up to {cap:.3}")
                }
                Rule::Ping => format!(
                    "allowed extra ping {:.0} ms",
                    self.config.delta_ping.at(st.views[a].age_s)
                ),
                _ => std::mem::take(&mut x.detail),
            };
        }
        blockers.sort_by(|x, y| y.candidates.cmp(&x.candidates).then(x.rule.cmp(&y.rule)));
        let s = &queue.searches()[a];
        Ok(Explanation {
            search: id,
            wait_ms: (now_ms - s.start_ms).max(0),
            players_found: b.players(),
            players_needed: needed,
            blockers,
            max_wait_at_ms: s.start_ms + (self.config.max_wait_s * 1000.0).ceil() as i64,
        })
    }

    fn check(&self, now_ms: i64, queue: &Queue, lobby: &Lobby) -> Result<(), Rule> {
        let teams = check_structure(queue, lobby, self.config.partial.map(|p| p.min_players))?;
        if lobby.rescued {
            return Ok(());
        }
        let st = TickState::new(queue, now_ms, self.models.party, self.config.distance);
        let ids: Vec<usize> = teams[0].iter().chain(&teams[1]).copied().collect();
        let players: usize = ids.iter().map(|&i| st.views[i].size).sum();
        if players < 2 * self.config.team_size {
            // A partial lobby (check_structure let it through only with them on): its oldest
            // search has waited long enough.
            let oldest = ids.iter().map(|&i| st.searches[i].start_ms).min();
            let after_ms = self
                .config
                .partial
                .map_or(f64::INFINITY, |p| p.after_s * 1000.0);
            if oldest.is_none_or(|t0| ((now_ms - t0) as f64) < after_ms) {
                return Err(Rule::TeamBalance);
            }
        }
        self.config.admits(&st, &ids, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(index: usize, size: usize, skill: f64, range: f64) -> Candidate {
        Candidate {
            index,
            size,
            skill,
            range,
            pct_min: skill,
            pct_max: skill,
            max_disparity: 1.0,
            max_delta_ping: f64::INFINITY,
        }
    }

    fn close(a: (f64, f64), b: (f64, f64)) -> bool {
        (a.0 - b.0).abs() < 1e-9 && (a.1 - b.1).abs() < 1e-9
    }

    /// Figure 10 of the CoD paper, step by step: a 5v5 lobby from searches A..F. The text gives
    /// A the range 0.55-0.75 (half-width 0.1, although it calls it "a 0.3 skill range") and B a
    /// 0.4 range (half-width 0.2); the other half-widths follow from the intersections the
    /// steps report. Party sizes (not in the text) are chosen to fill ten slots.
    #[test]
    fn figure_10_skill_similarity_step_by_step() {
        let mut b = LobbyBuilder::new(5);
        b.try_add(&cand(0, 3, 0.65, 0.1), &[]).expect("A");
        assert!(close(b.skill_range(), (0.55, 0.75)));
        // Step 2: B at 0.5 with +-0.2: intersection [0.55, 0.70], B below it.
        let mut probe = b.clone();
        assert_eq!(
            probe.try_add(&cand(1, 2, 0.5, 0.2), &[]),
            Err(Rule::SkillSimilarity)
        );
        let (lo, hi) = (0.55f64.max(0.5 - 0.2), 0.75f64.min(0.5 + 0.2));
        assert!(close((lo, hi), (0.55, 0.70)));
        // Step 3: C at 0.575: [0.55, 0.675], added.
        b.try_add(&cand(2, 2, 0.575, 0.1), &[]).expect("C");
        assert!(close(b.skill_range(), (0.55, 0.675)));
        // Step 4: D at 0.55: [0.55, 0.65], added.
        b.try_add(&cand(3, 2, 0.55, 0.1), &[]).expect("D");
        assert!(close(b.skill_range(), (0.55, 0.65)));
        // Step 5: E at 0.625 with +-0.05: [0.575, 0.65] would exclude D.
        assert_eq!(
            b.try_add(&cand(4, 1, 0.625, 0.05), &[]),
            Err(Rule::SkillSimilarity)
        );
        assert!(
            close(b.skill_range(), (0.55, 0.65)),
            "a refusal leaves the lobby unchanged"
        );
        // Step 6: F at 0.6: [0.55, 0.65], added; ten players, the lobby is ready.
        b.try_add(&cand(5, 3, 0.6, 0.05), &[]).expect("F");
        assert!(close(b.skill_range(), (0.55, 0.65)));
        assert!(b.is_full());
        assert_eq!(b.members(), &[0, 2, 3, 5]);
    }

    fn disp(index: usize, size: usize, lo: f64, hi: f64, accepts: f64) -> Candidate {
        Candidate {
            index,
            size,
            skill: 0.5,
            range: 1.0,
            pct_min: lo,
            pct_max: hi,
            max_disparity: accepts,
            max_delta_ping: f64::INFINITY,
        }
    }

    /// Figure 11 of the CoD paper, step by step: the skill disparity rule. Player percentiles
    /// are chosen to give the disparities the text states.
    #[test]
    fn figure_11_skill_disparity_step_by_step() {
        let mut b = LobbyBuilder::new(5);
        // Step 1: A has disparity 0.6 and accepts up to 0.8.
        b.try_add(&disp(0, 2, 0.3, 0.9, 0.8), &[]).expect("A");
        assert!(close(b.disparity(), (0.6, 0.8)));
        // Step 2: B accepts only 0.2 < 0.6.
        assert_eq!(
            b.try_add(&disp(1, 1, 0.5, 0.5, 0.2), &[]),
            Err(Rule::SkillDisparity)
        );
        // Step 3: C accepts 0.7 >= 0.6: added, the bound drops to 0.7.
        b.try_add(&disp(2, 3, 0.35, 0.85, 0.7), &[]).expect("C");
        assert!(close(b.disparity(), (0.6, 0.7)));
        // Step 4: D accepts 0.65: added.
        b.try_add(&disp(3, 3, 0.4, 0.85, 0.65), &[]).expect("D");
        assert!(close(b.disparity(), (0.6, 0.65)));
        // Step 5: E (accepts 0.8) brings a 0.2 player: disparity 0.7 > 0.65.
        assert_eq!(
            b.try_add(&disp(4, 1, 0.2, 0.2, 0.8), &[]),
            Err(Rule::SkillDisparity)
        );
        // Step 6: F (accepts 0.75) brings a 0.25 player: disparity 0.65, just within.
        b.try_add(&disp(5, 2, 0.25, 0.3, 0.75), &[]).expect("F");
        assert!(close(b.disparity(), (0.65, 0.65)));
        assert!(b.is_full());
        assert_eq!(b.members(), &[0, 2, 3, 5]);
    }

    #[test]
    fn grouping_refuses_parties_that_cannot_be_balanced() {
        // The paper's 6v6 example: {4}, {4}, {3} cannot be balanced.
        let mut b = LobbyBuilder::new(6);
        b.try_add(&cand(0, 4, 0.5, 1.0), &[]).expect("4");
        b.try_add(&cand(1, 4, 0.5, 1.0), &[]).expect("4");
        assert_eq!(
            b.try_add(&cand(2, 3, 0.5, 1.0), &[]),
            Err(Rule::TeamBalance)
        );
        // {3}, {2}, {2}, {1} is balanceable.
        let mut b = LobbyBuilder::new(6);
        for (i, s) in [3, 2, 2, 1].into_iter().enumerate() {
            b.try_add(&cand(i, s, 0.5, 1.0), &[]).expect("fits");
        }
        // A full new lobby needs equal teams: {3},{2},{2},{2},{1},{1},{1} fills 6v6 as
        // [{3},{2},{1}] v [{2},{2},{1},{1}]; nothing more fits.
        let mut b = LobbyBuilder::new(6);
        for (i, s) in [3, 2, 2, 2, 1, 1, 1].into_iter().enumerate() {
            b.try_add(&cand(i, s, 0.5, 1.0), &[]).expect("fits");
        }
        assert!(b.is_full());
        assert_eq!(b.try_add(&cand(9, 1, 0.5, 1.0), &[]), Err(Rule::LobbyFull));
    }

    #[test]
    fn default_backoff_loosens_skill_faster_than_ping() {
        let c = CodConfig::new(6);
        for age in [5.0, 15.0, 30.0, 60.0, 90.0, 120.0] {
            assert!(
                c.skill_range.progress(age) >= c.delta_ping.progress(age),
                "{age}"
            );
        }
        assert!(c.skill_range.progress(90.0) > c.delta_ping.progress(90.0));
    }
}
