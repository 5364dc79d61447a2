//! Adapters from CSV sources to lake rows: the canonical format and the four real sets in
//! `../shared/data/real/` (read each set's README for its columns). Adapters find their columns
//! by name, so later files of the same source with the same columns (or extra ones) also load.

use std::borrow::Cow;
use std::collections::HashMap;

use csv::ByteRecord;
use mm_lake::schema::Outcome;
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
            Format::Atp => Box::new(Atp::new(&cols)?),
            Format::Lichess => Box::new(Lichess::new(&cols)?),
            Format::Lol => Box::new(Lol::new(&cols)?),
            Format::Csgo => Box::new(Csgo::new(&cols)?),
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
    /// Columns not in `used`, with the key they get in `extra`.
    fn rest(&self, used: &[usize]) -> Vec<(usize, String)> {
        (0..self.names.len())
            .filter(|i| !used.contains(i))
            .map(|i| (i, self.names[i].clone()))
            .collect()
    }
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

// ---------------------------------------------------------------------------------------------
// ATP tour (tennis, 1v1, one row per match)

/// The longest tennis match on record lasted 11 h 5 min (Isner-Mahut, 2010); a duration above
/// 12 h is a data error.
pub const ATP_MAX_MINUTES: f64 = 720.0;

#[derive(Debug)]
struct Atp {
    tourney_id: usize,
    tourney_date: usize,
    match_num: usize,
    winner_id: usize,
    loser_id: usize,
    score: Option<usize>,
    minutes: Option<usize>,
    winner_rank_points: Option<usize>,
    loser_rank_points: Option<usize>,
    serve: Option<[usize; 6]>,
    match_extra: Vec<(usize, String)>,
    winner_extra: Vec<(usize, String)>,
    loser_extra: Vec<(usize, String)>,
}

impl Atp {
    fn new(c: &Cols) -> Result<Atp, String> {
        let serve = [
            "w_svpt", "w_1stWon", "w_2ndWon", "l_svpt", "l_1stWon", "l_2ndWon",
        ];
        let serve_idx: Vec<Option<usize>> = serve.iter().map(|n| c.opt(n)).collect();
        let a = Atp {
            tourney_id: c.req("tourney_id")?,
            tourney_date: c.req("tourney_date")?,
            match_num: c.req("match_num")?,
            winner_id: c.req("winner_id")?,
            loser_id: c.req("loser_id")?,
            score: c.opt("score"),
            minutes: c.opt("minutes"),
            winner_rank_points: c.opt("winner_rank_points"),
            loser_rank_points: c.opt("loser_rank_points"),
            serve: serve_idx
                .iter()
                .copied()
                .collect::<Option<Vec<_>>>()
                .map(|v| [v[0], v[1], v[2], v[3], v[4], v[5]]),
            match_extra: Vec::new(),
            winner_extra: Vec::new(),
            loser_extra: Vec::new(),
        };
        let used = [
            a.tourney_id,
            a.tourney_date,
            a.match_num,
            a.winner_id,
            a.loser_id,
        ];
        let (mut m, mut w, mut l) = (Vec::new(), Vec::new(), Vec::new());
        for (i, name) in c.rest(&used) {
            if let Some(k) = name
                .strip_prefix("winner_")
                .or_else(|| name.strip_prefix("w_"))
            {
                w.push((i, k.to_string()));
            } else if let Some(k) = name
                .strip_prefix("loser_")
                .or_else(|| name.strip_prefix("l_"))
            {
                l.push((i, k.to_string()));
            } else {
                m.push((i, name));
            }
        }
        Ok(Atp {
            match_extra: m,
            winner_extra: w,
            loser_extra: l,
            ..a
        })
    }

