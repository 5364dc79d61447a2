//! One match: 6v6 team deathmatch as a kill race, or a 1v1 with win, draw or loss.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// Kills to win a team deathmatch.
pub const TDM_TARGET: i32 = 75;
/// Time limit of a team deathmatch, seconds.
pub const TDM_LIMIT_S: f64 = 600.0;
/// A score difference above this is a blowout.
pub const BLOWOUT_DIFF: i32 = 30;
/// Mean seconds between kills in a lobby.
pub const KILL_INTERVAL_S: f64 = 3.6;
/// Logit of a kill going to team A per unit of effective-skill-sum advantage.
pub const KILL_LOGIT_PER_SKILL: f64 = 0.17;
/// How strongly skill picks the killer and (negatively) the victim within a team.
pub const KILLER_SKILL: f64 = 1.0;
pub const VICTIM_SKILL: f64 = 0.5;
pub const ASSIST_P: f64 = 0.35;
pub const LATE_JOIN_P: f64 = 0.06;
pub const QUIT_P: f64 = 0.03;
/// Self-kills per second played.
pub const SELF_KILL_RATE: f64 = 1.0 / 1500.0;
/// Per-match form: each player's effective skill varies by this standard deviation.
pub const FORM_SD: f64 = 0.3;
/// 1v1: P(draw) is fixed (EOMM section 5.2) and P(win) = 0.8 sigmoid(DUEL_K * skill difference).
pub const DUEL_DRAW: f64 = 0.2;
pub const DUEL_K: f64 = 1.2;

/// A player's place in a match.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    pub team: usize,
    /// True skill plus party bonus plus this match's form.
    pub eff: f64,
}

/// What one player did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Line {
    pub kills: i32,
    pub deaths_by_enemy: i32,
    pub self_kills: i32,
    pub assists: i32,
    pub join_s: f64,
    pub leave_s: f64,
    pub quit_early: bool,
}

impl Line {
    #[must_use]
    pub fn seconds_played(&self, duration: f64) -> f64 {
        (self.leave_s.min(duration) - self.join_s).max(0.0)
    }
    #[must_use]
    pub fn score(&self) -> f64 {
        f64::from(100 * self.kills + 25 * self.assists)
    }
}

/// A finished match.
#[derive(Debug, Clone)]
pub struct Result {
    pub team_score: [i32; 2],
    pub duration_s: f64,
    pub lines: Vec<Line>,
    /// Team 0's chance of each kill (TDM) or of winning (1v1).
    pub p_team0: f64,
}

impl Result {
    /// 0 win, 1 draw, 2 loss, for a team.
    #[must_use]
    pub fn outcome(&self, team: usize) -> u8 {
        let (a, b) = (self.team_score[team], self.team_score[1 - team]);
        match a.cmp(&b) {
            std::cmp::Ordering::Greater => 0,
            std::cmp::Ordering::Equal => 1,
            std::cmp::Ordering::Less => 2,
        }
    }

    #[must_use]
    pub fn blowout(&self) -> bool {
        (self.team_score[0] - self.team_score[1]).abs() > BLOWOUT_DIFF
    }

    /// Each line's performance rank in the lobby by kills minus deaths, 0 (worst) to 1 (best),
    /// ties sharing the middle; 0.5 for a lobby of one.
    #[must_use]
    pub fn perf_ranks(&self) -> Vec<f64> {
        let net: Vec<i32> = self
            .lines
            .iter()
            .map(|l| l.kills - l.deaths_by_enemy - l.self_kills)
            .collect();
        let n = net.len();
        net.iter()
            .map(|&x| {
                if n > 1 {
                    let below = net.iter().filter(|&&y| y < x).count() as f64;
                    let ties = net.iter().filter(|&&y| y == x).count() as f64 - 1.0;
                    (below + 0.5 * ties) / (n as f64 - 1.0)
                } else {
                    0.5
                }
            })
            .collect()
    }
}

fn exp(mean: f64, rng: &mut ChaCha8Rng) -> f64 {
    -mean * (1.0 - rng.random::<f64>()).ln()
}

fn poisson(lambda: f64, rng: &mut ChaCha8Rng) -> i32 {
    // Knuth's method: lambdas here are small.
    let l = (-lambda).exp();
    let (mut k, mut p) = (0, 1.0);
    loop {
        p *= rng.random::<f64>();
        if p <= l {
            return k;
        }
        k += 1;
    }
}

/// Picks an index with probability proportional to `w` (over the indices in `idx`).
fn pick(idx: &[usize], w: &[f64], rng: &mut ChaCha8Rng) -> Option<usize> {
    let total: f64 = idx.iter().map(|&i| w[i]).sum();
    if total <= 0.0 {
        return None;
    }
    let mut x = rng.random::<f64>() * total;
    for &i in idx {
        x -= w[i];
        if x <= 0.0 {
            return Some(i);
        }
    }
    idx.last().copied()
}

