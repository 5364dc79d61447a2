//! # mm-sim: a synthetic player population whose truth is known
//!
//! No public data set has parties, per-player performance, geography, input devices and players
//! who leave and come back all at once, so this crate simulates them and writes the history as a
//! lake in the same schema as ingest, with the hidden truth beside it. The central call is
//! [`simulate`]: a seeded population plays for a number of days through a built-in live
//! matchmaker, and every player-match becomes a lake row and a truth row.
//!
//! The world (each part in its module, every constant exported in `truth/params.json`):
//! - [`world`]: players with a latent skill (standard normal, drifting daily), a region and a
//!   position from a world mix, input device, platform, a preferred local hour, a session rate,
//!   prior experience, and friend groups (1-6 players of correlated skill, same region and mode).
//! - [`matchmaker`]: skill-and-region bucketing with backoff; 6v6 lobbies pass the
//!   Karmarkar-Karp check and are split by `mm-matcher`'s exhaustive balancer.
//! - [`game`]: 6v6 team deathmatch (a kill race to 75 within ten minutes; blowout above a
//!   30-kill margin; late joins, self-kills, assists, and quits whose rate grows with how far
//!   the player's team is behind, a short-handed team taking fewer kills) and a 1v1 with 20%
//!   draws.
//!   Parties play above their members' skill by a bonus that grows with their skill spread.
//! - [`behaviour`]: after each match a player stops with a probability that depends on their
//!   outcomes, blowouts, performance and experience, and comes back after a gap whose
//!   distribution has a closed-form tail, so the exported churn probabilities are exact.
//!
//! Output (all Parquet, one file per day, staged and committed atomically with the lake):
//! `matches/day=*/` (the lake), `truth/player_matches/day=*/` (true skill, party bonus,
//! effective skill, P(win), P(stop), churn probabilities at 8 h, 1 d, 7 d, 14 d, the 8-h churn
//! probability under each outcome (`churn_8h_if_win`, `_draw`, `_loss`: the player's state
//! and the match as they were, with the performance rank a 1v1 outcome decides), and whether the
//! player stopped), `truth/skill_daily/day=*/` (every player's true skill each day),
//! `truth/players.parquet` and `truth/params.json`. The same seed gives byte-identical Parquet.
//!
//! ```no_run
//! let cfg = mm_sim::SimConfig { lake: "out/sim".into(), ..mm_sim::SimConfig::default() };
//! let report = mm_sim::simulate(&cfg).unwrap();
//! println!("{} rows", report.rows);
//! ```

pub mod behaviour;
pub mod game;
pub mod matchmaker;
mod out;
pub mod world;

use std::path::PathBuf;
use std::time::Instant;

use arrow_array::RecordBatch;
use chrono::NaiveDate;
use mm_lake::{Lake, LakeError, PlayerRow};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use serde::Serialize;

use behaviour::{Gap, MatchView};
use matchmaker::{Lobby, Search};
use out::{Col, Day, TruthRow};
pub use out::{HORIZONS_H, RAW_PER_SKILL};
use world::{DEVICES, Mode, PLATFORMS, Player, REGIONS};

/// Party bonus to effective skill: `PARTY_BASE + PARTY_SPREAD * (sd of the members' skills)`
/// for every member of a party of two or more (Dota 2: parties beat solo players of equal
/// skill, the more so the wider their spread).
pub const PARTY_BASE: f64 = 0.06;
pub const PARTY_SPREAD: f64 = 0.18;
/// Daily drift of latent skill (standard deviation).
pub const SKILL_DRIFT_SD: f64 = 0.02;
/// `x` rounded to `1 / per` (100: two decimals), never -0.0: a rating of -0.0004 is written as 0,
/// which every engine reads back the same (pandas' JSON writer drops the sign of a zero).
fn round_to(x: f64, per: f64) -> f64 {
    let r = (x * per).round() / per;
    if r == 0.0 { 0.0 } else { r }
}

/// Standard deviation of the matchmaker's rating error (it never sees true skill).
pub const RATING_ERROR_SD: f64 = 0.35;
/// Probability that a TDM player starting a session waits for friends who are due online soon.
pub const P_PARTY: f64 = 0.8;
/// Friends due online within this many seconds can be pulled into a party (so a pulled
/// friend's return moves earlier by at most this: the exported churn truth stays exact to
/// within the probability of a return falling in that window).
pub const PARTY_PULL_S: i64 = 1800;

