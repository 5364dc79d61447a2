//! The match-level rules of the lake: what a match must satisfy beyond each row's own checks
//! ([`crate::PlayerRow::validate`]). `mm ingest` quarantines the rows of a match that breaks
//! one, and `mm serve` refuses a reported match that breaks one; both call these functions, so
//! the two agree on what a valid match is, and name the rule in the same words.
//!
//! - **one row per player**: a player may not appear twice in a match
//!   ([`PLAYER_TWICE`]; ingest quarantines both rows unless they are identical, which makes the
//!   second a duplicate);
//! - **two teams or more** ([`ONE_TEAM`]);
//! - **consistent outcomes** ([`resolve_outcomes`]): teammates agree, at most one team wins,
//!   and a win is not beside a draw; a team without an outcome takes it from the team scores
//!   (highest score wins, a tie at the top is a draw for the tied teams).

use crate::schema::Outcome;

/// The category of each rule, as the quarantine table's `field` column records it.
pub const PLAYER_TWICE: &str = "match: player twice";
pub const ONE_TEAM: &str = "match: one team";
pub const INCONSISTENT_OUTCOMES: &str = "match: inconsistent outcomes";
pub const INCONSISTENT_TEAM_SCORE: &str = "match: inconsistent team_score";
pub const NO_OUTCOME: &str = "match: no outcome";

/// A broken rule: its category (one of the constants above) and a sentence naming the match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchRejection {
    pub category: &'static str,
    pub reason: String,
}

impl std::fmt::Display for MatchRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.category, self.reason)
    }
}

/// What one row says about its team's result.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TeamClaim {
    pub team: i32,
    pub outcome: Option<Outcome>,
    pub team_score: Option<f64>,
}

/// The player-twice rule for rows whose players are `players`: the first player seen twice.
#[must_use]
pub fn player_twice<'a>(
    match_id: &str,
    players: impl IntoIterator<Item = &'a str>,
) -> Option<MatchRejection> {
    let mut seen: Vec<&str> = players.into_iter().collect();
    seen.sort_unstable();
    seen.windows(2)
        .find(|w| w[0] == w[1])
        .map(|w| MatchRejection {
            category: PLAYER_TWICE,
            reason: format!("player {} appears twice in match {match_id}", w[0]),
        })
}

/// The two-teams rule over the match's distinct teams `teams` (sorted, deduplicated, not empty).
///
/// # Errors
/// Fewer than two teams.
pub fn two_teams(match_id: &str, teams: &[i32]) -> Result<(), MatchRejection> {
    if teams.len() < 2 {
        return Err(MatchRejection {
            category: ONE_TEAM,
            reason: format!(
                "match {match_id} has players on only one team (team {}); a match needs two",
                teams.first().copied().unwrap_or_default()
            ),
        });
    }
    Ok(())
}

/// What the rows of one team say about the match.
#[derive(Debug, Clone, Copy)]
struct TeamState {
    team: i32,
    outcome: Option<Outcome>,
    score: Option<f64>,
}

/// The state of team `t`, added in team order if new (a match has a handful of teams, so a
/// sorted vector beats a map).
fn slot(teams: &mut Vec<TeamState>, t: i32) -> &mut TeamState {
    let k = match teams.binary_search_by_key(&t, |e| e.team) {
        Ok(k) => k,
        Err(k) => {
            teams.insert(
                k,
                TeamState {
                    team: t,
                    outcome: None,
                    score: None,
                },
            );
            k
        }
    };
    &mut teams[k]
}

fn agree(m: &str, e: &mut TeamState, o: Outcome, what: &str) -> Result<(), MatchRejection> {
    match e.outcome {
        Some(prev) if prev != o => Err(MatchRejection {
            category: INCONSISTENT_OUTCOMES,
            reason: format!(
                "match {m}: team {} {what} {} and {}",
                e.team,
                prev.as_str(),
                o.as_str()
            ),
        }),
        _ => {
            e.outcome = Some(o);
            Ok(())
        }
    }
}

