//! Measures shared by the 1v1 pools and the team-queue replay: the artifact bound to the
//! window's searchers, balance and deciles, the real lobbies' row and the holdout scores.

use mm_artifact::Artifact;
use mm_artifact::team::{TeamSample, TeamWinModel};
use mm_matcher::Outcome;
use mm_matcher::queue::Member;
use mm_matcher::scoring::OutcomeProbs;

use crate::error::{EvalError, fmt_ms};
use crate::history::{self, EvalHistory};
use crate::results::{DecileStats, HistoricalRow};
use crate::stats::{Moments, wilson};

/// The models of one artifact bound to the window's searchers.
pub(crate) struct Scored {
    pub label: String,
    pub version: String,
    pub win: TeamWinModel,
    pub members: Vec<Member>,
    pub new_players: u64,
}

/// The decile (0..=9) of a percentile or probability.
pub(crate) fn decile(p: f64) -> usize {
    ((p * 10.0).floor().max(0.0) as usize).min(9)
}

/// `P(win | decisive)`: a win's share of the decisive outcomes (1/2 when there are none).
fn decisive_win(win: f64, loss: f64) -> f64 {
    let dec = win + loss;
    if dec > 0.0 { win / dec } else { 0.5 }
}

/// |P(win | decisive) - 1/2| of a pairing, and whether it is a predicted blowout.
pub(crate) fn balance(p: &OutcomeProbs, blowout_p: f64) -> (f64, bool) {
    let pw = decisive_win(p.win, p.loss);
    ((pw - 0.5).abs(), pw.max(1.0 - pw) >= blowout_p)
}

/// How a lobby's predicted balance compares with the truth's, both as `P(A wins | decisive)`:
/// the truth's `|P - 1/2|`, and how much more often than predicted the predicted favourite
/// wins (the truth's chance minus ours, for the side ours favours; team A when even). `ours`
/// is (A wins, draw, B wins); `truth` is the simulator's (A wins, draw, ...).
pub(crate) fn against_truth(ours: &OutcomeProbs, truth_a_win: f64, truth_draw: f64) -> (f64, f64) {
    let p = decisive_win(ours.win, ours.loss);
    let t = decisive_win(truth_a_win, (1.0 - truth_a_win - truth_draw).max(0.0));
    let excess = if p >= 0.5 { t - p } else { p - t };
    ((t - 0.5).abs(), excess)
}

/// Per-decile figures from per-decile sums: players, retained players (expected or drawn) and
/// |P(win) - 1/2| summed over the players.
pub(crate) fn decile_stats(
    players: &[f64; 10],
    retained: &[f64; 10],
    balance: &[f64; 10],
) -> Vec<DecileStats> {
    (0..10)
        .map(|d| {
            let n = players[d];
            DecileStats {
                decile: d + 1,
                players: n as u64,
                retained_share: retained[d] / n,
                retained_ci95: wilson(retained[d], n),
                mean_abs_pwin_minus_half: balance[d] / n,
            }
        })
        .collect()
}

/// A seed for one round of one pool size, mixed from the run's seed.
pub(crate) fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut x =
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x
}

/// Binds an artifact to the window's searchers; refuses a window that does not start after the
/// artifact's data end.
pub(crate) fn scored(h: &EvalHistory, art: &Artifact, label: &str) -> Result<Scored, EvalError> {
    let win = art.team_win.ok_or_else(|| {
        EvalError::Input(format!(
            "{}: the artifact has no team win model (too few matches when it was fitted)",
            art.dir.display()
        ))
    })?;
    if h.from_ms <= art.manifest.snapshot_as_of_ms {
        return Err(EvalError::Input(format!(
            "{}: the evaluation window starts at {}, not after the artifact's data end {}: \
             models are only evaluated on later data (use --from)",
            art.dir.display(),
            fmt_ms(h.from_ms),
            fmt_ms(art.manifest.snapshot_as_of_ms)
        )));
    }
    let members = history::members(h, art);
    let new_players = h
        .searchers
        .iter()
        .filter(|s| art.snapshot.get(&h.ids[s.player as usize]).is_none())
        .count() as u64;
    Ok(Scored {
        label: label.to_string(),
        version: art.manifest.model_version.clone(),
        win,
        members,
        new_players,
    })
}

