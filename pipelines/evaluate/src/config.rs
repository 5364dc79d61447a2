//! What to evaluate: the configuration, checked before any data is read.

use std::path::{Path, PathBuf};

use mm_artifact::Artifact;
use mm_matcher::pairing::PairPolicy;

use crate::error::EvalError;

/// The 1v1 policies, in the order of the report (EOMM Table 2's order, then greedy).
pub const POLICIES: [&str; 5] = ["worst", "skill", "random", "eomm", "greedy"];

/// Pool sizes of the 1v1 evaluation by default, in `mm evaluate` and in `mm retrain`'s evaluate
/// stage alike: a nightly run's figures in seconds. The EOMM paper's Table 2 protocol is
/// `--pool-sizes 100,200,300,400,500 --rounds 1000` (about 50 times the work).
pub const DEFAULT_POOL_SIZES: [usize; 2] = [100, 200];
/// Rounds per pool size by default (see [`DEFAULT_POOL_SIZES`]).
pub const DEFAULT_ROUNDS: usize = 200;

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    pub lake: PathBuf,
    /// The lake snapshot to evaluate on (latest by default).
    pub as_of: mm_lake::AsOf,
    /// An artifact version directory (or a model directory: its `LATEST`).
    pub artifact: PathBuf,
    /// A second artifact to compare on the same pools and draws.
    pub compare: Option<PathBuf>,
    pub out: PathBuf,
    /// The mode (default: the artifact's).
    pub mode: Option<String>,
    /// The evaluation window (default: from the artifact's data end to the lake's end).
    pub from_ms: Option<i64>,
    pub to_ms: Option<i64>,
    pub pool_sizes: Vec<usize>,
    pub rounds: usize,
    pub seed: u64,
    /// Pools come from windows of this length (`None`: the whole evaluation window).
    pub pool_window_ms: Option<i64>,
    /// A match is a predicted blowout when its favourite wins a decisive result with at least
    /// this probability.
    pub blowout_p: f64,
    /// Policies to run (names of [`POLICIES`]).
    pub policies: Vec<String>,
    /// Team modes: the replay's tick and how long it runs on after the last arrival, seconds.
    pub tick_s: f64,
    pub drain_s: f64,
    /// Team modes: team EOMM's balance bound when set (`Some(None)`: no bound); by default
    /// (`None`) the library's for the artifact's models (`EommTeamsConfig::for_models`).
    pub eomm_balance: Option<Option<mm_matcher::queue::Backoff>>,
}

impl EvalConfig {
    #[must_use]
    pub fn new(
        lake: impl Into<PathBuf>,
        artifact: impl Into<PathBuf>,
        out: impl Into<PathBuf>,
    ) -> Self {
        EvalConfig {
            lake: lake.into(),
            as_of: mm_lake::AsOf::Latest,
            artifact: artifact.into(),
            compare: None,
            out: out.into(),
            mode: None,
            from_ms: None,
            to_ms: None,
            pool_sizes: DEFAULT_POOL_SIZES.to_vec(),
            rounds: DEFAULT_ROUNDS,
            seed: 1,
            pool_window_ms: Some(3_600_000),
            blowout_p: 0.75,
            policies: POLICIES.iter().map(|s| (*s).to_string()).collect(),
            tick_s: 5.0,
            drain_s: 600.0,
            eomm_balance: None,
        }
    }
}

impl EvalConfig {
    /// Checks what needs no data: at least two rounds (an interval needs them), a blowout
    /// probability in (0.5, 1), known policy names, a positive tick and a drain that is not
    /// negative. [`crate::evaluate`] runs it first.
    ///
    /// # Errors
    /// The first setting out of range, named as its flag.
    pub fn check(&self) -> Result<(), EvalError> {
        if self.rounds < 2 {
            return Err(EvalError::Input(format!(
                "--rounds is {}: at least 2 rounds are needed for an interval",
                self.rounds
            )));
        }
        if !(self.blowout_p > 0.5 && self.blowout_p < 1.0) {
            return Err(EvalError::Input(format!(
                "--blowout-p is {}: it must be in (0.5, 1)",
                self.blowout_p
            )));
        }
        for name in &self.policies {
            policy_of(name, 0)?;
        }
        if !(self.tick_s > 0.0 && self.drain_s >= 0.0) {
            return Err(EvalError::Input(format!(
                "--tick-s {} and --drain-s {}: the tick must be positive and the drain not negative",
                self.tick_s, self.drain_s
            )));
        }
        Ok(())
    }
}

/// Opens an artifact from a version directory, or a model directory's `LATEST`.
///
/// # Errors
/// The artifact is refused (the error names the file and the problem).
pub fn open_artifact(path: &Path) -> Result<Artifact, EvalError> {
    Ok(mm_artifact::Store::open_any(path)?)
}

/// The pairing policy of a name of [`POLICIES`].
pub(crate) fn policy_of(name: &str, seed: u64) -> Result<PairPolicy, EvalError> {
    Ok(match name {
        "eomm" => PairPolicy::Eomm,
        "worst" => PairPolicy::Worst,
        "skill" => PairPolicy::Skill,
        "random" => PairPolicy::Random { seed },
        "greedy" => PairPolicy::Greedy,
        other => {
            return Err(EvalError::Input(format!(
                "unknown policy {other:?} (expected one of {})",
                POLICIES.join(", ")
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> EvalConfig {
        EvalConfig::new("lake", "models", "out")
    }

    #[test]
    fn the_defaults_pass_and_each_bad_setting_is_named() {
        assert!(cfg().check().is_ok());
        let bad = |c: EvalConfig, flag: &str| {
            let e = c.check().expect_err(flag).to_string();
            assert!(e.contains(flag), "{e}");
            assert!(c.check().expect_err(flag).is_input());
        };
        bad(EvalConfig { rounds: 1, ..cfg() }, "--rounds");
        bad(
            EvalConfig {
                blowout_p: 0.5,
                ..cfg()
            },
            "--blowout-p",
        );
        bad(
            EvalConfig {
                blowout_p: 1.0,
                ..cfg()
            },
            "--blowout-p",
        );
        bad(
            EvalConfig {
                policies: vec!["eomm".into(), "best".into()],
                ..cfg()
            },
            "unknown policy \"best\"",
        );
        bad(
            EvalConfig {
                tick_s: 0.0,
                ..cfg()
            },
            "--tick-s",
        );
        bad(
            EvalConfig {
                drain_s: -1.0,
                ..cfg()
            },
            "--drain-s",
        );
    }

    #[test]
    fn every_policy_name_maps_to_its_policy() {
        for name in POLICIES {
            assert_eq!(policy_of(name, 3).expect(name).name(), name);
        }
        assert_eq!(
            policy_of("random", 9).ok(),
            Some(PairPolicy::Random { seed: 9 })
        );
    }
}
