//! Unit tests of the queue's shared parts.

use super::*;

#[test]
fn backoff_interpolates_and_inverts() {
    let b = Backoff::new(&[(0.0, 0.05), (10.0, 0.1), (30.0, 0.2)]);
    assert!((b.at(-5.0) - 0.05).abs() < 1e-12);
    assert!((b.at(5.0) - 0.075).abs() < 1e-12);
    assert!((b.at(20.0) - 0.15).abs() < 1e-12);
    assert!((b.at(99.0) - 0.2).abs() < 1e-12);
    assert_eq!(b.age_at_least(0.04), Some(0.0));
    assert!((b.age_at_least(0.15).expect("reached") - 20.0).abs() < 1e-9);
    assert_eq!(b.age_at_least(0.3), None);
    let t = Backoff::new(&[(0.0, 0.9), (60.0, 0.6)]);
    assert!((t.age_at_most(0.75).expect("falls") - 30.0).abs() < 1e-9);
    assert_eq!(t.age_at_most(0.5), None);
    assert!((t.progress(30.0) - 0.5).abs() < 1e-12);
}

#[test]
fn grouping_accepts_what_karmarkar_karp_refuses() {
    // The CoD paper's 6v6 examples.
    assert!(groupable(&[3, 2, 2, 1], 6, false));
    assert!(!groupable(&[4, 4, 3], 6, false));
    assert!(groupable(&[3, 2, 2, 2, 1], 6, false));
    // Full lobby of 12: {3,3} v {2,2,2}. Largest differencing alone pairs 3 against 3.
    assert!(crate::teams::balanceable(&[3, 3, 2, 2, 2], 6, 2, true).is_none());
    assert!(groupable(&[3, 3, 2, 2, 2], 6, true));
    assert!(!groupable(&[5, 5, 2], 6, true));
}

/// Against brute force over every team assignment, on every multiset of up to 7 parties of
/// 1 to 5 players, for teams of 3 to 8; Karmarkar–Karp's yes is always a yes here.
#[test]
fn grouping_is_exact() {
    fn all(prefix: &mut Vec<usize>, left: usize, out: &mut Vec<Vec<usize>>) {
        out.push(prefix.clone());
        if left == 0 {
            return;
        }
        let from = prefix.last().copied().unwrap_or(1);
        for s in from..=5 {
            prefix.push(s);
            all(prefix, left - 1, out);
            prefix.pop();
        }
    }
    let mut sets = Vec::new();
    all(&mut Vec::new(), 7, &mut sets);
    for t in 3..=8 {
        for sizes in &sets {
            let total: usize = sizes.iter().sum();
            for full in [false, true] {
                let brute = (0u32..1 << sizes.len()).any(|m| {
                    let a: usize = (0..sizes.len())
                        .filter(|&i| m >> i & 1 == 1)
                        .map(|i| sizes[i])
                        .sum();
                    let b = total - a;
                    a <= t && b <= t && (!full || a + b == 2 * t)
                });
                assert_eq!(groupable(sizes, t, full), brute, "{sizes:?} t={t} {full}");
                // (groupable asks Karmarkar–Karp only of a full lobby's exact size.)
                if (!full || total == 2 * t)
                    && crate::teams::balanceable(sizes, t, 2, full).is_some()
                {
                    assert!(brute, "{sizes:?}");
                }
            }
        }
    }
}

/// The index walk gives exactly the brute-force order (distance, then index) of the
/// untaken, platform-compatible searches, on realistic queues with searches being placed.
#[test]
fn nearest_walk_equals_brute_force() {
    let now = 1_700_000_000_000;
    for seed in 0..6u64 {
        let q = crate::sim_queue::realistic_queue(400, 6, now, 90.0, 0, seed);
        let dist = if seed % 2 == 0 {
            Distance::default()
        } else {
            // Heavier skill and input terms change which bound binds.
            Distance {
                skill_km: 20_000.0,
                input_km: 3_000.0,
            }
        };
        let mut st = TickState::new(&q, now, None, dist);
        let n = st.searches.len();
        let mut rng = seed * 7 + 1;
        for round in 0..8 {
            for a in (round..n).step_by(37) {
                let brute = {
                    let mut v: Vec<(f64, usize)> = (0..n)
                        .filter(|&j| {
                            j != a
                                && !st.taken[j]
                                && platforms_compatible(&st.searches[a], &st.searches[j])
                        })
                        .map(|j| (st.distance(a, j), j))
                        .collect();
                    v.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
                    v
                };
                let walk: Vec<(f64, usize)> = st.nearest_iter(a).collect();
                assert_eq!(walk, brute, "seed {seed}, round {round}, anchor {a}");
            }
            // Place a random tenth of the searches.
            let ids: Vec<usize> = (0..n / 10)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    (rng % n as u64) as usize
                })
                .collect();
            st.take(&ids);
        }
    }
}

