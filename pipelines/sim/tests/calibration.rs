//! The simulator's defaults against published figures, measured from the lake and truth files it
//! writes (one shared simulation: 30,000 players over 28 days, seed 20240601). Each test names
//! its source, the published figure and the tolerance.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, TimestampMillisecondType};
use arrow_array::{Array, RecordBatch};
use mm_lake::parquet_io::read_parquet_columns;
use mm_sim::{RAW_PER_SKILL, SimConfig, simulate};

/// One player-match, joined from the lake and the truth (same order, file by file).
#[derive(Debug, Clone)]
struct Row {
    match_no: u32,
    player: u32,
    duel: bool,
    start_s: i64,
    team: i32,
    /// 0 win, 1 draw, 2 loss.
    outcome: u8,
    party: bool,
    true_skill: f64,
    party_bonus: f64,
    kill_share: f64,
    churn_8h: f64,
    /// The 8-h churn had the match ended in a win, a draw, a loss (a blowout if it was one), a
    /// close loss, a blowout loss.
    churn_8h_if: [f64; 5],
}

struct World {
    _dir: tempfile::TempDir,
    rows: Vec<Row>,
    end_s: i64,
    /// For each row, the start of the same player's next match (None: none before the end).
    next_start: Vec<Option<i64>>,
}

/// The day files below `dir` (a simulated lake writes one per day, so the Delta log's list and
/// the directory agree; `_delta_log/` is skipped).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for day in std::fs::read_dir(dir).unwrap() {
        let day = day.unwrap();
        if day.file_name().to_string_lossy().starts_with('_') {
            continue;
        }
        for f in std::fs::read_dir(day.path()).unwrap() {
            out.push(f.unwrap().path());
        }
    }
    out.sort();
    out
}

fn concat(path: &Path, cols: &[&str]) -> RecordBatch {
    let b = read_parquet_columns(path, Some(cols)).unwrap();
    arrow_select::concat::concat_batches(&b[0].schema(), &b).unwrap()
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let cfg = SimConfig {
            lake: dir.path().join("lake"),
            seed: 20_240_601,
            players: 30_000,
            days: 28,
            ..SimConfig::default()
        };
        simulate(&cfg).unwrap();
        let lake = cfg.lake.clone();
        let m_files = files(&lake.join("matches"));
        let t_files = files(&lake.join("truth/player_matches"));
        assert_eq!(m_files.len(), t_files.len());
        let mut rows = Vec::new();
        let mut match_ids: BTreeMap<String, u32> = BTreeMap::new();
        for (mf, tf) in m_files.iter().zip(&t_files) {
            let m = concat(
                mf,
                &[
                    "match_id",
                    "mode",
                    "start_time",
                    "team",
                    "player_id",
                    "outcome",
                    "party_id",
                ],
            );
            let t = concat(
                tf,
                &[
                    "true_skill",
                    "party_bonus",
                    "kill_share",
                    "churn_8h",
                    "churn_8h_if_win",
                    "churn_8h_if_draw",
                    "churn_8h_if_loss",
                    "churn_8h_if_close_loss",
                    "churn_8h_if_blowout_loss",
                ],
            );
            assert_eq!(
                m.num_rows(),
                t.num_rows(),
                "{} vs {}",
                mf.display(),
                tf.display()
            );
            // A projection keeps the file's column order: look columns up by name.
            let col = |b: &RecordBatch, name: &str| b.column_by_name(name).unwrap().clone();
            let (mid, mode, start, team, pid, outcome, party) = (
                col(&m, "match_id"),
                col(&m, "mode"),
                col(&m, "start_time"),
                col(&m, "team"),
                col(&m, "player_id"),
                col(&m, "outcome"),
                col(&m, "party_id"),
            );
            let (mid, mode, pid, outcome) = (
                mid.as_string::<i32>(),
                mode.as_string::<i32>(),
                pid.as_string::<i32>(),
                outcome.as_string::<i32>(),
            );
            let start = start.as_primitive::<TimestampMillisecondType>();
            let team = team.as_primitive::<Int32Type>();
            let f = |name: &str| col(&t, name).as_primitive::<Float64Type>().clone();
            let (skill, bonus, share, churn) = (
                f("true_skill"),
                f("party_bonus"),
                f("kill_share"),
                f("churn_8h"),
            );
            let churn_if = [
                f("churn_8h_if_win"),
                f("churn_8h_if_draw"),
                f("churn_8h_if_loss"),
                f("churn_8h_if_close_loss"),
                f("churn_8h_if_blowout_loss"),
            ];
            for i in 0..m.num_rows() {
                let n = match_ids.len() as u32;
                let match_no = *match_ids.entry(mid.value(i).to_string()).or_insert(n);
                rows.push(Row {
                    match_no,
                    player: pid.value(i)[1..].parse().unwrap(),
                    duel: mode.value(i) == "duel-1v1",
                    start_s: start.value(i) / 1000,
                    team: team.value(i),
                    outcome: match outcome.value(i) {
                        "win" => 0,
                        "draw" => 1,
                        _ => 2,
                    },
                    party: party.is_valid(i),
                    true_skill: skill.value(i),
                    party_bonus: bonus.value(i),
                    kill_share: if share.is_valid(i) {
                        share.value(i)
                    } else {
                        f64::NAN
                    },
                    churn_8h: churn.value(i),
                    churn_8h_if: [0, 1, 2, 3, 4].map(|o| churn_if[o].value(i)),
                });
            }
        }
        let end_s = rows.iter().map(|r| r.start_s).max().unwrap();
        // Next match of the same player.
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| (rows[i].player, rows[i].start_s, i));
        let mut next_start = vec![None; rows.len()];
        for w in order.windows(2) {
            if rows[w[0]].player == rows[w[1]].player {
                next_start[w[0]] = Some(rows[w[1]].start_s);
            }
        }
        World {
            _dir: dir,
            rows,
            end_s,
            next_start,
        }
    })
}

