//! The team win model and the party adjustment as exported (fitted by `mm-trainer`'s
//! `skill::team`, which documents the model).

use serde::{Deserialize, Serialize};

/// The logistic function.
#[must_use]
#[inline]
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// Standard deviation of the skills `values` of the members of party `p` (`parties[k]` is row
/// `k`'s party number): the spread the party adjustment reads. Summed in row order, as every
/// replay does.
#[must_use]
pub fn party_sd(values: &[f64], parties: &[u16], p: u16) -> f64 {
    let (mut n, mut s, mut s2) = (0.0, 0.0, 0.0);
    for (&x, &q) in values.iter().zip(parties) {
        if q == p {
            n += 1.0;
            s += x;
            s2 += x * x;
        }
    }
    let mean = s / n;
    (s2 / n - mean * mean).max(0.0).sqrt()
}

/// One match seen from team A's side, with the teams' state before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TeamSample {
    /// `sum s_A - sum s_B` of the skill the model reads ([`TeamWinModel::basis`]).
    pub skill_diff: f64,
    /// `members_A - members_B`: players in parties of two or more.
    pub party_members_diff: f64,
    /// `spread_A - spread_B`: per team, the sum over its party members of the standard
    /// deviation of their party's skills (the skill the model reads).
    pub party_spread_diff: f64,
    /// 1 when A won, 0 when B won, 1/2 for a draw.
    pub outcome: f64,
    /// A's team score minus B's: `NaN` when unknown (and by default), which the blowout fit
    /// leaves out.
    pub margin: f64,
}

impl Default for TeamSample {
    fn default() -> Self {
        TeamSample {
            skill_diff: 0.0,
            party_members_diff: 0.0,
            party_spread_diff: 0.0,
            outcome: 0.0,
            margin: f64::NAN,
        }
    }
}

impl TeamSample {
    /// The same match from team B's side.
    #[must_use]
    pub fn mirrored(&self) -> TeamSample {
        TeamSample {
            skill_diff: -self.skill_diff,
            party_members_diff: -self.party_members_diff,
            party_spread_diff: -self.party_spread_diff,
            outcome: 1.0 - self.outcome,
            margin: -self.margin,
        }
    }
}

/// `logit P(draw) = intercept + abs_diff_coef * |skill_diff|`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DrawModel {
    pub intercept: f64,
    pub abs_diff_coef: f64,
}

/// How likely a decisive match's losing team is to lose by a blowout (by more than `margin`
/// team-score points), from the team win model's log-odds `z` that the losing team would win:
/// `logit P(blowout | the team loses) = intercept + coef * z` (an underdog that loses, `z < 0`,
/// is blown out more often when `coef < 0`). Fitted beside the team win model on the same
/// matches (format 6 on); team EOMM weighs each player's churn after a blowout loss by it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BlowoutModel {
    /// A loss by more than this many team-score points is a blowout (the churn fit's
    /// `blowout-margin`, which its `last_blowout_loss` reads).
    pub margin: f64,
    pub intercept: f64,
    pub coef: f64,
    /// Decisive matches with both team scores it was fitted on, and how many were blowouts.
    pub samples: u64,
    pub blowouts: u64,
}

impl BlowoutModel {
    /// `P(blowout | the team loses)` for a team whose log-odds of winning are `z`.
    #[must_use]
    #[inline]
    pub fn given_loss(&self, z: f64) -> f64 {
        sigmoid(self.intercept + self.coef * z)
    }
}

/// Which per-player skill the team win model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkillBasis {
    /// The online raw skill (`raw_skill`), what every artifact before format 5 used.
    #[default]
    RawSkill,
    /// The whole-history strength `mm fit skill` chose (`win_skill` in the snapshot, format 5
    /// on): Bradley-Terry on the outcomes or least squares on the in-match metric
    /// (`mm-trainer`'s `skill::win` and `skill::perf` document them).
    WinSkill,
}

impl SkillBasis {
    /// The snapshot column the model reads.
    #[must_use]
    pub fn column(self) -> &'static str {
        match self {
            SkillBasis::RawSkill => "raw_skill",
            SkillBasis::WinSkill => "win_skill",
        }
    }
}

