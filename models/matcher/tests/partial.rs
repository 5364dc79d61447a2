//! Partial lobbies under the CoD rules (the CoD paper: "New lobbies are always created with a
//! team size differential of zero, even when we make a lobby that is not completely filled"):
//! the seed's grouping examples by hand, off by default, backfilled at once, and invariants over
//! many random queues (equal teams, the fewest players, the wait, the policy's own check).
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use mm_matcher::backfill::{Lobbies, tick_with_backfill};
use mm_matcher::cod::{CodConfig, CodRules, PartialLobbies};
use mm_matcher::queue::{LobbyModels, Mode, Policy, Queue, Search};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::common::{member, search};

const T0: i64 = 1_700_000_000_000;

fn party(id: u64, size: usize, pct: f64, start_ms: i64) -> Search {
    search(id, &vec![pct; size], start_ms)
}

fn queue(t: usize, parties: &[usize]) -> Queue {
    let mut q = Queue::new(Mode { team_size: t }).unwrap();
    for (k, &n) in parties.iter().enumerate() {
        q.push(party(k as u64, n, 0.5, T0 - 1_000 * k as i64))
            .unwrap();
    }
    q
}

fn cod(t: usize, partial: Option<(f64, usize)>) -> CodRules {
    let mut c = CodConfig::new(t);
    c.partial = partial.map(|(after_s, min_players)| PartialLobbies {
        after_s,
        min_players,
    });
    CodRules::new(c, LobbyModels::skill_only(3.0))
}

fn team_sizes(q: &Queue, ids: &[u64]) -> Vec<usize> {
    let mut s: Vec<usize> = ids
        .iter()
        .map(|&i| q.get(i).unwrap().members.len())
        .collect();
    s.sort_unstable();
    s
}

/// The seed's 6v6 example "{3}, {2}, {2}, {2}, {1} => [{3}, {2}] vs [{1}, {2}, {2}]": ten
/// players form a 5v5 partial lobby once the oldest has waited `after_s`, not before, and never
/// with partial lobbies off (the default).
#[test]
fn the_seed_s_example_forms_5v5_after_the_wait_only() {
    let parties = [3, 2, 2, 2, 1];
    let now_early = T0 + 20_000;
    let now = T0 + 60_000;
    for (partial, at, forms) in [
        (None, now, false),
        (Some((60.0, 8)), now_early, false),
        (Some((60.0, 8)), now, true),
        (Some((60.0, 12)), now, false),
    ] {
        let mut q = queue(6, &parties);
        let before = q.clone();
        let mut p = cod(6, partial);
        let lobbies = p.form_lobbies(at, &q);
        assert_eq!(lobbies.len(), usize::from(forms), "{partial:?} at {at}");
        if let Some(l) = lobbies.first() {
            assert_eq!(l.players, [5, 5]);
            let mut got = [
                team_sizes(&before, &l.teams[0]),
                team_sizes(&before, &l.teams[1]),
            ];
            got.sort();
            assert_eq!(got, [vec![1, 2, 2], vec![2, 3]]);
            assert_eq!(p.check(at, &before, l), Ok(()));
            // The same lobby breaks the rules of a policy with partial lobbies off.
            assert!(cod(6, None).check(at, &before, l).is_err());
            q.remove_placed(&lobbies);
            assert!(q.is_empty());
        }
    }
}

/// The seed's second example: "{3}, {2}, {2}, {2}, {1}, {1}" cannot make equal teams of 11
/// players; the partial lobby drops its last searches until its teams can be equal, and the
/// searches dropped stay queued.
#[test]
fn an_odd_lobby_drops_its_last_searches_to_make_equal_teams() {
    let mut q = queue(6, &[3, 2, 2, 2, 1, 1]);
    let mut p = cod(6, Some((60.0, 4)));
    let lobbies = p.form_lobbies(T0 + 60_000, &q);
    assert_eq!(lobbies.len(), 1);
    let [a, b] = lobbies[0].players;
    assert!(a == b && a < 6 && 2 * a >= 4, "{:?}", lobbies[0].players);
    assert_eq!(p.check(T0 + 60_000, &q, &lobbies[0]), Ok(()));
    q.remove_placed(&lobbies);
    let left: usize = q.searches().iter().map(|s| s.members.len()).sum();
    assert_eq!(left, 11 - 2 * a);
}