/// Team A's sample of a real match under an artifact (skill sums, party terms).
pub(crate) fn team_sample(
    h: &EvalHistory,
    sc: &Scored,
    m: &history::HistMatch,
    party_adj: bool,
) -> TeamSample {
    let side = |lo: u32, hi: u32| -> (f64, f64, f64) {
        let r: Vec<usize> = (lo as usize..hi as usize).collect();
        let skill: f64 = r.iter().map(|&k| sc.members[k].outcome_skill).sum();
        let mut members = 0.0;
        let mut spread = 0.0;
        if party_adj {
            let mut keys: Vec<u32> = r.iter().map(|&k| h.party[k]).filter(|&p| p > 0).collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                let xs: Vec<f64> = r
                    .iter()
                    .filter(|&&k| h.party[k] == key)
                    .map(|&k| sc.members[k].outcome_skill)
                    .collect();
                if xs.len() < 2 {
                    continue;
                }
                let mean = xs.iter().sum::<f64>() / xs.len() as f64;
                let sd =
                    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
                members += xs.len() as f64;
                spread += xs.len() as f64 * sd;
            }
        }
        (skill, members, spread)
    };
    let a = side(m.lo, m.split);
    let b = side(m.split, m.hi);
    TeamSample {
        skill_diff: a.0 - b.0,
        party_members_diff: a.1 - b.1,
        party_spread_diff: a.2 - b.2,
        outcome: 0.5,
        margin: f64::NAN,
    }
}

/// The window's real lobbies scored under an artifact's models.
pub(crate) fn historical(
    h: &EvalHistory,
    sc: &Scored,
    sizes: &[usize],
    blowout_p: f64,
) -> HistoricalRow {
    let mut churn = Moments::default();
    let (mut obs, mut labelled) = (0.0, 0u64);
    let (mut blow, mut bal, mut disp, mut n_m) = (0.0, 0.0, 0.0, 0.0);
    for m in &h.matches {
        if m.split == m.hi || m.split == m.lo {
            continue;
        }
        let s = team_sample(h, sc, m, true);
        let (w, d, l) = sc.win.probs(&s);
        let p = OutcomeProbs {
            win: w,
            draw: d,
            loss: l,
        };
        let (b, is_blow) = balance(&p, blowout_p);
        n_m += 1.0;
        bal += b;
        blow += f64::from(u8::from(is_blow));
        let pct = |lo: u32, hi: u32| {
            (lo..hi)
                .map(|k| sc.members[k as usize].percentile)
                .sum::<f64>()
                / f64::from(hi - lo)
        };
        disp += (pct(m.lo, m.split) - pct(m.split, m.hi)).abs();
        for k in m.lo..m.hi {
            let k = k as usize;
            let mine = if (k as u32) < m.split {
                p
            } else {
                OutcomeProbs {
                    win: l,
                    draw: d,
                    loss: w,
                }
            };
            let c = &sc.members[k].churn;
            churn.push(mine.win * c[0] + mine.draw * c[1] + mine.loss * c[2]);
            if let Some(x) = h.searchers[k].churned {
                labelled += 1;
                obs += f64::from(u8::from(x));
            }
        }
    }
    HistoricalRow {
        artifact: sc.label.clone(),
        matches: n_m as u64,
        players: churn.n,
        expected_churn: churn.mean,
        expected_churn_ci95: churn.ci(0.95),
        expected_retained_per_size: sizes
            .iter()
            .map(|&p| (p, p as f64 * (1.0 - churn.mean)))
            .collect(),
        observed_churn: obs / labelled as f64,
        observed_labelled: labelled,
        blowout_rate: blow / n_m,
        mean_abs_pwin_minus_half: bal / n_m,
        mean_skill_disparity: disp / n_m,
    }
}

/// Each labelled search's predicted churn after its real outcome, with the label and the
/// searcher's player.
pub(crate) fn churn_preds(h: &EvalHistory, sc: &Scored) -> Vec<(f64, bool, u32)> {
    h.searchers
        .iter()
        .enumerate()
        .filter_map(|(k, s)| {
            s.churned
                .map(|y| (sc.members[k].churn[s.outcome.index()], y, s.player))
        })
        .collect()
}

