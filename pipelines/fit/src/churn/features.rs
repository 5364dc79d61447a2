//! The churn feature table, built from the lake with polars lazy queries.
//!
//! One row per player-match of the chosen mode (the player is about to play "now"), with the
//! EOMM features of `mm_trainer::churn::features` (same names, same meaning: that module's
//! `push_row` is the row-at-a-time reference this query is tested against) and the churn label.
//!
//! The query, in four steps:
//! 1. **per match** (windows over `match_id`): the score difference against the opponents
//!    (own `team_score` minus the opponents' row-weighted mean), a blowout loss (lost by more
//!    than the margin: CoD's "score delta greater than 30"), the performance rank in the lobby
//!    (`(average rank - 1) / (n - 1)` of `perf`, else kills minus deaths, else score), and
//!    whether the player queued in a party (two or more rows of the match share a `party_id`);
//! 2. **per player** (rows sorted by player, start, match): the last `history` matches by
//!    shifting, the window counts by rolling sums over start time (closed on the left: matches
//!    before now), games played so far, and the next match's start for the label;
//! 3. **outcome interactions**: the upcoming outcome (win, loss) times each of the last
//!    `outcome_interactions` matches' win and loss;
//! 4. **churn history** (optional): the earlier matches followed by a gap longer than the
//!    horizon (a cumulative sum of the player's gaps, the one into now included), as
//!    `mm_artifact::features::past_churn` shrinks it, and crossed with the upcoming outcome;
//!    then the **outcome pattern** (optional): the upcoming outcome and the k - 1 before it,
//!    one-hot over the 3^k sequences;
//! 5. **label**: censored (null) when the data end less than `horizon` after the match (all
//!    such matches, so the labels near the end are not biased towards quick returns); else
//!    churned unless the next match starts within `horizon`.

use std::path::PathBuf;

use polars::prelude::*;
use polars_time::ClosedWindow;
use polars_time::chunkedarray::RollingOptionsDynamicWindow;

use mm_artifact::features::{PAST_CHURN_NAMES, PAST_CHURN_PRIOR};

/// How to build the table.
#[derive(Debug, Clone)]
pub struct FeatureQuery {
    /// The lake's match files (`matches/day=*/part-*.parquet`).
    pub files: Vec<PathBuf>,
    /// Only this mode's matches (all when `None`).
    pub mode: Option<String>,
    /// Only matches starting before this time (ms since the epoch; all when `None`): a fit on
    /// the data up to a cutoff, evaluated later on what follows.
    pub until_ms: Option<i64>,
    /// Earlier matches described per row.
    pub history: usize,
    /// Earlier matches crossed with the upcoming outcome (`FeatureSpec::outcome_interactions`).
    pub outcome_interactions: usize,
    /// The outcome pattern's length (`FeatureSpec::outcome_pattern`; 0: none). At most
    /// `history + 1`.
    pub outcome_pattern: usize,
    /// The churn horizon, milliseconds.
    pub horizon_ms: i64,
    /// A loss by more than this many team-score points is a blowout.
    pub blowout_margin: f64,
    /// Censor the match-count windows that reach before the data's first match (their count
    /// 0 and a `matches_last_*_known` flag 0), as `FeatureSpec::data_start_ms` does.
    pub censor_windows: bool,
    /// The skill fit's `match_skill.parquet` (player, match start, pre-match percentile): the
    /// skill percentile feature. Without it the feature is unknown (`skill_known = 0`).
    pub skill: Option<PathBuf>,
    /// The first and last match start of the whole data (ms). A query over part of the players
    /// (a bucket, a shard) must be given them: censoring depends on where the data begin and
    /// end, not on where one bucket's rows do. `None`: taken from the rows queried.
    pub data_start_ms: Option<i64>,
    pub data_end_ms: Option<i64>,
    /// With the player's churn history features (`FeatureSpec::past_churn_horizon_ms`, with
    /// `horizon_ms` as its horizon): earlier matches followed by churn, counted by a cumulative
    /// sum over the player's gaps.
    pub past_churn: bool,
    /// Carry a `truth_p_churn` column of the per-match rows through to the table (the
    /// simulator's true churn probability; not a feature).
    pub truth: bool,
}