/// The fitted model. Coefficients are in log-odds per unit of the skill it reads (skill), per
/// party member (members) and per party member per unit of the party's skill standard
/// deviation (spread).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TeamWinModel {
    /// Which skill `skill_diff` is of (raw skill when absent: artifacts before format 5).
    #[serde(default)]
    pub basis: SkillBasis,
    pub skill_coef: f64,
    pub party_members_coef: f64,
    pub party_spread_coef: f64,
    pub draw: Option<DrawModel>,
    /// Matches it was fitted on, and how many were draws.
    pub samples: u64,
    pub draws: u64,
    /// How often a losing team is blown out (absent before format 6, and when the matches
    /// had no team scores): then no loss counts as a blowout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blowout: Option<BlowoutModel>,
}

/// The party adjustment in raw-skill units per party member: `per_member + per_member_per_sd *
/// sd`, where `sd` is the standard deviation of the party's raw skills.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PartyAdjustment {
    pub per_member: f64,
    pub per_member_per_sd: f64,
}

impl PartyAdjustment {
    #[must_use]
    pub fn for_spread(&self, sd: f64) -> f64 {
        self.per_member + self.per_member_per_sd * sd
    }
}

impl TeamWinModel {
    /// Log-odds that A beats B in a decisive match.
    #[must_use]
    #[inline]
    pub fn logit(&self, s: &TeamSample) -> f64 {
        self.skill_coef * s.skill_diff
            + self.party_members_coef * s.party_members_diff
            + self.party_spread_coef * s.party_spread_diff
    }

    /// `(P(A wins), P(draw), P(B wins))`.
    #[must_use]
    #[inline]
    pub fn probs(&self, s: &TeamSample) -> (f64, f64, f64) {
        self.probs_given_decisive(s, sigmoid(self.logit(s)))
    }

    /// [`Self::probs`] when `P(A wins | decisive)`, `sigmoid(self.logit(s))`, is known already
    /// (a search that checks it first saves computing it twice).
    #[must_use]
    #[inline]
    pub fn probs_given_decisive(&self, s: &TeamSample, decisive: f64) -> (f64, f64, f64) {
        let d = self.draw.map_or(0.0, |d| {
            sigmoid(d.intercept + d.abs_diff_coef * s.skill_diff.abs())
        });
        ((1.0 - d) * decisive, d, (1.0 - d) * (1.0 - decisive))
    }

    /// `[P(blowout | A loses), P(blowout | B loses)]` for a match whose log-odds that A wins
    /// (decisive) are `z`; `None` without a blowout model.
    #[must_use]
    #[inline]
    pub fn blowout_given_loss(&self, z: f64) -> Option<[f64; 2]> {
        self.blowout.map(|b| [b.given_loss(z), b.given_loss(-z)])
    }

    /// A's expected score, `P(win) + P(draw) / 2`.
    #[must_use]
    pub fn expected_score(&self, s: &TeamSample) -> f64 {
        let (w, d, _) = self.probs(s);
        w + 0.5 * d
    }

    /// The party coefficients in raw-skill units per party member; `None` when the skill
    /// coefficient is not positive (the skill does not predict, and nothing can be converted)
    /// or the model reads the win skill (its units are not raw skill's).
    #[must_use]
    pub fn party_adjustment(&self) -> Option<PartyAdjustment> {
        (self.skill_coef > 0.0 && self.basis == SkillBasis::RawSkill).then(|| PartyAdjustment {
            per_member: self.party_members_coef / self.skill_coef,
            per_member_per_sd: self.party_spread_coef / self.skill_coef,
        })
    }

    /// The win curve: `(skill_diff, P(A wins | decisive))` at `points` even steps over
    /// `[-half_width, half_width]`, solo teams.
    #[must_use]
    pub fn curve(&self, half_width: f64, points: usize) -> Vec<(f64, f64)> {
        let n = points.max(2);
        (0..n)
            .map(|k| {
                let d = -half_width + 2.0 * half_width * k as f64 / (n - 1) as f64;
                let s = TeamSample {
                    skill_diff: d,
                    ..TeamSample::default()
                };
                (d, sigmoid(self.logit(&s)))
            })
            .collect()
    }
}
