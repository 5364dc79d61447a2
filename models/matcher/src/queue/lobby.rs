//! Scoring and recording a lobby: the models, the quality score, the split and the record.

use mm_artifact::Artifact;
use mm_artifact::team::{PartyAdjustment, TeamSample, TeamWinModel};
use serde::{Deserialize, Serialize};

use super::SearchId;
use super::member::Search;
use super::tick::{TickState, View};
use crate::geo::great_circle_km;
use crate::teams::{Party, Split, best_split};

/// The models that score a lobby: the team win model (P(win/draw/loss) of a split) and the party
/// adjustment (the Dota 2 post's effective MMR of party members, used to balance teams).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LobbyModels {
    pub win: TeamWinModel,
    pub party: Option<PartyAdjustment>,
}

impl LobbyModels {
    /// The artifact's models; `None` when it has no team win model. The team model's blowout
    /// model is kept only when the churn model tells a blowout loss from a close one: without
    /// that, a blowout's chance would weigh nothing.
    #[must_use]
    pub fn from_artifact(art: &Artifact) -> Option<LobbyModels> {
        let shift = art.churn.model.blowout.is_some();
        art.team_win.map(|win| LobbyModels {
            win: TeamWinModel {
                blowout: win.blowout.filter(|_| shift),
                ..win
            },
            party: art.party_adjustment,
        })
    }

    /// A win model on raw-skill sums only, no draws, no party terms: for tests and benchmarks.
    #[doc(hidden)]
    #[must_use]
    pub fn skill_only(skill_coef: f64) -> LobbyModels {
        LobbyModels {
            win: TeamWinModel {
                basis: mm_artifact::team::SkillBasis::RawSkill,
                skill_coef,
                party_members_coef: 0.0,
                party_spread_coef: 0.0,
                draw: None,
                samples: 0,
                draws: 0,
                blowout: None,
            },
            party: None,
        }
    }
}

/// Whether parties of these sizes can be split into two teams of at most `t` (exactly `t` each
/// when `full`): some subset (team A) holds between `total - t` and `t` players.
///
/// The CoD paper's grouping phase runs Karmarkar–Karp; its yes implies this one (its two teams
/// are such a subset), and where it says no this exact check still finds the balanceable sets it
/// misses ({3, 3, 2, 2, 2} in teams of 6: it pairs the threes against each other). So the exact
/// check alone gives the same answer: it runs on every candidate a forming lobby considers, as
/// a bit set of reachable subset sums (one shift per party), without allocating.
#[must_use]
pub fn groupable(sizes: &[usize], t: usize, full: bool) -> bool {
    let total: usize = sizes.iter().sum();
    if total > 2 * t || (full && total != 2 * t) {
        return false;
    }
    let (lo, hi) = (total.saturating_sub(t), t.min(total));
    if total < 64 {
        let mut can: u64 = 1;
        for &s in sizes {
            can |= can << s;
        }
        let window = (u64::MAX >> (63 - (hi - lo))) << lo;
        return can & window != 0;
    }
    let mut can = vec![false; total + 1];
    can[0] = true;
    for &s in sizes {
        for a in (s..=total).rev() {
            if can[a - s] {
                can[a] = true;
            }
        }
    }
    (lo..=hi).any(|a| can[a])
}

/// The quality criteria of a lobby, each in [0, 1] (1 is best), and their weighted mean.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Quality {
    /// `1 - |2 P(A wins | decisive) - 1|`: each team has an even chance.
    pub balance: f64,
    /// One minus the spread of party skill percentiles (most minus least skilled party).
    pub skill_spread: f64,
    /// One minus the spread of party experience, `ln(1 + games)`, over `experience_scale`.
    pub experience: f64,
    /// One minus the gap between the two teams' best players' percentiles, over `top_scale`.
    pub top_player: f64,
    /// Party parity: one minus the L1 distance between the teams' sorted party sizes over its
    /// maximum `2 (team_size - 1)` (3 v 2+1 scores 0.5, 3 v 1+1+1 scores 0, as the Awesomenauts
    /// post grades them).
    pub parties: f64,
    /// One at `good_ping_ms` or better, zero at `bad_ping_ms`, on the worst member's ping to the
    /// lobby's data centre (or, without pings, a fibre estimate from the lobby's span).
    pub ping: f64,
    /// The oldest search's wait over the maximum wait.
    pub wait: f64,
    /// The weighted mean.
    pub total: f64,
}

