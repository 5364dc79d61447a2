//! The CoD policy's own check of a formed lobby (`Policy::check`: the rules a lobby must pass,
//! named when it breaks one) against lobbies that break each rule: formed by the same policy
//! with every rule open, then checked under the default rules, at no wait and after the
//! backoff has loosened the rule. Then what `Explain` says of a search the rules hold (each
//! rule's count, the time its backoff allows the nearest refused candidate, its detail), and
//! the edges of the rules: similarity both ways, the ping looked up per data centre and
//! allowed up to its bound inclusive.
#![allow(clippy::unwrap_used)]

use mm_matcher::cod::{Candidate, CodConfig, CodRules, LobbyBuilder, PartialLobbies};
use mm_matcher::queue::{LobbyModels, Mode, Policy, Queue, Rule, Search};

use crate::common::search;

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

/// What `Explain` says of a search the CoD rules hold, worked by hand from the default backoff
/// curves (skill range 0.05 at 0 s, 0.1 at 10 s, 0.2 at 30 s; disparity allowance 0.2 at 0 s,
/// 0.8 at 60 s; extra ping 20 ms at 0 s, 40 at 30 s, 80 at 90 s). At `T0 + 5 s`, a 3v3 queue:
/// - A (asked about): a duo at 0.45 and 0.55 (skill 0.5, own disparity 0.1), 20 ms from data
///   centre 1 and 100 ms from 2, searching since `T0`;
/// - X: a solo at 0.5, taken into A's lobby (3 of 6 players: nobody else fits);
/// - S1 (0.6) and S2 (0.7): refused by skill similarity (A's range is 0.5 +- 0.075 at 5 s). The
///   pair (A, S1) passes once both accept 0.1, at 10 s of age, `T0 + 10 s`; (A, S2) needs 0.2,
///   at 30 s. The blocker counts 2 and says the earlier, `T0 + 10 s`;
/// - D: a duo at 0.3 and 0.7 (spread 0.4): refused by disparity (X accepts 0 + 0.25 at 5 s).
///   A must allow 0.4 - 0.1 = 0.3 over its own, at 10 s; D allows 0.4 - 0.4 = 0 at once:
///   `T0 + 10 s`;
/// - P: a solo at 0.5 the other way round (100 ms and 20 ms), searching since `T0 - 20 s`: every
///   data centre costs one of A and P 80 ms over its best. Both allow 80 ms at 90 s of age: A at
///   `T0 + 90 s`, P at `T0 + 70 s`; the later holds.
///
/// Five candidates seen (four refused, X taken), fewer than K = 32: not enough players is named
/// too. With K = 5 it is not.
#[test]
fn explain_counts_each_rule_s_refusals_and_says_when_its_backoff_allows_them() {
    let now = T0 + 5_000;
    let mut a = search(1, &[0.45, 0.55], T0);
    a.pings = vec![(1, 20.0), (2, 100.0)];
    let mut p = search(6, &[0.5], T0 - 20_000);
    p.pings = vec![(1, 100.0), (2, 20.0)];
    let mut q = Queue::new(Mode { team_size: 3 }).unwrap();
    for s in [
        a,
        search(2, &[0.5], T0),
        search(3, &[0.6], T0),
        search(4, &[0.7], T0),
        search(5, &[0.3, 0.7], T0),
        p,
    ] {
        q.push(s).unwrap();
    }
    let policy = |k: usize| {
        let mut c = CodConfig::new(3);
        c.k = k;
        CodRules::new(c, LobbyModels::skill_only(3.0))
    };
    let e = policy(32).explain(now, &q, 1).unwrap();
    assert_eq!(e.search, 1);
    assert_eq!(e.wait_ms, 5_000);
    assert_eq!((e.players_found, e.players_needed), (3, 6));
    assert_eq!(e.max_wait_at_ms, T0 + 120_000);
    let got: Vec<(Rule, usize, Option<i64>, &str)> = e
        .blockers
        .iter()
        .map(|b| (b.rule, b.candidates, b.relaxes_at_ms, b.detail.as_str()))
        .collect();
    let similarity = (
        Rule::SkillSimilarity,
        2,
        Some(T0 + 10_000),
        "lobby skill range [0.425, 0.575]; search skill 0.500 accepts +-0.075",
    );
    let disparity = (
        Rule::SkillDisparity,
        1,
        Some(T0 + 10_000),
        "lobby disparity 0.100, accepted up to 0.250",
    );
    let ping = (Rule::Ping, 1, Some(T0 + 90_000), "allowed extra ping 23 ms");
    let few = (
        Rule::NotEnoughPlayers,
        0,
        None,
        "5 of 32 compatible candidates found",
    );
    assert_eq!(got, vec![similarity, disparity, ping, few]);

    let e = policy(5).explain(now, &q, 1).unwrap();
    let rules: Vec<Rule> = e.blockers.iter().map(|b| b.rule).collect();
    assert_eq!(
        rules,
        vec![Rule::SkillSimilarity, Rule::SkillDisparity, Rule::Ping]
    );
}

