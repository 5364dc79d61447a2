//! Pass 2, one day at a time: deduplication against the run and the lake, the match-level rules,
//! outcome derivation from team scores, sorting, and the day's Parquet file.
//!
//! Every row of a match has the match's start time (the start check removes the rows that
//! disagree before a day is finalised, see [`crate::starts`]),
//! so a match never spans two days and these rules can look at one day's partition alone.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float64Type, Int32Type, Int64Type, TimestampMillisecondType, UInt8Type, UInt32Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow_select::concat::concat_batches;
use arrow_select::take::take_record_batch;
use hashbrown::HashMap;
use mm_lake::parquet_io::read_parquet_columns;
use mm_lake::rules::{self, MatchRejection, TeamClaim};
use mm_lake::schema::{Outcome, col};
use mm_lake::{Lake, Txn, staging_schema, to_lake_batch};
use xxhash_rust::xxh3::xxh3_64;

use crate::IngestError;
use crate::parse::QEntry;

/// What one day contributed, per source file.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DayCounts {
    pub accepted: u64,
    pub duplicates: u64,
    pub quarantined: u64,
    pub lake_rows: u64,
}

#[derive(Debug)]
pub struct DayResult {
    pub day: i32,
    /// The staged file (relative to the lake root) and its rows, if any row was accepted.
    pub written: Option<(PathBuf, u64)>,
    pub per_file: HashMap<u32, DayCounts>,
    pub quarantine: Vec<QEntry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    Duplicate,
    Accepted,
    Quarantined,
}

fn internal(e: impl std::fmt::Display) -> IngestError {
    IngestError::Internal {
        path: PathBuf::from("<staging>"),
        reason: e.to_string(),
    }
}

/// Players (with their team) already in the lake for each match of the day.
fn existing_rows(files: &[PathBuf]) -> Result<HashMap<String, Vec<(String, i32)>>, IngestError> {
    let mut out: HashMap<String, Vec<(String, i32)>> = HashMap::new();
    for f in files {
        for b in read_parquet_columns(f, Some(&[col::MATCH_ID, col::PLAYER_ID, col::TEAM]))? {
            let (Some(m), Some(p), Some(t)) = (
                b.column_by_name(col::MATCH_ID),
                b.column_by_name(col::PLAYER_ID),
                b.column_by_name(col::TEAM),
            ) else {
                return Err(mm_lake::LakeError::Corrupt {
                    path: f.clone(),
                    reason: "lake file lacks match_id/player_id/team".into(),
                }
                .into());
            };
            let (m, p, t) = (
                m.as_string::<i32>(),
                p.as_string::<i32>(),
                t.as_primitive::<Int32Type>(),
            );
            for i in 0..b.num_rows() {
                out.entry_ref(m.value(i))
                    .or_default()
                    .push((p.value(i).to_string(), t.value(i)));
            }
        }
    }
    Ok(out)
}

/// Where each match's run of rows starts (with `n` at the end) when rows `0..n` are already in
/// lake order, (start, match, team), as a time-ordered export of whole matches is; `None` when
/// they are not. One pass that compares neighbouring match ids for equality and orders them
/// only where the match changes.
fn input_order_groups(
    n: usize,
    start: &arrow_array::TimestampMillisecondArray,
    match_id: &StringArray,
    team: &arrow_array::Int32Array,
) -> Option<Vec<usize>> {
    let mut bounds = Vec::with_capacity(n / 8 + 2);
    bounds.push(0);
    for i in 1..n {
        let in_order = match start.value(i - 1).cmp(&start.value(i)) {
            std::cmp::Ordering::Less => {
                if match_id.value(i - 1) != match_id.value(i) {
                    bounds.push(i);
                }
                true
            }
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => {
                let (a, b) = (match_id.value(i - 1), match_id.value(i));
                if a == b {
                    team.value(i - 1) <= team.value(i)
                } else {
                    bounds.push(i);
                    a < b
                }
            }
        };
        if !in_order {
            return None;
        }
    }
    if n > 0 {
        bounds.push(n);
    }
    Some(bounds)
}

/// Where each match's run of `order` starts (with `order.len()` at the end).
fn group_bounds(order: &[usize], match_id: &StringArray) -> Vec<usize> {
    let mut bounds = vec![0];
    bounds.extend(
        (1..order.len()).filter(|&k| match_id.value(order[k - 1]) != match_id.value(order[k])),
    );
    if !order.is_empty() {
        bounds.push(order.len());
    }
    bounds
}

