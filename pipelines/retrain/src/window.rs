//! The sliding windows continued runs refit on: the team win model's matches (one file per
//! run) and the churn model's rows.
//!
//! The churn rows are a Delta table in the mode's
//! working folder (`churn-window/`), partitioned by `run`, the cutoff day (`YYYY-MM-DD`) of the
//! run that wrote the rows, with the columns `player_id`, `start_ms` and the model's features.
//!
//! - A **continued** run replaces its own partition with the rows of the matches it applied
//!   (new and late), one commit, and drops the partitions whose rows have all left the window
//!   (a commit each); a rerun of the same run replaces its rows, never duplicates them.
//! - A **full** run seeds the table with its feature table's rows of the last
//!   `--churn-window-days` days before its cutoff (in its own partition) and drops every other partition, so the
//!   first continued day already has a full window. When its features differ from the table's
//!   columns, the table is made anew.
//!
//! A refit reads the partitions of the last `--churn-window-days`, newest first, keeps the rows that started in the
//! window's days (one row per player and start: the newest partition's) and, over
//! [`CHURN_REFIT_MAX_ROWS`], a hash sample of whole players. The table's versions are its
//! history: `mm lake`-style tools and any Delta reader see which run wrote what.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int64Type};
use arrow_array::{Array, BooleanArray};
use mm_artifact::Artifact;
use mm_artifact::features::WINDOWS_MS;
use mm_artifact::online::FinishedMatch;
use mm_artifact::snapshot::PlayerState;
use mm_lake::derived::DerivedTable;

use crate::{DAY_MS, RetrainError, io};

/// The sliding window of two-team matches the team win model is refitted on: each continued
/// run keeps its matches' pre-match features in `dir` (one file per run, named by its cutoff
/// day) and fits on the files of the last `days` days.
#[derive(Debug, Clone)]
pub struct Window {
    pub dir: std::path::PathBuf,
    pub days: i64,
    /// The Delta table of the churn feature rows of continued runs and of the full run they
    /// continue ([`seed`]), how many days of them the churn model's refit reads, and how many
    /// labelled rows it needs.
    pub churn_dir: std::path::PathBuf,
    pub churn_days: i64,
    pub churn_min_rows: usize,
    /// The run's id, in the names of the files it adds to the churn table.
    pub run_id: String,
}

/// The files `<day>.<ext>` of `dir` (one per continued run, named by its cutoff day) of the
/// `days` days up to `today`, in day order; the files of days out of that window (older, or
/// later: a run with a later cutoff on another lake) are deleted.
pub(crate) fn window_days(
    dir: &Path,
    ext: &str,
    today: i64,
    days: i64,
) -> Result<Vec<std::path::PathBuf>, RetrainError> {
    let mut kept = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let p = e.map_err(io(dir))?.path();
        let Some(day) = p
            .file_name()
            .and_then(|s| s.to_str())
            .and_then(|s| s.strip_suffix(ext)?.strip_suffix('.'))
            .and_then(|s| s.parse::<i64>().ok())
        else {
            continue;
        };
        if day <= today - days || day > today {
            std::fs::remove_file(&p).map_err(io(&p))?;
        } else {
            kept.push((day, p));
        }
    }
    kept.sort();
    Ok(kept.into_iter().map(|(_, p)| p).collect())
}

/// Matches of `starts` in the 8h, 1d, 1w and 1m before `now` (`[now - w, now)`).
pub(crate) fn counts_before(starts: &[i64], now: i64) -> [u32; 4] {
    let end = starts.partition_point(|&t| t < now);
    WINDOWS_MS.map(|w| (end - starts.partition_point(|&t| t < now - w)) as u32)
}

/// The table's partition column: the writing run's cutoff day.
const PARTITIONS: [&str; 1] = ["run"];

/// Training rows of a churn refit, about (a hash sample of whole players): a warm start at the
/// model's C needs fewer rows than the full fit's tuning (about 2M at 11.9M lake rows), and the
/// window's features are held in memory (8 bytes a feature a row).
pub const CHURN_REFIT_MAX_ROWS: usize = 500_000;

/// The table's columns for the features `names`.
fn schema(names: &[String]) -> arrow_schema::SchemaRef {
    use arrow_schema::{DataType, Field, Schema};
    let mut fields = vec![
        Field::new("player_id", DataType::Utf8, false),
        Field::new("start_ms", DataType::Int64, false),
    ];
    fields.extend(
        names
            .iter()
            .map(|n| Field::new(n.as_str(), DataType::Float64, true)),
    );
    Arc::new(Schema::new(fields))
}

/// A run's partition value: its cutoff day's date.
fn partition(day: i64) -> String {
    mm_lake::schema::day_date(i32::try_from(day).unwrap_or(i32::MAX))
}