impl FeatureQuery {
    fn data_start(&self) -> Expr {
        self.data_start_ms
            .map_or_else(|| col("start_ms").min(), lit)
    }
    fn data_end(&self) -> Expr {
        self.data_end_ms.map_or_else(|| col("start_ms").max(), lit)
    }
}

const HOUR_MS: f64 = 3_600_000.0;
const WINDOWS_H: [(&str, i64); 4] = [("8h", 8), ("1d", 24), ("1w", 168), ("1m", 720)];
const MONTH_MS: i64 = 720 * 3_600_000;

/// Columns of the table besides the features: identity, time and label.
pub const KEY_COLUMNS: [&str; 4] = ["player_id", "match_id", "start_ms", "churned"];

/// The feature table's column (0 or 1, not a feature) that says the row's own match was a
/// blowout loss.
pub const NOW_BLOWOUT_LOSS: &str = "now_blowout_loss";

fn flag(e: Expr) -> Expr {
    e.fill_null(lit(false)).cast(DataType::Float32)
}

fn hours(e: Expr) -> Expr {
    (e.cast(DataType::Float64) / lit(HOUR_MS)).log1p()
}

/// On rows sorted by player and start: the row's player played the row before too, more than
/// `horizon_ms` earlier (that earlier match was followed by churn).
fn after_long_gap(horizon_ms: i64) -> Expr {
    col("pid")
        .shift(lit(1))
        .eq(col("pid"))
        .fill_null(lit(false))
        .and((col("start_ms") - col("start_ms").shift(lit(1))).gt(lit(horizon_ms)))
}

/// The lazy query: key columns, then the features in `FeatureSpec::names()` order.
pub fn query(q: &FeatureQuery) -> PolarsResult<LazyFrame> {
    let per_match = per_match(q)?;
    features(q, per_match)
}

/// Step 1: one row per player-match with the per-match values, sorted by player, start and
/// match, with a row index.
fn per_match(q: &FeatureQuery) -> PolarsResult<LazyFrame> {
    per_match_keeping(q, false)
}

/// A lazy scan of Parquet files as they are (no hive partitions from their paths). The lake's
/// schema only grows (a column such as `role` is added, never removed), so files written
/// before a column existed lack it: the scan takes its schema from the file with the most
/// columns and reads the missing ones as null (polars refuses columns beyond the first file's).
pub(crate) fn scan(files: &[PathBuf]) -> PolarsResult<LazyFrame> {
    let mut paths: Vec<PlRefPath> = files
        .iter()
        .map(|p| PlRefPath::from(p.to_string_lossy().as_ref()))
        .collect();
    if files.len() > 1 {
        let columns = |p: &PathBuf| -> usize {
            std::fs::File::open(p)
                .ok()
                .and_then(|f| parquet::file::reader::SerializedFileReader::new(f).ok())
                .map_or(0, |r| {
                    use parquet::file::reader::FileReader;
                    r.metadata().file_metadata().schema_descr().num_columns()
                })
        };
        let widest = (0..files.len()).max_by_key(|&k| (columns(&files[k]), usize::MAX - k));
        if let Some(k) = widest {
            paths.swap(0, k);
        }
    }
    let args = ScanArgsParquet {
        hive_options: HiveOptions::new_disabled(),
        allow_missing_columns: true,
        ..ScanArgsParquet::default()
    };
    LazyFrame::scan_parquet_files(paths.into_iter().collect(), args)
}

/// Sorts step 1's rows by player, start and match and numbers them: the input of
/// [`features_of_sorted`] and [`state_of_sorted`]. Besides the row number (`row`) it adds an
/// integer player key (`pid`: 1 for the first player, counting up) and the number of the
/// player's earlier rows (`since`): the steps after compare and group players by these, not by
/// their string ids (string comparisons were a tenth of the per-bucket pass's `perf` samples).
pub(crate) fn sorted(per_match: LazyFrame) -> LazyFrame {
    let new_player = col("player_id")
        .neq(col("player_id").shift(lit(1)))
        .fill_null(lit(true));
    // The player's first row: the largest row so far that starts a player.
    let first_row = when(new_player.clone())
        .then(col("row"))
        .otherwise(lit(0).cast(IDX_DTYPE))
        .cum_max(false);
    per_match
        .sort(
            ["player_id", "start_ms", "match_id"],
            SortMultipleOptions::default().with_maintain_order(true),
        )
        .with_row_index("row", None)
        .with_columns([
            new_player
                .cast(DataType::UInt32)
                .cum_sum(false)
                .alias("pid"),
            (col("row").cast(DataType::Int64) - first_row.cast(DataType::Int64)).alias("since"),
        ])
}

