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
/// Quits per player-minute in a level match, and the kills behind that multiply it by e
/// ([`TdmRules::quit_rate_per_s`]).
pub const QUIT_BASE_PER_MIN: f64 = 0.002;
pub const QUIT_DEFICIT_KILLS: f64 = 12.0;
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

/// How a team deathmatch is played: the kill race and who quits it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TdmRules {
    /// Kills to win.
    pub target: i32,
    /// Time limit, seconds.
    pub limit_s: f64,
    /// Mean seconds between kills in a lobby.
    pub interval_s: f64,
    /// Logit of a kill going to team A per unit of present effective-skill-sum advantage.
    pub kill_logit: f64,
    /// Quits per player-minute in a level match (or while ahead).
    pub quit_base_per_min: f64,
    /// Kills behind that multiply the quit rate by e.
    pub quit_deficit_kills: f64,
}

impl TdmRules {
    /// The simulator's game.
    pub const GAME: TdmRules = TdmRules {
        target: TDM_TARGET,
        limit_s: TDM_LIMIT_S,
        interval_s: KILL_INTERVAL_S,
        kill_logit: KILL_LOGIT_PER_SKILL,
        quit_base_per_min: QUIT_BASE_PER_MIN,
        quit_deficit_kills: QUIT_DEFICIT_KILLS,
    };

    /// Quits per player-second on a team `deficit` kills behind (0 when level or ahead).
    #[must_use]
    pub fn quit_rate_per_s(&self, deficit: i32) -> f64 {
        let behind = f64::from(deficit.max(0));
        self.quit_base_per_min / 60.0 * (behind / self.quit_deficit_kills).exp()
    }
}

/// A team deathmatch in progress, played forward in time so that players can quit and join
/// (a backfill) while it runs.
///
/// Kills arrive as a Poisson process of mean interval `interval_s`. Each goes to team A with
/// probability `sigmoid(kill_logit (sum eff A - sum eff B) + ln(n A / n B))` over the players
/// present (equally skilled players kill at equal rates, so a short-handed team takes fewer
/// kills), to a killer picked by skill among the team's present players and a victim picked by
/// (low) skill on the other team, until a team reaches the target or the time limit passes.
/// Before each kill, each team loses a player with probability `1 - exp(-n λ(d) Δt)`: `n`
/// present, `Δt` since the last kill, and `λ(d) = quit_base exp(d / quit_deficit_kills)` for a
/// team `d` kills behind, so quits grow with the score gap and fall on the losing side.
#[derive(Debug, Clone)]
pub struct Race {
    rules: TdmRules,
    slots: Vec<Slot>,
    lines: Vec<Line>,
    kw: Vec<f64>,
    vw: Vec<f64>,
    score: [i32; 2],
    /// Time of the last kill (or the start).
    t: f64,
    /// Time of the next kill, drawn when the last one fell.
    next: f64,
    over: bool,
    p_start: f64,
    present: [Vec<usize>; 2],
    /// `present` needs recomputing: someone quit or joined, or a late joiner's time came.
    stale: bool,
    /// The earliest join time after the last refresh.
    next_join: f64,
}

impl Race {
    /// A match of `slots` whose players join at `joins[i]` seconds (0: at the start).
    ///
    /// # Panics
    /// `joins` does not have one time per slot.
    pub fn new(rules: TdmRules, slots: &[Slot], joins: &[f64], rng: &mut ChaCha8Rng) -> Race {
        assert_eq!(slots.len(), joins.len(), "one join time per slot");
        let lines = joins
            .iter()
            .map(|&join_s| Line {
                join_s,
                leave_s: f64::INFINITY,
                ..Line::default()
            })
            .collect();
        let mut race = Race {
            rules,
            slots: Vec::with_capacity(slots.len()),
            lines,
            kw: Vec::with_capacity(slots.len()),
            vw: Vec::with_capacity(slots.len()),
            score: [0; 2],
            t: 0.0,
            next: exp(rules.interval_s, rng),
            over: false,
            p_start: 0.5,
            present: [Vec::with_capacity(6), Vec::with_capacity(6)],
            stale: true,
            next_join: 0.0,
        };
        for s in slots {
            race.push_slot(*s);
        }
        race.p_start = race.lineup_share();
        race
    }

