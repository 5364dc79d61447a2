//! The simulator's truth for the 1v1 pools: how much retention EOMM can buy in this world.
//!
//! On a simulated lake, `truth/player_matches/` holds for every player-match the player's true
//! skill and the exact 8-h churn probability had the match ended in a win, a draw or a loss
//! (`churn_8h_if_*`), and `truth/params.json` the 1v1 game's constants. That is enough to
//! score any pairing of a pool under the truth, and to pair with the truth itself: the
//! oracle. The win model of the truth is the simulator's, `P(win) = (1 - draw) σ(k (s_i - s_j
//! + ε))`, averaged over the match's form `ε ~ N(0, 2 form_sd²)`, which a pairing cannot see.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, TimestampMillisecondType};
use hashbrown::HashMap;
use mm_lake::Lake;
use mm_matcher::Outcome;
use mm_matcher::scoring::{ChurnModel, OutcomeProbs, WinModel};

use crate::error::EvalError;
use crate::history::EvalHistory;

/// The truth's horizon: the oracle needs an artifact with the same one.
pub const HORIZON_MS: i64 = 8 * 3_600_000;

const COLS: [&str; 6] = [
    "player_id",
    "start_time",
    "true_skill",
    "churn_8h_if_win",
    "churn_8h_if_draw",
    "churn_8h_if_loss",
];

/// Every search of the window with its truth.
#[derive(Debug, Clone)]
pub(crate) struct TruthSearches {
    /// True skill per searcher (index of [`EvalHistory::searchers`]).
    pub skill: Vec<f64>,
    /// 8-h churn per searcher under a win, a draw, a loss.
    pub churn_if: Vec<[f64; 3]>,
    pub win: DuelTruth,
    /// Party bonus per searcher (0 when the truth has none).
    pub party_bonus: Vec<f64>,
    /// 8-h churn per searcher under a close and a blowout loss, when the truth has them
    /// (simulations from before them do not): what the team replay's truth needs.
    pub churn_if_loss: Option<Vec<[f64; 2]>>,
    /// The team race's constants, when `truth/params.json` has them.
    pub tdm: Option<TdmConstants>,
}

/// Columns read when the truth has them.
const TEAM_COLS: [&str; 3] = [
    "party_bonus",
    "churn_8h_if_close_loss",
    "churn_8h_if_blowout_loss",
];

/// The grid point below position `x` (in steps from the first of `len` points) and the share of
/// the step past it, for linear interpolation; positions past the end read the last step's end.
fn grid_at(x: f64, len: usize) -> (usize, f64) {
    let x = x.clamp(0.0, (len - 1) as f64);
    let i = (x.floor() as usize).min(len - 2);
    (i, x - i as f64)
}

/// The trapezoid rule's nodes for an expectation over a match's form `e ~ N(0, sd²)`: `nodes`
/// points over ±7 sd as (e, weight), and the weights' sum.
fn form_grid(sd: f64, nodes: usize) -> (Vec<(f64, f64)>, f64) {
    let grid: Vec<(f64, f64)> = (0..nodes)
        .map(|i| {
            let z = -7.0 + 14.0 * i as f64 / (nodes - 1) as f64;
            let w = if i == 0 || i == nodes - 1 { 0.5 } else { 1.0 };
            (z * sd, w * (-0.5 * z * z).exp())
        })
        .collect();
    let norm = grid.iter().map(|g| g.1).sum();
    (grid, norm)
}

/// The simulator's 1v1 outcome model with the form averaged out, tabulated by skill difference.
#[derive(Debug, Clone)]
pub(crate) struct DuelTruth {
    pub draw: f64,
    /// P(win) on a grid of skill differences `-D_MAX..=D_MAX` with step `STEP`.
    table: Vec<f64>,
}

const D_MAX: f64 = 12.0;
const STEP: f64 = 0.002;

