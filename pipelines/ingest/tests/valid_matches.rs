//! Ingest over mostly valid input (proptest): random matches that pass every rule (one start per
//! match, two teams of distinct players, teammates' outcomes agreeing, one winner or a draw),
//! then at most one rule broken in one match. The run's counts are asserted exactly: every row
//! of a valid match is accepted and stored, and the broken rule quarantines (or counts as a
//! duplicate) exactly the rows the rule names and no others.

#![allow(clippy::unwrap_used)]

use mm_ingest::{IngestConfig, NoProgress, ingest};
use proptest::prelude::*;

/// One match: its two teams' sizes, the result for team 1 (`win`, `loss`, `draw`), and each
/// player's kills.
#[derive(Debug, Clone)]
struct Match {
    sizes: (usize, usize),
    result: &'static str,
    kills: Vec<u32>,
}

fn a_match() -> impl Strategy<Value = Match> {
    (
        2..5_usize,
        2..5_usize,
        prop::sample::select(vec!["win", "loss", "draw"]),
    )
        .prop_flat_map(|(a, b, result)| {
            prop::collection::vec(0..30_u32, a + b).prop_map(move |kills| Match {
                sizes: (a, b),
                result,
                kills,
            })
        })
}

/// The rule broken in the first match, if any.
#[derive(Debug, Clone, Copy)]
enum Break {
    None,
    /// Team 2's rows left out: the match has one team.
    OneTeam,
    /// Both teams say they won.
    TwoWinners,
    /// One player of team 1 reports the other result.
    TeammateDisagrees,
    /// A row with negative kills (a row-level rule).
    NegativeKills,
    /// A player's row again with other kills.
    PlayerTwiceDiffering,
    /// A player's row again, the same line: a duplicate, not an error.
    ExactDuplicate,
}

fn other(result: &str) -> &'static str {
    match result {
        "win" => "loss",
        "loss" => "win",
        _ => "win",
    }
}

fn opposite(result: &str) -> &'static str {
    match result {
        "win" => "loss",
        "loss" => "win",
        _ => "draw",
    }
}

/// The CSV lines of `matches` with `brk` applied to the first, and the expected (accepted,
/// duplicates, quarantined) records.
fn lines(matches: &[Match], brk: Break) -> (Vec<String>, (u64, u64, u64)) {
    let mut out = Vec::new();
    let (mut accepted, mut duplicates, mut quarantined) = (0u64, 0u64, 0u64);
    for (k, m) in matches.iter().enumerate() {
        let start = 1_704_067_200 + k as i64 * 600;
        let mut rows: Vec<(usize, i32, String, i64)> = Vec::new(); // (player, team, outcome, kills)
        for p in 0..m.sizes.0 + m.sizes.1 {
            let team = if p < m.sizes.0 { 1 } else { 2 };
            let outcome = if team == 1 {
                m.result
            } else {
                opposite(m.result)
            };
            rows.push((p, team, outcome.to_string(), i64::from(m.kills[p])));
        }
        let n = rows.len() as u64;
        let (mut acc, mut dup, mut quar) = (n, 0, 0);
        if k == 0 {
            match brk {
                Break::None => {}
                Break::OneTeam => {
                    rows.retain(|r| r.1 == 1);
                    (acc, quar) = (0, rows.len() as u64);
                }
                Break::TwoWinners => {
                    for r in &mut rows {
                        r.2 = "win".into();
                    }
                    (acc, quar) = (0, n);
                }
                Break::TeammateDisagrees => {
                    rows[0].2 = other(m.result).into();
                    (acc, quar) = (0, n);
                }
                Break::NegativeKills => {
                    // Team 1 keeps at least one other player: the match still has two teams.
                    rows[0].3 = -1;
                    (acc, quar) = (n - 1, 1);
                }
                Break::PlayerTwiceDiffering => {
                    let mut again = rows[0].clone();
                    again.3 += 1;
                    rows.push(again);
                    // Both of the player's rows are refused; its team keeps the others.
                    (acc, quar) = (n - 1, 2);
                }
                Break::ExactDuplicate => {
                    rows.push(rows[0].clone());
                    dup = 1;
                }
            }
        }
        accepted += acc;
        duplicates += dup;
        quarantined += quar;
        for (p, team, outcome, kills) in rows {
            out.push(format!("m{k},p{k}-{p},{team},{start},{outcome},{kills}"));
        }
    }
    (out, (accepted, duplicates, quarantined))
}

fn a_break() -> impl Strategy<Value = Break> {
    prop::sample::select(vec![
        Break::None,
        Break::OneTeam,
        Break::TwoWinners,
        Break::TeammateDisagrees,
        Break::NegativeKills,
        Break::PlayerTwiceDiffering,
        Break::ExactDuplicate,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn valid_matches_land_whole_and_one_broken_rule_refuses_exactly_its_rows(
        matches in prop::collection::vec(a_match(), 1..8),
        brk in a_break(),
    ) {
        let (body, (accepted, duplicates, quarantined)) = lines(&matches, brk);
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("matches.csv");
        std::fs::write(
            &csv,
            format!("match_id,player_id,team,start_ts,outcome,kills\n{}\n", body.join("\n")),
        )
        .unwrap();
        let r = ingest(&IngestConfig::new(dir.path().join("lake"), vec![csv]), &NoProgress).unwrap();
        let c = r.totals;
        prop_assert_eq!(c.read, body.len() as u64);
        prop_assert_eq!(c.skipped, 0);
        prop_assert_eq!(
            (c.accepted, c.duplicates, c.quarantined),
            (accepted, duplicates, quarantined),
            "{:?}", brk
        );
        prop_assert_eq!(r.lake_rows_written, accepted);
        prop_assert_eq!(r.quarantine_entries_written, quarantined);
    }
}
