//! Rating-system baselines through the `skillratings` crate: Elo, Glicko-2, TrueSkill and
//! Weng-Lin (the Bayesian approximation that openskill implements), behind one interface that
//! predicts team A's expected score before a match and updates after it.
//!
//! Teams: TrueSkill and Weng-Lin are team models, and the crate's two-team functions are used
//! as they are. Elo and Glicko-2 are defined for two players; for teams they use the usual
//! composite:
//! - Elo: a team's rating is its members' mean; the Elo update of the two means is added to
//!   every member.
//! - Glicko-2: each player is rated against the opposing team as one composite opponent (mean
//!   rating, root-mean-square deviation).
//!
//! With one player a side both reduce to the plain two-player systems.
//!
//! Weng-Lin in `skillratings` has no dynamics term, so a player's uncertainty only shrinks.
//! Like openskill's `tau`, [`BaselineParams::tau`] adds `tau^2` to every participant's variance
//! before each match (0 leaves the crate's behaviour unchanged).

use serde::{Deserialize, Serialize};
use skillratings::Outcomes;
use skillratings::elo::{EloConfig, EloRating};
use skillratings::glicko2::{Glicko2Config, Glicko2Rating};
use skillratings::trueskill::{TrueSkillConfig, TrueSkillRating};
use skillratings::weng_lin::{WengLinConfig, WengLinRating};

/// Which system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaselineKind {
    Elo,
    Glicko2,
    TrueSkill,
    WengLin,
}

impl BaselineKind {
    pub const ALL: [BaselineKind; 4] = [
        BaselineKind::Elo,
        BaselineKind::Glicko2,
        BaselineKind::TrueSkill,
        BaselineKind::WengLin,
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            BaselineKind::Elo => "elo",
            BaselineKind::Glicko2 => "glicko2",
            BaselineKind::TrueSkill => "trueskill",
            BaselineKind::WengLin => "weng-lin",
        }
    }

    /// The crate's defaults.
    #[must_use]
    pub fn default_params(self) -> BaselineParams {
        match self {
            BaselineKind::Elo => BaselineParams {
                kind: self,
                k: EloConfig::new().k,
                tau: 0.0,
                beta: 0.0,
                draw_probability: 0.0,
            },
            BaselineKind::Glicko2 => BaselineParams {
                kind: self,
                k: 0.0,
                tau: Glicko2Config::new().tau,
                beta: 0.0,
                draw_probability: 0.0,
            },
            BaselineKind::TrueSkill => {
                let c = TrueSkillConfig::new();
                BaselineParams {
                    kind: self,
                    k: 0.0,
                    tau: c.dynamics_factor,
                    beta: c.beta,
                    draw_probability: c.draw_probability,
                }
            }
            BaselineKind::WengLin => BaselineParams {
                kind: self,
                k: 0.0,
                tau: 0.0,
                beta: WengLinConfig::new().beta,
                draw_probability: 0.0,
            },
        }
    }

    /// The tuning grid: the defaults and the values around them that matter most for each
    /// system (Elo's K; Glicko-2's volatility constraint tau; TrueSkill's and Weng-Lin's
    /// performance noise beta and dynamics tau).
    #[must_use]
    pub fn grid(self, draw_probability: f64) -> Vec<BaselineParams> {
        let d = self.default_params();
        match self {
            BaselineKind::Elo => [8.0, 12.0, 16.0, 20.0, 24.0, 28.0, 32.0, 40.0, 48.0, 64.0]
                .iter()
                .map(|&k| BaselineParams { k, ..d })
                .collect(),
            BaselineKind::Glicko2 => [0.2, 0.3, 0.5, 0.75, 1.0, 1.2]
                .iter()
                .map(|&tau| BaselineParams { tau, ..d })
                .collect(),
            BaselineKind::TrueSkill | BaselineKind::WengLin => {
                let mut g = Vec::new();
                for bm in [0.5, 0.75, 1.0, 1.5, 2.0] {
                    for tm in [0.0, 0.5, 1.0, 2.0] {
                        // For Weng-Lin, tau is relative to TrueSkill's default dynamics.
                        let tau0 = BaselineKind::TrueSkill.default_params().tau;
                        g.push(BaselineParams {
                            beta: d.beta * bm,
                            tau: tau0 * tm,
                            draw_probability,
                            ..d
                        });
                    }
                }
                g
            }
        }
    }
}