impl DuelTruth {
    /// The model with draw probability `draw`, slope `k` and form sd `form_sd`.
    pub fn new(draw: f64, k: f64, form_sd: f64) -> DuelTruth {
        // E over e ~ N(0, s²) of σ(k (d + e)), by the trapezoid rule over ±7 s.
        let (grid, norm) = form_grid(std::f64::consts::SQRT_2 * form_sd, 561);
        let n = (2.0 * D_MAX / STEP).round() as usize + 1;
        let table = (0..n)
            .map(|i| {
                let d = -D_MAX + i as f64 * STEP;
                let e: f64 = grid
                    .iter()
                    .map(|&(x, w)| w / (1.0 + (-k * (d + x)).exp()))
                    .sum();
                (1.0 - draw) * e / norm
            })
            .collect();
        DuelTruth { draw, table }
    }

    /// P(win) of a player `d` stronger than the opponent (linear between grid points).
    pub fn p_win(&self, d: f64) -> f64 {
        let (i, f) = grid_at((d.clamp(-D_MAX, D_MAX) + D_MAX) / STEP, self.table.len());
        self.table[i] * (1.0 - f) + self.table[i + 1] * f
    }
}

/// The simulator's team deathmatch under the truth: a kill race to `target` kills within
/// `limit_s`, kills a Poisson process of mean interval `interval_s`, each to team A with
/// probability `σ(k (D + ε))`, `D` the difference of the teams' effective-skill sums (true skill
/// plus party bonus) and `ε` the match's form, `N(0, 2 t form_sd²)` for teams of `t`. A result
/// is a blowout when the scores differ by more than `blowout_diff`. Tabulated by `D`: P(A wins),
/// P(draw), P(A wins by a blowout), P(B wins by a blowout). Late joins and quits, which the
/// game adds (a short-handed team takes fewer kills), are left out: they move P(win) by under
/// 0.01 and a blowout's chance by up to 0.016 (`the_team_truth_matches_the_simulators_game`).
#[derive(Debug, Clone)]
pub(crate) struct TeamTruth {
    table: Vec<[f64; 4]>,
}

/// The team race's constants, as `truth/params.json` records them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TdmConstants {
    pub target: i32,
    pub limit_s: f64,
    pub interval_s: f64,
    pub blowout_diff: i32,
    pub kill_logit: f64,
    pub form_sd: f64,
    /// Quits per player-minute in a level match and the kills behind that multiply the rate
    /// by e, when the truth records them (worlds from before them do not).
    pub quit: Option<(f64, f64)>,
}

impl TdmConstants {
    /// The game's rules for the replay with leavers, when the truth records the quit rates.
    pub fn rules(&self) -> Option<mm_sim::game::TdmRules> {
        let (quit_base_per_min, quit_deficit_kills) = self.quit?;
        Some(mm_sim::game::TdmRules {
            target: self.target,
            limit_s: self.limit_s,
            interval_s: self.interval_s,
            kill_logit: self.kill_logit,
            quit_base_per_min,
            quit_deficit_kills,
        })
    }

    fn of(c: &serde_json::Value) -> Option<TdmConstants> {
        Some(TdmConstants {
            target: i32::try_from(c["tdm_target"].as_i64()?).ok()?,
            limit_s: c["tdm_limit_s"].as_f64()?,
            interval_s: c["kill_interval_s"].as_f64()?,
            blowout_diff: i32::try_from(c["blowout_diff"].as_i64()?).ok()?,
            kill_logit: c["kill_logit_per_skill"].as_f64()?,
            form_sd: c["form_sd"].as_f64()?,
            quit: c["quit_base_per_min"]
                .as_f64()
                .zip(c["quit_deficit_kills"].as_f64()),
        })
    }
}

