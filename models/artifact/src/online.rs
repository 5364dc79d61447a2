//! What a finished match does to its players, between retrains: the live update a service
//! applies when a game server reports a result (`mm serve`'s `ReportMatch`).
//!
//! For each player of the match, in the lake's row order (team, then the order reported):
//!
//! 1. **raw skill** moves by [`update_lobby`], the step the trainer's replay takes, on the
//!    artifact's metric ([`Metric`]) and hyperparameters, with the party offsets the replay
//!    credited ([`SkillFile::party_offsets`]);
//! 2. the **percentile** is read from the artifact's table at the new raw skill;
//! 3. the **match joins the player's history** ([`PlayerState::record`]): window counts,
//!    recent matches, churned gaps, with the per-match values the churn feature query computes
//!    from the lake (`mm-fit`'s `played_query`): the score difference to the mean opponent,
//!    the performance rank in the lobby, and whether it was a blowout loss;
//! 4. the **win skill**, when the team win model reads it and the artifact says how to update
//!    it (`skill.json`'s `win_update`, format 7 on): the step of [`crate::skill::win`] from the
//!    players' win skills and masses, on the same metric. Without it, a player keeps the
//!    snapshot's win skill until the next full fit, and a new player has 0.
//!
//! ```
//! use mm_artifact::online::{FinishedMatch, LiveUpdater, ResultRow};
//! use mm_artifact::Outcome;
//! let dir = tempfile::tempdir().unwrap();
//! let (m, files) = mm_artifact::synthetic::artifact(20, 1);
//! let store = mm_artifact::Store::new(dir.path());
//! store.publish("v1", m, &files, true, None).unwrap();
//! let art = store.open_latest().unwrap();
//!
//! let row = |id: &str, team, outcome, kills| ResultRow {
//!     stats: mm_artifact::skill::PerfColumns {
//!         kills: Some(kills), deaths_by_enemy: Some(2.0), ..Default::default()
//!     },
//!     ..ResultRow::new(id, team, outcome)
//! };
//! let m = FinishedMatch::new("m1", art.manifest.snapshot_as_of_ms + 60_000, vec![
//!     row("ann", 0, Outcome::Win, 9.0),
//!     row("bob", 1, Outcome::Loss, 1.0),
//! ]);
//! let mut live = LiveUpdater::new(&art).unwrap();
//! let before: Vec<_> = m.rows.iter().map(|r| art.player_or_new(&r.player_id)).collect();
//! let after = live.apply(&m, before);
//! assert!(after[0].raw_skill > 0.0 && after[1].raw_skill < 0.0);
//! assert_eq!((after[0].games, after[0].recent.len()), (1, 1));
//! ```

use crate::Outcome;
use crate::features::Played;
use crate::load::{Artifact, SkillFile};
use crate::skill::raw::Slot;
use crate::skill::win::WinSlot;
use crate::skill::{
    LobbySlot, Metric, PerfColumns, RoleComparison, RoleStats, ValidRawSkillParams, WinSkillUpdate,
    update_lobby,
};
use crate::snapshot::PlayerState;
use crate::team::{SkillBasis, party_sd};

/// One player's row of a finished match: the lake's columns that the update reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    pub player_id: String,
    pub team: i32,
    /// Absent: solo. Players of one team with the same party id played as a party.
    pub party_id: Option<String>,
    pub role: Option<String>,
    /// The player's team's outcome (resolved from team scores where the report gave those).
    pub outcome: Outcome,
    pub team_score: Option<f64>,
    /// The performance columns (the `outcome` field is ignored: [`ResultRow::outcome`] is
    /// used).
    pub stats: PerfColumns,
}

impl ResultRow {
    /// A solo player's row with no team score and no statistics.
    #[must_use]
    pub fn new(player_id: &str, team: i32, outcome: Outcome) -> ResultRow {
        ResultRow {
            player_id: player_id.to_string(),
            team,
            party_id: None,
            role: None,
            outcome,
            team_score: None,
            stats: PerfColumns::default(),
        }
    }
}

/// A finished match, its rows in the lake's order: by team, then as reported within a team
/// (the order `mm ingest` writes and every replay reads, so that the floating-point sums of the
/// update run in the same order).
#[derive(Debug, Clone, PartialEq)]
pub struct FinishedMatch {
    pub match_id: String,
    pub start_ms: i64,
    pub rows: Vec<ResultRow>,
}

