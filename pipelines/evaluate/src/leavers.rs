//! The team-queue replay with leavers and backfill, on a simulated lake.
//!
//! Each lobby a policy forms plays the simulator's own team deathmatch ([`mm_sim::game::Race`],
//! with the rules `truth/params.json` records): kills by the seats' true effective skills
//! (true skill, party bonus and a draw of the match's form), and players who quit at a rate
//! that grows with how far their team is behind. A quit opens a slot. With backfill, the lobby
//! is offered at once ([`Lobbies::open_backfill`]) and each tick fills open slots from the queue
//! before the policy forms new lobbies ([`tick_with_backfill`], by the policy's backfill rule);
//! a search that joins plays from that moment. Without backfill the slot stays
//! empty. A match ends at the race's end; it finished short-handed when a team was short then.
//! A player still in a match (which began later than their real one) searches again when it
//! ends; a player still queued keeps the older search (superseded, as in the replay without
//! leavers).
//!
//! Figures per policy, with and without backfill: time to fill a slot (from the quit to the
//! join, p50 and p95, beside the new lobbies' median wait), the share of matches finished
//! short-handed, the team size and skill differential after each backfill (and how many
//! backfills worsened the size differential: none may), the true blowout rate, and retention
//! under the truth (each player who played, by their team's result: win, draw, close or blowout
//! loss).
//!
//! Draws: a lobby's race and form use a stream seeded by its lowest search id, so the same
//! lobby plays the same match with and without backfill until a backfill changes it.

use std::collections::{BTreeMap, VecDeque};

use mm_matcher::backfill::{Backfill, Lobbies, LobbyId, tick_with_backfill};
use mm_matcher::cod::CodConfig;
use mm_matcher::queue::{Lobby, LobbyModels, Mode, Queue, Search, SearchId};
use mm_sim::game::{Race, Slot, TdmRules};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::config::EvalConfig;
use crate::error::EvalError;
use crate::history::EvalHistory;
use crate::measures::{Scored, mix};
use crate::results::{LeaverResult, LeaverRun};
use crate::stats::{Moments, welch, wilson};
use crate::team::{Arrival, TEAM_POLICIES, Truth, eomm_config, policy};

/// A match in play: its race and, per race line, the search and seat it is.
struct Playing {
    race: Race,
    rng: ChaCha8Rng,
    start_ms: i64,
    /// (search id, seat index into the history, team) per race line.
    lines: Vec<(SearchId, u32, usize)>,
    /// Players on each team now.
    size: [usize; 2],
    /// The seats of each search still playing, in the order the lobby holds its members.
    members: BTreeMap<SearchId, Vec<u32>>,
    /// When each open slot opened, oldest first.
    open: VecDeque<i64>,
}

/// A player's state in the replay.
const FREE: u8 = 0;
const QUEUED: u8 = 1;
const PLAYING: u8 = 2;

#[derive(Default)]
struct Acc {
    lobbies: u64,
    players: u64,
    backfilled: u64,
    quits: u64,
    fills: Vec<f64>,
    waits: Vec<f64>,
    short: u64,
    size_diff_end: f64,
    backfills: u64,
    size_diff_after: f64,
    skill_diff_after: f64,
    worsened: u64,
    blowouts: u64,
    churn: Moments,
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// What the replay reads.
pub(crate) struct Setup<'a> {
    pub h: &'a EvalHistory,
    pub arr: &'a [Arrival],
    pub sc: &'a Scored,
    pub models: LobbyModels,
    pub team_size: usize,
    pub truth: &'a Truth<'a>,
    pub rules: TdmRules,
    pub form_sd: f64,
}

