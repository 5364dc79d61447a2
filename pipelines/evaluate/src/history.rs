//! The evaluation window's history: who searched when, in which real lobby, with what result,
//! and each player's state at that moment as a matcher service would hold it.
//!
//! Rows come from the churn feature query's per-match step ([`mm_fit::churn::features::played_query`]),
//! so a match adds to a player's state exactly what the churn fit counted. States start from the
//! artifact's snapshot and are advanced with [`PlayerState::record`] over every match after the
//! snapshot, in time order: the state a search is scored with is the one a service would have
//! held at its start.

use std::path::{Path, PathBuf};

use hashbrown::HashMap;
use mm_artifact::Artifact;
use mm_artifact::features::{Outcome3, Played};
use mm_artifact::snapshot::PlayerState;
use mm_fit::churn::features::{FeatureQuery, played_query};
use mm_fit::columns::{bools, f64s, i64s, strings};
use mm_fit::input_err;
use mm_lake::Lake;
use mm_matcher::Outcome;
use mm_matcher::queue::Member;
use polars::prelude::*;

use crate::error::{EvalError, fmt_ms};

/// One player's search: the player's row of one historical match in the evaluation window.
#[derive(Debug, Clone, PartialEq)]
pub struct Searcher {
    pub player: u32,
    pub start_ms: i64,
    /// The real match (index into [`EvalHistory::matches`]).
    pub match_ix: u32,
    /// Queued with another player of the match.
    pub in_party: bool,
    /// The player's team's result in the real match.
    pub outcome: Outcome,
    /// Observed: no match of the mode within the horizon after this one (`None`: censored, the
    /// data end less than the horizon after it).
    pub churned: Option<bool>,
}

/// A real match of the window: its searchers are `lo..hi`, team A `lo..split`, team B
/// `split..hi` (two teams; `split == hi` when the match did not have exactly two teams).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistMatch {
    pub start_ms: i64,
    pub lo: u32,
    pub split: u32,
    pub hi: u32,
}

/// The evaluation window's searches, artifact-independent.
#[derive(Debug, Clone)]
pub struct EvalHistory {
    /// The version of the lake's matches table read.
    pub lake_version: Option<i64>,
    pub ids: Vec<String>,
    pub searchers: Vec<Searcher>,
    /// Party key of each searcher within its match (0: solo).
    pub party: Vec<u32>,
    pub matches: Vec<HistMatch>,
    pub from_ms: i64,
    pub to_ms: i64,
    /// The last match start of the mode in the lake (labels are censored against it).
    pub data_end_ms: i64,
    pub horizon_ms: i64,
    /// Rows of the mode read: those from the day of the earliest snapshot on (rows played after
    /// the snapshot but before the window are recorded into the states, not searched).
    pub lake_rows: usize,
    pub(crate) rows: Vec<RowRec>,
}

/// A lake row kept for the replay, in time order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RowRec {
    pub player: u32,
    pub played: Played,
    pub in_party: bool,
    /// Its searcher, when it is in the window.
    pub searcher: Option<u32>,
}

/// Which rows to read.
#[derive(Debug, Clone)]
pub struct WindowSpec {
    pub lake: PathBuf,
    pub as_of: mm_lake::AsOf,
    pub mode: Option<String>,
    pub from_ms: i64,
    pub to_ms: i64,
    pub horizon_ms: i64,
    pub blowout_margin: f64,
    /// Matches before this time are not read: the artifacts' snapshots hold them (the earliest
    /// snapshot's time), so memory follows the rows after it, not the lake's.
    pub read_from_ms: i64,
}

/// Reads the lake's rows of the mode and lays out the window's searches.
///
/// # Errors
/// The lake cannot be read, a column is missing or null where it must not be, or the window
/// holds no match.
pub fn read(spec: &WindowSpec) -> Result<EvalHistory, EvalError> {
    let lake = Lake::open_as_of(&spec.lake, spec.as_of)?;
    // Whole days: a day's rows are read together.
    let first_day = spec
        .read_from_ms
        .div_euclid(mm_lake::schema::DAY_MS)
        .clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32;
    let files = lake.matches_files_from(first_day)?;
    if files.is_empty() {
        return Err(EvalError::Input(format!(
            "{}: the lake holds no matches",
            spec.lake.display()
        )));
    }
    let q = FeatureQuery {
        files,
        mode: spec.mode.clone(),
        until_ms: None,
        history: 1,
        outcome_interactions: 0,
        outcome_pattern: 0,
        past_churn: false,
        horizon_ms: spec.horizon_ms,
        blowout_margin: spec.blowout_margin,
        censor_windows: true,
        skill: None,
        data_start_ms: None,
        data_end_ms: None,
        truth: false,
    };
    let df = played_query(&q)
        .and_then(LazyFrame::collect)
        .map_err(|e| EvalError::Input(format!("{}: {e}", spec.lake.display())))?;
    let path = spec.lake.as_path();
    let mut h = from_frame(&df, path, spec)?;
    h.lake_version = lake.version();
    Ok(h)
}