/// Weights and scales of [`Quality`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QualityWeights {
    pub balance: f64,
    pub skill_spread: f64,
    pub experience: f64,
    pub top_player: f64,
    pub parties: f64,
    pub ping: f64,
    pub wait: f64,
    pub experience_scale: f64,
    pub top_scale: f64,
    pub good_ping_ms: f64,
    pub bad_ping_ms: f64,
}

impl Default for QualityWeights {
    /// Balance and skill first, ping close behind; party parity low because it reacts sharply
    /// (the Awesomenauts post's advice); wait small, so that it tips close calls only.
    fn default() -> Self {
        QualityWeights {
            balance: 3.0,
            skill_spread: 2.0,
            experience: 1.0,
            top_player: 1.0,
            parties: 0.5,
            ping: 2.0,
            wait: 0.5,
            experience_scale: 3.0,
            top_scale: 0.5,
            good_ping_ms: 30.0,
            bad_ping_ms: 150.0,
        }
    }
}

/// A formed lobby.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lobby {
    pub formed_ms: i64,
    /// Search ids of each team.
    pub teams: [Vec<SearchId>; 2],
    pub players: [usize; 2],
    /// Raw-skill sums with the party adjustment.
    pub skill: [f64; 2],
    /// Team A's P(win), P(draw), P(loss).
    pub p: [f64; 3],
    /// Expected number of the lobby's players who churn after it.
    pub expected_churn: f64,
    pub quality: Quality,
    /// The data centre chosen and the worst member ping to it, when pings are known.
    pub data_centre: Option<u16>,
    pub worst_ping_ms: Option<f64>,
    /// The longest wait among its searches, ms.
    pub max_wait_ms: i64,
    /// Formed by the maximum-wait rule rather than the policy's own rules.
    pub rescued: bool,
}

impl Lobby {
    /// Every search id of the lobby.
    pub fn search_ids(&self) -> impl Iterator<Item = SearchId> + '_ {
        self.teams[0].iter().chain(&self.teams[1]).copied()
    }
}

/// The data centre where the lobby's worst extra ping (over each search's best) is least, with
/// that extra ping and the worst ping there. `Ok(None)` when no search knows its pings; `Err(())`
/// when searches with pings share no data centre.
pub(crate) fn best_data_centre(
    searches: &[Search],
    ids: &[usize],
) -> Result<Option<(u16, f64, f64)>, ()> {
    let known: Vec<usize> = ids
        .iter()
        .copied()
        .filter(|&i| !searches[i].pings.is_empty())
        .collect();
    if known.is_empty() {
        return Ok(None);
    }
    let mut best: Option<(u16, f64, f64)> = None;
    for &(dc, _) in &searches[known[0]].pings {
        let mut worst_delta = 0.0f64;
        let mut worst = 0.0f64;
        let mut all = true;
        for &i in &known {
            let s = &searches[i];
            let Some(&(_, p)) = s.pings.iter().find(|x| x.0 == dc) else {
                all = false;
                break;
            };
            let own_best = s.pings.iter().map(|x| x.1).fold(f32::INFINITY, f32::min);
            worst_delta = worst_delta.max(f64::from(p - own_best));
            worst = worst.max(f64::from(p));
        }
        if all && best.is_none_or(|b| (worst_delta, worst, dc) < (b.1, b.2, b.0)) {
            best = Some((dc, worst_delta, worst));
        }
    }
    best.map(Some).ok_or(())
}

/// Scores a split lobby: outcome probabilities, expected churn and quality.
pub(crate) struct Scored {
    pub p: [f64; 3],
    pub churn: f64,
    pub quality: Quality,
    pub dc: Option<(u16, f64, f64)>,
}

