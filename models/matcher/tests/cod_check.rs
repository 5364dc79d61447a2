//! The CoD policy's own check of a formed lobby (`Policy::check`: the rules a lobby must pass,
//! named when it breaks one) against lobbies that break each rule: formed by the same policy
//! with every rule open, then checked under the default rules, at no wait and after the
//! backoff has loosened the rule.
#![allow(clippy::unwrap_used)]

use mm_matcher::cod::{CodConfig, CodRules, PartialLobbies};
use mm_matcher::queue::{LobbyModels, Mode, Policy, Queue, Rule, Search};

mod common;
use common::search;

const T0: i64 = 1_700_000_000_000;

/// The 2v2 lobby the open rules form of `searches` at `at`, checked under the default rules.
fn checked(searches: &[Search], at: i64) -> Result<(), Rule> {
    let mode = Mode { team_size: 2 };
    let mut q = Queue::new(mode).unwrap();
    for s in searches {
        q.push(s.clone()).unwrap();
    }
    let mut open = CodRules::new(CodConfig::open(2), LobbyModels::skill_only(3.0));
    let lobbies = open.form_lobbies(at, &q);
    assert_eq!(lobbies.len(), 1, "the open rules form one lobby");
    let strict = CodRules::new(CodConfig::new(2), LobbyModels::skill_only(3.0));
    strict.check(at, &q, &lobbies[0])
}

fn pinged(id: u64, pct: f64, pings: &[(u16, f32)]) -> Search {
    let mut s = search(id, &[pct], T0);
    s.pings = pings.to_vec();
    s
}

#[test]
fn the_check_names_each_rule_a_lobby_breaks_until_its_backoff_allows_it() {
    let even: Vec<Search> = (1..=4).map(|id| search(id, &[0.5], T0)).collect();
    assert_eq!(checked(&even, T0), Ok(()));

    // Skill similarity: one player 0.45 from the others; the default half-width reaches 0.5
    // at 60 s.
    let mut far = even.clone();
    far[3] = search(4, &[0.95], T0);
    assert_eq!(checked(&far, T0), Err(Rule::SkillSimilarity));
    assert_eq!(checked(&far, T0 + 60_000), Ok(()));

    // Skill disparity: a party of 0.3 and 0.7 (mean 0.5) with two singles at 0.5: a spread of
    // 0.4 against the singles' acceptable 0.2 at no wait (0.8 at 60 s).
    let wide = vec![
        search(1, &[0.3, 0.7], T0),
        search(2, &[0.5], T0),
        search(3, &[0.5], T0),
    ];
    assert_eq!(checked(&wide, T0), Err(Rule::SkillDisparity));
    assert_eq!(checked(&wide, T0 + 60_000), Ok(()));

    // Delta ping: two players 20 ms from data centre 1 and 200 ms from 2, two the other way
    // round: every data centre costs two of them 180 ms over their best (20 ms allowed at no
    // wait, 200 ms at 180 s).
    let split = vec![
        pinged(1, 0.5, &[(1, 20.0), (2, 200.0)]),
        pinged(2, 0.5, &[(1, 20.0), (2, 200.0)]),
        pinged(3, 0.5, &[(1, 200.0), (2, 20.0)]),
        pinged(4, 0.5, &[(1, 200.0), (2, 20.0)]),
    ];
    assert_eq!(checked(&split, T0), Err(Rule::Ping));
    assert_eq!(checked(&split, T0 + 180_000), Ok(()));
}

/// A partial lobby (on for this policy: 4 players or more after 60 s) passes the check from
/// the moment its oldest search has waited 60 s, and not a second before. The seed's example:
/// {3}, {2}, {2}, {2}, {1}, {1} cannot make equal teams of 11, so the lobby is partial.
#[test]
fn a_partial_lobby_passes_the_check_only_after_its_wait() {
    let mut q = Queue::new(Mode { team_size: 6 }).unwrap();
    for (k, &n) in [3_usize, 2, 2, 2, 1, 1].iter().enumerate() {
        q.push(search(k as u64, &vec![0.5; n], T0)).unwrap();
    }
    let mut c = CodConfig::new(6);
    c.partial = Some(PartialLobbies {
        after_s: 60.0,
        min_players: 4,
    });
    let mut p = CodRules::new(c, LobbyModels::skill_only(3.0));
    let lobbies = p.form_lobbies(T0 + 60_000, &q);
    assert_eq!(lobbies.len(), 1);
    let [a, b] = lobbies[0].players;
    assert!(a == b && a < 6, "{:?}", lobbies[0].players);
    assert_eq!(p.check(T0 + 60_000, &q, &lobbies[0]), Ok(()));
    assert_eq!(
        p.check(T0 + 59_000, &q, &lobbies[0]),
        Err(Rule::TeamBalance)
    );
}
