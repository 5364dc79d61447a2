//! Team-queue policies replayed offline: the window's real searches arrive in a live queue at
//! the times they really started, and each policy (CoD rules with backoff, the threshold
//! quality matcher, EOMM for team lobbies) ticks over the same arrivals and forms its own lobbies.
//!
//! - **Searches.** One per party of each real match (players of one `party_id` in one match
//!   queue together; everyone else alone), arriving at the match's start with the members'
//!   states at that moment (as in the 1v1 evaluation). A party larger than a team is queued as
//!   solo players. A player still queued by this policy when their next real search arrives
//!   keeps the older search: the newer is counted as `superseded`, not queued twice.
//! - **Ticks** every `tick_s` from the first arrival until `drain_s` after the last one.
//!   Searches never placed are counted as `unplaced`.
//! - **Figures** per policy: placed searches and players, waits (mean with a 95% interval,
//!   median, 90th percentile, maximum), lobbies placed by the maximum-wait rule, predicted churn
//!   per placed player with a 95% interval and Welch tests between policies, retained share
//!   under shared draws, predicted blowouts, mean |P(win) - 1/2|, skill disparity, party parity
//!   (the `parties` quality criterion: 1 when both teams have the same party sizes), the mean
//!   quality, the same by skill decile, and the tick time.
//! - **Draws.** A lobby's outcome uses the uniform of its lowest search id, and each player's
//!   churn the uniform of their search and seat, so a search meets the same draws under every
//!   policy.
//!
//! Geography, input devices, platforms and pings are not in the lake's evaluation history:
//! every search is placed at one location with one input and platform, so the policies' skill,
//! party and wait rules decide.

use std::time::Instant;

use mm_artifact::Artifact;
use mm_matcher::eomm_teams::EommTeams;
use mm_matcher::queue::{Lobby, LobbyModels, Member, Mode, Policy, Queue};
use rayon::prelude::*;

use crate::config::EvalConfig;
use crate::error::EvalError;
use crate::history::EvalHistory;
use crate::measures::{Scored, against_truth, balance, decile, decile_stats, mix};
use crate::results::{PairTest, TeamOracle, TeamPolicyStats, TeamQueueResult, TeamTruthStats};
use crate::stats::{Moments, paired, welch, wilson};
use crate::team::{Arrival, ORACLES, TEAM_POLICIES, Truth, eomm_config, policy};
use crate::truth::{TeamTruth, TruthSearches};

fn arrivals(h: &EvalHistory, team_size: usize) -> (Vec<Arrival>, u64) {
    let mut out = Vec::new();
    let mut split = 0u64;
    for m in &h.matches {
        let mut parties: Vec<(u32, Vec<u32>)> = Vec::new();
        for k in m.lo..m.hi {
            let key = h.party[k as usize];
            match parties.iter_mut().find(|p| key > 0 && p.0 == key) {
                Some(p) => p.1.push(k),
                None => parties.push((key, vec![k])),
            }
        }
        for (_, seats) in parties {
            if seats.len() > team_size {
                split += 1;
                out.extend(seats.into_iter().map(|k| Arrival {
                    start_ms: m.start_ms,
                    seats: vec![k],
                }));
            } else {
                out.push(Arrival {
                    start_ms: m.start_ms,
                    seats,
                });
            }
        }
    }
    out.sort_by_key(|a| a.start_ms);
    (out, split)
}

fn team_models(art: &Artifact) -> Result<LobbyModels, EvalError> {
    LobbyModels::from_artifact(art).ok_or_else(|| {
        EvalError::Input(format!(
            "{}: the artifact has no team win model",
            art.dir.display()
        ))
    })
}

fn uniform(seed: u64, a: u64, b: u64) -> f64 {
    (mix(seed, a, b) >> 11) as f64 / (1u64 << 53) as f64
}

#[derive(Default)]
struct Acc {
    waits: Vec<f64>,
    wait: Moments,
    churn: Moments,
    retained: f64,
    lobbies: u64,
    rescued: u64,
    blowouts: f64,
    balance: f64,
    disparity: f64,
    parity: f64,
    parity_exact: f64,
    quality: f64,
    placed_searches: u64,
    dec_players: [f64; 10],
    dec_retained: [f64; 10],
    dec_balance: [f64; 10],
    tick: Moments,
    tick_max: f64,
    /// Under the simulator's truth: churn per placed player, blowouts per lobby, and each
    /// seat's churn (NaN when not placed) for the paired tests.
    true_churn: Moments,
    true_blowouts: f64,
    true_balance: f64,
    favourite_excess: f64,
    true_by_seat: Vec<f64>,
}