/// Step 1's helper columns that [`sorted`] adds.
const SORTED_HELPERS: [&str; 3] = ["row", "pid", "since"];

/// Steps 2 to 4 on step 1's rows of whole players, sorted by [`sorted`].
pub(crate) fn features_of_sorted(q: &FeatureQuery, sorted: LazyFrame) -> PolarsResult<LazyFrame> {
    features(q, sorted)
}

/// The state table ([`state_query`]) from step 1's rows of whole players, sorted.
pub(crate) fn state_of_sorted(q: &FeatureQuery, sorted: LazyFrame) -> PolarsResult<LazyFrame> {
    state(q, sorted)
}

/// What each player-match adds to the player's state ([`mm_artifact::features::Played`]), as
/// step 1 computes it for the feature table, plus the match structure: one row per
/// player-match with `player_id`, `match_id`, `start_ms`, `team`, `party_id` (null when solo),
/// `win`, `draw`, `score_diff`, `blowout_loss`, `perf_rank`, `party` (queued with another row
/// of the match) and `percentile` (null without `q.skill`), sorted by player, start and match.
/// Offline evaluation replays these rows through the artifact's service state, so that the
/// states it scores are the ones a service would hold.
///
/// # Errors
/// The files cannot be scanned.
pub fn played_query(q: &FeatureQuery) -> PolarsResult<LazyFrame> {
    per_match_keeping(q, true)
}

fn per_match_keeping(q: &FeatureQuery, structure: bool) -> PolarsResult<LazyFrame> {
    let skill = match &q.skill {
        Some(p) => Some(LazyFrame::scan_parquet(
            PlRefPath::from(p.to_string_lossy().as_ref()),
            ScanArgsParquet::default(),
        )?),
        None => None,
    };
    let per_match = per_match_values(scan(&q.files)?, q, skill, structure)?;
    let per_match = sorted(per_match);
    if structure {
        return Ok(per_match.drop(cols(SORTED_HELPERS)));
    }
    Ok(per_match)
}