/// Each real two-team match's predicted probability of its real result (team A's view), and
/// whether the more likely decisive result happened.
pub(crate) fn win_preds(h: &EvalHistory, sc: &Scored) -> Vec<(f64, bool)> {
    h.matches
        .iter()
        .filter(|m| m.split != m.hi && m.split != m.lo)
        .map(|m| {
            let s = team_sample(h, sc, m, true);
            let (w, d, l) = sc.win.probs(&s);
            let o = h.searchers[m.lo as usize].outcome;
            let p = match o {
                Outcome::Win => w,
                Outcome::Draw => d,
                Outcome::Loss => l,
            };
            let best = if w >= l { Outcome::Win } else { Outcome::Loss };
            (p, best == o)
        })
        .collect()
}

/// A probability kept off 0 and 1 for a log-loss.
pub(crate) fn clamp_p(p: f64) -> f64 {
    p.clamp(1e-12, 1.0 - 1e-12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deciles_cover_zero_to_one_and_clamp() {
        assert_eq!(decile(0.0), 0);
        assert_eq!(decile(0.099), 0);
        assert_eq!(decile(0.1), 1);
        assert_eq!(decile(0.95), 9);
        assert_eq!(decile(1.0), 9);
        assert_eq!(decile(-0.2), 0);
    }

    #[test]
    fn the_truth_s_balance_and_the_favourite_s_excess_are_by_hand() {
        // (ours: A wins, draw, B wins; the truth: A wins, draw; the truth's |P - 1/2|; excess)
        let cases = [
            // A favoured at 0.6; the truth's P(A | decisive) = 0.63 / 0.9 = 0.7: 0.2 off one
            // half, A wins 0.1 more often than predicted.
            ([0.6, 0.0, 0.4], (0.63, 0.1), 0.2, 0.1),
            // B favoured at 0.7 of the decisive matches; the truth gives B 0.6: 0.1 off one
            // half, B wins 0.1 less often than predicted.
            ([0.24, 0.2, 0.56], (0.4, 0.0), 0.1, -0.1),
        ];
        for ([win, draw, loss], (t_win, t_draw), want_b, want_x) in cases {
            let ours = OutcomeProbs { win, draw, loss };
            let (b, x) = against_truth(&ours, t_win, t_draw);
            assert!(
                (b - want_b).abs() < 1e-12 && (x - want_x).abs() < 1e-12,
                "{b} {x}"
            );
        }
    }

    #[test]
    fn balance_is_the_decisive_win_probability_off_one_half() {
        // 0.375 win, 0.5 draw, 0.125 loss: P(win | decisive) = 0.75, a blowout at 0.75.
        let p = OutcomeProbs {
            win: 0.375,
            draw: 0.5,
            loss: 0.125,
        };
        let (b, blow) = balance(&p, 0.75);
        assert!((b - 0.25).abs() < 1e-12);
        assert!(blow);
        assert!(!balance(&p, 0.8).1);
        // Only draws: even.
        let d = OutcomeProbs {
            win: 0.0,
            draw: 1.0,
            loss: 0.0,
        };
        assert_eq!(balance(&d, 0.75), (0.0, false));
    }

    #[test]
    fn decile_stats_divide_by_each_deciles_players() {
        let mut players = [0.0; 10];
        let mut retained = [0.0; 10];
        let mut bal = [0.0; 10];
        players[3] = 4.0;
        retained[3] = 3.0;
        bal[3] = 0.4;
        let s = decile_stats(&players, &retained, &bal);
        assert_eq!(s.len(), 10);
        assert_eq!(s[3].decile, 4);
        assert_eq!(s[3].players, 4);
        assert!((s[3].retained_share - 0.75).abs() < 1e-12);
        assert!((s[3].mean_abs_pwin_minus_half - 0.1).abs() < 1e-12);
        let (lo, hi) = s[3].retained_ci95;
        assert!(lo < 0.75 && 0.75 < hi);
        // An empty decile has no share.
        assert!(s[0].retained_share.is_nan());
    }

    #[test]
    fn round_seeds_differ_by_seed_size_and_round_and_repeat() {
        assert_eq!(mix(1, 300, 7), mix(1, 300, 7));
        let seeds = [
            mix(1, 300, 7),
            mix(2, 300, 7),
            mix(1, 200, 7),
            mix(1, 300, 8),
        ];
        for (i, a) in seeds.iter().enumerate() {
            for b in &seeds[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }
}