/// A 6v6 team deathmatch: kills arrive at random; each goes to team A with probability
/// `sigmoid(KILL_LOGIT_PER_SKILL * (sum eff A - sum eff B))`, to a killer picked by skill among
/// the team's players present and a victim picked by (low) skill on the other team, until a
/// team reaches 75 or ten minutes pass. Some players join late or quit early.
pub fn tdm(slots: &[Slot], rng: &mut ChaCha8Rng) -> Result {
    let n = slots.len();
    let mut sum = [0.0; 2];
    for s in slots {
        sum[s.team] += s.eff;
    }
    let q = 1.0 / (1.0 + (-KILL_LOGIT_PER_SKILL * (sum[0] - sum[1])).exp());
    let mut lines = vec![
        Line {
            leave_s: f64::INFINITY,
            ..Line::default()
        };
        n
    ];
    for l in &mut lines {
        if rng.random::<f64>() < LATE_JOIN_P {
            l.join_s = rng.random_range(30.0..200.0);
        }
        if rng.random::<f64>() < QUIT_P {
            l.leave_s = rng.random_range(l.join_s + 60.0..l.join_s + 400.0);
            l.quit_early = true;
        }
    }
    let kw: Vec<f64> = slots.iter().map(|s| (KILLER_SKILL * s.eff).exp()).collect();
    let vw: Vec<f64> = slots
        .iter()
        .map(|s| (-VICTIM_SKILL * s.eff).exp())
        .collect();
    let mut score = [0i32; 2];
    let mut t = 0.0;
    // Who is present changes only when someone joins late or quits: recompute lazily.
    let changes = lines.iter().any(|l| l.join_s > 0.0 || l.quit_early);
    let mut present: [Vec<usize>; 2] = [Vec::with_capacity(6), Vec::with_capacity(6)];
    let refresh =
        |t: f64, present: &mut [Vec<usize>; 2], lines: &[Line]| {
            for (k, p) in present.iter_mut().enumerate() {
                p.clear();
                p.extend((0..n).filter(|&i| {
                    slots[i].team == k && lines[i].join_s <= t && t < lines[i].leave_s
                }));
            }
        };
    refresh(0.0, &mut present, &lines);
    loop {
        t += exp(KILL_INTERVAL_S, rng);
        if t >= TDM_LIMIT_S {
            t = TDM_LIMIT_S;
            break;
        }
        if changes {
            refresh(t, &mut present, &lines);
        }
        let team = usize::from(rng.random::<f64>() >= q);
        let (Some(killer), Some(victim)) = (
            pick(&present[team], &kw, rng),
            pick(&present[1 - team], &vw, rng),
        ) else {
            continue;
        };
        lines[killer].kills += 1;
        lines[victim].deaths_by_enemy += 1;
        let mates = present[team].len();
        if mates > 1 && rng.random::<f64>() < ASSIST_P {
            // A random present teammate other than the killer.
            let mut a = present[team][rng.random_range(0..mates - 1)];
            if a == killer {
                a = present[team][mates - 1];
            }
            lines[a].assists += 1;
        }
        score[team] += 1;
        if score[team] >= TDM_TARGET {
            break;
        }
    }
    let duration = t;
    for l in &mut lines {
        if l.join_s > duration {
            l.join_s = duration;
        }
        l.leave_s = l.leave_s.min(duration);
        if l.leave_s >= duration {
            l.quit_early = false;
        }
        l.self_kills = poisson(SELF_KILL_RATE * l.seconds_played(duration), rng);
    }
    Result {
        team_score: score,
        duration_s: duration,
        lines,
        p_team0: q,
    }
}

/// A 1v1: draw with probability 0.2, else a win for player 0 with probability
/// `0.8 sigmoid(DUEL_K (eff0 - eff1))`; goals follow the outcome (a margin that grows with the
/// skill gap).
pub fn duel(slots: &[Slot], rng: &mut ChaCha8Rng) -> Result {
    let d = slots[0].eff - slots[1].eff;
    let p0 = (1.0 - DUEL_DRAW) / (1.0 + (-DUEL_K * d).exp());
    let u: f64 = rng.random();
    let low = poisson(0.9, rng);
    let margin = 1 + poisson(0.3 + 0.4 * d.abs(), rng);
    let team_score = if u < p0 {
        [low + margin, low]
    } else if u < p0 + DUEL_DRAW {
        [low, low]
    } else {
        [low, low + margin]
    };
    let duration = rng.random_range(240.0..480.0);
    let lines = (0..2)
        .map(|i| Line {
            kills: team_score[i],
            deaths_by_enemy: team_score[1 - i],
            leave_s: duration,
            ..Line::default()
        })
        .collect();
    Result {
        team_score,
        duration_s: duration,
        lines,
        p_team0: p0,
    }
}
