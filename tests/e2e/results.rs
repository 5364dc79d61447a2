//! Results flowing back through `mm serve` (the real binary, a tonic client): reported matches
//! need the token, are checked by the lake's rules, move their players at once (and exactly as
//! the batch replay of the lake does), and land in the lake's matches table exactly once, with
//! the rows `mm ingest` writes for the same matches, across SIGKILLs of the service. Every
//! server is started with `--max-seconds` and killed when its test ends.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use mm_artifact::synthetic::Mix;
use mm_artifact::{Artifact, Store};
use mm_lake::Lake;
use mm_serve::proto;
use mm_serve::proto::matcher_client::MatcherClient;
use tonic::transport::Channel;

use crate::util::{Killed, start_serve};

const TOKEN: &str = "t0ken-for-tests";

struct Setup {
    _dir: tempfile::TempDir,
    models: PathBuf,
    lake: PathBuf,
    wal: PathBuf,
    token_file: PathBuf,
    art: Artifact,
}

fn setup() -> Setup {
    setup_with(mm_artifact::synthetic::artifact(60, 3))
}

/// The committed artifact of the newest format (a 6v6 model whose team win model reads the
/// win skill, with its update), as fitted on no lake the tests have.
fn committed_newest() -> (mm_artifact::manifest::Manifest, Vec<(String, Vec<u8>)>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
        "../../tests/artifacts/format-{}",
        mm_artifact::FORMAT_VERSION
    ));
    let mut m = mm_artifact::load::read_manifest(&dir).unwrap();
    let files = m
        .files
        .iter()
        .map(|f| (f.path.clone(), std::fs::read(dir.join(&f.path)).unwrap()))
        .collect();
    m.data.lake_version = None;
    (m, files)
}

fn setup_with((m, files): (mm_artifact::manifest::Manifest, Vec<(String, Vec<u8>)>)) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    Store::new(&models)
        .publish("v0001", m, &files, true, None)
        .unwrap();
    let art = Store::new(&models).open_latest().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    Setup {
        lake: dir.path().join("lake"),
        wal: dir.path().join("wal"),
        models,
        token_file,
        art,
        _dir: dir,
    }
}

/// Starts `mm serve` recording into the setup's lake; returns it, its address and its metrics
/// URL.
fn start(s: &Setup, extra: &[&str]) -> (Killed, String, String) {
    start_replica(s, &s.wal, "r1", extra)
}

/// [`start`] as replica `replica` with its log in `wal`.
fn start_replica(s: &Setup, wal: &Path, replica: &str, extra: &[&str]) -> (Killed, String, String) {
    let mut args: Vec<std::ffi::OsString> = [
        "--max-seconds",
        "300",
        "--replica",
        replica,
        "--reload-ms",
        "50",
    ]
    .iter()
    .map(Into::into)
    .collect();
    if !extra.contains(&"--flush-s") {
        args.extend(["--flush-s".into(), "0.2".into()]);
    }
    for (flag, value) in [
        ("--models", s.models.as_os_str()),
        ("--lake", s.lake.as_os_str()),
        ("--wal", wal.as_os_str()),
        ("--token-file", s.token_file.as_os_str()),
    ] {
        args.extend([flag.into(), value.to_os_string()]);
    }
    args.extend(extra.iter().map(Into::into));
    start_serve(&args, &[])
}

async fn client(addr: &str) -> MatcherClient<Channel> {
    let ch = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    MatcherClient::new(ch)
}

fn authed<T>(msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    r
}

/// `n` random 3v3 matches, one every five minutes from `from_ms`, among the snapshot's first 40
/// players and 20 new ones; some players in parties of two, scores and kills at random.
fn matches(art: &Artifact, n: usize, from_ms: i64, seed: u64) -> Vec<proto::ReportMatchRequest> {
    let mut r = Mix(seed);
    let pool: Vec<String> = (0..40)
        .map(|i| art.snapshot.id(i).to_string())
        .chain((0..20).map(|i| format!("new{i:02}")))
        .collect();
    (0..n)
        .map(|k| {
            let mut ids: Vec<String> = Vec::new();
            while ids.len() < 6 {
                let p = pool[r.below(pool.len() as u64) as usize].clone();
                if !ids.contains(&p) {
                    ids.push(p);
                }
            }
            let scores = [r.below(50) as f64, r.below(50) as f64];
            let players = ids
                .iter()
                .enumerate()
                .map(|(j, id)| {
                    let team = (j % 2) as i32;
                    proto::PlayerResult {
                        player_id: id.clone(),
                        team,
                        team_score: Some(scores[j % 2]),
                        kills: Some(r.below(15) as i32),
                        deaths: Some(10),
                        deaths_by_enemy: Some(r.below(10) as i32),
                        party_id: (j < 4 && k % 3 == 0).then(|| format!("party{}", j % 2)),
                        seconds_played: Some(600.0),
                        ..Default::default()
                    }
                })
                .collect();
            let start = from_ms + k as i64 * 300_000;
            proto::ReportMatchRequest {
                match_id: format!("m{seed}-{k:04}"),
                mode: art.manifest.mode.clone().unwrap(),
                start_ms: start,
                end_ms: Some(start + 600_000),
                players,
                omit_players: false,
            }
        })
        .collect()
}

