//! The canonical input format: one record per player per match, with the lake's column names
//! (and a few common aliases). The same mapping serves CSV, JSON lines and Parquet inputs.

use std::borrow::Cow;

use mm_lake::schema::Outcome;
use mm_lake::{PlayerRow, RowError};

use crate::fields::{self, present, show};

/// Canonical input columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum C {
    MatchId,
    Mode,
    StartTime,
    Team,
    PlayerId,
    Outcome,
    Won,
    EndTime,
    SecondsPlayed,
    PartyId,
    TeamName,
    Role,
    Kills,
    Deaths,
    DeathsByEnemy,
    SelfKills,
    Assists,
    Score,
    TeamScore,
    Perf,
    QuitEarly,
    InputDevice,
    Platform,
    Region,
    Lat,
    Lon,
    PingMs,
    Rating,
    Extra,
}

const N: usize = C::Extra as usize + 1;

impl C {
    /// Every canonical column, in declaration order.
    pub const ALL: [C; N] = [
        C::MatchId,
        C::Mode,
        C::StartTime,
        C::Team,
        C::PlayerId,
        C::Outcome,
        C::Won,
        C::EndTime,
        C::SecondsPlayed,
        C::PartyId,
        C::TeamName,
        C::Role,
        C::Kills,
        C::Deaths,
        C::DeathsByEnemy,
        C::SelfKills,
        C::Assists,
        C::Score,
        C::TeamScore,
        C::Perf,
        C::QuitEarly,
        C::InputDevice,
        C::Platform,
        C::Region,
        C::Lat,
        C::Lon,
        C::PingMs,
        C::Rating,
        C::Extra,
    ];
}

/// The canonical column a header name stands for (case-insensitive, with aliases).
pub fn canon_column(name: &str) -> Option<C> {
    let n = name.trim().to_ascii_lowercase();
    Some(match n.as_str() {
        "match_id" | "matchid" | "game_id" => C::MatchId,
        "mode" | "playlist" | "queue" => C::Mode,
        "start_time" | "start_ts" | "started_at" | "start" => C::StartTime,
        "team" | "team_id" | "side" => C::Team,
        "player_id" | "playerid" | "player" => C::PlayerId,
        "outcome" | "result" => C::Outcome,
        "won" | "win" => C::Won,
        "end_time" | "end_ts" | "ended_at" | "end" => C::EndTime,
        "seconds_played" | "time_played_s" => C::SecondsPlayed,
        "party_id" | "party" => C::PartyId,
        "team_name" => C::TeamName,
        "role" | "position" => C::Role,
        "kills" => C::Kills,
        "deaths" => C::Deaths,
        "deaths_by_enemy" => C::DeathsByEnemy,
        "self_kills" | "suicides" => C::SelfKills,
        "assists" => C::Assists,
        "score" => C::Score,
        "team_score" => C::TeamScore,
        "perf" | "performance" => C::Perf,
        "quit_early" | "quit" => C::QuitEarly,
        "input_device" | "input" => C::InputDevice,
        "platform" => C::Platform,
        "region" => C::Region,
        "lat" | "latitude" => C::Lat,
        "lon" | "lng" | "longitude" => C::Lon,
        "ping_ms" | "ping" => C::PingMs,
        "rating" => C::Rating,
        "extra" => C::Extra,
        _ => return None,
    })
}

/// Input columns that the lake regenerates and that are therefore not carried as extras: the
/// provenance of a row, and its partition day (the start's UTC day), which a file exported from
/// the lake carries.
fn is_provenance(name: &str) -> bool {
    matches!(
        name.trim().to_ascii_lowercase().as_str(),
        "source_file" | "source_line" | "day"
    )
}

/// Where each canonical column sits in a source's header.
#[derive(Debug, Clone)]
pub struct CanonMap {
    idx: [Option<usize>; N],
    /// Columns with no lake column: kept in `extra` as a JSON object.
    pub extras: Vec<(usize, String)>,
}