/// Whether the rows' player ids are pairwise different, by their 64-bit hashes: `false` also
/// when two different ids share a hash (the caller then compares the ids themselves). Sorting
/// ten integers is much cheaper than sorting ten strings.
fn distinct_players(rows: &[usize], player: &StringArray, hashes: &mut Vec<u64>) -> bool {
    hashes.clear();
    hashes.extend(rows.iter().map(|&i| xxh3_64(player.value(i).as_bytes())));
    hashes.sort_unstable();
    hashes.windows(2).all(|w| w[0] != w[1])
}

/// The staged columns the rules read, typed.
struct Cols<'a> {
    match_id: &'a StringArray,
    player: &'a StringArray,
    outcome: &'a StringArray,
    team: &'a arrow_array::Int32Array,
    start: &'a arrow_array::TimestampMillisecondArray,
    team_score: &'a arrow_array::Float64Array,
    line: &'a arrow_array::Int64Array,
    file_idx: &'a UInt32Array,
    record_rows: &'a arrow_array::UInt8Array,
}

impl<'a> Cols<'a> {
    fn of(batch: &'a RecordBatch) -> Result<Cols<'a>, IngestError> {
        let c = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| internal(format!("missing column {name}")))
        };
        Ok(Cols {
            match_id: c(col::MATCH_ID)?.as_string::<i32>(),
            player: c(col::PLAYER_ID)?.as_string::<i32>(),
            outcome: c(col::OUTCOME)?.as_string::<i32>(),
            team: c(col::TEAM)?.as_primitive::<Int32Type>(),
            start: c(col::START_TIME)?.as_primitive::<TimestampMillisecondType>(),
            team_score: c(col::TEAM_SCORE)?.as_primitive::<Float64Type>(),
            line: c(col::SOURCE_LINE)?.as_primitive::<Int64Type>(),
            file_idx: c(mm_lake::rows::internal::FILE_IDX)?.as_primitive::<UInt32Type>(),
            record_rows: c(mm_lake::rows::internal::RECORD_ROWS)?.as_primitive::<UInt8Type>(),
        })
    }
}

/// Finalises one day's staged rows: decides every row's fate and stages a Parquet file of the
/// accepted ones. `earlier` are files this run already staged for the day (when the memory
/// budget made it finalise the day before the input ended): they count as part of the lake.
pub fn finalize_day(
    day: i32,
    batches: Vec<RecordBatch>,
    lake: &Lake,
    txn: &Txn,
    earlier: &[PathBuf],
) -> Result<DayResult, IngestError> {
    let mut result = DayResult {
        day,
        written: None,
        per_file: HashMap::new(),
        quarantine: Vec::new(),
    };
    if batches.is_empty() {
        return Ok(result);
    }
    let batch = if batches.len() == 1 {
        batches
            .into_iter()
            .next()
            .unwrap_or_else(|| RecordBatch::new_empty(staging_schema()))
    } else {
        concat_batches(&staging_schema(), &batches).map_err(internal)?
    };
    let n = batch.num_rows();
    let cols = Cols::of(&batch)?;
    let mut existing_files = lake.partition_files(day)?;
    for rel in earlier {
        existing_files.push(txn.staged_path(rel)?);
    }
    let existing = existing_rows(&existing_files)?;
    let mut f = Fates {
        fate: vec![Fate::Accepted; n],
        why: HashMap::new(),
    };

    // Rows in lake order: (start, match, team), input order within a team. The start check
    // gives every match a single start time, so each match is one contiguous run of this
    // order, and the rules below walk runs instead of hashing every row.
    let key = |a: &usize, b: &usize| {
        cols.start
            .value(*a)
            .cmp(&cols.start.value(*b))
            .then_with(|| cols.match_id.value(*a).cmp(cols.match_id.value(*b)))
            .then_with(|| cols.team.value(*a).cmp(&cols.team.value(*b)))
    };
    let mut order: Vec<usize> = (0..n).collect();
    let groups = input_order_groups(n, cols.start, cols.match_id, cols.team).unwrap_or_else(|| {
        order.sort_by(key); // stable: input order within a team
        group_bounds(&order, cols.match_id)
    });
    // Steps 1 and 2, a match at a time.
    let mut derived: HashMap<usize, Outcome> = HashMap::new();
    let mut scratch = (Vec::new(), Vec::new());
    for group in groups.windows(2).map(|w| &order[w[0]..w[1]]) {
        judge_match(
            &batch,
            &cols,
            group,
            &existing,
            &mut f,
            &mut derived,
            &mut scratch,
        );
    }
    let records = whole_records(&cols, n, &mut f);
    account(&cols, n, &f, records, &mut result);
    write_accepted(
        &batch,
        &cols,
        order,
        &f,
        &derived,
        (day, earlier.len()),
        txn,
        &mut result,
    )?;
    Ok(result)
}

