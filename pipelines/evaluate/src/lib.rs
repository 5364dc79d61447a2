//! Offline evaluation of matchmaking policies against historical matches (`mm evaluate`), and
//! the retrain chain (`mm retrain`).
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
//!    happened (holdout log-loss), which is what the retrain gate compares.

pub mod history;
pub mod replay;
pub mod report;
pub mod retrain;
pub mod stats;

use std::path::{Path, PathBuf};
use std::time::Instant;

use mm_artifact::Artifact;
use mm_artifact::team::{TeamSample, TeamWinModel};
use mm_matcher::Outcome;
use mm_matcher::blossom::DenseBlossom;
use mm_matcher::pairing::{PairPolicy, pair_f64};
use mm_matcher::queue::Member;
use mm_matcher::scoring::{ChurnModel, OutcomeProbs, WinModel, eomm_matrix};
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::history::{EvalHistory, WindowSpec};
use crate::stats::{Moments, Paired, Welch, paired, welch, wilson};

/// Why an evaluation failed.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Fit(#[from] mm_fit::FitError),
    #[error(transparent)]
    Lake(#[from] mm_lake::LakeError),
    #[error(transparent)]
    Artifact(#[from] mm_artifact::ArtifactError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("pairing: {0}")]
    Pairing(#[from] mm_matcher::pairing::PairingError),
}

impl EvalError {
    /// Bad input (exit code 2) rather than a failure of the run.
    #[must_use]
    pub fn is_input(&self) -> bool {
        match self {
            EvalError::Lake(x) => x.is_input(),
            x => matches!(
                x,
                EvalError::Input(_) | EvalError::Artifact(_) | EvalError::Fit(_)
            ),
        }
    }
}

pub(crate) fn fmt_ms(ms: i64) -> String {
    if ms == i64::MAX {
        return "the end of the data".into();
    }
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |d| d.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// The 1v1 policies, in the order of the report (EOMM Table 2's order, then greedy).
pub const POLICIES: [&str; 5] = ["worst", "skill", "random", "eomm", "greedy"];

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
            pool_sizes: vec![100, 200, 300, 400, 500],
            rounds: 1000,
            seed: 1,
            pool_window_ms: Some(3_600_000),
            blowout_p: 0.75,
            policies: POLICIES.iter().map(|s| (*s).to_string()).collect(),
            tick_s: 5.0,
            drain_s: 600.0,
        }
    }
}

/// Opens an artifact from a version directory, or a model directory's `LATEST`.
///
/// # Errors
/// The artifact is refused (the error names the file and the problem).
pub fn open_artifact(path: &Path) -> Result<Artifact, EvalError> {
    if path.join("LATEST").is_file() {
        return Ok(mm_artifact::Store::new(path).open_latest()?);
    }
    Ok(Artifact::open(path)?)
}

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

/// The models scored against what happened in the window.
#[derive(Debug, Clone, Serialize)]
pub struct Holdout {
    pub artifact: String,
    pub version: String,
    /// Churn after the real outcome, against the observed label.
    pub churn_rows: u64,
    pub churn_log_loss: f64,
    pub churn_brier: f64,
    pub churn_ece: f64,
    pub churn_auc: f64,
    pub churn_mean_predicted: f64,
    pub churn_observed: f64,
    /// The team win model on the real two-team matches (win/draw/loss log-loss).
    pub win_matches: u64,
    pub win_log_loss: f64,
    pub win_accuracy: f64,
    /// Searches by players the snapshot did not hold.
    pub new_players: u64,
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
    pub historical: Vec<HistoricalRow>,
    pub sizes: Vec<SizeResult>,
    /// EOMM's retained players over SkillMM's, per size, beside the paper's Table 2.
    pub eomm_vs_skill: Vec<EommVsSkill>,
    /// Team modes: the team-queue policies replayed over the window's arrivals.
    pub team_queue: Option<replay::TeamQueueResult>,
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
}