/// Step 1 on the rows of `lf` (a scan of match files), unsorted: the per-match values, with
/// `percentile` joined from `skill` (the skill fit's per-match rows, or a part of them) on
/// player and start. `structure` keeps `team` and `party_id`.
pub(crate) fn per_match_values(
    mut lf: LazyFrame,
    q: &FeatureQuery,
    skill: Option<LazyFrame>,
    structure: bool,
) -> PolarsResult<LazyFrame> {
    if let Some(m) = &q.mode {
        lf = lf.filter(col("mode").eq(lit(m.as_str())));
    }
    if let Some(t) = q.until_ms {
        lf = lf.filter(col("start_time").cast(DataType::Int64).lt(lit(t)));
    }
    let m = || [col("match_id")];
    let n_match = len().over(m())?.cast(DataType::Float64);
    let n_team = len()
        .over([col("match_id"), col("team")])?
        .cast(DataType::Float64);
    let opp = (col("team_score").sum().over(m())? - col("team_score") * n_team.clone())
        / (n_match.clone() - n_team.clone());
    let score_diff = when(n_match.clone().gt(n_team.clone()))
        .then(col("team_score") - opp)
        .otherwise(lit(NULL).cast(DataType::Float64));
    let metric = when(col("perf").is_not_null())
        .then(col("perf"))
        .when(col("kills").is_not_null().and(col("deaths").is_not_null()))
        .then((col("kills") - col("deaths")).cast(DataType::Float64))
        .otherwise(col("score"));
    let rank = col("metric")
        .rank(
            RankOptions {
                method: RankMethod::Average,
                descending: false,
            },
            None,
        )
        .over(m())?
        .cast(DataType::Float64);
    let n_metric = col("metric").count().over(m())?.cast(DataType::Float64);
    let perf_rank = when(
        col("metric")
            .is_not_null()
            .and(n_metric.clone().gt(lit(1.0))),
    )
    .then((rank - lit(1.0)) / (n_metric - lit(1.0)))
    .otherwise(lit(NULL).cast(DataType::Float64));
    let party = col("party_id").is_not_null().and(
        len()
            .over([col("match_id"), col("party_id")])?
            .gt_eq(lit(2u32)),
    );

    let per_match = lf
        .select([
            col("player_id"),
            col("match_id"),
            col("start_time").cast(DataType::Int64).alias("start_ms"),
            col("team"),
            col("outcome"),
            col("party_id"),
            col("team_score").cast(DataType::Float64),
            metric.alias("metric"),
        ])
        .with_columns([
            score_diff.alias("score_diff"),
            perf_rank.alias("perf_rank"),
            party.alias("party"),
        ])
        .select([
            col("player_id"),
            col("match_id"),
            col("start_ms"),
            col("team"),
            col("party_id"),
            col("outcome").eq(lit("win")).alias("win"),
            col("outcome").eq(lit("draw")).alias("draw"),
            col("score_diff"),
            (col("outcome")
                .eq(lit("loss"))
                .and(col("score_diff").lt(lit(-q.blowout_margin))))
            .fill_null(lit(false))
            .alias("blowout_loss"),
            col("perf_rank"),
            col("party"),
        ]);
    let per_match = match skill {
        Some(s) => per_match.join(
            s.select([col("player_id"), col("start_ms"), col("percentile")]),
            [col("player_id"), col("start_ms")],
            [col("player_id"), col("start_ms")],
            JoinArgs::new(JoinType::Left),
        ),
        None => per_match.with_column(lit(NULL).cast(DataType::Float64).alias("percentile")),
    };
    if structure {
        return Ok(per_match);
    }
    Ok(per_match.drop(cols(["team", "party_id"])))
}

/// The player state a matcher service starts from (the artifact's snapshot): per player, the
/// last `history + 1` matches (`slot` 1 is the most recent; the extra one gives the time
/// before the oldest), games played, the first match's start, the consecutive matches more
/// than the horizon apart (`churned_gaps`), and the matches in the 8h, 1d, 1w and 1m before the
/// data's end (`as_of_ms`, the last match's start), one row per player and slot.
pub fn state_query(q: &FeatureQuery) -> PolarsResult<LazyFrame> {
    state(q, per_match(q)?)
}

fn state(q: &FeatureQuery, per_match: LazyFrame) -> PolarsResult<LazyFrame> {
    let p = || [col("pid")];
    // The data's end as a column, evaluated over all rows: inside the per-player windows below
    // `col("start_ms").max()` would be each player's own last match, not the data's.
    let per_match = per_match.with_column(q.data_end().alias("data_end_ms"));
    let end = col("data_end_ms");
    let mut windows = Vec::new();
    for (w, h) in WINDOWS_H {
        windows.push(
            col("start_ms")
                .gt_eq(end.clone() - lit(h * 3_600_000))
                .and(col("start_ms").lt(end.clone()))
                .cast(DataType::UInt32)
                .sum()
                .over(p())?
                .alias(format!("matches_{w}")),
        );
    }
    let games = len().over(p())?.cast(DataType::Int64);
    let idx = col("since");
    // Consecutive matches more than the horizon apart (`PastSummary::churned_gaps`).
    windows.push(
        after_long_gap(q.horizon_ms)
            .cast(DataType::Int64)
            .sum()
            .over(p())?
            .alias("churned_gaps"),
    );
    let mut lf = per_match
        .with_columns(windows)
        .with_columns([
            games.clone().alias("games"),
            (games - idx).alias("slot"),
            end.alias("as_of_ms"),
            col("start_ms").first().over(p())?.alias("first_seen_ms"),
        ])
        .filter(col("slot").lt_eq(lit(q.history as i64 + 1)));
    let mut cols = vec![
        col("player_id"),
        col("slot"),
        col("start_ms"),
        col("win"),
        col("draw"),
        col("score_diff"),
        col("perf_rank"),
        col("blowout_loss"),
        col("games"),
        col("as_of_ms"),
        col("first_seen_ms"),
        col("churned_gaps"),
    ];
    cols.extend(
        WINDOWS_H
            .iter()
            .map(|(w, _)| col(format!("matches_{w}")).cast(DataType::Int64)),
    );
    lf = lf.select(cols);
    Ok(lf)
}