/// Steps 1 and 2 for one match (its rows `group`, in lake order): duplicates of the lake by key
/// and within the run by key and content (the first wins), then the match-level rules over the
/// rows still accepted; outcomes derived from team scores go to `derived`.
fn judge_match(
    batch: &RecordBatch,
    cols: &Cols,
    group: &[usize],
    existing: &HashMap<String, Vec<(String, i32)>>,
    f: &mut Fates,
    derived: &mut HashMap<usize, Outcome>,
    (by_player, hashes): &mut (Vec<usize>, Vec<u64>),
) {
    let (player, line) = (cols.player, cols.line);
    let m = cols.match_id.value(group[0]);
    let stored = existing.get(m);
    let lake_cols = mm_lake::schema::matches_schema().fields().len() - 2; // all but source_file/line
    let same_content = |i: usize, j: usize| {
        (0..lake_cols)
            .all(|k| batch.column(k).slice(i, 1).to_data() == batch.column(k).slice(j, 1).to_data())
    };

    // 1. Duplicates: of the lake by key; within the run by key and content (first wins).
    by_player.clear();
    for &i in group {
        if stored.is_some_and(|v| v.iter().any(|(q, _)| q == player.value(i))) {
            f.fate[i] = Fate::Duplicate;
        } else {
            by_player.push(i);
        }
    }
    if distinct_players(by_player, player, hashes) {
        by_player.clear(); // the common case: nobody twice, nothing to compare
    }
    by_player.sort_by(|a, b| player.value(*a).cmp(player.value(*b)).then(a.cmp(b)));
    for same in by_player.chunk_by(|a, b| player.value(*a) == player.value(*b)) {
        let first = same[0];
        for &j in &same[1..] {
            if same_content(j, first) {
                f.fate[j] = Fate::Duplicate;
            } else {
                let reason = format!(
                    "player {} appears twice in match {m} with different values (lines {} and {})",
                    player.value(j),
                    line.value(first),
                    line.value(j)
                );
                f.quarantine(first, rules::PLAYER_TWICE, reason.clone());
                f.quarantine(j, rules::PLAYER_TWICE, reason);
            }
        }
    }

    // 2. Match-level rules over the rows still accepted.
    let rows: Vec<usize> = group
        .iter()
        .copied()
        .filter(|&i| f.fate[i] == Fate::Accepted)
        .collect();
    if rows.is_empty() {
        return;
    }
    let mut teams: Vec<i32> = rows.iter().map(|&i| cols.team.value(i)).collect();
    if let Some(v) = stored {
        teams.extend(v.iter().map(|(_, t)| *t));
    }
    teams.sort_unstable();
    teams.dedup();
    if let Err(e) = rules::two_teams(m, &teams) {
        for &i in &rows {
            f.quarantine(i, e.category, e.reason.clone());
        }
        return;
    }
    match resolve_outcomes(m, &rows, cols.team, cols.outcome, cols.team_score) {
        Ok(d) => derived.extend(d),
        Err(e) => {
            for &i in &rows {
                f.quarantine(i, e.category, e.reason.clone());
            }
        }
    }
}

/// The fate of each record that became several rows (one per player), keyed by (file,
/// line), and the row that decided a quarantine.
type Records = HashMap<(u32, i64), (Fate, Option<usize>)>;

/// Step 3: a record that became several rows lands whole or not at all (a quarantined row
/// quarantines its record's other rows, with its reason).
fn whole_records(cols: &Cols, n: usize, f: &mut Fates) -> Records {
    let (file_idx, line, record_rows) = (cols.file_idx, cols.line, cols.record_rows);
    let mut records: Records = HashMap::new();
    for i in (0..n).filter(|&i| record_rows.value(i) > 1) {
        let e = records
            .entry((file_idx.value(i), line.value(i)))
            .or_insert((Fate::Duplicate, None));
        if f.fate[i] > e.0 {
            e.0 = f.fate[i];
        }
        if f.fate[i] == Fate::Quarantined && e.1.is_none() {
            e.1 = Some(i);
        }
    }
    for i in (0..n).filter(|&i| record_rows.value(i) > 1) {
        let (rec_fate, culprit) = records[&(file_idx.value(i), line.value(i))];
        if rec_fate == Fate::Quarantined && f.fate[i] != Fate::Quarantined {
            let (cat, reason) = culprit
                .and_then(|j| f.why.get(&j))
                .cloned()
                .unwrap_or_default();
            f.quarantine(i, &cat, reason);
        }
    }
    records
}

