//! The win skill's update after a match (`mm-artifact`'s `skill::win`, what a service and a
//! continued retrain apply between full fits) against the full fit it stands in for: fitted on
//! the first 20 days of a drifting 6v6 world, updated match by match over the next 10, and
//! compared with a full refit on all 30 days, for the players of those 10 days. The snapshot's
//! strengths, kept as they are (0 for the players who joined since), are the baseline it must
//! beat by far.

use mm_artifact::Outcome;
use mm_artifact::skill::win::WinSlot;
use mm_artifact::skill::{Metric, WinEstimator, WinSkillUpdate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::perf::{PerfMatches, PerfSkillFit, fit_perf_skill};
use super::win::{WinMatches, WinSkillFit, fit_win_skill};

const DAY: i64 = 86_400_000;
const TEAM: usize = 6;

/// One simulated match: its start, team A's and team B's players, each row's metric and
/// whether A won.
struct Game {
    start: i64,
    players: Vec<u32>,
    y: Vec<f64>,
    a_won: bool,
}

/// `days` days of `per_day` 6v6 matches; 300 players from the start and 100 more from day 20;
/// true strengths drift by a random walk (sd 0.03 a day). A row's metric is 3 plus the player's
/// strength minus the opponents' mean plus noise (sd 0.5); team A wins with the logistic of the
/// strength sums' difference.
fn world(days: i64, per_day: i64, seed: u64) -> (Vec<Game>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut truth: Vec<f64> = (0..400).map(|_| rng.random_range(-1.0..1.0)).collect();
    let mut games = Vec::new();
    for day in 0..days {
        for t in &mut truth {
            *t += 0.03 * (rng.random::<f64>() - 0.5) * 12f64.sqrt();
        }
        let active = if day < 20 { 300 } else { 400 };
        for k in 0..per_day {
            let mut pick: Vec<u32> = Vec::new();
            while pick.len() < 2 * TEAM {
                let p = rng.random_range(0..active);
                if !pick.contains(&p) {
                    pick.push(p);
                }
            }
            let mean = |s: &[u32]| s.iter().map(|&p| truth[p as usize]).sum::<f64>() / 6.0;
            let (ma, mb) = (mean(&pick[..TEAM]), mean(&pick[TEAM..]));
            let y: Vec<f64> = pick
                .iter()
                .enumerate()
                .map(|(r, &p)| {
                    let opp = if r < TEAM { mb } else { ma };
                    3.0 + truth[p as usize] - opp + 0.5 * (rng.random::<f64>() - 0.5) * 12f64.sqrt()
                })
                .collect();
            let z = 6.0 * (ma - mb);
            let a_won = rng.random::<f64>() < 1.0 / (1.0 + (-z).exp());
            games.push(Game {
                start: day * DAY + k * (DAY / per_day),
                players: pick,
                y,
                a_won,
            });
        }
    }
    (games, truth)
}

/// The full fit of `u`'s estimator on `games`, each weighted by its age at `end`: strengths and
/// masses as of `end`, and the centre.
fn full_fit(u: &WinSkillUpdate, games: &[&Game], end: i64) -> (Vec<f64>, Vec<f64>, f64) {
    match u.estimator {
        WinEstimator::Performance => {
            let mut d = PerfMatches::new();
            for g in games {
                let (a, b) = g.players.split_at(TEAM);
                let (ya, yb) = g.y.split_at(TEAM);
                d.push(a, ya, b, yb, u.decay(g.start, end));
            }
            let cfg = PerfSkillFit {
                lambda: u.penalty,
                ..PerfSkillFit::default()
            };
            let fit = fit_perf_skill(&d, 400, &cfg).expect("fit");
            (fit.theta, d.diagonal(400), d.centre())
        }
        WinEstimator::Outcomes => {
            let mut d = WinMatches::new();
            for g in games {
                let (a, b) = g.players.split_at(TEAM);
                d.push(a, b, g.a_won);
            }
            let cfg = WinSkillFit {
                alpha: u.penalty,
                ..WinSkillFit::default()
            };
            let fit = fit_win_skill(&d, 400, &cfg).expect("fit");
            let mass = d.curvature(&fit.theta, 400);
            (fit.theta, mass, 0.0)
        }
    }
}

/// Root mean square difference of `a` and `b` over `players`, each centred on its mean there
/// (strengths are identified up to a constant).
fn rms(a: &[f64], b: &[f64], players: &[usize]) -> f64 {
    let n = players.len() as f64;
    let ma = players.iter().map(|&p| a[p]).sum::<f64>() / n;
    let mb = players.iter().map(|&p| b[p]).sum::<f64>() / n;
    (players
        .iter()
        .map(|&p| ((a[p] - ma) - (b[p] - mb)).powi(2))
        .sum::<f64>()
        / n)
        .sqrt()
}

/// (updated against the refit, snapshot against the refit, updated against the truth, snapshot
/// against the truth) over the players of days 20 to 30.
fn follow(u: WinSkillUpdate) -> [f64; 4] {
    let (games, truth) = world(30, 150, 11);
    let cut = 20 * DAY;
    let early: Vec<&Game> = games.iter().filter(|g| g.start < cut).collect();
    let last_early = early.last().map_or(0, |g| g.start);
    let (theta, mass, centre) = full_fit(&u, &early, last_early);
    let u = WinSkillUpdate { centre, ..u };
    // Each player's state as the snapshot holds it: mass as of their last match.
    let mut last = vec![i64::MIN; 400];
    for g in &early {
        for &p in &g.players {
            last[p as usize] = g.start;
        }
    }
    let mut state: Vec<(f64, f64, i64)> = (0..400)
        .map(|p| {
            let m = if mass[p] > 0.0 {
                u.mass_moved(mass[p], last_early, last[p])
            } else {
                0.0
            };
            (theta[p], m, last[p])
        })
        .collect();
    let mut seen = vec![false; 400];
    for g in games.iter().filter(|g| g.start >= cut) {
        let slots: Vec<WinSlot> = g
            .players
            .iter()
            .enumerate()
            .map(|(r, &p)| {
                let s = state[p as usize];
                let won = (r < TEAM) == g.a_won;
                WinSlot {
                    skill: s.0,
                    mass: s.1,
                    as_of_ms: s.2,
                    team: i32::from(r >= TEAM),
                    metric: g.y[r],
                    outcome: if won { Outcome::Win } else { Outcome::Loss },
                }
            })
            .collect();
        for (&p, (t, m)) in g.players.iter().zip(u.after(Metric::Perf, g.start, &slots)) {
            state[p as usize] = (t, m, state[p as usize].2.max(g.start));
            seen[p as usize] = true;
        }
    }
    let all: Vec<&Game> = games.iter().collect();
    let end = games.last().map_or(0, |g| g.start);
    let (refit, _, _) = full_fit(&u, &all, end);
    let updated: Vec<f64> = state.iter().map(|s| s.0).collect();
    let players: Vec<usize> = (0..400).filter(|&p| seen[p]).collect();
    [
        rms(&updated, &refit, &players),
        rms(&theta, &refit, &players),
        rms(&updated, &truth, &players),
        rms(&theta, &truth, &players),
    ]
}

#[test]
fn the_performance_update_follows_the_refit() {
    let [up, snap, up_truth, snap_truth] = follow(WinSkillUpdate {
        estimator: WinEstimator::Performance,
        penalty: 0.3,
        half_life_days: Some(20.0),
        centre: 0.0,
    });
    println!(
        "performance: rms to the refit {up:.4} (snapshot {snap:.4}), to the truth {up_truth:.4} (snapshot {snap_truth:.4})"
    );
    assert!(up < 0.05 * snap, "{up} against {snap}");
    assert!(up_truth < snap_truth, "{up_truth} against {snap_truth}");
}

#[test]
fn the_outcomes_update_follows_the_refit() {
    let [up, snap, up_truth, snap_truth] = follow(WinSkillUpdate {
        estimator: WinEstimator::Outcomes,
        penalty: 0.1,
        half_life_days: None,
        centre: 0.0,
    });
    println!(
        "outcomes: rms to the refit {up:.4} (snapshot {snap:.4}), to the truth {up_truth:.4} (snapshot {snap_truth:.4})"
    );
    assert!(up < 0.5 * snap, "{up} against {snap}");
    assert!(up_truth < snap_truth, "{up_truth} against {snap_truth}");
}
