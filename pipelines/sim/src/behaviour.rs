//! Leaving and returning: the ground truth the churn model has to find.
//!
//! After each match a player stops their session with probability `p_stop` (a logistic function
//! of this match's outcome, the recent outcomes, a blowout loss, their performance in the
//! lobby, experience and how long the session has run). A player who stops comes back after a
//! gap drawn from a mixture:
//! - **quick** (probability `R_QUICK`): a short break, exponential with mean `QUICK_MEAN_S`;
//! - **long** (probability `p_long`, which depends on the recent outcomes as in EOMM Table 1):
//!   a break of days, exponential with mean `LONG_MEAN_S`;
//! - otherwise **daily**: the next time their preferred local hour comes round at least
//!   `MIN_DAILY_S` later, on the next day their friend group plays, plus an exponential delay
//!   with mean `DAILY_JITTER_S`. A group plays on a day with probability `1 - skip` by a
//!   seeded coin per (group, day): friends share the days they play, and for each player the
//!   skipped days are still independent coins, so the tail below stays exact.
//!
//! A player who does not stop queues again within a minute. So the probability that the
//! player plays no match in the next `H` hours is `p_stop * P(gap >= H)`, and `P(gap >= H)` has
//! a closed form for each component ([`Gap::tail`]): the exported truth is exact, not sampled.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::world::{Mode, Player, REGIONS};

pub const R_QUICK: f64 = 0.06;
pub const QUICK_MEAN_S: f64 = 40.0 * 60.0;
pub const LONG_MEAN_S: f64 = 12.0 * 86_400.0;
pub const MIN_DAILY_S: f64 = 6.0 * 3600.0;
pub const DAILY_JITTER_S: f64 = 1800.0;

/// Coefficients of the stop and long-break models (logit scale), exported with the truth.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Coefficients {
    pub stop_intercept_tdm: f64,
    pub stop_intercept_duel: f64,
    pub stop_loss: f64,
    pub stop_win: f64,
    pub stop_loss_streak: f64,
    pub stop_blowout_loss: f64,
    pub stop_low_performance: f64,
    pub stop_log_games: f64,
    pub stop_per_session_match: f64,
    pub long_intercept: f64,
    pub long_last_loss: f64,
    pub long_two_losses: f64,
    pub long_three_losses: f64,
    pub long_win_win_loss: f64,
    pub long_three_wins: f64,
    pub long_log_games: f64,
}

/// Defaults calibrated so that the simulated history reproduces the EOMM paper's figures (see
/// the calibration tests).
pub const COEF: Coefficients = Coefficients {
    stop_intercept_tdm: -1.25,
    stop_intercept_duel: 0.22,
    stop_loss: 0.30,
    stop_win: -0.15,
    stop_loss_streak: 0.15,
    stop_blowout_loss: 0.45,
    stop_low_performance: 0.50,
    stop_log_games: -0.06,
    stop_per_session_match: 0.05,
    long_intercept: -2.25,
    long_last_loss: 0.16,
    long_two_losses: 0.0,
    long_three_losses: 0.08,
    long_win_win_loss: 0.11,
    long_three_wins: 0.62,
    long_log_games: -0.02,
};

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// What the stop decision sees of the match just played.
#[derive(Debug, Clone, Copy)]
pub struct MatchView {
    /// 0 win, 1 draw, 2 loss.
    pub outcome: u8,
    pub blowout_loss: bool,
    /// The player's rank in the lobby on performance, 0 (worst) to 1 (best).
    pub perf_pct: f64,
}

/// P(the player ends the session after this match); `p` already has this match recorded.
#[must_use]
pub fn p_stop(p: &Player, m: &MatchView) -> f64 {
    let c = &COEF;
    let base = match p.mode {
        Mode::Tdm => c.stop_intercept_tdm,
        Mode::Duel => c.stop_intercept_duel,
    };
    let losses = p.hist[..p.hist_len as usize]
        .iter()
        .filter(|&&o| o == 2)
        .count();
    let x = base
        + p.quit_base
        + match m.outcome {
            0 => c.stop_win,
            2 => c.stop_loss,
            _ => 0.0,
        }
        + c.stop_loss_streak * (losses as f64 - 1.0).max(0.0)
        + if m.blowout_loss {
            c.stop_blowout_loss
        } else {
            0.0
        }
        + c.stop_low_performance * (0.5 - m.perf_pct)
        + c.stop_log_games * (1.0 + f64::from(p.games)).ln()
        + c.stop_per_session_match * f64::from(p.session_matches.saturating_sub(1));
    sigmoid(x)
}