/// Skill similarity holds both ways: a search narrower than one already in the lobby refuses
/// it although the lobby's searches accept the newcomer. A (0.6, accepting +-0.2) is in the
/// lobby; B (0.5, accepting +-0.05) joins only if its range [0.45, 0.55] holds A's 0.6: it does
/// not. C (0.5, +-0.1) would hold it.
#[test]
fn a_newcomer_whose_range_misses_a_lobby_member_is_refused() {
    let cand = |index, skill, range| Candidate {
        index,
        size: 1,
        skill,
        range,
        pct_min: skill,
        pct_max: skill,
        max_disparity: 1.0,
        max_delta_ping: 0.0,
    };
    let mut b = LobbyBuilder::new(2);
    b.try_add(&cand(0, 0.6, 0.2), &[]).unwrap();
    assert_eq!(
        b.try_add(&cand(1, 0.5, 0.05), &[]),
        Err(Rule::SkillSimilarity)
    );
    assert_eq!(b.members(), &[0]);
    assert_eq!(b.try_add(&cand(2, 0.5, 0.1), &[]), Ok(()));
    assert_eq!(b.skill_range(), (0.4, 0.6));
}

/// The ping rule looks each search's ping up at the data centre it weighs, and the allowed
/// extra ping is inclusive. 1v1 at no wait (20 ms allowed):
/// - both 300, 300 and 20 ms from data centres 1, 2 and 3: centre 3 costs neither anything,
///   and the lobby forms;
/// - 20 and 40 ms from centres 1 and 2 against 40 and 20: every centre costs one of them
///   exactly 20 ms, which is allowed;
/// - 20 and 41 against 41 and 20: 21 ms is not, until the allowance grows (at 1.5 s).
#[test]
fn the_ping_rule_weighs_each_data_centre_and_allows_exactly_its_bound() {
    let forms = |a: &[(u16, f32)], b: &[(u16, f32)], at: i64| {
        let mut q = Queue::new(Mode { team_size: 1 }).unwrap();
        q.push(pinged(1, 0.5, a)).unwrap();
        q.push(pinged(2, 0.5, b)).unwrap();
        let mut p = CodRules::new(CodConfig::new(1), LobbyModels::skill_only(3.0));
        p.form_lobbies(at, &q).len()
    };
    let far_then_near = [(1, 300.0), (2, 300.0), (3, 20.0)];
    assert_eq!(forms(&far_then_near, &far_then_near, T0), 1);
    assert_eq!(
        forms(&[(1, 20.0), (2, 40.0)], &[(1, 40.0), (2, 20.0)], T0),
        1
    );
    let (a, b) = ([(1, 20.0), (2, 41.0)], [(1, 41.0), (2, 20.0)]);
    assert_eq!(forms(&a, &b, T0), 0);
    assert_eq!(forms(&a, &b, T0 + 1_500), 1);
}
