//! The team win model and the party adjustment.
//!
//! **Win model** (the analogue of Figure 2 of the Call of Duty paper): the log-odds that team A
//! beats team B in a decisive match is linear in the difference of the teams' raw-skill sums,
//!
//! `logit P(A wins | decisive) = b * (sum r_A - sum r_B)
//!                             + g_m * (members_A - members_B) + g_s * (spread_A - spread_B)`,
//!
//! with no intercept: sides are exchangeable, and every match enters the fit from both sides.
//! `members_T` counts team T's players who queued in a party of two or more; `spread_T` sums,
//! over those players, the standard deviation of their party's raw skills. These party terms are
//! the Dota 2 post's: a party coordinates better than its members' solo ratings say, and more so
//! when the members differ in skill.
//!
//! **Party adjustment**: dividing the party coefficients by the skill coefficient turns them into
//! raw-skill units per party member: a player in a party of spread `sd` counts as
//! `r + (g_m + g_s * sd) / b` when the teams are compared.
//!
//! **Draws** (games that have them): `logit P(draw) = d_0 + d_1 * |sum r_A - sum r_B|`; the
//! decisive part is split by the win model.
//!
//! Every logistic regression is linfa-logistic's (L-BFGS, L2 penalty `alpha` on the
//! coefficients, not on the intercept).

use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

use crate::logit::{LogitFit, fit_logistic};
pub use mm_artifact::team::{
    BlowoutModel, DrawModel, PartyAdjustment, SkillBasis, TeamSample, TeamWinModel,
};

/// What to fit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TeamFitConfig {
    /// Fit the party terms (when any sample has a party).
    pub party_terms: bool,
    /// Fit the draw model (when the samples have at least `min_draws` draws).
    pub draws: bool,
    pub min_draws: u64,
    /// L2 penalty on the coefficients (the loss is summed over samples, so this is small).
    pub alpha: f64,
    pub max_iterations: u64,
    /// A loss by more than this many team-score points is a blowout ([`fit_blowout`]).
    #[serde(default = "default_blowout_margin")]
    pub blowout_margin: f64,
}

/// The Call of Duty paper's blowout in TDM: a loss by more than 30 points (the churn fit's
/// default too).
pub const BLOWOUT_MARGIN: f64 = 30.0;

fn default_blowout_margin() -> f64 {
    BLOWOUT_MARGIN
}

/// The fewest decisive matches with both team scores, and blowouts among them, for
/// [`fit_blowout`] to fit a model.
pub const MIN_BLOWOUT_SAMPLES: u64 = 200;
pub const MIN_BLOWOUTS: u64 = 20;

impl Default for TeamFitConfig {
    fn default() -> Self {
        TeamFitConfig {
            party_terms: true,
            draws: true,
            min_draws: 20,
            alpha: 1e-3,
            max_iterations: 200,
            blowout_margin: BLOWOUT_MARGIN,
        }
    }
}

/// The blowout model of `model` ([`BlowoutModel`]): a logistic regression (linfa's, with an
/// intercept) of whether the losing team of each decisive sample with a known margin lost by
/// more than `cfg.blowout_margin`, on `model`'s log-odds that that team would win. `None` with
/// fewer than [`MIN_BLOWOUT_SAMPLES`] such matches or fewer than [`MIN_BLOWOUTS`] blowouts (or
/// as many close losses): nothing to tell losses apart by.
///
/// # Errors
/// The regression failed.
pub fn fit_blowout(
    model: &TeamWinModel,
    samples: &[TeamSample],
    cfg: &TeamFitConfig,
) -> Result<Option<BlowoutModel>, TeamFitError> {
    if !(cfg.blowout_margin.is_finite() && cfg.blowout_margin >= 0.0) {
        return Err(TeamFitError::Config {
            field: "blowout_margin",
            rule: "finite and non-negative",
        });
    }
    // Each decisive match from its loser's side: the loser's log-odds, and a blowout or not.
    let (z, y): (Vec<f64>, Vec<bool>) = samples
        .iter()
        .filter(|s| s.outcome != 0.5 && s.margin.is_finite())
        .map(|s| {
            let loser = if s.outcome > 0.5 { s.mirrored() } else { *s };
            (model.logit(&loser), -loser.margin > cfg.blowout_margin)
        })
        .unzip();
    let n = z.len() as u64;
    let blowouts = y.iter().filter(|&&b| b).count() as u64;
    if n < MIN_BLOWOUT_SAMPLES || blowouts < MIN_BLOWOUTS || n - blowouts < MIN_BLOWOUTS {
        return Ok(None);
    }
    let x =
        Array2::from_shape_vec((z.len(), 1), z).map_err(|e| TeamFitError::Linfa(e.to_string()))?;
    let (w, b) = logistic(&x, Array1::from(y), cfg, true)?;
    Ok(Some(BlowoutModel {
        margin: cfg.blowout_margin,
        intercept: b,
        coef: w[0],
        samples: n,
        blowouts,
    }))
}

