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