/// What to simulate. Build with struct update syntax from `Default`, then [`simulate`]
/// validates it.
#[derive(Debug, Clone, Serialize)]
pub struct SimConfig {
    /// The lake to write (created if missing; it must hold no matches yet).
    pub lake: PathBuf,
    pub seed: u64,
    pub players: usize,
    pub days: u32,
    /// Share of friend groups that play the 1v1 mode (the rest play 6v6).
    pub duel_share: f64,
    /// The first simulated day (UTC).
    #[serde(serialize_with = "as_text")]
    pub start: NaiveDate,
    /// Matchmaker tick, seconds.
    pub tick_s: i64,
}

fn as_text<S: serde::Serializer>(d: &NaiveDate, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(d)
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            lake: PathBuf::from("out/lake"),
            seed: 20_240_601,
            players: 20_000,
            days: 14,
            duel_share: 0.3,
            start: NaiveDate::from_ymd_opt(2024, 1, 1).expect("valid date"),
            tick_s: 15,
        }
    }
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("invalid --{field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("{0}: the lake already holds matches; simulate into a new lake")]
    LakeNotEmpty(PathBuf),
    #[error(transparent)]
    Lake(#[from] LakeError),
    #[error("internal error: {0}")]
    Internal(String),
}

impl SimError {
    /// Bad input (exit code 2) rather than a failure of the run: an invalid setting, a lake
    /// that already holds matches, or a lake that cannot be used as given.
    #[must_use]
    pub fn is_input(&self) -> bool {
        match self {
            SimError::Config { .. } | SimError::LakeNotEmpty(_) => true,
            SimError::Lake(x) => x.is_input(),
            SimError::Internal(_) => false,
        }
    }
}

impl SimConfig {
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |field, reason: &str| {
            Err(SimError::Config {
                field,
                reason: reason.into(),
            })
        };
        if self.players < 12 {
            return bad("players", "at least 12 players are needed for a 6v6 lobby");
        }
        if self.players > 10_000_000 {
            return bad("players", "at most 10,000,000");
        }
        if self.days == 0 || self.days > 3650 {
            return bad("days", "between 1 and 3650");
        }
        if !(0.0..=1.0).contains(&self.duel_share) {
            return bad("duel-share", "a share in [0, 1]");
        }
        if !(1..=3600).contains(&self.tick_s) {
            return bad("tick-s", "between 1 and 3600 seconds");
        }
        Ok(())
    }
}

/// What a simulation did.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub run_id: String,
    pub config: SimConfig,
    pub matches_tdm: u64,
    pub matches_duel: u64,
    pub rows: u64,
    pub seconds: f64,
    pub rows_per_s: f64,
    pub peak_rss_bytes: Option<u64>,
}

enum Event {
    Start { player: u32, epoch: u32 },
    Requeue(Search),
}

/// The state of a running simulation.
struct Sim {
    rng: ChaCha8Rng,
    players: Vec<Player>,
    ids: Vec<String>,
    rating_error: Vec<f64>,
    groups: Vec<(u32, u32)>,
    /// Calendar queue: the events due at each tick, in the order they were scheduled.
    buckets: Vec<Vec<Event>>,
    tick_s: i64,
    calendar: behaviour::Calendar,
    queues: [Vec<Search>; 2],
    next_party: u64,
    matches: [u64; 2],
    origin_ms: i64,
    source: String,
}

