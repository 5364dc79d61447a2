//! The match ids the lake holds, for the recent past: what answers a retried report as a
//! duplicate without reading the lake.
//!
//! A retried report comes minutes after the first, not weeks, so the service keeps the ids of
//! the matches that started within a horizon (`--dedupe-hours`, 24 by default, as long as
//! payment APIs keep idempotency keys) of the latest start it knows, in buckets of a sixteenth of
//! the horizon: a bucket that falls wholly behind the horizon is dropped whole. A report of an
//! older match is asked of the lake itself ([`mm_lake::Lake::holds_match`]), so a match is never
//! written twice however late it comes; only the memory is bounded, by the matches of one
//! horizon (about 32 bytes each).

use std::collections::{BTreeMap, HashSet};

/// A match id as the service remembers the lake's: its 128-bit XXH3 (16 bytes instead of the
/// id's string, about 100 with its allocation); two of a billion ids collide with probability
/// about 1e-21.
pub(crate) type MatchKey = u128;

pub(crate) fn key(match_id: &str) -> MatchKey {
    xxhash_rust::xxh3::xxh3_128(match_id.as_bytes())
}

/// How far ahead of the wall clock a start may move the horizon: a game server's clock may be
/// a little ahead, not a day.
const AHEAD_MS: i64 = 3_600_000;

/// The wall clock, ms since the Unix epoch.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Recent match ids by the bucket of their start.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    horizon_ms: i64,
    width_ms: i64,
    /// Bucket number (start / width) to the ids that started in it.
    buckets: BTreeMap<i64, HashSet<MatchKey>>,
    /// The latest start known (ms), at most the wall clock plus [`AHEAD_MS`].
    latest_ms: Option<i64>,
}

impl Seen {
    pub(crate) fn new(horizon_ms: i64) -> Seen {
        let horizon_ms = horizon_ms.max(16);
        Seen {
            horizon_ms,
            width_ms: horizon_ms / 16,
            buckets: BTreeMap::new(),
            latest_ms: None,
        }
    }

    /// The earliest start this set answers for: a match that started before it is asked of
    /// the lake.
    pub(crate) fn floor_ms(&self) -> i64 {
        self.latest_ms.map_or(i64::MIN, |t| t - self.horizon_ms)
    }

    /// Whether a match that started at `start_ms` is within the horizon.
    pub(crate) fn covers(&self, start_ms: i64) -> bool {
        start_ms >= self.floor_ms()
    }

    /// Moves the latest start known to `start_ms` if later (capped by the wall clock).
    pub(crate) fn saw_start(&mut self, start_ms: i64) {
        let cap = now_ms().saturating_add(AHEAD_MS);
        let t = start_ms.min(cap);
        if self.latest_ms.is_none_or(|l| t > l) {
            self.latest_ms = Some(t);
        }
    }

    pub(crate) fn contains(&self, k: MatchKey) -> bool {
        self.buckets.values().any(|b| b.contains(&k))
    }

    /// Records that the lake holds match `k`, started at `start_ms`; false when it was known.
    /// A match older than the horizon is kept until the next [`Seen::evict`] (the caller's
    /// check of its pending reports still sees it).
    pub(crate) fn insert(&mut self, start_ms: i64, k: MatchKey) -> bool {
        if self.contains(k) {
            return false;
        }
        self.saw_start(start_ms);
        let bucket = start_ms.max(self.floor_ms()).div_euclid(self.width_ms);
        self.buckets.entry(bucket).or_default().insert(k);
        true
    }

    /// Takes out the buckets wholly behind the horizon (for the caller to free off its lock).
    pub(crate) fn evict(&mut self) -> Vec<HashSet<MatchKey>> {
        let first_kept = self.floor_ms().div_euclid(self.width_ms);
        let kept = self.buckets.split_off(&first_kept);
        std::mem::replace(&mut self.buckets, kept)
            .into_values()
            .collect()
    }

    /// Ids kept.
    pub(crate) fn len(&self) -> usize {
        self.buckets.values().map(HashSet::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 16 * 60_000; // 16 minutes: buckets of one

    #[test]
    fn ids_within_the_horizon_are_kept_and_older_buckets_go() {
        let mut s = Seen::new(H);
        let t0 = 1_704_067_200_000; // 2024-01-01
        assert!(s.insert(t0, key("a")));
        assert!(!s.insert(t0 + 5, key("a")), "known");
        assert!(s.insert(t0 + 10 * 60_000, key("b")));
        assert_eq!(s.floor_ms(), t0 + 10 * 60_000 - H);
        assert!(s.covers(t0) && s.contains(key("a")));
        // A start 20 minutes on moves the floor past a's bucket.
        assert!(s.insert(t0 + 20 * 60_000, key("c")));
        assert!(!s.covers(t0));
        let gone = s.evict();
        assert_eq!(gone.iter().map(HashSet::len).sum::<usize>(), 1);
        assert!(!s.contains(key("a")) && s.contains(key("b")) && s.contains(key("c")));
        assert_eq!(s.len(), 2);
        // A late match behind the floor is kept until the next eviction.
        assert!(s.insert(t0 - 60_000, key("late")));
        assert!(s.contains(key("late")));
        s.evict();
        assert!(s.contains(key("late")), "it sits in the floor's bucket");
    }

    #[test]
    fn a_start_far_ahead_of_the_clock_does_not_move_the_horizon_past_now() {
        let mut s = Seen::new(2 * AHEAD_MS);
        let now = now_ms();
        s.insert(now, key("now"));
        s.insert(now + 365 * 86_400_000, key("next-year"));
        assert!(
            s.covers(now),
            "the horizon stops at the wall clock plus an hour"
        );
        s.evict();
        assert!(s.contains(key("now")) && s.contains(key("next-year")));
    }
}