    /// Share of all points in the match won by the winner, from the serve statistics:
    /// own service points won plus the opponent's service points lost.
    fn points_won_share(&self, rec: &ByteRecord) -> Result<Option<f64>, RowError> {
        let Some(ix) = self.serve else {
            return Ok(None);
        };
        const NAMES: [&str; 6] = [
            "w_svpt", "w_1stWon", "w_2ndWon", "l_svpt", "l_1stWon", "l_2ndWon",
        ];
        let mut v = [0_i64; 6];
        for k in 0..6 {
            match present(get(rec, ix[k])) {
                Some(b) => v[k] = fields::int(NAMES[k], b)?,
                None => return Ok(None),
            }
            if v[k] < 0 {
                return Err(RowError::field(NAMES[k], format!("{} is negative", v[k])));
            }
        }
        let [ws, w1, w2, ls, l1, l2] = v;
        if w1 + w2 > ws {
            return Err(RowError::field(
                "w_svpt",
                format!("{ws} service points but {} won", w1 + w2),
            ));
        }
        if l1 + l2 > ls {
            return Err(RowError::field(
                "l_svpt",
                format!("{ls} service points but {} won", l1 + l2),
            ));
        }
        if ws + ls == 0 {
            return Ok(None);
        }
        Ok(Some((w1 + w2 + ls - l1 - l2) as f64 / (ws + ls) as f64))
    }
}

impl CsvAdapter for Atp {
    fn rows_per_record(&self) -> u8 {
        2
    }