/// Runs the simulation and commits the lake and the truth in one transaction.
pub fn simulate(cfg: &SimConfig) -> Result<SimReport, SimError> {
    cfg.validate()?;
    let t0 = Instant::now();
    let lake = Lake::open_or_create(&cfg.lake)?;
    lake.recover()?;
    if !lake.match_entries().is_empty() {
        return Err(SimError::LakeNotEmpty(cfg.lake.clone()));
    }
    let run_id = format!(
        "sim-s{}-{}",
        cfg.seed,
        chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ")
    );
    // File names inside the lake do not carry the timestamp, so a seed always writes the same
    // paths as well as the same bytes.
    let file_tag = format!("sim-s{}", cfg.seed);
    let mut txn = lake.begin(&run_id)?;
    let mut sim = Sim::new(cfg);
    let end_s = i64::from(cfg.days) * 86_400;
    // Parquet encoding and compression run on a second thread, a day behind the simulation.
    let (tx, rx) = std::sync::mpsc::sync_channel::<(PathBuf, RecordBatch)>(4);
    let (rows, written) = std::thread::scope(|scope| {
        let txn = &mut txn;
        let writer = scope.spawn(move || -> Result<(), SimError> {
            for (rel, batch) in rx {
                txn.write_parquet(&rel, &[batch])?;
            }
            Ok(())
        });
        let send = |files: Vec<(PathBuf, RecordBatch)>| -> Result<(), SimError> {
            for f in files {
                tx.send(f)
                    .map_err(|_| SimError::Internal("the Parquet writer stopped".into()))?;
            }
            Ok(())
        };
        let simulated = (|| -> Result<u64, SimError> {
            let mut day = Day::new(sim.day_number(0));
            send(sim.skill_day(0, &file_tag)?)?;
            let mut rows = 0u64;
            let mut now = 0i64;
            let mut meter =
                mm_run::progress::Meter::new("simulate", "days", Some(u64::from(cfg.days)));
            while now < end_s {
                if sim.day_number(now) != day.day {
                    rows += day.n as u64;
                    meter.add(1);
                    let done = std::mem::replace(&mut day, Day::new(sim.day_number(now)));
                    send(done.finish(&file_tag)?)?;
                    sim.drift();
                    send(sim.skill_day(now / 86_400, &file_tag)?)?;
                }
                sim.release_events(now);
                for mode in [Mode::Tdm, Mode::Duel] {
                    let q = &mut sim.queues[mode as usize];
                    for lobby in matchmaker::tick(now, mode, q) {
                        sim.play(lobby, now, &mut day);
                    }
                }
                now += cfg.tick_s;
            }
            rows += day.n as u64;
            meter.add(1);
            meter.finish();
            send(day.finish(&file_tag)?)?;
            Ok(rows)
        })();
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(SimError::Internal("the Parquet writer panicked".into())));
        (simulated, written)
    });
    // A writer error explains a failed send, so it is reported first.
    written?;
    let rows = rows?;
    sim.write_players(&mut txn)?;
    let params = serde_json::json!({
        "config": cfg,
        "behaviour": behaviour::COEF,
        "constants": {
            "party_base": PARTY_BASE, "party_spread": PARTY_SPREAD,
            "skill_drift_sd": SKILL_DRIFT_SD, "rating_error_sd": RATING_ERROR_SD, "p_party": P_PARTY, "party_pull_s": PARTY_PULL_S,
            "raw_skill_per_unit": RAW_PER_SKILL,
            "tdm_target": game::TDM_TARGET, "tdm_limit_s": game::TDM_LIMIT_S,
            "blowout_diff": game::BLOWOUT_DIFF, "kill_interval_s": game::KILL_INTERVAL_S,
            "kill_logit_per_skill": game::KILL_LOGIT_PER_SKILL, "form_sd": game::FORM_SD,
            "quit_base_per_min": game::QUIT_BASE_PER_MIN, "quit_deficit_kills": game::QUIT_DEFICIT_KILLS,
            "late_join_p": game::LATE_JOIN_P,
            "duel_draw": game::DUEL_DRAW, "duel_k": game::DUEL_K,
            "gap_quick_share": behaviour::R_QUICK, "gap_quick_mean_s": behaviour::QUICK_MEAN_S,
            "gap_long_mean_s": behaviour::LONG_MEAN_S, "gap_min_daily_s": behaviour::MIN_DAILY_S,
            "gap_daily_jitter_s": behaviour::DAILY_JITTER_S,
            "churn_horizons_h": HORIZONS_H,
        },
    });
    let rel = PathBuf::from("truth/params.json");
    let path = txn.staged_path(&rel)?;
    mm_lake::parquet_io::write_atomic(
        &path,
        &serde_json::to_vec_pretty(&params).unwrap_or_default(),
    )?;
    txn.add_staged(&rel);
    let seconds = t0.elapsed().as_secs_f64();
    let report = SimReport {
        run_id: run_id.clone(),
        config: cfg.clone(),
        matches_tdm: sim.matches[Mode::Tdm as usize],
        matches_duel: sim.matches[Mode::Duel as usize],
        rows,
        seconds,
        rows_per_s: rows as f64 / seconds.max(1e-9),
        peak_rss_bytes: mm_run::peak_rss_bytes(),
    };
    let record = serde_json::json!({ "run_id": run_id, "kind": "simulate", "report": report });
    txn.commit(&record)?;
    Ok(report)
}