/// The exact result of the race for a kill share `q`: [A wins, draw, A by a blowout, B by a
/// blowout]. Paths to a score `(a, b)` below the target have probability `C(a+b, a) q^a
/// (1-q)^b`; the race stops there at the time limit when exactly `a + b` kills fall in it
/// (Poisson), or at the target when the winning kill is the `(target + loser's)`-th and it
/// falls in time.
pub(crate) fn race(c: &TdmConstants, q: f64) -> [f64; 4] {
    let t = c.target.max(1) as usize;
    let lam = c.limit_s / c.interval_s;
    // Poisson pmf and upper tail P(N >= n) for n up to 2t.
    let mut pmf = vec![0.0; 2 * t + 1];
    pmf[0] = (-lam).exp();
    for n in 1..pmf.len() {
        pmf[n] = pmf[n - 1] * lam / n as f64;
    }
    let mut tail = vec![0.0; 2 * t + 1];
    let mut below = 0.0f64;
    for n in 0..tail.len() {
        tail[n] = (1.0 - below).max(0.0);
        below += pmf[n];
    }
    let blow = |d: usize| d as i32 > c.blowout_diff;
    let mut out = [0.0; 4];
    // Row by row over a: path[b] = P(path reaches (a, b)).
    let mut prev = vec![0.0; t];
    for a in 0..t {
        let mut row = vec![0.0; t];
        for b in 0..t {
            row[b] = if a == 0 && b == 0 {
                1.0
            } else {
                let from_a = if a > 0 { prev[b] * q } else { 0.0 };
                let from_b = if b > 0 { row[b - 1] * (1.0 - q) } else { 0.0 };
                from_a + from_b
            };
            // The time limit at (a, b).
            let p = row[b] * pmf[a + b];
            match a.cmp(&b) {
                std::cmp::Ordering::Greater => {
                    out[0] += p;
                    if blow(a - b) {
                        out[2] += p;
                    }
                }
                std::cmp::Ordering::Equal => out[1] += p,
                std::cmp::Ordering::Less => {
                    if blow(b - a) {
                        out[3] += p;
                    }
                }
            }
            // B reaches the target from (a, t-1) with the next kill.
            if b == t - 1 {
                let p = row[b] * (1.0 - q) * tail[t + a];
                if blow(t - a) {
                    out[3] += p;
                }
            }
        }
        // A reaches the target from (t-1, b).
        if a == t - 1 {
            for (b, &r) in row.iter().enumerate() {
                let p = r * q * tail[t + b];
                out[0] += p;
                if blow(t - b) {
                    out[2] += p;
                }
            }
        }
        prev = row;
    }
    out
}

const TEAM_D_MAX: f64 = 24.0;
const TEAM_STEP: f64 = 0.02;

impl TeamTruth {
    /// The table for teams of `team_size` (the form's spread grows with it).
    pub fn new(c: &TdmConstants, team_size: usize) -> TeamTruth {
        // The race by kill share on a fine grid, then E over the form by the trapezoid rule
        // over ±7 sd, reading the race by linear interpolation.
        let qn = 4001;
        let by_q: Vec<[f64; 4]> = (0..qn)
            .map(|i| race(c, i as f64 / (qn - 1) as f64))
            .collect();
        let at_q = |q: f64| {
            let (i, f) = grid_at(q.clamp(0.0, 1.0) * (qn - 1) as f64, qn);
            let mut r = [0.0; 4];
            for (k, v) in r.iter_mut().enumerate() {
                *v = by_q[i][k] * (1.0 - f) + by_q[i + 1][k] * f;
            }
            r
        };
        let (grid, norm) = form_grid((2.0 * team_size as f64).sqrt() * c.form_sd, 141);
        let n = (2.0 * TEAM_D_MAX / TEAM_STEP).round() as usize + 1;
        let table = (0..n)
            .map(|i| {
                let d = -TEAM_D_MAX + i as f64 * TEAM_STEP;
                let mut r = [0.0; 4];
                for &(e, w) in &grid {
                    let q = 1.0 / (1.0 + (-c.kill_logit * (d + e)).exp());
                    for (acc, v) in r.iter_mut().zip(at_q(q)) {
                        *acc += w * v / norm;
                    }
                }
                r
            })
            .collect();
        TeamTruth { table }
    }

