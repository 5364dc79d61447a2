//! Criterion benchmarks of the matcher's hot paths, with fixed inputs built outside the timed
//! loop and the size in each benchmark id:
//! - EOMM pairing (exact dense blossom) on the peers' pools (P = 100, 500, 1000, 2000), read from
//!   ../shared/peers/results/pools when present, else on pools of the same model generated here;
//! - the exhaustive two-team split of 6v6 and 12v12 lobbies (solo players, the hardest case);
//! - one tick of each queue policy (CoD rules, threshold, EOMM teams) over 10,000 queued 6v6
//!   searches (the synthetic queue of `sim_queue`: realistic party mix, waits up to 90 s); the
//!   queue is cloned outside the timed part; and the same tick with 500 lobbies in play
//!   offered for backfill (`tick_10k_6v6_backfill_500`).
//!
//! `cargo bench -p mm-matcher`. The ratio to networkx comes from `mm bench pair`, which runs the
//! peer beside our solver in one run.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use mm_matcher::blossom::DenseBlossom;
use mm_matcher::pairing::{PairPolicy, costs_from_le_i32, pair_i64};
use mm_matcher::scoring::{EloDraw, TabularChurn, eomm_matrix};
use mm_matcher::teams::{Party, best_split};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn pool(p: usize) -> Vec<i64> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../../../shared/peers/results/pools/pool_P{p}_s20240601_wq.i32"
    ));
    if let Some((_, w)) = std::fs::read(&path)
        .ok()
        .and_then(|b| costs_from_le_i32(&b).ok())
    {
        return w;
    }
    // The peer pool model (gen_pool.py), with our own RNG.
    let mut rng = ChaCha8Rng::seed_from_u64(20240601 + p as u64);
    let skills: Vec<f64> = (0..p)
        .map(|_| 1500.0 + 300.0 * (rng.random::<f64>() * 2.0 - 1.0) * 1.7)
        .collect();
    let by_outcome = (0..p)
        .map(|_| {
            let base = rng.random_range(0.2..0.6);
            let c = |e: f64| f64::clamp(base + e, 0.01, 0.99);
            let (win, lose, draw) = (
                rng.random_range(-0.15..0.05),
                rng.random_range(0.0..0.25),
                rng.random_range(-0.05..0.10),
            );
            [c(win), c(draw), c(lose)]
        })
        .collect();
    let win = EloDraw {
        skills,
        p_draw: 0.2,
        scale: 400.0,
    };
    eomm_matrix(p, &win, &TabularChurn { by_outcome })
        .iter()
        .map(|w| (w * 1e6).round() as i64)
        .collect()
}

fn eomm(c: &mut Criterion) {
    let mut g = c.benchmark_group("eomm_pairing");
    g.sample_size(10);
    for p in [100usize, 500, 1000, 2000] {
        let w = pool(p);
        let mut solver = DenseBlossom::new();
        g.bench_with_input(BenchmarkId::from_parameter(p), &w, |b, w| {
            b.iter(|| pair_i64(PairPolicy::Eomm, p, black_box(w), None, &mut solver))
        });
    }
    g.finish();
}

fn split(c: &mut Criterion) {
    let mut g = c.benchmark_group("exhaustive_split");
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    for team in [6usize, 12] {
        let parties: Vec<Party> = (0..2 * team)
            .map(|_| Party {
                size: 1,
                skill: rng.random_range(-1.0..1.0),
            })
            .collect();
        g.bench_with_input(
            BenchmarkId::new("solo", format!("{team}v{team}")),
            &parties,
            |b, p| b.iter(|| best_split(black_box(p), team)),
        );
    }
    g.finish();
}

fn tick(c: &mut Criterion) {
    use mm_matcher::sim_queue::{realistic_queue, team_policies};

    let now = 1_700_000_000_000;
    let queue = realistic_queue(10_000, 6, now, 90.0, 0, 7);
    let models = mm_matcher::sim_queue::bench_models();
    let mut g = c.benchmark_group("tick_10k_6v6");
    g.sample_size(10);
    for mut p in team_policies(6, models) {
        let name = p.name();
        g.bench_function(name, |b| {
            b.iter_batched(
                || queue.clone(),
                |mut q| black_box(p.tick(now, &mut q)),
                criterion::BatchSize::LargeInput,
            );
        });
    }
    g.finish();
}

/// The same tick with 500 lobbies in play, each short of one player (a single left its first
/// party) and offered for backfill 30 s ago: the open lobbies take their searches first, by the
/// policy's backfill rule, then the policy forms new lobbies from the rest.
fn tick_backfill(c: &mut Criterion) {
    use mm_matcher::backfill::tick_with_backfill;
    use mm_matcher::cod::CodConfig;
    use mm_matcher::queue::LobbyModels;
    use mm_matcher::sim_queue::{open_lobbies, realistic_queue, team_policies};

    let now = 1_700_000_000_000;
    let queue = realistic_queue(10_000, 6, now, 90.0, 0, 7);
    let models = LobbyModels::skill_only(4.0);
    let cod = CodConfig::new(6);
    let lobbies = open_lobbies(500, 6, now, 8);
    let open = lobbies.len();
    let mut g = c.benchmark_group(format!("tick_10k_6v6_backfill_{open}"));
    g.sample_size(10);
    for mut p in team_policies(6, models) {
        let name = p.name();
        g.bench_function(name, |b| {
            b.iter_batched(
                || (queue.clone(), lobbies.clone()),
                |(mut q, mut l)| {
                    black_box(tick_with_backfill(p.as_mut(), &mut l, &cod, now, &mut q))
                },
                criterion::BatchSize::LargeInput,
            );
        });
    }
    g.finish();
}

criterion_group!(benches, eomm, split, tick, tick_backfill);
criterion_main!(benches);