impl Sim {
    fn new(cfg: &SimConfig) -> Sim {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let players = world::population(cfg.players, cfg.duel_share, &mut rng);
        let normal = Normal::new(0.0, RATING_ERROR_SD).expect("valid normal");
        let rating_error = (0..players.len())
            .map(|_| normal.sample(&mut rng))
            .collect();
        let mut groups: Vec<(u32, u32)> = Vec::new();
        for (i, p) in players.iter().enumerate() {
            if groups.len() <= p.group as usize {
                groups.push((i as u32, 0));
            }
            groups[p.group as usize].1 += 1;
        }
        let origin_ms = cfg
            .start
            .and_hms_opt(0, 0, 0)
            .expect("midnight")
            .and_utc()
            .timestamp_millis();
        let mut sim = Sim {
            ids: (0..players.len()).map(|i| format!("p{i:07}")).collect(),
            players,
            rating_error,
            groups,
            buckets: (0..=i64::from(cfg.days) * 86_400 / cfg.tick_s)
                .map(|_| Vec::new())
                .collect(),
            tick_s: cfg.tick_s,
            calendar: behaviour::Calendar { seed: cfg.seed },
            queues: [Vec::new(), Vec::new()],
            next_party: 0,
            matches: [0, 0],
            origin_ms,
            source: format!("simulate:seed={}", cfg.seed),
            rng,
        };
        // First sessions: the preferred hour of a day drawn from the player's session rate.
        for i in 0..sim.players.len() {
            let p = &sim.players[i];
            let gap = Gap {
                p_long: 0.0,
                daily_base_s: 0.0,
                skip_day: p.skip_day(),
            };
            let offset = REGIONS[p.region as usize].utc_offset_h * 3600.0;
            let first = (p.pref_hour * 3600.0 - offset).rem_euclid(86_400.0);
            let (cal, group) = (sim.calendar, p.group);
            let t = (first + gap.sample(&mut sim.rng, cal, group, 0.0)) as i64;
            sim.players[i].next_start = t;
            sim.schedule(
                t,
                Event::Start {
                    player: i as u32,
                    epoch: 0,
                },
            );
        }
        sim
    }

    fn day_number(&self, now: i64) -> i32 {
        mm_lake::schema::day_of(self.origin_ms + now * 1000)
    }

    /// Schedules an event for the first tick at or after `at`; events after the last tick are
    /// dropped (the simulation ends before them).
    fn schedule(&mut self, at: i64, ev: Event) {
        let tick = (at.max(0) + self.tick_s - 1) / self.tick_s;
        if let Some(b) = self.buckets.get_mut(tick as usize) {
            b.push(ev);
        }
    }

    /// Session starts and requeues that are due join the queues.
    fn release_events(&mut self, now: i64) {
        let due = std::mem::take(&mut self.buckets[(now / self.tick_s) as usize]);
        for ev in due {
            match ev {
                Event::Start { player, epoch } => {
                    let p = &self.players[player as usize];
                    if p.epoch == epoch && !p.in_session {
                        self.start_session(player, now);
                    }
                }
                Event::Requeue(mut s) => {
                    s.enter_s = now;
                    self.queues[s.mode as usize].push(s);
                }
            }
        }
    }

    fn rating(&self, p: u32) -> f64 {
        self.players[p as usize].skill + self.rating_error[p as usize]
    }

    /// A player starts a session, in TDM sometimes with friends who are offline.
    fn start_session(&mut self, player: u32, now: i64) {
        let mut members = vec![player];
        let p = &self.players[player as usize];
        let mode = p.mode;
        if mode == Mode::Tdm && self.rng.random::<f64>() < P_PARTY {
            let (start, len) = self.groups[p.group as usize];
            let mut friends: Vec<u32> = (start..start + len)
                .filter(|&f| {
                    let q = &self.players[f as usize];
                    f != player && !q.in_session && q.next_start <= now + PARTY_PULL_S
                })
                .collect();
            friends.shuffle(&mut self.rng);
            members.extend(friends.into_iter().take(5));
        }
        for &m in &members {
            let q = &mut self.players[m as usize];
            q.in_session = true;
            q.next_start = i64::MAX;
            q.session_matches = 0;
            q.epoch += 1;
        }
        let party_id = (members.len() > 1).then(|| {
            self.next_party += 1;
            self.next_party
        });
        let rating_sum = members.iter().map(|&m| self.rating(m)).sum();
        self.queues[mode as usize].push(Search {
            region: self.players[player as usize].region,
            members,
            party_id,
            mode,
            rating_sum,
            enter_s: now,
        });
    }

