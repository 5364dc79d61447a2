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
        let s = std::f64::consts::SQRT_2 * form_sd;
        let nodes = 561;
        let grid: Vec<(f64, f64)> = (0..nodes)
            .map(|i| {
                let z = -7.0 + 14.0 * i as f64 / (nodes - 1) as f64;
                let w = if i == 0 || i == nodes - 1 { 0.5 } else { 1.0 };
                (z * s, w * (-0.5 * z * z).exp())
            })
            .collect();
        let norm: f64 = grid.iter().map(|g| g.1).sum();
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
        let x = ((d.clamp(-D_MAX, D_MAX) + D_MAX) / STEP).min((self.table.len() - 1) as f64);
        let i = (x.floor() as usize).min(self.table.len() - 2);
        let f = x - i as f64;
        self.table[i] * (1.0 - f) + self.table[i + 1] * f
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
    let mut at: HashMap<(u32, i64), (f64, [f64; 3])> = HashMap::new();
    let day = |ms: i64| ms.div_euclid(86_400_000) as i32;
    let last = h.to_ms.min(h.data_end_ms + 1);
    for d in day(h.from_ms)..=day(last) {
        for path in mm_fit::churn_build::truth_files(&lake, d) {
            let bad = |e: String| EvalError::Input(format!("{}: {e}", path.display()));
            let batches = mm_lake::parquet_io::read_parquet_columns(&path, Some(&COLS))
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
                for i in 0..b.num_rows() {
                    if let Some(&p) = index.get(ids.value(i)) {
                        at.insert(
                            (p, start.value(i)),
                            (skill.value(i), [cw.value(i), cd.value(i), cl.value(i)]),
                        );
                    }
                }
            }
        }
    }
    let mut skill = Vec::with_capacity(h.searchers.len());
    let mut churn_if = Vec::with_capacity(h.searchers.len());
    for s in &h.searchers {
        let Some(&(sk, c)) = at.get(&(s.player, s.start_ms)) else {
            return Ok(Err(format!(
                "the truth has no row for {} at {}",
                h.ids[s.player as usize],
                crate::error::fmt_ms(s.start_ms)
            )));
        };
        skill.push(sk);
        churn_if.push(c);
    }
    Ok(Ok(TruthSearches {
        skill,
        churn_if,
        win: DuelTruth::new(draw, k, form_sd),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