/// Per player, their rows in time order.
fn by_player(w: &World, duel: bool) -> BTreeMap<u32, Vec<usize>> {
    let mut m: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, r) in w.rows.iter().enumerate() {
        if r.duel == duel {
            m.entry(r.player).or_default().push(i);
        }
    }
    for v in m.values_mut() {
        v.sort_by_key(|&i| (w.rows[i].start_s, i));
    }
    m
}

/// The fraction of matches (at least `h` hours before the end of the data) after which the
/// player plays no match for `h` hours, among the rows `keep` selects.
fn churn(w: &World, h: f64, keep: impl Fn(usize) -> bool) -> (f64, usize) {
    let hs = (h * 3600.0) as i64;
    let (mut n, mut k) = (0usize, 0usize);
    for i in 0..w.rows.len() {
        if w.rows[i].start_s + hs > w.end_s || !keep(i) {
            continue;
        }
        n += 1;
        if w.next_start[i].is_none_or(|s| s - w.rows[i].start_s >= hs) {
            k += 1;
        }
    }
    (k as f64 / n.max(1) as f64, n)
}

/// The conditional truth an oracle pairs on agrees with the realised one: for every row, the
/// churn under the outcome that happened is the exported churn; and in both modes a loss makes
/// stopping likelier than a win for the same player at the same moment (the stop model's
/// coefficients, +0.30 and -0.15 on the logit scale).
#[test]
fn conditional_churn_truth_agrees_with_the_realised_outcome() {
    let w = world();
    let (mut loss_above_win, mut blown) = (0usize, 0usize);
    for r in &w.rows {
        let c = r.churn_8h_if[r.outcome as usize];
        assert!((c - r.churn_8h).abs() < 1e-12, "{r:?}");
        assert!(
            r.churn_8h_if.iter().all(|p| (0.0..=1.0).contains(p)),
            "{r:?}"
        );
        loss_above_win += usize::from(r.churn_8h_if[2] > r.churn_8h_if[0]);
        // The loss of the match is the close or the blowout loss, and a blowout loss makes
        // stopping likelier than a close one (+0.45 on the logit scale).
        let [.., loss, close, blowout] = r.churn_8h_if;
        assert!(loss == close || loss == blowout, "{r:?}");
        assert!(blowout > close, "{r:?}");
        blown += usize::from(!r.duel && loss == blowout);
    }
    assert_eq!(loss_above_win, w.rows.len());
    // Some 6v6 matches were blowouts, so the realised loss column holds both kinds.
    assert!(blown > 0);
}

#[test]
fn eomm_section5_one_in_five_1v1_matches_is_a_draw() {
    let w = world();
    let duel: Vec<&Row> = w.rows.iter().filter(|r| r.duel).collect();
    let draws = duel.iter().filter(|r| r.outcome == 1).count() as f64 / duel.len() as f64;
    eprintln!("EOMM 5.2 draws: {draws:.4}");
    assert!(
        (draws - 0.20).abs() < 0.01,
        "EOMM 5.2: 20% draws; simulated {draws:.4}"
    );
}

