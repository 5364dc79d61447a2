//! The adapters against rows of the real sets' files.

use super::*;
use mm_lake::schema::Outcome;

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
    let same = convert(Format::Atp, ATP_H, "t,20000103,1,7,7,6-0 6-0,50,,,,,,,Hard").unwrap_err();
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
