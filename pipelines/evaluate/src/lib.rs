//! Offline evaluation of matchmaking policies against historical matches (`mm evaluate`).
//!
//! The protocol is the EOMM paper's (section 5.3), on pools drawn from history:
//!
//! 1. **Searches.** Every player-match of the mode in the evaluation window is a search. The
//!    player's state at that moment is the artifact's snapshot advanced, match by match, with
//!    what a service records ([`history`]). The window must start after the artifact's data
//!    end: models are never scored on what they were fitted on.
//! 2. **Pools.** For each pool size `P` and round, `P` searches of distinct players are drawn
//!    from one window of history (`--pool-window`, the players who were actually searching
//!    then); when no window has `P` players, from the whole evaluation window (the paper's
//!    "collection of states"), and the report says which.
//! 3. **Policies.** Every 1v1 policy of the matcher pairs the same pool: EOMM (exact minimum
//!    expected churn), SkillMM, RandomMM, WorstMM and greedy.
//! 4. **Draws.** One uniform per player for the outcome and one for churn, shared by every
//!    policy (common random numbers): the outcome of a pair comes from the artifact's win
//!    model with the lower-indexed player's uniform, and a player churns when their churn
//!    uniform falls below their churn probability after that outcome.
//! 5. **Figures.** Retained players per round (mean, 95% interval, Welch t-tests between every
//!    pair of policies: the layout of EOMM Table 2), the expected retained players (the same
//!    without the churn draw), predicted blowouts, mean |P(win) - 1/2|, skill disparity, and
//!    the same by skill decile. The real lobbies of the window are scored under the same
//!    models as a reference row, and both the churn and the win model are scored against what
//!    happened (holdout log-loss), which is what the retrain gate compares. With a second
//!    artifact, each holdout score's difference comes with a 95% paired-bootstrap interval
//!    (churn resampled by player, the win model by match).

//!
//! Files: [`config`] (what to evaluate, checked), [`error`], [`history`] (the window's searches
//! and their states), `pool1v1` (the 1v1 pools and policy runs), [`replay`] (the team-queue
//! policies over the window's real searches), `measures` (what both share: balance, deciles,
//! the real lobbies, the holdout scores), `paired` (two artifacts' holdout scores and the
//! bootstrap of their differences), [`results`] (the report's types), [`report`] (the
//! HTML page) and [`stats`] (intervals and tests). The retrain chain that calls this crate is
//! `mm-retrain`.

pub mod config;
pub mod error;
pub mod history;
mod leavers;
mod measures;
mod paired;
mod pool1v1;
pub mod replay;
pub mod report;
pub mod results;
pub mod stats;
pub mod team;
mod truth;

use std::time::Instant;

pub use config::{DEFAULT_POOL_SIZES, DEFAULT_ROUNDS, EvalConfig, POLICIES, open_artifact};
pub use error::EvalError;
use error::fmt_ms;
use history::WindowSpec;
pub use results::{
    DecileStats, DiffCi, EommVsSkill, EvalReport, HistoricalRow, Holdout, HoldoutDiff,
    PAPER_TABLE2, PairTest, PolicyStats, SizeResult, TeamPolicyStats, TeamQueueResult,
};

/// Runs the evaluation and writes `evaluation.json` and `evaluation.html` into `cfg.out`.
///
/// # Errors
/// Bad input (the lake, an artifact, the window, a policy name) or a failed write.
pub fn evaluate(cfg: &EvalConfig) -> Result<EvalReport, EvalError> {
    evaluate_with(cfg, &mut |_, _| {})
}