/// Step 4: accounting (records, not rows) and quarantine entries.
fn account(cols: &Cols, n: usize, f: &Fates, mut records: Records, result: &mut DayResult) {
    let (file_idx, line) = (cols.file_idx, cols.line);
    for i in 0..n {
        let counts = result.per_file.entry(file_idx.value(i)).or_default();
        if f.fate[i] == Fate::Accepted {
            counts.lake_rows += 1;
        }
        if cols.record_rows.value(i) > 1 {
            match records.remove(&(file_idx.value(i), line.value(i))) {
                Some((rf, _)) => bump(counts, rf),
                None => continue, // this record was counted at its first row
            }
        } else {
            bump(counts, f.fate[i]);
        }
        if f.fate[i] == Fate::Quarantined {
            let (cat, reason) = f.why.get(&i).cloned().unwrap_or_default();
            result.quarantine.push(QEntry {
                file_idx: file_idx.value(i),
                line: u64::try_from(line.value(i)).unwrap_or_default(),
                stage: "match",
                field: Some(cat),
                reason,
                match_id: Some(cols.match_id.value(i).to_string()),
                player_id: Some(cols.player.value(i).to_string()),
                raw: None,
            });
        }
    }
}

/// Step 5: the accepted rows, in lake order (`order`), with derived outcomes, staged as the
/// day's file number `part` of this run.
#[allow(clippy::too_many_arguments)]
fn write_accepted(
    batch: &RecordBatch,
    cols: &Cols,
    order: Vec<usize>,
    f: &Fates,
    derived: &HashMap<usize, Outcome>,
    (day, part): (i32, usize),
    txn: &Txn,
    result: &mut DayResult,
) -> Result<(), IngestError> {
    let n = batch.num_rows();
    let keep: Vec<usize> = order
        .into_iter()
        .filter(|&i| f.fate[i] == Fate::Accepted)
        .collect();
    if keep.is_empty() {
        return Ok(());
    }
    let mut out = batch.clone();
    if !derived.is_empty() {
        let outcome = cols.outcome;
        let filled: StringArray = (0..n)
            .map(|i| {
                if outcome.is_null(i) {
                    derived.get(&i).map(|o| o.as_str())
                } else {
                    Some(outcome.value(i))
                }
            })
            .collect();
        let mut columns: Vec<ArrayRef> = out.columns().to_vec();
        let k = staging_schema().index_of(col::OUTCOME).map_err(internal)?;
        columns[k] = Arc::new(filled);
        out = RecordBatch::try_new(staging_schema(), columns).map_err(internal)?;
    }
    let identity = keep.len() == n && keep.iter().enumerate().all(|(k, &i)| k == i);
    if !identity {
        let idx = UInt32Array::from_iter_values(keep.iter().map(|&i| i as u32));
        out = take_record_batch(&out, &idx).map_err(internal)?;
    }
    let out = to_lake_batch(&out).map_err(internal)?;
    let rel = Lake::partition_rel(day).join(format!("part-{}-{part}.parquet", txn.run_id()));
    txn.write_staged(&rel, &[out])?;
    result.written = Some((rel, keep.len() as u64));
    Ok(())
}

/// Each row's fate, with the (category, reason) of every quarantined row.
struct Fates {
    fate: Vec<Fate>,
    why: HashMap<usize, (String, String)>,
}

impl Fates {
    fn quarantine(&mut self, i: usize, cat: &str, reason: String) {
        if self.fate[i] != Fate::Quarantined {
            self.fate[i] = Fate::Quarantined;
            self.why.insert(i, (cat.to_string(), reason));
        }
    }
}

fn bump(c: &mut DayCounts, f: Fate) {
    match f {
        Fate::Accepted => c.accepted += 1,
        Fate::Duplicate => c.duplicates += 1,
        Fate::Quarantined => c.quarantined += 1,
    }
}