/// The table at `dir` for the features `names`, created when there is none.
fn open(dir: &Path, names: &[String]) -> Result<DerivedTable, RetrainError> {
    if dir.is_dir() && !dir.join("_delta_log").is_dir() {
        // The layout before the table (one Parquet file per run): its rows are rebuilt by the
        // next full run's seed.
        std::fs::remove_dir_all(dir).map_err(io(dir))?;
    }
    Ok(DerivedTable::open_or_create(
        dir,
        "churn-window",
        &schema(names),
        &PARTITIONS,
    )?)
}

/// The partitions' days and values.
fn partitions(t: &DerivedTable) -> Result<BTreeSet<(i64, String)>, RetrainError> {
    Ok(t.files()?
        .iter()
        .filter_map(|f| f.partition.get(PARTITIONS[0]).cloned())
        .filter_map(|v| mm_lake::schema::parse_day_date(&v).map(|d| (i64::from(d), v)))
        .collect())
}

/// Empties every partition whose day `drop` selects, a commit each.
fn drop_partitions(
    t: &mut DerivedTable,
    run_id: &str,
    drop: impl Fn(i64) -> bool,
) -> Result<(), RetrainError> {
    for (day, v) in partitions(t)? {
        if drop(day) {
            t.replace_partition(
                &[&v],
                &[],
                run_id,
                serde_json::json!({"run": v, "dropped": "left the window"}),
            )?;
        }
    }
    Ok(())
}

/// Replaces the partition of the run day `today` with `file` (none: empties it).
fn put(
    t: &mut DerivedTable,
    run_id: &str,
    today: i64,
    file: Option<&Path>,
    info: serde_json::Value,
) -> Result<i64, RetrainError> {
    let files: Vec<std::path::PathBuf> = file.map(Path::to_path_buf).into_iter().collect();
    Ok(t.replace_partition(&[&partition(today)], &files, run_id, info)?)
}

/// The churn feature rows of a continued run's matches: the player, the match start and the
/// model's features, as the churn fit's table has them.
pub struct ChurnRows {
    pub names: Vec<String>,
    pub player: Vec<String>,
    pub start: Vec<i64>,
    /// Row-major, `names.len()` a row.
    pub x: Vec<f64>,
}

impl ChurnRows {
    pub fn new(names: &[String]) -> ChurnRows {
        ChurnRows {
            names: names.to_vec(),
            player: Vec::new(),
            start: Vec::new(),
            x: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// Each row of `m` from its player's state before it, with the window counts from the
    /// lake's starts (exact, where the state's are not for a busy player) and the skill
    /// percentile of the pre-match raw skill on the model's map.
    pub fn push_match(
        &mut self,
        art: &Artifact,
        m: &FinishedMatch,
        before: &[PlayerState],
        starts: &HashMap<String, Vec<i64>>,
    ) {
        let spec = &art.churn.model.spec;
        let parties = mm_artifact::online::party_numbers(m);
        for ((r, b), party) in m.rows.iter().zip(before).zip(parties) {
            let counts = starts
                .get(&r.player_id)
                .map_or([0; 4], |s| counts_before(s, m.start_ms));
            let summary = mm_artifact::features::PastSummary {
                recent: &b.recent,
                before_recent_ms: b.before_recent_ms,
                first_seen_ms: b.first_seen_ms,
                games: b.games,
                window_counts: counts,
                churned_gaps: b.churned_gaps,
            };
            let now = mm_artifact::features::Upcoming {
                start_ms: m.start_ms,
                party: party != 0,
                skill_percentile: art.percentiles.percentile(b.raw_skill),
            };
            spec.push_row_from(&summary, &now, r.outcome, &mut self.x);
            self.player.push(r.player_id.clone());
            self.start.push(m.start_ms);
        }
    }

    fn batch(&self) -> Result<arrow_array::RecordBatch, RetrainError> {
        use arrow_array::{ArrayRef, Float64Array, Int64Array, StringArray};
        let k = self.names.len();
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(self.player.clone())),
            Arc::new(Int64Array::from(self.start.clone())),
        ];
        for j in 0..k {
            let v: Vec<f64> = (0..self.len()).map(|i| self.x[i * k + j]).collect();
            cols.push(Arc::new(Float64Array::from(v)));
        }
        arrow_array::RecordBatch::try_new(schema(&self.names), cols)
            .map_err(|e| RetrainError::Input(format!("the churn window's rows: {e}")))
    }
}

