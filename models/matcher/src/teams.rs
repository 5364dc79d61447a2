//! Team balance for lobbies of parties, following the Call of Duty paper ("Team Balance") and
//! the Armored Warfare post (ABBA split, win-rate smoothing). Parties are never split.
//!
//! - [`kk_partition`] / [`balanceable`]: the grouping-phase check. The Karmarkar–Karp largest
//!   differencing method partitions party sizes into `k` teams quickly; a set of searches is
//!   accepted when every team fits and (for a new lobby) the teams are the same size.
//! - [`best_split`]: the lobby-phase split into two teams, exhaustive up to 12v12: among all
//!   splits with the fewest size difference, the one with the smallest skill-sum difference.
//!   It enumerates by meet-in-the-middle: each half of the parties has its subsets' sums built
//!   incrementally (each subset from a smaller one plus one party), and every subset of one half
//!   is combined with the best-fitting subset of the other by binary search.
//! - [`abba_split`]: the Armored Warfare split (sorted, alternating A B B A) with optional
//!   average-skill smoothing swaps.

/// One party (a search): its number of players and the sum of its players' skill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Party {
    pub size: usize,
    pub skill: f64,
}

/// Why parties could not be split into teams.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TeamError {
    #[error("party {index} has {size} players, more than a team of {team_size}")]
    PartyTooLarge {
        index: usize,
        size: usize,
        team_size: usize,
    },
    #[error("{players} players do not fit in {teams} teams of {team_size}")]
    TooManyPlayers {
        players: usize,
        teams: usize,
        team_size: usize,
    },
    #[error("no split of these parties fits two teams of {team_size}")]
    Unbalanceable { team_size: usize },
    #[error("exhaustive split supports up to {max} parties, got {got}")]
    TooManyParties { max: usize, got: usize },
    #[error("party {index} has a non-finite skill")]
    NonFiniteSkill { index: usize },
    #[error("a party must have at least one player (party {index})")]
    EmptyParty { index: usize },
}

/// A split of parties into two teams.
#[derive(Debug, Clone, PartialEq)]
pub struct Split {
    /// Party indices on each team, sorted.
    pub teams: [Vec<usize>; 2],
    pub sizes: [usize; 2],
    pub skill: [f64; 2],
}

impl Split {
    #[must_use]
    pub fn size_diff(&self) -> usize {
        self.sizes[0].abs_diff(self.sizes[1])
    }

    #[must_use]
    pub fn skill_diff(&self) -> f64 {
        (self.skill[0] - self.skill[1]).abs()
    }

    fn from_mask(parties: &[Party], mask: u64) -> Split {
        let mut s = Split {
            teams: [Vec::new(), Vec::new()],
            sizes: [0, 0],
            skill: [0.0, 0.0],
        };
        for (i, p) in parties.iter().enumerate() {
            let t = usize::from(mask >> i & 1 == 0);
            s.teams[t].push(i);
            s.sizes[t] += p.size;
            s.skill[t] += p.skill;
        }
        s
    }
}

fn validate(parties: &[Party], team_size: usize) -> Result<(), TeamError> {
    for (index, p) in parties.iter().enumerate() {
        if p.size == 0 {
            return Err(TeamError::EmptyParty { index });
        }
        if p.size > team_size {
            return Err(TeamError::PartyTooLarge {
                index,
                size: p.size,
                team_size,
            });
        }
        if !p.skill.is_finite() {
            return Err(TeamError::NonFiniteSkill { index });
        }
    }
    Ok(())
}

/// The number of players, or an error when they exceed two full teams.
fn fits_two_teams(parties: &[Party], team_size: usize) -> Result<usize, TeamError> {
    let total: usize = parties.iter().map(|x| x.size).sum();
    if total > 2 * team_size {
        return Err(TeamError::TooManyPlayers {
            players: total,
            teams: 2,
            team_size,
        });
    }
    Ok(total)
}

/// Karmarkar–Karp largest differencing for `k` teams: party indices per team. Each party starts
/// as a k-tuple (size, 0, ..., 0); the two tuples with the largest spread are merged by pairing
/// the largest entry of one with the smallest of the other, until one tuple is left.
#[must_use]
pub fn kk_partition(sizes: &[usize], k: usize) -> Vec<Vec<usize>> {
    let k = k.max(1);
    // Each partial solution: k (sum, members) entries kept sorted by sum descending.
    let mut parts: Vec<Vec<(usize, Vec<usize>)>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let mut t = vec![(s, vec![i])];
            t.extend((1..k).map(|_| (0, Vec::new())));
            t
        })
        .collect();
    let spread = |t: &Vec<(usize, Vec<usize>)>| t[0].0 - t[k - 1].0;
    while parts.len() > 1 {
        parts.sort_by_key(|t| std::cmp::Reverse(spread(t)));
        let a = parts.remove(0);
        let b = parts.remove(0);
        let mut merged: Vec<(usize, Vec<usize>)> = a
            .into_iter()
            .zip(b.into_iter().rev())
            .map(|((sa, mut ma), (sb, mb))| {
                ma.extend(mb);
                (sa + sb, ma)
            })
            .collect();
        merged.sort_by_key(|e| std::cmp::Reverse(e.0));
        parts.push(merged);
    }
    let mut teams: Vec<Vec<usize>> = parts
        .pop()
        .map(|t| t.into_iter().map(|(_, m)| m).collect())
        .unwrap_or_else(|| vec![Vec::new(); k]);
    for t in &mut teams {
        t.sort_unstable();
    }
    teams
}