fn opt_strings(df: &DataFrame, path: &Path, name: &str) -> Result<Vec<Option<String>>, EvalError> {
    let c = df.column(name).map_err(|e| input_err(path, e))?;
    Ok(c.str()
        .map_err(|e| input_err(path, e))?
        .iter()
        .map(|s| s.map(String::from))
        .collect())
}

fn from_frame(df: &DataFrame, path: &Path, spec: &WindowSpec) -> Result<EvalHistory, EvalError> {
    let c = Cols::read(df, path)?;
    let n = c.pid.len();
    let need = |v: Option<i64>, r: usize, what: &str| {
        v.ok_or_else(|| EvalError::Input(format!("{}: row {r}: {what} is null", path.display())))
    };
    let (ids, player) = player_index(&c.pid);
    let mut starts = Vec::with_capacity(n);
    let mut teams = Vec::with_capacity(n);
    for r in 0..n {
        starts.push(need(c.start[r], r, "start_ms")?);
        teams.push(c.team[r].unwrap_or(0));
    }
    let data_end_ms = starts.iter().copied().max().unwrap_or(i64::MIN);
    let churned = churn_labels(&player, &starts, data_end_ms, spec.horizon_ms);
    // Time order: start, match, team, player.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        (starts[a], &c.mid[a], teams[a], &c.pid[a])
            .cmp(&(starts[b], &c.mid[b], teams[b], &c.pid[b]))
    });
    let mut h = EvalHistory {
        lake_version: None,
        ids,
        searchers: Vec::new(),
        party: Vec::new(),
        matches: Vec::new(),
        from_ms: spec.from_ms,
        to_ms: spec.to_ms,
        data_end_ms,
        horizon_ms: spec.horizon_ms,
        lake_rows: n,
        rows: Vec::with_capacity(n),
    };
    let rows = Rows {
        c: &c,
        player: &player,
        starts: &starts,
        teams: &teams,
        churned: &churned,
    };
    let mut k = 0;
    while k < n {
        let r0 = order[k] as usize;
        let mut end = k + 1;
        while end < n && c.mid[order[end] as usize] == c.mid[r0] {
            end += 1;
        }
        rows.push_match(&mut h, &order[k..end], spec);
        k = end;
    }
    if h.searchers.is_empty() {
        return Err(EvalError::Input(format!(
            "{}: no match of mode {} starts in the evaluation window [{}, {})",
            path.display(),
            spec.mode.as_deref().unwrap_or("(any)"),
            fmt_ms(spec.from_ms),
            fmt_ms(spec.to_ms)
        )));
    }
    Ok(h)
}

/// The played-match columns [`from_frame`] reads.
struct Cols {
    pid: Vec<String>,
    mid: Vec<String>,
    start: Vec<Option<i64>>,
    team: Vec<Option<i64>>,
    party_id: Vec<Option<String>>,
    win: Vec<Option<bool>>,
    draw: Vec<Option<bool>>,
    diff: Vec<Option<f64>>,
    blow: Vec<Option<bool>>,
    perf: Vec<Option<f64>>,
    party: Vec<Option<bool>>,
}

impl Cols {
    fn read(df: &DataFrame, path: &Path) -> Result<Self, EvalError> {
        Ok(Cols {
            pid: strings(df, path, "player_id")?,
            mid: strings(df, path, "match_id")?,
            start: i64s(df, path, "start_ms")?,
            team: i64s(df, path, "team")?,
            party_id: opt_strings(df, path, "party_id")?,
            win: bools(df, path, "win")?,
            draw: bools(df, path, "draw")?,
            diff: f64s(df, path, "score_diff")?,
            blow: bools(df, path, "blowout_loss")?,
            perf: f64s(df, path, "perf_rank")?,
            party: bools(df, path, "party")?,
        })
    }
}

/// The distinct player ids in order of first appearance, and each row's index into them.
fn player_index(pid: &[String]) -> (Vec<String>, Vec<u32>) {
    let mut ids: Vec<String> = Vec::new();
    let mut index: HashMap<String, u32> = HashMap::new();
    let mut player = Vec::with_capacity(pid.len());
    for id in pid {
        let k = *index.entry(id.clone()).or_insert_with(|| {
            ids.push(id.clone());
            (ids.len() - 1) as u32
        });
        player.push(k);
    }
    (ids, player)
}

/// Each row's churn label: no next match within the horizon; `None` when the horizon runs past
/// the data's end. Rows are sorted by player and start: the next row of the same player is the
/// next match.
fn churn_labels(
    player: &[u32],
    starts: &[i64],
    data_end_ms: i64,
    horizon_ms: i64,
) -> Vec<Option<bool>> {
    let n = player.len();
    let mut churned = vec![None; n];
    for r in 0..n {
        if data_end_ms - starts[r] < horizon_ms {
            continue;
        }
        let next = (r + 1 < n && player[r + 1] == player[r]).then(|| starts[r + 1]);
        churned[r] = Some(next.is_none_or(|t| t - starts[r] > horizon_ms));
    }
    churned
}

