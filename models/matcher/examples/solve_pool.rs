//! Solves one peers' pool (P x P little-endian int32 costs) repeatedly with a reused solver and
//! prints the median time and the solver's counters: a profiling harness for the blossom. The
//! assignment jump start is timed alone first, the auction against the dense search.
//!
//! `cargo run --release -p mm-matcher --example solve_pool -- FILE [REPS]`

use std::time::Instant;

use mm_matcher::blossom::DenseBlossom;
use mm_matcher::pairing::costs_from_le_i32;

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: solve_pool FILE [REPS]");
    let reps: usize = args.next().map_or(5, |r| r.parse().expect("REPS"));
    let bytes = std::fs::read(&path).expect("read pool");
    let (n, cost) = if path.ends_with(".f64") {
        let w: Vec<f64> = bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        let n = (w.len() as f64).sqrt() as usize;
        match std::env::var("QUANT")
            .ok()
            .and_then(|q| q.parse::<f64>().ok())
        {
            Some(q) => (n, w.iter().map(|x| (x * q).round() as i64).collect()),
            None => (n, mm_matcher::pairing::quantise(n, &w)),
        }
    } else {
        costs_from_le_i32(&bytes).expect("pool")
    };
    // The assignment jump start alone, auction against the dense search, interleaved.
    let mut lap = mm_matcher::lap::Lap::new();
    let (mut auction, mut dense) = (Vec::new(), Vec::new());
    // SOLVE_ONLY=1 skips the assignment comparison (for profiling the solve).
    let compare = if std::env::var_os("SOLVE_ONLY").is_some() {
        0
    } else {
        reps
    };
    for _ in 0..compare {
        let t = Instant::now();
        let a = lap.assign_no_diagonal_auction(n, &cost);
        auction.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let b = lap.assign_no_diagonal_dense(n, &cost);
        dense.push(t.elapsed().as_secs_f64() * 1e3);
        let total = |x: &mm_matcher::lap::Assignment| -> i64 {
            (0..n).map(|i| cost[i * n + x.row_to_col[i] as usize]).sum()
        };
        assert_eq!(total(&a), total(&b), "auction and dense optima differ");
    }
    if compare > 0 {
        let stats = {
            lap.assign_no_diagonal_auction(n, &cost);
            lap.stats()
        };
        auction.sort_by(f64::total_cmp);
        dense.sort_by(f64::total_cmp);
        println!(
            "assignment: auction {:.2} ms, dense {:.2} ms (medians); {stats:?}",
            auction[reps / 2],
            dense[reps / 2],
        );
    }
    let mut solver = DenseBlossom::new();
    let mut times = Vec::new();
    let mut total = 0;
    for _ in 0..reps {
        let t = Instant::now();
        total = solver.solve(n, &cost).expect("solve").cost;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "n={n} cost={total} median={:.2} ms stats={:?}",
        times[times.len() / 2],
        solver.stats()
    );
}