/// `sc` with every member's churn replaced by the simulator's true churn by outcome: what the
/// half-oracle `oracle-churn` reads (our win model, the true churn).
fn with_true_churn(sc: &Scored, t: &Truth<'_>) -> Scored {
    Scored {
        label: sc.label.clone(),
        version: sc.version.clone(),
        win: sc.win,
        members: sc
            .members
            .iter()
            .enumerate()
            .map(|(k, m)| {
                let [win, draw, close, blowout] = t.churn_if(k as u32);
                Member {
                    churn: [win, draw, close],
                    churn_by_loss: Some([close, blowout]),
                    ..*m
                }
            })
            .collect(),
        new_players: sc.new_players,
    }
}

fn record(
    acc: &mut Acc,
    lobby: &Lobby,
    arr: &[Arrival],
    sc: &Scored,
    (seed, blowout_p): (u64, f64),
    truth: Option<&Truth<'_>>,
) {
    if let Some(t) = truth {
        let o = t.lobby(lobby, arr);
        acc.true_blowouts += o[2] + o[3];
        let ours = mm_matcher::scoring::OutcomeProbs {
            win: lobby.p[0],
            draw: lobby.p[1],
            loss: lobby.p[2],
        };
        let (balance, excess) = against_truth(&ours, o[0], o[1]);
        acc.true_balance += balance;
        acc.favourite_excess += excess;
        for (side, team) in lobby.teams.iter().enumerate() {
            for &id in team {
                for &k in &arr[id as usize].seats {
                    let c = t.churn(k, side, o);
                    acc.true_churn.push(c);
                    acc.true_by_seat[k as usize] = c;
                }
            }
        }
    }
    acc.lobbies += 1;
    acc.rescued += u64::from(lobby.rescued);
    let p = mm_matcher::scoring::OutcomeProbs {
        win: lobby.p[0],
        draw: lobby.p[1],
        loss: lobby.p[2],
    };
    let (bal, blow) = balance(&p, blowout_p);
    acc.balance += bal;
    acc.blowouts += f64::from(u8::from(blow));
    acc.parity += lobby.quality.parties;
    acc.quality += lobby.quality.total;
    let first = lobby.search_ids().min().unwrap_or(0);
    let u = uniform(seed, 1, first);
    // Team A's result: 0 win, 1 draw, 2 loss.
    let result = if u < p.win {
        0
    } else if u < p.win + p.draw {
        1
    } else {
        2
    };
    let mut pct = [0.0f64; 2];
    let mut sizes: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
    for (side, team) in lobby.teams.iter().enumerate() {
        let mine = if side == 0 {
            [p.win, p.draw, p.loss]
        } else {
            [p.loss, p.draw, p.win]
        };
        let outcome = if side == 0 { result } else { 2 - result };
        let mut n = 0.0;
        for &id in team {
            let a = &arr[id as usize];
            acc.placed_searches += 1;
            acc.wait.push((lobby.formed_ms - a.start_ms) as f64 / 1e3);
            acc.waits.push((lobby.formed_ms - a.start_ms) as f64 / 1e3);
            sizes[side].push(a.seats.len());
            for (seat, &k) in a.seats.iter().enumerate() {
                let m = &sc.members[k as usize];
                let expected = mine[0] * m.churn[0] + mine[1] * m.churn[1] + mine[2] * m.churn[2];
                acc.churn.push(expected);
                let kept = uniform(seed, 2 + seat as u64, id) >= m.churn[outcome];
                acc.retained += f64::from(u8::from(kept));
                let d = decile(m.percentile);
                acc.dec_players[d] += 1.0;
                acc.dec_retained[d] += 1.0 - expected;
                acc.dec_balance[d] += bal;
                pct[side] += m.percentile;
                n += 1.0;
            }
        }
        pct[side] /= f64::max(n, 1.0);
    }
    acc.disparity += (pct[0] - pct[1]).abs();
    sizes[0].sort_unstable();
    sizes[1].sort_unstable();
    acc.parity_exact += f64::from(u8::from(sizes[0] == sizes[1]));
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// The team oracle's figures for the first artifact: the true retention gain over the CoD rules
/// the oracle reaches (the gain available under the rules), the one team EOMM realises, and
/// the share, with the paired tests over the players both placed.
fn team_oracle(stats: &[TeamPolicyStats], tests: &[PairTest]) -> Option<TeamOracle> {
    let art = &stats.first()?.artifact;
    let label = |p: &str| {
        stats
            .iter()
            .find(|x| &x.artifact == art && x.policy == p)
            .map(|x| x.label.clone())
    };
    let cod = label("cod")?;
    let vs_cod = |p: &str| {
        let a = label(p)?;
        tests
            .iter()
            .find(|t| t.a == a && t.b == cod)
            .and_then(|t| t.paired_truth)
    };
    let (available, realised) = (vs_cod("oracle")?, vs_cod("eomm")?);
    let (churn, outcomes) = (vs_cod("oracle-churn")?, vs_cod("oracle-outcomes")?);
    Some(TeamOracle {
        available_gain: available.diff,
        available_p: available.p,
        realised_gain: realised.diff,
        realised_p: realised.p,
        share: realised.diff / available.diff,
        true_churn_gain: churn.diff,
        true_churn_p: churn.p,
        true_outcomes_gain: outcomes.diff,
        true_outcomes_p: outcomes.p,
    })
}

/// One policy's day over the arrivals: what `record` gathered, the searches offered and those
/// superseded by the player's still-queued search.
struct Day {
    acc: Acc,
    offered: u64,
    superseded: u64,
}

/// Ticks `pol` over the window's arrivals (artifact `sc`'s states) until the queue drains;
/// the searches carry `shown`'s states (`sc`'s, but for a half-oracle that reads the true
/// churn), and the lobbies are scored by `sc`.
fn play_day(
    h: &EvalHistory,
    arr: &[Arrival],
    (sc, shown): (&Scored, &Scored),
    pol: &mut dyn Policy,
    cfg: &EvalConfig,
    (team_size, truth): (usize, Option<&Truth<'_>>),
) -> Result<Day, EvalError> {
    let mode = Mode { team_size };
    let tick_ms = (cfg.tick_s * 1e3).round().max(1.0) as i64;
    let mut queue =
        Queue::new(mode).map_err(|e| EvalError::Input(format!("team size {team_size}: {e}")))?;
    let mut queued = vec![false; h.ids.len()];
    let mut day = Day {
        acc: Acc {
            true_by_seat: vec![f64::NAN; h.searchers.len()],
            ..Acc::default()
        },
        offered: 0,
        superseded: 0,
    };
    let (Some(first), Some(last)) = (arr.first(), arr.last()) else {
        return Ok(day);
    };
    let end = last.start_ms + (cfg.drain_s * 1e3) as i64;
    let player = |k: u32| h.searchers[k as usize].player as usize;
    let (mut now, mut next) = (first.start_ms, 0usize);
    while now <= end {
        while next < arr.len() && arr[next].start_ms <= now {
            let a = &arr[next];
            if a.seats.iter().any(|&k| queued[player(k)]) {
                day.superseded += 1;
            } else {
                day.offered += 1;
                for &k in &a.seats {
                    queued[player(k)] = true;
                }
                queue
                    .push(a.search(next, a.start_ms, shown))
                    .map_err(|e| EvalError::Input(format!("search {next}: {e}")))?;
            }
            next += 1;
        }
        if queue.players() >= mode.lobby_players() {
            let t = Instant::now();
            let lobbies = pol.tick(now, &mut queue);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            day.acc.tick.push(ms);
            day.acc.tick_max = day.acc.tick_max.max(ms);
            for l in &lobbies {
                for id in l.search_ids() {
                    for &k in &arr[id as usize].seats {
                        queued[player(k)] = false;
                    }
                }
                record(&mut day.acc, l, arr, sc, (cfg.seed, cfg.blowout_p), truth);
            }
        }
        if next >= arr.len() && queue.players() < mode.lobby_players() {
            break;
        }
        now += tick_ms;
    }
    Ok(day)
}

/// One policy's figures from its day.
fn policy_stats(
    name: &str,
    label: String,
    sc: &Scored,
    day: &mut Day,
    truth: bool,
) -> TeamPolicyStats {
    let acc = &mut day.acc;
    acc.waits.sort_by(f64::total_cmp);
    let placed_players = acc.churn.n;
    let by_decile = decile_stats(&acc.dec_players, &acc.dec_retained, &acc.dec_balance);
    let lob = acc.lobbies.max(1) as f64;
    TeamPolicyStats {
        policy: name.to_string(),
        artifact: sc.label.clone(),
        label,
        searches: day.offered,
        superseded: day.superseded,
        placed_searches: acc.placed_searches,
        placed_players,
        unplaced_searches: day.offered - acc.placed_searches,
        lobbies: acc.lobbies,
        rescued: acc.rescued,
        wait_s_mean: acc.wait.mean,
        wait_s_ci95: acc.wait.ci(0.95),
        wait_s_p50: quantile(&acc.waits, 0.5),
        wait_s_p90: quantile(&acc.waits, 0.9),
        wait_s_max: acc.waits.last().copied().unwrap_or(f64::NAN),
        wait_s_quantiles: (0..=20)
            .map(|k| quantile(&acc.waits, f64::from(k) / 20.0))
            .collect(),
        expected_churn: acc.churn.mean,
        expected_churn_ci95: acc.churn.ci(0.95),
        retained_share: acc.retained / placed_players.max(1) as f64,
        retained_ci95: wilson(acc.retained, placed_players as f64),
        blowout_rate: acc.blowouts / lob,
        mean_abs_pwin_minus_half: acc.balance / lob,
        mean_skill_disparity: acc.disparity / lob,
        party_parity: acc.parity / lob,
        party_parity_exact: acc.parity_exact / lob,
        mean_quality: acc.quality / lob,
        by_decile,
        tick_ms_mean: acc.tick.mean,
        tick_ms_max: acc.tick_max,
        truth: truth.then(|| TeamTruthStats {
            expected_churn: acc.true_churn.mean,
            expected_churn_ci95: acc.true_churn.ci(0.95),
            blowout_rate: acc.true_blowouts / lob,
            mean_abs_pwin_minus_half: acc.true_balance / lob,
            favourite_excess: acc.favourite_excess / lob,
        }),
    }
}

/// Every ordered pair of policies: Welch tests of predicted retention and, under the truth,
/// paired tests over the seats both placed.
fn pair_tests(stats: &[TeamPolicyStats], days: &[Day], truth: bool) -> Vec<PairTest> {
    let mut tests = Vec::new();
    for i in 0..stats.len() {
        for j in 0..stats.len() {
            if i == j {
                continue;
            }
            let (ci, cj) = (&days[i].acc.churn, &days[j].acc.churn);
            // Retention is 1 - churn: testing churn j against churn i gives the difference
            // (and t) of retention i against retention j.
            tests.push(PairTest {
                a: stats[i].label.clone(),
                b: stats[j].label.clone(),
                welch: welch(cj, ci),
                relative: (cj.mean - ci.mean) / (1.0 - cj.mean),
                paired: None,
                paired_expected: None,
                paired_truth: truth.then(|| {
                    // Retention i over j under the truth, seat by seat over the seats both
                    // placed: churn j minus churn i.
                    let mut d = Moments::default();
                    let seats = days[i]
                        .acc
                        .true_by_seat
                        .iter()
                        .zip(&days[j].acc.true_by_seat);
                    for (ci, cj) in seats {
                        if ci.is_finite() && cj.is_finite() {
                            d.push(cj - ci);
                        }
                    }
                    paired(&d)
                }),
            });
        }
    }
    tests
}

/// What every policy of one artifact's replay reads.
struct Replaying<'a> {
    h: &'a EvalHistory,
    arr: &'a [Arrival],
    sc: &'a Scored,
    /// `sc` with the simulator's true churn (for the half-oracle that reads it).
    true_sc: Option<&'a Scored>,
    models: LobbyModels,
    team_size: usize,
    truth: Option<&'a Truth<'a>>,
    /// Labels carry the artifact's name when several are compared.
    several: bool,
}

impl Replaying<'_> {
    /// Policy `name`'s day and its figures.
    fn play(&self, name: &str, cfg: &EvalConfig) -> Result<(TeamPolicyStats, Day), EvalError> {
        let (sc, models) = (self.sc, self.models);
        let eomm = eomm_config(self.team_size, &models, cfg);
        let (mut pol, read): (Box<dyn Policy>, &Scored) = match (name, self.truth, self.true_sc) {
            ("oracle", Some(t), _) => (
                Box::new(EommTeams::new(eomm, models).with_objective(t.objective(self.arr))),
                sc,
            ),
            ("oracle-churn", _, Some(true_sc)) => (Box::new(EommTeams::new(eomm, models)), true_sc),
            ("oracle-outcomes", Some(t), _) => {
                // Our churn model's by outcome, the loss split as the matcher splits it.
                let objective = t.objective_with(self.arr, |k| {
                    let m = &sc.members[k as usize];
                    let [close, blowout] = m.churn_after_losses();
                    [m.churn[0], m.churn[1], close, blowout]
                });
                (
                    Box::new(EommTeams::new(eomm, models).with_objective(objective)),
                    sc,
                )
            }
            _ => (policy(name, self.team_size, models, eomm), sc),
        };
        // Every policy's lobbies are scored by our models; the half-oracle with the true
        // churn reads it only to choose.
        let mut day = play_day(
            self.h,
            self.arr,
            (sc, read),
            pol.as_mut(),
            cfg,
            (self.team_size, self.truth),
        )?;
        let label = if self.several {
            format!("{}/{name}", sc.label)
        } else {
            name.to_string()
        };
        let stats = policy_stats(name, label, sc, &mut day, self.truth.is_some());
        Ok((stats, day))
    }
}

