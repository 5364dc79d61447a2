//! 1v1 pools from files, and solving them with a pairing policy (`mm pair`).
//!
//! Three inputs: a peers' cost matrix (`pools/*.i32`, square little-endian int32), a players
//! CSV with skill and churn after each outcome (`id, skill, c_win, c_draw, c_lose`, scored by
//! an Elo-with-draws win model), or a CSV of player ids scored by an exported artifact. Bad
//! input is a [`PoolFileError`] naming the file and, where it applies, the line and field.

use std::path::{Path, PathBuf};
use std::time::Instant;

use mm_artifact::Artifact;

use crate::blossom::{DenseBlossom, SolveStats};
use crate::from_artifact::ArtifactPool;
use crate::pairing::{self, PairPolicy, Pairing};
use crate::scoring::{EloDraw, TabularChurn, eomm_matrix};

/// A pool file that cannot be used: the file and what is wrong (line and field where known).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct PoolFileError {
    pub file: PathBuf,
    pub message: String,
}

fn bad(file: &Path, message: impl Into<String>) -> PoolFileError {
    PoolFileError {
        file: file.to_path_buf(),
        message: message.into(),
    }
}

/// A pool as loaded: player ids, and integer or float weights (row-major `n x n`).
#[derive(Debug, Clone, PartialEq)]
pub enum Pool {
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

impl Pool {
    #[must_use]
    pub fn ids(&self) -> &[String] {
        match self {
            Pool::Int { ids, .. } | Pool::Float { ids, .. } => ids,
        }
    }

    /// Reads a peers' cost matrix; the players are named `0..n`.
    ///
    /// # Errors
    /// The file cannot be read, or is not a square int32 matrix.
    pub fn read_costs(path: &Path) -> Result<Pool, PoolFileError> {
        let bytes = std::fs::read(path).map_err(|e| bad(path, e.to_string()))?;
        let (n, w) = pairing::costs_from_le_i32(&bytes).map_err(|e| bad(path, e))?;
        Ok(Pool::Int {
            ids: (0..n).map(|i| i.to_string()).collect(),
            w,
        })
    }

