//! A reported match checked by the lake's rules and turned into its lake rows and the finished
//! match the live update takes.

use std::borrow::Cow;

use mm_artifact::online::FinishedMatch;
use mm_lake::PlayerRow;
use mm_lake::rules::{self, MatchRejection, TeamClaim};
use mm_lake::schema::Outcome;
use tonic::Status;

use crate::proto;

/// The largest lobby a report may hold.
pub const MAX_REPORT_PLAYERS: usize = 1024;

/// A report that passed every rule.
#[derive(Debug, Clone)]
pub struct Checked {
    pub match_id: String,
    pub mode: String,
    pub start_ms: i64,
    /// The lake rows, outcomes resolved, in the order reported.
    pub rows: Vec<PlayerRow<'static>>,
    /// The same match as the live update takes it (rows in the lake's order).
    pub finished: FinishedMatch,
}

/// A report that breaks a rule: the rule's name (for the metrics) and the status the caller
/// gets (`INVALID_ARGUMENT` naming the rule and the field).
#[derive(Debug)]
pub struct Refused {
    pub rule: String,
    pub status: Status,
}

fn refused(rule: &str, field: &str, detail: &str) -> Refused {
    Refused {
        rule: rule.to_string(),
        status: Status::invalid_argument(format!("rule {rule}, field {field}: {detail}")),
    }
}

fn outcome_of(k: usize, code: i32) -> Result<Outcome, Refused> {
    match proto::Outcome::try_from(code) {
        Ok(proto::Outcome::Win) => Ok(Outcome::Win),
        Ok(proto::Outcome::Draw) => Ok(Outcome::Draw),
        Ok(proto::Outcome::Loss) => Ok(Outcome::Loss),
        Err(_) => Err(refused(
            "row",
            &format!("players[{k}].outcome"),
            &format!("{code} is not an outcome"),
        )),
    }
}

/// The lake row of player `k` of the report (its outcome as given, maybe none).
fn row_of(
    req: &proto::ReportMatchRequest,
    k: usize,
    p: &proto::PlayerResult,
) -> Result<PlayerRow<'static>, Refused> {
    let s = |v: &Option<String>| v.clone().map(Cow::Owned);
    Ok(PlayerRow {
        match_id: Cow::Owned(req.match_id.clone()),
        mode: Cow::Owned(req.mode.clone()),
        start_ms: req.start_ms,
        team: p.team,
        player_id: Cow::Owned(p.player_id.clone()),
        outcome: p.outcome.map(|o| outcome_of(k, o)).transpose()?,
        end_ms: req.end_ms,
        seconds_played: p.seconds_played,
        party_id: s(&p.party_id),
        team_name: s(&p.team_name),
        role: s(&p.role),
        kills: p.kills,
        deaths: p.deaths,
        deaths_by_enemy: p.deaths_by_enemy,
        self_kills: p.self_kills,
        assists: p.assists,
        score: p.score,
        team_score: p.team_score,
        perf: p.perf,
        quit_early: p.quit_early,
        input_device: s(&p.input_device),
        platform: s(&p.platform),
        region: s(&p.region),
        lat: p.lat,
        lon: p.lon,
        ping_ms: p.ping_ms,
        rating: p.rating,
        extra: None,
    })
}

/// The field a match rule is about.
fn rule_field(e: &MatchRejection) -> &'static str {
    match e.category {
        rules::PLAYER_TWICE => "player_id",
        rules::ONE_TEAM => "team",
        rules::INCONSISTENT_TEAM_SCORE => "team_score",
        _ => "outcome",
    }
}

/// Checks a report by the rules of `mm ingest`: each row's own ([`PlayerRow::validate`]), then
/// the match's ([`mm_lake::rules`]); resolves outcomes from team scores where none was given.
///
/// # Errors
/// The rule broken, with `INVALID_ARGUMENT` naming it and the field (and the player, for a
/// row's rule).
pub fn check(req: &proto::ReportMatchRequest) -> Result<Checked, Refused> {
    let n = req.players.len();
    if n == 0 {
        return Err(refused("match", "players", "a match needs players"));
    }
    if n > MAX_REPORT_PLAYERS {
        return Err(refused(
            "match",
            "players",
            &format!("{n} players: at most {MAX_REPORT_PLAYERS}"),
        ));
    }
    let mut rows = Vec::with_capacity(n);
    for (k, p) in req.players.iter().enumerate() {
        let row = row_of(req, k, p)?;
        if let Err(e) = row.validate() {
            let field = e.field.as_deref().unwrap_or("row");
            return Err(refused(
                "row",
                field,
                &format!("{} (players[{k}], player {:?})", e.reason, p.player_id),
            ));
        }
        rows.push(row);
    }
    let m = &req.match_id;
    if let Some(e) = rules::player_twice(m, rows.iter().map(|r| r.player_id.as_ref())) {
        return Err(refused(e.category, rule_field(&e), &e.reason));
    }
    let mut teams: Vec<i32> = rows.iter().map(|r| r.team).collect();
    teams.sort_unstable();
    teams.dedup();
    let claims: Vec<TeamClaim> = rows
        .iter()
        .map(|r| TeamClaim {
            team: r.team,
            outcome: r.outcome,
            team_score: r.team_score,
        })
        .collect();
    let mut outcomes = Vec::with_capacity(n);
    rules::two_teams(m, &teams)
        .and_then(|()| rules::resolve_outcomes(m, &claims, &mut outcomes))
        .map_err(|e| refused(e.category, rule_field(&e), &e.reason))?;
    for (r, o) in rows.iter_mut().zip(outcomes) {
        r.outcome = Some(o);
    }
    let results = rows.iter().filter_map(PlayerRow::result_row).collect();
    Ok(Checked {
        match_id: req.match_id.clone(),
        mode: req.mode.clone(),
        start_ms: req.start_ms,
        finished: FinishedMatch::new(&req.match_id, req.start_ms, results),
        rows,
    })
}