/// The performance rank a match would have given had it ended in `outcome` (0 win, 1 draw,
/// 2 loss), for the conditional truth; `realised` is the rank it did give.
///
/// In a 1v1 the rank is the outcome's: net kills are the score margin, so the winner ranks 1,
/// the loser 0 and a draw 0.5 ([`crate::game::duel`]). Keeping the realised rank under another
/// outcome would give an actual winner's loss the winner's rank (the stop model's
/// `stop_low_performance` then halves a loss's true cost, 0.45 logit instead of 0.95) and tell
/// the conditional truth which outcome happened. In a 6v6 the rank depends on the player's own
/// kills and deaths more than on the team's outcome, so it stays as it was.
#[must_use]
pub fn perf_if(mode: Mode, outcome: u8, realised: f64) -> f64 {
    match mode {
        Mode::Duel => [1.0, 0.5, 0.0][usize::from(outcome.min(2))],
        Mode::Tdm => realised,
    }
}

/// P(a stopping player takes a long break), from the last three outcomes (EOMM Table 1).
#[must_use]
pub fn p_long(p: &Player) -> f64 {
    let c = &COEF;
    let h = &p.hist[..p.hist_len as usize];
    let is = |pat: &[u8]| h.len() >= pat.len() && h[..pat.len()] == *pat;
    let x = c.long_intercept
        + p.quit_base
        + if is(&[2]) { c.long_last_loss } else { 0.0 }
        + if is(&[2, 2]) { c.long_two_losses } else { 0.0 }
        + if is(&[2, 2, 2]) {
            c.long_three_losses
        } else {
            0.0
        }
        + if is(&[2, 0, 0]) {
            c.long_win_win_loss
        } else {
            0.0
        }
        + if is(&[0, 0, 0]) {
            c.long_three_wins
        } else {
            0.0
        }
        + c.long_log_games * (1.0 + f64::from(p.games)).ln();
    sigmoid(x)
}

/// The gap distribution of one stopping player at one moment.
#[derive(Debug, Clone, Copy)]
pub struct Gap {
    pub p_long: f64,
    /// Seconds to the next preferred hour at least `MIN_DAILY_S` away.
    pub daily_base_s: f64,
    pub skip_day: f64,
}

/// The play calendar of friend groups: whether a group plays on a day, a seeded coin.
#[derive(Debug, Clone, Copy)]
pub struct Calendar {
    pub seed: u64,
}