    /// Reads a players CSV (`id` or `player_id`, `skill`, `c_win`, `c_draw`, `c_lose` or
    /// `c_loss`) and weighs it by EOMM under an Elo model with draws.
    ///
    /// # Errors
    /// A missing column, a value that is not a number, a churn outside [0, 1].
    pub fn read_players(path: &Path, p_draw: f64, scale: f64) -> Result<Pool, PoolFileError> {
        let mut rdr = csv::Reader::from_path(path).map_err(|e| bad(path, e.to_string()))?;
        let headers = rdr.headers().map_err(|e| bad(path, e.to_string()))?.clone();
        let col = |names: &[&str]| column(&headers, names).ok_or_else(|| missing(path, names));
        let (ci, cs) = (col(&["id", "player_id"])?, col(&["skill"])?);
        let (cw, cd, cl) = (
            col(&["c_win"])?,
            col(&["c_draw"])?,
            col(&["c_lose", "c_loss"])?,
        );
        let (mut ids, mut skills, mut churn) = (Vec::new(), Vec::new(), Vec::new());
        for (k, rec) in rdr.records().enumerate() {
            let line = k + 2;
            let rec = rec.map_err(|e| bad(path, format!("line {line}: {e}")))?;
            let num = |c: usize, name: &str, unit: bool| -> Result<f64, PoolFileError> {
                let raw = rec.get(c).unwrap_or("");
                let v: f64 = raw.trim().parse().map_err(|_| {
                    bad(
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
                    return Err(bad(
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

    /// Scores the players `ids` with an artifact at `now_ms` (see [`ArtifactPool`]); also
    /// returns how many the snapshot did not hold (scored as new players).
    ///
    /// # Errors
    /// The artifact cannot score the pool (no win model, an empty id); the error names `dir`.
    pub fn with_artifact(
        art: &Artifact,
        dir: &Path,
        ids: Vec<String>,
        now_ms: i64,
    ) -> Result<(Pool, usize), PoolFileError> {
        let pool = ArtifactPool::new(art, &ids, now_ms).map_err(|e| bad(dir, e.to_string()))?;
        let w = eomm_matrix(ids.len(), &pool, &pool);
        let unknown = pool.unknown.len();
        Ok((
            Pool::Float {
                ids,
                w,
                skills: pool.skills,
            },
            unknown,
        ))
    }
}

fn column(headers: &csv::StringRecord, names: &[&str]) -> Option<usize> {
    headers
        .iter()
        .position(|h| names.iter().any(|n| h.trim().eq_ignore_ascii_case(n)))
}

fn missing(path: &Path, names: &[&str]) -> PoolFileError {
    bad(path, format!("missing column `{}`", names[0]))
}

/// The `id` (or `player_id`) column of a CSV, every value non-empty.
///
/// # Errors
/// The file cannot be read, has no id column, or an id is empty.
pub fn read_ids(path: &Path) -> Result<Vec<String>, PoolFileError> {
    let mut rdr = csv::Reader::from_path(path).map_err(|e| bad(path, e.to_string()))?;
    let headers = rdr.headers().map_err(|e| bad(path, e.to_string()))?.clone();
    let c = column(&headers, &["id", "player_id"]).ok_or_else(|| missing(path, &["id"]))?;
    let mut ids = Vec::new();
    for (k, rec) in rdr.records().enumerate() {
        let rec = rec.map_err(|e| bad(path, format!("line {}: {e}", k + 2)))?;
        let id = rec.get(c).unwrap_or("").trim().to_string();
        if id.is_empty() {
            return Err(bad(path, format!("line {}, field `id`: empty", k + 2)));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// The total weight of a solved pool, in the pool's own number type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Objective {
    Int(i64),
    Float(f64),
}

/// One policy's solution of a pool.
#[derive(Debug, Clone)]
pub struct Solved {
    pub policy: PairPolicy,
    pub objective: Objective,
    /// Pairs of positions in the pool's ids.
    pub pairs: Vec<(usize, usize)>,
    pub waiting: Option<usize>,
    pub solve_seconds: f64,
    /// Exact policies with `verify`: whether the LP dual certificate held.
    pub certified: Option<bool>,
    /// Exact policies: the solver's counters.
    pub stats: Option<SolveStats>,
}

/// Solves `pool` with `policy`. With `verify`, an exact policy's optimality is checked against
/// the solver's LP dual certificate on the exact integer problem it solved.
///
/// # Errors
/// The solver refuses the weights (the error names `file`).
pub fn solve(
    pool: &Pool,
    file: &Path,
    policy: PairPolicy,
    verify: bool,
    solver: &mut DenseBlossom,
) -> Result<Solved, PoolFileError> {
    let exact = matches!(policy, PairPolicy::Eomm | PairPolicy::Worst);
    let maximise = policy == PairPolicy::Worst;
    let t = Instant::now();
    let n = pool.ids().len();
    let (pairs, waiting, objective, problem) = match pool {
        Pool::Int { w, .. } => {
            let p: Pairing<i64> = pairing::pair_i64(policy, n, w, None, solver)
                .map_err(|e| bad(file, e.to_string()))?;
            let problem = (exact && verify).then(|| pairing::exact_problem(n, w, maximise));
            (p.pairs, p.waiting, Objective::Int(p.objective), problem)
        }
        Pool::Float { w, skills, .. } => {
            let p = pairing::pair_f64(policy, n, w, Some(skills), solver)
                .map_err(|e| bad(file, e.to_string()))?;
            let problem = (exact && verify)
                .then(|| pairing::exact_problem(n, &pairing::quantise(n, w), maximise));
            (p.pairs, p.waiting, Objective::Float(p.objective), problem)
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
    Ok(Solved {
        policy,
        objective,
        pairs,
        waiting,
        solve_seconds,
        certified,
        stats: (exact && n >= 2).then(|| solver.stats()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("mm-pool-{}-{name}", std::process::id()));
        std::fs::write(&p, text).expect("write");
        p
    }

    #[test]
    fn a_players_csv_is_paired_and_certified() {
        let p = write(
            "ok.csv",
            "id,skill,c_win,c_draw,c_lose\na,1500,0.2,0.3,0.5\nb,1520,0.2,0.25,0.3\n\
             c,1900,0.4,0.4,0.9\nd,1100,0.1,0.2,0.2\n",
        );
        let pool = Pool::read_players(&p, 0.2, 400.0).expect("pool");
        assert_eq!(pool.ids(), ["a", "b", "c", "d"]);
        let mut solver = DenseBlossom::new();
        let eomm = solve(&pool, &p, PairPolicy::Eomm, true, &mut solver).expect("eomm");
        let skill = solve(&pool, &p, PairPolicy::Skill, true, &mut solver).expect("skill");
        assert_eq!(eomm.pairs.len(), 2);
        assert_eq!(eomm.certified, Some(true));
        assert_eq!(skill.certified, None);
        let (Objective::Float(e), Objective::Float(s)) = (eomm.objective, skill.objective) else {
            panic!("float pools have float objectives")
        };
        assert!(e <= s + 1e-12, "EOMM is the minimum: {e} > {s}");
        let _ = std::fs::remove_file(p);
    }

    #[test]
    fn bad_rows_are_named_by_line_and_field() {
        let p = write(
            "bad.csv",
            "id,skill,c_win,c_draw,c_lose\na,1500,0.2,0.3,1.5\n",
        );
        let e = Pool::read_players(&p, 0.2, 400.0).expect_err("churn above 1");
        assert!(e.message.contains("line 2, field `c_lose`"), "{e}");
        let p2 = write("noskill.csv", "id,c_win,c_draw,c_lose\na,0.2,0.3,0.5\n");
        let e = Pool::read_players(&p2, 0.2, 400.0).expect_err("no skill column");
        assert!(e.message.contains("missing column `skill`"), "{e}");
        let p3 = write("ids.csv", "player_id\nx\n\n y \n");
        assert_eq!(read_ids(&p3).expect("ids"), ["x", "y"]);
        for f in [p, p2, p3] {
            let _ = std::fs::remove_file(f);
        }
    }
}