/// Hyperparameters; the fields a system does not use are 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BaselineParams {
    pub kind: BaselineKind,
    /// Elo's K.
    pub k: f64,
    /// Glicko-2's tau; TrueSkill's dynamics factor; Weng-Lin's added dynamics (see the module).
    pub tau: f64,
    /// TrueSkill's and Weng-Lin's beta.
    pub beta: f64,
    /// TrueSkill's draw probability.
    pub draw_probability: f64,
}

#[derive(Debug, Clone)]
enum Ratings {
    Elo(Vec<EloRating>, EloConfig),
    Glicko2(Vec<Glicko2Rating>, Glicko2Config),
    TrueSkill(Vec<TrueSkillRating>, TrueSkillConfig),
    WengLin(Vec<WengLinRating>, WengLinConfig, f64),
}

/// A rating system's state over players `0..n`, grown on demand.
#[derive(Debug, Clone)]
pub struct Baseline {
    params: BaselineParams,
    ratings: Ratings,
    // Scratch team buffers, reused.
    buf_a: Vec<usize>,
    buf_b: Vec<usize>,
}

fn outcome_of(score_a: f64) -> Outcomes {
    if score_a > 0.5 {
        Outcomes::WIN
    } else if score_a < 0.5 {
        Outcomes::LOSS
    } else {
        Outcomes::DRAW
    }
}

fn grow<T: Default + Clone>(v: &mut Vec<T>, team: &[usize]) {
    if let Some(&m) = team.iter().max()
        && v.len() <= m
    {
        v.resize(m + 1, T::default());
    }
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n.max(1) as f64
}

fn composite_g2(r: &[Glicko2Rating], team: &[usize]) -> Glicko2Rating {
    Glicko2Rating {
        rating: mean(team.iter().map(|&i| r[i].rating)),
        deviation: mean(team.iter().map(|&i| r[i].deviation.powi(2))).sqrt(),
        volatility: mean(team.iter().map(|&i| r[i].volatility)),
    }
}

impl Baseline {
    #[must_use]
    pub fn new(params: BaselineParams) -> Baseline {
        let ratings = match params.kind {
            BaselineKind::Elo => Ratings::Elo(Vec::new(), EloConfig { k: params.k }),
            BaselineKind::Glicko2 => Ratings::Glicko2(
                Vec::new(),
                Glicko2Config {
                    tau: params.tau,
                    ..Glicko2Config::new()
                },
            ),
            BaselineKind::TrueSkill => Ratings::TrueSkill(
                Vec::new(),
                TrueSkillConfig {
                    draw_probability: params.draw_probability,
                    beta: params.beta,
                    dynamics_factor: params.tau,
                },
            ),
            BaselineKind::WengLin => Ratings::WengLin(
                Vec::new(),
                WengLinConfig {
                    beta: params.beta,
                    ..WengLinConfig::new()
                },
                params.tau,
            ),
        };
        Baseline {
            params,
            ratings,
            buf_a: Vec::new(),
            buf_b: Vec::new(),
        }
    }

    #[must_use]
    pub fn params(&self) -> &BaselineParams {
        &self.params
    }