/// Steps 2 and 3: the features and the label.
fn features(q: &FeatureQuery, per_match: LazyFrame) -> PolarsResult<LazyFrame> {
    let mut feats = recent_matches(q);
    feats.extend([
        flag(col("win")).alias("now_win"),
        flag(col("draw")).alias("now_draw"),
        flag(col("win").not().and(col("draw").not())).alias("now_loss"),
    ]);
    feats.extend(window_counts(q)?);
    feats.extend(player_features(q)?);
    let mut out = vec![
        col("player_id"),
        col("match_id"),
        col("start_ms"),
        churn_label(q).alias("churned"),
        // Not a feature: the row's own match was a blowout loss (the churn model's blowout
        // shift is fitted on it).
        flag(col("blowout_loss")).alias(NOW_BLOWOUT_LOSS),
    ];
    if q.truth {
        out.push(col("truth_p_churn"));
    }
    out.extend(feats);
    let cross = outcome_interactions(q);
    if !q.past_churn {
        return Ok(with_pattern(q, per_match.select(out).with_columns(cross)));
    }
    with_past_churn(q, per_match, out, cross)
}

/// Per player: row k back is the same player's k-th previous match when the ids agree.
fn same(k: i64) -> Expr {
    col("pid")
        .shift(lit(k))
        .eq(col("pid"))
        .fill_null(lit(false))
}

/// The last `q.history` matches: present, won, drawn, their spacing, score difference.
fn recent_matches(q: &FeatureQuery) -> Vec<Expr> {
    let mut feats: Vec<Expr> = Vec::new();
    for k in 1..=q.history as i64 {
        let here = same(k);
        let before = same(k + 1);
        let sh = |c: &str| col(c).shift(lit(k));
        let known = here.clone().and(sh("score_diff").is_not_null());
        feats.extend([
            flag(here.clone()).alias(format!("last{k}_present")),
            flag(here.clone().and(sh("win"))).alias(format!("last{k}_win")),
            flag(here.clone().and(sh("draw"))).alias(format!("last{k}_draw")),
            when(before)
                .then(hours(sh("start_ms") - col("start_ms").shift(lit(k + 1))))
                .otherwise(lit(0.0))
                .cast(DataType::Float32)
                .alias(format!("last{k}_log_hours_from_previous")),
            when(here.clone())
                .then(hours(col("start_ms") - sh("start_ms")))
                .otherwise(lit(0.0))
                .cast(DataType::Float32)
                .alias(format!("last{k}_log_hours_to_now")),
            when(known.clone())
                .then(sh("score_diff"))
                .otherwise(lit(0.0))
                .cast(DataType::Float32)
                .alias(format!("last{k}_score_diff")),
            flag(known).alias(format!("last{k}_score_known")),
        ]);
    }
    feats
}

/// Matches in each window before now (`WINDOWS_H`), with whether the window lies within the
/// data when `q.censor_windows`.
fn window_counts(q: &FeatureQuery) -> PolarsResult<Vec<Expr>> {
    let mut feats = Vec::new();
    let p = || [col("pid")];
    let mut known_flags = Vec::new();
    for (name, h) in WINDOWS_H {
        let count = flag(col("start_ms").is_not_null())
            .rolling_sum_by(
                col("start_ms").cast(DataType::Datetime(TimeUnit::Milliseconds, None)),
                RollingOptionsDynamicWindow {
                    window_size: Duration::parse(&format!("{h}h")),
                    min_periods: 0,
                    closed_window: ClosedWindow::Left,
                    fn_params: None,
                },
            )
            .over(p())?
            .fill_null(lit(0.0));
        let count = if q.censor_windows {
            // The window [now - h, now) must lie within the data.
            let known = (col("start_ms") - lit(h * 3_600_000)).gt_eq(q.data_start());
            known_flags.push(flag(known.clone()).alias(format!("matches_last_{name}_known")));
            when(known).then(count).otherwise(lit(0.0))
        } else {
            count
        };
        feats.push(
            count
                .cast(DataType::Float32)
                .alias(format!("matches_last_{name}")),
        );
    }
    feats.extend(known_flags);
    Ok(feats)
}