/// [`evaluate`] with a progress callback `(rounds done, rounds in all)`.
///
/// # Errors
/// As [`evaluate`].
pub fn evaluate_with(
    cfg: &EvalConfig,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<EvalReport, EvalError> {
    let t0 = Instant::now();
    cfg.check()?;
    let names: Vec<String> = cfg.policies.clone();
    let policies: Vec<_> = names
        .iter()
        .map(|n| config::policy_of(n, 0))
        .collect::<Result<_, _>>()?;
    let art = open_artifact(&cfg.artifact)?;
    let other = cfg.compare.as_deref().map(open_artifact).transpose()?;
    let _model =
        tracing::info_span!("model", model_version = %art.manifest.model_version).entered();
    tracing::info!(
        compare = other.as_ref().map(|o| o.manifest.model_version.as_str()),
        "evaluating {}",
        cfg.artifact.display()
    );
    let (mode, h) = read_window(cfg, &art, other.as_ref())?;
    let mut arts = vec![measures::scored(&h, &art, "candidate")?];
    if let Some(o) = &other {
        arts.push(measures::scored(&h, o, "baseline")?);
    }
    let one_v_one = h
        .matches
        .iter()
        .all(|m| m.hi - m.lo == 2 && m.split == m.lo + 1);
    let mut notes = Vec::new();
    let holdouts: Vec<Holdout> = arts.iter().map(|sc| paired::holdout(&h, sc)).collect();
    let holdout_diff = (arts.len() == 2).then(|| {
        let t = Instant::now();
        let d = paired::holdout_diff(&h, &arts[0], &arts[1], paired::RESAMPLES, cfg.seed);
        tracing::info!(
            seconds = t.elapsed().as_secs_f64(),
            "holdout scores paired: {} resamples over {} players",
            d.resamples,
            d.players
        );
        d
    });
    let hist: Vec<HistoricalRow> = arts
        .iter()
        .map(|sc| measures::historical(&h, sc, &cfg.pool_sizes, cfg.blowout_p))
        .collect();
    let pools = pool1v1::pools(&h, cfg.pool_window_ms);
    let mut sizes = Vec::new();
    // On a simulated lake, the truth of every search: the pools then carry the oracle.
    let truth = if !one_v_one || !cfg.pool_sizes.is_empty() {
        simulated_truth(cfg, &h, &art)?
    } else {
        None
    };
    if truth.is_some() && one_v_one {
        notes.push(
            "Simulated lake: every pairing is also scored under the simulator's truth, beside \
             the oracle (EOMM pairing on the true win and churn probabilities)."
                .to_string(),
        );
    }
    if one_v_one {
        let run = (&arts[..], &names[..], &policies[..], &pools);
        sizes = pool_sizes(cfg, run, truth.as_ref(), progress)?;
    }
    let mut team_queue = None;
    if !one_v_one {
        let mut pairs = vec![(&art, &arts[0])];
        if let Some(o) = &other {
            pairs.push((o, &arts[1]));
        }
        team_queue = team_replay(&h, &pairs, cfg, truth.as_ref(), &mut notes)?;
    }
    let eomm_vs_skill = pool1v1::eomm_vs_skill(&sizes);
    let report = EvalReport {
        lake: cfg.lake.display().to_string(),
        lake_version: h.lake_version,
        mode,
        artifact: art.dir.display().to_string(),
        artifact_version: art.manifest.model_version.clone(),
        compare: other.as_ref().map(|o| o.dir.display().to_string()),
        compare_version: other.as_ref().map(|o| o.manifest.model_version.clone()),
        from_ms: h.from_ms,
        to_ms: h.to_ms.min(h.data_end_ms + 1),
        window: format!(
            "{} to {}",
            fmt_ms(h.from_ms),
            fmt_ms(h.to_ms.min(h.data_end_ms + 1))
        ),
        searches: h.searchers.len() as u64,
        players: {
            let mut ps: Vec<u32> = h.searchers.iter().map(|s| s.player).collect();
            ps.sort_unstable();
            ps.dedup();
            ps.len() as u64
        },
        real_matches: h.matches.len() as u64,
        horizon: art.churn.horizon.clone(),
        rounds: cfg.rounds,
        seed: cfg.seed,
        pool_window: cfg
            .pool_window_ms
            .map_or_else(|| "all".to_string(), |w| format!("{} min", w / 60_000)),
        blowout_p: cfg.blowout_p,
        one_v_one,
        holdout: holdouts,
        holdout_diff,
        historical: hist,
        sizes,
        eomm_vs_skill,
        team_queue,
        notes,
        seconds: t0.elapsed().as_secs_f64(),
    };
    report::write(&cfg.out, &report)?;
    Ok(report)
}

/// The evaluation window's history: from after the newer artifact's data (or `--from`) to
/// `--to`, of the configured mode or the artifact's.
fn read_window(
    cfg: &EvalConfig,
    art: &mm_artifact::Artifact,
    other: Option<&mm_artifact::Artifact>,
) -> Result<(Option<String>, history::EvalHistory), EvalError> {
    let mode = cfg.mode.clone().or_else(|| art.manifest.mode.clone());
    let last_data = art
        .manifest
        .snapshot_as_of_ms
        .max(other.map_or(i64::MIN, |o| o.manifest.snapshot_as_of_ms));
    let from_ms = cfg.from_ms.unwrap_or(last_data + 1);
    let to_ms = cfg.to_ms.unwrap_or(i64::MAX);
    if to_ms <= from_ms {
        return Err(EvalError::Input(format!(
            "the evaluation window [{}, {}) is empty",
            fmt_ms(from_ms),
            fmt_ms(to_ms)
        )));
    }
    let h = history::read(&WindowSpec {
        lake: cfg.lake.clone(),
        as_of: cfg.as_of,
        mode: mode.clone(),
        from_ms,
        to_ms,
        horizon_ms: art.churn.horizon_ms,
        blowout_margin: art.churn.blowout_margin,
        read_from_ms: art
            .manifest
            .snapshot_as_of_ms
            .min(other.map_or(i64::MAX, |o| o.manifest.snapshot_as_of_ms)),
    })?;
    Ok((mode, h))
}

/// The simulator's truth of every search when the lake is simulated and the artifact's churn
/// horizon is the truth's (`None`, with the reason logged, otherwise).
fn simulated_truth(
    cfg: &EvalConfig,
    h: &history::EvalHistory,
    art: &mm_artifact::Artifact,
) -> Result<Option<truth::TruthSearches>, EvalError> {
    if art.churn.horizon_ms != truth::HORIZON_MS {
        return Ok(None);
    }
    Ok(match truth::load(&cfg.lake, h)? {
        Ok(t) => Some(t),
        Err(why) => {
            tracing::info!("no oracle: {why}");
            None
        }
    })
}

/// The 1v1 pairing policies at every pool size, `cfg.rounds` rounds each.
fn pool_sizes(
    cfg: &EvalConfig,
    (arts, names, policies, pools): (
        &[measures::Scored],
        &[String],
        &[mm_matcher::pairing::PairPolicy],
        &pool1v1::Pools,
    ),
    truth: Option<&truth::TruthSearches>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<SizeResult>, EvalError> {
    let total = (cfg.rounds * cfg.pool_sizes.len()) as u64;
    let mut meter = mm_run::progress::Meter::new("evaluate: pool rounds", "rounds", Some(total));
    let mut done = 0u64;
    let mut sizes = Vec::new();
    for &p in &cfg.pool_sizes {
        let r = pool1v1::run_size(cfg, arts, names, policies, pools, p, truth, &mut |k| {
            progress(done + k, total);
            meter.add((done + k).saturating_sub(meter.done()));
        })?;
        done += cfg.rounds as u64;
        sizes.push(r);
    }
    meter.finish();
    Ok(sizes)
}

/// The team-queue replay of a mode that is not 1v1, with its notes (none when the window has no
/// two-team match of equal teams).
fn team_replay(
    h: &history::EvalHistory,
    pairs: &[(&mm_artifact::Artifact, &measures::Scored)],
    cfg: &EvalConfig,
    truth: Option<&truth::TruthSearches>,
    notes: &mut Vec<String>,
) -> Result<Option<TeamQueueResult>, EvalError> {
    let Some(t) = team::team_size(h) else {
        notes.push(
            "The mode is not 1v1 and the window has no two-team match of equal teams: no \
             policy was run; this report holds the holdout scores and the real lobbies."
                .to_string(),
        );
        return Ok(None);
    };
    let q = replay::replay(h, pairs, t, cfg, truth)?;
    if q.policies.iter().any(|p| p.truth.is_some()) {
        notes.push(
            "Simulated lake: every policy's lobbies are also scored under the simulator's truth \
             (the kill race's true win, draw and blowout probabilities, each player's true churn \
             after a win, a draw, a close and a blowout loss), with paired tests over the \
             players both placed."
                .to_string(),
        );
    }
    notes.push(format!(
        "The mode is not 1v1: the pairing policies do not apply. The team-queue policies were \
         replayed over the window's {} real searches ({t}v{t}).",
        h.searchers.len()
    ));
    Ok(Some(q))
}
