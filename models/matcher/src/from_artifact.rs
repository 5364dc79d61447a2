//! Scoring a 1v1 pool with an exported artifact ([`mm_artifact::Artifact`]): the team win model
//! gives each pairing's outcome probabilities, the churn model each player's churn after a win, a
//! draw and a loss, from the player's state in the snapshot at the time of the search.

use mm_artifact::Artifact;
use mm_artifact::snapshot::{PlayerState, features_of};
use mm_artifact::team::TeamSample;

use crate::Outcome;
use crate::blossom::DenseBlossom;
use crate::pairing::{PairPolicy, Pairing, PairingError, pair_f64};
use crate::scoring::{ChurnModel, OutcomeProbs, TabularChurn, WinModel, eomm_matrix};

/// Why a pool cannot be scored with an artifact.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArtifactScoringError {
    #[error("the artifact has no team win model (too few matches when it was fitted)")]
    NoWinModel,
    #[error("player id {0:?} is empty")]
    EmptyId(usize),
}

/// The models of an artifact bound to one pool of players.
#[derive(Debug, Clone)]
pub struct ArtifactPool {
    win: mm_artifact::team::TeamWinModel,
    /// Raw skill per player (SkillMM's order, disparity).
    pub skills: Vec<f64>,
    /// The skill the team win model reads per player (raw skill, or the win skill when the
    /// artifact's model reads it).
    pub outcome_skills: Vec<f64>,
    /// Churn per player after a win, a draw and a loss.
    pub churn: TabularChurn,
    /// Players the snapshot did not hold (scored as new players).
    pub unknown: Vec<usize>,
}

impl ArtifactPool {
    /// Binds the artifact to the pool `ids`, searching at `now_ms` (solo queue). A player the
    /// snapshot does not hold is a new player: raw skill 0 (where every player starts), its
    /// percentile from the artifact's table, no history.
    ///
    /// # Errors
    /// The artifact has no win model, or an id is empty.
    pub fn new(art: &Artifact, ids: &[String], now_ms: i64) -> Result<Self, ArtifactScoringError> {
        Self::with_states(art, ids, &[], now_ms)
    }

    /// [`ArtifactPool::new`] with the players' states where a service knows them fresher than
    /// the snapshot (`states[k]` for `ids[k]`, `None` or missing: the snapshot's or a new
    /// player's); a player with a state is not unknown.
    ///
    /// # Errors
    /// The artifact has no win model, or an id is empty.
    pub fn with_states(
        art: &Artifact,
        ids: &[String],
        states: &[Option<PlayerState>],
        now_ms: i64,
    ) -> Result<Self, ArtifactScoringError> {
        let win = art.team_win.ok_or(ArtifactScoringError::NoWinModel)?;
        let spec = art.churn.model.spec;
        let mut skills = Vec::with_capacity(ids.len());
        let mut outcome_skills = Vec::with_capacity(ids.len());
        let mut churn = Vec::with_capacity(ids.len());
        let mut unknown = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            if id.is_empty() {
                return Err(ArtifactScoringError::EmptyId(i));
            }
            let given = states.get(i).and_then(Option::as_ref);
            if given.is_none() && art.snapshot.position(id).is_none() {
                unknown.push(i);
            }
            let p = given.cloned().unwrap_or_else(|| art.player_or_new(id));
            skills.push(p.raw_skill);
            outcome_skills.push(art.outcome_skill(&p));
            let row = features_of(&spec, &p, now_ms, false, Outcome::Win);
            churn.push(art.churn.model.counterfactual(&row));
        }
        Ok(ArtifactPool {
            win,
            skills,
            outcome_skills,
            churn: TabularChurn { by_outcome: churn },
            unknown,
        })
    }
}

