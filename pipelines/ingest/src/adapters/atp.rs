//! ATP tour (tennis, 1v1, one row per match).

use std::borrow::Cow;

use csv::ByteRecord;
use mm_lake::schema::Outcome;
use mm_lake::{PlayerRow, RowError};

use super::{Cols, CsvAdapter, Reject, extras_json, get, opt_get, required};
use crate::fields::{self, present, show};

/// The longest tennis match on record lasted 11 h 5 min (Isner-Mahut, 2010); a duration above
/// 12 h is a data error.
pub const ATP_MAX_MINUTES: f64 = 720.0;

#[derive(Debug)]
pub(super) struct Atp {
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
    pub(super) fn new(c: &Cols) -> Result<Atp, String> {
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
        let date_raw = required("tourney_date", get(rec, self.tourney_date))?;
        let date =
            chrono::NaiveDate::parse_from_str(fields::text("tourney_date", date_raw)?, "%Y%m%d")
                .map_err(|_| {
                    RowError::field(
                        "tourney_date",
                        format!("{} is not a YYYYMMDD date", show(date_raw)),
                    )
                })?;
        let num = fields::int(
            "match_num",
            required("match_num", get(rec, self.match_num))?,
        )?;
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