    fn push_slot(&mut self, s: Slot) {
        self.kw.push((KILLER_SKILL * s.eff).exp());
        self.vw.push((-VICTIM_SKILL * s.eff).exp());
        self.slots.push(s);
    }

    /// Recomputes who is present at `t` when that can have changed.
    fn refresh(&mut self, t: f64) {
        if !self.stale && t < self.next_join {
            return;
        }
        self.stale = false;
        self.next_join = self
            .lines
            .iter()
            .map(|l| l.join_s)
            .filter(|&j| j > t)
            .fold(f64::INFINITY, f64::min);
        for (k, p) in self.present.iter_mut().enumerate() {
            p.clear();
            p.extend((0..self.slots.len()).filter(|&i| {
                self.slots[i].team == k && self.lines[i].join_s <= t && t < self.lines[i].leave_s
            }));
        }
    }

    /// Team A's chance of each kill with every player of the lineup present.
    fn lineup_share(&self) -> f64 {
        let (mut d, mut n) = (0.0, [0usize; 2]);
        for s in &self.slots {
            d += if s.team == 0 { s.eff } else { -s.eff };
            n[s.team] += 1;
        }
        let x = self.rules.kill_logit * d + (n[0].max(1) as f64 / n[1].max(1) as f64).ln();
        1.0 / (1.0 + (-x).exp())
    }

    /// Team A's chance of each kill at time `t`, from the players present then.
    pub fn kill_share(&mut self, t: f64) -> f64 {
        self.refresh(t);
        self.share_now()
    }

    /// Team A's chance of each kill from the players present now.
    fn share_now(&self) -> f64 {
        let [a, b] = &self.present;
        if a.is_empty() || b.is_empty() {
            return if a.len() > b.len() { 1.0 } else { 0.0 };
        }
        let sum = |p: &[usize]| p.iter().map(|&i| self.slots[i].eff).sum::<f64>();
        let x = self.rules.kill_logit * (sum(a) - sum(b)) + (a.len() as f64 / b.len() as f64).ln();
        1.0 / (1.0 + (-x).exp())
    }

    /// Team A's chance of each kill with the whole lineup present (what the truth records).
    #[must_use]
    pub fn p_start(&self) -> f64 {
        self.p_start
    }

    #[must_use]
    pub fn score(&self) -> [i32; 2] {
        self.score
    }

    /// True once a team reached the target or the time ran out.
    #[must_use]
    pub fn over(&self) -> bool {
        self.over
    }

    /// Seconds played: the time of the last kill, or the limit once it is over by time.
    #[must_use]
    pub fn clock(&self) -> f64 {
        self.t
    }

    /// A player joins team `slot.team` at `t` seconds (not before the last kill); returns
    /// their index.
    pub fn join(&mut self, slot: Slot, t: f64) -> usize {
        self.stale = true;
        self.push_slot(slot);
        self.lines.push(Line {
            join_s: t.max(self.t),
            leave_s: f64::INFINITY,
            ..Line::default()
        });
        self.lines.len() - 1
    }

