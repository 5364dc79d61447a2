//! Adapters from CSV sources to lake rows: the canonical format and the four real sets in
//! `../shared/data/real/` (read each set's README for its columns). Adapters find their columns
//! by name, so later files of the same source with the same columns (or extra ones) also load.

use std::collections::HashMap;

use csv::ByteRecord;

use mm_lake::{PlayerRow, RowError};
use serde::{Deserialize, Serialize};

use crate::canonical::{CanonMap, text_value};
use crate::fields::{self, present, show};

/// Why a source record produced no lake rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reject {
    /// Bad data: the record goes to quarantine with this reason.
    Bad(RowError),
    /// Not a player-match record by the source's own rules (a team summary row, a walkover):
    /// counted under `skipped` with this reason.
    Skip(&'static str),
}

impl From<RowError> for Reject {
    fn from(e: RowError) -> Self {
        Reject::Bad(e)
    }
}

/// Turns one CSV record into lake rows.
pub trait CsvAdapter: Send + Sync + std::fmt::Debug {
    /// How many lake rows every accepted record becomes.
    fn rows_per_record(&self) -> u8 {
        1
    }

    /// Emits the record's lake rows (exactly [`CsvAdapter::rows_per_record`] of them, all valid),
    /// or rejects the record without emitting any.
    fn convert(&self, rec: &ByteRecord, emit: &mut dyn FnMut(&PlayerRow<'_>))
    -> Result<(), Reject>;

    /// The column map and default mode of a canonical source, whose chunks may take the
    /// columnar fast path ([`crate::columnar`]); `None` for the real-data adapters.
    fn canonical(&self) -> Option<(&CanonMap, &str)> {
        None
    }
}

/// The input formats `mm ingest` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// Canonical CSV, JSON lines or Parquet (by file extension).
    Canonical,
    /// ATP tour results (Jeff Sackmann's `atp_matches_*.csv`): one row per match.
    Atp,
    /// Lichess games (the Kaggle "Chess Game Dataset" columns): one row per game.
    Lichess,
    /// League of Legends pro games (Oracle's Elixir): ten player rows and two team rows per game.
    Lol,
    /// CS:GO pro maps (HLTV, flattened `player_maps.csv`): one row per player per map.
    Csgo,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Canonical => "canonical",
            Format::Atp => "atp",
            Format::Lichess => "lichess",
            Format::Lol => "lol",
            Format::Csgo => "csgo",
        }
    }

    /// Recognises a real-data source by the columns its header must have; canonical otherwise.
    pub fn detect<S: AsRef<str>>(header: &[S]) -> Format {
        let has = |names: &[&str]| {
            names
                .iter()
                .all(|n| header.iter().any(|h| h.as_ref() == *n))
        };
        if has(&[
            "tourney_id",
            "tourney_date",
            "match_num",
            "winner_id",
            "loser_id",
        ]) {
            Format::Atp
        } else if has(&["created_at", "winner", "white_id", "black_id"]) {
            Format::Lichess
        } else if has(&["gameid", "participantid", "playerid", "side", "result"]) {
            Format::Lol
        } else if has(&["map_id", "match_start_ms", "side", "player", "map_result"]) {
            Format::Csgo
        } else {
            Format::Canonical
        }
    }

    /// Builds the adapter for a header; fails naming the first missing required column.
    pub fn csv_adapter<S: AsRef<str>>(
        self,
        header: &[S],
        default_mode: &str,
    ) -> Result<Box<dyn CsvAdapter>, String> {
        let cols = Cols::new(header);
        Ok(match self {
            Format::Canonical => Box::new(CanonicalCsv {
                map: CanonMap::from_header(header)?,
                mode: default_mode.into(),
            }),
            Format::Atp => Box::new(atp::Atp::new(&cols)?),
            Format::Lichess => Box::new(lichess::Lichess::new(&cols)?),
            Format::Lol => Box::new(lol::Lol::new(&cols)?),
            Format::Csgo => Box::new(csgo::Csgo::new(&cols)?),
        })
    }
}

/// Column lookup by name for the adapters.
struct Cols {
    names: Vec<String>,
    idx: HashMap<String, usize>,
}