impl<'a> Setup<'a> {
    pub fn new(
        h: &'a EvalHistory,
        arr: &'a [Arrival],
        sc: &'a Scored,
        models: LobbyModels,
        team_size: usize,
        truth: &'a Truth<'a>,
        (rules, form_sd): (TdmRules, f64),
    ) -> Setup<'a> {
        Setup {
            h,
            arr,
            sc,
            models,
            team_size,
            truth,
            rules,
            form_sd,
        }
    }

    /// Arrival `id` as a search that started at `start_ms`.
    fn search(&self, id: usize, start_ms: i64) -> Search {
        self.arr[id].search(id, start_ms, self.sc)
    }

    fn slot(&self, k: u32, team: usize, rng: &mut ChaCha8Rng) -> Slot {
        let i = k as usize;
        // Box-Muller: the match's form.
        let (u, v): (f64, f64) = (rng.random(), rng.random());
        let z = (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos();
        Slot {
            team,
            eff: self.truth.t.skill[i] + self.truth.t.party_bonus[i] + self.form_sd * z,
        }
    }

    /// The mean percentile of each team's players.
    fn skill_diff(&self, lobbies: &Lobbies, id: LobbyId) -> f64 {
        let Some(l) = lobbies.get(id) else { return 0.0 };
        let mean = |t: usize| {
            let ms: Vec<f64> = l.teams[t]
                .iter()
                .flat_map(|s| s.members.iter().map(|m| m.percentile))
                .collect();
            ms.iter().sum::<f64>() / ms.len().max(1) as f64
        };
        (mean(0) - mean(1)).abs()
    }
}

/// One policy's day in progress.
struct Day<'a> {
    s: &'a Setup<'a>,
    backfill: bool,
    seed: u64,
    tick_ms: i64,
    queue: Queue,
    lobbies: Lobbies,
    playing: BTreeMap<LobbyId, Playing>,
    /// Per player: FREE, QUEUED or PLAYING.
    state: Vec<u8>,
    /// Arrivals waiting for their players' match to end.
    deferred: Vec<usize>,
    /// When each arrival was queued (its search's start), ms.
    queued_at: Vec<i64>,
    superseded: u64,
    acc: Acc,
}

fn lobby_err(e: mm_matcher::backfill::LobbyError) -> EvalError {
    EvalError::Input(e.to_string())
}