/// The grouping-phase check of the CoD paper: can these parties be balanced into `teams` teams
/// of at most `team_size`? Uses the Karmarkar–Karp partition; a new lobby (`new_lobby`) also
/// needs equal team sizes. Returns the team sizes of the partition found.
#[must_use]
pub fn balanceable(
    sizes: &[usize],
    team_size: usize,
    teams: usize,
    new_lobby: bool,
) -> Option<Vec<usize>> {
    let part = kk_partition(sizes, teams);
    let totals: Vec<usize> = part
        .iter()
        .map(|t| t.iter().map(|&i| sizes[i]).sum())
        .collect();
    let fits = totals.iter().all(|&t| t <= team_size);
    let equal = totals.iter().all(|&t| t == totals[0]);
    (fits && (!new_lobby || equal)).then_some(totals)
}

/// The most parties [`best_split`] accepts: 12v12 of solo players.
pub const MAX_SPLIT_PARTIES: usize = 24;

/// All subset sums (size, skill) of `parties`, built incrementally: subset `m` is subset
/// `m & (m - 1)` plus its lowest party.
fn subset_sums(parties: &[Party]) -> Vec<(usize, f64)> {
    let mut sums = vec![(0usize, 0.0f64); 1 << parties.len()];
    for m in 1..sums.len() {
        let low = m.trailing_zeros() as usize;
        let (s, k) = sums[m & (m - 1)];
        sums[m] = (s + parties[low].size, k + parties[low].skill);
    }
    sums
}

/// The exhaustive two-team split (CoD "Lobby Phase"): fewest size difference first, then the
/// smallest difference of skill sums; no team larger than `team_size`. Deterministic: team A
/// (`teams[0]`) holds party 0, and the same parties always give the same split.
pub fn best_split(parties: &[Party], team_size: usize) -> Result<Split, TeamError> {
    validate(parties, team_size)?;
    let p = parties.len();
    if p > MAX_SPLIT_PARTIES {
        return Err(TeamError::TooManyParties {
            max: MAX_SPLIT_PARTIES,
            got: p,
        });
    }
    let total = fits_two_teams(parties, team_size)?;
    let total_skill: f64 = parties.iter().map(|x| x.skill).sum();
    if p == 0 {
        return Ok(Split::from_mask(parties, 0));
    }
    // Team A always holds party 0 (the split is symmetric); halves: [0, h) and [h, p).
    let h = p.div_ceil(2);
    let left = subset_sums(&parties[..h]);
    let right = subset_sums(&parties[h..]);
    // Feasible team-A sizes, and the best size difference among them.
    let mut right_sizes = vec![false; total + 1];
    for &(s, _) in &right {
        right_sizes[s] = true;
    }
    let ok_a = |a: usize| a <= team_size && total - a <= team_size;
    let mut best_size_diff = usize::MAX;
    for (m, &(sl, _)) in left.iter().enumerate() {
        if m & 1 == 0 {
            continue;
        }
        for (sr, _) in right_sizes.iter().enumerate().filter(|(_, ok)| **ok) {
            let a = sl + sr;
            if ok_a(a) {
                best_size_diff = best_size_diff.min((2 * a).abs_diff(total));
            }
        }
    }
    if best_size_diff == usize::MAX {
        return Err(TeamError::Unbalanceable { team_size });
    }
    // Right subsets grouped by size, each group sorted by skill.
    let mut by_size: Vec<Vec<(f64, u32)>> = vec![Vec::new(); total + 1];
    for (m, &(s, k)) in right.iter().enumerate() {
        by_size[s].push((k, m as u32));
    }
    for g in &mut by_size {
        g.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    }
    // Team-A sizes with |2a - total| == best_size_diff.
    let targets: Vec<usize> = (0..=total)
        .filter(|&a| ok_a(a) && (2 * a).abs_diff(total) == best_size_diff)
        .collect();
    let mut best: Option<(f64, u64)> = None;
    for (ml, &(sl, kl)) in left.iter().enumerate() {
        if ml & 1 == 0 {
            continue;
        }
        for &a in &targets {
            if a < sl {
                continue;
            }
            let group = &by_size[a - sl];
            if group.is_empty() {
                continue;
            }
            // Team A's skill should be as close as possible to half the total.
            let want = total_skill / 2.0 - kl;
            let pos = group.partition_point(|e| e.0 < want);
            for idx in [pos.wrapping_sub(1), pos] {
                if let Some(&(kr, mr)) = group.get(idx) {
                    let diff = (2.0 * (kl + kr) - total_skill).abs();
                    let mask = ml as u64 | (u64::from(mr) << h);
                    if best.is_none_or(|(d, _)| diff < d) {
                        best = Some((diff, mask));
                    }
                }
            }
        }
    }
    let mask = best.map_or(1, |(_, m)| m);
    Ok(Split::from_mask(parties, mask))
}

