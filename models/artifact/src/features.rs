//! The EOMM churn features (section 5.2 of the paper) and the churn label.
//!
//! A row describes a player about to play a match ("now") and that match's outcome:
//! - for each of the player's `history` most recent earlier matches (most recent first): whether
//!   it exists, its outcome (win, draw; loss is the rest), the time from the match before it, the
//!   time from it to now, and the score difference against the opponents;
//! - the upcoming outcome, one-hot (win, draw, loss): the part a matchmaker changes, so the model
//!   gives churn for each hypothetical outcome;
//! - matches played in the last 8 hours, 1 day, 1 week and 1 month before now;
//! - what the data offers beyond the paper: experience (log of 1 + games played, as Dota 2 does),
//!   party or solo, the skill percentile, and for the last match the performance rank in its
//!   lobby and whether it was a blowout;
//! - optionally (`past_churn_horizon_ms`), the player's own churn history: how many of their
//!   earlier matches in the data were followed by churn (the next match more than the horizon
//!   later; the last one's gap runs to now, so every earlier label is resolved), as a log-odds
//!   shrunk towards 0 by the number of earlier matches, and that log-odds crossed with the
//!   upcoming win and loss. A logistic model on the other features gives every player with the
//!   same recent past the same churn; players differ in how readily they leave, and the
//!   matches a player has already left or stayed after are the evidence of it;
//! - the upcoming outcome crossed with the last `outcome_interactions` outcomes (`now_win` and
//!   `now_loss` times each earlier match's win and loss). Without them a logistic model is
//!   additive in the outcome: a loss costs every player nearly the same, and then every
//!   pairing of a pool has the same expected churn (EOMM's Theorem: skill matching is optimal
//!   when sensitivities are equal). The paper's Table 1 shows why they matter: how likely a
//!   player is to leave after a loss depends on the outcomes before it;
//! - optionally (`outcome_pattern` = k), the player's last k outcomes *after* the upcoming
//!   match, one-hot over the 3^k sequences (`now_pattern_LWD`: a loss now after a win and,
//!   before it, a draw): the updated outcome state `o^K` of the paper's section 4 and the
//!   rows of its Table 1. Pairwise interactions add up a loss's cost over the earlier
//!   outcomes; a pattern gives every sequence its own, so "a loss after either of the last
//!   two was lost" is one column rather than a sum that counts two earlier losses twice. All
//!   0 when the player has fewer than k - 1 earlier matches.
//!
//! Missing values are explicit: a history slot that does not exist has `present = 0` and zeros
//! elsewhere; an unknown score difference, performance or percentile has its own `known` flag,
//! so a zero never stands for "unknown".
//!
//! Times are in hours, as `ln(1 + hours)`.

pub use crate::Outcome as Outcome3;

/// One earlier match of the player.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Played {
    pub start_ms: i64,
    pub outcome: Outcome3,
    /// Own team's score minus the opponents' (`NaN` when unknown).
    pub score_diff: f64,
    /// Performance rank in the lobby, 0 (worst) to 1 (best) (`NaN` when unknown).
    pub perf_rank: f64,
    /// Lost by a wide margin.
    pub blowout_loss: bool,
}

/// What is known of the player and the upcoming match before it is played.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Upcoming {
    pub start_ms: i64,
    /// Queued in a party of two or more.
    pub party: bool,
    /// Skill percentile, in [0, 1] (`NaN` when unknown).
    pub skill_percentile: f64,
}

const HOUR_MS: f64 = 3_600_000.0;
const WINDOWS_H: [(&str, f64); 4] = [("8h", 8.0), ("1d", 24.0), ("1w", 168.0), ("1m", 720.0)];
/// The match-count windows (8 hours, 1 day, 1 week, 1 month), milliseconds.
pub const WINDOWS_MS: [i64; 4] = [
    8 * 3_600_000,
    24 * 3_600_000,
    168 * 3_600_000,
    720 * 3_600_000,
];
const PER_SLOT: [&str; 7] = [
    "present",
    "win",
    "draw",
    "log_hours_from_previous",
    "log_hours_to_now",
    "score_diff",
    "score_known",
];