/// Games played, party, skill percentile, the last match's performance rank and blowout.
fn player_features(q: &FeatureQuery) -> PolarsResult<Vec<Expr>> {
    let p = || [col("pid")];
    let mut feats = Vec::new();
    let prev1 = same(1);
    let perf_known = prev1
        .clone()
        .and(col("perf_rank").shift(lit(1)).is_not_null());
    // The player's earlier matches: `since` (rows are sorted by player and start).
    let log_games = col("since").cast(DataType::Float64).log1p();
    if q.censor_windows {
        // Games played are known only for a player first seen a month or more after the
        // data's start; earlier, the first match seen may be a return, not a first game.
        let known = (col("start_ms").first().over(p())? - lit(MONTH_MS)).gt_eq(q.data_start());
        feats.extend([
            when(known.clone())
                .then(log_games)
                .otherwise(lit(0.0))
                .cast(DataType::Float32)
                .alias("log_games"),
            flag(known).alias("log_games_known"),
        ]);
    } else {
        feats.push(log_games.cast(DataType::Float32).alias("log_games"));
    }
    feats.extend([
        flag(col("party")).alias("party"),
        // The skill fit's percentiles are already in [0, 1].
        when(col("percentile").is_not_null())
            .then(col("percentile"))
            .otherwise(lit(0.0))
            .cast(DataType::Float32)
            .alias("skill_percentile"),
        flag(col("percentile").is_not_null()).alias("skill_known"),
        when(perf_known.clone())
            .then(col("perf_rank").shift(lit(1)))
            .otherwise(lit(0.0))
            .cast(DataType::Float32)
            .alias("last_perf_rank"),
        flag(perf_known).alias("last_perf_known"),
        flag(prev1.and(col("blowout_loss").shift(lit(1)))).alias("last_blowout_loss"),
    ]);
    Ok(feats)
}

/// The label: no match within the horizon after this one; null (censored) when the horizon
/// runs past the data's end.
fn churn_label(q: &FeatureQuery) -> Expr {
    let next_same = col("pid")
        .shift(lit(-1))
        .eq(col("pid"))
        .fill_null(lit(false));
    let gap = col("start_ms").shift(lit(-1)) - col("start_ms");
    let end = q.data_end();
    when((end - col("start_ms")).lt(lit(q.horizon_ms)))
        .then(lit(NULL).cast(DataType::Boolean))
        .when(next_same.and(gap.lt_eq(lit(q.horizon_ms))))
        .then(lit(false))
        .otherwise(lit(true))
}

/// The upcoming outcome times each of the first `q.outcome_interactions` earlier ones.
fn outcome_interactions(q: &FeatureQuery) -> Vec<Expr> {
    let mut cross = Vec::new();
    for k in 1..=q.outcome_interactions.min(q.history) {
        let c = |f: &str| col(format!("last{k}_{f}"));
        let loss = c("present") - c("win") - c("draw");
        for now in ["now_win", "now_loss"] {
            cross.extend([
                (col(now) * c("win")).alias(format!("{now}_x_last{k}_win")),
                (col(now) * loss.clone()).alias(format!("{now}_x_last{k}_loss")),
            ]);
        }
    }
    cross
}