/// Why a team model could not be fitted.
#[derive(Debug, thiserror::Error)]
pub enum TeamFitError {
    #[error("team win model: {0} decisive matches; at least 2 are needed")]
    TooFew(u64),
    #[error("team win model: {0}")]
    Linfa(String),
    #[error("team win model: {field} must be {rule}")]
    Config {
        field: &'static str,
        rule: &'static str,
    },
}

fn logistic(
    x: &Array2<f64>,
    y: Array1<bool>,
    cfg: &TeamFitConfig,
    intercept: bool,
) -> Result<(Array1<f64>, f64), TeamFitError> {
    fit_logistic(
        x,
        y,
        &LogitFit {
            alpha: cfg.alpha,
            intercept,
            max_iterations: cfg.max_iterations,
            gradient_tolerance: None,
        },
    )
    .map_err(TeamFitError::Linfa)
}

/// Fitting, which needs linfa; the model itself is the artifact crate's.
pub trait FitTeamWinModel: Sized {
    /// Fits the model to matches seen before their outcome was known.
    fn fit(samples: &[TeamSample], cfg: &TeamFitConfig) -> Result<Self, TeamFitError>;
}

impl FitTeamWinModel for TeamWinModel {
    /// Fits the model to matches seen before their outcome was known.
    fn fit(samples: &[TeamSample], cfg: &TeamFitConfig) -> Result<TeamWinModel, TeamFitError> {
        if !(cfg.alpha.is_finite() && cfg.alpha >= 0.0) {
            return Err(TeamFitError::Config {
                field: "alpha",
                rule: "finite and non-negative",
            });
        }
        let decisive: Vec<&TeamSample> = samples.iter().filter(|s| s.outcome != 0.5).collect();
        if decisive.len() < 2 {
            return Err(TeamFitError::TooFew(decisive.len() as u64));
        }
        let party = cfg.party_terms
            && decisive
                .iter()
                .any(|s| s.party_members_diff != 0.0 || s.party_spread_diff != 0.0);
        let k = if party { 3 } else { 1 };
        // Every match from both sides: the classes balance and the fit needs no intercept.
        let n = 2 * decisive.len();
        let mut x = Array2::<f64>::zeros((n, k));
        let mut y = Array1::<bool>::from_elem(n, false);
        for (r, s) in decisive
            .iter()
            .flat_map(|s| [**s, s.mirrored()])
            .enumerate()
        {
            x[[r, 0]] = s.skill_diff;
            if party {
                x[[r, 1]] = s.party_members_diff;
                x[[r, 2]] = s.party_spread_diff;
            }
            y[r] = s.outcome > 0.5;
        }
        let (w, _) = logistic(&x, y, cfg, false)?;
        let draws = samples.len() as u64 - decisive.len() as u64;
        let draw = if cfg.draws && draws >= cfg.min_draws {
            let x = Array2::from_shape_fn((samples.len(), 1), |(r, _)| samples[r].skill_diff.abs());
            let y: Array1<bool> = samples.iter().map(|s| s.outcome == 0.5).collect();
            let (w, b) = logistic(&x, y, cfg, true)?;
            Some(DrawModel {
                intercept: b,
                abs_diff_coef: w[0],
            })
        } else {
            None
        };
        Ok(TeamWinModel {
            basis: SkillBasis::RawSkill,
            skill_coef: w[0],
            party_members_coef: if party { w[1] } else { 0.0 },
            party_spread_coef: if party { w[2] } else { 0.0 },
            draw,
            samples: samples.len() as u64,
            draws,
            blowout: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sigmoid;

    /// Matches drawn from a known model: the fit recovers its coefficients, and the party
    /// adjustment is their ratio.
    #[test]
    fn recovers_known_coefficients() {
        // A small deterministic generator (no rand dependency in the library's unit tests).
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut unif = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let (b, gm, gs) = (8.0, 0.4, 1.5);
        let mut samples = Vec::new();
        for _ in 0..60_000 {
            let d = (unif() - 0.5) * 0.6;
            let m = (unif() * 7.0).floor() - 3.0;
            let sp = m * unif() * 0.2;
            let p = sigmoid(b * d + gm * m + gs * sp);
            samples.push(TeamSample {
                skill_diff: d,
                party_members_diff: m,
                party_spread_diff: sp,
                outcome: if unif() < p { 1.0 } else { 0.0 },
                margin: f64::NAN,
            });
        }
        let f = TeamWinModel::fit(&samples, &TeamFitConfig::default()).unwrap();
        assert!((f.skill_coef - b).abs() < 0.4, "{f:?}");
        assert!((f.party_members_coef - gm).abs() < 0.06, "{f:?}");
        assert!((f.party_spread_coef - gs).abs() < 0.6, "{f:?}");
        let adj = f.party_adjustment().unwrap();
        assert!((adj.per_member - gm / b).abs() < 0.01, "{adj:?}");
        assert!(f.draw.is_none());
        let c = f.curve(0.3, 7);
        assert!((c[3].1 - 0.5).abs() < 1e-12 && c.windows(2).all(|w| w[1].1 > w[0].1));
    }

    #[test]
    fn draws_fall_with_the_skill_gap() {
        let mut samples = Vec::new();
        for k in 0..4000 {
            let d = (k % 40) as f64 / 100.0 - 0.2;
            // Draw in one of three close matches, one in ten of the others.
            let draw = if d.abs() < 0.1 {
                k % 3 == 0
            } else {
                k % 10 == 0
            };
            let outcome = if draw {
                0.5
            } else if (k / 40) % 4 == 0 {
                f64::from(d < 0.0)
            } else {
                f64::from(d > 0.0)
            };
            samples.push(TeamSample {
                skill_diff: d,
                outcome,
                ..TeamSample::default()
            });
        }
        let f = TeamWinModel::fit(&samples, &TeamFitConfig::default()).unwrap();
        let dm = f.draw.unwrap();
        assert!(dm.abs_diff_coef < 0.0, "{dm:?}");
        let (w, d, l) = f.probs(&TeamSample {
            skill_diff: 0.1,
            ..TeamSample::default()
        });
        assert!((w + d + l - 1.0).abs() < 1e-12 && w > l && d > 0.0);
        assert_eq!(f.party_adjustment().map(|a| a.per_member), Some(0.0));
    }

    /// Blowouts drawn from a known model of the loser's log-odds: the fit recovers it, a
    /// mirrored sample counts once from its loser's side, and samples without a margin are
    /// left out.
    #[test]
    fn the_blowout_model_recovers_known_coefficients() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut unif = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        // A win model of 5 per unit of skill difference, no party terms, no draws.
        let model = TeamWinModel {
            basis: SkillBasis::RawSkill,
            skill_coef: 5.0,
            party_members_coef: 0.0,
            party_spread_coef: 0.0,
            draw: None,
            samples: 0,
            draws: 0,
            blowout: None,
        };
        let (a, b) = (-1.5, -0.8);
        let mut samples = Vec::new();
        for k in 0..40_000 {
            let d = (unif() - 0.5) * 0.8;
            let a_wins = unif() < sigmoid(5.0 * d);
            // The loser's log-odds of winning.
            let z = if a_wins { -5.0 * d } else { 5.0 * d };
            let blown = unif() < sigmoid(a + b * z);
            let loser_margin = if blown {
                -31.0 - 10.0 * unif()
            } else {
                -30.0 * unif()
            };
            samples.push(TeamSample {
                skill_diff: d,
                outcome: f64::from(u8::from(a_wins)),
                margin: if a_wins { -loser_margin } else { loser_margin },
                ..TeamSample::default()
            });
            if k % 4 == 0 {
                samples.push(TeamSample {
                    skill_diff: d,
                    outcome: 0.0,
                    ..TeamSample::default()
                });
            }
        }
        let f = fit_blowout(&model, &samples, &TeamFitConfig::default())
            .unwrap()
            .unwrap();
        assert_eq!(f.samples, 40_000);
        assert!((f.intercept - a).abs() < 0.06, "{f:?}");
        assert!((f.coef - b).abs() < 0.06, "{f:?}");
        let with = TeamWinModel {
            blowout: Some(f),
            ..model
        };
        let [qa, qb] = with.blowout_given_loss(1.0).unwrap();
        assert!((qa - sigmoid(f.intercept + f.coef)).abs() < 1e-12);
        assert!((qb - sigmoid(f.intercept - f.coef)).abs() < 1e-12);
        assert!(qb > qa, "the favourite that loses is blown out less");
        assert!(
            fit_blowout(&model, &samples[..100], &TeamFitConfig::default())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn too_few_decisive_matches() {
        let s = [TeamSample {
            outcome: 0.5,
            ..TeamSample::default()
        }];
        assert!(matches!(
            TeamWinModel::fit(&s, &TeamFitConfig::default()),
            Err(TeamFitError::TooFew(0))
        ));
    }
}
