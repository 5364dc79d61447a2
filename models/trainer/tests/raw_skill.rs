//! The raw skill's properties from the CoD paper ("What is Skill?"), checked on synthetic
//! lobbies whose latent skill is known: bounded, predictive, adapts, resilient.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use mm_trainer::skill::raw::{RawSkill, RawSkillParams};
use mm_trainer::stats::spearman;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

fn model() -> RawSkill {
    RawSkill::new(RawSkillParams::default().check().unwrap())
}

/// Plays `rounds` rounds: every round, all `players` are shuffled into lobbies of 12 and each
/// player's metric is their latent skill plus noise (sd 1).
fn play(m: &mut RawSkill, latent: &[f64], players: &[usize], rounds: usize, rng: &mut ChaCha8Rng) {
    let noise = Normal::new(0.0, 1.0).unwrap();
    let mut order = players.to_vec();
    for _ in 0..rounds {
        order.shuffle(rng);
        for lobby in order.chunks(12) {
            let l: Vec<(usize, f64)> = lobby
                .iter()
                .map(|&i| (i, latent[i] + noise.sample(rng)))
                .collect();
            m.update(&l);
        }
    }
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    (
        m,
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt(),
    )
}

proptest! {
    /// Bounded: whatever the lobbies and metrics, skills stay in [-1, 1].
    #[test]
    fn skills_stay_in_bounds(lobbies in prop::collection::vec(
        prop::collection::vec((0usize..30, -1e6f64..1e6), 2..13), 1..300)) {
        let mut m = model();
        for l in &lobbies {
            let mut seen = std::collections::BTreeSet::new();
            let l: Vec<(usize, f64)> = l.iter().copied().filter(|(i, _)| seen.insert(*i)).collect();
            m.update(&l);
        }
        prop_assert!(m.players().iter().all(|p| (-1.0..=1.0).contains(&p.skill)));
    }
}

/// Predictive: after 50 matches per player, the fitted skill ranks players as their latent skill
/// does (Spearman > 0.9 with metric noise equal to the skill spread).
#[test]
fn predictive_after_fifty_matches() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let latent: Vec<f64> = (0..600)
        .map(|_| Normal::new(0.0, 1.0).unwrap().sample(&mut rng))
        .collect();
    let mut m = model();
    let all: Vec<usize> = (0..600).collect();
    play(&mut m, &latent, &all, 50, &mut rng);
    let fitted: Vec<f64> = (0..600).map(|i| m.skill(i)).collect();
    let rho = spearman(&fitted, &latent);
    let (_, sd) = mean_sd(&fitted);
    eprintln!("Spearman after 50 matches: {rho:.3}; fitted sd {sd:.3}");
    assert!(rho > 0.9, "Spearman {rho}");
    // The population sits well inside [-1, 1] on the CoD scale.
    assert!((0.05..0.3).contains(&sd), "sd {sd}");
}

/// Adapts: an established player whose latent skill jumps by two standard deviations is
/// tracked: within 3 half-lives (36 matches) their fitted skill has covered at least half the
/// distance to the level of players who always had that latent skill.
#[test]
fn adapts_to_a_jump_within_three_half_lives() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let mut latent: Vec<f64> = (0..600)
        .map(|_| Normal::new(0.0, 1.0).unwrap().sample(&mut rng))
        .collect();
    latent[0] = 0.0;
    let mut m = model();
    let all: Vec<usize> = (0..600).collect();
    play(&mut m, &latent, &all, 60, &mut rng);
    let before = m.skill(0);
    // The level of players whose latent skill is near 2.
    let near: Vec<f64> = (1..600)
        .filter(|&i| (latent[i] - 2.0).abs() < 0.25)
        .map(|i| m.skill(i))
        .collect();
    let target = mean_sd(&near).0;
    latent[0] = 2.0;
    let mut matches = 0;
    while m.skill(0) < before + 0.5 * (target - before) && matches < 200 {
        play(&mut m, &latent, &all, 1, &mut rng);
        matches += 1;
    }
    eprintln!("halfway to the new level after {matches} matches (half-life 12)");
    assert!(matches <= 36, "took {matches} matches");
}

