//! Our Weng-Lin baseline against openskill's BradleyTerryFull (the peers' Weng-Lin,
//! `../shared/peers/requirements.txt`), run beside it on the same matches: random 1v1, 2v2 and
//! 3v3 matches among 40 players, with and without the dynamics term tau. Every player's mean and
//! standard deviation must agree to 1e-9 after 400 matches. openskill's `kappa` is set to our
//! configuration's uncertainty floor (its default is 1e-4, ours 1e-6), so the two compute the
//! same algorithm with the same parameters. Draws are left out: openskill 6 averages the mean
//! change of teams that tie, a step of its own that Weng-Lin's algorithm does not have.

use mm_trainer::skill::baselines::{Baseline, BaselineKind, BaselineParams};

use crate::util;

/// A deterministic stream of matches: (team A, team B, A's score), no player twice in a match.
fn matches(n_players: usize, n: usize, seed: u64) -> Vec<(Vec<usize>, Vec<usize>, f64)> {
    let mut x = seed;
    let mut next = move || {
        // SplitMix64.
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..n)
        .map(|_| {
            let size = 1 + (next() % 3) as usize;
            let mut picked: Vec<usize> = Vec::new();
            while picked.len() < 2 * size {
                let p = (next() % n_players as u64) as usize;
                if !picked.contains(&p) {
                    picked.push(p);
                }
            }
            let b = picked.split_off(size);
            // Low ids are stronger, so the stream has upsets and favourites both.
            let edge: usize = b.iter().sum::<usize>() * 2 / (1 + picked.iter().sum::<usize>());
            let a_wins = (next() % 100) < (40 + 10 * edge.min(4)) as u64;
            (picked, b, if a_wins { 1.0 } else { 0.0 })
        })
        .collect()
}

#[test]
fn weng_lin_matches_openskill_bradley_terry_full() {
    let Some(py) = util::python_with("openskill") else {
        return;
    };
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/peers/weng_lin_openskill.py");
    let n_players = 40;
    let games = matches(n_players, 400, 53);
    assert!(games.iter().any(|g| g.0.len() == 1) && games.iter().any(|g| g.0.len() == 3));
    assert!(games.iter().any(|g| g.2 == 1.0) && games.iter().any(|g| g.2 == 0.0));
    let base = BaselineKind::WengLin.default_params();
    let kappa = skillratings::weng_lin::WengLinConfig::new().uncertainty_tolerance;
    for tau in [0.0, 25.0 / 300.0] {
        let params = BaselineParams { tau, ..base };
        let mut ours = Baseline::new(params);
        for (a, b, s) in &games {
            ours.update(a, b, *s);
        }
        let spec = serde_json::json!({
            "players": n_players, "beta": params.beta, "kappa": kappa, "tau": tau,
            "matches": games.iter().map(|(a, b, s)| serde_json::json!([a, b, *s as i64])).collect::<Vec<_>>(),
        });
        let mut child = std::process::Command::new(&py)
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), spec.to_string().as_bytes())
            .unwrap();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let peer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut moved = 0;
        for i in 0..n_players {
            let (mu, sigma) = (
                peer["mu"][i].as_f64().unwrap(),
                peer["sigma"][i].as_f64().unwrap(),
            );
            assert!(
                (ours.rating(i) - mu).abs() < 1e-9 && (ours.uncertainty(i) - sigma).abs() < 1e-9,
                "tau {tau}, player {i}: ours ({}, {}), openskill ({mu}, {sigma})",
                ours.rating(i),
                ours.uncertainty(i)
            );
            moved += usize::from((mu - 25.0).abs() > 1.0);
        }
        // The comparison bites: most players moved well away from the prior.
        assert!(moved > n_players / 2, "tau {tau}: {moved} players moved");
    }
}