pub(crate) fn team_sample(views: &[View], teams: &[Vec<usize>; 2]) -> TeamSample {
    let sum =
        |t: usize, f: &dyn Fn(&View) -> f64| teams[t].iter().map(|&i| f(&views[i])).sum::<f64>();
    TeamSample {
        skill_diff: sum(0, &|v| v.outcome_sum) - sum(1, &|v| v.outcome_sum),
        party_members_diff: sum(0, &|v| v.party_members) - sum(1, &|v| v.party_members),
        party_spread_diff: sum(0, &|v| v.party_spread) - sum(1, &|v| v.party_spread),
        outcome: 0.0,
        margin: f64::NAN,
    }
}

/// A team's expected churn from its churn sums `c` (after a win, a draw, a loss, a close loss
/// and a blowout loss) and its outcome probabilities `p` (win, draw, loss). With `q`, the
/// chance that a loss is a blowout (the team win model's blowout model), a loss costs
/// `(1 - q) close + q blowout`; without it, the loss's churn.
#[inline]
pub(crate) fn team_churn(c: &[f64], p: [f64; 3], q: Option<f64>) -> f64 {
    let loss = q.map_or(c[2], |q| (1.0 - q) * c[3] + q * c[4]);
    p[0] * c[0] + p[1] * c[1] + p[2] * loss
}

/// Expected churn of a split: each team's churn sums weighted by its outcome probabilities
/// `p` (team A's win, draw, loss), and its losses by `q` (`[P(blowout | A loses),
/// P(blowout | B loses)]`) when the team win model has a blowout model.
pub(crate) fn split_churn(
    views: &[View],
    teams: &[Vec<usize>; 2],
    p: [f64; 3],
    q: Option<[f64; 2]>,
) -> f64 {
    let sums = |t: usize| {
        teams[t].iter().fold([0.0; 5], |mut a, &i| {
            for (x, y) in a.iter_mut().zip(&views[i].churn) {
                *x += y;
            }
            a
        })
    };
    team_churn(&sums(0), p, q.map(|q| q[0]))
        + team_churn(&sums(1), [p[2], p[1], p[0]], q.map(|q| q[1]))
}

pub(crate) fn score_split(
    st: &TickState<'_>,
    models: &LobbyModels,
    w: &QualityWeights,
    teams: &[Vec<usize>; 2],
    team_size: usize,
    max_wait_s: f64,
) -> Scored {
    let views = &st.views;
    let sample = team_sample(views, teams);
    let (pw, pd, pl) = models.win.probs(&sample);
    let p = [pw, pd, pl];
    let z = models.win.logit(&sample);
    let decisive = mm_artifact::team::sigmoid(z);
    let all: Vec<usize> = teams[0].iter().chain(&teams[1]).copied().collect();
    let spread = |f: &dyn Fn(&View) -> f64| {
        let (lo, hi) = all
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &i| {
                let x = f(&views[i]);
                (lo.min(x), hi.max(x))
            });
        hi - lo
    };
    let top = |t: usize| {
        teams[t]
            .iter()
            .map(|&i| views[i].pct_max)
            .fold(0.0f64, f64::max)
    };
    let mut sizes: [Vec<usize>; 2] = [
        teams[0].iter().map(|&i| views[i].size).collect(),
        teams[1].iter().map(|&i| views[i].size).collect(),
    ];
    for s in &mut sizes {
        s.sort_unstable_by(|a, b| b.cmp(a));
    }
    let len = sizes[0].len().max(sizes[1].len());
    let l1: usize = (0..len)
        .map(|k| {
            sizes[0]
                .get(k)
                .copied()
                .unwrap_or(0)
                .abs_diff(sizes[1].get(k).copied().unwrap_or(0))
        })
        .sum();
    let parties = if team_size <= 1 {
        1.0
    } else {
        1.0 - (l1 as f64 / (2 * (team_size - 1)) as f64).min(1.0)
    };
    let dc = best_data_centre(st.searches, &all);
    let worst_ping = match dc {
        Ok(Some((_, _, worst))) => worst,
        Ok(None) => {
            // Fibre round trip: about 1 ms per 100 km of the lobby's widest span, plus 10 ms.
            let mut span = 0.0f64;
            for (x, &i) in all.iter().enumerate() {
                for &j in &all[x + 1..] {
                    span = span.max(great_circle_km(&views[i].xyz, &views[j].xyz));
                }
            }
            10.0 + span / 100.0
        }
        Err(()) => f64::INFINITY,
    };
    let ping = 1.0
        - ((worst_ping - w.good_ping_ms) / (w.bad_ping_ms - w.good_ping_ms).max(1e-9))
            .clamp(0.0, 1.0);
    let oldest = all.iter().map(|&i| views[i].age_s).fold(0.0f64, f64::max);
    let mut q = Quality {
        balance: 1.0 - (2.0 * decisive - 1.0).abs(),
        skill_spread: 1.0 - spread(&|v| v.skill).clamp(0.0, 1.0),
        experience: 1.0 - (spread(&|v| v.exp) / w.experience_scale).clamp(0.0, 1.0),
        top_player: 1.0 - ((top(0) - top(1)).abs() / w.top_scale).clamp(0.0, 1.0),
        parties,
        ping,
        wait: (oldest / max_wait_s.max(1e-9)).clamp(0.0, 1.0),
        total: 0.0,
    };
    let wsum =
        w.balance + w.skill_spread + w.experience + w.top_player + w.parties + w.ping + w.wait;
    q.total = (w.balance * q.balance
        + w.skill_spread * q.skill_spread
        + w.experience * q.experience
        + w.top_player * q.top_player
        + w.parties * q.parties
        + w.ping * q.ping
        + w.wait * q.wait)
        / wsum.max(1e-12);
    Scored {
        p,
        churn: split_churn(views, teams, p, models.win.blowout_given_loss(z)),
        quality: q,
        dc: dc.ok().flatten(),
    }
}

