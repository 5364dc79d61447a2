//! Lichess (chess, 1v1 with draws, one row per game).

use std::borrow::Cow;

use csv::ByteRecord;
use mm_lake::schema::Outcome;
use mm_lake::{PlayerRow, RowError};

use super::{Cols, CsvAdapter, Reject, extras_json, get, opt_get, required, unknown_outcome};
use crate::fields::{self, present, show};

#[derive(Debug)]
pub(super) struct Lichess {
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
    pub(super) fn new(c: &Cols) -> Result<Lichess, String> {
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
        let used = [
            Some(l.id),
            Some(l.created_at),
            l.last_move_at,
            Some(l.winner),
            Some(l.white_id),
            Some(l.black_id),
            l.white_rating,
            l.black_rating,
        ];
        l.extra = c.rest_of(&used);
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
        let start_ms = Self::ms(
            "created_at",
            required("created_at", get(rec, self.created_at))?,
        )?;
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
                return Err(unknown_outcome("winner", winner_raw, "white, black or draw").into());
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