/// Every row of the lake's matches table, by (match id, player id): the columns as text,
/// without the provenance columns (`source_file`, `source_line`), which name the writer.
fn lake_rows(lake: &Path) -> BTreeMap<(String, String), Vec<String>> {
    let l = Lake::open(lake).unwrap();
    let mut out = BTreeMap::new();
    for f in l.matches_files().unwrap() {
        for b in mm_lake::parquet_io::read_parquet_columns(&f, None).unwrap() {
            add_rows(&b, &mut out);
        }
    }
    out
}

fn add_rows(b: &RecordBatch, out: &mut BTreeMap<(String, String), Vec<String>>) {
    let names: Vec<String> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let text = |c: usize, i: usize| {
        let a = b.column(c);
        if a.is_null(i) {
            "null".to_string()
        } else {
            arrow_cast::display::array_value_to_string(a, i).unwrap()
        }
    };
    let col = |n: &str| names.iter().position(|x| x == n).unwrap();
    let (m, p) = (col("match_id"), col("player_id"));
    for i in 0..b.num_rows() {
        let key = (
            b.column(m).as_string::<i32>().value(i).to_string(),
            b.column(p).as_string::<i32>().value(i).to_string(),
        );
        let row: Vec<String> = (0..names.len())
            .filter(|&c| names[c] != "source_file" && names[c] != "source_line")
            .map(|c| format!("{}={}", names[c], text(c, i)))
            .collect();
        assert!(out.insert(key.clone(), row).is_none(), "{key:?} twice");
    }
}

/// The same matches as a canonical CSV for `mm ingest`.
fn as_csv(ms: &[proto::ReportMatchRequest], path: &Path) {
    let mut w = csv::Writer::from_path(path).unwrap();
    w.write_record([
        "match_id",
        "mode",
        "start_time",
        "end_time",
        "team",
        "player_id",
        "party_id",
        "kills",
        "deaths",
        "deaths_by_enemy",
        "team_score",
        "seconds_played",
    ])
    .unwrap();
    let iso = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string()
    };
    let opt = |x: Option<String>| x.unwrap_or_default();
    for m in ms {
        for p in &m.players {
            w.write_record([
                m.match_id.clone(),
                m.mode.clone(),
                iso(m.start_ms),
                iso(m.end_ms.unwrap()),
                p.team.to_string(),
                p.player_id.clone(),
                opt(p.party_id.clone()),
                opt(p.kills.map(|x| x.to_string())),
                opt(p.deaths.map(|x| x.to_string())),
                opt(p.deaths_by_enemy.map(|x| x.to_string())),
                opt(p.team_score.map(|x| x.to_string())),
                opt(p.seconds_played.map(|x| x.to_string())),
            ])
            .unwrap();
        }
    }
    w.flush().unwrap();
}