impl FinishedMatch {
    /// The match with its rows put in the lake's order (a stable sort by team).
    #[must_use]
    pub fn new(match_id: &str, start_ms: i64, mut rows: Vec<ResultRow>) -> FinishedMatch {
        rows.sort_by_key(|r| r.team);
        FinishedMatch {
            match_id: match_id.to_string(),
            start_ms,
            rows,
        }
    }
}

/// Why an artifact cannot update players live.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LiveError {
    #[error("skill.json: unknown metric {0:?}")]
    Metric(String),
    #[error("skill.json: {0}")]
    Params(#[from] crate::skill::ParamError),
}

/// The live update of one artifact: its parameters, and the running state the update keeps
/// between matches (the role statistics of [`RoleComparison::Normalised`], which start empty:
/// the artifact does not export the replay's, so with that setting live skills drift from a
/// batch replay's until the next retrain).
#[derive(Debug, Clone)]
pub struct LiveUpdater {
    params: ValidRawSkillParams,
    metric: Metric,
    skill: SkillFile,
    percentiles: crate::percentile::PercentileMap,
    spec: crate::features::FeatureSpec,
    blowout_margin: f64,
    /// The win skill's update, when the team win model reads the win skill.
    win: Option<WinSkillUpdate>,
    roles: RoleStats,
    role_names: Vec<String>,
    lobby: Vec<LobbySlot>,
    scratch: Vec<Slot>,
    values: Vec<f64>,
}

impl LiveUpdater {
    /// # Errors
    /// The artifact's metric is unknown or its hyperparameters are invalid.
    pub fn new(art: &Artifact) -> Result<LiveUpdater, LiveError> {
        let metric =
            Metric::parse(&art.skill.metric).ok_or(LiveError::Metric(art.skill.metric.clone()))?;
        Ok(LiveUpdater {
            params: art.skill.raw_skill.check()?,
            metric,
            skill: art.skill.clone(),
            percentiles: art.percentiles.clone(),
            spec: art.churn.model.spec,
            blowout_margin: art.churn.blowout_margin,
            win: art.skill.win_update.filter(|_| {
                art.team_win
                    .is_some_and(|t| t.basis == SkillBasis::WinSkill)
            }),
            roles: RoleStats::default(),
            role_names: Vec::new(),
            lobby: Vec::new(),
            scratch: Vec::new(),
            values: Vec::new(),
        })
    }

    /// The metric raw skill compares.
    #[must_use]
    pub fn metric(&self) -> Metric {
        self.metric
    }

    /// The players' states after match `m`, given their states before it (`before[k]` for
    /// `m.rows[k]`: the service's current state, or the artifact's new-player state).
    #[must_use]
    pub fn apply(&mut self, m: &FinishedMatch, before: Vec<PlayerState>) -> Vec<PlayerState> {
        debug_assert_eq!(before.len(), m.rows.len());
        // Each row's metric, read by raw skill's update and the win skill's.
        let metrics: Vec<f64> = m
            .rows
            .iter()
            .map(|r| {
                self.metric.value(&PerfColumns {
                    outcome: Some(r.outcome),
                    ..r.stats
                })
            })
            .collect();
        let skills = self.skills_after(m, &metrics, &before);
        let win = self.win_after(m, &metrics, &before);
        let played = played_of(m, self.blowout_margin);
        before
            .into_iter()
            .zip(skills)
            .zip(played)
            .enumerate()
            .map(|(k, ((mut s, raw), p))| {
                s.raw_skill = raw;
                s.percentile = self.percentiles.percentile(raw);
                if let Some(&(skill, mass)) = win.get(k) {
                    s.win_skill = skill;
                    s.win_mass = mass;
                }
                s.record(p, &self.spec);
                s
            })
            .collect()
    }

    /// Step 4: each row's win skill and mass after the match (empty when not updated).
    fn win_after(
        &self,
        m: &FinishedMatch,
        metrics: &[f64],
        before: &[PlayerState],
    ) -> Vec<(f64, f64)> {
        let Some(u) = self.win else {
            return Vec::new();
        };
        let slots: Vec<WinSlot> = m
            .rows
            .iter()
            .zip(before)
            .zip(metrics)
            .map(|((r, s), &metric)| WinSlot {
                skill: s.win_skill,
                mass: s.win_mass,
                as_of_ms: s.last_seen_ms,
                team: r.team,
                metric,
                outcome: r.outcome,
            })
            .collect();
        u.after(self.metric, m.start_ms, &slots)
    }