impl CanonMap {
    /// Maps a header. Fails, naming the column, when a required column is missing or a
    /// canonical column appears twice.
    pub fn from_header<S: AsRef<str>>(names: &[S]) -> Result<CanonMap, String> {
        let mut idx = [None; N];
        let mut extras = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let name = name.as_ref();
            match canon_column(name) {
                Some(c) => {
                    if let Some(j) = idx[c as usize] {
                        return Err(format!(
                            "columns '{}' and '{name}' both map to '{c:?}'",
                            AsRef::<str>::as_ref(&names[j])
                        ));
                    }
                    idx[c as usize] = Some(i);
                }
                None if is_provenance(name) => {}
                None => extras.push((i, name.trim().to_string())),
            }
        }
        let map = CanonMap { idx, extras };
        for (c, label) in [
            (C::MatchId, "match_id"),
            (C::StartTime, "start_time"),
            (C::Team, "team"),
            (C::PlayerId, "player_id"),
        ] {
            if map.get(c).is_none() {
                return Err(format!("missing required column '{label}'"));
            }
        }
        if map.get(C::Outcome).is_none()
            && map.get(C::Won).is_none()
            && map.get(C::TeamScore).is_none()
        {
            return Err("missing required column 'outcome' (or 'won', or 'team_score')".into());
        }
        Ok(map)
    }

    #[inline]
    pub fn get(&self, c: C) -> Option<usize> {
        self.idx[c as usize]
    }

    /// Converts one record, given a way to read field `i`. `extra` is left to the caller.
    pub fn row<'a>(
        &self,
        get: impl Fn(usize) -> Option<&'a [u8]>,
        default_mode: &'a str,
    ) -> Result<PlayerRow<'a>, RowError> {
        let f = |c: C| self.get(c).and_then(&get);
        let start_ms = match present(f(C::StartTime)) {
            Some(b) => fields::time_ms("start_time", b)?,
            None => return Err(RowError::field("start_time", "missing required field")),
        };
        let end_ms = present(f(C::EndTime))
            .map(|b| fields::time_ms("end_time", b))
            .transpose()?;
        let team = match present(f(C::Team)) {
            Some(b) => {
                let v = fields::int("team", b)?;
                i32::try_from(v)
                    .map_err(|_| RowError::field("team", format!("{v} is out of range")))?
            }
            None => return Err(RowError::field("team", "missing required field")),
        };
        let outcome = if let Some(b) = present(f(C::Outcome)) {
            let s = fields::text("outcome", b)?;
            Some(Outcome::parse(s).ok_or_else(|| {
                RowError::field(
                    "outcome",
                    format!(
                        "unknown outcome code {} (expected win, loss or draw)",
                        show(b)
                    ),
                )
            })?)
        } else if let Some(b) = present(f(C::Won)) {
            match fields::opt_bool("won", Some(b)) {
                Ok(Some(true)) => Some(Outcome::Win),
                Ok(Some(false)) => Some(Outcome::Loss),
                _ => {
                    return Err(RowError::field(
                        "won",
                        format!("unknown outcome code {} (expected 1 or 0)", show(b)),
                    ));
                }
            }
        } else {
            None
        };
        let row = PlayerRow {
            match_id: fields::req_text("match_id", f(C::MatchId))?,
            mode: fields::opt_text("mode", f(C::Mode))?.unwrap_or(Cow::Borrowed(default_mode)),
            start_ms,
            team,
            player_id: fields::req_text("player_id", f(C::PlayerId))?,
            outcome,
            end_ms,
            seconds_played: fields::opt_f64("seconds_played", f(C::SecondsPlayed))?,
            party_id: fields::opt_text("party_id", f(C::PartyId))?,
            team_name: fields::opt_text("team_name", f(C::TeamName))?,
            role: fields::opt_text("role", f(C::Role))?,
            kills: fields::opt_i32("kills", f(C::Kills))?,
            deaths: fields::opt_i32("deaths", f(C::Deaths))?,
            deaths_by_enemy: fields::opt_i32("deaths_by_enemy", f(C::DeathsByEnemy))?,
            self_kills: fields::opt_i32("self_kills", f(C::SelfKills))?,
            assists: fields::opt_i32("assists", f(C::Assists))?,
            score: fields::opt_f64("score", f(C::Score))?,
            team_score: fields::opt_f64("team_score", f(C::TeamScore))?,
            perf: fields::opt_f64("perf", f(C::Perf))?,
            quit_early: fields::opt_bool("quit_early", f(C::QuitEarly))?,
            input_device: fields::opt_text("input_device", f(C::InputDevice))?,
            platform: fields::opt_text("platform", f(C::Platform))?,
            region: fields::opt_text("region", f(C::Region))?,
            lat: fields::opt_f64("lat", f(C::Lat))?,
            lon: fields::opt_f64("lon", f(C::Lon))?,
            ping_ms: fields::opt_f64("ping_ms", f(C::PingMs))?,
            rating: fields::opt_f64("rating", f(C::Rating))?,
            extra: None,
        };
        row.validate()?;
        Ok(row)
    }

    /// Builds the `extra` JSON object from text fields: the input's own `extra` object (if any)
    /// merged with the unknown columns. Numbers stay numbers; blanks are left out.
    pub fn extra_from_text<'a>(
        &self,
        get: impl Fn(usize) -> Option<&'a [u8]>,
    ) -> Result<Option<String>, RowError> {
        let mut obj = match present(self.get(C::Extra).and_then(&get)) {
            Some(b) => match serde_json::from_slice::<serde_json::Value>(b) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => {
                    return Err(RowError::field(
                        "extra",
                        format!("{} is not a JSON object", show(b)),
                    ));
                }
            },
            None => serde_json::Map::new(),
        };
        for (i, name) in &self.extras {
            if let Some(b) = present(get(*i)) {
                obj.insert(name.clone(), text_value(b));
            }
        }
        Ok((!obj.is_empty()).then(|| serde_json::Value::Object(obj).to_string()))
    }
}

