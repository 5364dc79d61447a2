//! Finished matches in the lake's terms: the rows a writer stages in the lake's order, and the
//! matches read back from a table file as the live update takes them
//! ([`mm_artifact::online::FinishedMatch`]).

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, TimestampMillisecondType};
use arrow_array::{Array, Float64Array, Int32Array, RecordBatch, StringArray};
use mm_artifact::online::{FinishedMatch, ResultRow};
use mm_artifact::skill::PerfColumns;

use crate::error::{LakeError, Result};
use crate::parquet_io::read_parquet_columns;
use crate::rows::{PlayerRow, RowsBuilder, to_lake_batch};
use crate::schema::{Outcome, col};

impl PlayerRow<'_> {
    /// The row as the live update reads it; `None` while its outcome is not resolved.
    #[must_use]
    pub fn result_row(&self) -> Option<ResultRow> {
        Some(ResultRow {
            player_id: self.player_id.to_string(),
            team: self.team,
            party_id: self.party_id.as_ref().map(ToString::to_string),
            role: self.role.as_ref().map(ToString::to_string),
            outcome: self.outcome?,
            team_score: self.team_score,
            stats: PerfColumns {
                kills: self.kills.map(f64::from),
                deaths_by_enemy: self.deaths_by_enemy.map(f64::from),
                deaths: self.deaths.map(f64::from),
                score: self.score,
                seconds_played: self.seconds_played,
                perf: self.perf,
                outcome: self.outcome,
            },
        })
    }
}

/// The lake batch of `rows` (with outcomes resolved), in the order given (sort it with
/// [`crate::rows::sort_lake_order`]), each recorded as line `lines[k]` of the source `source`
/// (`lines` as long as `rows`).
///
/// # Errors
/// The batch cannot be built (an internal error).
pub fn lake_batch<'r, 'a: 'r, R>(rows: R, source: &str, lines: &[u64]) -> Result<RecordBatch>
where
    R: IntoIterator<Item = &'r PlayerRow<'a>>,
    R::IntoIter: ExactSizeIterator,
{
    let rows = rows.into_iter();
    let mut b = RowsBuilder::with_capacity(rows.len());
    for (r, &line) in rows.zip(lines) {
        b.push(r, source, line, 0, 1);
    }
    to_lake_batch(&b.finish()).map_err(|e| LakeError::Arrow {
        path: source.into(),
        source: e,
    })
}

const READ: [&str; 15] = [
    col::MATCH_ID,
    col::MODE,
    col::START_TIME,
    col::TEAM,
    col::PLAYER_ID,
    col::OUTCOME,
    col::PARTY_ID,
    col::ROLE,
    col::KILLS,
    col::DEATHS,
    col::DEATHS_BY_ENEMY,
    col::SCORE,
    col::SECONDS_PLAYED,
    col::PERF,
    col::TEAM_SCORE,
];

/// The matches of one table file with their modes, in the file's order (the rows of a match
/// are contiguous in a lake file, in the lake's order).
///
/// # Errors
/// The file cannot be read or lacks a required column.
pub fn read_finished(path: &Path) -> Result<Vec<(String, FinishedMatch)>> {
    let mut out = Vec::new();
    for b in read_parquet_columns(path, Some(&READ))? {
        read_batch(path, &b, &mut out)?;
    }
    Ok(out)
}

/// The matches of one lake batch (rows in the lake's order, as a table file holds them) with
/// their modes: what [`read_finished`] gives for the file this batch is written to.
///
/// # Errors
/// The batch lacks a required column.
pub fn finished_of_batch(b: &RecordBatch, source: &str) -> Result<Vec<(String, FinishedMatch)>> {
    let mut out = Vec::new();
    read_batch(Path::new(source), b, &mut out)?;
    Ok(out)
}