    /// Team A's expected score (win 1, draw 1/2) against team B.
    #[must_use]
    pub fn expected_score(&self, a: &[usize], b: &[usize]) -> f64 {
        match &self.ratings {
            Ratings::Elo(r, _) => {
                let get = |i: usize| r.get(i).copied().unwrap_or_default().rating;
                let (ra, rb) = (
                    mean(a.iter().map(|&i| get(i))),
                    mean(b.iter().map(|&i| get(i))),
                );
                skillratings::elo::expected_score(
                    &EloRating { rating: ra },
                    &EloRating { rating: rb },
                )
                .0
            }
            Ratings::Glicko2(r, _) => {
                let team = |t: &[usize]| -> Vec<Glicko2Rating> {
                    t.iter()
                        .map(|&i| r.get(i).copied().unwrap_or_default())
                        .collect()
                };
                let (ta, tb) = (team(a), team(b));
                let ia: Vec<usize> = (0..ta.len()).collect();
                let ib: Vec<usize> = (0..tb.len()).collect();
                skillratings::glicko2::expected_score(
                    &composite_g2(&ta, &ia),
                    &composite_g2(&tb, &ib),
                )
                .0
            }
            Ratings::TrueSkill(r, c) => {
                let team = |t: &[usize]| -> Vec<TrueSkillRating> {
                    t.iter()
                        .map(|&i| r.get(i).copied().unwrap_or_default())
                        .collect()
                };
                skillratings::trueskill::expected_score_two_teams(&team(a), &team(b), c).0
            }
            Ratings::WengLin(r, c, tau) => {
                let team = |t: &[usize]| -> Vec<WengLinRating> {
                    t.iter()
                        .map(|&i| widen(r.get(i).copied().unwrap_or_default(), *tau))
                        .collect()
                };
                skillratings::weng_lin::expected_score_two_teams(&team(a), &team(b), c).0
            }
        }
    }

    /// Updates after a match with A's score `score_a` (1 win, 1/2 draw, 0 loss).
    pub fn update(&mut self, a: &[usize], b: &[usize], score_a: f64) {
        let outcome = outcome_of(score_a);
        self.buf_a.clear();
        self.buf_a.extend_from_slice(a);
        self.buf_b.clear();
        self.buf_b.extend_from_slice(b);
        let (a, b) = (&self.buf_a[..], &self.buf_b[..]);
        match &mut self.ratings {
            Ratings::Elo(r, c) => {
                grow(r, a);
                grow(r, b);
                let ma = EloRating {
                    rating: mean(a.iter().map(|&i| r[i].rating)),
                };
                let mb = EloRating {
                    rating: mean(b.iter().map(|&i| r[i].rating)),
                };
                let (na, nb) = skillratings::elo::elo(&ma, &mb, &outcome, c);
                for &i in a {
                    r[i].rating += na.rating - ma.rating;
                }
                for &i in b {
                    r[i].rating += nb.rating - mb.rating;
                }
            }
            Ratings::Glicko2(r, c) => {
                grow(r, a);
                grow(r, b);
                let (ca, cb) = (composite_g2(r, a), composite_g2(r, b));
                let new_a: Vec<Glicko2Rating> = a
                    .iter()
                    .map(|&i| skillratings::glicko2::glicko2(&r[i], &cb, &outcome, c).0)
                    .collect();
                let new_b: Vec<Glicko2Rating> = b
                    .iter()
                    .map(|&i| skillratings::glicko2::glicko2(&ca, &r[i], &outcome, c).1)
                    .collect();
                for (&i, n) in a.iter().zip(new_a) {
                    r[i] = n;
                }
                for (&i, n) in b.iter().zip(new_b) {
                    r[i] = n;
                }
            }
            Ratings::TrueSkill(r, c) => {
                grow(r, a);
                grow(r, b);
                let ta: Vec<TrueSkillRating> = a.iter().map(|&i| r[i]).collect();
                let tb: Vec<TrueSkillRating> = b.iter().map(|&i| r[i]).collect();
                let (na, nb) = skillratings::trueskill::trueskill_two_teams(&ta, &tb, &outcome, c);
                for (&i, n) in a.iter().zip(na) {
                    r[i] = n;
                }
                for (&i, n) in b.iter().zip(nb) {
                    r[i] = n;
                }
            }
            Ratings::WengLin(r, c, tau) => {
                grow(r, a);
                grow(r, b);
                let ta: Vec<WengLinRating> = a.iter().map(|&i| widen(r[i], *tau)).collect();
                let tb: Vec<WengLinRating> = b.iter().map(|&i| widen(r[i], *tau)).collect();
                let (na, nb) = skillratings::weng_lin::weng_lin_two_teams(&ta, &tb, &outcome, c);
                for (&i, n) in a.iter().zip(na) {
                    r[i] = n;
                }
                for (&i, n) in b.iter().zip(nb) {
                    r[i] = n;
                }
            }
        }
    }