    /// Step 1: each row's raw skill after the match.
    fn skills_after(
        &mut self,
        m: &FinishedMatch,
        metrics: &[f64],
        before: &[PlayerState],
    ) -> Vec<f64> {
        let roles: Vec<u16> = m
            .rows
            .iter()
            .map(|r| r.role.as_deref().map_or(0, |name| self.role_number(name)))
            .collect();
        let normalise = self.params.params().roles == RoleComparison::Normalised;
        let mut values = std::mem::take(&mut self.values);
        self.roles
            .compared_values(normalise, metrics.iter().copied(), &roles, &mut values);
        if normalise {
            self.roles.observe(metrics.iter().copied(), &roles);
        }
        let parties = party_numbers(m);
        let pre: Vec<f64> = before.iter().map(|s| s.raw_skill).collect();
        self.lobby.clear();
        for (k, s) in before.iter().enumerate() {
            let offset = match (self.skill.party_offsets, parties[k]) {
                (Some(adj), p) if p != 0 => adj.for_spread(party_sd(&pre, &parties, p)),
                _ => 0.0,
            };
            self.lobby.push(LobbySlot {
                skill: s.raw_skill,
                games: u32::try_from(s.games).unwrap_or(u32::MAX),
                value: values[k],
                offset,
                role: roles[k],
            });
        }
        self.values = values;
        update_lobby(&self.params, &mut self.lobby, &mut self.scratch);
        self.lobby.iter().map(|s| s.skill).collect()
    }

    fn role_number(&mut self, name: &str) -> u16 {
        match self.role_names.iter().position(|n| n == name) {
            Some(k) => u16::try_from(k + 1).unwrap_or(u16::MAX),
            None => {
                self.role_names.push(name.to_string());
                u16::try_from(self.role_names.len()).unwrap_or(u16::MAX)
            }
        }
    }
}

/// Each row's party number within its match: parties are (team, party id) with two or more
/// rows, numbered 1, 2, ... in (team, id) order; 0 for a solo player (the batch replay's
/// numbering).
#[must_use]
pub fn party_numbers(m: &FinishedMatch) -> Vec<u16> {
    let mut keys: Vec<(i32, &str)> = m
        .rows
        .iter()
        .filter_map(|r| r.party_id.as_deref().map(|p| (r.team, p)))
        .collect();
    keys.sort_unstable();
    let mut numbered: Vec<((i32, &str), u16)> = Vec::new();
    for run in keys.chunk_by(|a, b| a == b) {
        if run.len() >= 2 {
            numbered.push((
                run[0],
                u16::try_from(numbered.len() + 1).unwrap_or(u16::MAX),
            ));
        }
    }
    m.rows
        .iter()
        .map(|r| {
            r.party_id
                .as_deref()
                .and_then(|p| numbered.iter().find(|(k, _)| *k == (r.team, p)))
                .map_or(0, |x| x.1)
        })
        .collect()
}

