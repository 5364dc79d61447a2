//! The evaluation's results, as `evaluation.json` holds them and the report shows them.

use serde::Serialize;

use crate::stats::{Paired, Welch};

/// One policy's figures at one pool size.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyStats {
    pub policy: String,
    /// Which artifact made the decisions and scored them (`candidate`, `baseline`).
    pub artifact: String,
    pub rounds: u64,
    pub matched_players: f64,
    pub retained_mean: f64,
    pub retained_sd: f64,
    pub retained_ci95: (f64, f64),
    pub expected_retained_mean: f64,
    pub expected_retained_ci95: (f64, f64),
    /// Simulated lakes: expected retained players per round under the simulator's truth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_retained_truth_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_retained_truth_ci95: Option<(f64, f64)>,
    pub blowout_rate: f64,
    pub mean_abs_pwin_minus_half: f64,
    pub mean_skill_disparity: f64,
    /// Per skill decile of the players (percentile 0-10%, ..., 90-100%): players, retained
    /// share and its 95% Wilson interval, mean |P(win) - 1/2| of their matches.
    pub by_decile: Vec<DecileStats>,
    pub solve_ms_mean: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct DecileStats {
    pub decile: usize,
    pub players: u64,
    pub retained_share: f64,
    pub retained_ci95: (f64, f64),
    pub mean_abs_pwin_minus_half: f64,
}

/// A Welch t-test between two policies' retained players per round.
#[derive(Debug, Clone, Serialize)]
pub struct PairTest {
    pub a: String,
    pub b: String,
    #[serde(flatten)]
    pub welch: Welch,
    /// `(mean a - mean b) / mean b`.
    pub relative: f64,
    /// 1v1 pools: the paired t-test of the per-round differences of retained players. Both
    /// policies ran on the same pool with the same draws, so the difference is free of the
    /// pool-to-pool spread that Welch's test has to carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired: Option<Paired>,
    /// 1v1 pools: the paired t-test of the per-round differences of expected retained players
    /// (the churn model's probabilities summed, the draws' noise averaged out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_expected: Option<Paired>,
    /// Simulated lakes: the paired t-test of the per-round differences of expected retained
    /// players under the simulator's truth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_truth: Option<Paired>,
}

/// Everything at one pool size.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    pub pool_size: usize,
    /// `window` (pools from one window of history) or `collection` (no window had enough
    /// players: pools from the whole evaluation window).
    pub pool_source: String,
    pub windows_eligible: usize,
    pub policies: Vec<PolicyStats>,
    pub tests: Vec<PairTest>,
    pub seconds: f64,
}

/// The real lobbies of the window scored under an artifact's models.
#[derive(Debug, Clone, Serialize)]
pub struct HistoricalRow {
    pub artifact: String,
    pub matches: u64,
    pub players: u64,
    /// Mean predicted churn of the players of the real lobbies, and its 95% interval.
    pub expected_churn: f64,
    pub expected_churn_ci95: (f64, f64),
    /// Retained per `P` players at the same rate: `P x (1 - expected churn)` for each size.
    pub expected_retained_per_size: Vec<(usize, f64)>,
    /// What happened: the share of labelled searches followed by no match within the horizon.
    pub observed_churn: f64,
    pub observed_labelled: u64,
    pub blowout_rate: f64,
    pub mean_abs_pwin_minus_half: f64,
    pub mean_skill_disparity: f64,
}

/// A figure written as JSON `null` when it is not a number (JSON has no NaN) read back as NaN.
fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    use serde::Deserialize as _;
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// The models scored against what happened in the window.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Holdout {
    pub artifact: String,
    pub version: String,
    /// Churn after the real outcome, against the observed label.
    pub churn_rows: u64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub churn_log_loss: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub churn_brier: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub churn_ece: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub churn_auc: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub churn_mean_predicted: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub churn_observed: f64,
    /// The team win model on the real two-team matches (win/draw/loss log-loss).
    pub win_matches: u64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub win_log_loss: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub win_accuracy: f64,
    /// Searches by players the snapshot did not hold.
    pub new_players: u64,
}

