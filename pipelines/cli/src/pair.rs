//! `mm pair`: solve one 1v1 pool from disk with one or every pairing policy.

use std::path::{Path, PathBuf};

use anyhow::Result;
use mm_matcher::blossom::{DenseBlossom, SolveStats};
use mm_matcher::pairing::PairPolicy;
use mm_matcher::pool::{self, Pool, PoolFileError, read_ids};
use serde::Serialize;

use crate::args::{Output, PairArgs, PolicyArg};

/// A pool scored by an artifact (a version directory, or a model directory's LATEST).
fn read_with_artifact(players: &Path, dir: &Path, now_ms: Option<i64>) -> Result<Pool> {
    // A URL (s3://…/models/NAME or …/NAME/VERSION) is read through its local mirror.
    let local = mm_lake::mirror::localize(dir)?;
    let dir = local.as_path();
    let art = mm_artifact::Store::open_any(dir)?;
    tracing::Span::current().record("model_version", art.manifest.model_version.as_str());
    tracing::info!("pairing with {}", dir.display());
    let ids = read_ids(players)?;
    let n = ids.len();
    let now = now_ms.unwrap_or(art.manifest.snapshot_as_of_ms);
    let (pool, unknown) = Pool::with_artifact(&art, dir, ids, now)?;
    if unknown > 0 {
        eprintln!(
            "mm pair: {unknown} of {n} players are not in the artifact's snapshot; scored as new players"
        );
    }
    Ok(pool)
}

#[derive(Serialize)]
#[serde(untagged)]
enum Objective {
    Int(i64),
    Float(f64),
}

#[derive(Serialize)]
struct PolicyResult {
    policy: &'static str,
    objective: Objective,
    pairs: Vec<[String; 2]>,
    waiting: Option<String>,
    solve_seconds: f64,
    /// Exact policies only: whether the LP dual certificate was checked and held.
    #[serde(skip_serializing_if = "Option::is_none")]
    certified: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stats: Option<Stats>,
}

#[derive(Serialize)]
struct Stats {
    warm_matched: usize,
    augmentations: usize,
    dual_updates: usize,
    blossoms: usize,
    expansions: usize,
}

impl From<SolveStats> for Stats {
    fn from(s: SolveStats) -> Self {
        Stats {
            warm_matched: s.warm_matched,
            augmentations: s.stages,
            dual_updates: s.dual_updates,
            blossoms: s.blossoms,
            expansions: s.expansions,
        }
    }
}

#[derive(Serialize)]
struct Report {
    input: String,
    players: usize,
    results: Vec<PolicyResult>,
}

pub fn run(a: &PairArgs, out: &Output) -> Result<()> {
    if !(0.0..1.0).contains(&a.p_draw) || !a.elo_scale.is_finite() || a.elo_scale <= 0.0 {
        anyhow::bail!(PoolFileError {
            file: PathBuf::from("(flags)"),
            message: "--p-draw must be in [0, 1) and --elo-scale positive".into(),
        });
    }
    let (path, pool) = match (&a.costs, &a.players) {
        (Some(p), _) => (p, Pool::read_costs(p)?),
        (None, Some(p)) => match &a.artifact {
            Some(dir) => (p, read_with_artifact(p, dir, a.now_ms)?),
            None => (p, Pool::read_players(p, a.p_draw, a.elo_scale)?),
        },
        (None, None) => unreachable!("clap requires one input"),
    };
    let policies: Vec<PairPolicy> = match a.policy {
        PolicyArg::Eomm => vec![PairPolicy::Eomm],
        PolicyArg::Worst => vec![PairPolicy::Worst],
        PolicyArg::Skill => vec![PairPolicy::Skill],
        PolicyArg::Random => vec![PairPolicy::Random { seed: a.seed }],
        PolicyArg::Greedy => vec![PairPolicy::Greedy],
        PolicyArg::All => {
            let mut v = vec![
                PairPolicy::Eomm,
                PairPolicy::Greedy,
                PairPolicy::Random { seed: a.seed },
                PairPolicy::Worst,
            ];
            if matches!(pool, Pool::Float { .. }) {
                v.insert(2, PairPolicy::Skill);
            }
            v
        }
    };
    let mut solver = DenseBlossom::new();
    let mut results = Vec::new();
    for policy in policies {
        let s = pool::solve(&pool, path, policy, a.verify, &mut solver)?;
        let ids = pool.ids();
        results.push(PolicyResult {
            policy: policy.name(),
            objective: match s.objective {
                pool::Objective::Int(x) => Objective::Int(x),
                pool::Objective::Float(x) => Objective::Float(x),
            },
            pairs: s
                .pairs
                .iter()
                .map(|&(i, j)| [ids[i].clone(), ids[j].clone()])
                .collect(),
            waiting: s.waiting.map(|i| ids[i].clone()),
            solve_seconds: s.solve_seconds,
            certified: s.certified,
            stats: s.stats.map(Stats::from),
        });
    }
    let players = pool.ids().len();
    let report = Report {
        input: path.display().to_string(),
        players,
        results,
    };
    if out.json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    mm_run::outln!("{}: {} players", report.input, report.players);
    for r in &report.results {
        let obj = match r.objective {
            Objective::Int(x) => x.to_string(),
            Objective::Float(x) => format!("{x:.9}"),
        };
        let cert = match r.certified {
            Some(true) => ", optimality certificate verified",
            Some(false) => ", CERTIFICATE CHECK FAILED",
            None => "",
        };
        mm_run::outln!(
            "{:<7} objective {obj}  pairs {}  waiting {}  solve {:.3} ms{cert}",
            r.policy,
            r.pairs.len(),
            r.waiting.as_deref().unwrap_or("-"),
            r.solve_seconds * 1e3
        );
        if !a.summary {
            for [i, j] in &r.pairs {
                mm_run::outln!("  {i} {j}");
            }
        }
    }
    if report.results.iter().any(|r| r.certified == Some(false)) {
        anyhow::bail!("an optimality certificate did not verify");
    }
    Ok(())
}