/// Resilient: 600 established players (40 matches each); then 300 new players, weaker on average
/// by one standard deviation, join and everyone plays 20 more rounds. The established players'
/// mean moves by less than 0.01 (about 5% of the population's standard deviation) and their
/// spread by less than 10%, against a control run without the influx.
#[test]
fn resilient_to_an_influx_of_new_players() {
    let run = |influx: bool| {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let normal = Normal::new(0.0, 1.0).unwrap();
        let mut latent: Vec<f64> = (0..600).map(|_| normal.sample(&mut rng)).collect();
        let mut m = model();
        let established: Vec<usize> = (0..600).collect();
        play(&mut m, &latent, &established, 40, &mut rng);
        let mut all = established.clone();
        if influx {
            latent.extend((0..300).map(|_| normal.sample(&mut rng) - 1.0));
            all.extend(600..900);
        }
        let mut rng2 = ChaCha8Rng::seed_from_u64(rng.random());
        play(&mut m, &latent, &all, 20, &mut rng2);
        let fitted: Vec<f64> = established.iter().map(|&i| m.skill(i)).collect();
        mean_sd(&fitted)
    };
    let (m0, s0) = run(false);
    let (m1, s1) = run(true);
    eprintln!("established players: mean {m0:.4} -> {m1:.4}, sd {s0:.4} -> {s1:.4}");
    assert!((m1 - m0).abs() < 0.01, "mean shift {}", m1 - m0);
    assert!((s1 / s0 - 1.0).abs() < 0.10, "spread ratio {}", s1 / s0);
}

fn with_roles(roles: mm_trainer::skill::raw::RoleComparison) -> RawSkill {
    with_roles_margin(roles, 0.0)
}

fn with_roles_margin(roles: mm_trainer::skill::raw::RoleComparison, margin: f64) -> RawSkill {
    RawSkill::new(
        RawSkillParams {
            roles,
            margin,
            ..RawSkillParams::default()
        }
        .check()
        .unwrap(),
    )
}

/// Hand case of `WithinRole`: four new players, roles 1, 2, 1, 2 and metrics 2, 5, 1, 0. Only
/// 0-2 and 1-3 are compared, and each is won by the first: +1/2 and -1/2 surprise, times the
/// brand-new player's rate 4 (1 - 2^(-1/12)) / 6 * (1 + 3). Under `All`, player 0 loses to 1 and
/// beats 2 and 3: a mean surprise of (-1/2 + 1/2 + 1/2) / 3 = 1/6.
#[test]
fn within_role_compares_only_players_of_one_role_hand_computed() {
    use mm_trainer::skill::raw::RoleComparison;
    let rate = 4.0 * (1.0 - 0.5f64.powf(1.0 / 12.0)) / 6.0 * 4.0;
    let lobby = [(0, 2.0), (1, 5.0), (2, 1.0), (3, 0.0)];
    let mut m = with_roles(RoleComparison::WithinRole);
    m.update_with_roles(&lobby, &[], &[1, 2, 1, 2]);
    let want = [0.5 * rate, 0.5 * rate, -0.5 * rate, -0.5 * rate];
    for (k, w) in want.iter().enumerate() {
        assert!(
            (m.skill(k) - w).abs() < 1e-12,
            "player {k}: {} vs {w}",
            m.skill(k)
        );
    }
    let mut all = with_roles(RoleComparison::All);
    all.update_with_roles(&lobby, &[], &[1, 2, 1, 2]);
    assert!((all.skill(0) - rate / 6.0).abs() < 1e-12);
}

/// Hand case of `Normalised`: once each role has 30 rows, role 1's metrics 1 and 3 (mean 2) and
/// role 2's 10 and 30 (mean 20, ten times the spread) standardise alike, so a 3 of role 1 and a
/// 30 of role 2 tie and two equal players do not move; unnormalised, the 30 wins. (A margin makes
/// the comparison continuous, so rounding in the running statistics cannot turn the tie into a
/// win.)
#[test]
fn normalised_metrics_tie_across_roles_at_equal_standard_scores() {
    use mm_trainer::skill::raw::RoleComparison;
    let mut m = with_roles_margin(RoleComparison::Normalised, 0.5);
    // Warm-up lobbies of players 10.. that the checked players never meet.
    for k in 0..15 {
        let p = 10 + 4 * k;
        m.update_with_roles(
            &[(p, 1.0), (p + 1, 3.0), (p + 2, 10.0), (p + 3, 30.0)],
            &[],
            &[1, 1, 2, 2],
        );
    }
    let mut v = Vec::new();
    m.compared_values(&[(0, 3.0), (1, 30.0)], &[1, 2], &mut v);
    assert!((v[0] - v[1]).abs() < 1e-12, "{v:?}");
    // sd of 15 ones and 15 threes (n - 1 in the denominator): sqrt(30 / 29).
    assert!((v[0] - 1.0 / (30.0f64 / 29.0).sqrt()).abs() < 1e-12);
    m.update_with_roles(&[(0, 3.0), (1, 30.0)], &[], &[1, 2]);
    assert!(m.skill(0).abs() < 1e-12 && m.skill(1).abs() < 1e-12);
    let mut all = with_roles_margin(RoleComparison::All, 0.5);
    all.update_with_roles(&[(0, 3.0), (1, 30.0)], &[], &[1, 2]);
    assert!(all.skill(1) > 0.0);
}