    /// [A wins, draw, A by a blowout, B by a blowout] when A's effective-skill sum exceeds
    /// B's by `d`.
    pub fn probs(&self, d: f64) -> [f64; 4] {
        let x = (d.clamp(-TEAM_D_MAX, TEAM_D_MAX) + TEAM_D_MAX) / TEAM_STEP;
        let (i, f) = grid_at(x, self.table.len());
        let mut r = [0.0; 4];
        for (k, v) in r.iter_mut().enumerate() {
            *v = self.table[i][k] * (1.0 - f) + self.table[i + 1][k] * f;
        }
        r
    }
}

/// A pool's members under the truth (searcher indices into [`TruthSearches`]).
#[derive(Debug)]
pub(crate) struct TruthPool<'a> {
    pub truth: &'a TruthSearches,
    pub searchers: Vec<usize>,
}

impl WinModel for TruthPool<'_> {
    fn outcome_probs(&self, i: usize, j: usize) -> OutcomeProbs {
        let t = self.truth;
        let d = t.skill[self.searchers[i]] - t.skill[self.searchers[j]];
        let win = t.win.p_win(d);
        let draw = t.win.draw;
        OutcomeProbs {
            win,
            draw,
            loss: (1.0 - win - draw).max(0.0),
        }
    }

    fn skill(&self, i: usize) -> f64 {
        self.truth.skill[self.searchers[i]]
    }
}

impl ChurnModel for TruthPool<'_> {
    fn churn(&self, i: usize, outcome: Outcome) -> f64 {
        self.truth.churn_if[self.searchers[i]][outcome.index()]
    }
}