impl ArtifactPool {
    /// The pool of these members (already scored from the artifact, see
    /// [`crate::queue::Member::lookup`]) under the artifact's team win model `win`.
    #[must_use]
    pub fn from_members<'a>(
        win: mm_artifact::team::TeamWinModel,
        members: impl IntoIterator<Item = &'a crate::queue::Member>,
    ) -> Self {
        let (mut skills, mut outcome_skills, mut churn) = (Vec::new(), Vec::new(), Vec::new());
        for m in members {
            skills.push(m.raw_skill);
            outcome_skills.push(m.outcome_skill);
            churn.push(m.churn);
        }
        ArtifactPool {
            win,
            skills,
            outcome_skills,
            churn: TabularChurn { by_outcome: churn },
            unknown: Vec::new(),
        }
    }
}

/// A 1v1 pool paired with an artifact ([`pair_pool`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolPairing {
    /// Pairs of positions in the pool's ids, the player left waiting (odd pools), and the
    /// expected number of players who churn after these games.
    pub pairing: Pairing<f64>,
    /// Positions of the players the snapshot did not hold (scored as new players).
    pub unknown: Vec<usize>,
}

/// Why [`pair_pool`] could not pair a pool.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PairPoolError {
    #[error(transparent)]
    Scoring(#[from] ArtifactScoringError),
    #[error(transparent)]
    Pairing(#[from] PairingError),
}

/// Pairs the players `ids`, searching at `now_ms`, by `policy` with the artifact's models: the
/// service facade over [`ArtifactPool`], [`eomm_matrix`] and [`pair_f64`]. Every policy's
/// objective is the pool's expected churn under the artifact; SkillMM sorts by raw skill.
///
/// # Errors
/// The artifact has no win model, an id is empty, or the solver refuses the weights.
pub fn pair_pool(
    art: &Artifact,
    ids: &[String],
    now_ms: i64,
    policy: PairPolicy,
) -> Result<PoolPairing, PairPoolError> {
    pair_pool_with(art, ids, &[], now_ms, policy)
}

/// [`pair_pool`] with the players' states where a service knows them fresher than the snapshot
/// (see [`ArtifactPool::with_states`]).
///
/// # Errors
/// As [`pair_pool`].
pub fn pair_pool_with(
    art: &Artifact,
    ids: &[String],
    states: &[Option<PlayerState>],
    now_ms: i64,
    policy: PairPolicy,
) -> Result<PoolPairing, PairPoolError> {
    let pool = ArtifactPool::with_states(art, ids, states, now_ms)?;
    let n = ids.len();
    let w = eomm_matrix(n, &pool, &pool);
    let pairing = pair_f64(policy, n, &w, Some(&pool.skills), &mut DenseBlossom::new())?;
    Ok(PoolPairing {
        pairing,
        unknown: pool.unknown,
    })
}

impl WinModel for ArtifactPool {
    fn outcome_probs(&self, i: usize, j: usize) -> OutcomeProbs {
        let (win, draw, loss) = self.win.probs(&TeamSample {
            skill_diff: self.outcome_skills[i] - self.outcome_skills[j],
            ..TeamSample::default()
        });
        OutcomeProbs { win, draw, loss }
    }

    fn skill(&self, i: usize) -> f64 {
        self.skills[i]
    }
}

impl ChurnModel for ArtifactPool {
    fn churn(&self, i: usize, outcome: Outcome) -> f64 {
        self.churn.churn(i, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blossom::DenseBlossom;
    use crate::pairing::{PairPolicy, pair_f64};
    use crate::scoring::eomm_matrix;

    #[test]
    fn a_synthetic_artifact_scores_and_pairs_a_pool() {
        let dir = std::env::temp_dir().join(format!("mm-matcher-art-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = mm_artifact::Store::new(&dir);
        let (m, files) = mm_artifact::synthetic::artifact(200, 5);
        store.publish("v1", m, &files, true, None).expect("publish");
        let art = store.open_latest().expect("load");
        let mut ids: Vec<String> = (0..40)
            .map(|i| art.snapshot.id(i * 5).to_string())
            .collect();
        ids.push("newcomer".into());
        ids.push("p99999999".into());
        let now = art.manifest.snapshot_as_of_ms + 3_600_000;
        let pool = ArtifactPool::new(&art, &ids, now).expect("pool");
        assert_eq!(pool.unknown, vec![40, 41]);
        for i in 0..ids.len() {
            // Churn is the artifact's model on the player's state, outcome by outcome.
            let p = art.snapshot.get(&ids[i]);
            if let Some(p) = p {
                for (k, o) in [Outcome::Win, Outcome::Draw, Outcome::Loss]
                    .into_iter()
                    .enumerate()
                {
                    let row = features_of(&art.churn.model.spec, &p, now, false, o);
                    assert!((pool.churn(i, o) - art.churn.model.predict(&row)).abs() < 1e-12);
                    assert!(pool.churn.by_outcome[i][k] > 0.0 && pool.churn.by_outcome[i][k] < 1.0);
                }
            }
            // The win model reads the artifact's outcome skill (raw skill here).
            let p = art.player_or_new(&ids[i]);
            assert_eq!(pool.outcome_skills[i], art.outcome_skill(&p));
            assert_eq!(pool.skills[i], p.raw_skill);
            for (j, id_j) in ids.iter().enumerate() {
                let q = art.player_or_new(id_j);
                let (w, _, _) = art.team_win.unwrap().probs(&TeamSample {
                    skill_diff: art.outcome_skill(&p) - art.outcome_skill(&q),
                    ..TeamSample::default()
                });
                assert_eq!(pool.outcome_probs(i, j).win, w);
                let a = pool.outcome_probs(i, j);
                let b = pool.outcome_probs(j, i);
                assert!((a.win + a.draw + a.loss - 1.0).abs() < 1e-12);
                assert!((a.win - b.loss).abs() < 1e-12 && (a.draw - b.draw).abs() < 1e-12);
            }
        }
        let n = ids.len();
        let w = eomm_matrix(n, &pool, &pool);
        let mut solver = DenseBlossom::new();
        let eomm = pair_f64(PairPolicy::Eomm, n, &w, None, &mut solver).expect("eomm");
        let worst = pair_f64(PairPolicy::Worst, n, &w, None, &mut solver).expect("worst");
        let skill =
            pair_f64(PairPolicy::Skill, n, &w, Some(&pool.skills), &mut solver).expect("skill");
        assert_eq!(eomm.pairs.len(), n / 2);
        assert!(eomm.objective <= skill.objective && skill.objective <= worst.objective);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A format-6 artifact's lobby models weigh blowouts, and team EOMM's default bound for
    /// them is the wider one; without the churn model's blowout shift the team model's blowout
    /// model is dropped (it would weigh nothing) and the bound is the narrower one. Members
    /// carry the churn after a close and after a blowout loss, around the plain loss's.
    #[test]
    fn an_artifact_weighs_blowouts_only_with_both_fits() {
        use crate::eomm_teams::{BALANCE, BALANCE_WITH_BLOWOUTS, EommTeamsConfig};
        use crate::queue::{Backoff, LobbyModels, Member};
        let dir = std::env::temp_dir().join(format!("mm-matcher-blow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = mm_artifact::Store::new(&dir);
        let (m, files) = mm_artifact::synthetic::artifact(50, 3);
        store.publish("v1", m, &files, true, None).expect("publish");
        let mut art = store.open_latest().expect("load");
        let models = LobbyModels::from_artifact(&art).expect("team model");
        assert!(models.win.blowout.is_some());
        assert_eq!(
            EommTeamsConfig::for_models(6, &models).balance,
            Some(Backoff::new(&BALANCE_WITH_BLOWOUTS))
        );
        let now = art.manifest.snapshot_as_of_ms + 3_600_000;
        let member = Member::lookup(&art, art.snapshot.id(0), now, false);
        let [close, blowout] = member.churn_by_loss.expect("both losses");
        assert!(
            close < member.churn[2] && member.churn[2] < blowout,
            "{member:?}"
        );

        art.churn.model.blowout = None;
        let models = LobbyModels::from_artifact(&art).expect("team model");
        assert!(models.win.blowout.is_none());
        assert_eq!(
            EommTeamsConfig::for_models(6, &models).balance,
            Some(Backoff::new(&BALANCE))
        );
        assert_eq!(
            Member::lookup(&art, art.snapshot.id(0), now, false).churn_by_loss,
            None
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