/// EOMM Table 2 (retained players per round): WorstMM, SkillMM, RandomMM, EOMM per size.
pub const PAPER_TABLE2: [(usize, [f64; 4]); 5] = [
    (100, [51.50, 52.52, 51.81, 51.90]),
    (200, [103.39, 103.96, 103.97, 104.24]),
    (300, [154.57, 156.05, 156.09, 157.50]),
    (400, [206.65, 207.43, 207.09, 209.37]),
    (500, [258.21, 259.24, 259.65, 261.19]),
];

/// The models of one artifact bound to the window's searchers.
struct Scored {
    label: String,
    version: String,
    win: TeamWinModel,
    members: Vec<Member>,
    new_players: u64,
}

/// A pool's view of one artifact's models, for the matcher's scoring traits.
struct PoolModel<'a> {
    win: &'a TeamWinModel,
    members: Vec<&'a Member>,
}

fn probs_1v1(win: &TeamWinModel, a: f64, b: f64) -> OutcomeProbs {
    let (w, d, l) = win.probs(&TeamSample {
        skill_diff: a - b,
        ..TeamSample::default()
    });
    OutcomeProbs {
        win: w,
        draw: d,
        loss: l,
    }
}

impl WinModel for PoolModel<'_> {
    fn outcome_probs(&self, i: usize, j: usize) -> OutcomeProbs {
        probs_1v1(
            self.win,
            self.members[i].raw_skill,
            self.members[j].raw_skill,
        )
    }

    fn skill(&self, i: usize) -> f64 {
        self.members[i].raw_skill
    }
}

impl ChurnModel for PoolModel<'_> {
    fn churn(&self, i: usize, outcome: Outcome) -> f64 {
        self.members[i].churn[outcome_ix(outcome)]
    }
}

fn outcome_ix(o: Outcome) -> usize {
    match o {
        Outcome::Win => 0,
        Outcome::Draw => 1,
        Outcome::Loss => 2,
    }
}

fn decile(p: f64) -> usize {
    ((p * 10.0).floor().max(0.0) as usize).min(9)
}

/// |P(win | decisive) - 1/2| of a pairing, and whether it is a predicted blowout.
fn balance(p: &OutcomeProbs, blowout_p: f64) -> (f64, bool) {
    let dec = p.win + p.loss;
    let pw = if dec > 0.0 { p.win / dec } else { 0.5 };
    ((pw - 0.5).abs(), pw.max(1.0 - pw) >= blowout_p)
}

/// Per-round accumulators of one policy under one artifact.
#[derive(Debug, Clone, Default)]
struct Acc {
    retained: Moments,
    expected: Moments,
    matched: Moments,
    blowouts: f64,
    balance: f64,
    disparity: f64,
    pairs: f64,
    dec_players: [f64; 10],
    dec_retained: [f64; 10],
    dec_balance: [f64; 10],
    solve_ms: Moments,
}

/// One round's result for one policy.
#[derive(Debug, Clone, Default)]
struct RoundOut {
    retained: f64,
    expected: f64,
    matched: f64,
    blowouts: f64,
    balance: f64,
    disparity: f64,
    pairs: f64,
    dec_players: [f64; 10],
    dec_retained: [f64; 10],
    dec_balance: [f64; 10],
    solve_ms: f64,
}

impl Acc {
    fn add(&mut self, r: &RoundOut) {
        self.retained.push(r.retained);
        self.expected.push(r.expected);
        self.matched.push(r.matched);
        self.blowouts += r.blowouts;
        self.balance += r.balance;
        self.disparity += r.disparity;
        self.pairs += r.pairs;
        for d in 0..10 {
            self.dec_players[d] += r.dec_players[d];
            self.dec_retained[d] += r.dec_retained[d];
            self.dec_balance[d] += r.dec_balance[d];
        }
        self.solve_ms.push(r.solve_ms);
    }

    fn stats(&self, policy: &str, artifact: &str) -> PolicyStats {
        let by_decile = decile_stats(&self.dec_players, &self.dec_retained, &self.dec_balance);
        PolicyStats {
            policy: policy.to_string(),
            artifact: artifact.to_string(),
            rounds: self.retained.n,
            matched_players: self.matched.mean,
            retained_mean: self.retained.mean,
            retained_sd: self.retained.sd(),
            retained_ci95: self.retained.ci(0.95),
            expected_retained_mean: self.expected.mean,
            expected_retained_ci95: self.expected.ci(0.95),
            blowout_rate: self.blowouts / self.pairs,
            mean_abs_pwin_minus_half: self.balance / self.pairs,
            mean_skill_disparity: self.disparity / self.pairs,
            by_decile,
            solve_ms_mean: self.solve_ms.mean,
        }
    }
}

