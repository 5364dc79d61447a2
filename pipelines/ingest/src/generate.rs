//! A seeded generator of canonical match-history CSV in the shape of the polars peer's
//! benchmark file (`../shared/peers/bench_polars.py`): 5v5 matches, Zipf-distributed player
//! activity, parties inside teams, epoch-second times about a minute apart, and
//! `deaths_by_enemy <= deaths`. Used by `mm bench ingest` and the tests; not a simulator (that
//! has its own issue), only realistic bytes.

use std::io::Write;
use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Distribution, Exp, Poisson, Zipf};

/// The peer's header.
pub const HEADER: &str =
    "match_id,player_id,team,party_id,start_ts,end_ts,kills,deaths,deaths_by_enemy,score,won";

/// Writes `rows` player-match rows (rounded down to whole 10-player matches) to `path`.
/// Returns the number of rows written.
pub fn write_peer_shaped_csv(path: &Path, rows: u64, seed: u64) -> std::io::Result<u64> {
    let per = 10_u64;
    let matches = rows / per;
    let n_players = (rows / 25).max(1000);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let zipf = Zipf::new(n_players as f64, 0.8).map_err(std::io::Error::other)?;
    let gap = Exp::new(1.0 / 60.0).map_err(std::io::Error::other)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 22, std::fs::File::create(path)?);
    writeln!(w, "{HEADER}")?;
    let mut t = 1_704_067_200_i64; // 2024-01-01T00:00:00Z
    let mut party = 5_000_000_u64;
    let mut ids = [0_u64; 10];
    let mut line = Vec::with_capacity(128);
    for m in 1..=matches {
        t += gap.sample(&mut rng) as i64;
        let dur = rng.random_range(900..2700_i64);
        let winner = rng.random_range(0..2_u8);
        // ten distinct players, redrawing a lobby with a repeat
        loop {
            for id in ids.iter_mut() {
                *id = 1_000_000 + zipf.sample(&mut rng) as u64;
            }
            let mut s = ids;
            s.sort_unstable();
            if s.windows(2).all(|p| p[0] != p[1]) {
                break;
            }
        }
        for (k, id) in ids.iter().enumerate() {
            let team = u8::from(k >= 5);
            // a new party starts at each team's first player, then with probability 0.75
            if k % 5 == 0 || rng.random::<f64>() < 0.75 {
                party += 1;
            }
            let won = u8::from(team == winner);
            let kills = Poisson::new(5.0 + 2.0 * f64::from(won))
                .map_err(std::io::Error::other)?
                .sample(&mut rng) as i64;
            let deaths = Poisson::new(6.0 - 2.0 * f64::from(won))
                .map_err(std::io::Error::other)?
                .sample(&mut rng) as i64;
            let dbe = if deaths > 0 {
                Binomial::new(deaths as u64, 0.9)
                    .map_err(std::io::Error::other)?
                    .sample(&mut rng) as i64
            } else {
                0
            };
            let score =
                100 * kills - 50 * deaths + rng.random_range(0..500_i64) + 300 * i64::from(won);
            line.clear();
            writeln!(
                line,
                "{m},{id},{team},{party},{t},{},{kills},{deaths},{dbe},{score},{won}",
                t + dur
            )?;
            w.write_all(&line)?;
        }
    }
    w.flush()?;
    Ok(matches * per)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes_and_shape() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
        assert_eq!(write_peer_shaped_csv(&a, 1000, 7).unwrap(), 1000);
        write_peer_shaped_csv(&b, 1000, 7).unwrap();
        let text = std::fs::read_to_string(&a).unwrap();
        assert_eq!(text, std::fs::read_to_string(&b).unwrap());
        assert_eq!(text.lines().count(), 1001);
        for l in text.lines().skip(1) {
            let v: Vec<i64> = l.split(',').map(|x| x.parse().unwrap()).collect();
            assert!(v[8] <= v[7], "deaths_by_enemy <= deaths: {l}");
            assert!(v[5] > v[4]);
        }
    }
}