#[test]
fn eomm_section5_about_48_percent_of_1v1_players_stop_for_eight_hours() {
    let w = world();
    let (rate, n) = churn(w, 8.0, |i| w.rows[i].duel);
    eprintln!("EOMM 5 8-hour stop after a 1v1 match: {rate:.4} over {n}");
    assert!(n > 50_000, "{n} duel matches");
    assert!(
        (rate - 0.48).abs() < 0.03,
        "EOMM 5: ~48% stop for 8 h after a 1v1 match; simulated {rate:.4} over {n}"
    );
}

/// The exported truth is the probability of exactly what the data shows: its mean over the
/// uncensored matches equals the empirical 8-hour churn (both modes).
#[test]
fn truth_churn_probability_matches_the_data() {
    let w = world();
    for duel in [true, false] {
        let keep = |i: usize| w.rows[i].duel == duel && w.rows[i].start_s + 8 * 3600 <= w.end_s;
        let (emp, n) = churn(w, 8.0, keep);
        let truth: f64 = (0..w.rows.len())
            .filter(|&i| keep(i))
            .map(|i| w.rows[i].churn_8h)
            .sum::<f64>()
            / n as f64;
        // 3 standard errors of a proportion over n matches, plus 1 point for the simulation
        // ending (a stop decided just before the end is seen as a return beyond it).
        let tol = 3.0 * (emp * (1.0 - emp) / n as f64).sqrt() + 0.01;
        eprintln!("duel={duel}: 8-hour churn empirical {emp:.4}, truth {truth:.4} (n {n})");
        assert!(
            (emp - truth).abs() < tol,
            "duel={duel}: empirical {emp:.4} vs truth {truth:.4} (n {n})"
        );
    }
}

/// EOMM Table 1: seven-day churn after the last three 1v1 outcomes. LLL 5.1% is about twice the
/// "safe" mixed states (DLW, LLW, LDW, DDD: 2.6-2.7%); WWL (4.9%) and DLL/LWL/LDL (4.6-4.7%)
/// sit in between, WWW (3.7%) between mixed and those.
#[test]
fn eomm_table1_seven_day_churn_by_last_three_outcomes() {
    let w = world();
    let mut pattern: Vec<Option<[u8; 3]>> = vec![None; w.rows.len()];
    for rows in by_player(w, true).values() {
        for k in 2..rows.len() {
            let o = |j: usize| w.rows[rows[j]].outcome;
            // Oldest first, as the table reads: "LLW" ends in a win.
            pattern[rows[k]] = Some([o(k - 2), o(k - 1), o(k)]);
        }
    }
    let code = |s: &str| -> [u8; 3] {
        let b: Vec<u8> = s
            .bytes()
            .map(|c| match c {
                b'W' => 0,
                b'D' => 1,
                _ => 2,
            })
            .collect();
        [b[0], b[1], b[2]]
    };
    let rate = |pats: &[&str]| {
        let set: Vec<[u8; 3]> = pats.iter().map(|p| code(p)).collect();
        churn(w, 24.0 * 7.0, |i| {
            pattern[i].is_some_and(|p| set.contains(&p))
        })
    };
    let (mixed, n_mixed) = rate(&["DLW", "LLW", "LDW", "DDD"]);
    let (lll, n_lll) = rate(&["LLL"]);
    let (wwl, _) = rate(&["WWL"]);
    let (ends_l, _) = rate(&["DLL", "LWL", "LDL"]);
    let (www, _) = rate(&["WWW"]);
    let msg = format!(
        "EOMM Table 1 (7-day churn): mixed 2.6-2.7% -> {:.2}% (n {n_mixed}), WWW 3.7% -> {:.2}%, \
         DLL/LWL/LDL 4.6-4.7% -> {:.2}%, WWL 4.9% -> {:.2}%, LLL 5.1% -> {:.2}% (n {n_lll})",
        100.0 * mixed,
        100.0 * www,
        100.0 * ends_l,
        100.0 * wwl,
        100.0 * lll
    );
    eprintln!("{msg}");
    assert!((0.020..=0.034).contains(&mixed), "{msg}");
    assert!((0.042..=0.062).contains(&lll), "{msg}");
    let ratio = lll / mixed;
    assert!(
        (1.5..=2.6).contains(&ratio),
        "LLL / mixed = {ratio:.2}, published ~1.9; {msg}"
    );
    for (name, x) in [("WWL", wwl), ("DLL/LWL/LDL", ends_l), ("WWW", www)] {
        assert!(
            x > mixed && x < lll + 0.006,
            "{name} should sit between mixed and LLL; {msg}"
        );
    }
    assert!(www < ends_l, "{msg}");
}

