//! CS:GO pro maps (HLTV, flattened player_maps.csv).

use std::borrow::Cow;

use csv::ByteRecord;
use mm_lake::PlayerRow;
use mm_lake::schema::Outcome;

use super::{Cols, CsvAdapter, Reject, extras_json, get, opt_get, required, side, unknown_outcome};
use crate::fields;

#[derive(Debug)]
pub(super) struct Csgo {
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
    pub(super) fn new(c: &Cols) -> Result<Csgo, String> {
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
        let used = [
            Some(s.map_id),
            Some(s.match_start_ms),
            Some(s.side),
            Some(s.player),
            Some(s.map_result),
            s.team,
            s.kills,
            s.deaths,
            s.team_rounds,
        ];
        // The HLTV series id becomes `hltv_match_id`: our match is one map.
        s.extra = c
            .rest_of(&used)
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
        let team = side(
            "side",
            get(rec, self.side).unwrap_or_default(),
            ["team1", "team2"],
        )?;
        let res_raw = get(rec, self.map_result).unwrap_or_default();
        let outcome = match fields::float("map_result", res_raw) {
            Ok(1.0) => Outcome::Win,
            Ok(0.0) => Outcome::Loss,
            Ok(0.5) => Outcome::Draw,
            _ => return Err(unknown_outcome("map_result", res_raw, "1, 0 or 0.5").into()),
        };
        let start_ms = fields::int(
            "match_start_ms",
            required("match_start_ms", get(rec, self.match_start_ms))?,
        )?;
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