impl Cols {
    fn new<S: AsRef<str>>(header: &[S]) -> Cols {
        let names: Vec<String> = header
            .iter()
            .map(|h| h.as_ref().trim().to_string())
            .collect();
        let idx = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        Cols { names, idx }
    }
    fn req(&self, name: &str) -> Result<usize, String> {
        self.idx
            .get(name)
            .copied()
            .ok_or_else(|| format!("missing required column '{name}'"))
    }
    fn opt(&self, name: &str) -> Option<usize> {
        self.idx.get(name).copied()
    }
    /// Columns the adapter does not read (`used`: its required and found optional columns),
    /// with the key they get in `extra`.
    fn rest_of(&self, used: &[Option<usize>]) -> Vec<(usize, String)> {
        let used: Vec<usize> = used.iter().flatten().copied().collect();
        self.rest(&used)
    }

    /// Columns not in `used`, with the key they get in `extra`.
    fn rest(&self, used: &[usize]) -> Vec<(usize, String)> {
        (0..self.names.len())
            .filter(|i| !used.contains(i))
            .map(|i| (i, self.names[i].clone()))
            .collect()
    }
}

/// A required field's bytes, or the error that names it as missing.
fn required<'a>(field: &'static str, raw: Option<&'a [u8]>) -> Result<&'a [u8], RowError> {
    present(raw).ok_or_else(|| RowError::field(field, "missing required field"))
}

/// The team (0 or 1) of a side name, `names` being team A's and team B's (ASCII case ignored).
fn side(field: &'static str, raw: &[u8], names: [&str; 2]) -> Result<i32, RowError> {
    let text = fields::text(field, raw)?;
    match names.iter().position(|n| text.eq_ignore_ascii_case(n)) {
        Some(k) => Ok(k as i32),
        None => Err(RowError::field(
            field,
            format!("{} is not {} or {}", show(raw), names[0], names[1]),
        )),
    }
}

/// The error of an outcome code the source does not define.
fn unknown_outcome(field: &'static str, raw: &[u8], expected: &str) -> RowError {
    RowError::field(
        field,
        format!("unknown outcome code {} (expected {expected})", show(raw)),
    )
}

#[inline]
fn get(rec: &ByteRecord, i: usize) -> Option<&[u8]> {
    rec.get(i)
}

#[inline]
fn opt_get(rec: &ByteRecord, i: Option<usize>) -> Option<&[u8]> {
    i.and_then(|i| rec.get(i))
}

/// A JSON object (as text) of the given columns' non-blank values, after the `base` object's
/// members; `None` if it would be empty. Written directly, without building a map.
fn extras_json(rec: &ByteRecord, cols: &[(usize, String)], base: Option<&str>) -> Option<String> {
    let mut out = String::with_capacity(64 + 16 * cols.len());
    out.push('{');
    if let Some(b) = base {
        out.push_str(
            b.strip_prefix('{')
                .and_then(|b| b.strip_suffix('}'))
                .unwrap_or(""),
        );
    }
    for (i, key) in cols {
        if let Some(b) = present(rec.get(*i)) {
            if out.len() > 1 {
                out.push(',');
            }
            push_json_member(&mut out, key, b);
        }
    }
    out.push('}');
    (out.len() > 2).then_some(out)
}

/// Appends `"key":value`, with the value as [`text_value`] makes it.
fn push_json_member(out: &mut String, key: &str, raw: &[u8]) {
    use std::fmt::Write as _;
    let key = serde_json::Value::from(key);
    let _ = write!(out, "{key}:{}", text_value(raw));
}

#[derive(Debug)]
struct CanonicalCsv {
    map: CanonMap,
    mode: String,
}

impl CsvAdapter for CanonicalCsv {
    fn convert(
        &self,
        rec: &ByteRecord,
        emit: &mut dyn FnMut(&PlayerRow<'_>),
    ) -> Result<(), Reject> {
        let mut row = self.map.row(|i| rec.get(i), &self.mode)?;
        if !self.map.extras.is_empty() || self.map.get(crate::canonical::C::Extra).is_some() {
            row.extra = self.map.extra_from_text(|i| rec.get(i))?;
        }
        emit(&row);
        Ok(())
    }

    fn canonical(&self) -> Option<(&CanonMap, &str)> {
        Some((&self.map, &self.mode))
    }
}

mod atp;
mod csgo;
mod lichess;
mod lol;
#[cfg(test)]
mod tests;

pub use atp::ATP_MAX_MINUTES;
pub use lichess::chess_mode;