    /// Plays until `until` seconds (or the end); returns the players who quit meanwhile.
    pub fn run_until(&mut self, until: f64, rng: &mut ChaCha8Rng) -> Vec<usize> {
        let mut quits = Vec::new();
        while !self.over && self.next <= until {
            let t = self.next;
            if t >= self.rules.limit_s {
                self.t = self.rules.limit_s;
                self.over = true;
                break;
            }
            self.refresh(t);
            let dt = t - self.t;
            for k in 0..2 {
                let n = self.present[k].len();
                let u = rng.random::<f64>();
                if n == 0 {
                    continue;
                }
                let rate = self
                    .rules
                    .quit_rate_per_s(self.score[1 - k] - self.score[k]);
                if u < 1.0 - (-(n as f64) * rate * dt).exp() {
                    let i = self.present[k][rng.random_range(0..n)];
                    self.lines[i].leave_s = t;
                    self.lines[i].quit_early = true;
                    self.stale = true;
                    quits.push(i);
                }
            }
            self.t = t;
            self.next = t + exp(self.rules.interval_s, rng);
            self.refresh(t);
            let q = self.share_now();
            let team = usize::from(rng.random::<f64>() >= q);
            let (Some(killer), Some(victim)) = (
                pick(&self.present[team], &self.kw, rng),
                pick(&self.present[1 - team], &self.vw, rng),
            ) else {
                continue;
            };
            self.lines[killer].kills += 1;
            self.lines[victim].deaths_by_enemy += 1;
            let mates = self.present[team].len();
            if mates > 1 && rng.random::<f64>() < ASSIST_P {
                // A random present teammate other than the killer.
                let mut a = self.present[team][rng.random_range(0..mates - 1)];
                if a == killer {
                    a = self.present[team][mates - 1];
                }
                self.lines[a].assists += 1;
            }
            self.score[team] += 1;
            if self.score[team] >= self.rules.target {
                self.over = true;
            }
        }
        quits
    }

    /// The finished match (played to its end first): each line's time clipped to it and its
    /// self-kills drawn.
    pub fn finish(mut self, rng: &mut ChaCha8Rng) -> Result {
        self.run_until(f64::INFINITY, rng);
        let duration = self.t;
        for l in &mut self.lines {
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
            team_score: self.score,
            duration_s: duration,
            lines: self.lines,
            p_team0: self.p_start,
        }
    }
}