/// The truth of every search of `h`, or why there is none (a lake that is not simulated, a
/// simulation from before the conditional columns, a remote lake, a search the truth lacks).
///
/// # Errors
/// A truth file that cannot be read.
pub(crate) fn load(
    lake: &Path,
    h: &EvalHistory,
) -> Result<Result<TruthSearches, String>, EvalError> {
    let lake = Lake::open(lake)?;
    let Some(root) = lake.root().local() else {
        return Ok(Err(
            "the lake is remote; the oracle reads a local simulated lake".into(),
        ));
    };
    let params: serde_json::Value = match std::fs::read(root.join("truth/params.json")) {
        Ok(b) => serde_json::from_slice(&b)
            .map_err(|e| EvalError::Input(format!("truth/params.json: {e}")))?,
        Err(_) => return Ok(Err("the lake has no simulator's truth".into())),
    };
    let c = &params["constants"];
    let (Some(draw), Some(k), Some(form_sd)) = (
        c["duel_draw"].as_f64(),
        c["duel_k"].as_f64(),
        c["form_sd"].as_f64(),
    ) else {
        return Ok(Err("truth/params.json lacks the 1v1 constants".into()));
    };
    let index: HashMap<&str, u32> = h
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i as u32))
        .collect();
    // (true skill, churn if win, draw, loss), and (party bonus, churn if close, blowout loss)
    // when the truth has them.
    type At = (f64, [f64; 3], Option<[f64; 3]>);
    let mut at: HashMap<(u32, i64), At> = HashMap::new();
    let wanted: Vec<&str> = COLS.iter().chain(&TEAM_COLS).copied().collect();
    let day = mm_lake::schema::day_of;
    let last = h.to_ms.min(h.data_end_ms + 1);
    for d in day(h.from_ms)..=day(last) {
        for path in mm_fit::churn::build::truth_files(&lake, d) {
            let bad = |e: String| EvalError::Input(format!("{}: {e}", path.display()));
            let batches = mm_lake::parquet_io::read_parquet_columns(&path, Some(&wanted))
                .map_err(|e| bad(e.to_string()))?;
            for b in batches {
                let col = |n: &str| b.column_by_name(n).ok_or_else(|| n.to_string());
                let cols: Result<Vec<_>, String> = COLS.iter().map(|n| col(n)).collect();
                let cols = match cols {
                    Ok(c) => c,
                    Err(missing) => {
                        return Ok(Err(format!(
                            "the truth has no {missing} column (simulated by an older mm)"
                        )));
                    }
                };
                let ids = cols[0].as_string::<i32>();
                let start = cols[1].as_primitive::<TimestampMillisecondType>();
                let f = |k: usize| cols[k].as_primitive::<Float64Type>();
                let (skill, cw, cd, cl) = (f(2), f(3), f(4), f(5));
                let team: Option<Vec<_>> = TEAM_COLS
                    .iter()
                    .map(|n| b.column_by_name(n).map(|c| c.as_primitive::<Float64Type>()))
                    .collect();
                for i in 0..b.num_rows() {
                    if let Some(&p) = index.get(ids.value(i)) {
                        let extra = team
                            .as_ref()
                            .map(|t| [t[0].value(i), t[1].value(i), t[2].value(i)]);
                        at.insert(
                            (p, start.value(i)),
                            (
                                skill.value(i),
                                [cw.value(i), cd.value(i), cl.value(i)],
                                extra,
                            ),
                        );
                    }
                }
            }
        }
    }
    let mut skill = Vec::with_capacity(h.searchers.len());
    let mut churn_if = Vec::with_capacity(h.searchers.len());
    let mut party_bonus = Vec::with_capacity(h.searchers.len());
    let mut churn_if_loss = Some(Vec::with_capacity(h.searchers.len()));
    for s in &h.searchers {
        let Some(&(sk, c, extra)) = at.get(&(s.player, s.start_ms)) else {
            return Ok(Err(format!(
                "the truth has no row for {} at {}",
                h.ids[s.player as usize],
                crate::error::fmt_ms(s.start_ms)
            )));
        };
        skill.push(sk);
        churn_if.push(c);
        party_bonus.push(extra.map_or(0.0, |e| e[0]));
        match (extra, churn_if_loss.as_mut()) {
            (Some(e), Some(v)) => v.push([e[1], e[2]]),
            _ => churn_if_loss = None,
        }
    }
    Ok(Ok(TruthSearches {
        skill,
        churn_if,
        win: DuelTruth::new(draw, k, form_sd),
        party_bonus,
        churn_if_loss,
        tdm: TdmConstants::of(c),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tdm_constants() -> TdmConstants {
        use mm_sim::game;
        TdmConstants {
            target: game::TDM_TARGET,
            limit_s: game::TDM_LIMIT_S,
            interval_s: game::KILL_INTERVAL_S,
            blowout_diff: game::BLOWOUT_DIFF,
            kill_logit: game::KILL_LOGIT_PER_SKILL,
            form_sd: game::FORM_SD,
            quit: Some((game::QUIT_BASE_PER_MIN, game::QUIT_DEFICIT_KILLS)),
        }
    }

    /// The exact race is a distribution (A's, the draws' and B's shares add to one), mirrors
    /// itself (A at q is B at 1 - q), and a blowout is a win.
    #[test]
    fn the_race_is_a_distribution_and_symmetric() {
        let c = tdm_constants();
        for q in [0.0, 0.1, 0.37, 0.5, 0.62, 0.93, 1.0] {
            let r = race(&c, q);
            let m = race(&c, 1.0 - q);
            let b_win = 1.0 - r[0] - r[1];
            assert!(
                r.iter().all(|p| (-1e-12..=1.0 + 1e-12).contains(p)),
                "{q}: {r:?}"
            );
            assert!(
                (r[0] - (1.0 - m[0] - m[1])).abs() < 1e-9,
                "{q}: {r:?} {m:?}"
            );
            assert!((r[2] - m[3]).abs() < 1e-9 && (r[1] - m[1]).abs() < 1e-9);
            assert!(r[2] <= r[0] + 1e-12 && r[3] <= b_win + 1e-12);
        }
        // Even teams: no edge, the same blowouts both ways.
        let r = race(&c, 0.5);
        assert!((r[0] - (1.0 - r[0] - r[1])).abs() < 1e-12 && (r[2] - r[3]).abs() < 1e-12);
    }

    /// The tabulated race against the simulator's own game (`mm_sim::game::tdm`, with its
    /// form, late joins and quits) by Monte Carlo: 6v6 lobbies at several skill-sum
    /// differences.
    #[test]
    fn the_team_truth_matches_the_simulators_game() {
        use mm_sim::game::{FORM_SD, Slot, tdm};
        use rand::{Rng, SeedableRng};
        let t = TeamTruth::new(&tdm_constants(), 6);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let n = 6000;
        for d in [0.0, 1.5, -3.0, 6.0] {
            let mut got = [0.0; 4];
            for _ in 0..n {
                let slots: Vec<Slot> = (0..12)
                    .map(|i| {
                        let (u, v): (f64, f64) = (rng.random(), rng.random());
                        let z = (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos();
                        let team = usize::from(i >= 6);
                        let base = if team == 0 { d / 6.0 } else { 0.0 };
                        Slot {
                            team,
                            eff: base + FORM_SD * z,
                        }
                    })
                    .collect();
                let r = tdm(&slots, &mut rng);
                let o = r.outcome(0);
                got[0] += f64::from(u8::from(o == 0));
                got[1] += f64::from(u8::from(o == 1));
                got[2] += f64::from(u8::from(o == 0 && r.blowout()));
                got[3] += f64::from(u8::from(o == 2 && r.blowout()));
            }
            let want = t.probs(d);
            for k in 0..4 {
                let mc = got[k] / f64::from(n);
                // Binomial sd at most 0.0065; late joins and quits, which the table leaves out,
                // move P(win) by under 0.01 and a blowout by up to 0.016 (a short-handed team
                // falls further behind).
                assert!(
                    (mc - want[k]).abs() < 0.02,
                    "d {d}, k {k}: game {mc}, table {}",
                    want[k]
                );
            }
        }
        // A stronger team A wins more and is blown out less.
        assert!(t.probs(3.0)[0] > t.probs(0.0)[0] && t.probs(3.0)[3] < t.probs(0.0)[3]);
    }

    #[test]
    fn the_tabulated_win_model_is_the_simulators_averaged_over_form() {
        let t = DuelTruth::new(0.2, 1.2, 0.3);
        // Equal skills: half of the decisive matches.
        assert!((t.p_win(0.0) - 0.4).abs() < 1e-9);
        // Symmetric: P(win | d) + P(win | -d) = 1 - draw.
        for d in [0.1, 0.7, 2.5] {
            assert!((t.p_win(d) + t.p_win(-d) - 0.8).abs() < 1e-9, "{d}");
        }
        // Without form it is the simulator's own formula.
        let bare = DuelTruth::new(0.2, 1.2, 1e-9);
        let d: f64 = 0.8;
        assert!((bare.p_win(d) - 0.8 / (1.0 + (-1.2 * d).exp())).abs() < 1e-6);
        // Form flattens it: a stronger player wins less often than without form. Checked
        // against a Monte Carlo average of the same formula.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let n = 400_000;
        let mc: f64 = (0..n)
            .map(|_| {
                // Sum of two N(0, 0.3²) by Box-Muller.
                let g = |r: &mut rand_chacha::ChaCha8Rng| {
                    let (u, v): (f64, f64) = (r.random(), r.random());
                    (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
                };
                let e = 0.3 * (g(&mut rng) - g(&mut rng));
                0.8 / (1.0 + (-1.2 * (d + e)).exp())
            })
            .sum::<f64>()
            / f64::from(n);
        assert!(t.p_win(d) < bare.p_win(d));
        assert!((t.p_win(d) - mc).abs() < 2e-3, "{} vs {mc}", t.p_win(d));
    }
}