/// A player's past as a matcher service holds it: the last matches and running totals.
#[derive(Debug, Clone, Copy)]
pub struct PastSummary<'a> {
    /// The most recent matches before now, oldest first (rows read the last `history`).
    pub recent: &'a [Played],
    /// The start of the match before `recent[0]`, if any.
    pub before_recent_ms: Option<i64>,
    /// The start of the player's first match in the data (`None`: no match yet).
    pub first_seen_ms: Option<i64>,
    /// Matches played before now.
    pub games: u64,
    /// Matches in the 8 hours, 1 day, 1 week and 1 month before now.
    pub window_counts: [u32; 4],
    /// Of the `games` matches, how many were followed by the next more than the churn horizon
    /// later (consecutive pairs only: the gap from the last match to now is added when a row
    /// is built). Read only with `FeatureSpec::past_churn_horizon_ms`.
    pub churned_gaps: u64,
}

/// The feature layout: how many earlier matches to describe, and where the data begin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FeatureSpec {
    pub history: usize,
    /// The first match start of the data the model was fitted on. A match-count window that
    /// reaches before it is left-censored (matches before the data are not seen): its count
    /// is then unknown, 0 with its `matches_last_*_known` flag 0, rather than a low count that
    /// looks like a quiet player. Games played are likewise unknown (`log_games_known` 0)
    /// unless the player's first match in the data comes a month or more after its start.
    /// `None` (artifacts before this field): no censoring and no flags.
    #[serde(default)]
    pub data_start_ms: Option<i64>,
    /// How many of the most recent earlier matches are crossed with the upcoming outcome (at
    /// most `history`; 0, as in artifacts before this field: none).
    #[serde(default)]
    pub outcome_interactions: usize,
    /// With the player's churn history features ([`PAST_CHURN_NAMES`]): the churn horizon
    /// (ms) that decides whether an earlier match was followed by churn. `None` (artifacts
    /// before this field): without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub past_churn_horizon_ms: Option<i64>,
    /// The length k of the outcome pattern ([`FeatureSpec::pattern_names`]): the upcoming
    /// outcome and the k - 1 before it, one-hot over the 3^k sequences, last in the row. 0
    /// (artifacts before this field): none. At most [`MAX_OUTCOME_PATTERN`], and k - 1 at
    /// most `history`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outcome_pattern: usize,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The longest outcome pattern (3^4 = 81 columns).
pub const MAX_OUTCOME_PATTERN: usize = 4;

/// The letters of the outcome pattern's columns, in `Outcome3` order.
const PATTERN_LETTERS: [char; 3] = ['W', 'D', 'L'];

/// The churn history columns, in column order (last in the row).
pub const PAST_CHURN_NAMES: [&str; 4] = [
    "past_churn_weight",
    "past_churn_logodds",
    "now_win_x_past_churn",
    "now_loss_x_past_churn",
];

/// The churn history's shrinkage: `n` earlier matches weigh `n / (n + PAST_CHURN_PRIOR)`.
pub const PAST_CHURN_PRIOR: f64 = 10.0;

/// The churn history's weight and shrunk log-odds from `churned` of `earlier` matches.
#[must_use]
pub fn past_churn(churned: u64, earlier: u64) -> (f64, f64) {
    let (k, n) = (churned as f64, earlier as f64);
    let w = n / (n + PAST_CHURN_PRIOR);
    (w, w * ((k + 0.5) / (n - k + 0.5)).ln())
}

impl Default for FeatureSpec {
    fn default() -> Self {
        FeatureSpec {
            history: 10,
            data_start_ms: None,
            outcome_interactions: 3,
            past_churn_horizon_ms: None,
            outcome_pattern: 0,
        }
    }
}

/// The interaction columns' names for earlier match `k`, in column order.
fn interaction_names(k: usize) -> [String; 4] {
    [
        format!("now_win_x_last{k}_win"),
        format!("now_win_x_last{k}_loss"),
        format!("now_loss_x_last{k}_win"),
        format!("now_loss_x_last{k}_loss"),
    ]
}