/// One score of two models on the same data: each model's, their difference (candidate minus
/// baseline) and its 95% paired-bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DiffCi {
    pub candidate: f64,
    pub baseline: f64,
    pub diff: f64,
    pub ci95: (f64, f64),
}

impl DiffCi {
    /// The interval holds 0: the two models cannot be told apart on this score.
    #[must_use]
    pub fn within_noise(&self) -> bool {
        self.ci95.0 <= 0.0 && 0.0 <= self.ci95.1
    }
}

/// The candidate's holdout scores against the baseline's (`mm evaluate --compare`): churn
/// resampled by player, the win model by match.
#[derive(Debug, Clone, Serialize)]
pub struct HoldoutDiff {
    pub candidate: String,
    pub baseline: String,
    pub resamples: usize,
    pub players: u64,
    pub churn_rows: u64,
    pub win_matches: u64,
    pub churn_log_loss: DiffCi,
    pub churn_brier: DiffCi,
    pub churn_ece: DiffCi,
    pub churn_auc: DiffCi,
    pub win_log_loss: DiffCi,
}

/// The evaluation: what `evaluation.json` holds and the HTML report shows.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub lake: String,
    /// The version of the lake's matches table the evaluation read.
    pub lake_version: Option<i64>,
    pub mode: Option<String>,
    pub artifact: String,
    pub artifact_version: String,
    pub compare: Option<String>,
    pub compare_version: Option<String>,
    pub from_ms: i64,
    pub to_ms: i64,
    pub window: String,
    pub searches: u64,
    pub players: u64,
    pub real_matches: u64,
    pub horizon: String,
    pub rounds: usize,
    pub seed: u64,
    pub pool_window: String,
    pub blowout_p: f64,
    pub one_v_one: bool,
    pub holdout: Vec<Holdout>,
    /// With `--compare`: the two artifacts' holdout scores, paired.
    pub holdout_diff: Option<HoldoutDiff>,
    pub historical: Vec<HistoricalRow>,
    pub sizes: Vec<SizeResult>,
    /// EOMM's retained players over SkillMM's, per size, beside the paper's Table 2.
    pub eomm_vs_skill: Vec<EommVsSkill>,
    /// Team modes: the team-queue policies replayed over the window's arrivals.
    pub team_queue: Option<TeamQueueResult>,
    pub notes: Vec<String>,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct EommVsSkill {
    pub pool_size: usize,
    pub artifact: String,
    pub relative_improvement: f64,
    /// Welch's test of retained players per round (the paper's test).
    pub p_value: f64,
    /// The paired test of the same per-round retained players.
    pub paired_p_value: f64,
    /// The paired test of expected retained players per round.
    pub paired_expected_p_value: f64,
    /// The EOMM paper's Table 2 at this size (`None` where it has no column).
    pub paper_relative_improvement: Option<f64>,
    /// Simulated lakes: the gain the world holds and the share our model realises.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truth: Option<OracleGain>,
}

/// Under the simulator's truth, at one pool size: expected retained players per round of
/// SkillMM, of our EOMM (pairing on the fitted models) and of the oracle (EOMM pairing on the
/// truth itself), the gains over SkillMM, and the share of the oracle's gain ours realises.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OracleGain {
    pub skill: f64,
    pub eomm: f64,
    pub oracle: f64,
    /// `(oracle - skill) / skill`: the most any EOMM could gain over SkillMM in this world.
    pub oracle_gain: f64,
    /// `(eomm - skill) / skill`: what our EOMM gains, judged by the truth.
    pub realised_gain: f64,
    /// `realised_gain / oracle_gain`.
    pub share: f64,
    /// The share of the oracle's gain that EOMM realises when it pairs on the truth's win
    /// probabilities with our churn model, and on our win model with the truth's churn: which
    /// of the two models loses more of the gap.
    pub true_win_share: Option<f64>,
    pub true_churn_share: Option<f64>,
    /// Paired t-tests (per round, under the truth) of EOMM − SkillMM and oracle − SkillMM.
    pub realised_p: f64,
    pub oracle_p: f64,
}