/// Per-decile figures from per-decile sums: players, retained players (expected or drawn) and
/// |P(win) - 1/2| summed over the players.
fn decile_stats(
    players: &[f64; 10],
    retained: &[f64; 10],
    balance: &[f64; 10],
) -> Vec<DecileStats> {
    (0..10)
        .map(|d| {
            let n = players[d];
            DecileStats {
                decile: d + 1,
                players: n as u64,
                retained_share: retained[d] / n,
                retained_ci95: wilson(retained[d], n),
                mean_abs_pwin_minus_half: balance[d] / n,
            }
        })
        .collect()
}

fn policy_of(name: &str, seed: u64) -> Result<PairPolicy, EvalError> {
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

/// Runs one policy on one pool under one artifact with the round's draws.
fn run_policy(
    policy: PairPolicy,
    model: &PoolModel<'_>,
    w: &[f64],
    u_out: &[f64],
    u_churn: &[f64],
    blowout_p: f64,
    solver: &mut DenseBlossom,
) -> Result<RoundOut, EvalError> {
    let n = model.members.len();
    let skills: Vec<f64> = model.members.iter().map(|m| m.raw_skill).collect();
    let t = Instant::now();
    let pairing = pair_f64(policy, n, w, Some(&skills), solver)?;
    let solve_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut r = RoundOut {
        solve_ms,
        ..RoundOut::default()
    };
    for &(i, j) in &pairing.pairs {
        let p = model.outcome_probs(i, j);
        let u = u_out[i.min(j)];
        let oi = if u < p.win {
            Outcome::Win
        } else if u < p.win + p.draw {
            Outcome::Draw
        } else {
            Outcome::Loss
        };
        let (bal, blow) = balance(&p, blowout_p);
        r.pairs += 1.0;
        r.balance += bal;
        r.blowouts += f64::from(u8::from(blow));
        r.disparity += (model.members[i].percentile - model.members[j].percentile).abs();
        r.expected += 2.0 - w[i * n + j];
        for (k, o) in [(i, oi), (j, oi.mirrored())] {
            let kept = u_churn[k] >= model.churn(k, o);
            r.matched += 1.0;
            r.retained += f64::from(u8::from(kept));
            let d = decile(model.members[k].percentile);
            r.dec_players[d] += 1.0;
            r.dec_retained[d] += f64::from(u8::from(kept));
            r.dec_balance[d] += bal;
        }
    }
    Ok(r)
}

/// Pools: searches grouped by window, one search per player per window.
struct Pools {
    windows: Vec<Vec<u32>>,
    all: Vec<u32>,
}

fn pools(h: &EvalHistory, window_ms: Option<i64>) -> Pools {
    let mut seen = hashbrown::HashSet::new();
    let all: Vec<u32> = (0..h.searchers.len() as u32)
        .filter(|&s| seen.insert(h.searchers[s as usize].player))
        .collect();
    let mut windows: Vec<Vec<u32>> = Vec::new();
    if let Some(w) = window_ms {
        let mut cur: Option<i64> = None;
        let mut set = hashbrown::HashSet::new();
        for (s, x) in h.searchers.iter().enumerate() {
            let b = (x.start_ms - h.from_ms).div_euclid(w);
            if cur != Some(b) {
                cur = Some(b);
                set.clear();
                windows.push(Vec::new());
            }
            if set.insert(x.player)
                && let Some(last) = windows.last_mut()
            {
                last.push(s as u32);
            }
        }
    }
    Pools { windows, all }
}

fn mix(seed: u64, a: u64, b: u64) -> u64 {
    let mut x =
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x
}

fn scored(h: &EvalHistory, art: &Artifact, label: &str) -> Result<Scored, EvalError> {
    let win = art.team_win.ok_or_else(|| {
        EvalError::Input(format!(
            "{}: the artifact has no team win model (too few matches when it was fitted)",
            art.dir.display()
        ))
    })?;
    if h.from_ms <= art.manifest.snapshot_as_of_ms {
        return Err(EvalError::Input(format!(
            "{}: the evaluation window starts at {}, not after the artifact's data end {}: \
             models are only evaluated on later data (use --from)",
            art.dir.display(),
            fmt_ms(h.from_ms),
            fmt_ms(art.manifest.snapshot_as_of_ms)
        )));
    }
    let members = history::members(h, art);
    let new_players = h
        .searchers
        .iter()
        .filter(|s| art.snapshot.get(&h.ids[s.player as usize]).is_none())
        .count() as u64;
    Ok(Scored {
        label: label.to_string(),
        version: art.manifest.model_version.clone(),
        win,
        members,
        new_players,
    })
}

/// Team A's sample of a real match under an artifact (skill sums, party terms).
fn team_sample(
    h: &EvalHistory,
    sc: &Scored,
    m: &history::HistMatch,
    party_adj: bool,
) -> TeamSample {
    let side = |lo: u32, hi: u32| -> (f64, f64, f64) {
        let r: Vec<usize> = (lo as usize..hi as usize).collect();
        let skill: f64 = r.iter().map(|&k| sc.members[k].raw_skill).sum();
        let mut members = 0.0;
        let mut spread = 0.0;
        if party_adj {
            let mut keys: Vec<u32> = r.iter().map(|&k| h.party[k]).filter(|&p| p > 0).collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                let xs: Vec<f64> = r
                    .iter()
                    .filter(|&&k| h.party[k] == key)
                    .map(|&k| sc.members[k].raw_skill)
                    .collect();
                if xs.len() < 2 {
                    continue;
                }
                let mean = xs.iter().sum::<f64>() / xs.len() as f64;
                let sd =
                    (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
                members += xs.len() as f64;
                spread += xs.len() as f64 * sd;
            }
        }
        (skill, members, spread)
    };
    let a = side(m.lo, m.split);
    let b = side(m.split, m.hi);
    TeamSample {
        skill_diff: a.0 - b.0,
        party_members_diff: a.1 - b.1,
        party_spread_diff: a.2 - b.2,
        outcome: 0.5,
    }
}

fn historical(h: &EvalHistory, sc: &Scored, sizes: &[usize], blowout_p: f64) -> HistoricalRow {
    let mut churn = Moments::default();
    let (mut obs, mut labelled) = (0.0, 0u64);
    let (mut blow, mut bal, mut disp, mut n_m) = (0.0, 0.0, 0.0, 0.0);
    for m in &h.matches {
        if m.split == m.hi || m.split == m.lo {
            continue;
        }
        let s = team_sample(h, sc, m, true);
        let (w, d, l) = sc.win.probs(&s);
        let p = OutcomeProbs {
            win: w,
            draw: d,
            loss: l,
        };
        let (b, is_blow) = balance(&p, blowout_p);
        n_m += 1.0;
        bal += b;
        blow += f64::from(u8::from(is_blow));
        let pct = |lo: u32, hi: u32| {
            (lo..hi)
                .map(|k| sc.members[k as usize].percentile)
                .sum::<f64>()
                / f64::from(hi - lo)
        };
        disp += (pct(m.lo, m.split) - pct(m.split, m.hi)).abs();
        for k in m.lo..m.hi {
            let k = k as usize;
            let mine = if (k as u32) < m.split {
                p
            } else {
                OutcomeProbs {
                    win: l,
                    draw: d,
                    loss: w,
                }
            };
            let c = &sc.members[k].churn;
            churn.push(mine.win * c[0] + mine.draw * c[1] + mine.loss * c[2]);
            if let Some(x) = h.searchers[k].churned {
                labelled += 1;
                obs += f64::from(u8::from(x));
            }
        }
    }
    HistoricalRow {
        artifact: sc.label.clone(),
        matches: n_m as u64,
        players: churn.n,
        expected_churn: churn.mean,
        expected_churn_ci95: churn.ci(0.95),
        expected_retained_per_size: sizes
            .iter()
            .map(|&p| (p, p as f64 * (1.0 - churn.mean)))
            .collect(),
        observed_churn: obs / labelled as f64,
        observed_labelled: labelled,
        blowout_rate: blow / n_m,
        mean_abs_pwin_minus_half: bal / n_m,
        mean_skill_disparity: disp / n_m,
    }
}

fn holdout(h: &EvalHistory, sc: &Scored) -> Holdout {
    let mut preds: Vec<(f64, bool)> = Vec::new();
    for (k, s) in h.searchers.iter().enumerate() {
        if let Some(y) = s.churned {
            preds.push((sc.members[k].churn[outcome_ix(s.outcome)], y));
        }
    }
    let n = preds.len() as f64;
    let clamp = |p: f64| p.clamp(1e-12, 1.0 - 1e-12);
    let ll = preds
        .iter()
        .map(|&(p, y)| {
            if y {
                -clamp(p).ln()
            } else {
                -(1.0 - clamp(p)).ln()
            }
        })
        .sum::<f64>()
        / n;
    let brier = preds
        .iter()
        .map(|&(p, y)| (p - f64::from(u8::from(y))).powi(2))
        .sum::<f64>()
        / n;
    let mut bins = [(0.0, 0.0, 0.0); 10];
    for &(p, y) in &preds {
        let b = decile(p);
        bins[b].0 += 1.0;
        bins[b].1 += p;
        bins[b].2 += f64::from(u8::from(y));
    }
    let ece = bins
        .iter()
        .filter(|b| b.0 > 0.0)
        .map(|b| (b.1 - b.2).abs())
        .sum::<f64>()
        / n;
    let auc = auc(&preds);
    let mean_p = preds.iter().map(|p| p.0).sum::<f64>() / n;
    let obs = preds.iter().filter(|p| p.1).count() as f64 / n;
    let (mut wll, mut wacc, mut wn) = (0.0, 0.0, 0.0);
    for m in &h.matches {
        if m.split == m.hi || m.split == m.lo {
            continue;
        }
        let s = team_sample(h, sc, m, true);
        let (w, d, l) = sc.win.probs(&s);
        let o = h.searchers[m.lo as usize].outcome;
        let p = match o {
            Outcome::Win => w,
            Outcome::Draw => d,
            Outcome::Loss => l,
        };
        wll -= clamp(p).ln();
        let best = if w >= l { Outcome::Win } else { Outcome::Loss };
        wacc += f64::from(u8::from(best == o));
        wn += 1.0;
    }
    Holdout {
        artifact: sc.label.clone(),
        version: sc.version.clone(),
        churn_rows: preds.len() as u64,
        churn_log_loss: ll,
        churn_brier: brier,
        churn_ece: ece,
        churn_auc: auc,
        churn_mean_predicted: mean_p,
        churn_observed: obs,
        win_matches: wn as u64,
        win_log_loss: wll / wn,
        win_accuracy: wacc / wn,
        new_players: sc.new_players,
    }
}

/// Area under the ROC curve (ties count a half), by ranking.
fn auc(preds: &[(f64, bool)]) -> f64 {
    let mut v: Vec<(f64, bool)> = preds.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let pos = v.iter().filter(|x| x.1).count() as f64;
    let neg = v.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return f64::NAN;
    }
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < v.len() {
        let mut j = i + 1;
        while j < v.len() && v[j].0 == v[i].0 {
            j += 1;
        }
        let avg = (i + j + 1) as f64 / 2.0;
        rank_sum += avg * v[i..j].iter().filter(|x| x.1).count() as f64;
        i = j;
    }
    (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg)
}

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
    if cfg.rounds < 2 {
        return Err(EvalError::Input(format!(
            "--rounds is {}: at least 2 rounds are needed for an interval",
            cfg.rounds
        )));
    }
    if !(cfg.blowout_p > 0.5 && cfg.blowout_p < 1.0) {
        return Err(EvalError::Input(format!(
            "--blowout-p is {}: it must be in (0.5, 1)",
            cfg.blowout_p
        )));
    }
    let names: Vec<String> = cfg.policies.clone();
    let policies: Vec<PairPolicy> = names
        .iter()
        .map(|n| policy_of(n, 0))
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
    let mode = cfg.mode.clone().or_else(|| art.manifest.mode.clone());
    let last_data = art.manifest.snapshot_as_of_ms.max(
        other
            .as_ref()
            .map_or(i64::MIN, |o| o.manifest.snapshot_as_of_ms),
    );
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
    })?;
    let mut arts = vec![scored(&h, &art, "candidate")?];
    if let Some(o) = &other {
        arts.push(scored(&h, o, "baseline")?);
    }
    let one_v_one = h
        .matches
        .iter()
        .all(|m| m.hi - m.lo == 2 && m.split == m.lo + 1);
    let mut notes = Vec::new();
    let holdouts: Vec<Holdout> = arts.iter().map(|sc| holdout(&h, sc)).collect();
    let hist: Vec<HistoricalRow> = arts
        .iter()
        .map(|sc| historical(&h, sc, &cfg.pool_sizes, cfg.blowout_p))
        .collect();
    let pools = pools(&h, cfg.pool_window_ms);
    let mut sizes = Vec::new();
    if one_v_one {
        let total = (cfg.rounds * cfg.pool_sizes.len()) as u64;
        let mut meter =
            mm_lake::progress::Meter::new("evaluate: pool rounds", "rounds", Some(total));
        let mut done = 0u64;
        for &p in &cfg.pool_sizes {
            let r = run_size(cfg, &arts, &names, &policies, &pools, p, &mut |k| {
                progress(done + k, total);
                meter.add((done + k).saturating_sub(meter.done()));
            })?;
            done += cfg.rounds as u64;
            sizes.push(r);
        }
        meter.finish();
    }
    let mut team_queue = None;
    if !one_v_one {
        if !(cfg.tick_s > 0.0 && cfg.drain_s >= 0.0) {
            return Err(EvalError::Input(format!(
                "--tick-s {} and --drain-s {}: the tick must be positive and the drain not negative",
                cfg.tick_s, cfg.drain_s
            )));
        }
        match replay::team_size(&h) {
            Some(t) => {
                let mut pairs = vec![(&art, &arts[0])];
                if let Some(o) = &other {
                    pairs.push((o, &arts[1]));
                }
                team_queue = Some(replay::replay(
                    &h,
                    &pairs,
                    t,
                    cfg.tick_s,
                    cfg.drain_s,
                    cfg.seed,
                    cfg.blowout_p,
                )?);
                notes.push(format!(
                    "The mode is not 1v1: the pairing policies do not apply. The team-queue \
                     policies were replayed over the window's {} real searches ({t}v{t}).",
                    h.searchers.len()
                ));
            }
            None => notes.push(
                "The mode is not 1v1 and the window has no two-team match of equal teams: no \
                 policy was run; this report holds the holdout scores and the real lobbies."
                    .to_string(),
            ),
        }
    }
    let mut eomm_vs_skill = Vec::new();
    for s in &sizes {
        for t in &s.tests {
            if t.a.ends_with("eomm") && t.b.ends_with("skill") && prefix(&t.a) == prefix(&t.b) {
                eomm_vs_skill.push(EommVsSkill {
                    pool_size: s.pool_size,
                    artifact: prefix(&t.a).to_string(),
                    relative_improvement: t.relative,
                    p_value: t.welch.p,
                    paired_p_value: t.paired.map_or(f64::NAN, |x| x.p),
                    paired_expected_p_value: t.paired_expected.map_or(f64::NAN, |x| x.p),
                    paper_relative_improvement: PAPER_TABLE2
                        .iter()
                        .find(|r| r.0 == s.pool_size)
                        .map(|r| r.1[3] / r.1[1] - 1.0),
                });
            }
        }
    }
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