impl FeatureSpec {
    /// The feature names, in column order.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        let mut v = Vec::new();
        for k in 1..=self.history {
            v.extend(PER_SLOT.iter().map(|f| format!("last{k}_{f}")));
        }
        v.extend(["now_win", "now_draw", "now_loss"].map(String::from));
        v.extend(WINDOWS_H.iter().map(|(w, _)| format!("matches_last_{w}")));
        if self.data_start_ms.is_some() {
            v.extend(
                WINDOWS_H
                    .iter()
                    .map(|(w, _)| format!("matches_last_{w}_known")),
            );
        }
        v.push("log_games".to_string());
        if self.data_start_ms.is_some() {
            v.push("log_games_known".to_string());
        }
        v.extend(
            [
                "party",
                "skill_percentile",
                "skill_known",
                "last_perf_rank",
                "last_perf_known",
                "last_blowout_loss",
            ]
            .map(String::from),
        );
        for k in 1..=self.interactions() {
            v.extend(interaction_names(k));
        }
        if self.past_churn_horizon_ms.is_some() {
            v.extend(PAST_CHURN_NAMES.map(String::from));
        }
        v.extend(self.pattern_names());
        v
    }

    /// The number of feature columns (`names().len()`, without building the names).
    #[must_use]
    pub fn width(&self) -> usize {
        let known = usize::from(self.data_start_ms.is_some());
        self.history * PER_SLOT.len()
            + 3
            + WINDOWS_H.len() * (1 + known)
            + 1
            + known
            + 6
            + 4 * self.interactions()
            + if self.past_churn_horizon_ms.is_some() {
                PAST_CHURN_NAMES.len()
            } else {
                0
            }
            + self.pattern_columns()
    }

    /// The outcome pattern's column names, in column order: `now_pattern_` and the sequence,
    /// upcoming outcome first, then the earlier ones from the most recent (`W`, `D`, `L`);
    /// column `j` is the sequence whose outcomes, read as base-3 digits in that order
    /// (win 0, draw 1, loss 2), make `j`.
    #[must_use]
    pub fn pattern_names(&self) -> Vec<String> {
        let k = self.outcome_pattern;
        (0..self.pattern_columns())
            .map(|j| {
                let seq: String = (0..k)
                    .map(|d| PATTERN_LETTERS[j / 3usize.pow((k - 1 - d) as u32) % 3])
                    .collect();
                format!("now_pattern_{seq}")
            })
            .collect()
    }

    /// Whether rows can be built for this spec: the outcome pattern at most
    /// [`MAX_OUTCOME_PATTERN`] long and reading only described matches (k - 1 at most
    /// `history`). A loaded artifact is checked before its names are listed, so that a
    /// corrupt pattern length is refused rather than listing 3^k names.
    ///
    /// # Errors
    /// What is out of range, by field name.
    pub fn check(&self) -> Result<(), String> {
        let k = self.outcome_pattern;
        if k > MAX_OUTCOME_PATTERN || k > self.history + 1 {
            return Err(format!(
                "outcome_pattern {k} is more than {MAX_OUTCOME_PATTERN} or than history {} + 1",
                self.history
            ));
        }
        Ok(())
    }

    /// Columns of the outcome pattern at the end of the row.
    fn pattern_columns(&self) -> usize {
        if self.outcome_pattern == 0 {
            0
        } else {
            3usize.pow(self.outcome_pattern as u32)
        }
    }

    /// Columns of the churn history features at the end of the row.
    fn past_churn_columns(&self) -> usize {
        if self.past_churn_horizon_ms.is_some() {
            PAST_CHURN_NAMES.len()
        } else {
            0
        }
    }

    /// The number of earlier matches crossed with the outcome (capped at `history`).
    #[must_use]
    pub fn interactions(&self) -> usize {
        self.outcome_interactions.min(self.history)
    }

    /// Columns of the upcoming outcome's one-hot.
    #[must_use]
    pub fn outcome_columns(&self) -> [usize; 3] {
        let base = self.history * PER_SLOT.len();
        [base, base + 1, base + 2]
    }

    /// Sets the upcoming outcome of a row built by this spec: its one-hot and the interaction
    /// columns that cross it with the earlier outcomes (the row is then the one
    /// [`FeatureSpec::push_row_from`] builds for `outcome`).
    pub fn set_outcome(&self, row: &mut [f64], outcome: Outcome3) {
        let cols = self.outcome_columns();
        for (k, &c) in cols.iter().enumerate() {
            row[c] = f64::from(u8::from(k == outcome as usize));
        }
        let n = self.interactions();
        let tail = self.past_churn_columns();
        let pattern = self.pattern_columns();
        let end = row.len() - pattern;
        let base = end - tail - 4 * n;
        let now_win = f64::from(u8::from(outcome == Outcome3::Win));
        let now_loss = f64::from(u8::from(outcome == Outcome3::Loss));
        if tail > 0 {
            let logodds = row[end - 3];
            row[end - 2] = now_win * logodds;
            row[end - 1] = now_loss * logodds;
        }
        if pattern > 0 {
            // The upcoming outcome, then each earlier one, as base-3 digits; none without
            // k - 1 earlier matches.
            let mut j = Some(outcome as usize);
            for k in 0..self.outcome_pattern - 1 {
                let slot = &row[k * PER_SLOT.len()..(k + 1) * PER_SLOT.len()];
                let earlier = if slot[1] == 1.0 {
                    0
                } else if slot[2] == 1.0 {
                    1
                } else {
                    2
                };
                j = j.filter(|_| slot[0] == 1.0).map(|j| 3 * j + earlier);
            }
            let cells = &mut row[end..];
            cells.fill(0.0);
            if let Some(j) = j {
                cells[j] = 1.0;
            }
        }
        for k in 0..n {
            let slot = &row[k * PER_SLOT.len()..(k + 1) * PER_SLOT.len()];
            let (win, loss) = (slot[1], slot[0] - slot[1] - slot[2]);
            row[base + 4 * k..base + 4 * k + 4].copy_from_slice(&[
                now_win * win,
                now_win * loss,
                now_loss * win,
                now_loss * loss,
            ]);
        }
    }

    /// Appends one row: `earlier` is every earlier match of the player, oldest first (only
    /// those before `now.start_ms` are read); `outcome` is the upcoming match's.
    pub fn push_row(
        &self,
        earlier: &[Played],
        now: &Upcoming,
        outcome: Outcome3,
        out: &mut Vec<f64>,
    ) {
        let past = &earlier[..earlier.partition_point(|p| p.start_ms < now.start_ms)];
        let counts = WINDOWS_MS.map(|w| {
            let from = now.start_ms - w;
            (past.len() - past.partition_point(|p| p.start_ms < from)) as u32
        });
        let churned_gaps = self.past_churn_horizon_ms.map_or(0, |h| {
            past.windows(2)
                .filter(|w| w[1].start_ms - w[0].start_ms > h)
                .count() as u64
        });
        let summary = PastSummary {
            recent: past,
            before_recent_ms: None,
            first_seen_ms: past.first().map(|p| p.start_ms),
            games: past.len() as u64,
            window_counts: counts,
            churned_gaps,
        };
        self.push_row_from(&summary, now, outcome, out);
    }

    /// Appends one row from a summary of the player's past (what a matcher service holds)
    /// rather than their whole history.
    pub fn push_row_from(
        &self,
        summary: &PastSummary<'_>,
        now: &Upcoming,
        outcome: Outcome3,
        out: &mut Vec<f64>,
    ) {
        let PastSummary {
            recent,
            before_recent_ms,
            first_seen_ms,
            games,
            window_counts,
            churned_gaps,
        } = *summary;
        let start = out.len();
        let past = &recent[..recent.partition_point(|p| p.start_ms < now.start_ms)];
        let hours = |a: i64, b: i64| ((b - a) as f64 / HOUR_MS).max(0.0).ln_1p();
        for k in 0..self.history {
            let Some(idx) = past.len().checked_sub(k + 1) else {
                out.extend([0.0; PER_SLOT.len()]);
                continue;
            };
            let m = past[idx];
            let previous = match idx.checked_sub(1) {
                Some(j) => Some(past[j].start_ms),
                None => before_recent_ms,
            };
            let from_prev = previous.map_or(0.0, |t| hours(t, m.start_ms));
            let known = m.score_diff.is_finite();
            out.extend([
                1.0,
                f64::from(u8::from(m.outcome == Outcome3::Win)),
                f64::from(u8::from(m.outcome == Outcome3::Draw)),
                from_prev,
                hours(m.start_ms, now.start_ms),
                if known { m.score_diff } else { 0.0 },
                f64::from(u8::from(known)),
            ]);
        }
        out.extend(
            [Outcome3::Win, Outcome3::Draw, Outcome3::Loss]
                .map(|o| f64::from(u8::from(o == outcome))),
        );
        // A window reaching before the data is censored: unknown, not a low count.
        let known = WINDOWS_MS.map(|w| self.data_start_ms.is_none_or(|d| now.start_ms - w >= d));
        out.extend(
            window_counts
                .iter()
                .zip(known)
                .map(|(&c, k)| if k { f64::from(c) } else { 0.0 }),
        );
        if self.data_start_ms.is_some() {
            out.extend(known.map(|k| f64::from(u8::from(k))));
        }
        let last = past.last();
        let pct_known = now.skill_percentile.is_finite();
        let perf_known = last.is_some_and(|m| m.perf_rank.is_finite());
        // Games played count from the player's first match; when that could be a return
        // rather than a first game (seen within a month of the data's start), it is unknown.
        let first = first_seen_ms.unwrap_or(now.start_ms).min(now.start_ms);
        let games_known = self
            .data_start_ms
            .is_none_or(|d| first - WINDOWS_MS[3] >= d);
        out.push(if games_known {
            (games as f64).ln_1p()
        } else {
            0.0
        });
        if self.data_start_ms.is_some() {
            out.push(f64::from(u8::from(games_known)));
        }
        out.extend([
            f64::from(u8::from(now.party)),
            if pct_known { now.skill_percentile } else { 0.0 },
            f64::from(u8::from(pct_known)),
            if perf_known {
                last.map_or(0.0, |m| m.perf_rank)
            } else {
                0.0
            },
            f64::from(u8::from(perf_known)),
            f64::from(u8::from(last.is_some_and(|m| m.blowout_loss))),
        ]);
        // The interactions are read off the row's own slots, as for any other outcome.
        out.extend(std::iter::repeat_n(0.0, 4 * self.interactions()));
        if let Some(h) = self.past_churn_horizon_ms {
            // The last match's label is resolved now: churned if now is more than `h` after it.
            let last_churned = last.is_some_and(|m| now.start_ms - m.start_ms > h);
            let (w, logodds) = past_churn(churned_gaps + u64::from(last_churned), games);
            out.extend([w, logodds, 0.0, 0.0]);
        }
        out.extend(std::iter::repeat_n(0.0, self.pattern_columns()));
        self.set_outcome(&mut out[start..], outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    fn played(h: i64, outcome: Outcome3, diff: f64) -> Played {
        Played {
            start_ms: h * H,
            outcome,
            score_diff: diff,
            perf_rank: f64::NAN,
            blowout_loss: false,
        }
    }

    /// `width` counts the columns `names` lists, for every layout.
    #[test]
    fn width_is_the_names_count() {
        for history in 0..=4 {
            for outcome_interactions in 0..=history {
                for outcome_pattern in 0..=(history + 1).min(MAX_OUTCOME_PATTERN) {
                    for known in [None, Some(0)] {
                        for past in [None, Some(8 * 3_600_000)] {
                            let spec = FeatureSpec {
                                history,
                                data_start_ms: known,
                                outcome_interactions,
                                past_churn_horizon_ms: past,
                                outcome_pattern,
                            };
                            assert_eq!(spec.width(), spec.names().len(), "{spec:?}");
                        }
                    }
                }
            }
        }
    }

    /// Hand case with two slots: earlier matches at hours 0 (win, +3) and 5 (loss, unknown
    /// score), upcoming at hour 6, and a match at hour 7 that must not leak into the row.
    #[test]
    fn hand_computed_row() {
        let spec = FeatureSpec {
            history: 2,
            data_start_ms: None,
            outcome_interactions: 2,
            past_churn_horizon_ms: None,
            outcome_pattern: 0,
        };
        let earlier = [
            played(0, Outcome3::Win, 3.0),
            played(5, Outcome3::Loss, f64::NAN),
            played(7, Outcome3::Win, 1.0),
        ];
        let now = Upcoming {
            start_ms: 6 * H,
            party: true,
            skill_percentile: 0.8,
        };
        let mut row = Vec::new();
        spec.push_row(&earlier, &now, Outcome3::Draw, &mut row);
        let names = spec.names();
        assert_eq!(row.len(), names.len());
        let get = |n: &str| row[names.iter().position(|x| x == n).unwrap()];
        // Most recent first: the loss at hour 5, 5 h after the win, 1 h before now.
        assert_eq!(get("last1_present"), 1.0);
        assert_eq!((get("last1_win"), get("last1_draw")), (0.0, 0.0));
        assert!((get("last1_log_hours_from_previous") - 6f64.ln()).abs() < 1e-12);
        assert!((get("last1_log_hours_to_now") - 2f64.ln()).abs() < 1e-12);
        assert_eq!(
            (get("last1_score_diff"), get("last1_score_known")),
            (0.0, 0.0)
        );
        assert_eq!((get("last2_win"), get("last2_score_diff")), (1.0, 3.0));
        assert!((get("last2_log_hours_to_now") - 7f64.ln()).abs() < 1e-12);
        assert_eq!(
            spec.outcome_columns().map(|c| row[c]),
            [0.0, 1.0, 0.0],
            "draw one-hot"
        );
        assert_eq!(get("matches_last_8h"), 2.0);
        assert!((get("log_games") - 3f64.ln()).abs() < 1e-12);
        assert_eq!(
            (get("party"), get("skill_percentile"), get("skill_known")),
            (1.0, 0.8, 1.0)
        );
        assert_eq!(get("last_perf_known"), 0.0);
        // Setting the outcome of a built row gives the row built for that outcome.
        for o in [Outcome3::Win, Outcome3::Draw, Outcome3::Loss] {
            let mut direct = Vec::new();
            spec.push_row(&earlier, &now, o, &mut direct);
            let mut set = row.clone();
            spec.set_outcome(&mut set, o);
            assert_eq!(set, direct, "{o:?}");
        }
        // A draw now: every interaction is 0.
        assert!(
            names
                .iter()
                .zip(&row)
                .all(|(n, v)| !n.contains("_x_") || *v == 0.0)
        );
        // A loss now after a loss (last1) and a win (last2).
        let mut row = Vec::new();
        spec.push_row(&earlier, &now, Outcome3::Loss, &mut row);
        let get = |n: &str| row[names.iter().position(|x| x == n).unwrap()];
        assert_eq!(
            [
                "now_loss_x_last1_loss",
                "now_loss_x_last1_win",
                "now_loss_x_last2_win",
                "now_loss_x_last2_loss",
                "now_win_x_last1_loss",
                "now_win_x_last2_win",
            ]
            .map(get),
            [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
        );
    }

    /// Count windows that reach before the data's start are unknown (0, flag 0), not low.
    #[test]
    fn windows_before_the_data_are_censored() {
        let spec = FeatureSpec {
            history: 1,
            data_start_ms: Some(0),
            outcome_interactions: 0,
            past_churn_horizon_ms: None,
            outcome_pattern: 0,
        };
        let earlier = [
            played(1, Outcome3::Win, 1.0),
            played(9, Outcome3::Loss, 1.0),
        ];
        let now = Upcoming {
            start_ms: 10 * H,
            party: false,
            skill_percentile: f64::NAN,
        };
        let mut row = Vec::new();
        spec.push_row(&earlier, &now, Outcome3::Win, &mut row);
        let names = spec.names();
        assert_eq!(row.len(), names.len());
        let get = |n: &str| row[names.iter().position(|x| x == n).unwrap()];
        // [2h, 10h) lies within the data: known, one match (hour 9; hour 1 is outside).
        assert_eq!(
            (get("matches_last_8h"), get("matches_last_8h_known")),
            (1.0, 1.0)
        );
        // [-14h, 10h) reaches before the data: unknown, although two matches are seen.
        assert_eq!(
            (get("matches_last_1d"), get("matches_last_1d_known")),
            (0.0, 0.0)
        );
        assert_eq!(get("matches_last_1m_known"), 0.0);
        // Without a data start (older artifacts) there is no flag and no censoring.
        let old = FeatureSpec {
            history: 1,
            data_start_ms: None,
            outcome_interactions: 0,
            past_churn_horizon_ms: None,
            outcome_pattern: 0,
        };
        assert!(
            !old.names()
                .iter()
                .any(|n| n.ends_with("_known") && n.starts_with("matches"))
        );
        let mut row = Vec::new();
        old.push_row(&earlier, &now, Outcome3::Win, &mut row);
        assert_eq!(
            row[old
                .names()
                .iter()
                .position(|x| x == "matches_last_1d")
                .unwrap()],
            2.0
        );
    }

    /// A spec written before the interactions existed loads without them.
    #[test]
    fn older_specs_have_no_interactions() {
        let old: FeatureSpec = serde_json::from_str(r#"{"history": 2}"#).expect("spec");
        assert_eq!(old.outcome_interactions, 0);
        assert!(!old.names().iter().any(|n| n.contains("_x_")));
        let mut row = Vec::new();
        let now = Upcoming {
            start_ms: H,
            party: false,
            skill_percentile: f64::NAN,
        };
        old.push_row(
            &[played(0, Outcome3::Loss, 1.0)],
            &now,
            Outcome3::Loss,
            &mut row,
        );
        assert_eq!(row.len(), old.names().len());
    }

    /// Churn history by hand, horizon 8 h: matches at hours 0, 10, 11 and 30, now at 50. The
    /// gaps 0-10, 11-30 and 30-now are longer than 8 h: 3 of 4 earlier matches were followed
    /// by churn, weight 4 / 14, log-odds ln(3.5 / 1.5) times that.
    #[test]
    fn churn_history_by_hand() {
        let spec = FeatureSpec {
            history: 2,
            data_start_ms: None,
            outcome_interactions: 1,
            past_churn_horizon_ms: Some(8 * H),
            outcome_pattern: 0,
        };
        let earlier = [0, 10, 11, 30].map(|h| played(h, Outcome3::Win, 1.0));
        let names = spec.names();
        assert_eq!(&names[names.len() - 4..], PAST_CHURN_NAMES);
        let row_at = |h: i64, o: Outcome3| {
            let mut row = Vec::new();
            let now = Upcoming {
                start_ms: h * H,
                party: false,
                skill_percentile: f64::NAN,
            };
            spec.push_row(&earlier, &now, o, &mut row);
            assert_eq!(row.len(), names.len());
            row[row.len() - 4..].to_vec()
        };
        let w = 4.0 / 14.0;
        let lo = w * (3.5f64 / 1.5).ln();
        let got = row_at(50, Outcome3::Loss);
        for (g, want) in got.iter().zip([w, lo, 0.0, lo]) {
            assert!((g - want).abs() < 1e-12, "{got:?}");
        }
        // Now 1 h after the last match: its gap is short, 2 of 4, log-odds 0.
        assert_eq!(row_at(31, Outcome3::Win), [w, 0.0, 0.0, 0.0]);
        // The crossed column follows the outcome, as `set_outcome` sets it.
        let mut row = Vec::new();
        let now = Upcoming {
            start_ms: 50 * H,
            party: false,
            skill_percentile: f64::NAN,
        };
        spec.push_row(&earlier, &now, Outcome3::Loss, &mut row);
        spec.set_outcome(&mut row, Outcome3::Win);
        let tail = &row[row.len() - 4..];
        assert!((tail[2] - lo).abs() < 1e-12 && tail[3] == 0.0, "{tail:?}");
        // A first match: no evidence, weight and log-odds 0.
        let mut first = Vec::new();
        spec.push_row(&[], &now, Outcome3::Loss, &mut first);
        assert_eq!(&first[first.len() - 4..], [0.0; 4]);
        // The spec round-trips through JSON, and older specs load without the features.
        let back: FeatureSpec =
            serde_json::from_str(&serde_json::to_string(&spec).expect("json")).expect("spec");
        assert_eq!(back, spec);
        let old: FeatureSpec = serde_json::from_str(r#"{"history": 2}"#).expect("spec");
        assert_eq!(old.past_churn_horizon_ms, None);
    }

    /// The outcome pattern by hand: a win at hour 0, a draw at 2, a loss at 4, now at 5. A loss
    /// now is `LLD` (column 2·9 + 2·3 + 1 = 25), a win now `WLD` (column 7); one earlier match
    /// is too few for a pattern of 3. `set_outcome` moves the cell as `push_row` builds it.
    #[test]
    fn outcome_pattern_by_hand() {
        let spec = FeatureSpec {
            history: 3,
            data_start_ms: None,
            outcome_interactions: 1,
            past_churn_horizon_ms: Some(8 * H),
            outcome_pattern: 3,
        };
        let names = spec.names();
        let cells = spec.pattern_names();
        assert_eq!(cells.len(), 27);
        assert_eq!(&names[names.len() - 27..], cells.as_slice());
        assert_eq!(
            (cells[0].as_str(), cells[25].as_str()),
            ("now_pattern_WWW", "now_pattern_LLD")
        );
        let earlier = [
            played(0, Outcome3::Win, 1.0),
            played(2, Outcome3::Draw, 0.0),
            played(4, Outcome3::Loss, -1.0),
        ];
        let now = Upcoming {
            start_ms: 5 * H,
            party: false,
            skill_percentile: f64::NAN,
        };
        let pattern_of = |earlier: &[Played], o: Outcome3| {
            let mut row = Vec::new();
            spec.push_row(earlier, &now, o, &mut row);
            assert_eq!(row.len(), names.len());
            for other in [Outcome3::Win, Outcome3::Draw, Outcome3::Loss] {
                let mut set = row.clone();
                spec.set_outcome(&mut set, other);
                let mut direct = Vec::new();
                spec.push_row(earlier, &now, other, &mut direct);
                assert_eq!(set, direct, "{o:?} set to {other:?}");
            }
            let tail = row[row.len() - 27..].to_vec();
            let ones: Vec<usize> = (0..27).filter(|&j| tail[j] == 1.0).collect();
            assert!(tail.iter().all(|&v| v == 0.0 || v == 1.0), "{tail:?}");
            ones
        };
        assert_eq!(pattern_of(&earlier, Outcome3::Loss), [25]);
        assert_eq!(pattern_of(&earlier, Outcome3::Win), [7]);
        assert_eq!(cells[7], "now_pattern_WLD");
        assert_eq!(pattern_of(&earlier, Outcome3::Draw), [16]);
        assert_eq!(
            pattern_of(&earlier[2..], Outcome3::Loss),
            Vec::<usize>::new()
        );
        // Two earlier matches are enough: a loss now after a draw and a win.
        assert_eq!(
            cells[pattern_of(&earlier[..2], Outcome3::Loss)[0]],
            "now_pattern_LDW"
        );
        // The spec round-trips; without a pattern it serialises as before the field existed.
        let back: FeatureSpec =
            serde_json::from_str(&serde_json::to_string(&spec).expect("json")).expect("spec");
        assert_eq!(back, spec);
        let plain = FeatureSpec::default();
        assert!(
            !serde_json::to_string(&plain)
                .expect("json")
                .contains("outcome_pattern")
        );
        assert!(plain.pattern_names().is_empty());
    }

    /// A first match: every slot absent, explicitly.
    #[test]
    fn no_history_is_explicit() {
        let spec = FeatureSpec::default();
        let mut row = Vec::new();
        let now = Upcoming {
            start_ms: 0,
            party: false,
            skill_percentile: f64::NAN,
        };
        spec.push_row(&[], &now, Outcome3::Win, &mut row);
        let names = spec.names();
        for (n, v) in names.iter().zip(&row) {
            if n.ends_with("_present") || n == "skill_known" {
                assert_eq!(*v, 0.0, "{n}");
            }
        }
        assert_eq!(row[spec.outcome_columns()[0]], 1.0);
    }
}