/// What each row adds to its player's history, as the churn feature query computes it from the
/// lake (`mm-fit`'s `per_match_values`):
///
/// - `score_diff`: the team's score minus the mean team score of the other rows of the match
///   (`NaN` without a team score, or with one team only);
/// - `perf_rank`: the average rank, from 0 (worst) to 1 (best), of the row's performance among
///   the rows that have one, where performance is `perf`, else `kills - deaths`, else `score`
///   (`NaN` without one, or when fewer than two rows have one);
/// - `blowout_loss`: a loss by more than `blowout_margin` team-score points.
#[must_use]
pub fn played_of(m: &FinishedMatch, blowout_margin: f64) -> Vec<Played> {
    let n_match = m.rows.len() as f64;
    let n_team = |t: i32| m.rows.iter().filter(|r| r.team == t).count() as f64;
    let score_sum: f64 = m.rows.iter().filter_map(|r| r.team_score).sum();
    let perf: Vec<Option<f64>> = m
        .rows
        .iter()
        .map(|r| {
            let s = &r.stats;
            s.perf.or(match (s.kills, s.deaths) {
                (Some(k), Some(d)) => Some(k - d),
                _ => s.score,
            })
        })
        .collect();
    let ranked: Vec<f64> = perf.iter().flatten().copied().collect();
    let n_perf = ranked.len() as f64;
    m.rows
        .iter()
        .zip(&perf)
        .map(|(r, p)| {
            let nt = n_team(r.team);
            let score_diff = match r.team_score {
                Some(ts) if n_match > nt => ts - (score_sum - ts * nt) / (n_match - nt),
                _ => f64::NAN,
            };
            let perf_rank = match p {
                Some(x) if n_perf > 1.0 => {
                    let below = ranked.iter().filter(|&&y| y < *x).count() as f64;
                    let equal = ranked.iter().filter(|&&y| y == *x).count() as f64;
                    let rank = below + (equal + 1.0) / 2.0;
                    (rank - 1.0) / (n_perf - 1.0)
                }
                _ => f64::NAN,
            };
            Played {
                start_ms: m.start_ms,
                outcome: r.outcome,
                score_diff,
                perf_rank,
                blowout_loss: r.outcome == Outcome::Loss && score_diff < -blowout_margin,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn row(id: &str, team: i32, outcome: Outcome, score: Option<f64>) -> ResultRow {
        ResultRow {
            team_score: score,
            ..ResultRow::new(id, team, outcome)
        }
    }

    /// Hand case: teams of 2 and 1 with scores 100 and 60. Team 0's rows: 100 - 60 = 40; team
    /// 1's: 60 minus the mean of the other rows' team scores, (100 + 100) / 2, so -40. Ranks of kills - deaths (3, 1, 1): 1, 0.25, 0.25 on the
    /// 0-1 scale (the tie shares ranks 1 and 2, average 1.5, (1.5 - 1) / 2).
    #[test]
    fn played_values_by_hand() {
        let mut rows = vec![
            row("a", 0, Outcome::Win, Some(100.0)),
            row("b", 0, Outcome::Win, Some(100.0)),
            row("c", 1, Outcome::Loss, Some(60.0)),
        ];
        for (r, (k, d)) in rows.iter_mut().zip([(4.0, 1.0), (2.0, 1.0), (1.0, 0.0)]) {
            r.stats.kills = Some(k);
            r.stats.deaths = Some(d);
        }
        let m = FinishedMatch::new("m", 1000, rows);
        let p = played_of(&m, 5.0);
        assert_eq!(
            p.iter().map(|x| x.score_diff).collect::<Vec<_>>(),
            [40.0, 40.0, -40.0]
        );
        assert_eq!(
            p.iter().map(|x| x.perf_rank).collect::<Vec<_>>(),
            [1.0, 0.25, 0.25]
        );
        assert!(p[2].blowout_loss && !p[0].blowout_loss);
        assert!(!played_of(&m, 40.0)[2].blowout_loss);
        // One team only, or no stats: unknown.
        let solo = FinishedMatch::new("s", 0, vec![row("a", 0, Outcome::Win, Some(1.0))]);
        let p = played_of(&solo, 5.0);
        assert!(p[0].score_diff.is_nan() && p[0].perf_rank.is_nan());
    }

    /// Parties are (team, id) with two rows or more, numbered in (team, id) order.
    #[test]
    fn party_numbers_by_hand() {
        let party = |id: &str, team, p: Option<&str>| ResultRow {
            party_id: p.map(str::to_string),
            ..row(id, team, Outcome::Draw, None)
        };
        let m = FinishedMatch::new(
            "m",
            0,
            vec![
                party("a", 1, Some("x")),
                party("b", 0, Some("y")),
                party("c", 1, Some("x")),
                party("d", 0, Some("x")),
                party("e", 0, Some("y")),
                party("f", 0, None),
            ],
        );
        // Lake order: team 0 (b, d, e, f), then team 1 (a, c).
        let ids: Vec<&str> = m.rows.iter().map(|r| r.player_id.as_str()).collect();
        assert_eq!(ids, ["b", "d", "e", "f", "a", "c"]);
        assert_eq!(party_numbers(&m), [1, 0, 1, 0, 2, 2]);
    }
}
