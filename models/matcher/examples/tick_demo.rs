//! Runs each queue policy on a synthetic 6v6 queue and prints lobbies formed, tick time and
//! mean quality, then the same tick with 500 lobbies open for backfill:
//! `cargo run --release -p mm-matcher --example tick_demo -- [searches] [seed] [cod|threshold|eomm|all] [reps]`.
//! With `reps` above 1, the two ticks alternate `reps` times and the medians and their ratio
//! are printed (alternating keeps a machine's drift out of the ratio).

use std::time::Instant;

use mm_matcher::backfill::tick_with_backfill;
use mm_matcher::cod::CodConfig;
use mm_matcher::sim_queue::{open_lobbies, realistic_queue, team_policies};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|x| x.parse().ok()).unwrap_or(10_000);
    let seed: u64 = args.get(2).and_then(|x| x.parse().ok()).unwrap_or(7);
    let only = args.get(3).cloned().filter(|o| o != "all");
    let reps: usize = args.get(4).and_then(|x| x.parse().ok()).unwrap_or(1);
    let now = 1_700_000_000_000;
    let models = mm_matcher::sim_queue::bench_models();
    let mut policies = team_policies(6, models);
    for p in &mut policies {
        if only.as_ref().is_some_and(|o| o != p.name()) {
            continue;
        }
        let mut q = realistic_queue(n, 6, now, 90.0, 0, seed);
        let players = q.players();
        let t = Instant::now();
        let lobbies = p.tick(now, &mut q);
        let dt = t.elapsed();
        let k = lobbies.len().max(1) as f64;
        let mean =
            |f: &dyn Fn(&mm_matcher::queue::Lobby) -> f64| lobbies.iter().map(f).sum::<f64>() / k;
        println!(
            "{:<10} {:>6} searches ({players} players): {:>5} lobbies ({} rescued) in {:>8.1} ms; \
             mean quality {:.3}, balance {:.3}, |P(win)-0.5| {:.3}, churn/player {:.4}, left {}",
            p.name(),
            n,
            lobbies.len(),
            lobbies.iter().filter(|l| l.rescued).count(),
            dt.as_secs_f64() * 1e3,
            mean(&|l| l.quality.total),
            mean(&|l| l.quality.balance),
            mean(&|l| (l.p[0] / (l.p[0] + l.p[2]) - 0.5).abs()),
            lobbies.iter().map(|l| l.expected_churn).sum::<f64>()
                / lobbies
                    .iter()
                    .map(|l| (l.players[0] + l.players[1]) as f64)
                    .sum::<f64>()
                    .max(1.0),
            q.len(),
        );
        // The same queue with 500 lobbies in play, each short of one player, offered for
        // backfill first (the benchmark `tick_10k_6v6_backfill_500`).
        let mut q = realistic_queue(n, 6, now, 90.0, 0, seed);
        let mut open = open_lobbies(500, 6, now, 8);
        let cod = CodConfig::new(6);
        let t = Instant::now();
        let (filled, formed) = tick_with_backfill(p.as_mut(), &mut open, &cod, now, &mut q);
        let refilled: std::collections::HashSet<_> = filled.iter().map(|b| b.lobby).collect();
        println!(
            "{:<10} with 500 open lobbies: {} filled by {} searches, then {} lobbies formed, in \
             {:>8.1} ms; left {}",
            p.name(),
            refilled.len(),
            filled.len(),
            formed.len(),
            t.elapsed().as_secs_f64() * 1e3,
            q.len(),
        );
        if reps > 1 {
            let (mut alone, mut with) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                let mut q = realistic_queue(n, 6, now, 90.0, 0, seed);
                let t = Instant::now();
                std::hint::black_box(p.tick(now, &mut q));
                alone.push(t.elapsed().as_secs_f64() * 1e3);
                let mut q = realistic_queue(n, 6, now, 90.0, 0, seed);
                let mut open = open_lobbies(500, 6, now, 8);
                let t = Instant::now();
                std::hint::black_box(tick_with_backfill(p.as_mut(), &mut open, &cod, now, &mut q));
                with.push(t.elapsed().as_secs_f64() * 1e3);
            }
            let median = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            };
            let (a, b) = (median(&mut alone), median(&mut with));
            println!(
                "{:<10} medians of {reps}, alternating: tick {a:.1} ms, with 500 open lobbies \
                 {b:.1} ms, ratio {:.2}",
                p.name(),
                b / a
            );
        }
    }
}