impl Day<'_> {
    fn player(&self, k: u32) -> usize {
        self.s.h.searchers[k as usize].player as usize
    }

    fn set(&mut self, k: u32, state: u8) {
        let p = self.player(k);
        self.state[p] = state;
    }

    /// Queues each deferred search none of whose players is queued or playing: a player still
    /// in a match (which began later than their real one) searches when it ends; a player still
    /// queued keeps the older search (superseded, as in the replay without leavers).
    fn admit(&mut self, now: i64) -> Result<(), EvalError> {
        let mut i = 0;
        while i < self.deferred.len() {
            let id = self.deferred[i];
            let seats = &self.s.arr[id].seats;
            let has = |st: u8| seats.iter().any(|&k| self.state[self.player(k)] == st);
            if has(QUEUED) {
                self.superseded += 1;
                self.deferred.swap_remove(i);
            } else if has(PLAYING) {
                i += 1;
            } else {
                for &k in seats {
                    self.set(k, QUEUED);
                }
                // A search that waited for its players' match starts when it ended (this tick).
                let start = self.s.arr[id].start_ms;
                let start = if start > now - self.tick_ms {
                    start
                } else {
                    now
                };
                self.queued_at[id] = start;
                self.queue
                    .push(self.s.search(id, start))
                    .map_err(|e| EvalError::Input(format!("search {id}: {e}")))?;
                self.deferred.swap_remove(i);
            }
        }
        Ok(())
    }

    /// The matches in play advance to `now`: quits open slots, finished matches end.
    fn advance(&mut self, now: i64) -> Result<(), EvalError> {
        let ids: Vec<LobbyId> = self.playing.keys().copied().collect();
        for id in ids {
            let p = self.playing.get_mut(&id).expect("listed above");
            let at = (now - p.start_ms) as f64 / 1e3;
            let mut freed = Vec::new();
            for i in p.race.run_until(at, &mut p.rng) {
                let (search, k, team) = p.lines[i];
                p.size[team] -= 1;
                let seats = p.members.get_mut(&search).expect("a playing search");
                let pos = seats.iter().position(|&x| x == k).expect("a playing seat");
                seats.remove(pos);
                self.lobbies.leave(id, search, pos).map_err(lobby_err)?;
                freed.push(k);
                self.acc.quits += 1;
                p.open.push_back(now);
                if self.backfill {
                    self.lobbies.open_backfill(id, now).map_err(lobby_err)?;
                }
            }
            let over = p.race.over();
            for k in freed {
                self.set(k, FREE);
            }
            if over {
                self.end(id)?;
            }
        }
        Ok(())
    }

    /// Ends match `id`: short-handed or not, blowout or not, each player's true churn by
    /// their team's result.
    fn end(&mut self, id: LobbyId) -> Result<(), EvalError> {
        let t = self.s.team_size;
        let Playing {
            race,
            mut rng,
            lines,
            ..
        } = self.playing.remove(&id).expect("a match in play");
        let l = self.lobbies.close(id).map_err(lobby_err)?;
        let [a, b] = l.players();
        self.acc.short += u64::from(a < t || b < t);
        self.acc.size_diff_end += a.abs_diff(b) as f64;
        let r = race.finish(&mut rng);
        self.acc.blowouts += u64::from(r.blowout());
        for (i, &(_, k, team)) in lines.iter().enumerate() {
            let c = self
                .s
                .truth
                .churn_by_result(k, r.outcome(team), r.blowout());
            self.acc.churn.push(c);
            if !r.lines[i].quit_early {
                self.set(k, FREE);
            }
        }
        Ok(())
    }

    /// The searches a tick's backfills placed join their matches now.
    fn join(&mut self, filled: &[Backfill], now: i64) {
        let mut by_lobby: BTreeMap<LobbyId, Vec<(SearchId, usize)>> = BTreeMap::new();
        for f in filled {
            by_lobby
                .entry(f.lobby)
                .or_default()
                .push((f.search, f.team));
        }
        for (id, joins) in by_lobby {
            let s = self.s;
            let p = self.playing.get_mut(&id).expect("a lobby in play");
            let before = p.size[0].abs_diff(p.size[1]);
            let at = (now - p.start_ms) as f64 / 1e3;
            let mut placed = Vec::new();
            for (search, team) in joins {
                let seats = s.arr[search as usize].seats.clone();
                for &k in &seats {
                    placed.push(k);
                    let slot = s.slot(k, team, &mut p.rng);
                    p.race.join(slot, at);
                    p.lines.push((search, k, team));
                    p.size[team] += 1;
                    let opened = p.open.pop_front().unwrap_or(now);
                    self.acc.fills.push((now - opened) as f64 / 1e3);
                    self.acc.backfilled += 1;
                }
                p.members.insert(search, seats);
            }
            let after = p.size[0].abs_diff(p.size[1]);
            self.acc.backfills += 1;
            self.acc.worsened += u64::from(after > before);
            self.acc.size_diff_after += after as f64;
            self.acc.skill_diff_after += s.skill_diff(&self.lobbies, id);
            for k in placed {
                self.set(k, PLAYING);
            }
        }
    }

    /// A new lobby starts its match now.
    fn start(&mut self, id: LobbyId, l: &Lobby, now: i64) {
        let s = self.s;
        let lowest = l.search_ids().min().unwrap_or(0);
        let mut rng = ChaCha8Rng::seed_from_u64(mix(self.seed, 9, lowest));
        let (mut slots, mut lines, mut members) = (Vec::new(), Vec::new(), BTreeMap::new());
        for (team, ids) in l.teams.iter().enumerate() {
            for &sid in ids {
                let seats = s.arr[sid as usize].seats.clone();
                self.acc
                    .waits
                    .push((now - self.queued_at[sid as usize]) as f64 / 1e3);
                for &k in &seats {
                    slots.push(s.slot(k, team, &mut rng));
                    lines.push((sid, k, team));
                }
                members.insert(sid, seats);
            }
        }
        for &(_, k, _) in &lines {
            self.set(k, PLAYING);
        }
        self.acc.lobbies += 1;
        self.acc.players += slots.len() as u64;
        let size = [0, 1].map(|team| slots.iter().filter(|x| x.team == team).count());
        let race = Race::new(s.rules, &slots, &vec![0.0; slots.len()], &mut rng);
        let open = (slots.len()..2 * s.team_size).map(|_| now).collect();
        let p = Playing {
            race,
            rng,
            start_ms: now,
            lines,
            size,
            members,
            open,
        };
        self.playing.insert(id, p);
    }

    fn figures(mut self, policy: &str) -> (LeaverRun, Moments) {
        let acc = &mut self.acc;
        let lob = acc.lobbies.max(1) as f64;
        let bf = acc.backfills.max(1) as f64;
        let out = LeaverRun {
            policy: policy.to_string(),
            backfill: self.backfill,
            superseded: self.superseded,
            lobbies: acc.lobbies,
            players: acc.players,
            backfilled_players: acc.backfilled,
            quits: acc.quits,
            quit_share: acc.quits as f64 / (acc.players + acc.backfilled).max(1) as f64,
            slots_filled: acc.fills.len() as u64,
            fill_s_p50: quantile(&mut acc.fills, 0.5),
            fill_s_p95: quantile(&mut acc.fills, 0.95),
            fill_s_quantiles: (0..=20)
                .map(|k| quantile(&mut acc.fills, f64::from(k) / 20.0))
                .collect(),
            wait_s_p50: quantile(&mut acc.waits, 0.5),
            wait_s_p95: quantile(&mut acc.waits, 0.95),
            short_handed: acc.short as f64 / lob,
            short_handed_ci95: wilson(acc.short as f64, acc.lobbies as f64),
            size_diff_end: acc.size_diff_end / lob,
            backfills: acc.backfills,
            size_diff_after_backfill: acc.size_diff_after / bf,
            skill_diff_after_backfill: acc.skill_diff_after / bf,
            worsened: acc.worsened,
            true_blowouts: acc.blowouts as f64 / lob,
            true_churn: acc.churn.mean,
            true_churn_ci95: acc.churn.ci(0.95),
            retention_vs_no_backfill: None,
        };
        (out, self.acc.churn)
    }
}

