//! A synthetic artifact of any size (tests, the load benchmark): valid parameters and a player
//! snapshot with full histories, from a seeded generator.

use std::collections::BTreeMap;

use crate::churn::{BlowoutShift, ChurnModel, GridPoint};
use crate::features::{FeatureSpec, Outcome3, Played};
use crate::load::{
    CHURN_FILE, ChurnFile, PARTY_FILE, PERCENTILES_FILE, PLAYERS_FILE, SKILL_FILE, SkillFile,
    TEAM_WIN_FILE, json_bytes as json,
};
use crate::manifest::{DataWindow, FORMAT_VERSION, MIN_READER_FORMAT, Manifest};
use crate::percentile::PercentileMap;
use crate::skill::RawSkillParams;
use crate::snapshot::{PlayerState, Snapshot, write_snapshot};
use crate::team::{BlowoutModel, DrawModel, SkillBasis, TeamWinModel};

/// splitmix64: enough for synthetic data (and the tests' and benches' random matches).
#[derive(Debug, Clone)]
pub struct Mix(pub u64);

impl Mix {
    /// The next value.
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (modulo bias below 2^-32 for the small `n` of tests).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The snapshot of `players` players with `history` recent matches each (fewer for some).
#[must_use]
pub fn snapshot(players: usize, history: usize, as_of_ms: i64, seed: u64) -> Snapshot {
    Snapshot::new(history, player_states(players, history, as_of_ms, seed)).unwrap_or_default()
}

/// The players of [`snapshot`], sorted by id.
#[must_use]
pub fn player_states(players: usize, history: usize, as_of_ms: i64, seed: u64) -> Vec<PlayerState> {
    let mut r = Mix(seed);
    let hour = 3_600_000i64;
    let list: Vec<PlayerState> = (0..players)
        .map(|i| {
            let n = (r.next() % (history as u64 + 3)).min(history as u64) as usize;
            let mut t = as_of_ms - (r.unit() * 500.0) as i64 * hour;
            let mut recent = Vec::with_capacity(n);
            for _ in 0..n {
                recent.push(Played {
                    start_ms: t,
                    outcome: [Outcome3::Win, Outcome3::Draw, Outcome3::Loss]
                        [(r.next() % 3) as usize],
                    score_diff: if r.unit() < 0.1 {
                        f64::NAN
                    } else {
                        (r.unit() - 0.5) * 60.0
                    },
                    perf_rank: if r.unit() < 0.1 { f64::NAN } else { r.unit() },
                    blowout_loss: r.unit() < 0.1,
                });
                t -= (r.unit() * 30.0 * hour as f64) as i64 + 600_000;
            }
            recent.reverse();
            let raw = (r.unit() - 0.5) * 0.8;
            PlayerState {
                player_id: format!("p{i:08}"),
                raw_skill: raw,
                win_skill: 4.0 * raw,
                win_mass: r.unit() * n as f64,
                percentile: r.unit(),
                games: n as u64 + r.next() % 200,
                churned_gaps: r.next() % (n as u64 + 1),
                last_seen_ms: recent.last().map_or(i64::MIN, |p| p.start_ms),
                first_seen_ms: recent
                    .first()
                    .map(|p| p.start_ms - (r.unit() * 2000.0) as i64 * hour),
                counts_as_of_ms: as_of_ms,
                window_counts: [0, 1, 2, 3].map(|k| {
                    recent
                        .iter()
                        .filter(|p| p.start_ms >= as_of_ms - crate::features::WINDOWS_MS[k])
                        .count() as u32
                }),
                recent,
                before_recent_ms: (n == history).then_some(t),
            }
        })
        .collect();
    list
}

/// A complete, valid artifact: its manifest (files not yet listed) and files.
#[must_use]
pub fn artifact(players: usize, seed: u64) -> (Manifest, Vec<(String, Vec<u8>)>) {
    let spec = FeatureSpec {
        past_churn_horizon_ms: Some(8 * 3_600_000),
        outcome_pattern: 3,
        ..FeatureSpec::default()
    };
    let names = spec.names();
    let mut r = Mix(seed ^ 0x5eed);
    let coef: Vec<f64> = names.iter().map(|_| (r.unit() - 0.5) * 0.2).collect();
    let churn = ChurnFile {
        horizon: "8h".into(),
        horizon_ms: 8 * 3_600_000,
        blowout_margin: 30.0,
        model: ChurnModel {
            spec,
            feature_names: names.clone(),
            mean: names.iter().map(|_| r.unit()).collect(),
            scale: names.iter().map(|_| 0.5 + r.unit()).collect(),
            coef,
            intercept: -1.3,
            c: 0.1,
            grid: vec![GridPoint {
                c: 0.1,
                cv_log_loss: 0.5,
                cv_auc: 0.6,
            }],
            rows: 1000,
            positives: 220,
            cv_rows: 1000,
            blowout: Some(BlowoutShift {
                close: -0.05,
                blowout: 0.4,
                losses: 480,
                blowouts: 60,
            }),
        },
    };
    let skills: Vec<f64> = (0..1000).map(|_| (r.unit() - 0.5) * 0.8).collect();
    let percentiles = PercentileMap::fit(&skills, 101).unwrap_or(PercentileMap {
        skill: vec![0.0, 1.0],
    });
    let team = TeamWinModel {
        basis: SkillBasis::RawSkill,
        skill_coef: 5.7,
        party_members_coef: 0.06,
        party_spread_coef: 1.7,
        draw: Some(DrawModel {
            intercept: -6.1,
            abs_diff_coef: -2.6,
        }),
        samples: 1000,
        draws: 3,
        blowout: Some(BlowoutModel {
            margin: 30.0,
            intercept: -2.0,
            coef: -1.2,
            samples: 997,
            blowouts: 120,
        }),
    };
    let as_of = 1_706_486_385_000;
    let states = player_states(players, spec.history, as_of, seed);
    let files = vec![
        (
            SKILL_FILE.to_string(),
            json(&SkillFile {
                metric: "kills-per-enemy-death".into(),
                raw_skill: RawSkillParams::default(),
                party_offsets: team.party_adjustment(),
                win_update: None,
            }),
        ),
        (PERCENTILES_FILE.to_string(), json(&percentiles)),
        (TEAM_WIN_FILE.to_string(), json(&Some(team))),
        (PARTY_FILE.to_string(), json(&team.party_adjustment())),
        (CHURN_FILE.to_string(), json(&churn)),
        (
            PLAYERS_FILE.to_string(),
            write_snapshot(spec.history, &states, crate::snapshot::WinColumns::None)
                .unwrap_or_default(),
        ),
    ];
    let mut metrics = BTreeMap::new();
    metrics.insert("churn".to_string(), serde_json::json!({"auc": 0.61}));
    let manifest = Manifest {
        format_version: FORMAT_VERSION,
        min_reader_format: MIN_READER_FORMAT,
        name: "synthetic".into(),
        model_version: String::new(),
        created_at: "2026-01-01T00:00:00Z".into(),
        code_version: "test".into(),
        mode: Some("tdm-6v6".into()),
        data: DataWindow {
            lake: "synthetic".into(),
            lake_version: None,
            first_match_ms: as_of - 28 * 86_400_000,
            last_match_ms: as_of,
            rows: 0,
            matches: 0,
            players: players as u64,
            churn_train_rows: 1000,
            churn_censored_rows: 0,
        },
        snapshot_as_of_ms: as_of,
        feature_names: names,
        metrics,
        files: Vec::new(),
    };
    (manifest, files)
}