    fn drift(&mut self) {
        let normal = Normal::new(0.0, SKILL_DRIFT_SD).expect("valid normal");
        for p in &mut self.players {
            p.skill += normal.sample(&mut self.rng);
        }
    }

    /// Plays a lobby: the game, the rows, and each player's decision to stop or go on.
    fn play(&mut self, lobby: Lobby, now: i64, day: &mut Day) {
        let mode = lobby.searches[0].0.mode;
        self.matches[mode as usize] += 1;
        let match_id = format!(
            "{}-{:010}",
            if mode == Mode::Tdm { "tdm" } else { "duel" },
            self.matches[0] + self.matches[1]
        );
        let (slots, who) = self.seat(&lobby);
        let res = match mode {
            Mode::Tdm => game::tdm(&slots, &mut self.rng),
            Mode::Duel => game::duel(&slots, &mut self.rng),
        };
        let end = now + res.duration_s.ceil() as i64;
        // Performance rank in the lobby by kills minus deaths.
        let perf = res.perf_ranks();
        let server = &REGIONS[lobby.server as usize];
        let mut continuing: Vec<Vec<u32>> = vec![Vec::new(); lobby.searches.len()];
        let start_ms = self.origin_ms + now * 1000;
        for (i, &(m, k, bonus)) in who.iter().enumerate() {
            let team = slots[i].team;
            let outcome = res.outcome(team);
            let perf_pct = perf[i];
            let rating = self.rating(m);
            let p = &mut self.players[m as usize];
            let churn_8h_if = churn_8h_if(p, mode, perf_pct, res.blowout(), end);
            p.record(outcome);
            let view = MatchView {
                outcome,
                blowout_loss: outcome == 2 && res.blowout(),
                perf_pct,
            };
            let p_stop = behaviour::p_stop(p, &view);
            let gap = Gap::new(p, end as f64);
            let churn = HORIZONS_H.map(|h| p_stop * gap.tail(h * 3600.0));
            let stopped = self.rng.random::<f64>() < p_stop;
            let ping = 12.0
                + world::distance_km(p.lat, p.lon, server.lat, server.lon) / 90.0
                + -8.0 * (1.0 - self.rng.random::<f64>()).ln();
            let seat = Seat {
                match_id: &match_id,
                mode,
                start_ms,
                team,
                outcome,
                line: &res.lines[i],
                res: &res,
                party_id: lobby.searches[k].0.party_id,
                ping,
                rating,
            };
            let row = seat.row(p, &self.ids[m as usize]);
            let tdm = mode == Mode::Tdm;
            let p_team = if team == 0 {
                res.p_team0
            } else {
                1.0 - res.p_team0
            };
            let truth = TruthRow {
                match_id: &match_id,
                player_id: &self.ids[m as usize],
                mode: mode.name(),
                start_ms,
                true_skill: p.skill,
                party_bonus: bonus,
                effective_skill: slots[i].eff,
                rating,
                p_win: (!tdm).then_some(if team == 0 {
                    res.p_team0
                } else {
                    (1.0 - game::DUEL_DRAW) - res.p_team0
                }),
                kill_share: tdm.then_some(p_team),
                p_stop,
                p_long: gap.p_long,
                churn,
                churn_8h_if,
                stopped,
            };
            day.push(&row, &truth, &self.source);
            if stopped {
                self.stop(m, end, &gap);
            } else {
                continuing[k].push(m);
            }
        }
        self.requeue(&lobby, continuing, mode, end);
    }