proptest! {
    /// `WithinRole` with every player in one role is the paper's rule to the bit, and so is
    /// any role comparison on a lobby without roles.
    #[test]
    fn one_role_is_the_papers_rule(lobbies in prop::collection::vec(
        prop::collection::vec((0usize..30, -10f64..10.0), 2..13), 1..100), role in 0u16..5) {
        use mm_trainer::skill::raw::RoleComparison;
        let mut all = with_roles(RoleComparison::All);
        let mut within = with_roles(RoleComparison::WithinRole);
        let mut within_none = with_roles(RoleComparison::WithinRole);
        for l in &lobbies {
            let mut seen = std::collections::BTreeSet::new();
            let l: Vec<(usize, f64)> = l.iter().copied().filter(|(i, _)| seen.insert(*i)).collect();
            all.update(&l);
            within.update_with_roles(&l, &[], &vec![role; l.len()]);
            within_none.update_with_roles(&l, &[], &[]);
        }
        prop_assert_eq!(all.players(), within.players());
        prop_assert_eq!(all.players(), within_none.players());
    }
}

/// Roles: 500 players, each with a fixed role of five, meet in lobbies of ten (two of each
/// role, as in LoL). The metric is latent skill plus a role offset of 0, -1, -2, -3 or -4
/// latent standard deviations (a support's kills per death are low whatever their skill) plus
/// noise. Comparing everyone with everyone ranks roles: Spearman with the latent skill stays
/// low. Comparing within a role, or on the metric standardised per role, ranks skill.
#[test]
fn role_aware_comparisons_rank_skill_not_roles() {
    use mm_trainer::skill::raw::RoleComparison;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let normal = Normal::new(0.0, 1.0).unwrap();
    let n = 500;
    let latent: Vec<f64> = (0..n).map(|_| normal.sample(&mut rng)).collect();
    let role: Vec<u16> = (0..n).map(|i| (i % 5) as u16 + 1).collect();
    let mut models: Vec<RawSkill> = RoleComparison::ALL.iter().map(|&r| with_roles(r)).collect();
    for _ in 0..60 {
        // Shuffle each role's players, then deal two of each role into every lobby.
        let mut by_role: Vec<Vec<usize>> = (1..=5)
            .map(|r| (0..n).filter(|&i| role[i] == r).collect())
            .collect();
        for v in &mut by_role {
            v.shuffle(&mut rng);
        }
        for l in 0..n / 10 {
            let members: Vec<usize> = by_role
                .iter()
                .flat_map(|v| [v[2 * l], v[2 * l + 1]])
                .collect();
            let lobby: Vec<(usize, f64)> = members
                .iter()
                .map(|&i| {
                    (
                        i,
                        latent[i] - f64::from(role[i] - 1) + normal.sample(&mut rng),
                    )
                })
                .collect();
            let roles: Vec<u16> = members.iter().map(|&i| role[i]).collect();
            for m in &mut models {
                m.update_with_roles(&lobby, &[], &roles);
            }
        }
    }
    let rho: Vec<f64> = models
        .iter()
        .map(|m| spearman(&(0..n).map(|i| m.skill(i)).collect::<Vec<_>>(), &latent))
        .collect();
    eprintln!(
        "Spearman with latent skill: all {:.3}, within role {:.3}, normalised {:.3}",
        rho[0], rho[1], rho[2]
    );
    assert!(rho[0] < 0.6, "{rho:?}");
    assert!(rho[1] > 0.85 && rho[2] > 0.85, "{rho:?}");
}