/// A walk from a point that is no search of the index (a lobby's centre, for the threshold
/// policy's backfill) gives exactly the brute-force order (distance, then index) of the
/// platform-compatible searches by the CoD distance from a search standing there.
#[test]
fn walk_from_a_point_equals_brute_force() {
    let now = 1_700_000_000_000;
    let dist = Distance::default();
    for seed in 0..4u64 {
        let q = crate::sim_queue::realistic_queue(300, 6, now, 90.0, 0, seed);
        let s = q.searches();
        let views: Vec<View> = s.iter().map(|x| View::of(x, now, None)).collect();
        let points = views
            .iter()
            .zip(s)
            .map(|(v, x)| index_point(v.xyz, v.skill, x, &dist))
            .collect();
        let ix = crate::knn::KdIndex::new(points, dist.input_km);
        for k in (0..s.len()).step_by(29) {
            // Not in the queue: another search's place, device and platform, a skill of its own.
            let mut probe = s[k].clone();
            probe.id = u64::MAX;
            for m in &mut probe.members {
                m.percentile = (m.percentile + 0.37) % 1.0;
            }
            let pv = View::of(&probe, now, None);
            let mut brute: Vec<(f64, usize)> = (0..s.len())
                .filter(|&j| platforms_compatible(&probe, &s[j]))
                .map(|j| (dist.between(&pv, &probe, &views[j], &s[j]), j))
                .collect();
            brute.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
            let walk: Vec<(f64, usize)> = ix
                .walk_from(index_point(pv.xyz, pv.skill, &probe, &dist))
                .collect();
            assert_eq!(walk, brute, "seed {seed}, probe {k}");
        }
    }
}

#[test]
fn fill_exact_finds_a_fill_whenever_one_exists() {
    // Brute force over all subsets of small candidate lists.
    let mut rng = 12345u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..2000 {
        let t = 1 + (next() % 6) as usize;
        let n = (next() % 9) as usize;
        let sizes: Vec<usize> = (0..n).map(|_| 1 + (next() % t as u64) as usize).collect();
        let a0 = 1 + (next() % t as u64) as usize;
        let got = fill_exact(&(0..n).collect::<Vec<_>>(), |i| sizes[i], t, (a0, 0));
        let mut exists = false;
        for m in 0u32..1 << n {
            let mut s = vec![a0];
            s.extend((0..n).filter(|i| m >> i & 1 == 1).map(|i| sizes[i]));
            if s.iter().sum::<usize>() == 2 * t && groupable(&s, t, true) {
                exists = true;
                break;
            }
        }
        assert_eq!(got.is_some(), exists, "t={t} a0={a0} sizes={sizes:?}");
        if let Some(p) = got {
            let mut s = vec![a0];
            s.extend(p.iter().map(|&i| sizes[i]));
            assert!(groupable(&s, t, true));
        }
    }
}

/// A service builds members from the artifact: the same churn by outcome and skill as the
/// 1v1 scoring path (`from_artifact`) gives for a solo player, and a new player at raw
/// skill 0; the lobby models are the artifact's.
#[test]
fn members_from_an_artifact_agree_with_the_pool_scoring() {
    let dir = std::env::temp_dir().join(format!("mm-queue-art-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = mm_artifact::Store::new(&dir);
    let (m, files) = mm_artifact::synthetic::artifact(100, 9);
    store.publish("v1", m, &files, true, None).expect("publish");
    let art = store.open_latest().expect("load");
    let now = art.manifest.snapshot_as_of_ms + 600_000;
    let ids: Vec<String> = (0..10)
        .map(|i| art.snapshot.id(i * 7).to_string())
        .collect();
    let pool = crate::from_artifact::ArtifactPool::new(&art, &ids, now).expect("pool");
    for (k, id) in ids.iter().enumerate() {
        let state = art.snapshot.get(id).expect("held");
        let m = Member::from_state(&art, &state, now, false);
        assert_eq!(m.churn, pool.churn.by_outcome[k]);
        assert_eq!(m.raw_skill, pool.skills[k]);
        assert!(m.churn[0] <= 1.0 && m.churn[2] >= 0.0);
    }
    let fresh = Member::lookup(&art, "newcomer", now, true);
    assert_eq!(fresh.raw_skill, 0.0);
    assert_eq!(fresh.games, 0);
    let models = LobbyModels::from_artifact(&art).expect("a win model");
    assert_eq!(Some(models.win), art.team_win);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn great_circle_matches_the_haversine_formula() {
    // London to New York, about 5,570 km.
    let a = unit_xyz(51.5074, -0.1278);
    let b = unit_xyz(40.7128, -74.0060);
    let d = great_circle_km(&a, &b);
    assert!((d - 5570.0).abs() < 10.0, "{d}");
    assert!(great_circle_km(&a, &a).abs() < 1e-9);
}