/// The match rules of [`mm_lake::rules`] on rows `rows` of the day's batch: the outcome each
/// row without one takes from the team scores, `(row, outcome)`.
fn resolve_outcomes(
    m: &str,
    rows: &[usize],
    team: &arrow_array::Int32Array,
    outcome: &StringArray,
    team_score: &arrow_array::Float64Array,
) -> Result<Vec<(usize, Outcome)>, MatchRejection> {
    let mut claims = Vec::with_capacity(rows.len());
    for &i in rows {
        let given = if outcome.is_null(i) {
            None
        } else {
            Some(
                Outcome::parse(outcome.value(i)).ok_or_else(|| MatchRejection {
                    category: rules::INCONSISTENT_OUTCOMES,
                    reason: format!("bad outcome in match {m}"),
                })?,
            )
        };
        claims.push(TeamClaim {
            team: team.value(i),
            outcome: given,
            team_score: (!team_score.is_null(i)).then(|| team_score.value(i)),
        });
    }
    let mut resolved = Vec::with_capacity(rows.len());
    rules::resolve_outcomes(m, &claims, &mut resolved)?;
    Ok(rows
        .iter()
        .zip(resolved)
        .filter(|&(&i, _)| outcome.is_null(i))
        .map(|(&i, o)| (i, o))
        .collect())
}

#[cfg(test)]
mod tests {
    use arrow_array::{Int32Array, TimestampMillisecondArray};
    use proptest::prelude::*;

    use super::*;

    /// Rows `(file, line, record_rows, fate)` of one day, as a staging batch.
    fn staged(rows: &[(u32, u64, u8, Fate)]) -> (RecordBatch, Fates) {
        let mut b = mm_lake::rows::RowsBuilder::with_capacity(rows.len());
        for (i, &(file, line, record_rows, _)) in rows.iter().enumerate() {
            let row = mm_lake::rows::PlayerRow {
                match_id: format!("m{file}-{line}").into(),
                mode: "duel".into(),
                start_ms: 1_704_067_200_000,
                team: (i % 2) as i32,
                player_id: format!("p{i}").into(),
                outcome: Some(Outcome::Win),
                ..Default::default()
            };
            b.push(&row, "in.csv", line, file, record_rows);
        }
        let fates = Fates {
            fate: rows.iter().map(|r| r.3).collect(),
            why: HashMap::new(),
        };
        (b.finish(), fates)
    }