/// A text field as a JSON value: a number when it reads as a finite number, else a string.
pub fn text_value(b: &[u8]) -> serde_json::Value {
    let s = String::from_utf8_lossy(b);
    let t = s.trim();
    if let Ok(i) = t.parse::<i64>() {
        return i.into();
    }
    if let Ok(f) = t.parse::<f64>()
        && f.is_finite()
        && let Some(n) = serde_json::Number::from_f64(f)
    {
        return serde_json::Value::Number(n);
    }
    serde_json::Value::String(t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(h: &str) -> Result<CanonMap, String> {
        CanonMap::from_header(&h.split(',').collect::<Vec<_>>())
    }

    fn conv<'a>(m: &CanonMap, rec: &'a [&'a str]) -> Result<PlayerRow<'a>, RowError> {
        m.row(|i| rec.get(i).map(|s| s.as_bytes()), "default")
    }

    #[test]
    fn peer_csv_header_maps_with_won_and_default_mode() {
        // The header of ../shared/peers/bench_polars.py's CSV.
        let m = map("match_id,player_id,team,party_id,start_ts,end_ts,kills,deaths,deaths_by_enemy,score,won").unwrap();
        assert!(m.extras.is_empty());
        let rec = [
            "7",
            "1000042",
            "1",
            "5000003",
            "1704067260",
            "1704068160",
            "5",
            "6",
            "5",
            "480",
            "1",
        ];
        let r = conv(&m, &rec).unwrap();
        assert_eq!(r.outcome, Some(Outcome::Win));
        assert_eq!(r.mode, "default");
        assert_eq!(r.start_ms, 1_704_067_260_000);
        assert_eq!(r.end_ms, Some(1_704_068_160_000));
        assert_eq!(r.score, Some(480.0));
    }

    #[test]
    fn missing_required_columns_are_named() {
        let e = map("player_id,team,start_time,outcome").unwrap_err();
        assert!(e.contains("match_id"), "{e}");
        let e = map("match_id,player_id,team,start_time").unwrap_err();
        assert!(e.contains("outcome"), "{e}");
        let e = map("match_id,matchid,player_id,team,start_time,outcome").unwrap_err();
        assert!(e.contains("both map"), "{e}");
    }

    #[test]
    fn bad_values_name_their_field() {
        let m = map("match_id,player_id,team,start_time,outcome,kills,mode,colour").unwrap();
        let good = [
            "m",
            "p",
            "0",
            "2024-01-01 10:00:00",
            "win",
            "3",
            "tdm",
            "red",
        ];
        let r = conv(&m, &good).unwrap();
        assert_eq!(r.mode, "tdm");
        let extra = m
            .extra_from_text(|i| good.get(i).map(|s| s.as_bytes()))
            .unwrap();
        assert_eq!(extra.as_deref(), Some(r#"{"colour":"red"}"#));
        for (col, val, field) in [
            (5, "-3", "kills"),
            (5, "three", "kills"),
            (4, "victory?", "outcome"),
            (2, "", "team"),
            (3, "soon", "start_time"),
            (1, "", "player_id"),
        ] {
            let mut rec = good;
            rec[col] = val;
            let e = conv(&m, &rec).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{val}: {e}");
        }
    }
}