/// The Armored Warfare split: parties sorted by skill per player (highest first, ties by
/// index) are dealt in A B B A order, each to the team the pattern names unless it is full or
/// has more players than the other, and then, with `smoothing = Some(threshold)`, the average
/// player skill of the two teams is evened out: while the averages differ by at least the
/// threshold, the best party of the stronger team is swapped with the worst party of the same
/// size on the weaker team (moving inward through both sorted lists until a swap that does not
/// flip the imbalance is found). Team sizes are never changed by a swap. When the deal would
/// overfill a team although some split fits (e.g. {3},{3},{2},{2},{2} in teams of 6), the
/// deal is replaced by the exhaustive split, and smoothing proceeds from there.
pub fn abba_split(
    parties: &[Party],
    team_size: usize,
    smoothing: Option<f64>,
) -> Result<Split, TeamError> {
    validate(parties, team_size)?;
    fits_two_teams(parties, team_size)?;
    let per_player = |i: usize| parties[i].skill / parties[i].size as f64;
    let mut order: Vec<usize> = (0..parties.len()).collect();
    // Larger parties first so that they always fit, then by skill per player.
    order.sort_by(|&a, &b| {
        parties[b]
            .size
            .cmp(&parties[a].size)
            .then(per_player(b).total_cmp(&per_player(a)))
            .then(a.cmp(&b))
    });
    let mut on_a = vec![false; parties.len()];
    let mut sizes = [0usize; 2];
    for (k, &i) in order.iter().enumerate() {
        let pattern = usize::from(matches!(k % 4, 1 | 2));
        let s = parties[i].size;
        let fits = |t: usize| sizes[t] + s <= team_size;
        let mut t = pattern;
        if !fits(t) || (fits(1 - t) && sizes[t] > sizes[1 - t]) {
            t = 1 - t;
        }
        sizes[t] += s;
        on_a[i] = t == 0;
    }
    if sizes[0] > team_size || sizes[1] > team_size {
        let split = best_split(parties, team_size)?;
        on_a.fill(false);
        for &i in &split.teams[0] {
            on_a[i] = true;
        }
    }
    if let Some(threshold) = smoothing {
        smooth(parties, &mut on_a, threshold);
    }
    let mask = on_a
        .iter()
        .enumerate()
        .fold(0u64, |m, (i, &a)| m | (u64::from(a) << i));
    Ok(Split::from_mask(parties, mask))
}