/// The CoD lobby-phase split of the searches `ids` (exhaustive: fewest size difference, then the
/// least difference of adjusted skill sums), as search indices per team; `None` unless both
/// teams are full.
pub(crate) fn balanced_split(
    views: &[View],
    ids: &[usize],
    team_size: usize,
) -> Option<[Vec<usize>; 2]> {
    let teams = even_split(views, ids, team_size)?;
    let players: usize = ids.iter().map(|&i| views[i].size).sum();
    (players == 2 * team_size).then_some(teams)
}

/// The lobby-phase split of searches `ids` into two teams of the same size, at most
/// `team_size` each (`None` when the best split has a size difference).
pub(crate) fn even_split(
    views: &[View],
    ids: &[usize],
    team_size: usize,
) -> Option<[Vec<usize>; 2]> {
    let parties: Vec<Party> = ids
        .iter()
        .map(|&i| Party {
            size: views[i].size,
            skill: views[i].adj_sum,
        })
        .collect();
    let split: Split = best_split(&parties, team_size).ok()?;
    if split.sizes[0] != split.sizes[1] {
        return None;
    }
    Some([
        split.teams[0].iter().map(|&k| ids[k]).collect(),
        split.teams[1].iter().map(|&k| ids[k]).collect(),
    ])
}

/// Builds the [`Lobby`] record of a split.
pub(crate) fn make_lobby(
    st: &TickState<'_>,
    teams: [Vec<usize>; 2],
    scored: &Scored,
    now_ms: i64,
    rescued: bool,
) -> Lobby {
    let v = &st.views;
    let sum = |t: usize, f: &dyn Fn(&View) -> f64| teams[t].iter().map(|&i| f(&v[i])).sum::<f64>();
    let max_wait_ms = teams[0]
        .iter()
        .chain(&teams[1])
        .map(|&i| now_ms - st.searches[i].start_ms)
        .max()
        .unwrap_or(0)
        .max(0);
    Lobby {
        formed_ms: now_ms,
        players: [
            teams[0].iter().map(|&i| v[i].size).sum(),
            teams[1].iter().map(|&i| v[i].size).sum(),
        ],
        skill: [sum(0, &|x| x.adj_sum), sum(1, &|x| x.adj_sum)],
        p: scored.p,
        expected_churn: scored.churn,
        quality: scored.quality,
        data_centre: scored.dc.map(|d| d.0),
        worst_ping_ms: scored.dc.map(|d| d.2),
        max_wait_ms,
        rescued,
        teams: [
            teams[0].iter().map(|&i| st.searches[i].id).collect(),
            teams[1].iter().map(|&i| st.searches[i].id).collect(),
        ],
    }
}