fn read_batch(path: &Path, b: &RecordBatch, out: &mut Vec<(String, FinishedMatch)>) -> Result<()> {
    let need = |name: &str| {
        b.column_by_name(name)
            .cloned()
            .ok_or_else(|| LakeError::Corrupt {
                path: path.to_path_buf(),
                reason: format!("no column {name}"),
            })
    };
    let (mid, modes, start) = (
        need(col::MATCH_ID)?,
        need(col::MODE)?,
        need(col::START_TIME)?,
    );
    let (team, pid, outcome) = (need(col::TEAM)?, need(col::PLAYER_ID)?, need(col::OUTCOME)?);
    let mid: &StringArray = mid.as_string::<i32>();
    let modes: &StringArray = modes.as_string::<i32>();
    let pid: &StringArray = pid.as_string::<i32>();
    let outcome: &StringArray = outcome.as_string::<i32>();
    let start = start.as_primitive::<TimestampMillisecondType>();
    let team: &Int32Array = team.as_primitive::<Int32Type>();
    let opt_str = |name: &str| b.column_by_name(name).map(|a| a.as_string::<i32>().clone());
    let opt_i32 = |name: &str| {
        b.column_by_name(name)
            .map(|a| a.as_primitive::<Int32Type>().clone())
    };
    let opt_f64 = |name: &str| {
        b.column_by_name(name)
            .map(|a| a.as_primitive::<Float64Type>().clone())
    };
    let (party, role) = (opt_str(col::PARTY_ID), opt_str(col::ROLE));
    let (kills, deaths, dbe) = (
        opt_i32(col::KILLS),
        opt_i32(col::DEATHS),
        opt_i32(col::DEATHS_BY_ENEMY),
    );
    let (score, secs, perf, ts) = (
        opt_f64(col::SCORE),
        opt_f64(col::SECONDS_PLAYED),
        opt_f64(col::PERF),
        opt_f64(col::TEAM_SCORE),
    );
    let s = |a: &Option<StringArray>, i: usize| {
        a.as_ref()
            .filter(|a| a.is_valid(i))
            .map(|a| a.value(i).to_string())
    };
    let n = |a: &Option<Int32Array>, i: usize| {
        a.as_ref()
            .filter(|a| a.is_valid(i))
            .map(|a| f64::from(a.value(i)))
    };
    let f = |a: &Option<Float64Array>, i: usize| {
        a.as_ref().filter(|a| a.is_valid(i)).map(|a| a.value(i))
    };
    for i in 0..b.num_rows() {
        let o = Outcome::parse(outcome.value(i)).ok_or_else(|| LakeError::Corrupt {
            path: path.to_path_buf(),
            reason: format!("row {i}: outcome {:?}", outcome.value(i)),
        })?;
        let row = ResultRow {
            player_id: pid.value(i).to_string(),
            team: team.value(i),
            party_id: s(&party, i),
            role: s(&role, i),
            outcome: o,
            team_score: f(&ts, i),
            stats: PerfColumns {
                kills: n(&kills, i),
                deaths: n(&deaths, i),
                deaths_by_enemy: n(&dbe, i),
                score: f(&score, i),
                seconds_played: f(&secs, i),
                perf: f(&perf, i),
                outcome: Some(o),
            },
        };
        let (m, t) = (mid.value(i), start.value(i));
        match out.last_mut() {
            Some((_, last)) if last.match_id == m && last.start_ms == t => last.rows.push(row),
            _ => out.push((
                modes.value(i).to_string(),
                FinishedMatch {
                    match_id: m.to_string(),
                    start_ms: t,
                    rows: vec![row],
                },
            )),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::ArrayRef;

    use super::*;
    use crate::parquet_io::write_parquet_file;

    const T: i64 = 1_704_067_200_000;

    /// Two players of one 1v1 match with every column the update reads, a draw of the same id
    /// at a later start (another match), and a free-for-all row with none of the optional
    /// columns: the lake rows in the lake's order.
    fn rows() -> Vec<PlayerRow<'static>> {
        let full = |player: &'static str, team, outcome| PlayerRow {
            match_id: "m1".into(),
            mode: "duel".into(),
            start_ms: T,
            team,
            player_id: player.into(),
            outcome: Some(outcome),
            party_id: Some(format!("party-{player}").into()),
            role: Some("mid".into()),
            kills: Some(7 + team),
            deaths: Some(3),
            deaths_by_enemy: Some(2),
            score: Some(1250.5),
            seconds_played: Some(600.0),
            perf: Some(0.25 * f64::from(team)),
            team_score: Some(13.0 - f64::from(team)),
            ..PlayerRow::default()
        };
        let again = |player: &'static str, team| PlayerRow {
            start_ms: T + 5_000,
            outcome: Some(Outcome::Draw),
            ..full(player, team, Outcome::Draw)
        };
        let bare = PlayerRow {
            match_id: "f1".into(),
            mode: "ffa".into(),
            start_ms: T + 9_000,
            team: 3,
            player_id: "p9".into(),
            outcome: Some(Outcome::Loss),
            ..PlayerRow::default()
        };
        vec![
            full("p1", 0, Outcome::Win),
            full("p2", 1, Outcome::Loss),
            again("p1", 0),
            again("p2", 1),
            bare,
        ]
    }

    /// What the update must read back: the matches in order, each with its mode and rows.
    fn expected(rows: &[PlayerRow<'_>]) -> Vec<(String, FinishedMatch)> {
        let m = |mode: &str, id: &str, start_ms, rs: &[PlayerRow<'_>]| {
            let rows = rs.iter().map(|r| r.result_row().unwrap()).collect();
            (
                mode.to_string(),
                FinishedMatch {
                    match_id: id.to_string(),
                    start_ms,
                    rows,
                },
            )
        };
        vec![
            m("duel", "m1", T, &rows[0..2]),
            m("duel", "m1", T + 5_000, &rows[2..4]),
            m("ffa", "f1", T + 9_000, &rows[4..5]),
        ]
    }

    #[test]
    fn finished_matches_read_back_from_a_batch_and_from_its_file() {
        let rows = rows();
        let want = expected(&rows);
        // Spelled out once, so that `result_row` itself is checked, not only compared with.
        let p1 = &want[0].1.rows[0];
        assert_eq!(
            (p1.player_id.as_str(), p1.team, p1.outcome, p1.team_score),
            ("p1", 0, Outcome::Win, Some(13.0))
        );
        assert_eq!(
            (p1.party_id.as_deref(), p1.role.as_deref()),
            (Some("party-p1"), Some("mid"))
        );
        let s = &p1.stats;
        assert_eq!(
            (s.kills, s.deaths, s.deaths_by_enemy, s.score),
            (Some(7.0), Some(3.0), Some(2.0), Some(1250.5))
        );
        assert_eq!(
            (s.seconds_played, s.perf, s.outcome),
            (Some(600.0), Some(0.0), Some(Outcome::Win))
        );
        let bare = &want[2].1.rows[0];
        assert_eq!((bare.party_id.as_ref(), bare.stats.kills), (None, None));

        let batch = lake_batch(&rows, "live", &[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(finished_of_batch(&batch, "live").unwrap(), want);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("part.parquet");
        write_parquet_file(&file, &[batch]).unwrap();
        assert_eq!(read_finished(&file).unwrap(), want);
    }

    #[test]
    fn a_row_without_its_outcome_is_not_a_result() {
        let row = PlayerRow {
            outcome: None,
            ..rows()[0].clone()
        };
        assert_eq!(row.result_row(), None);
    }

    /// A batch without a column the update needs, or with an outcome it cannot read, is refused
    /// naming the file and what is wrong.
    #[test]
    fn a_batch_missing_a_column_or_with_a_bad_outcome_is_refused() {
        let batch = lake_batch(&rows(), "live", &[1, 2, 3, 4, 5]).unwrap();
        let at = batch.schema().index_of(col::OUTCOME).unwrap();
        let keep: Vec<usize> = (0..batch.num_columns()).filter(|&i| i != at).collect();
        let err = finished_of_batch(&batch.project(&keep).unwrap(), "live").unwrap_err();
        assert!(
            matches!(&err, LakeError::Corrupt { path, reason }
                if path == Path::new("live") && reason == "no column outcome"),
            "{err}"
        );
        let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
        let bad: Vec<&str> = vec!["win", "loss", "maybe", "draw", "loss"];
        columns[at] = Arc::new(StringArray::from(bad));
        let bad = RecordBatch::try_new(batch.schema(), columns).unwrap();
        let err = finished_of_batch(&bad, "live").unwrap_err();
        assert!(
            matches!(&err, LakeError::Corrupt { reason, .. } if reason == "row 2: outcome \"maybe\""),
            "{err}"
        );
    }
}
