//! Seeded synthetic queues for tests, benchmarks and demonstrations: a realistic mix of party
//! sizes, players clustered around population centres, pings to eight data centres for most
//! searches, mixed input devices and platforms, and per-player churn by outcome.
//!
//! Not a model of any real game; the shapes are plausible, the numbers are assumptions: party
//! sizes 1..6 with weights 60/20/10/6/2/2 % (cut to the team size), 70 % controllers, 4
//! platforms of which 90 % accept cross-play, 80 % of searches with pings (`8 ms + km / 80` plus
//! noise), raw skill `N(party mean, 0.1)` around a party mean `N(0, 0.25)`, percentile the
//! logistic approximation of its normal CDF, games log-normal around 100, churn after a win
//! below churn after a draw below churn after a loss.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, LogNormal, Normal};

use crate::queue::{
    EARTH_RADIUS_KM, Input, Member, Mode, Queue, Search, great_circle_km, unit_xyz,
};

/// Population centres: (lat, lon, share).
const CENTRES: [(f64, f64, f64); 7] = [
    (40.0, -75.0, 0.25),
    (37.0, -120.0, 0.15),
    (50.0, 5.0, 0.25),
    (52.0, 25.0, 0.10),
    (35.0, 135.0, 0.10),
    (-23.0, -46.0, 0.08),
    (-33.0, 151.0, 0.07),
];

/// Data centres (lat, lon).
const DATA_CENTRES: [(f64, f64); 8] = [
    (39.0, -77.5),
    (45.6, -121.2),
    (41.9, -87.6),
    (50.1, 8.7),
    (53.3, -6.3),
    (35.7, 139.7),
    (-23.5, -46.6),
    (-33.9, 151.2),
];

const PARTY_WEIGHTS: [f64; 6] = [0.60, 0.20, 0.10, 0.06, 0.02, 0.02];

fn pick(rng: &mut ChaCha8Rng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut x = rng.random::<f64>() * total;
    for (i, &w) in weights.iter().enumerate() {
        if x < w {
            return i;
        }
        x -= w;
    }
    weights.len() - 1
}

/// A queue of `n` searches for `team_size`-a-side lobbies at `now_ms`, their waits uniform in
/// `[0, max_age_s)`; ids start at `first_id`.
///
/// # Panics
/// When `team_size` is not a valid mode (0 or above 12).
#[must_use]
pub fn realistic_queue(
    n: usize,
    team_size: usize,
    now_ms: i64,
    max_age_s: f64,
    first_id: u64,
    seed: u64,
) -> Queue {
    let mut q = Queue::new(Mode { team_size }).expect("a valid team size");
    for s in realistic_searches(n, team_size, now_ms, max_age_s, first_id, seed) {
        q.push(s).expect("generated searches are valid");
    }
    q
}