impl Calendar {
    /// Whether `group` plays on UTC day `day` (days since the start), with P = 1 - skip.
    #[must_use]
    pub fn plays(&self, group: u32, day: i64, skip: f64) -> bool {
        // SplitMix64 of (seed, group, day): a fixed coin per group and day.
        let mut z = self
            .seed
            .wrapping_add(u64::from(group).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add((day as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64 / (1u64 << 53) as f64) >= skip
    }
}

impl Gap {
    #[must_use]
    pub fn new(p: &Player, now_s: f64) -> Gap {
        let offset = REGIONS[p.region as usize].utc_offset_h * 3600.0;
        let local = now_s + offset;
        let target = p.pref_hour * 3600.0;
        let mut d = (target - local.rem_euclid(86_400.0)).rem_euclid(86_400.0);
        while d < MIN_DAILY_S {
            d += 86_400.0;
        }
        Gap {
            p_long: p_long(p),
            daily_base_s: d,
            skip_day: p.skip_day(),
        }
    }

    /// P(gap >= h_s), exactly.
    #[must_use]
    pub fn tail(&self, h_s: f64) -> f64 {
        let quick = (-h_s / QUICK_MEAN_S).exp();
        let long = (-h_s / LONG_MEAN_S).exp();
        // Daily: base + 86400 K + E, K geometric (P(K = k) = (1 - s) s^k), E exponential.
        let s = self.skip_day;
        let mut daily = 0.0;
        let mut pk = 1.0 - s;
        let mut rest = 1.0;
        let mut k = 0.0;
        loop {
            let start = self.daily_base_s + 86_400.0 * k;
            if start >= h_s {
                daily += rest;
                break;
            }
            daily += pk * (-(h_s - start) / DAILY_JITTER_S).exp();
            rest -= pk;
            pk *= s;
            k += 1.0;
        }
        let p_daily = 1.0 - R_QUICK - self.p_long;
        R_QUICK * quick + self.p_long * long + p_daily * daily
    }

    /// Draws a gap in seconds for a player of `group` stopping at `now_s`.
    pub fn sample(&self, rng: &mut ChaCha8Rng, cal: Calendar, group: u32, now_s: f64) -> f64 {
        let u: f64 = rng.random();
        let exp = |mean: f64, rng: &mut ChaCha8Rng| -mean * (1.0 - rng.random::<f64>()).ln();
        if u < R_QUICK {
            exp(QUICK_MEAN_S, rng)
        } else if u < R_QUICK + self.p_long {
            exp(LONG_MEAN_S, rng)
        } else {
            let first = ((now_s + self.daily_base_s) / 86_400.0).floor() as i64;
            let mut k = 0;
            // Bounded: with a skip probability of at most 0.9, 2,000 skipped days do not
            // happen; the bound only guards the loop.
            while k < 2_000 && !cal.plays(group, first + k, self.skip_day) {
                k += 1;
            }
            self.daily_base_s + 86_400.0 * k as f64 + exp(DAILY_JITTER_S, rng)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The closed-form tail agrees with sampling (200k draws, 4 horizons).
    #[test]
    fn tail_matches_sampling() {
        let g = Gap {
            p_long: 0.1,
            daily_base_s: 10.0 * 3600.0,
            skip_day: 0.4,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Many groups and moments, so that the calendar's coins vary as they do in a run.
        let cal = Calendar { seed: 9 };
        let draws: Vec<f64> = (0..200_000u32)
            .map(|k| g.sample(&mut rng, cal, k % 5_000, f64::from(k / 5_000) * 86_400.0))
            .collect();
        for h in [1.0, 8.0, 24.0, 24.0 * 7.0] {
            let hs = h * 3600.0;
            let emp = draws.iter().filter(|&&x| x >= hs).count() as f64 / draws.len() as f64;
            assert!(
                (emp - g.tail(hs)).abs() < 0.004,
                "H={h}h: sampled {emp}, closed form {}",
                g.tail(hs)
            );
        }
        assert!((g.tail(0.0) - 1.0).abs() < 1e-12);
    }

    /// The conditional truth's 1v1 performance rank is the one the game gives that outcome:
    /// over many duels of every skill gap, each side's rank is `perf_if` of its outcome.
    #[test]
    fn a_duel_outcome_decides_the_performance_rank() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut seen = [0usize; 3];
        for k in 0..20_000 {
            let d = f64::from(k % 41 - 20) * 0.25;
            let slots = [
                crate::game::Slot { team: 0, eff: d },
                crate::game::Slot { team: 1, eff: 0.0 },
            ];
            let res = crate::game::duel(&slots, &mut rng);
            let ranks = res.perf_ranks();
            for (side, &rank) in ranks.iter().enumerate() {
                let o = res.outcome(side);
                seen[usize::from(o)] += 1;
                // The realised rank passed in is the other side's: it must not matter.
                assert_eq!(perf_if(Mode::Duel, o, ranks[1 - side]), rank, "{res:?}");
            }
        }
        assert!(seen.iter().all(|&n| n > 1_000), "{seen:?}");
        assert_eq!(perf_if(Mode::Tdm, 2, 0.7), 0.7);
    }
}