/// EOMM Table 2 (retained players per round): WorstMM, SkillMM, RandomMM, EOMM per size.
pub const PAPER_TABLE2: [(usize, [f64; 4]); 5] = [
    (100, [51.50, 52.52, 51.81, 51.90]),
    (200, [103.39, 103.96, 103.97, 104.24]),
    (300, [154.57, 156.05, 156.09, 157.50]),
    (400, [206.65, 207.43, 207.09, 209.37]),
    (500, [258.21, 259.24, 259.65, 261.19]),
];

/// One team-queue policy's figures under one artifact.
#[derive(Debug, Clone, Serialize)]
pub struct TeamPolicyStats {
    pub policy: String,
    pub artifact: String,
    /// The name in tables and tests: the policy, or `artifact/policy` when two are compared.
    pub label: String,
    /// Searches offered (after superseded ones are dropped), placed, and never placed.
    pub searches: u64,
    pub superseded: u64,
    pub placed_searches: u64,
    pub placed_players: u64,
    pub unplaced_searches: u64,
    pub lobbies: u64,
    /// Lobbies formed by the maximum-wait rule.
    pub rescued: u64,
    pub wait_s_mean: f64,
    pub wait_s_ci95: (f64, f64),
    pub wait_s_p50: f64,
    pub wait_s_p90: f64,
    pub wait_s_max: f64,
    /// The waits' 0%, 5%, ..., 100% quantiles (21 values; the distribution's plot).
    pub wait_s_quantiles: Vec<f64>,
    /// Predicted churn per placed player (before the outcome is drawn), with its 95% interval.
    pub expected_churn: f64,
    pub expected_churn_ci95: (f64, f64),
    /// Share of placed players retained under the shared draws, with its Wilson interval.
    pub retained_share: f64,
    pub retained_ci95: (f64, f64),
    pub blowout_rate: f64,
    pub mean_abs_pwin_minus_half: f64,
    /// |mean percentile of team A - mean percentile of team B|.
    pub mean_skill_disparity: f64,
    /// Mean party-parity criterion of the lobbies (1: same party sizes on both teams).
    pub party_parity: f64,
    /// Share of lobbies whose teams have identical sorted party sizes.
    pub party_parity_exact: f64,
    pub mean_quality: f64,
    pub by_decile: Vec<DecileStats>,
    pub tick_ms_mean: f64,
    pub tick_ms_max: f64,
    /// On a simulated lake: the same lobbies under the simulator's truth.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truth: Option<TeamTruthStats>,
}

/// A team policy's lobbies under the simulator's truth: the true outcome probabilities of the
/// kill race (blowouts included) and each player's true churn under each outcome.
#[derive(Debug, Clone, Serialize)]
pub struct TeamTruthStats {
    /// True expected churn per placed player, with its 95% interval.
    pub expected_churn: f64,
    pub expected_churn_ci95: (f64, f64),
    /// Expected share of lobbies that end in a blowout (score difference above the game's).
    pub blowout_rate: f64,
    /// Mean `|P(A wins | decisive) - 1/2|` under the true outcome probabilities, beside the
    /// policy's own `mean_abs_pwin_minus_half` by our team win model.
    pub mean_abs_pwin_minus_half: f64,
    /// Mean over the lobbies of how much more often than our team win model predicts its
    /// favourite wins a decisive match under the truth (positive: the lobbies are more uneven,
    /// in the direction our model sees, than it thinks).
    pub favourite_excess: f64,
}