/// The table with the past-churn features last in the row, after the outcome interactions, as
/// `FeatureSpec::names` orders them.
fn with_past_churn(
    q: &FeatureQuery,
    per_match: LazyFrame,
    mut out: Vec<Expr>,
    cross: Vec<Expr>,
) -> PolarsResult<LazyFrame> {
    let p = || [col("pid")];
    // Row k of a player: k earlier matches, of which `churned` were followed by a gap longer
    // than the horizon (the gap from the previous match to now included).
    let n = col("since").cast(DataType::Float64);
    let churned = after_long_gap(q.horizon_ms)
        .cast(DataType::Float64)
        .cum_sum(false)
        .over(p())?;
    let w = n.clone() / (n.clone() + lit(PAST_CHURN_PRIOR));
    let odds = (churned.clone() + lit(0.5)) / (n - churned + lit(0.5));
    out.extend([
        w.clone().alias("_past_churn_w"),
        (w * odds.log(lit(std::f64::consts::E))).alias("_past_churn_logodds"),
    ]);
    let logodds = || col("_past_churn_logodds");
    let table = per_match
        .select(out)
        .with_columns(cross)
        .with_columns([
            col("_past_churn_w")
                .cast(DataType::Float32)
                .alias(PAST_CHURN_NAMES[0]),
            logodds().cast(DataType::Float32).alias(PAST_CHURN_NAMES[1]),
            (col("now_win") * logodds())
                .cast(DataType::Float32)
                .alias(PAST_CHURN_NAMES[2]),
            (col("now_loss") * logodds())
                .cast(DataType::Float32)
                .alias(PAST_CHURN_NAMES[3]),
        ])
        .drop(cols(["_past_churn_w", "_past_churn_logodds"]));
    Ok(with_pattern(q, table))
}

/// Step 3's outcome pattern (`FeatureSpec::pattern_names`), last in the row: for each
/// sequence, the product of the upcoming outcome's indicator and each earlier match's (its
/// slot present and of that outcome), so a row without k - 1 earlier matches has none.
fn with_pattern(q: &FeatureQuery, table: LazyFrame) -> LazyFrame {
    let k = q.outcome_pattern;
    if k == 0 {
        return table;
    }
    let earlier = |slot: usize, o: usize| -> Expr {
        let c = |f: &str| col(format!("last{slot}_{f}"));
        match o {
            0 => c("win"),
            1 => c("draw"),
            _ => c("present") - c("win") - c("draw"),
        }
    };
    let names = mm_artifact::features::FeatureSpec {
        outcome_pattern: k,
        ..mm_artifact::features::FeatureSpec::default()
    }
    .pattern_names();
    let cells: Vec<Expr> = names
        .iter()
        .enumerate()
        .map(|(j, name)| {
            let digit = |d: usize| j / 3usize.pow((k - 1 - d) as u32) % 3;
            let now = col(["now_win", "now_draw", "now_loss"][digit(0)]);
            (1..k)
                .fold(now, |e, d| e * earlier(d, digit(d)))
                .cast(DataType::Float32)
                .alias(name.as_str())
        })
        .collect();
    table.with_columns(cells)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests fail loudly by design

    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};

    use super::*;

    /// A day written before the lake gained `role` and after it: one scan reads both files, in
    /// either order, with the older file's rows null in the new column.
    #[test]
    fn scan_reads_files_from_before_and_after_a_column_was_added() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.parquet");
        let new = dir.path().join("new.parquet");
        let id = |v: &str| -> ArrayRef { Arc::new(StringArray::from(vec![v])) };
        let n = |v: i64| -> ArrayRef { Arc::new(Int64Array::from(vec![v])) };
        let b_old =
            RecordBatch::try_from_iter([("match_id", id("m1")), ("start_ms", n(1))]).unwrap();
        let b_new = RecordBatch::try_from_iter([
            ("match_id", id("m2")),
            ("role", id("sup")),
            ("start_ms", n(2)),
        ])
        .unwrap();
        mm_lake::parquet_io::write_parquet_file(&old, &[b_old]).unwrap();
        mm_lake::parquet_io::write_parquet_file(&new, &[b_new]).unwrap();
        for files in [[old.clone(), new.clone()], [new.clone(), old.clone()]] {
            let df = scan(&files)
                .unwrap()
                .select([col("match_id"), col("role"), col("start_ms")])
                .sort(["start_ms"], SortMultipleOptions::default())
                .collect()
                .unwrap();
            assert_eq!(df.height(), 2);
            let role = df.column("role").unwrap().str().unwrap();
            assert_eq!((role.get(0), role.get(1)), (None, Some("sup")));
        }
    }
}