    /// The lobby's slots in team order (team 0's searches, then team 1's), each player's
    /// effective skill (skill, party bonus, a draw of form), and who sits in each: (player,
    /// search, party bonus).
    fn seat(&mut self, lobby: &Lobby) -> (Vec<game::Slot>, Vec<(u32, usize, f64)>) {
        let mut order: Vec<usize> = (0..lobby.searches.len()).collect();
        order.sort_by_key(|&k| lobby.searches[k].1);
        let form = Normal::new(0.0, game::FORM_SD).expect("valid normal");
        let mut slots = Vec::new();
        let mut who: Vec<(u32, usize, f64)> = Vec::new(); // (player, search, party bonus)
        for &k in &order {
            let (s, team) = &lobby.searches[k];
            let bonus = if s.members.len() >= 2 {
                let sk: Vec<f64> = s
                    .members
                    .iter()
                    .map(|&m| self.players[m as usize].skill)
                    .collect();
                let mean = sk.iter().sum::<f64>() / sk.len() as f64;
                let sd =
                    (sk.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / sk.len() as f64).sqrt();
                PARTY_BASE + PARTY_SPREAD * sd
            } else {
                0.0
            };
            for &m in &s.members {
                let eff = self.players[m as usize].skill + bonus + form.sample(&mut self.rng);
                slots.push(game::Slot { team: *team, eff });
                who.push((m, k, bonus));
            }
        }
        (slots, who)
    }

    /// A player who stopped: out of session until the gap drawn for them ends.
    fn stop(&mut self, m: u32, end: i64, gap: &Gap) {
        let p = &mut self.players[m as usize];
        p.in_session = false;
        p.session_matches = 0;
        p.epoch += 1;
        let epoch = p.epoch;
        let back = end
            + gap
                .sample(&mut self.rng, self.calendar, p.group, end as f64)
                .ceil() as i64;
        p.next_start = back;
        self.schedule(back, Event::Start { player: m, epoch });
    }

    /// The players who go on queue again, with their party when two or more of it go on, after
    /// a short pause.
    fn requeue(&mut self, lobby: &Lobby, continuing: Vec<Vec<u32>>, mode: Mode, end: i64) {
        for (k, members) in continuing.into_iter().enumerate() {
            if members.is_empty() {
                continue;
            }
            let s = &lobby.searches[k].0;
            let party_id = if members.len() >= 2 { s.party_id } else { None };
            let rating_sum = members.iter().map(|&m| self.rating(m)).sum();
            let search = Search {
                region: self.players[members[0] as usize].region,
                members,
                party_id,
                mode,
                rating_sum,
                enter_s: 0,
            };
            let delay = self.rng.random_range(20..60);
            self.schedule(end + delay, Event::Requeue(search));
        }
    }

    fn skill_day(&self, d: i64, tag: &str) -> Result<Vec<(PathBuf, RecordBatch)>, SimError> {
        let b = out::batch(vec![
            Col::Str("player_id", self.ids.clone()),
            Col::F64("true_skill", self.players.iter().map(|p| p.skill).collect()),
        ])?;
        let rel = PathBuf::from("truth/skill_daily")
            .join(mm_lake::schema::day_dir_name(self.day_number(d * 86_400)))
            .join(format!("part-{tag}-0.parquet"));
        Ok(vec![(rel, b)])
    }

    fn write_players(&self, txn: &mut mm_lake::Txn) -> Result<(), SimError> {
        let ps = &self.players;
        let b = out::batch(vec![
            Col::Str("player_id", self.ids.clone()),
            Col::Str(
                "region",
                ps.iter()
                    .map(|p| REGIONS[p.region as usize].name.to_string())
                    .collect(),
            ),
            Col::F64("lat", ps.iter().map(|p| p.lat).collect()),
            Col::F64("lon", ps.iter().map(|p| p.lon).collect()),
            Col::Str(
                "input_device",
                ps.iter()
                    .map(|p| DEVICES[p.device as usize].to_string())
                    .collect(),
            ),
            Col::Str(
                "platform",
                ps.iter()
                    .map(|p| PLATFORMS[p.platform as usize].to_string())
                    .collect(),
            ),
            Col::Str(
                "mode",
                ps.iter().map(|p| p.mode.name().to_string()).collect(),
            ),
            Col::I64(
                "friend_group",
                ps.iter().map(|p| i64::from(p.group)).collect(),
            ),
            Col::F64("skill_start", ps.iter().map(|p| p.skill_start).collect()),
            Col::F64("skill_end", ps.iter().map(|p| p.skill).collect()),
            Col::F64("rating_error", self.rating_error.clone()),
            Col::F64("quit_base", ps.iter().map(|p| p.quit_base).collect()),
            Col::F64(
                "sessions_per_day",
                ps.iter().map(|p| p.sessions_per_day).collect(),
            ),
            Col::F64("pref_hour_local", ps.iter().map(|p| p.pref_hour).collect()),
            Col::I64(
                "prior_games",
                ps.iter().map(|p| i64::from(p.prior_games)).collect(),
            ),
            Col::I64("games_end", ps.iter().map(|p| i64::from(p.games)).collect()),
        ])?;
        txn.write_parquet(&PathBuf::from("truth/players.parquet"), &[b])?;
        Ok(())
    }
}