/// The replay's results.
#[derive(Debug, Clone, Serialize)]
pub struct TeamQueueResult {
    pub team_size: usize,
    pub tick_s: f64,
    pub drain_s: f64,
    /// Parties larger than a team, queued as solo players.
    pub split_parties: u64,
    pub policies: Vec<TeamPolicyStats>,
    /// Welch tests of predicted retention per placed player between every pair of policies
    /// (and, on a simulated lake, paired tests of true retention over the players both placed).
    pub tests: Vec<PairTest>,
    /// On a simulated lake: the team oracle against team EOMM.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oracle: Option<TeamOracle>,
    /// On a simulated lake whose truth records the quit rates: the replay with leavers, every
    /// policy with and without backfill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leavers: Option<LeaverResult>,
    pub seconds: f64,
}

/// The team-queue replay with leavers ([`crate::leavers`]).
#[derive(Debug, Clone, Serialize)]
pub struct LeaverResult {
    /// The game's quit rate: per player-minute in a level match, and the kills behind that
    /// multiply it by e.
    pub quit_base_per_min: f64,
    pub quit_deficit_kills: f64,
    /// Each policy with backfill, then without.
    pub runs: Vec<LeaverRun>,
    pub seconds: f64,
}

/// One policy's replay with leavers, with or without backfill.
#[derive(Debug, Clone, Serialize)]
pub struct LeaverRun {
    pub policy: String,
    pub backfill: bool,
    /// Searches dropped because a player was still queued (a player still playing searches
    /// when their match ends).
    pub superseded: u64,
    pub lobbies: u64,
    /// Players placed in new lobbies, and by backfill.
    pub players: u64,
    pub backfilled_players: u64,
    /// Players who quit a match in progress, and their share of the players who played.
    pub quits: u64,
    pub quit_share: f64,
    /// Open slots filled, and the time from the quit to the join (s).
    pub slots_filled: u64,
    pub fill_s_p50: f64,
    pub fill_s_p95: f64,
    /// Fill times at the 5% quantiles (0, 5, ..., 100%).
    pub fill_s_quantiles: Vec<f64>,
    /// The new lobbies' median and 95th-percentile wait (s).
    pub wait_s_p50: f64,
    pub wait_s_p95: f64,
    /// Share of matches that ended with a team short, with its 95% Wilson interval.
    pub short_handed: f64,
    pub short_handed_ci95: (f64, f64),
    /// Mean team size differential at the end of a match.
    pub size_diff_end: f64,
    /// Backfills (one per lobby and tick), their mean team size differential and mean
    /// difference of the teams' mean percentiles after joining, and how many worsened the
    /// size differential.
    pub backfills: u64,
    pub size_diff_after_backfill: f64,
    pub skill_diff_after_backfill: f64,
    pub worsened: u64,
    /// Blowouts per match, played out.
    pub true_blowouts: f64,
    /// True churn per player who played, by their team's result, with its 95% interval.
    pub true_churn: f64,
    pub true_churn_ci95: (f64, f64),
    /// With backfill: retention over the same policy without (Welch test on true churn).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retention_vs_no_backfill: Option<Welch>,
}

/// True retention per placed player over the CoD rules (paired over the players both placed):
/// the team oracle's (team EOMM on the simulator's true churn and outcome probabilities, same
/// rules and bound), which is the gain available, and team EOMM's, which is the gain realised.
///
/// Two half-oracles tell where the rest is lost: team EOMM with the true churn but our team win
/// model (`oracle-churn`), and with our churn model but the true outcome probabilities
/// (`oracle-outcomes`). Whichever half-oracle reaches more of the available gain names the
/// model whose errors cost more.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TeamOracle {
    pub available_gain: f64,
    pub available_p: f64,
    pub realised_gain: f64,
    pub realised_p: f64,
    /// `realised_gain / available_gain`.
    pub share: f64,
    /// The half-oracle with the true churn and our win model: its gain and paired p.
    pub true_churn_gain: f64,
    pub true_churn_p: f64,
    /// The half-oracle with our churn model and the true outcome probabilities.
    pub true_outcomes_gain: f64,
    pub true_outcomes_p: f64,
}
