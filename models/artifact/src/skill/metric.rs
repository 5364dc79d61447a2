//! The in-match performance metric raw skill compares, computed from a player's row of a match.
//! The batch replay (`mm-fit`'s history) and a service's live update (`mm-serve`) both compute it
//! here, from the lake's columns, so that they compare the same numbers.

use serde::{Deserialize, Serialize};

use crate::Outcome;

/// The in-match performance metric players are compared on (`skill.json`'s `metric`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Kills per enemy death, `(kills + 1) / (deaths_by_enemy + 1)`: self-kills never help,
    /// and late joiners are not punished for fewer minutes (both counts scale with time).
    /// Sources that do not tell deaths by enemy apart (LoL) use `deaths`.
    KillsPerEnemyDeath,
    /// Score per minute played.
    ScorePerMinute,
    /// The lake's `perf` column (e.g. the share of points won in tennis).
    Perf,
    /// Win/draw/loss only, for games without stats: the team's outcome.
    Outcome,
}

/// The columns of one player's row that the metrics read (the lake's names), `None` when null.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerfColumns {
    pub kills: Option<f64>,
    pub deaths_by_enemy: Option<f64>,
    pub deaths: Option<f64>,
    pub score: Option<f64>,
    pub seconds_played: Option<f64>,
    pub perf: Option<f64>,
    pub outcome: Option<Outcome>,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::KillsPerEnemyDeath,
        Metric::ScorePerMinute,
        Metric::Perf,
        Metric::Outcome,
    ];

    /// Whether the metric reads this lake column (the match columns are always read).
    #[must_use]
    pub fn needs(self, column: &str) -> bool {
        match column {
            "kills" | "deaths_by_enemy" | "deaths" => self == Metric::KillsPerEnemyDeath,
            "score" | "seconds_played" => self == Metric::ScorePerMinute,
            "perf" => self == Metric::Perf,
            _ => true,
        }
    }

    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Metric::KillsPerEnemyDeath => "kills-per-enemy-death",
            Metric::ScorePerMinute => "score-per-minute",
            Metric::Perf => "perf",
            Metric::Outcome => "outcome",
        }
    }

    /// The metric named `name` (as [`Metric::name`] writes it).
    #[must_use]
    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The metric on the scale a least-squares fit reads: the logarithm of the ratio metrics
    /// (kills per enemy death, score per minute), whose differences are relative; the others as
    /// they are. `NaN` (not fitted) for a ratio that is not positive.
    #[must_use]
    pub fn fit_scale(self, value: f64) -> f64 {
        match self {
            Metric::KillsPerEnemyDeath | Metric::ScorePerMinute if value > 0.0 => value.ln(),
            Metric::KillsPerEnemyDeath | Metric::ScorePerMinute => f64::NAN,
            Metric::Perf | Metric::Outcome => value,
        }
    }

    /// The metric of one row; `NaN` when the columns it reads are missing (that player is not
    /// compared in the match).
    #[must_use]
    pub fn value(self, c: &PerfColumns) -> f64 {
        match self {
            Metric::KillsPerEnemyDeath => match (c.kills, c.deaths_by_enemy.or(c.deaths)) {
                (Some(k), Some(d)) => (k + 1.0) / (d + 1.0),
                _ => f64::NAN,
            },
            Metric::ScorePerMinute => match (c.score, c.seconds_played) {
                (Some(s), Some(t)) if t > 0.0 => s / (t / 60.0),
                _ => f64::NAN,
            },
            Metric::Perf => c.perf.unwrap_or(f64::NAN),
            Metric::Outcome => match c.outcome {
                Some(Outcome::Win) => 1.0,
                Some(Outcome::Draw) => 0.5,
                Some(Outcome::Loss) => 0.0,
                None => f64::NAN,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The least-squares scale: the ratio metrics' logarithm (not defined at 0), the others as
    /// they are.
    #[test]
    fn the_fit_scale_by_hand() {
        let ln = |m: Metric, x: f64| m.fit_scale(x);
        assert!((ln(Metric::KillsPerEnemyDeath, 3.0) - 3f64.ln()).abs() < 1e-15);
        assert!((ln(Metric::ScorePerMinute, 0.5) + 2f64.ln()).abs() < 1e-15);
        assert!(ln(Metric::KillsPerEnemyDeath, 0.0).is_nan());
        assert!(ln(Metric::ScorePerMinute, -1.0).is_nan());
        assert!(ln(Metric::KillsPerEnemyDeath, f64::NAN).is_nan());
        assert_eq!(ln(Metric::Perf, 0.6), 0.6);
        assert_eq!(ln(Metric::Outcome, 0.5), 0.5);
    }

    /// Hand cases of the definitions above.
    #[test]
    fn each_metric_by_hand() {
        let c = PerfColumns {
            kills: Some(5.0),
            deaths_by_enemy: Some(1.0),
            deaths: Some(3.0),
            score: Some(300.0),
            seconds_played: Some(600.0),
            perf: Some(0.6),
            outcome: Some(Outcome::Draw),
        };
        assert_eq!(Metric::KillsPerEnemyDeath.value(&c), 3.0);
        let no_dbe = PerfColumns {
            deaths_by_enemy: None,
            ..c
        };
        assert_eq!(Metric::KillsPerEnemyDeath.value(&no_dbe), 1.5);
        assert_eq!(Metric::ScorePerMinute.value(&c), 30.0);
        assert_eq!(Metric::Perf.value(&c), 0.6);
        assert_eq!(Metric::Outcome.value(&c), 0.5);
        let zero_time = PerfColumns {
            seconds_played: Some(0.0),
            ..c
        };
        assert!(Metric::ScorePerMinute.value(&zero_time).is_nan());
        assert!(
            Metric::KillsPerEnemyDeath
                .value(&PerfColumns::default())
                .is_nan()
        );
        for m in Metric::ALL {
            assert_eq!(Metric::parse(m.name()), Some(m));
        }
        assert_eq!(Metric::parse("elo"), None);
    }
}