/// Which rows of the window a refit reads, and how it labels them.
struct Reading<'a> {
    names: &'a [String],
    /// Rows that started before this are out of the window.
    from_ms: i64,
    /// The players' hash share kept (a sample of whole players).
    keep: f64,
    /// The player and start of every row read so far (from newer partitions).
    seen: HashSet<(String, i64)>,
    /// A row's label (churned), `None` when censored.
    label: &'a dyn Fn(&str, i64) -> Option<bool>,
    /// The labelled rows' features, row-major, and labels.
    x: Vec<f64>,
    y: Vec<bool>,
}

impl Reading<'_> {
    /// Adds the labelled rows of the table's file `path` that are in the window and in the
    /// sample, but those a newer partition held; a batch in memory at a time.
    fn read(&mut self, path: &Path) -> Result<(), RetrainError> {
        let bad = |why: String| RetrainError::Input(format!("{}: {why}", path.display()));
        let mut cols: Vec<&str> = vec!["player_id", "start_ms"];
        cols.extend(self.names.iter().map(String::as_str));
        mm_lake::parquet_io::for_each_batch(path, Some(&cols), |b| {
            let col = |name: &str| {
                b.column_by_name(name)
                    .cloned()
                    .ok_or_else(|| bad(format!("no column {name}")))
            };
            let (p, s) = (col("player_id")?, col("start_ms")?);
            let feats = self
                .names
                .iter()
                .map(|n| col(n))
                .collect::<Result<Vec<_>, _>>()?;
            let p = p.as_string::<i32>();
            let s = s.as_primitive::<Int64Type>();
            for i in 0..b.num_rows() {
                let (player, start) = (p.value(i), s.value(i));
                if start < self.from_ms
                    || (self.keep < 1.0 && mm_fit::churn::build::player_share(player) >= self.keep)
                    || !self.seen.insert((player.to_string(), start))
                {
                    continue;
                }
                let Some(label) = (self.label)(player, start) else {
                    continue;
                };
                for f in &feats {
                    let f = f.as_primitive::<Float64Type>();
                    self.x
                        .push(if f.is_null(i) { f64::NAN } else { f.value(i) });
                }
                self.y.push(label);
            }
            Ok::<(), RetrainError>(())
        })
    }
}

/// Seeds the window of a full run whose cutoff is `cutoff_ms` with the rows of its churn
/// feature table `features` (the fit's `churn_features.parquet`) that started in the last
/// `window.churn_days` days before it, and drops every other partition. Returns the rows kept.
///
/// # Errors
/// The feature table cannot be read or lacks a feature, or the window cannot be written.
pub fn seed(
    window: &Window,
    run_id: &str,
    features: &Path,
    names: &[String],
    cutoff_ms: i64,
) -> Result<u64, RetrainError> {
    let dir = &window.churn_dir;
    if let Some(t) = DerivedTable::open(dir)? {
        let want: BTreeSet<String> = schema(names)
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .chain(PARTITIONS.iter().map(|p| (*p).to_string()))
            .collect();
        let have: BTreeSet<String> = t.column_names()?.into_iter().collect();
        if have != want {
            // Another feature set: the rows of the old one cannot be refitted on.
            std::fs::remove_dir_all(dir).map_err(io(dir))?;
        }
    }
    let mut t = open(dir, names)?;
    let today = cutoff_ms.div_euclid(DAY_MS);
    let from = (today - window.churn_days) * DAY_MS;
    let scratch = t.scratch_dir(run_id)?;
    let file = scratch.join("seed.parquet");
    let rows = mm_lake::parquet_io::copy_rows(features, &file, &schema(names), |b| {
        let s = b
            .column_by_name("start_ms")
            .map(|c| c.as_primitive::<Int64Type>().clone());
        Ok(s.map_or_else(
            || BooleanArray::from(vec![false; b.num_rows()]),
            |s| {
                s.iter()
                    .map(|t| t.map(|t| t >= from && t < cutoff_ms))
                    .collect()
            },
        ))
    })?;
    put(
        &mut t,
        run_id,
        today,
        (rows > 0).then_some(file.as_path()),
        serde_json::json!({"run": partition(today), "seeded_by": "full", "rows": rows}),
    )?;
    drop_partitions(&mut t, run_id, |d| d != today)?;
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(rows)
}

/// What [`refit_churn`] decided: the refitted model (`None`: the base's is kept) and why.
pub struct ChurnRefit {
    pub model: Option<mm_artifact::churn::ChurnModel>,
    pub note: String,
}