fn prefix(name: &str) -> &str {
    name.split_once('/').map_or("", |p| p.0)
}

#[allow(clippy::too_many_arguments)]
fn run_size(
    cfg: &EvalConfig,
    arts: &[Scored],
    names: &[String],
    policies: &[PairPolicy],
    pools: &Pools,
    p: usize,
    progress: &mut dyn FnMut(u64),
) -> Result<SizeResult, EvalError> {
    let t0 = Instant::now();
    let eligible: Vec<&Vec<u32>> = pools.windows.iter().filter(|w| w.len() >= p).collect();
    let source = if eligible.is_empty() {
        if pools.all.len() < p {
            return Err(EvalError::Input(format!(
                "pool size {p}: the evaluation window holds only {} players",
                pools.all.len()
            )));
        }
        "collection"
    } else {
        "window"
    };
    let k = arts.len() * policies.len();
    let chunk = 64usize;
    let mut accs = vec![Acc::default(); k];
    // Per ordered pair (a, b): per-round differences of retained and expected retained.
    let mut diffs = vec![(Moments::default(), Moments::default()); k * k];
    let mut r0 = 0usize;
    while r0 < cfg.rounds {
        let r1 = (r0 + chunk * rayon::current_num_threads()).min(cfg.rounds);
        let outs: Vec<Result<Vec<RoundOut>, EvalError>> = (r0..r1)
            .into_par_iter()
            .map_init(DenseBlossom::new, |solver, round| {
                let mut rng = ChaCha8Rng::seed_from_u64(mix(cfg.seed, p as u64, round as u64));
                let from: &[u32] = if eligible.is_empty() {
                    &pools.all
                } else {
                    eligible[rng.random_range(0..eligible.len())]
                };
                let idx: Vec<usize> = sample(&mut rng, from.len(), p).into_vec();
                let u_out: Vec<f64> = (0..p).map(|_| rng.random::<f64>()).collect();
                let u_churn: Vec<f64> = (0..p).map(|_| rng.random::<f64>()).collect();
                let policy_seed = rng.random::<u64>();
                let mut out = Vec::with_capacity(k);
                for sc in arts {
                    let model = PoolModel {
                        win: &sc.win,
                        members: idx.iter().map(|&i| &sc.members[from[i] as usize]).collect(),
                    };
                    let w = eomm_matrix(p, &model, &model);
                    for pol in policies {
                        let pol = match pol {
                            PairPolicy::Random { .. } => PairPolicy::Random { seed: policy_seed },
                            x => *x,
                        };
                        out.push(run_policy(
                            pol,
                            &model,
                            &w,
                            &u_out,
                            &u_churn,
                            cfg.blowout_p,
                            solver,
                        )?);
                    }
                }
                Ok(out)
            })
            .collect();
        for o in outs {
            let o = o?;
            for (a, r) in accs.iter_mut().zip(&o) {
                a.add(r);
            }
            for (a, ra) in o.iter().enumerate() {
                for (b, rb) in o.iter().enumerate() {
                    let d = &mut diffs[a * k + b];
                    d.0.push(ra.retained - rb.retained);
                    d.1.push(ra.expected - rb.expected);
                }
            }
        }
        progress((r1 - r0) as u64);
        r0 = r1;
    }
    let label = |ai: usize, pi: usize| {
        if arts.len() > 1 {
            format!("{}/{}", arts[ai].label, names[pi])
        } else {
            names[pi].clone()
        }
    };
    let mut stats = Vec::new();
    for (ai, sc) in arts.iter().enumerate() {
        for (pi, name) in names.iter().enumerate() {
            let _ = name;
            stats.push(accs[ai * policies.len() + pi].stats(&label(ai, pi), &sc.label));
        }
    }
    let mut tests = Vec::new();
    for a in 0..k {
        for b in 0..k {
            if a == b || (arts.len() > 1 && a / policies.len() != b / policies.len()) {
                continue;
            }
            let (ai, pa) = (a / policies.len(), a % policies.len());
            let (bi, pb) = (b / policies.len(), b % policies.len());
            let w = welch(&accs[a].retained, &accs[b].retained);
            tests.push(PairTest {
                a: label(ai, pa),
                b: label(bi, pb),
                welch: w,
                relative: w.diff / accs[b].retained.mean,
                paired: Some(paired(&diffs[a * k + b].0)),
                paired_expected: Some(paired(&diffs[a * k + b].1)),
            });
        }
    }
    Ok(SizeResult {
        pool_size: p,
        pool_source: source.to_string(),
        windows_eligible: eligible.len(),
        policies: stats,
        tests,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