/// The rows' columns as [`from_frame`] prepared them.
struct Rows<'a> {
    c: &'a Cols,
    player: &'a [u32],
    starts: &'a [i64],
    teams: &'a [i64],
    churned: &'a [Option<bool>],
}

impl Rows<'_> {
    /// One match's rows (`rows`, in time order): every row into the history, and, when the
    /// match starts in the window, its searchers, their parties and the match.
    fn push_match(&self, h: &mut EvalHistory, rows: &[u32], spec: &WindowSpec) {
        let Rows {
            c,
            player,
            starts,
            teams,
            churned,
        } = *self;
        let r0 = rows[0] as usize;
        let in_window = starts[r0] >= spec.from_ms && starts[r0] < spec.to_ms;
        let lo = h.searchers.len() as u32;
        let mut parties: HashMap<&str, u32> = HashMap::new();
        let first_team = teams[r0];
        let mut split = None;
        let mut n_teams = 1;
        for (pos, &r) in rows.iter().enumerate() {
            let r = r as usize;
            let outcome = match (c.win[r], c.draw[r]) {
                (Some(true), _) => Outcome3::Win,
                (_, Some(true)) => Outcome3::Draw,
                _ => Outcome3::Loss,
            };
            let played = Played {
                start_ms: starts[r],
                outcome,
                score_diff: c.diff[r].unwrap_or(f64::NAN),
                perf_rank: c.perf[r].unwrap_or(f64::NAN),
                blowout_loss: c.blow[r].unwrap_or(false),
            };
            let in_party = c.party[r].unwrap_or(false);
            let mut searcher = None;
            if in_window {
                if teams[r] != first_team && split.is_none() {
                    split = Some(lo + pos as u32);
                }
                if pos > 0 && teams[r] != teams[rows[pos - 1] as usize] {
                    n_teams += 1;
                }
                searcher = Some(h.searchers.len() as u32);
                h.searchers.push(Searcher {
                    player: player[r],
                    start_ms: starts[r],
                    match_ix: h.matches.len() as u32,
                    in_party,
                    outcome: match outcome {
                        Outcome3::Win => Outcome::Win,
                        Outcome3::Draw => Outcome::Draw,
                        Outcome3::Loss => Outcome::Loss,
                    },
                    churned: churned[r],
                });
                let key = match (&c.party_id[r], in_party) {
                    (Some(p), true) => {
                        let next = parties.len() as u32 + 1;
                        *parties.entry(p.as_str()).or_insert(next)
                    }
                    _ => 0,
                };
                h.party.push(key);
            }
            h.rows.push(RowRec {
                player: player[r],
                played,
                in_party,
                searcher,
            });
        }
        if in_window {
            let hi = h.searchers.len() as u32;
            let split = if n_teams == 2 {
                split.unwrap_or(hi)
            } else {
                hi
            };
            h.matches.push(HistMatch {
                start_ms: starts[r0],
                lo,
                split,
                hi,
            });
        }
    }
}

/// Every searcher of the window scored with one artifact: its member (raw skill, percentile,
/// games, churn after a win, a draw and a loss) from the state a service would have held.
///
/// Matches up to the snapshot are in the snapshot already; later ones are recorded in time
/// order. A player the snapshot does not hold starts as a new player.
#[must_use]
pub fn members(h: &EvalHistory, art: &Artifact) -> Vec<Member> {
    let as_of = art.manifest.snapshot_as_of_ms;
    let spec = art.churn.model.spec;
    let mut states: HashMap<u32, PlayerState> = HashMap::new();
    let mut out: Vec<Option<Member>> = vec![None; h.searchers.len()];
    let mut k = 0;
    while k < h.rows.len() {
        // One match at a time: every member is scored before any of the match is recorded.
        let start = h.rows[k].played.start_ms;
        let mut end = k + 1;
        while end < h.rows.len() && h.rows[end].played.start_ms == start && same_match(h, k, end) {
            end += 1;
        }
        if start > as_of {
            for rec in &h.rows[k..end] {
                let st = states
                    .entry(rec.player)
                    .or_insert_with(|| art.player_or_new(&h.ids[rec.player as usize]));
                if let Some(s) = rec.searcher {
                    out[s as usize] = Some(Member::from_state(art, st, start, rec.in_party));
                }
            }
            for rec in &h.rows[k..end] {
                if let Some(st) = states.get_mut(&rec.player) {
                    st.record(rec.played, &spec);
                }
            }
        }
        k = end;
    }
    out.into_iter()
        .map(|m| m.expect("every searcher starts after the snapshot (checked by the caller)"))
        .collect()
}

/// Rows `a` and `b` (same start) belong to the same match: in the window, by their searchers'
/// match; before it, rows of one start are recorded together, which is the same for states
/// (a player plays one match at a time).
fn same_match(h: &EvalHistory, a: usize, b: usize) -> bool {
    match (h.rows[a].searcher, h.rows[b].searcher) {
        (Some(x), Some(y)) => h.searchers[x as usize].match_ix == h.searchers[y as usize].match_ix,
        (None, None) => true,
        _ => false,
    }
}