/// The player's 8-h churn under each outcome, all else as it was (a loss is a blowout if this
/// match was one; then a close and a blowout loss) except what the outcome decides: in a 1v1
/// the performance rank (see `behaviour::perf_if`).
fn churn_8h_if(p: &Player, mode: Mode, perf_pct: f64, blown: bool, end: i64) -> [f64; 5] {
    [(0u8, false), (1, false), (2, blown), (2, false), (2, true)].map(|(o, blowout)| {
        let mut q = p.clone();
        q.record(o);
        let view = MatchView {
            outcome: o,
            blowout_loss: blowout,
            perf_pct: behaviour::perf_if(mode, o, perf_pct),
        };
        behaviour::p_stop(&q, &view) * Gap::new(&q, end as f64).tail(HORIZONS_H[0] * 3600.0)
    })
}

/// One seat of a played match: what its lake row needs besides the player.
struct Seat<'a> {
    match_id: &'a str,
    mode: Mode,
    start_ms: i64,
    team: usize,
    outcome: u8,
    line: &'a game::Line,
    res: &'a game::Result,
    party_id: Option<u64>,
    ping: f64,
    rating: f64,
}

impl<'a> Seat<'a> {
    /// The player's row in the lake (the canonical columns the simulator fills).
    fn row(&self, p: &Player, player_id: &'a str) -> PlayerRow<'a> {
        let Seat {
            match_id,
            mode,
            start_ms,
            team,
            outcome,
            line,
            res,
            ping,
            rating,
            ..
        } = *self;
        let outcome_v = [
            mm_lake::schema::Outcome::Win,
            mm_lake::schema::Outcome::Draw,
            mm_lake::schema::Outcome::Loss,
        ][outcome as usize];
        let tdm = mode == Mode::Tdm;
        PlayerRow {
            match_id: match_id.into(),
            mode: mode.name().into(),
            start_ms,
            team: team as i32 + 1,
            player_id: player_id.into(),
            outcome: Some(outcome_v),
            end_ms: Some(start_ms + (res.duration_s * 1000.0) as i64),
            seconds_played: Some(line.seconds_played(res.duration_s).round()),
            party_id: self.party_id.map(|id| format!("party-{id}").into()),
            kills: tdm.then_some(line.kills),
            deaths: tdm.then_some(line.deaths_by_enemy + line.self_kills),
            deaths_by_enemy: tdm.then_some(line.deaths_by_enemy),
            self_kills: tdm.then_some(line.self_kills),
            assists: tdm.then_some(line.assists),
            score: Some(if tdm {
                line.score()
            } else {
                f64::from(res.team_score[team])
            }),
            team_score: Some(f64::from(res.team_score[team])),
            quit_early: tdm.then_some(line.quit_early),
            input_device: Some(DEVICES[p.device as usize].into()),
            platform: Some(PLATFORMS[p.platform as usize].into()),
            region: Some(REGIONS[p.region as usize].name.into()),
            lat: Some(round_to(p.lat, 100.0)),
            lon: Some(round_to(p.lon, 100.0)),
            ping_ms: Some(ping.round()),
            rating: Some(round_to(rating, 1000.0)),
            ..PlayerRow::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::round_to;

    /// A value that rounds to zero is written as +0, whatever its sign before.
    #[test]
    fn rounding_never_writes_a_negative_zero() {
        for x in [-0.0004, -0.0, 0.0004, -1e-12] {
            let r = round_to(x, 1000.0);
            assert!(r == 0.0 && r.is_sign_positive(), "{x} -> {r}");
        }
        assert_eq!(round_to(-0.1234, 1000.0), -0.123);
        assert_eq!(round_to(52.1849, 100.0), 52.18);
    }
}