/// A 6v6 team deathmatch under the game's rules ([`Race`]); some players join late.
pub fn tdm(slots: &[Slot], rng: &mut ChaCha8Rng) -> Result {
    let joins: Vec<f64> = slots
        .iter()
        .map(|_| {
            if rng.random::<f64>() < LATE_JOIN_P {
                rng.random_range(30.0..200.0)
            } else {
                0.0
            }
        })
        .collect();
    Race::new(TdmRules::GAME, slots, &joins, rng).finish(rng)
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// Quits by final score gap, for the losing and the winning side, over `n` lobbies whose
    /// team A is `d` effective-skill units stronger in total.
    fn quits_by_gap(n: usize, d: f64, seed: u64) -> [[(f64, f64); 4]; 2] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut by = [[(0.0, 0.0); 4]; 2];
        for _ in 0..n {
            let slots: Vec<Slot> = (0..12)
                .map(|i| Slot {
                    team: usize::from(i >= 6),
                    eff: if i < 6 { d / 6.0 } else { 0.0 } + FORM_SD * (rng.random::<f64>() - 0.5),
                })
                .collect();
            let r = tdm(&slots, &mut rng);
            let gap = (r.team_score[0] - r.team_score[1]).abs();
            let bucket = match gap {
                0..=10 => 0,
                11..=20 => 1,
                21..=30 => 2,
                _ => 3,
            };
            for (i, l) in r.lines.iter().enumerate() {
                let lost = usize::from(r.outcome(slots[i].team) == 2);
                let (q, p) = &mut by[lost][bucket];
                *q += f64::from(u8::from(l.quit_early));
                *p += 1.0;
            }
        }
        by
    }

    /// The seed (CoD paper, "Team Balance" and the Deprioritized Skill Test): blowouts make
    /// players leave, on the losing end; quit rates rise as matches get less even. The shape,
    /// not a fit: on the losing side the quit share grows with the final score gap, a blowout's
    /// losers quit several times as often as a close match's and as the blowout's winners, and a
    /// close match loses a player or two in a hundred.
    #[test]
    fn quits_grow_with_the_score_gap_on_the_losing_side() {
        let mut all = [[(0.0, 0.0); 4]; 2];
        for (k, d) in [0.0, 2.0, 4.0, 8.0].into_iter().enumerate() {
            let by = quits_by_gap(3000, d, k as u64);
            for s in 0..2 {
                for b in 0..4 {
                    all[s][b].0 += by[s][b].0;
                    all[s][b].1 += by[s][b].1;
                }
            }
        }
        let share = |s: usize, b: usize| all[s][b].0 / all[s][b].1;
        for b in 0..4 {
            assert!(
                all[0][b].1 > 5000.0 && all[1][b].1 > 5000.0,
                "bucket {b}: {all:?}"
            );
        }
        for b in 1..4 {
            assert!(share(1, b) > share(1, b - 1), "losers by gap: {all:?}");
        }
        assert!(share(1, 3) > 4.0 * share(1, 0), "{all:?}");
        assert!(share(1, 3) > 5.0 * share(0, 3), "{all:?}");
        for s in 0..2 {
            assert!(
                (0.01..0.035).contains(&share(s, 0)),
                "close matches: {all:?}"
            );
        }
        assert!(share(1, 3) < 0.3, "blowout losers: {all:?}");
    }

    fn level(n: usize) -> Vec<Slot> {
        (0..n)
            .map(|i| Slot {
                team: usize::from(i >= n / 2),
                eff: 0.0,
            })
            .collect()
    }

    #[test]
    fn a_short_handed_team_takes_fewer_kills() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Equal skills, one of team B's players not there yet: team A's share is 6/11 until
        // they join; the lineup's share stays 1/2.
        let mut joins = vec![0.0; 12];
        joins[11] = 500.0;
        let mut race = Race::new(TdmRules::GAME, &level(12), &joins, &mut rng);
        assert!((race.kill_share(0.0) - 6.0 / 11.0).abs() < 1e-12);
        assert!((race.kill_share(500.0) - 0.5).abs() < 1e-12);
        assert!((race.p_start() - 0.5).abs() < 1e-12);
        // A stronger team B (sum +1) with one player short.
        let mut slots = level(12);
        slots[6].eff = 1.0;
        let mut race = Race::new(TdmRules::GAME, &slots, &joins, &mut rng);
        let want = 1.0 / (1.0 + (-(-KILL_LOGIT_PER_SKILL + (6.0f64 / 5.0).ln())).exp());
        assert!((race.kill_share(0.0) - want).abs() < 1e-12);
    }

    #[test]
    fn playing_in_steps_is_playing_at_once_and_a_joiner_plays_from_joining() {
        let slots = level(12);
        let one = Race::new(
            TdmRules::GAME,
            &slots,
            &[0.0; 12],
            &mut ChaCha8Rng::seed_from_u64(3),
        )
        .finish(&mut ChaCha8Rng::seed_from_u64(4));
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut race = Race::new(TdmRules::GAME, &slots, &[0.0; 12], &mut rng);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut quits = Vec::new();
        for t in (5..700).step_by(5) {
            quits.extend(race.run_until(f64::from(t), &mut rng));
        }
        let steps = race.finish(&mut rng);
        assert_eq!(one.team_score, steps.team_score);
        assert_eq!(one.duration_s, steps.duration_s);
        let quit: Vec<usize> = (0..12).filter(|&i| steps.lines[i].quit_early).collect();
        assert_eq!(quits, quit);

        // A player who joins at 100 s plays from then to the end.
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut race = Race::new(TdmRules::GAME, &slots, &[0.0; 12], &mut rng);
        race.run_until(100.0, &mut rng);
        let i = race.join(Slot { team: 1, eff: 0.0 }, 100.0);
        let r = race.finish(&mut rng);
        assert_eq!(r.lines.len(), 13);
        assert!((r.lines[i].seconds_played(r.duration_s) - (r.duration_s - 100.0)).abs() < 1e-9);
    }
}
