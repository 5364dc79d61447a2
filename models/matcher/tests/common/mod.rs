//! Searches for the matcher's integration tests: players by skill percentile.
#![allow(dead_code)]

use mm_matcher::queue::{Input, Member, Search};

/// A player at percentile `pct` (raw skill `2 pct - 1`), the same churn for everyone.
pub fn member(pct: f64) -> Member {
    Member {
        raw_skill: 2.0 * pct - 1.0,
        outcome_skill: 2.0 * pct - 1.0,
        percentile: pct,
        games: 10,
        churn: [0.1, 0.15, 0.2],
        churn_by_loss: None,
    }
}

/// A party of `pcts.len()` players searching since `start_ms`.
pub fn search(id: u64, pcts: &[f64], start_ms: i64) -> Search {
    Search {
        id,
        members: pcts.iter().map(|&p| member(p)).collect(),
        start_ms,
        lat: 48.0,
        lon: 2.0,
        input: Input::Controller,
        platform: 0,
        crossplay: true,
        pings: Vec::new(),
    }
}