/// Replays every team-queue policy under each artifact over the window's arrivals.
pub(crate) fn replay(
    h: &EvalHistory,
    arts: &[(&Artifact, &Scored)],
    team_size: usize,
    cfg: &EvalConfig,
    truth: Option<&TruthSearches>,
) -> Result<TeamQueueResult, EvalError> {
    let t0 = Instant::now();
    let truth_rules = truth
        .and_then(|t| t.tdm)
        .and_then(|c| Some((c.rules()?, c.form_sd)));
    let truth = truth.and_then(|t| {
        Some(Truth {
            game: TeamTruth::new(&t.tdm?, team_size),
            loss: t.churn_if_loss.as_deref()?,
            t,
        })
    });
    let (arr, split_parties) = arrivals(h, team_size);
    let (mut stats, mut days) = (Vec::new(), Vec::new());
    for &(art, sc) in arts {
        let oracles = truth.as_ref().map_or(&[][..], |_| &ORACLES[..]);
        let true_sc = truth.as_ref().map(|t| with_true_churn(sc, t));
        let r = Replaying {
            h,
            arr: &arr,
            sc,
            true_sc: true_sc.as_ref(),
            models: team_models(art)?,
            team_size,
            truth: truth.as_ref(),
            several: arts.len() > 1,
        };
        // Each policy's day is its own (its queue, its policy, draws fixed by the searches):
        // the days run in parallel and are kept in report order.
        let names: Vec<&str> = TEAM_POLICIES.iter().chain(oracles).copied().collect();
        let played: Vec<(TeamPolicyStats, Day)> = names
            .par_iter()
            .map(|name| r.play(name, cfg))
            .collect::<Result<_, _>>()?;
        for (s, d) in played {
            stats.push(s);
            days.push(d);
        }
    }
    let tests = pair_tests(&stats, &days, truth.is_some());
    let oracle = team_oracle(&stats, &tests);
    // With leavers: the first artifact, on a simulated lake whose truth has the quit rates.
    let leavers = match (&truth, truth_rules, arts.first()) {
        (Some(t), Some(rules), Some(&(art, sc))) => {
            let models = team_models(art)?;
            let setup = crate::leavers::Setup::new(h, &arr, sc, models, team_size, t, rules);
            Some(crate::leavers::replay(&setup, cfg)?)
        }
        _ => None,
    };
    Ok(TeamQueueResult {
        oracle,
        leavers,
        team_size,
        tick_s: cfg.tick_s,
        drain_s: cfg.drain_s,
        split_parties,
        policies: stats,
        tests,
        seconds: t0.elapsed().as_secs_f64(),
    })
}
