//! `mm pair`: solve one 1v1 pool from disk with one or every pairing policy.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;
use mm_matcher::blossom::{DenseBlossom, SolveStats};
use mm_matcher::from_artifact::ArtifactPool;
use mm_matcher::pairing::{self, PairPolicy, Pairing};
use mm_matcher::scoring::{EloDraw, TabularChurn, eomm_matrix};
use serde::Serialize;

use crate::args::{Output, PairArgs, PolicyArg};

/// Bad input to `mm pair` (exit code 2): names the file and, where it applies, row and field.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct InputError {
    pub file: PathBuf,
    pub message: String,
}

fn input_error(file: &Path, message: impl Into<String>) -> anyhow::Error {
    InputError {
        file: file.to_path_buf(),
        message: message.into(),
    }
    .into()
}

/// A pool as loaded: player ids, and integer or float weights.
enum Pool {
    Int {
        ids: Vec<String>,
        w: Vec<i64>,
    },
    Float {
        ids: Vec<String>,
        w: Vec<f64>,
        skills: Vec<f64>,
    },
}

fn read_costs(path: &Path) -> Result<Pool> {
    let bytes = std::fs::read(path).map_err(|e| input_error(path, e.to_string()))?;
    let (n, w) = pairing::costs_from_le_i32(&bytes).map_err(|e| input_error(path, e))?;
    Ok(Pool::Int {
        ids: (0..n).map(|i| i.to_string()).collect(),
        w,
    })
}

fn read_players(path: &Path, p_draw: f64, scale: f64) -> Result<Pool> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| input_error(path, e.to_string()))?;
    let headers = rdr
        .headers()
        .map_err(|e| input_error(path, e.to_string()))?
        .clone();
    let col = |names: &[&str]| {
        headers
            .iter()
            .position(|h| names.iter().any(|n| h.trim().eq_ignore_ascii_case(n)))
            .ok_or_else(|| input_error(path, format!("missing column `{}`", names[0])))
    };
    let (ci, cs) = (col(&["id", "player_id"])?, col(&["skill"])?);
    let (cw, cd, cl) = (
        col(&["c_win"])?,
        col(&["c_draw"])?,
        col(&["c_lose", "c_loss"])?,
    );
    let (mut ids, mut skills, mut churn) = (Vec::new(), Vec::new(), Vec::new());
    for (k, rec) in rdr.records().enumerate() {
        let line = k + 2;
        let rec = rec.map_err(|e| input_error(path, format!("line {line}: {e}")))?;
        let num = |c: usize, name: &str, unit: bool| -> Result<f64> {
            let raw = rec.get(c).unwrap_or("");
            let v: f64 = raw.trim().parse().map_err(|_| {
                input_error(
                    path,
                    format!("line {line}, field `{name}`: `{raw}` is not a number"),
                )
            })?;
            if !v.is_finite() || (unit && !(0.0..=1.0).contains(&v)) {
                let want = if unit {
                    "a probability in [0, 1]"
                } else {
                    "finite"
                };
                return Err(input_error(
                    path,
                    format!("line {line}, field `{name}`: {v} is not {want}"),
                ));
            }
            Ok(v)
        };
        ids.push(rec.get(ci).unwrap_or("").to_string());
        skills.push(num(cs, "skill", false)?);
        churn.push([
            num(cw, "c_win", true)?,
            num(cd, "c_draw", true)?,
            num(cl, "c_lose", true)?,
        ]);
    }
    let n = ids.len();
    let win = EloDraw {
        skills: skills.clone(),
        p_draw,
        scale,
    };
    let w = eomm_matrix(n, &win, &TabularChurn { by_outcome: churn });
    Ok(Pool::Float { ids, w, skills })
}

