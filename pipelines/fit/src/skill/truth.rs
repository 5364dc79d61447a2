//! The skill fit against a simulated lake's truth (`truth/players.parquet` and
//! `truth/params.json`, written by `mm simulate`). Lakes without them get no comparison.
//!
//! Raw skill and the simulator's latent skill are on different scales, so the fitted figures
//! are carried over with the slope of fitted raw skill on true skill (`raw_per_latent`), and
//! set beside the same team model fitted on the true skills (the oracle) and beside the
//! simulator's own party bonus, `party_base + party_spread × sd`.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Float64Type;
use mm_lake::Lake;
use mm_trainer::skill::raw::RawSkill;
use mm_trainer::skill::team::{FitTeamWinModel, TeamFitConfig, TeamSample, TeamWinModel};
use mm_trainer::stats::spearman;
use serde::{Deserialize, Serialize};

use crate::skill::history::History;
use crate::skill::replay::team_sample;

/// Players with fewer matches than this before the cutoff are left out of the comparison:
/// their raw skill has not settled.
pub const MIN_GAMES: u32 = 20;

/// The fitted skill models against the simulator's truth.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SkillTruth {
    /// Players compared (at least [`MIN_GAMES`] matches before the cutoff).
    pub players: u64,
    /// Spearman's rho of fitted raw skill and true skill at the end of the simulation.
    pub spearman: f64,
    /// Least-squares slope of fitted raw skill on true skill (raw units per latent unit).
    pub raw_per_latent: f64,
    /// The exported team model's skill coefficient in latent units (coefficient × slope).
    pub team_coef_latent: f64,
    /// The same team model fitted on the true skills.
    pub oracle_team_coef: f64,
    /// The party adjustment in latent units: per member (per-member term / slope) and per
    /// member per sd of the party's skills (a ratio, so unchanged by the slope).
    pub party_per_member_latent: Option<f64>,
    pub party_per_sd: Option<f64>,
    /// The oracle's party adjustment.
    pub oracle_party_per_member: Option<f64>,
    pub oracle_party_per_sd: Option<f64>,
    /// The simulator's party bonus: `party_base + party_spread × sd` (latent units).
    pub sim_party_base: Option<f64>,
    pub sim_party_spread: Option<f64>,
}

/// Compares `model` (whose players `ids` names) and `team` (the exported team model) with the
/// truth of the lake, when it has one; the oracle team model is fitted on the matches of `h`
/// (the whole history, or its first days). Unreadable or missing truth gives `None`, with a
/// debug line.
#[must_use]
pub fn compare(
    lake: &Lake,
    ids: &[String],
    h: &History,
    model: &RawSkill,
    team: Option<&TeamWinModel>,
    team_cfg: &TeamFitConfig,
) -> Option<SkillTruth> {
    let truth = match read_truth(lake) {
        Ok(t) => t?,
        Err(e) => {
            tracing::debug!("skill: no truth to compare with: {e}");
            return None;
        }
    };
    let team = team?;
    let states = model.players();
    let (mut fitted, mut true_skill) = (Vec::new(), Vec::new());
    for (i, id) in ids.iter().enumerate() {
        if let (Some(s), Some(&t)) = (states.get(i), truth.skill.get(id))
            && s.games >= MIN_GAMES
        {
            fitted.push(model.skill(i));
            true_skill.push(t);
        }
    }
    if fitted.len() < 10 {
        return None;
    }
    let n = fitted.len() as f64;
    let (mf, mt) = (
        fitted.iter().sum::<f64>() / n,
        true_skill.iter().sum::<f64>() / n,
    );
    let cov: f64 = fitted
        .iter()
        .zip(&true_skill)
        .map(|(f, t)| (f - mf) * (t - mt))
        .sum();
    let var: f64 = true_skill.iter().map(|t| (t - mt).powi(2)).sum();
    let slope = cov / var;
    // The oracle: every player's true skill in place of raw skill (0, the population mean,
    // for a player the truth does not list).
    let latent: Vec<f64> = h
        .ids
        .iter()
        .map(|id| truth.skill.get(id).copied().unwrap_or(0.0))
        .collect();
    let skill = |p: u32| latent[p as usize];
    let samples: Vec<TeamSample> = h
        .matches
        .iter()
        .filter(|m| m.two_teams())
        .map(|m| team_sample(h, m, &skill))
        .collect();
    let oracle = TeamWinModel::fit(&samples, team_cfg).ok()?;
    let ours_party = team.party_adjustment();
    let oracle_party = oracle.party_adjustment();
    Some(SkillTruth {
        players: fitted.len() as u64,
        spearman: spearman(&fitted, &true_skill),
        raw_per_latent: slope,
        team_coef_latent: team.skill_coef * slope,
        oracle_team_coef: oracle.skill_coef,
        party_per_member_latent: ours_party.map(|a| a.per_member / slope),
        party_per_sd: ours_party.map(|a| a.per_member_per_sd),
        oracle_party_per_member: oracle_party.map(|a| a.per_member),
        oracle_party_per_sd: oracle_party.map(|a| a.per_member_per_sd),
        sim_party_base: truth.party_base,
        sim_party_spread: truth.party_spread,
    })
}

struct Truth {
    skill: HashMap<String, f64>,
    party_base: Option<f64>,
    party_spread: Option<f64>,
}

/// The truth's players and constants, `None` when the lake has no `truth/players.parquet`.
fn read_truth(lake: &Lake) -> Result<Option<Truth>, Box<dyn std::error::Error>> {
    let path = lake.side_file("truth/players.parquet")?;
    if !path.is_file() {
        return Ok(None);
    }
    let mut skill = HashMap::new();
    for b in mm_lake::parquet_io::read_parquet_columns(&path, Some(&["player_id", "skill_end"]))? {
        let (Some(ids), Some(s)) = (b.column_by_name("player_id"), b.column_by_name("skill_end"))
        else {
            return Err(format!("{}: no player_id or skill_end column", path.display()).into());
        };
        let (ids, s) = (ids.as_string::<i32>(), s.as_primitive::<Float64Type>());
        for i in 0..b.num_rows() {
            skill.insert(ids.value(i).to_string(), s.value(i));
        }
    }
    let params: Option<serde_json::Value> = lake
        .side_file("truth/params.json")
        .ok()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok());
    let constant = |k: &str| params.as_ref().and_then(|p| p["constants"][k].as_f64());
    Ok(Some(Truth {
        skill,
        party_base: constant("party_base"),
        party_spread: constant("party_spread"),
    }))
}