/// CoD Figure 2: a 0.1 advantage in team raw-skill sum (one 80th-percentile player in a lobby
/// of 50th-percentile players) gives that team 70+% wins in 6v6 TDM. Measured on the true raw
/// skill (true skill x RAW_PER_SKILL) over matches whose advantage is 0.075-0.125.
#[test]
fn cod_figure2_a_tenth_of_raw_skill_wins_about_seventy_percent() {
    let w = world();
    let mut sums: BTreeMap<(u32, i32), (f64, u8)> = BTreeMap::new();
    for r in w.rows.iter().filter(|r| !r.duel) {
        let e = sums.entry((r.match_no, r.team)).or_insert((0.0, r.outcome));
        e.0 += r.true_skill * RAW_PER_SKILL;
    }
    let (mut n, mut better_won) = (0usize, 0usize);
    let teams: Vec<_> = sums.iter().collect();
    for pair in teams.chunks_exact(2) {
        let (&(m1, _), &(s1, o1)) = pair[0];
        let (&(m2, _), &(s2, _)) = pair[1];
        assert_eq!(m1, m2);
        let d = s1 - s2;
        if (0.075..0.125).contains(&d.abs()) && o1 != 1 {
            n += 1;
            if (d > 0.0) == (o1 == 0) {
                better_won += 1;
            }
        }
    }
    let rate = better_won as f64 / n as f64;
    eprintln!("CoD Figure 2: better team (+0.075..0.125 raw) wins {rate:.4} of {n}");
    assert!(n > 5_000, "{n} matches");
    assert!(
        (0.67..=0.77).contains(&rate),
        "CoD Figure 2: 70+% at +0.1 raw skill; simulated {rate:.3} over {n} matches"
    );
}

/// CoD paper: in five perfectly even games (a coin flipped five times) about 3% of players lose
/// all five. Windows of five consecutive 6v6 matches where the player's team had a kill share
/// within 0.5 +- 0.02; tolerance 3.5 standard errors of the binomial 1/32.
#[test]
fn cod_five_even_games_about_three_percent_lose_all() {
    let w = world();
    let (mut n, mut all_lost) = (0usize, 0usize);
    for rows in by_player(w, false).values() {
        for win in rows.windows(5) {
            if win
                .iter()
                .all(|&i| (w.rows[i].kill_share - 0.5).abs() < 0.02)
            {
                n += 1;
                if win.iter().all(|&i| w.rows[i].outcome == 2) {
                    all_lost += 1;
                }
            }
        }
    }
    let rate = all_lost as f64 / n as f64;
    let p = 1.0 / 32.0;
    let tol = 3.5 * (p * (1.0 - p) / n as f64).sqrt();
    eprintln!("CoD five even games, all lost: {rate:.4} over {n} windows");
    assert!(n > 300, "{n} windows");
    assert!(
        (rate - p).abs() < tol,
        "CoD: ~3% lose five even games; simulated {rate:.4} over {n} windows (tolerance {tol:.4})"
    );
}

/// Dota 2 post: players in parties win more than solo players of equal skill, the more so with a
/// wider skill spread. The matchmaker balances teams by rating, which knows nothing of the party
/// bonus, so teams with wide-spread parties win most, then narrow ones, then all-solo teams.
#[test]
fn dota2_parties_beat_solo_players_more_with_wider_spread() {
    let w = world();
    // Per team: has a party, and the largest party bonus on it.
    let mut teams: BTreeMap<(u32, i32), (bool, f64, u8)> = BTreeMap::new();
    for r in w.rows.iter().filter(|r| !r.duel) {
        let e = teams
            .entry((r.match_no, r.team))
            .or_insert((false, 0.0, r.outcome));
        e.0 |= r.party;
        e.1 = e.1.max(r.party_bonus);
    }
    let median_bonus = {
        let mut b: Vec<f64> = teams.values().filter(|t| t.0).map(|t| t.1).collect();
        b.sort_by(f64::total_cmp);
        b[b.len() / 2]
    };
    let win = |sel: &dyn Fn(&(bool, f64, u8)) -> bool| {
        let v: Vec<_> = teams.values().filter(|t| sel(t)).collect();
        v.iter().filter(|t| t.2 == 0).count() as f64 / v.len() as f64
    };
    let solo = win(&|t| !t.0);
    let narrow = win(&|t| t.0 && t.1 <= median_bonus);
    let wide = win(&|t| t.0 && t.1 > median_bonus);
    let msg = format!(
        "team win rate: all-solo {solo:.3}, party (narrow spread) {narrow:.3}, party (wide spread) {wide:.3}"
    );
    eprintln!("Dota 2 parties: {msg}");
    assert!(solo < narrow && narrow < wide, "{msg}");
    assert!(wide - solo > 0.05, "{msg}");
}
