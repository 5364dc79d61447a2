//! The historical matchmaker: what a live system of a few years ago might have run, so that the
//! lobbies in the lake look real. Every tick, searches are bucketed by region (by region group
//! after 90 s, world-wide after 180 s), sorted by rating, and lobbies are grown around the
//! oldest search from its nearest neighbours in rating, within a window that widens with the
//! anchor's wait. 6v6 lobbies must pass the Karmarkar-Karp check for two equal teams; the teams
//! are then the exhaustive split of `mm-matcher` (fewest size difference, then closest rating).

use mm_matcher::teams::{Party, balanceable, best_split};

use crate::world::{Mode, REGIONS};

/// A party (or a solo player) searching.
#[derive(Debug, Clone)]
pub struct Search {
    pub members: Vec<u32>,
    pub party_id: Option<u64>,
    pub mode: Mode,
    pub region: u8,
    /// Sum of the members' ratings (what the matchmaker knows of their skill).
    pub rating_sum: f64,
    pub enter_s: i64,
}

impl Search {
    fn rating(&self) -> f64 {
        self.rating_sum / self.members.len() as f64
    }
}

/// A formed lobby: searches with their team (0 or 1), and the server region.
#[derive(Debug, Clone)]
pub struct Lobby {
    pub searches: Vec<(Search, usize)>,
    pub server: u8,
}

fn window(mode: Mode, age_s: i64) -> f64 {
    let minutes = age_s as f64 / 60.0;
    match mode {
        Mode::Tdm => 0.5 + 0.5 * minutes,
        Mode::Duel => 0.3 + 0.4 * minutes,
    }
}

/// Forms lobbies from `queue` (searches of one mode) at time `now`; the rest stay queued.
pub fn tick(now: i64, mode: Mode, queue: &mut Vec<Search>) -> Vec<Lobby> {
    if queue.len() < 2 {
        return Vec::new();
    }
    let mut formed: Vec<Vec<usize>> = Vec::new();
    let mut used = vec![false; queue.len()];
    // (bucket key of a search, minimum anchor age) for the three backoff levels.
    type Key = fn(&Search) -> u8;
    let levels: [(Key, i64); 3] = [
        (|s| s.region, 0),
        (|s| REGIONS[s.region as usize].group, 90),
        (|_| 0, 180),
    ];
    let oldest = queue.iter().map(|s| s.enter_s).min().unwrap_or(now);
    for (key, min_age) in levels {
        if now - oldest < min_age {
            break;
        }
        let mut order: Vec<usize> = (0..queue.len()).filter(|&i| !used[i]).collect();
        order.sort_by(|&a, &b| {
            key(&queue[a])
                .cmp(&key(&queue[b]))
                .then(queue[a].rating().total_cmp(&queue[b].rating()))
                .then(queue[a].enter_s.cmp(&queue[b].enter_s))
        });
        // Anchors: oldest first.
        let mut anchors: Vec<usize> = (0..order.len()).collect();
        anchors.sort_by_key(|&k| (queue[order[k]].enter_s, order[k]));
        for k in anchors {
            let a = order[k];
            if used[a] || now - queue[a].enter_s < min_age {
                continue;
            }
            let w = window(mode, now - queue[a].enter_s);
            let centre = queue[a].rating();
            let in_bucket = |j: usize| key(&queue[j]) == key(&queue[a]);
            let picked = match mode {
                Mode::Duel => {
                    // The nearest free neighbour in rating, either side.
                    let near = [k.checked_sub(1), Some(k + 1)]
                        .into_iter()
                        .flatten()
                        .filter_map(|m| order.get(m).copied())
                        .filter(|&j| !used[j] && in_bucket(j))
                        .filter(|&j| (queue[j].rating() - centre).abs() <= w)
                        .min_by(|&x, &y| {
                            (queue[x].rating() - centre)
                                .abs()
                                .total_cmp(&(queue[y].rating() - centre).abs())
                        });
                    near.map(|j| vec![a, j])
                }
                Mode::Tdm => grow_tdm(&order, k, &used, queue, w, in_bucket),
            };
            let Some(picked) = picked else { continue };
            for &j in &picked {
                used[j] = true;
            }
            formed.push(picked);
        }
    }
    if formed.is_empty() {
        return Vec::new();
    }
    let teams: Vec<Vec<usize>> = formed.iter().map(|p| split(mode, p, queue)).collect();
    // Move the chosen searches out of the queue.
    let mut slots: Vec<Option<Search>> = queue.drain(..).map(Some).collect();
    let lobbies = formed
        .iter()
        .zip(teams)
        .map(|(picked, teams)| {
            let searches: Vec<(Search, usize)> = picked
                .iter()
                .zip(teams)
                .filter_map(|(&j, t)| slots[j].take().map(|s| (s, t)))
                .collect();
            Lobby {
                server: searches[0].0.region,
                searches,
            }
        })
        .collect();
    queue.extend(slots.into_iter().flatten());
    lobbies
}

/// Grows a 12-player lobby around order[k] from its nearest neighbours in rating.
fn grow_tdm(
    order: &[usize],
    k: usize,
    used: &[bool],
    queue: &[Search],
    w: f64,
    in_bucket: impl Fn(usize) -> bool,
) -> Option<Vec<usize>> {
    let a = order[k];
    let centre = queue[a].rating();
    let mut picked = vec![a];
    let mut total = queue[a].members.len();
    let (mut lo, mut hi) = (k, k + 1);
    while total < 12 {
        let left = lo.checked_sub(1).map(|m| order[m]);
        let right = order.get(hi).copied();
        let dist =
            |j: Option<usize>| j.map_or(f64::INFINITY, |j| (queue[j].rating() - centre).abs());
        let take_left = dist(left) <= dist(right);
        let j = if take_left { left } else { right }?;
        if take_left {
            lo -= 1;
        } else {
            hi += 1;
        }
        if dist(Some(j)) > w {
            return None;
        }
        if used[j] || !in_bucket(j) || total + queue[j].members.len() > 12 {
            continue;
        }
        picked.push(j);
        total += queue[j].members.len();
    }
    let sizes: Vec<usize> = picked.iter().map(|&j| queue[j].members.len()).collect();
    balanceable(&sizes, 6, 2, true).map(|_| picked)
}

/// The team (0 or 1) of each picked search.
fn split(mode: Mode, picked: &[usize], queue: &[Search]) -> Vec<usize> {
    match mode {
        Mode::Duel => vec![0, 1],
        Mode::Tdm => {
            let parties: Vec<Party> = picked
                .iter()
                .map(|&j| Party {
                    size: queue[j].members.len(),
                    skill: queue[j].rating_sum,
                })
                .collect();
            let split = best_split(&parties, 6).expect("the grouping check passed");
            let mut t = vec![0; picked.len()];
            for &i in &split.teams[1] {
                t[i] = 1;
            }
            t
        }
    }
}