/// Checks that teammates agree and that at most one team won, and gives every row its outcome:
/// its own, or the one derived from the team scores for a row without one (`out[k]` for
/// `rows[k]`).
///
/// # Errors
/// The first rule the rows break: teammates disagree on the outcome or the team score, a team
/// has neither outcome nor score while another row needs one derived, or more than one team
/// won (or one won and another drew).
pub fn resolve_outcomes(
    m: &str,
    rows: &[TeamClaim],
    out: &mut Vec<Outcome>,
) -> Result<(), MatchRejection> {
    let mut teams: Vec<TeamState> = Vec::with_capacity(2);
    let mut pending = false;
    for r in rows {
        let e = slot(&mut teams, r.team);
        match r.outcome {
            None => pending = true,
            Some(o) => agree(m, e, o, "has both")?,
        }
        if let Some(s) = r.team_score {
            match e.score {
                Some(prev) if prev != s => {
                    return Err(MatchRejection {
                        category: INCONSISTENT_TEAM_SCORE,
                        reason: format!("match {m}: team {} has team_score {prev} and {s}", e.team),
                    });
                }
                _ => e.score = Some(s),
            }
        }
    }
    if pending {
        if let Some(e) = teams.iter().find(|e| e.score.is_none()) {
            return Err(MatchRejection {
                category: NO_OUTCOME,
                reason: format!(
                    "match {m}: team {} has neither outcome nor team_score",
                    e.team
                ),
            });
        }
        let top = teams
            .iter()
            .filter_map(|e| e.score)
            .fold(f64::NEG_INFINITY, f64::max);
        let n_top = teams.iter().filter(|e| e.score == Some(top)).count();
        for e in &mut teams {
            let o = match e.score {
                Some(s) if s < top => Outcome::Loss,
                _ if n_top == 1 => Outcome::Win,
                _ => Outcome::Draw,
            };
            agree(m, e, o, "is marked")?;
        }
    }
    let wins = teams
        .iter()
        .filter(|e| e.outcome == Some(Outcome::Win))
        .count();
    let draws = teams
        .iter()
        .filter(|e| e.outcome == Some(Outcome::Draw))
        .count();
    if wins > 1 || (wins == 1 && draws > 0) {
        let list: Vec<String> = teams
            .iter()
            .map(|e| format!("team {} {}", e.team, e.outcome.map_or("?", Outcome::as_str)))
            .collect();
        return Err(MatchRejection {
            category: INCONSISTENT_OUTCOMES,
            reason: format!("match {m}: {}", list.join(", ")),
        });
    }
    out.clear();
    for r in rows {
        let team = slot(&mut teams, r.team).outcome;
        out.push(r.outcome.or(team).unwrap_or(Outcome::Loss));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn claim(team: i32, outcome: Option<Outcome>, team_score: Option<f64>) -> TeamClaim {
        TeamClaim {
            team,
            outcome,
            team_score,
        }
    }

    /// Each rule on a hand-made match: scores give the outcomes (a tie at the top is a draw);
    /// teammates that disagree, two winners, a team with nothing, two scores for one team.
    #[test]
    fn each_rule_by_hand() {
        let mut out = Vec::new();
        let w = Some(Outcome::Win);
        let rows = [
            claim(0, None, Some(3.0)),
            claim(1, None, Some(1.0)),
            claim(0, w, None),
        ];
        resolve_outcomes("m", &rows, &mut out).unwrap();
        assert_eq!(out, [Outcome::Win, Outcome::Loss, Outcome::Win]);
        let tie = [claim(0, None, Some(2.0)), claim(1, None, Some(2.0))];
        resolve_outcomes("m", &tie, &mut out).unwrap();
        assert_eq!(out, [Outcome::Draw, Outcome::Draw]);
        let cat = |rows: &[TeamClaim]| {
            resolve_outcomes("m", rows, &mut Vec::new())
                .unwrap_err()
                .category
        };
        let l = Some(Outcome::Loss);
        assert_eq!(
            cat(&[claim(0, w, None), claim(0, l, None)]),
            INCONSISTENT_OUTCOMES
        );
        assert_eq!(
            cat(&[claim(0, w, None), claim(1, w, None)]),
            INCONSISTENT_OUTCOMES
        );
        assert_eq!(cat(&[claim(0, None, None), claim(1, l, None)]), NO_OUTCOME);
        assert_eq!(
            cat(&[claim(0, w, Some(1.0)), claim(0, w, Some(2.0))]),
            INCONSISTENT_TEAM_SCORE
        );
        // Scores that contradict a given outcome.
        assert_eq!(
            cat(&[claim(0, l, Some(5.0)), claim(1, None, Some(1.0))]),
            INCONSISTENT_OUTCOMES
        );
        assert_eq!(two_teams("m", &[3]).unwrap_err().category, ONE_TEAM);
        assert!(two_teams("m", &[0, 1]).is_ok());
        let twice = player_twice("m", ["a", "b", "a"]).unwrap();
        assert_eq!(twice.category, PLAYER_TWICE);
        assert!(twice.reason.contains("player a"), "{twice}");
        assert!(player_twice("m", ["a", "b"]).is_none());
    }

    /// The cases `cargo mutants` found untested (CONTRIBUTING.md, Mutation testing): teammates
    /// repeating the same team score agree; with three teams, one on top wins and two tied
    /// below both lose (a tie counts only at the top); a win beside a draw is refused while
    /// two draws are a drawn match; a rejection prints as its category and reason.
    #[test]
    fn the_cases_mutation_testing_found() {
        let (w, d) = (Some(Outcome::Win), Some(Outcome::Draw));
        let mut out = Vec::new();
        let same = [
            claim(0, None, Some(4.0)),
            claim(0, None, Some(4.0)),
            claim(1, None, Some(2.0)),
        ];
        resolve_outcomes("m", &same, &mut out).unwrap();
        assert_eq!(out, [Outcome::Win, Outcome::Win, Outcome::Loss]);
        let three = [
            claim(0, None, Some(3.0)),
            claim(1, None, Some(1.0)),
            claim(2, None, Some(1.0)),
        ];
        resolve_outcomes("m", &three, &mut out).unwrap();
        assert_eq!(out, [Outcome::Win, Outcome::Loss, Outcome::Loss]);
        let e = resolve_outcomes("m", &[claim(0, w, None), claim(1, d, None)], &mut out);
        assert_eq!(e.unwrap_err().category, INCONSISTENT_OUTCOMES);
        resolve_outcomes("m", &[claim(0, d, None), claim(1, d, None)], &mut out).unwrap();
        assert_eq!(out, [Outcome::Draw, Outcome::Draw]);
        let r = two_teams("m7", &[2]).unwrap_err();
        assert_eq!(
            r.to_string(),
            "match: one team: match m7 has players on only one team (team 2); a match needs two"
        );
    }
}