/// Through `tick_with_backfill`: the partial lobby's slots are offered at once, and the next
/// tick's newcomers fill it to 6v6.
#[test]
fn a_partial_lobby_is_backfilled_at_the_next_tick() {
    let mut q = queue(6, &[1; 8]);
    let mut p = cod(6, Some((60.0, 8)));
    let mut lobbies = Lobbies::new(Mode { team_size: 6 });
    let cfg = CodConfig::new(6);
    let (filled, formed) = tick_with_backfill(&mut p, &mut lobbies, &cfg, T0 + 60_000, &mut q);
    assert!(filled.is_empty());
    assert_eq!(formed.len(), 1);
    let id = formed[0].0;
    let l = lobbies.get(id).unwrap();
    assert_eq!((l.players(), l.open_since_ms), ([4, 4], Some(T0 + 60_000)));
    assert_eq!(lobbies.open_slots(), 4);
    for k in 0..4 {
        q.push(party(100 + k, 1, 0.5, T0 + 61_000)).unwrap();
    }
    let (filled, formed) = tick_with_backfill(&mut p, &mut lobbies, &cfg, T0 + 62_000, &mut q);
    assert_eq!((filled.len(), formed.len()), (4, 0));
    assert_eq!(lobbies.get(id).unwrap().players(), [6, 6]);
    assert_eq!(lobbies.open_slots(), 0);
}

/// Over random queues with partial lobbies on: every lobby has teams of the same size and at
/// least the fewest players, a short one's oldest search waited `after_s`, the policy's own
/// check accepts each, and no search is placed twice. The cases do form partial lobbies.
#[test]
fn random_queues_form_only_equal_partial_lobbies_after_the_wait() {
    let mut rng = ChaCha8Rng::seed_from_u64(53);
    let mut partial_seen = 0;
    for case in 0..300 {
        let t = rng.random_range(2..=6usize);
        let (after_s, min_players) = (rng.random_range(0.0..90.0), 2 * rng.random_range(1..=t));
        let mut q = Queue::new(Mode { team_size: t }).unwrap();
        for id in 0..rng.random_range(1..30u64) {
            let size = if rng.random::<f64>() < 0.6 {
                1
            } else {
                rng.random_range(1..=t)
            };
            let mut s = party(id, size, 0.5, T0 - rng.random_range(0..100_000));
            for m in &mut s.members {
                *m = member(rng.random_range(0.0..1.0));
            }
            s.platform = rng.random_range(0..2);
            s.crossplay = rng.random::<bool>();
            q.push(s).unwrap();
        }
        let before = q.clone();
        let mut p = cod(t, Some((after_s, min_players)));
        let lobbies = p.form_lobbies(T0, &q);
        let mut seen = HashSet::new();
        for l in &lobbies {
            let n: Vec<usize> = (0..2)
                .map(|k| team_sizes(&before, &l.teams[k]).iter().sum())
                .collect();
            assert_eq!(n[0], n[1], "case {case}: {l:?}");
            assert!(n[0] <= t && 2 * n[0] >= min_players, "case {case}: {l:?}");
            if n[0] < t {
                partial_seen += 1;
                let oldest = l
                    .search_ids()
                    .map(|i| before.get(i).unwrap().start_ms)
                    .min()
                    .unwrap();
                assert!((T0 - oldest) as f64 >= after_s * 1000.0, "case {case}");
            }
            assert_eq!(p.check(T0, &before, l), Ok(()), "case {case}: {l:?}");
            for id in l.search_ids() {
                assert!(seen.insert(id), "case {case}: search {id} twice");
            }
        }
    }
    assert!(partial_seen >= 50, "{partial_seen} partial lobbies");
}

/// The wait is inclusive: the seed's example forms its partial lobby when the oldest search
/// has waited exactly `after_s` (60 s), and not a millisecond before.
#[test]
fn a_partial_lobby_forms_at_exactly_its_wait() {
    let parties = [3, 2, 2, 2, 1];
    // The oldest search (the last pushed) started at T0 - 4 s.
    let at = T0 - 4_000 + 60_000;
    for (now, forms) in [(at - 1, false), (at, true)] {
        let q = queue(6, &parties);
        let lobbies = cod(6, Some((60.0, 8))).form_lobbies(now, &q);
        assert_eq!(lobbies.len(), usize::from(forms), "at {}", now - at);
    }
}