fn smooth(parties: &[Party], on_a: &mut [bool], threshold: f64) {
    let avg = |on_a: &[bool], a: bool| {
        let (mut s, mut n) = (0.0, 0usize);
        for (i, p) in parties.iter().enumerate() {
            if on_a[i] == a {
                s += p.skill;
                n += p.size;
            }
        }
        if n == 0 { 0.0 } else { s / n as f64 }
    };
    let per_player = |i: usize| parties[i].skill / parties[i].size as f64;
    // Each swap strictly reduces the imbalance; the bound only guards against float cycling.
    for _ in 0..parties.len() * parties.len() + 1 {
        let gap = avg(on_a, true) - avg(on_a, false);
        if gap.abs() < threshold || gap == 0.0 {
            return;
        }
        let strong = gap > 0.0;
        let mut over: Vec<usize> = (0..parties.len()).filter(|&i| on_a[i] == strong).collect();
        let mut under: Vec<usize> = (0..parties.len()).filter(|&i| on_a[i] != strong).collect();
        over.sort_by(|&a, &b| per_player(b).total_cmp(&per_player(a)).then(a.cmp(&b)));
        under.sort_by(|&a, &b| per_player(a).total_cmp(&per_player(b)).then(a.cmp(&b)));
        let mut swapped = false;
        'search: for &o in &over {
            for &u in &under {
                if parties[o].size != parties[u].size || per_player(o) <= per_player(u) {
                    continue;
                }
                on_a[o] = !on_a[o];
                on_a[u] = !on_a[u];
                let new_gap = avg(on_a, true) - avg(on_a, false);
                if new_gap.abs() < gap.abs() && (new_gap == 0.0 || new_gap.signum() == gap.signum())
                {
                    swapped = true;
                    break 'search;
                }
                on_a[o] = !on_a[o];
                on_a[u] = !on_a[u];
            }
        }
        if !swapped {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes_of(sizes: &[usize], team: &[usize]) -> usize {
        team.iter().map(|&i| sizes[i]).sum()
    }

    /// CoD paper, Grouping Phase, 6v6: {3},{2},{2},{1} => [{3},{1}] vs [{2},{2}], valid.
    #[test]
    fn cod_grouping_example_valid() {
        let s = [3, 2, 2, 1];
        let t = kk_partition(&s, 2);
        assert_eq!((sizes_of(&s, &t[0]), sizes_of(&s, &t[1])), (4, 4));
        let mut a = t[0].iter().map(|&i| s[i]).collect::<Vec<_>>();
        a.sort_unstable();
        assert!(a == vec![1, 3] || a == vec![2, 2]);
        assert_eq!(balanceable(&s, 6, 2, true), Some(vec![4, 4]));
    }

    /// CoD paper: {4},{4},{3} cannot be balanced without a team above 6.
    #[test]
    fn cod_grouping_example_too_large() {
        assert_eq!(balanceable(&[4, 4, 3], 6, 2, false), None);
    }

    /// CoD paper, new lobby: {3},{2},{2},{2},{1} => 5 v 5 valid; adding {1} makes 6 v 5, which
    /// a new lobby never accepts (a backfill may).
    #[test]
    fn cod_new_lobby_examples() {
        assert_eq!(balanceable(&[3, 2, 2, 2, 1], 6, 2, true), Some(vec![5, 5]));
        assert_eq!(balanceable(&[3, 2, 2, 2, 1, 1], 6, 2, true), None);
        assert!(balanceable(&[3, 2, 2, 2, 1, 1], 6, 2, false).is_some());
    }

    /// Three teams: {4},{3},{3},{2},{2},{1},{1} (16 players) in teams of 6.
    #[test]
    fn kk_three_way() {
        let s = [4, 3, 3, 2, 2, 1, 1];
        let t = kk_partition(&s, 3);
        let mut all: Vec<usize> = t.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..7).collect::<Vec<_>>());
        let mut totals: Vec<usize> = t.iter().map(|x| sizes_of(&s, x)).collect();
        totals.sort_unstable();
        assert_eq!(totals, vec![5, 5, 6]);
    }

    #[test]
    fn exhaustive_split_hand_case() {
        // Six solos with skills 1..6: the best equal split has sums 10.5 each, impossible in
        // integers; 10 vs 11 is best (e.g. {1,3,6} vs {2,4,5}).
        let parties: Vec<Party> = (1..=6)
            .map(|k| Party {
                size: 1,
                skill: k as f64,
            })
            .collect();
        let s = best_split(&parties, 3).unwrap();
        assert_eq!(s.sizes, [3, 3]);
        assert_eq!(s.skill_diff(), 1.0);
    }

    #[test]
    fn party_larger_than_a_team_is_an_error() {
        let e = best_split(
            &[Party {
                size: 7,
                skill: 0.0,
            }],
            6,
        )
        .unwrap_err();
        assert!(matches!(e, TeamError::PartyTooLarge { index: 0, .. }));
        let e = abba_split(
            &[Party {
                size: 4,
                skill: 0.0,
            }; 4],
            6,
            None,
        )
        .unwrap_err();
        assert!(matches!(e, TeamError::TooManyPlayers { .. }));
    }

    #[test]
    fn abba_smoothing_evens_averages() {
        // Solos 10, 9, 8, 7, 6, 1 dealt A B B A A B: A = {10, 7, 6} = 23, B = {9, 8, 1} = 18.
        // Smoothing (threshold 0.5 per player): swapping 10 for 1 would flip the imbalance;
        // 10 for 8 gives 21 vs 20, average gap 1/3 < 0.5, and stops.
        let parties: Vec<Party> = [10.0, 9.0, 8.0, 7.0, 6.0, 1.0]
            .iter()
            .map(|&k| Party { size: 1, skill: k })
            .collect();
        let plain = abba_split(&parties, 3, None).unwrap();
        assert_eq!(plain.teams, [vec![0, 3, 4], vec![1, 2, 5]]);
        let smooth = abba_split(&parties, 3, Some(0.5)).unwrap();
        assert_eq!(smooth.teams, [vec![2, 3, 4], vec![0, 1, 5]]);
        assert_eq!(smooth.skill, [21.0, 20.0]);
    }
}