/// Saves this run's churn rows as its partition of the window, drops the partitions that left
/// it, labels every row of the window from the lake's starts (censored within the horizon of
/// the data's end; otherwise churned unless the player's next match starts within the
/// horizon), and refits the churn model at its C, started from its coefficients, when the
/// window holds at least `window.churn_min_rows` labelled rows.
pub fn refit_churn(
    art: &Artifact,
    rows: &ChurnRows,
    starts: &HashMap<String, Vec<i64>>,
    end: i64,
    window: &Window,
    cutoff_ms: i64,
) -> Result<ChurnRefit, RetrainError> {
    use mm_trainer::churn::model::{ChurnFitConfig, FitChurnModel};
    let mut t = open(&window.churn_dir, &rows.names)?;
    let today = cutoff_ms.div_euclid(DAY_MS);
    let scratch = t.scratch_dir(&window.run_id)?;
    let file = scratch.join("rows.parquet");
    if rows.len() > 0 {
        mm_lake::parquet_io::write_parquet_file(&file, &[rows.batch()?])?;
    }
    put(
        &mut t,
        &window.run_id,
        today,
        (rows.len() > 0).then_some(file.as_path()),
        serde_json::json!({"run": partition(today), "rows": rows.len()}),
    )?;
    let _ = std::fs::remove_dir_all(&scratch);
    // A partition older than the window holds only rows before it; one after `today` is a
    // run with a later cutoff (on another lake).
    drop_partitions(&mut t, &window.run_id, |d| {
        d <= today - window.churn_days || d > today
    })?;

    let mut files: Vec<(String, String, u64)> = t
        .files()?
        .into_iter()
        .filter_map(|f| {
            let v = f.partition.get(PARTITIONS[0]).cloned()?;
            Some((v, f.path, f.rows.unwrap_or(0)))
        })
        .collect();
    // Newest partition first: its row of a player and start wins.
    files.sort_by(|a, b| b.0.cmp(&a.0));
    let total: u64 = files.iter().map(|f| f.2).sum();
    let horizon = art.churn.horizon_ms;
    // Censored within the horizon of the data's end, whether or not a next match is seen (as
    // the full fit: labels near the end would lean towards quick returns); otherwise churned
    // unless the player's next match starts within the horizon.
    let label = |player: &str, t: i64| -> Option<bool> {
        if end - t < horizon {
            return None;
        }
        let next = starts
            .get(player)
            .and_then(|s| s.get(s.partition_point(|&u| u <= t)).copied());
        Some(next.is_none_or(|n| n - t > horizon))
    };
    let mut reading = Reading {
        names: &rows.names,
        from_ms: (today - window.churn_days) * DAY_MS,
        keep: (CHURN_REFIT_MAX_ROWS as f64 / total.max(1) as f64).min(1.0),
        seen: HashSet::new(),
        label: &label,
        x: Vec::new(),
        y: Vec::new(),
    };
    for (_, rel, _) in &files {
        reading.read(&t.local_file(rel)?)?;
    }
    let k = rows.names.len();
    let (x, y) = (reading.x, reading.y);
    let base = &art.churn.model;
    if y.len() < window.churn_min_rows {
        return Ok(ChurnRefit {
            model: None,
            note: format!(
                "kept: {} labelled rows in the last {} day(s), fewer than {}",
                y.len(),
                window.churn_days,
                window.churn_min_rows
            ),
        });
    }
    let x = ndarray::Array2::from_shape_vec((y.len(), k), x)
        .map_err(|e| RetrainError::Input(format!("the churn window's rows: {e}")))?;
    match base.refit_warm(x.view(), &y, &ChurnFitConfig::default()) {
        Ok(m) => Ok(ChurnRefit {
            note: format!(
                "refitted at C = {} on {} labelled rows of the last {} day(s)",
                m.c,
                y.len(),
                window.churn_days
            ),
            model: Some(m),
        }),
        Err(e) => Ok(ChurnRefit {
            model: None,
            note: format!("kept: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The team window's raw-skill samples (`<day>.json`) and win-skill samples
    /// (`<day>.win-skill.json`) share a directory: each reading sees only its own files, in day
    /// order, and drops only its own that left the window.
    #[test]
    fn the_two_skills_windows_do_not_mix() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "10.json",
            "12.json",
            "3.json",
            "11.win-skill.json",
            "2.win-skill.json",
        ] {
            std::fs::write(dir.path().join(name), b"[]").unwrap();
        }
        let names = |v: Vec<std::path::PathBuf>| -> Vec<String> {
            v.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        let raw = window_days(dir.path(), "json", 12, 7).unwrap();
        assert_eq!(names(raw), ["10.json", "12.json"]);
        assert!(!dir.path().join("3.json").exists());
        assert!(dir.path().join("2.win-skill.json").exists());
        let win = window_days(dir.path(), "win-skill.json", 12, 7).unwrap();
        assert_eq!(names(win), ["11.win-skill.json"]);
        assert!(!dir.path().join("2.win-skill.json").exists());
    }
}