/// One policy's day with leavers, with or without backfill.
fn run(
    s: &Setup<'_>,
    name: &str,
    backfill: bool,
    cfg: &EvalConfig,
) -> Result<(LeaverRun, Moments), EvalError> {
    let t = s.team_size;
    let mode = Mode { team_size: t };
    let mut pol = policy(name, t, s.models, eomm_config(t, &s.models, cfg));
    let cod = CodConfig::new(t);
    let (Some(first), Some(last)) = (s.arr.first(), s.arr.last()) else {
        return Err(EvalError::Input("no searches to replay".into()));
    };
    let end = last.start_ms + (cfg.drain_s * 1e3) as i64;
    let mut day = Day {
        s,
        backfill,
        seed: cfg.seed,
        tick_ms: (cfg.tick_s * 1e3).round().max(1.0) as i64,
        queue: Queue::new(mode).map_err(|e| EvalError::Input(format!("team size {t}: {e}")))?,
        lobbies: Lobbies::new(mode),
        playing: BTreeMap::new(),
        state: vec![FREE; s.h.ids.len()],
        deferred: Vec::new(),
        queued_at: vec![0; s.arr.len()],
        superseded: 0,
        acc: Acc::default(),
    };
    let (mut now, mut next) = (first.start_ms, 0usize);
    loop {
        while next < s.arr.len() && s.arr[next].start_ms <= now {
            if now <= end {
                day.deferred.push(next);
            }
            next += 1;
        }
        day.admit(now)?;
        day.advance(now)?;
        if day.queue.players() > 0 {
            let (filled, formed) =
                tick_with_backfill(pol.as_mut(), &mut day.lobbies, &cod, now, &mut day.queue);
            day.join(&filled, now);
            for (id, l) in &formed {
                day.start(*id, l, now);
            }
        }
        let done = next >= s.arr.len() && day.playing.is_empty() && day.deferred.is_empty();
        if done && (now > end || day.queue.players() == 0) {
            break;
        }
        now += day.tick_ms;
    }
    Ok(day.figures(name))
}

/// Every team policy with and without backfill over the window's arrivals, with leavers.
pub(crate) fn replay(s: &Setup<'_>, cfg: &EvalConfig) -> Result<LeaverResult, EvalError> {
    let t0 = std::time::Instant::now();
    // Each run is its own day (its queue, lobbies and draws): they run in parallel and are
    // kept in report order, each policy with backfill, then without.
    let days: Vec<(&str, bool)> = TEAM_POLICIES
        .iter()
        .flat_map(|&name| [(name, true), (name, false)])
        .collect();
    let played: Vec<(LeaverRun, Moments)> = days
        .par_iter()
        .map(|&(name, backfill)| run(s, name, backfill, cfg))
        .collect::<Result<_, _>>()?;
    let mut runs = Vec::new();
    let mut played = played.into_iter();
    while let (Some((mut with, churn_with)), Some((without, churn_without))) =
        (played.next(), played.next())
    {
        // Retention with backfill over without: churn without minus churn with.
        with.retention_vs_no_backfill = Some(welch(&churn_without, &churn_with));
        runs.push(with);
        runs.push(without);
    }
    Ok(LeaverResult {
        quit_base_per_min: s.rules.quit_base_per_min,
        quit_deficit_kills: s.rules.quit_deficit_kills,
        runs,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