    /// A player's uncertainty on the system's own scale: Glicko-2's deviation, TrueSkill's and
    /// Weng-Lin's standard deviation; 0 for Elo.
    #[must_use]
    pub fn uncertainty(&self, i: usize) -> f64 {
        match &self.ratings {
            Ratings::Elo(..) => 0.0,
            Ratings::Glicko2(r, _) => r.get(i).copied().unwrap_or_default().deviation,
            Ratings::TrueSkill(r, _) => r.get(i).copied().unwrap_or_default().uncertainty,
            Ratings::WengLin(r, _, _) => r.get(i).copied().unwrap_or_default().uncertainty,
        }
    }

    /// A player's rating on the system's own scale (its mean for the Bayesian systems).
    #[must_use]
    pub fn rating(&self, i: usize) -> f64 {
        match &self.ratings {
            Ratings::Elo(r, _) => r.get(i).copied().unwrap_or_default().rating,
            Ratings::Glicko2(r, _) => r.get(i).copied().unwrap_or_default().rating,
            Ratings::TrueSkill(r, _) => r.get(i).copied().unwrap_or_default().rating,
            Ratings::WengLin(r, _, _) => r.get(i).copied().unwrap_or_default().rating,
        }
    }
}

fn widen(r: WengLinRating, tau: f64) -> WengLinRating {
    WengLinRating {
        uncertainty: (r.uncertainty * r.uncertainty + tau * tau).sqrt(),
        ..r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand case, one player a side: Elo with K = 32 from 1000 each, A wins: both expected
    /// 1/2, A gains 16.
    #[test]
    fn elo_one_on_one_by_hand() {
        let mut b = Baseline::new(BaselineParams {
            k: 32.0,
            ..BaselineKind::Elo.default_params()
        });
        assert!((b.expected_score(&[0], &[1]) - 0.5).abs() < 1e-12);
        b.update(&[0], &[1], 1.0);
        assert!((b.rating(0) - 1016.0).abs() < 1e-9 && (b.rating(1) - 984.0).abs() < 1e-9);
        // 32 points apart: 1 / (1 + 10^(-32/400)).
        let p = 1.0 / (1.0 + 10f64.powf(-32.0 / 400.0));
        assert!((b.expected_score(&[0], &[1]) - p).abs() < 1e-12);
    }

    /// Teams of equal players behave like one player a side, for every system: the stronger
    /// side is favoured after it wins, and the expected scores of the two sides add to 1.
    #[test]
    fn every_system_learns_from_team_results() {
        for kind in BaselineKind::ALL {
            let mut b = Baseline::new(kind.default_params());
            for _ in 0..20 {
                b.update(&[0, 1, 2], &[3, 4, 5], 1.0);
            }
            let p = b.expected_score(&[0, 1, 2], &[3, 4, 5]);
            let q = b.expected_score(&[3, 4, 5], &[0, 1, 2]);
            assert!(p > 0.8, "{kind:?} {p}");
            assert!((p + q - 1.0).abs() < 1e-9, "{kind:?} {p} {q}");
            assert!(b.rating(0) > b.rating(3), "{kind:?}");
        }
    }
}