/// The `id` (or `player_id`) column of a CSV.
fn read_ids(path: &Path) -> Result<Vec<String>> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| input_error(path, e.to_string()))?;
    let headers = rdr
        .headers()
        .map_err(|e| input_error(path, e.to_string()))?
        .clone();
    let c = headers
        .iter()
        .position(|h| {
            ["id", "player_id"]
                .iter()
                .any(|n| h.trim().eq_ignore_ascii_case(n))
        })
        .ok_or_else(|| input_error(path, "missing column `id`"))?;
    let mut ids = Vec::new();
    for (k, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| input_error(path, format!("line {}: {e}", k + 2)))?;
        let id = rec.get(c).unwrap_or("").trim().to_string();
        if id.is_empty() {
            return Err(input_error(
                path,
                format!("line {}, field `id`: empty", k + 2),
            ));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// A pool scored by an artifact (a version directory, or a model directory's LATEST).
fn read_with_artifact(players: &Path, dir: &Path, now_ms: Option<i64>) -> Result<Pool> {
    // A URL (s3://…/models/NAME or …/NAME/VERSION) is read through its local mirror.
    let local = mm_lake::mirror::localize(dir)?;
    let dir = local.as_path();
    let art = if dir.join("manifest.json").exists() {
        mm_artifact::Artifact::open(dir)?
    } else {
        mm_artifact::Store::new(dir).open_latest()?
    };
    let ids = read_ids(players)?;
    let now = now_ms.unwrap_or(art.manifest.snapshot_as_of_ms);
    let pool = ArtifactPool::new(&art, &ids, now).map_err(|e| input_error(dir, e.to_string()))?;
    if !pool.unknown.is_empty() {
        eprintln!(
            "mm pair: {} of {} players are not in the artifact's snapshot; scored as new players",
            pool.unknown.len(),
            ids.len()
        );
    }
    let w = eomm_matrix(ids.len(), &pool, &pool);
    Ok(Pool::Float {
        ids,
        w,
        skills: pool.skills,
    })
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
        anyhow::bail!(InputError {
            file: PathBuf::from("(flags)"),
            message: "--p-draw must be in [0, 1) and --elo-scale positive".into(),
        });
    }
    let (path, pool) = match (&a.costs, &a.players) {
        (Some(p), _) => (p, read_costs(p)?),
        (None, Some(p)) => match &a.artifact {
            Some(dir) => (p, read_with_artifact(p, dir, a.now_ms)?),
            None => (p, read_players(p, a.p_draw, a.elo_scale)?),
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
        let exact = matches!(policy, PairPolicy::Eomm | PairPolicy::Worst);
        let maximise = policy == PairPolicy::Worst;
        let t = Instant::now();
        let (ids, pairs, waiting, objective, problem) = match &pool {
            Pool::Int { ids, w } => {
                let n = ids.len();
                let p: Pairing<i64> = pairing::pair_i64(policy, n, w, None, &mut solver)
                    .map_err(|e| input_error(path, e.to_string()))?;
                let problem = (exact && a.verify).then(|| pairing::exact_problem(n, w, maximise));
                (
                    ids,
                    p.pairs,
                    p.waiting,
                    Objective::Int(p.objective),
                    problem,
                )
            }
            Pool::Float { ids, w, skills } => {
                let n = ids.len();
                let p = pairing::pair_f64(policy, n, w, Some(skills), &mut solver)
                    .map_err(|e| input_error(path, e.to_string()))?;
                let problem = (exact && a.verify)
                    .then(|| pairing::exact_problem(n, &pairing::quantise(n, w), maximise));
                (
                    ids,
                    p.pairs,
                    p.waiting,
                    Objective::Float(p.objective),
                    problem,
                )
            }
        };
        let solve_seconds = t.elapsed().as_secs_f64();
        let certified = problem.map(|(m, cost)| {
            m < 2
                || solver
                    .certificate()
                    .verify(m, &cost, &solver.last_mate())
                    .is_ok()
        });
        results.push(PolicyResult {
            policy: policy.name(),
            objective,
            pairs: pairs
                .iter()
                .map(|&(i, j)| [ids[i].clone(), ids[j].clone()])
                .collect(),
            waiting: waiting.map(|i| ids[i].clone()),
            solve_seconds,
            certified,
            stats: (exact && ids.len() >= 2).then(|| solver.stats().into()),
        });
    }
    let players = match &pool {
        Pool::Int { ids, .. } | Pool::Float { ids, .. } => ids.len(),
    };
    let report = Report {
        input: path.display().to_string(),
        players,
        results,
    };
    if out.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("{}: {} players", report.input, report.players);
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
        println!(
            "{:<7} objective {obj}  pairs {}  waiting {}  solve {:.3} ms{cert}",
            r.policy,
            r.pairs.len(),
            r.waiting.as_deref().unwrap_or("-"),
            r.solve_seconds * 1e3
        );
        if !a.summary {
            for [i, j] in &r.pairs {
                println!("  {i} {j}");
            }
        }
    }
    if report.results.iter().any(|r| r.certified == Some(false)) {
        anyhow::bail!("an optimality certificate did not verify");
    }
    Ok(())
}