    /// A record that became several rows lands whole or not at all, and counts once: one
    /// quarantined row quarantines the rest of its record with its reason (and nothing in
    /// another file at the same line); a record of a duplicate and a new row is accepted; a
    /// record of duplicates is one duplicate; the quarantine holds one entry per record.
    #[test]
    fn a_record_of_several_rows_lands_whole_and_counts_once() {
        use Fate::{Accepted as A, Duplicate as D, Quarantined as Q};
        let (batch, mut f) = staged(&[
            (0, 5, 3, A),
            (0, 5, 3, Q),
            (0, 5, 3, Q),
            (0, 6, 2, D),
            (0, 6, 2, A),
            (1, 5, 2, A),
            (1, 5, 2, A),
            (1, 9, 2, D),
            (1, 9, 2, D),
            (1, 10, 1, Q),
            (1, 11, 1, A),
        ]);
        f.why.insert(1, ("player_twice".into(), "why".into()));
        f.why.insert(2, ("two_teams".into(), "later".into()));
        f.why.insert(9, ("two_teams".into(), "alone".into()));
        let cols = Cols::of(&batch).unwrap();
        let records = whole_records(&cols, batch.num_rows(), &mut f);
        assert_eq!(f.fate, [Q, Q, Q, D, A, A, A, D, D, Q, A]);
        // The record's first quarantined row decides its reason.
        assert_eq!(f.why[&0], ("player_twice".to_string(), "why".to_string()));
        let mut result = DayResult {
            day: 0,
            written: None,
            per_file: HashMap::new(),
            quarantine: Vec::new(),
        };
        account(&cols, batch.num_rows(), &f, records, &mut result);
        let c = |file: u32| {
            let c = &result.per_file[&file];
            (c.accepted, c.duplicates, c.quarantined, c.lake_rows)
        };
        assert_eq!(
            c(0),
            (1, 0, 1, 1),
            "file 0: records 6 (accepted) and 5 (quarantined)"
        );
        assert_eq!(
            c(1),
            (2, 1, 1, 3),
            "file 1: records 5 and 11, 9 (duplicates), 10"
        );
        let entries: Vec<(u32, u64, &str, &str, &str)> = result
            .quarantine
            .iter()
            .map(|q| {
                (
                    q.file_idx,
                    q.line,
                    q.field.as_deref().unwrap(),
                    q.reason.as_str(),
                    q.player_id.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [
                (0, 5, "player_twice", "why", "p0"),
                (1, 10, "two_teams", "alone", "p9"),
            ],
            "one entry per record (its line), with the reason of the row that decided it"
        );
    }

    /// A player twice in a match is a duplicate only when every lake column agrees, the last
    /// one (`extra`) included; otherwise both rows are quarantined.
    #[test]
    fn a_player_twice_differing_in_any_lake_column_is_quarantined() {
        for (extra, want) in [
            ("{\"a\":1}", Fate::Duplicate),
            ("{\"a\":2}", Fate::Quarantined),
        ] {
            let mut b = mm_lake::rows::RowsBuilder::with_capacity(3);
            let row =
                |player: &str, team: i32, outcome: Outcome, extra: &str| mm_lake::rows::PlayerRow {
                    match_id: "m".into(),
                    mode: "duel".into(),
                    start_ms: 1_704_067_200_000,
                    team,
                    player_id: player.to_string().into(),
                    outcome: Some(outcome),
                    extra: Some(extra.into()),
                    ..Default::default()
                };
            b.push(&row("p1", 0, Outcome::Win, "{\"a\":1}"), "in.csv", 2, 0, 1);
            b.push(&row("p2", 1, Outcome::Loss, "{}"), "in.csv", 3, 0, 1);
            b.push(&row("p1", 0, Outcome::Win, extra), "in.csv", 4, 0, 1);
            let batch = b.finish();
            let cols = Cols::of(&batch).unwrap();
            let mut f = Fates {
                fate: vec![Fate::Accepted; 3],
                why: HashMap::new(),
            };
            let (mut derived, mut scratch) = (HashMap::new(), (Vec::new(), Vec::new()));
            let existing = HashMap::new();
            let group = [0, 2, 1];
            judge_match(
                &batch,
                &cols,
                &group,
                &existing,
                &mut f,
                &mut derived,
                &mut scratch,
            );
            assert_eq!(f.fate[2], want, "{extra}");
            if want == Fate::Quarantined {
                assert_eq!(f.fate[0], Fate::Quarantined);
                assert!(f.why[&2].1.contains("appears twice"), "{:?}", f.why);
            } else {
                assert_eq!(&f.fate[..2], [Fate::Accepted; 2]);
            }
        }
    }

    proptest! {
        /// The one-pass order check and grouping agree with the plain definition: sorted by
        /// (start, match, team) exactly when every neighbour pair is in order, and then the
        /// groups are the runs of equal match ids (what `chunk_by` finds).
        #[test]
        fn one_pass_groups_are_the_runs_of_equal_matches(
            rows in proptest::collection::vec((0_i64..3, 0_usize..4, 0_i32..2), 0..40),
            sort_first in any::<bool>(),
        ) {
            let names = ["a", "b", "aa", "c"];
            let mut rows = rows;
            if sort_first {
                rows.sort_by(|x, y| (x.0, names[x.1], x.2).cmp(&(y.0, names[y.1], y.2)));
            }
            let start = TimestampMillisecondArray::from(rows.iter().map(|r| r.0).collect::<Vec<_>>());
            let match_id = StringArray::from(rows.iter().map(|r| names[r.1]).collect::<Vec<_>>());
            let team = Int32Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>());
            let n = rows.len();
            let key = |a: usize, b: usize| {
                (start.value(a), match_id.value(a), team.value(a))
                    .cmp(&(start.value(b), match_id.value(b), team.value(b)))
            };
            let sorted = (1..n).all(|i| key(i - 1, i).is_le());
            let bounds = input_order_groups(n, &start, &match_id, &team);
            prop_assert_eq!(bounds.is_some(), sorted);
            if let Some(bounds) = bounds {
                let order: Vec<usize> = (0..n).collect();
                let want: Vec<Vec<usize>> = order
                    .chunk_by(|a, b| match_id.value(*a) == match_id.value(*b))
                    .map(<[usize]>::to_vec)
                    .collect();
                let got: Vec<Vec<usize>> =
                    bounds.windows(2).map(|w| order[w[0]..w[1]].to_vec()).collect();
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(group_bounds(&order, &match_id), bounds);
            }
        }
    }
}