    fn convert(
        &self,
        rec: &ByteRecord,
        emit: &mut dyn FnMut(&PlayerRow<'_>),
    ) -> Result<(), Reject> {
        let score = opt_get(rec, self.score)
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        if score.contains("W/O") || score.to_ascii_lowercase().contains("walkover") {
            return Err(Reject::Skip("walkover: no match was played"));
        }
        let tid = fields::req_text("tourney_id", get(rec, self.tourney_id))?;
        let date_raw = present(get(rec, self.tourney_date))
            .ok_or_else(|| RowError::field("tourney_date", "missing required field"))?;
        let date =
            chrono::NaiveDate::parse_from_str(fields::text("tourney_date", date_raw)?, "%Y%m%d")
                .map_err(|_| {
                    RowError::field(
                        "tourney_date",
                        format!("{} is not a YYYYMMDD date", show(date_raw)),
                    )
                })?;
        let num = present(get(rec, self.match_num))
            .ok_or_else(|| RowError::field("match_num", "missing required field"))
            .and_then(|b| fields::int("match_num", b))?;
        if !(0..100_000).contains(&num) {
            return Err(RowError::field("match_num", format!("{num} is out of range")).into());
        }
        // The source dates every match by its event's Monday; `match_num` orders the matches
        // of an event (R128 -> F), so it becomes a minute offset that keeps that order.
        let start_ms = date
            .and_hms_opt(0, 0, 0)
            .map(|t| t.and_utc().timestamp_millis())
            .unwrap_or(0)
            + num * 60_000;
        let w = fields::req_text("winner_id", get(rec, self.winner_id))?;
        let l = fields::req_text("loser_id", get(rec, self.loser_id))?;
        if w == l {
            return Err(RowError::field(
                "loser_id",
                format!("player {w} is on both sides of the match"),
            )
            .into());
        }
        let minutes = fields::opt_f64("minutes", opt_get(rec, self.minutes))?;
        if let Some(m) = minutes
            && !(0.0..=ATP_MAX_MINUTES).contains(&m)
        {
            return Err(RowError::field(
                "minutes",
                format!("{m} minutes is impossible (0 to {ATP_MAX_MINUTES})"),
            )
            .into());
        }
        let share = self.points_won_share(rec)?;
        let match_id: Cow<'_, str> = Cow::Owned(format!("{tid}-{num}"));
        // Team index by player id, so that it carries no information about the result.
        let (wt, lt) = if w < l { (0, 1) } else { (1, 0) };
        let base = PlayerRow {
            match_id,
            mode: Cow::Borrowed("tennis-singles"),
            start_ms,
            seconds_played: minutes.map(|m| m * 60.0),
            ..Default::default()
        };
        let match_extra = extras_json(rec, &self.match_extra, None);
        let winner = PlayerRow {
            team: wt,
            player_id: w,
            outcome: Some(Outcome::Win),
            perf: share,
            rating: fields::opt_f64("winner_rank_points", opt_get(rec, self.winner_rank_points))?,
            extra: extras_json(rec, &self.winner_extra, match_extra.as_deref()),
            ..base.clone()
        };
        let loser = PlayerRow {
            team: lt,
            player_id: l,
            outcome: Some(Outcome::Loss),
            perf: share.map(|s| 1.0 - s),
            rating: fields::opt_f64("loser_rank_points", opt_get(rec, self.loser_rank_points))?,
            extra: extras_json(rec, &self.loser_extra, match_extra.as_deref()),
            ..base
        };
        winner.validate()?;
        loser.validate()?;
        emit(&winner);
        emit(&loser);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Lichess (chess, 1v1 with draws, one row per game)

#[derive(Debug)]
struct Lichess {
    id: usize,
    created_at: usize,
    last_move_at: Option<usize>,
    winner: usize,
    white_id: usize,
    black_id: usize,
    white_rating: Option<usize>,
    black_rating: Option<usize>,
    increment_code: Option<usize>,
    extra: Vec<(usize, String)>,
}

impl Lichess {
    fn new(c: &Cols) -> Result<Lichess, String> {
        let mut l = Lichess {
            id: c.req("id")?,
            created_at: c.req("created_at")?,
            last_move_at: c.opt("last_move_at"),
            winner: c.req("winner")?,
            white_id: c.req("white_id")?,
            black_id: c.req("black_id")?,
            white_rating: c.opt("white_rating"),
            black_rating: c.opt("black_rating"),
            increment_code: c.opt("increment_code"),
            extra: Vec::new(),
        };
        let used: Vec<usize> = [
            Some(l.id),
            Some(l.created_at),
            l.last_move_at,
            Some(l.winner),
            Some(l.white_id),
            Some(l.black_id),
            l.white_rating,
            l.black_rating,
        ]
        .into_iter()
        .flatten()
        .collect();
        l.extra = c.rest(&used);
        Ok(l)
    }

    /// Epoch milliseconds written as a float, often in spreadsheet notation (`1.50421E+12`).
    fn ms(field: &str, raw: &[u8]) -> Result<i64, RowError> {
        let v = fields::float(field, raw)?;
        if v < fields::EPOCH_MS_THRESHOLD as f64 {
            return Err(RowError::field(
                field,
                format!("{} is not epoch milliseconds", show(raw)),
            ));
        }
        Ok(v.round() as i64)
    }
}

/// Lichess's time-control classes, from the estimated game duration
/// `initial seconds + 40 x increment` (lichess.org/faq#time-controls).
pub fn chess_mode(increment_code: &str) -> &'static str {
    let mut it = increment_code.trim().split('+');
    let (Some(Ok(m)), Some(Ok(i))) = (
        it.next().map(str::parse::<f64>),
        it.next().map(str::parse::<f64>),
    ) else {
        return "chess";
    };
    match m * 60.0 + 40.0 * i {
        d if d < 30.0 => "chess-ultrabullet",
        d if d < 180.0 => "chess-bullet",
        d if d < 480.0 => "chess-blitz",
        d if d < 1500.0 => "chess-rapid",
        _ => "chess-classical",
    }
}

impl CsvAdapter for Lichess {
    fn rows_per_record(&self) -> u8 {
        2
    }

    fn convert(
        &self,
        rec: &ByteRecord,
        emit: &mut dyn FnMut(&PlayerRow<'_>),
    ) -> Result<(), Reject> {
        let id = fields::req_text("id", get(rec, self.id))?;
        let start_ms = match present(get(rec, self.created_at)) {
            Some(b) => Self::ms("created_at", b)?,
            None => return Err(RowError::field("created_at", "missing required field").into()),
        };
        let end_ms = present(opt_get(rec, self.last_move_at))
            .map(|b| Self::ms("last_move_at", b))
            .transpose()?;
        let white = fields::req_text("white_id", get(rec, self.white_id))?;
        let black = fields::req_text("black_id", get(rec, self.black_id))?;
        if white == black {
            return Err(RowError::field(
                "black_id",
                format!("player {white} is on both sides of the game"),
            )
            .into());
        }
        let winner_raw = get(rec, self.winner).unwrap_or_default();
        let (ow, ob) = match fields::text("winner", winner_raw)?
            .to_ascii_lowercase()
            .as_str()
        {
            "white" => (Outcome::Win, Outcome::Loss),
            "black" => (Outcome::Loss, Outcome::Win),
            "draw" => (Outcome::Draw, Outcome::Draw),
            "" => return Err(RowError::field("winner", "missing required field").into()),
            _ => {
                return Err(RowError::field(
                    "winner",
                    format!(
                        "unknown outcome code {} (expected white, black or draw)",
                        show(winner_raw)
                    ),
                )
                .into());
            }
        };
        let mode = opt_get(rec, self.increment_code)
            .and_then(|b| std::str::from_utf8(b).ok())
            .map_or("chess", chess_mode);
        let extra = extras_json(rec, &self.extra, None);
        let base = PlayerRow {
            match_id: id,
            mode: Cow::Borrowed(mode),
            start_ms,
            end_ms,
            extra,
            ..Default::default()
        };
        let w = PlayerRow {
            team: 0,
            player_id: white,
            outcome: Some(ow),
            team_name: Some(Cow::Borrowed("white")),
            rating: fields::opt_f64("white_rating", opt_get(rec, self.white_rating))?,
            ..base.clone()
        };
        let b = PlayerRow {
            team: 1,
            player_id: black,
            outcome: Some(ob),
            team_name: Some(Cow::Borrowed("black")),
            rating: fields::opt_f64("black_rating", opt_get(rec, self.black_rating))?,
            ..base
        };
        w.validate()?;
        b.validate()?;
        emit(&w);
        emit(&b);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// League of Legends pro games (Oracle's Elixir)

#[derive(Debug)]
struct Lol {
    gameid: usize,
    date: usize,
    side: usize,
    position: usize,
    playerid: usize,
    result: usize,
    teamname: Option<usize>,
    teamid: Option<usize>,
    kills: Option<usize>,
    deaths: Option<usize>,
    assists: Option<usize>,
    gamelength: Option<usize>,
    extra: Vec<(usize, String)>,
}

impl Lol {
    fn new(c: &Cols) -> Result<Lol, String> {
        let mut l = Lol {
            gameid: c.req("gameid")?,
            date: c.req("date")?,
            side: c.req("side")?,
            position: c.req("position")?,
            playerid: c.req("playerid")?,
            result: c.req("result")?,
            teamname: c.opt("teamname"),
            teamid: c.opt("teamid"),
            kills: c.opt("kills"),
            deaths: c.opt("deaths"),
            assists: c.opt("assists"),
            gamelength: c.opt("gamelength"),
            extra: Vec::new(),
        };
        let used: Vec<usize> = [
            Some(l.gameid),
            Some(l.date),
            Some(l.side),
            Some(l.playerid),
            Some(l.result),
            l.teamname,
            l.teamid,
            l.kills,
            l.deaths,
            l.assists,
            l.gamelength,
        ]
        .into_iter()
        .flatten()
        .collect();
        l.extra = c.rest(&used);
        Ok(l)
    }
}

impl CsvAdapter for Lol {
    fn convert(
        &self,
        rec: &ByteRecord,
        emit: &mut dyn FnMut(&PlayerRow<'_>),
    ) -> Result<(), Reject> {
        let position = get(rec, self.position).unwrap_or_default();
        if position.eq_ignore_ascii_case(b"team") {
            return Err(Reject::Skip(
                "team summary row (participantid 100/200), not a player",
            ));
        }
        let side_raw = get(rec, self.side).unwrap_or_default();
        let team = match fields::text("side", side_raw)?
            .to_ascii_lowercase()
            .as_str()
        {
            "blue" => 0,
            "red" => 1,
            _ => {
                return Err(RowError::field(
                    "side",
                    format!("{} is not Blue or Red", show(side_raw)),
                )
                .into());
            }
        };
        let result_raw = get(rec, self.result).unwrap_or_default();
        let outcome = match result_raw {
            b"1" => Outcome::Win,
            b"0" => Outcome::Loss,
            _ => {
                return Err(RowError::field(
                    "result",
                    format!(
                        "unknown outcome code {} (expected 1 or 0)",
                        show(result_raw)
                    ),
                )
                .into());
            }
        };
        let start_ms = match present(get(rec, self.date)) {
            Some(b) => fields::time_ms("date", b)?,
            None => return Err(RowError::field("date", "missing required field").into()),
        };
        let row = PlayerRow {
            match_id: fields::req_text("gameid", get(rec, self.gameid))?,
            mode: Cow::Borrowed("lol-pro"),
            start_ms,
            team,
            player_id: fields::req_text("playerid", get(rec, self.playerid))?,
            outcome: Some(outcome),
            seconds_played: fields::opt_f64("gamelength", opt_get(rec, self.gamelength))?,
            // A pro roster is a fixed five-player premade: the team id stands in for a party id.
            party_id: fields::opt_text("teamid", opt_get(rec, self.teamid))?,
            team_name: fields::opt_text("teamname", opt_get(rec, self.teamname))?,
            kills: fields::opt_i32("kills", opt_get(rec, self.kills))?,
            deaths: fields::opt_i32("deaths", opt_get(rec, self.deaths))?,
            assists: fields::opt_i32("assists", opt_get(rec, self.assists))?,
            extra: extras_json(rec, &self.extra, None),
            ..Default::default()
        };
        row.validate()?;
        emit(&row);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// CS:GO pro maps (HLTV, flattened player_maps.csv)

#[derive(Debug)]
struct Csgo {
    map_id: usize,
    match_start_ms: usize,
    side: usize,
    player: usize,
    map_result: usize,
    team: Option<usize>,
    kills: Option<usize>,
    deaths: Option<usize>,
    team_rounds: Option<usize>,
    extra: Vec<(usize, String)>,
}

impl Csgo {
    fn new(c: &Cols) -> Result<Csgo, String> {
        let mut s = Csgo {
            map_id: c.req("map_id")?,
            match_start_ms: c.req("match_start_ms")?,
            side: c.req("side")?,
            player: c.req("player")?,
            map_result: c.req("map_result")?,
            team: c.opt("team"),
            kills: c.opt("kills"),
            deaths: c.opt("deaths"),
            team_rounds: c.opt("team_rounds"),
            extra: Vec::new(),
        };
        let used: Vec<usize> = [
            Some(s.map_id),
            Some(s.match_start_ms),
            Some(s.side),
            Some(s.player),
            Some(s.map_result),
            s.team,
            s.kills,
            s.deaths,
            s.team_rounds,
        ]
        .into_iter()
        .flatten()
        .collect();
        // The HLTV series id becomes `hltv_match_id`: our match is one map.
        s.extra = c
            .rest(&used)
            .into_iter()
            .map(|(i, n)| {
                (
                    i,
                    if n == "match_id" {
                        "hltv_match_id".into()
                    } else {
                        n
                    },
                )
            })
            .collect();
        Ok(s)
    }
}

impl CsvAdapter for Csgo {
    fn convert(
        &self,
        rec: &ByteRecord,
        emit: &mut dyn FnMut(&PlayerRow<'_>),
    ) -> Result<(), Reject> {
        let side_raw = get(rec, self.side).unwrap_or_default();
        let team = match side_raw {
            b"team1" => 0,
            b"team2" => 1,
            _ => {
                return Err(RowError::field(
                    "side",
                    format!("{} is not team1 or team2", show(side_raw)),
                )
                .into());
            }
        };
        let res_raw = get(rec, self.map_result).unwrap_or_default();
        let outcome = match fields::float("map_result", res_raw) {
            Ok(1.0) => Outcome::Win,
            Ok(0.0) => Outcome::Loss,
            Ok(0.5) => Outcome::Draw,
            _ => {
                return Err(RowError::field(
                    "map_result",
                    format!(
                        "unknown outcome code {} (expected 1, 0 or 0.5)",
                        show(res_raw)
                    ),
                )
                .into());
            }
        };
        let start_ms = match present(get(rec, self.match_start_ms)) {
            Some(b) => fields::int("match_start_ms", b)?,
            None => return Err(RowError::field("match_start_ms", "missing required field").into()),
        };
        let team_name = fields::opt_text("team", opt_get(rec, self.team))?;
        let row = PlayerRow {
            match_id: fields::req_text("map_id", get(rec, self.map_id))?,
            mode: Cow::Borrowed("csgo-pro"),
            start_ms,
            team,
            player_id: fields::req_text("player", get(rec, self.player))?,
            outcome: Some(outcome),
            party_id: team_name.clone(),
            team_name,
            kills: fields::opt_i32("kills", opt_get(rec, self.kills))?,
            deaths: fields::opt_i32("deaths", opt_get(rec, self.deaths))?,
            team_score: fields::opt_f64("team_rounds", opt_get(rec, self.team_rounds))?,
            extra: extras_json(rec, &self.extra, None),
            ..Default::default()
        };
        row.validate()?;
        emit(&row);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn convert(fmt: Format, header: &str, line: &str) -> Result<Vec<PlayerRow<'static>>, Reject> {
        let h: Vec<&str> = header.split(',').collect();
        let a = fmt.csv_adapter(&h, "default").unwrap();
        let rec = ByteRecord::from(line.split(',').collect::<Vec<_>>());
        let mut out: Vec<PlayerRow<'static>> = Vec::new();
        a.convert(&rec, &mut |r: &PlayerRow<'_>| {
            out.push(r.clone().into_owned())
        })?;
        Ok(out)
    }

    const ATP_H: &str = "tourney_id,tourney_date,match_num,winner_id,loser_id,score,minutes,w_svpt,w_1stWon,w_2ndWon,l_svpt,l_1stWon,l_2ndWon,surface";

    #[test]
    fn atp_points_won_share_by_hand() {
        // First row of atp_matches_1991: Larsson d. Becker 6-4 3-6 7-6(2).
        // Larsson served 96 points and won 39+25 = 64; Becker served 95 and won 44+23 = 67.
        // Larsson's points: 64 + (95 - 67) = 92 of 191 = 0.48168.
        let rows = convert(
            Format::Atp,
            ATP_H,
            "1991-339,19901231,1,101723,101414,6-4 3-6 7-6(2),130,96,39,25,95,44,23,Hard",
        )
        .unwrap();
        assert_eq!(rows.len(), 2);
        let (w, l) = (&rows[0], &rows[1]);
        assert!((w.perf.unwrap() - 92.0 / 191.0).abs() < 1e-12);
        assert!((l.perf.unwrap() - 99.0 / 191.0).abs() < 1e-12);
        assert_eq!(w.outcome, Some(Outcome::Win));
        assert_eq!(w.match_id, "1991-339-1");
        assert_eq!(w.seconds_played, Some(7800.0));
        // team by player id: 101414 < 101723, so the loser is team 0.
        assert_eq!((w.team, l.team), (1, 0));
        assert_eq!(w.start_ms, 662_601_600_000 + 60_000);
        assert!(w.extra.as_deref().unwrap().contains("\"surface\":\"Hard\""));
    }

    #[test]
    fn atp_walkovers_skip_and_impossible_stats_quarantine() {
        let skip = convert(Format::Atp, ATP_H, "t,20000103,1,1,2,W/O,,,,,,,,Hard").unwrap_err();
        assert!(matches!(skip, Reject::Skip(_)));
        let bad = convert(
            Format::Atp,
            ATP_H,
            "t,20000103,1,1,2,6-0 6-0,50,40,30,20,30,10,5,Hard",
        )
        .unwrap_err();
        assert!(
            matches!(bad, Reject::Bad(RowError { field: Some(ref f), .. }) if f == "w_svpt"),
            "{bad:?}"
        );
        let same =
            convert(Format::Atp, ATP_H, "t,20000103,1,7,7,6-0 6-0,50,,,,,,,Hard").unwrap_err();
        assert!(matches!(same, Reject::Bad(_)));
    }

    #[test]
    fn lichess_scientific_times_modes_and_draws() {
        let h = "id,rated,created_at,last_move_at,winner,increment_code,white_id,white_rating,black_id,black_rating";
        let rows = convert(
            Format::Lichess,
            h,
            "abc,TRUE,1.50421E+12,1.50421E+12,draw,10+0,ann,1500,bob,1400",
        )
        .unwrap();
        assert_eq!(rows[0].start_ms, 1_504_210_000_000);
        assert_eq!(rows[0].mode, "chess-rapid");
        assert_eq!(
            (rows[0].outcome, rows[1].outcome),
            (Some(Outcome::Draw), Some(Outcome::Draw))
        );
        let e = convert(
            Format::Lichess,
            h,
            "abc,TRUE,1.50421E+12,1.50421E+12,aborted,10+0,ann,1500,bob,1400",
        )
        .unwrap_err();
        assert!(matches!(e, Reject::Bad(RowError { field: Some(ref f), .. }) if f == "winner"));
        assert_eq!(chess_mode("1+0"), "chess-bullet");
        assert_eq!(chess_mode("3+2"), "chess-blitz");
        assert_eq!(chess_mode("30+0"), "chess-classical");
    }

    #[test]
    fn detection_by_header() {
        assert_eq!(
            Format::detect(&ATP_H.split(',').collect::<Vec<_>>()),
            Format::Atp
        );
        assert_eq!(
            Format::detect(&["match_id", "player_id", "team", "start_ts", "won"]),
            Format::Canonical
        );
        assert_eq!(
            Format::detect(&[
                "gameid",
                "participantid",
                "playerid",
                "side",
                "result",
                "date",
                "position"
            ]),
            Format::Lol
        );
    }
}
