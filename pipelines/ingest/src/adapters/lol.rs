//! League of Legends pro games (Oracle's Elixir).

use std::borrow::Cow;

use csv::ByteRecord;
use mm_lake::PlayerRow;
use mm_lake::schema::Outcome;

use super::{Cols, CsvAdapter, Reject, extras_json, get, opt_get, required, side, unknown_outcome};
use crate::fields;

#[derive(Debug)]
pub(super) struct Lol {
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
    pub(super) fn new(c: &Cols) -> Result<Lol, String> {
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
        let used = [
            Some(l.gameid),
            Some(l.date),
            Some(l.side),
            Some(l.position),
            Some(l.playerid),
            Some(l.result),
            l.teamname,
            l.teamid,
            l.kills,
            l.deaths,
            l.assists,
            l.gamelength,
        ];
        l.extra = c.rest_of(&used);
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
        let team = side(
            "side",
            get(rec, self.side).unwrap_or_default(),
            ["Blue", "Red"],
        )?;
        let result_raw = get(rec, self.result).unwrap_or_default();
        let outcome = match result_raw {
            b"1" => Outcome::Win,
            b"0" => Outcome::Loss,
            _ => return Err(unknown_outcome("result", result_raw, "1 or 0").into()),
        };
        let start_ms = fields::time_ms("date", required("date", get(rec, self.date))?)?;
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
            // top, jng, mid, bot or sup: the role-aware raw skill compares players within it.
            role: fields::opt_text("position", Some(position))?,
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