/// The searches of [`realistic_queue`], for a caller that adds them over time.
#[must_use]
pub fn realistic_searches(
    n: usize,
    team_size: usize,
    now_ms: i64,
    max_age_s: f64,
    first_id: u64,
    seed: u64,
) -> Vec<Search> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let jitter = Normal::<f64>::new(0.0, 4.0).expect("sd > 0");
    let party_skill = Normal::<f64>::new(0.0, 0.25).expect("sd > 0");
    let member_skill = Normal::<f64>::new(0.0, 0.1).expect("sd > 0");
    let games = LogNormal::new(100f64.ln(), 1.2).expect("sd > 0");
    let ping_noise = Normal::<f64>::new(0.0, 5.0).expect("sd > 0");
    let weights: Vec<f64> = PARTY_WEIGHTS[..team_size.clamp(1, 6)].to_vec();
    let centre_w: Vec<f64> = CENTRES.iter().map(|c| c.2).collect();
    let dcs: Vec<[f64; 3]> = DATA_CENTRES.iter().map(|d| unit_xyz(d.0, d.1)).collect();
    (0..n)
        .map(|k| {
            let size = 1 + pick(&mut rng, &weights);
            let c = CENTRES[pick(&mut rng, &centre_w)];
            let lat = (c.0 + jitter.sample(&mut rng)).clamp(-89.0, 89.0);
            let lon = (c.1 + jitter.sample(&mut rng) + 540.0).rem_euclid(360.0) - 180.0;
            let mean = party_skill.sample(&mut rng);
            let members = (0..size)
                .map(|_| {
                    let raw: f64 = (mean + member_skill.sample(&mut rng)).clamp(-1.0, 1.0);
                    let base: f64 = rng.random_range(0.03..0.3);
                    let win = base * rng.random_range(0.6..1.0);
                    let loss = (base * rng.random_range(1.2..2.0)).min(0.95);
                    Member {
                        raw_skill: raw,
                        outcome_skill: raw,
                        percentile: 1.0 / (1.0 + (-1.702 * raw / 0.25).exp()),
                        games: games.sample(&mut rng).round().max(0.0) as u64,
                        churn: [win, (win + loss) / 2.0, loss],
                        // A blowout loss about 1.5 times the log-odds' worth of a close one
                        // (the main job's fit: +0.49 on the log-odds), without new draws.
                        churn_by_loss: Some([0.97 * loss, (1.4 * loss).min(0.97)]),
                    }
                })
                .collect();
            let xyz = unit_xyz(lat, lon);
            let pings = if rng.random::<f64>() < 0.8 {
                dcs.iter()
                    .enumerate()
                    .filter_map(|(d, p)| {
                        let km = great_circle_km(&xyz, p);
                        let ms = 8.0 + km / 80.0 + ping_noise.sample(&mut rng).abs();
                        (km < EARTH_RADIUS_KM * 2.0 && ms < 300.0).then_some((d as u16, ms as f32))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Search {
                id: first_id + k as u64,
                members,
                start_ms: now_ms - (rng.random::<f64>() * max_age_s * 1000.0) as i64,
                lat,
                lon,
                input: if rng.random::<f64>() < 0.7 {
                    Input::Controller
                } else {
                    Input::KeyboardMouse
                },
                platform: rng.random_range(0..4),
                crossplay: rng.random::<f64>() < 0.9,
                pings,
            }
        })
        .collect()
}

/// Up to `n` lobbies in play, formed by the CoD rules from a queue of 10,000 searches that
/// started ten minutes before `now_ms` (ids from 2^40, apart from [`realistic_queue`]'s), each
/// short of one player (a member of its first party left) and offered for backfill 30 s before
/// `now_ms`: the open lobbies of the backfill benchmark and demo.
///
/// # Panics
/// When `team_size` is not a valid mode (0 or above 12).
#[must_use]
pub fn open_lobbies(
    n: usize,
    team_size: usize,
    now_ms: i64,
    seed: u64,
) -> crate::backfill::Lobbies {
    use crate::backfill::{Lobbies, tick_with_backfill};
    use crate::cod::{CodConfig, CodRules};
    use crate::queue::LobbyModels;

    let then = now_ms - 600_000;
    let mut lobbies = Lobbies::new(Mode { team_size });
    let mut q = realistic_queue(10_000, team_size, then, 90.0, 1 << 40, seed);
    let cod = CodConfig::new(team_size);
    let mut former = CodRules::new(cod.clone(), LobbyModels::skill_only(4.0));
    let (_, formed) = tick_with_backfill(&mut former, &mut lobbies, &cod, then, &mut q);
    for (k, (id, lobby)) in formed.iter().enumerate() {
        if k < n {
            lobbies
                .leave(*id, lobby.teams[0][0], 0)
                .expect("a member of a recorded lobby");
            lobbies
                .open_backfill(*id, now_ms - 30_000)
                .expect("recorded");
        } else {
            lobbies.close(*id).expect("recorded");
        }
    }
    lobbies
}

/// The lobby models the benchmarks and the demo run: raw skill's win model (4 per unit of
/// raw-skill sum) with a blowout model fitted on the main job's 6v6 world (artifact format 6;
/// the world as it was before the simulator's players quit by the score gap), so team EOMM
/// weighs blowouts as it does on a real artifact. Fixed, so the benchmarks stay comparable.
#[must_use]
pub fn bench_models() -> crate::queue::LobbyModels {
    let mut models = crate::queue::LobbyModels::skill_only(4.0);
    models.win.blowout = Some(mm_artifact::team::BlowoutModel {
        margin: 30.0,
        intercept: -2.78,
        coef: -0.89,
        samples: 3427,
        blowouts: 424,
    });
    models
}

/// The three team-queue policies with their defaults for `team_size` and `models` (CoD rules,
/// quality threshold, team EOMM), in that order: what the benchmarks and the demo run side by side.
#[must_use]
pub fn team_policies(
    team_size: usize,
    models: crate::queue::LobbyModels,
) -> Vec<Box<dyn crate::queue::Policy>> {
    use crate::cod::{CodConfig, CodRules};
    use crate::eomm_teams::{EommTeams, EommTeamsConfig};
    use crate::threshold::{ThresholdConfig, ThresholdPolicy};
    vec![
        Box::new(CodRules::new(CodConfig::new(team_size), models)),
        Box::new(ThresholdPolicy::new(
            ThresholdConfig::new(team_size),
            models,
        )),
        Box::new(EommTeams::new(
            EommTeamsConfig::for_models(team_size, &models),
            models,
        )),
    ]
}