/// A player's scores as `Score` and `ReportMatch` answer them.
pub(crate) fn player_score(
    id: &str,
    known: bool,
    m: &mm_matcher::queue::Member,
) -> proto::PlayerScore {
    proto::PlayerScore {
        id: id.to_string(),
        known,
        raw_skill: m.raw_skill,
        outcome_skill: m.outcome_skill,
        percentile: m.percentile,
        games: m.games,
        churn_after_win: m.churn[0],
        churn_after_draw: m.churn[1],
        churn_after_loss: m.churn[2],
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    pub(crate) fn player(id: &str, team: i32, score: f64) -> proto::PlayerResult {
        proto::PlayerResult {
            player_id: id.into(),
            team,
            team_score: Some(score),
            kills: Some(3),
            deaths: Some(2),
            ..Default::default()
        }
    }

    fn report(players: Vec<proto::PlayerResult>) -> proto::ReportMatchRequest {
        proto::ReportMatchRequest {
            match_id: "m1".into(),
            mode: "tdm".into(),
            start_ms: 1_704_067_200_000,
            end_ms: Some(1_704_067_800_000),
            players,
            omit_players: false,
        }
    }

    /// Outcomes come from the team scores; each rule of ingest refuses with its name and field.
    #[test]
    fn rules_of_ingest_refuse_by_name() {
        let ok = check(&report(vec![
            player("a", 0, 10.0),
            player("b", 1, 5.0),
            player("c", 0, 10.0),
        ]))
        .unwrap();
        let o: Vec<_> = ok.rows.iter().map(|r| r.outcome.unwrap()).collect();
        assert_eq!(o, [Outcome::Win, Outcome::Loss, Outcome::Win]);
        let lake_order: Vec<&str> = ok
            .finished
            .rows
            .iter()
            .map(|r| r.player_id.as_str())
            .collect();
        assert_eq!(lake_order, ["a", "c", "b"]);

        let msg = |r: proto::ReportMatchRequest| {
            let e = check(&r).unwrap_err().status;
            assert_eq!(e.code(), tonic::Code::InvalidArgument);
            e.message().to_string()
        };
        let twice = msg(report(vec![player("a", 0, 1.0), player("a", 1, 2.0)]));
        assert!(
            twice.contains("match: player twice") && twice.contains("player_id"),
            "{twice}"
        );
        let one = msg(report(vec![player("a", 0, 1.0), player("b", 0, 1.0)]));
        assert!(
            one.contains("match: one team") && one.contains("field team"),
            "{one}"
        );
        let mut neg = player("b", 1, 2.0);
        neg.kills = Some(-1);
        let m = msg(report(vec![player("a", 0, 1.0), neg]));
        assert!(m.contains("field kills") && m.contains("players[1]"), "{m}");
        // A row with neither outcome nor team score breaks a row's rule; a team whose rows
        // give an outcome but no score, beside one that gives only a score, the match's.
        let mut nothing = player("b", 1, 2.0);
        nothing.team_score = None;
        let m = msg(report(vec![player("a", 0, 1.0), nothing]));
        assert!(m.contains("rule row, field outcome"), "{m}");
        let mut no_score = player("b", 1, 2.0);
        no_score.team_score = None;
        no_score.outcome = Some(proto::Outcome::Loss as i32);
        let m = msg(report(vec![player("a", 0, 1.0), no_score]));
        assert!(m.contains("match: no outcome"), "{m}");
        let mut wins = player("b", 1, 2.0);
        wins.outcome = Some(proto::Outcome::Win as i32);
        wins.team_score = None;
        let mut a = player("a", 0, 1.0);
        a.outcome = Some(proto::Outcome::Win as i32);
        let m = msg(report(vec![a, wins]));
        assert!(m.contains("match: inconsistent outcomes"), "{m}");
        let mut empty = report(vec![player("a", 0, 1.0), player("b", 1, 1.0)]);
        empty.mode = String::new();
        assert!(msg(empty).contains("field mode"));
        assert!(msg(report(Vec::new())).contains("field players"));
    }
}