/// Waits until the service has followed the lake to its latest version and holds no pending
/// match (its metrics say so): the state its players converge to, which the batch replay gives.
fn wait_until_settled(lake: &Path, metrics: &str) {
    let version = Lake::open(lake).unwrap().version().unwrap();
    let t0 = Instant::now();
    loop {
        let text = crate::serve::http_get(metrics);
        let followed = text
            .lines()
            .find_map(|l| l.strip_prefix("mm_serve_lake_version "))
            .and_then(|v| v.trim().parse::<i64>().ok());
        if followed.is_some_and(|v| v >= version) && text.contains("mm_serve_pending_matches 0") {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the service has not followed the lake to version {version}: {followed:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_for_rows(lake: &Path, rows: usize) {
    let t0 = Instant::now();
    loop {
        let n = Lake::open(lake).ok().map_or(0, |l| {
            l.match_entries().iter().filter_map(|f| f.rows).sum::<u64>()
        });
        if n as usize >= rows {
            assert_eq!(n as usize, rows, "more rows than reported");
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the lake holds {n} rows of {rows} after a minute"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The whole path on one service: credentials, rules, duplicates, players moved at once and as
/// the batch replay moves them, and the lake's rows equal to `mm ingest`'s for the same matches.
#[test]
fn reported_matches_move_players_and_land_in_the_lake_once() {
    let s = setup();
    let (_server, addr, metrics) = start(&s, &[]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 40, from, 7);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let known = s.art.snapshot.id(0).to_string();
    rt.block_on(async {
        let mut c = client(&addr).await;
        // Without the token: refused, and nothing kept.
        let e = c.report_match(reports[0].clone()).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        // Reads stay open.
        c.score(proto::ScoreRequest::of_ids(
            std::slice::from_ref(&known),
            false,
        ))
        .await
        .unwrap();
        // A match that breaks a rule: INVALID_ARGUMENT naming the rule and the field.
        let mut one_team = reports[0].clone();
        for p in &mut one_team.players {
            p.team = 0;
        }
        let e = c.report_match(authed(one_team)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains("match: one team") && e.message().contains("field team"),
            "{e:?}"
        );
        let mut negative = reports[0].clone();
        negative.players[2].kills = Some(-3);
        let e = c.report_match(authed(negative)).await.unwrap_err();
        assert!(e.message().contains("field kills"), "{e:?}");

        for (k, r) in reports.iter().enumerate() {
            // Every third report asks for no players in the answer: it moves them all the same
            // (the replay below checks every player).
            let mut r = r.clone();
            r.omit_players = k % 3 == 2;
            let got = c.report_match(authed(r)).await.unwrap().into_inner();
            assert_eq!(got.status, proto::ReportStatus::Recorded as i32, "{k}");
            if k % 3 == 2 {
                assert!(got.players.is_empty(), "report {k}");
                continue;
            }
            assert_eq!(got.players.len(), 6);
            // The next read sees the match: each player's raw skill is the report's answer.
            let ids: Vec<String> = got.players.iter().map(|p| p.id.clone()).collect();
            let now = c
                .score(proto::ScoreRequest::of_ids(&ids, false))
                .await
                .unwrap()
                .into_inner();
            for (a, b) in got.players.iter().zip(&now.players) {
                assert_eq!(a.raw_skill, b.raw_skill, "{}", a.id);
                assert_eq!(a.games, b.games, "{}", a.id);
            }
        }
        // A second report of a match: a duplicate, nothing changes.
        let dup = c
            .report_match(authed(reports[3].clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(dup.status, proto::ReportStatus::Duplicate as i32);
        // The same player twice in a pool, or on both teams of a lobby: refused by id.
        let twice = proto::PairRequest {
            ids: vec![known.clone(), "x".into(), known.clone()],
            ..Default::default()
        };
        let e = c.pair(twice).await.unwrap_err();
        assert!(e.message().contains(&known), "{e:?}");
        let both = proto::ScoreRequest::of_ids(&[known.clone(), known.clone()], true);
        let e = c.score(both).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
    });
    wait_for_rows(&s.lake, 40 * 6);

    // Online equals batch.
    wait_until_settled(&s.lake, &metrics);
    assert_online_equals_batch(&rt, &s, &addr);

    // The rows are those `mm ingest` writes for the same matches.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("m.csv");
    as_csv(&reports, &csv);
    let ingested = dir.path().join("lake");
    let (code, _, err) = crate::util::mm(&[
        "ingest",
        csv.to_str().unwrap(),
        "--lake",
        ingested.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let (ours, theirs) = (lake_rows(&s.lake), lake_rows(&ingested));
    assert_eq!(ours.len(), 240);
    for (k, row) in &theirs {
        assert_eq!(ours.get(k), Some(row), "{k:?}");
    }
    assert_eq!(ours.len(), theirs.len());

    // The flushes recorded this replica's application transaction.
    let l = Lake::open(&s.lake).unwrap();
    assert_eq!(l.app_transaction("mm-serve/r1").unwrap(), Some(40));
    let text = crate::serve::http_get(&metrics);
    assert!(
        text.contains("mm_serve_reports_total{result=\"recorded\",rule=\"\"} 40"),
        "{text}"
    );
    assert!(text.contains("result=\"unauthenticated\""), "{text}");
    assert!(text.contains("rule=\"match: one team\""), "{text}");
    assert!(
        text.contains("mm_serve_reports_total{result=\"duplicate\",rule=\"\"} 1"),
        "{text}"
    );
}

/// ReportMatches: one call of many matches, answered match by match in the request's order. A
/// refused match refuses only itself; a match of an earlier call, or given twice in one call (at
/// its later place), is a duplicate; a call over
/// the limit or without the credential keeps nothing. Every recorded match reaches the lake
/// once, and the players equal the batch replay.
#[test]
fn a_batch_of_reports_is_answered_match_by_match() {
    let s = setup();
    let (_server, addr, metrics) = start(&s, &[]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 60, from, 29);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let batch = |ms: &[proto::ReportMatchRequest]| proto::ReportMatchesRequest {
        matches: ms.to_vec(),
    };
    rt.block_on(async {
        let mut c = client(&addr).await;
        let e = c.report_matches(batch(&reports)).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        let over = vec![reports[0].clone(); 1001];
        let e = c.report_matches(authed(batch(&over))).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("at most 1000"), "{e:?}");

        // The first 30 with a match of one team at position 5; every fourth omits its players.
        let mut first: Vec<proto::ReportMatchRequest> = reports[..30].to_vec();
        let mut one_team = reports[30].clone();
        one_team.match_id = "one-team".into();
        for p in &mut one_team.players {
            p.team = 0;
        }
        first.insert(5, one_team);
        for (k, r) in first.iter_mut().enumerate() {
            r.omit_players = k % 4 == 3;
        }
        let got = c.report_matches(authed(batch(&first))).await.unwrap();
        let results = got.into_inner().results;
        assert_eq!(results.len(), 31);
        for (k, (r, sent)) in results.iter().zip(&first).enumerate() {
            if k == 5 {
                assert_eq!(r.error_code, tonic::Code::InvalidArgument as i32);
                assert!(r.error.contains("match: one team"), "{r:?}");
                assert!(r.response.is_none());
                continue;
            }
            assert_eq!(r.error_code, 0, "{k}: {r:?}");
            let a = r.response.as_ref().unwrap();
            assert_eq!(a.status, proto::ReportStatus::Recorded as i32, "{k}");
            assert!(a.sequence > 0);
            let want = if sent.omit_players { 0 } else { 6 };
            assert_eq!(a.players.len(), want, "{k}");
            let ids: Vec<&str> = a.players.iter().map(|p| p.id.as_str()).collect();
            for p in &sent.players {
                assert!(want == 0 || ids.contains(&p.player_id.as_str()), "{k}");
            }
        }
        // The rest, a match of the first call again, and one of this call twice: duplicates
        // (the later of the two).
        let mut second: Vec<proto::ReportMatchRequest> = reports[30..].to_vec();
        second.push(reports[7].clone());
        second.push(reports[31].clone());
        let results = c
            .report_matches(authed(batch(&second)))
            .await
            .unwrap()
            .into_inner()
            .results;
        assert_eq!(results.len(), 32);
        let status = |r: &proto::ReportMatchResult| r.response.as_ref().unwrap().status;
        assert!(
            results[..30]
                .iter()
                .all(|r| status(r) == proto::ReportStatus::Recorded as i32)
        );
        assert_eq!(status(&results[30]), proto::ReportStatus::Duplicate as i32);
        assert_eq!(status(&results[31]), proto::ReportStatus::Duplicate as i32);
    });
    wait_for_rows(&s.lake, 60 * 6);
    assert_eq!(lake_rows(&s.lake).len(), 60 * 6);
    wait_until_settled(&s.lake, &metrics);
    assert_online_equals_batch(&rt, &s, &addr);
    let text = crate::serve::http_get(&metrics);
    for want in [
        "mm_serve_reports_total{result=\"recorded\",rule=\"\"} 60",
        "mm_serve_reports_total{result=\"duplicate\",rule=\"\"} 2",
        "mm_serve_reports_total{result=\"unauthenticated\",rule=\"\"} 1",
        "rule=\"match: one team\"} 1",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
}

/// Online equals batch: the lake's matches replayed by the skill fit's replay from the
/// artifact's snapshot give every player the service's raw skill and match count.
fn assert_online_equals_batch(rt: &tokio::runtime::Runtime, s: &Setup, addr: &str) {
    let batch = batch_skills(&s.art, &s.lake);
    rt.block_on(async {
        let mut c = client(addr).await;
        let ids: Vec<String> = batch.keys().cloned().collect();
        let mut now = c
            .score(proto::ScoreRequest::of_ids(&ids, false))
            .await
            .unwrap()
            .into_inner()
            .players;
        // A lobby's worth at a time: these Scores read the states on the request's thread
        // under one hold of the players' lock, the whole list's in the blocking pool.
        for lobby in ids.chunks(12) {
            let r = c.score(proto::ScoreRequest::of_ids(lobby, false)).await;
            now.extend(r.unwrap().into_inner().players);
        }
        assert_eq!(now.len(), 2 * ids.len());
        for p in &now {
            let (skill, games) = batch[&p.id];
            assert!(
                (p.raw_skill - skill).abs() <= 1e-12,
                "{}: service {} batch {}",
                p.id,
                p.raw_skill,
                skill
            );
            assert_eq!(p.games, games, "{}", p.id);
        }
    });
}

/// Each player's raw skill and matches after replaying the lake with `mm-fit`'s replay, from
/// the artifact's snapshot with its parameters and party offsets.
fn batch_skills(art: &Artifact, lake: &Path) -> HashMap<String, (f64, u64)> {
    let metric = mm_fit::Metric::parse(&art.skill.metric).unwrap();
    let h = mm_fit::skill::history::read_history(&Lake::open(lake).unwrap(), None, metric).unwrap();
    let start: Vec<mm_trainer::skill::raw::PlayerSkill> = h
        .ids
        .iter()
        .map(|id| {
            art.snapshot
                .get(id)
                .map(|s| mm_trainer::skill::raw::PlayerSkill {
                    skill: s.raw_skill,
                    games: u32::try_from(s.games).unwrap(),
                })
                .unwrap_or_default()
        })
        .collect();
    let none = mm_fit::skill::replay::Windows {
        tune_from: 0,
        tune_to: 0,
        score_from: 1,
        score_to: 0,
    };
    let params = art.skill.raw_skill.check().unwrap();
    let mut replay = mm_fit::skill::replay::OursReplay::new(
        params,
        art.skill.party_offsets,
        i64::MAX,
        none,
        None,
        0,
    )
    .resume(start);
    let mut pre = vec![f32::NAN; h.rows()];
    replay.feed(&h, &mut pre);
    let run = replay.finish();
    h.ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let p = run.model.players()[i];
            (id.clone(), (p.skill, u64::from(p.games)))
        })
        .collect()
}

/// SIGKILL at moments taken from the run's own progress (after the k-th acknowledgement), a
/// restart on the same log and lake each time, the client re-sending what was not
/// acknowledged: every acknowledged match is in the lake exactly once, and no match partly.
#[test]
fn a_killed_service_loses_no_acknowledged_match() {
    let s = setup();
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 120, from, 11);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut acked = vec![false; reports.len()];
    let mut next = 0;
    let kills_after = [7usize, 23, 31, 58, 64, 90];
    for (round, &kill_at) in kills_after.iter().chain([&reports.len()]).enumerate() {
        let (server, addr, _) = start(&s, &["--flush-matches", "5"]);
        let mut server = Some(server);
        rt.block_on(async {
            let mut c = client(&addr).await;
            // Re-send what the last round did not see acknowledged (a game server retries).
            for (k, r) in reports.iter().enumerate().take(next) {
                if !acked[k] {
                    let got = c
                        .report_match(authed(r.clone()))
                        .await
                        .unwrap()
                        .into_inner();
                    acked[k] = true;
                    let _ = got;
                }
            }
            while next < reports.len() {
                let k = next;
                next += 1;
                // Kill while a report is in flight: its fate is unknown to the client.
                if k == kill_at {
                    let r = authed(reports[k].clone());
                    let mut c2 = c.clone();
                    let flight = tokio::spawn(async move { c2.report_match(r).await });
                    tokio::time::sleep(Duration::from_millis((round as u64 * 3) % 7)).await;
                    drop(server.take());
                    if let Ok(Ok(ok)) = flight.await {
                        assert_eq!(ok.into_inner().status, proto::ReportStatus::Recorded as i32);
                        acked[k] = true;
                    }
                    return;
                }
                let got = c.report_match(authed(reports[k].clone())).await.unwrap();
                assert_eq!(
                    got.into_inner().status,
                    proto::ReportStatus::Recorded as i32
                );
                acked[k] = true;
            }
        });
        if let Some(srv) = server.take() {
            // The last round: stop after everything is in the lake.
            wait_for_rows(&s.lake, reports.len() * 6);
            drop(srv);
        }
    }
    assert!(acked.iter().all(|&a| a));
    // Each match once, whole.
    let rows = lake_rows(&s.lake);
    let mut per_match: BTreeMap<String, usize> = BTreeMap::new();
    for (m, _) in rows.keys() {
        *per_match.entry(m.clone()).or_default() += 1;
    }
    assert_eq!(per_match.len(), reports.len());
    assert!(per_match.values().all(|&n| n == 6), "{per_match:?}");
    let l = Lake::open(&s.lake).unwrap();
    assert!(l.app_transaction("mm-serve/r1").unwrap().unwrap() >= reports.len() as i64);
}

/// Every player's score on one service, by id.
async fn scores(c: &mut MatcherClient<Channel>, ids: &[String]) -> Vec<proto::PlayerScore> {
    let r = c
        .score(proto::ScoreRequest::of_ids(ids, false))
        .await
        .unwrap()
        .into_inner();
    r.players
}

/// The players of the synthetic artifact and the new ones the random matches draw from.
fn all_ids(art: &Artifact) -> Vec<String> {
    (0..40)
        .map(|i| art.snapshot.id(i).to_string())
        .chain((0..20).map(|i| format!("new{i:02}")))
        .collect()
}

/// Publishes the setup's snapshot again as `version`, fitted (its manifest says) on the lake's
/// first version, the one the service creates.
fn publish_on_first_version(s: &Setup, version: &str) {
    let (mut m, files) = mm_artifact::synthetic::artifact(60, 3);
    m.data.lake_version = Some(0);
    Store::new(&s.models)
        .publish(version, m, &files, true, None)
        .unwrap();
}

async fn report_all(c: &mut MatcherClient<Channel>, reports: &[proto::ReportMatchRequest]) {
    for r in reports {
        let got = c
            .report_match(authed(r.clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(got.status, proto::ReportStatus::Recorded as i32);
    }
}

/// With an artifact whose team win model reads the win skill and says how to update it
/// (format 7), each reported match moves its players' win skill (`outcome_skill`) at once, as
/// the artifact's live update gives it on the matches the service wrote to the lake, read back
/// in start order (the continued retrain's reading of them).
#[test]
fn reported_matches_move_the_win_skill() {
    let s = setup_with(committed_newest());
    assert!(s.art.skill.win_update.is_some());
    let (_server, addr, _) = start(&s, &[]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 30, from, 8);
    let ids = all_ids(&s.art);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let served = rt.block_on(async {
        let mut c = client(&addr).await;
        report_all(&mut c, &reports).await;
        scores(&mut c, &ids).await
    });
    wait_for_rows(&s.lake, 30 * 6);
    // The lake's matches through the library's live update, from the snapshot.
    let mut lake_matches: Vec<mm_artifact::online::FinishedMatch> = Vec::new();
    for f in Lake::open(&s.lake).unwrap().matches_files().unwrap() {
        lake_matches.extend(
            mm_lake::results::read_finished(&f)
                .unwrap()
                .into_iter()
                .map(|(_, m)| m),
        );
    }
    lake_matches.sort_by_key(|m| m.start_ms);
    assert_eq!(lake_matches.len(), 30);
    let mut live = mm_artifact::online::LiveUpdater::new(&s.art).unwrap();
    let mut state: HashMap<String, mm_artifact::snapshot::PlayerState> = HashMap::new();
    for m in &lake_matches {
        let before = m
            .rows
            .iter()
            .map(|row| {
                state
                    .get(&row.player_id)
                    .cloned()
                    .unwrap_or_else(|| s.art.player_or_new(&row.player_id))
            })
            .collect();
        for p in live.apply(m, before) {
            state.insert(p.player_id.clone(), p);
        }
    }
    let mut moved = 0;
    for p in &served {
        let Some(want) = state.get(&p.id) else {
            continue;
        };
        assert_eq!(p.outcome_skill, want.win_skill, "{}", p.id);
        assert_eq!(p.raw_skill, want.raw_skill, "{}", p.id);
        let snapshot = s.art.player_or_new(&p.id).win_skill;
        moved += usize::from((p.outcome_skill - snapshot).abs() > 1e-3);
    }
    assert!(moved >= 40, "{moved} of the players moved");
}

/// A new version promoted while reports flow: the service switches to it only once it has
/// re-applied the lake's matches after the version's lake version, so no player's state goes
/// back in time; the reports after the reload continue from there, and the whole lake replayed
/// from the snapshot gives every player the service's raw skill.
#[test]
fn a_reload_keeps_every_player_current() {
    let s = setup();
    let (_server, addr, _) = start(&s, &[]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 45, from, 5);
    let ids = all_ids(&s.art);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = client(&addr).await;
        report_all(&mut c, &reports[..20]).await;
        wait_for_rows(&s.lake, 20 * 6);
        // Ten more, not all flushed yet when the new version arrives.
        report_all(&mut c, &reports[20..30]).await;
        let before = scores(&mut c, &ids).await;
        // The same snapshot as a new version, fitted (it says) on the lake's first version: the
        // service rebuilds every player from the lake and the log before it switches.
        publish_on_first_version(&s, "v0002");
        let t0 = Instant::now();
        loop {
            let now = c
                .score(proto::ScoreRequest::of_ids(&ids[..1], false))
                .await
                .unwrap()
                .into_inner();
            if now.model_version == "v0002" {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "v0002 not served");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let after = scores(&mut c, &ids).await;
        for (a, b) in before.iter().zip(&after) {
            assert_eq!((a.raw_skill, a.games), (b.raw_skill, b.games), "{}", a.id);
            assert_eq!(a.churn_after_loss, b.churn_after_loss, "{}", a.id);
        }
        report_all(&mut c, &reports[30..]).await;
    });
    wait_for_rows(&s.lake, 45 * 6);
    let batch = batch_skills(&s.art, &s.lake);
    rt.block_on(async {
        let mut c = client(&addr).await;
        for p in scores(&mut c, &ids).await {
            let Some(&(skill, games)) = batch.get(&p.id) else {
                continue;
            };
            assert!((p.raw_skill - skill).abs() <= 1e-12, "{}", p.id);
            assert_eq!(p.games, games, "{}", p.id);
        }
    });
}

/// A retried report is a duplicate however late it comes: after a reload to a model fitted on
/// the lake that holds the match (the ids kept in memory follow the lake, not the model), and
/// for a match older than the kept ids' horizon (asked of the lake). A new match that old is
/// recorded once.
#[test]
fn late_retries_are_duplicates_across_a_reload_and_beyond_the_horizon() {
    let s = setup();
    // Half an hour of ids kept; the matches start five minutes apart.
    let (_server, addr, metrics) = start(&s, &["--dedupe-hours", "0.5"]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 20, from, 11);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = client(&addr).await;
        report_all(&mut c, &reports).await;
        wait_for_rows(&s.lake, 20 * 6);
        // A model fitted on the lake that holds all twenty.
        let (mut m, files) = mm_artifact::synthetic::artifact(60, 3);
        m.data.lake_version = Lake::open(&s.lake).unwrap().version();
        Store::new(&s.models)
            .publish("v0002", m, &files, true, None)
            .unwrap();
        let t0 = Instant::now();
        while c
            .score(proto::ScoreRequest::of_ids(&all_ids(&s.art)[..1], false))
            .await
            .unwrap()
            .into_inner()
            .model_version
            != "v0002"
        {
            assert!(t0.elapsed() < Duration::from_secs(30), "v0002 not served");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for r in &reports {
            let got = c
                .report_match(authed(r.clone()))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(
                got.status,
                proto::ReportStatus::Duplicate as i32,
                "{}",
                r.match_id
            );
        }
        // A new match that started before the horizon: recorded (the lake lacks it), then a
        // duplicate.
        let mut old = matches(&s.art, 1, from - 600_000, 12).remove(0);
        old.match_id = "late-one".into();
        for want in [
            proto::ReportStatus::Recorded,
            proto::ReportStatus::Duplicate,
        ] {
            let got = c
                .report_match(authed(old.clone()))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(got.status, want as i32);
        }
    });
    wait_for_rows(&s.lake, 21 * 6);
    // Each (match, player) once: as many distinct keys as rows.
    assert_eq!(lake_rows(&s.lake).len(), 21 * 6);
    // The latest start is from + 95 minutes, so the horizon begins at from + 65: matches 13 to
    // 19 are answered from memory, the 13 before and the late one's first report from the lake
    // (its retry came before a flush and found it in the log).
    let text = crate::serve::http_get(&metrics);
    assert!(text.contains("mm_serve_lake_lookups_total 14"), "{text}");
    let kept: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("mm_serve_dedupe_ids "))
        .unwrap()
        .parse()
        .unwrap();
    assert!((7..=9).contains(&kept), "{kept} ids kept: {text}");
}

/// Two replicas on one lake, reports split between them: each applies the other's matches from
/// the lake, and once reports stop and the last flush is in, both hold the same state for every
/// player (the lake's commit order: their flushes interleave, so it is not the start order a
/// batch replay uses, and only the match counts are compared with it).
#[test]
fn two_replicas_converge_on_the_lake() {
    let s = setup();
    let wal2 = s.wal.with_file_name("wal2");
    let (_a, addr_a, _) = start_replica(&s, &s.wal, "a", &["--follow-ms", "100"]);
    let (_b, addr_b, _) = start_replica(&s, &wal2, "b", &["--follow-ms", "100"]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 40, from, 9);
    let ids = all_ids(&s.art);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let (mut a, mut b) = (client(&addr_a).await, client(&addr_b).await);
        for (k, r) in reports.iter().enumerate() {
            let c = if k % 2 == 0 { &mut a } else { &mut b };
            report_all(c, std::slice::from_ref(r)).await;
        }
    });
    wait_for_rows(&s.lake, 40 * 6);
    let batch = batch_skills(&s.art, &s.lake);
    rt.block_on(async {
        let (mut a, mut b) = (client(&addr_a).await, client(&addr_b).await);
        let t0 = Instant::now();
        loop {
            let (x, y) = (scores(&mut a, &ids).await, scores(&mut b, &ids).await);
            let same = x
                .iter()
                .zip(&y)
                .all(|(p, q)| (p.raw_skill, p.games) == (q.raw_skill, q.games));
            if same {
                // Both applied every match: each player's match count is the lake's.
                for p in &x {
                    if let Some(&(_, games)) = batch.get(&p.id) {
                        assert_eq!(p.games, games, "{}", p.id);
                    }
                }
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the replicas disagree 20 s after the last flush"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A match recorded by one replica is a duplicate at the other once it followed.
        let dup = b
            .report_match(authed(reports[0].clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(dup.status, proto::ReportStatus::Duplicate as i32);
    });
    let l = Lake::open(&s.lake).unwrap();
    assert_eq!(l.app_transaction("mm-serve/a").unwrap(), Some(20));
    assert_eq!(l.app_transaction("mm-serve/b").unwrap(), Some(20));
}

/// A match reported here and, before the flush, written to the lake by `mm ingest`: the
/// service learns it from the lake's log, writes none of its rows, and still records that its
/// log is in the lake (a flush with the application transaction alone), so a restart does not
/// write it either.
#[test]
fn a_match_ingested_before_the_flush_is_not_written_twice() {
    let s = setup();
    let (server, addr, metrics) = start(&s, &["--flush-s", "600", "--follow-ms", "50"]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 2, from, 13);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = client(&addr).await;
        report_all(&mut c, &reports[..1]).await;
    });
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("m.csv");
    as_csv(&reports[..1], &csv);
    let (code, _, err) = crate::util::mm(&[
        "ingest",
        csv.to_str().unwrap(),
        "--lake",
        s.lake.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    // The service follows the ingest's commit: the pending report is dropped as the lake's.
    let t0 = Instant::now();
    while !crate::serve::http_get(&metrics).contains("mm_serve_pending_matches 0") {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the ingested match is still pending"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    rt.block_on(async {
        let mut c = client(&addr).await;
        let r = c
            .report_match(authed(reports[0].clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.status, proto::ReportStatus::Duplicate as i32);
        report_all(&mut c, &reports[1..]).await;
    });
    // A graceful stop flushes: the second match's rows, and the log's number past the first.
    let pid = server.0.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let mut server = server;
    let t0 = Instant::now();
    while server.0.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rows = lake_rows(&s.lake);
    assert_eq!(rows.len(), 12, "each match's six rows once");
    let l = Lake::open(&s.lake).unwrap();
    assert_eq!(l.app_transaction("mm-serve/r1").unwrap(), Some(2));
    // A restart on the same log writes nothing more.
    let (_again, _, _) = start(&s, &["--flush-s", "0.1"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lake_rows(&s.lake).len(), 12);
}

/// Reports in flight at once while flushes run back to back: every acknowledged match reaches
/// the lake exactly once. (Appends finish in any order; a flush that covered a sequence number
/// whose predecessor was still being applied recorded that predecessor as in the lake, and it
/// never got there: the bench lost 5 of 12,902 matches that way before the fix.)
#[test]
fn concurrent_reports_all_reach_the_lake() {
    let s = setup();
    let (_server, addr, _) = start(&s, &["--flush-s", "0.02", "--flush-matches", "7"]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    let reports = matches(&s.art, 600, from, 17);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = client(&addr).await;
        let chunks: Vec<Vec<proto::ReportMatchRequest>> =
            reports.chunks(20).map(<[_]>::to_vec).collect();
        let tasks: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let mut c = c.clone();
                tokio::spawn(async move { report_all(&mut c, &chunk).await })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    wait_for_rows(&s.lake, 600 * 6);
    assert_eq!(lake_rows(&s.lake).len(), 600 * 6);
}

/// A flush per match past Delta's checkpoint interval: the service checkpoints the log at
/// version 100, a service started afresh on the lake reads it through the checkpoint, and its
/// players equal the batch replay of the lake (the matches were flushed in start order).
#[test]
fn frequent_flushes_checkpoint_the_log() {
    let s = setup();
    // Fitted (it says) on the lake's first version, the one the service creates: a restart
    // rebuilds every player from the lake after it.
    publish_on_first_version(&s, "v0002");
    let (server, addr, _) = start(&s, &["--flush-s", "0.01", "--flush-matches", "1"]);
    let from = s.art.manifest.snapshot_as_of_ms + 3_600_000;
    // The lake's first versions create the tables; one flush per match after that.
    let reports = matches(&s.art, 105, from, 23);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut c = client(&addr).await;
        // One reader moved forward by the new log entries only, as the service's follower is:
        // opening the lake at each poll read every version's entry again (until the
        // checkpoint), about a third of this test's time.
        let mut lake = Lake::open(&s.lake).unwrap();
        for (k, r) in reports.iter().enumerate() {
            report_all(&mut c, std::slice::from_ref(r)).await;
            let t0 = Instant::now();
            while lake.app_transaction("mm-serve/r1").unwrap() != Some(k as i64 + 1) {
                assert!(
                    t0.elapsed() < Duration::from_secs(20),
                    "report {k} not flushed"
                );
                tokio::time::sleep(Duration::from_millis(5)).await;
                lake.refresh().unwrap();
            }
        }
    });
    let l = Lake::open(&s.lake).unwrap();
    let top = l.version().unwrap();
    assert!(top >= 105, "{top} versions");
    let log = s.lake.join("matches").join("_delta_log");
    assert!(
        log.join(format!("{:020}.checkpoint.parquet", 100)).exists(),
        "no checkpoint at version 100 in {}",
        log.display()
    );
    let last: serde_json::Value =
        serde_json::from_slice(&std::fs::read(log.join("_last_checkpoint")).unwrap()).unwrap();
    assert_eq!(last["version"], 100, "{last}");
    // The service's players, then a new process's, which opens the lake through the checkpoint
    // and rebuilds every player: both equal the batch replay.
    let batch = batch_skills(&s.art, &s.lake);
    let check = |addr: &str| {
        rt.block_on(async {
            let mut c = client(addr).await;
            let players = scores(&mut c, &all_ids(&s.art)).await;
            let mut seen = 0;
            for p in players {
                let Some(&(skill, games)) = batch.get(&p.id) else {
                    continue;
                };
                assert!(
                    (p.raw_skill - skill).abs() <= 1e-12,
                    "{}: service {} batch {skill}",
                    p.id,
                    p.raw_skill
                );
                assert_eq!(p.games, games, "{}", p.id);
                seen += 1;
            }
            assert_eq!(seen, batch.len());
        });
    };
    check(&addr);
    drop(server);
    let (_again, addr, _) = start(&s, &[]);
    check(&addr);
}

/// A CA, a certificate it signs (for `cn`, with the given subjectAltName) and its key, made by
/// the `openssl` command line in `dir`: `(ca.pem, cert.pem, key.pem)`.
fn openssl_pki(dir: &Path, name: &str, cn: &str, san: &str) -> (PathBuf, PathBuf, PathBuf) {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs (Debian's openssl package)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let (ca, ca_key) = (format!("{name}-ca.pem"), format!("{name}-ca.key"));
    let (cert, key, csr) = (
        format!("{name}.pem"),
        format!("{name}.key"),
        format!("{name}.csr"),
    );
    let ext = format!("{name}.ext");
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &ca_key,
        "-out",
        &ca,
        "-days",
        "2",
        "-subj",
        &format!("/CN={name} CA"),
    ]);
    run(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        &key,
        "-out",
        &csr,
        "-subj",
        &format!("/CN={cn}"),
    ]);
    std::fs::write(dir.join(&ext), format!("subjectAltName={san}\n")).unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &cert,
        "-days",
        "2",
        "-extfile",
        &ext,
    ]);
    (dir.join(ca), dir.join(cert), dir.join(key))
}

/// `mm serve --tls-cert --tls-key --client-ca` without a token: a client whose certificate the
/// service's CA signed reports a match; one without a certificate, one with a certificate of
/// another CA and a plain-text one get no call through.
#[test]
fn tls_client_certificates_are_a_credential() {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    let s = setup();
    let pki = tempfile::tempdir().unwrap();
    let (server_ca, server_cert, server_key) = openssl_pki(
        pki.path(),
        "server",
        "localhost",
        "DNS:localhost,IP:127.0.0.1",
    );
    let (client_ca, client_cert, client_key) =
        openssl_pki(pki.path(), "client", "game-server-7", "DNS:game-server-7");
    let (_, other_cert, other_key) = openssl_pki(pki.path(), "other", "intruder", "DNS:intruder");
    let mut args: Vec<std::ffi::OsString> = ["--max-seconds", "120", "--replica", "tls"]
        .iter()
        .map(Into::into)
        .collect();
    for (flag, value) in [
        ("--models", s.models.as_os_str()),
        ("--lake", s.lake.as_os_str()),
        ("--wal", s.wal.as_os_str()),
        ("--tls-cert", server_cert.as_os_str()),
        ("--tls-key", server_key.as_os_str()),
        ("--client-ca", client_ca.as_os_str()),
    ] {
        args.extend([flag.into(), value.to_os_string()]);
    }
    let (_server, addr, _) = start_serve(&args, &[]);
    let port = addr.rsplit(':').next().unwrap().to_string();
    let report = matches(&s.art, 1, s.art.manifest.snapshot_as_of_ms + 3_600_000, 31).remove(0);
    // The test's own client picks ring too (the tests link aws-lc as well).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let pem = |p: &Path| std::fs::read(p).unwrap();
        let tls = |id: Option<(&Path, &Path)>| {
            let mut c = ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(pem(&server_ca)))
                .domain_name("localhost");
            if let Some((cert, key)) = id {
                c = c.identity(Identity::from_pem(pem(cert), pem(key)));
            }
            c
        };
        let call = |tls: Option<ClientTlsConfig>| {
            let report = report.clone();
            let url = format!(
                "{}://localhost:{port}",
                if tls.is_some() { "https" } else { "http" }
            );
            async move {
                let mut ep = Channel::from_shared(url).unwrap();
                if let Some(t) = tls {
                    ep = ep.tls_config(t).unwrap();
                }
                let ch = ep.connect().await.map_err(|e| format!("connect: {e:?}"))?;
                MatcherClient::new(ch)
                    .report_match(report)
                    .await
                    .map(tonic::Response::into_inner)
                    .map_err(|e| format!("{e:?}"))
            }
        };
        let ok = call(Some(tls(Some((&client_cert, &client_key)))))
            .await
            .unwrap();
        assert_eq!(ok.status, proto::ReportStatus::Recorded as i32);
        for (what, t) in [
            ("no certificate", Some(tls(None))),
            (
                "another CA's certificate",
                Some(tls(Some((&other_cert, &other_key)))),
            ),
            ("plain text", None),
        ] {
            let e = call(t).await;
            assert!(e.is_err(), "{what}: {e:?}");
        }
    });
    wait_for_rows(&s.lake, 6);
}
