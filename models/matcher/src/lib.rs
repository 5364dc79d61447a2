//! # mm-matcher: the embeddable matcher
//!
//! Services embed this crate to turn pools of searches into matches, using models exported by
//! the trainer. It depends on the artifact crate and small pure crates only (serde, thiserror,
//! rand): no polars, linfa or ndarray (CI checks the dependency tree).
//!
//! The central operation is pairing a 1v1 pool by engagement (EOMM): every pair of players gets
//! the expected number of the two who churn after playing each other (a [`scoring::WinModel`]
//! gives the outcome probabilities, a [`scoring::ChurnModel`] the churn after each outcome), and
//! the pool is split into pairs of least total weight by an exact minimum-weight perfect
//! matching ([`blossom::DenseBlossom`], O(n³) on flat arrays). The baselines of the EOMM paper
//! and the team-balance steps of the Call of Duty paper live beside it.
//!
//! ```
//! use mm_matcher::blossom::DenseBlossom;
//! use mm_matcher::pairing::{pair_f64, PairPolicy};
//! use mm_matcher::scoring::{eomm_matrix, EloDraw, TabularChurn};
//!
//! // Four players: skills, and churn after a win, draw or loss.
//! let win = EloDraw { skills: vec![1500.0, 1520.0, 1900.0, 1100.0], p_draw: 0.2, scale: 400.0 };
//! let churn = TabularChurn {
//!     by_outcome: vec![[0.2, 0.3, 0.5], [0.2, 0.25, 0.3], [0.4, 0.4, 0.9], [0.1, 0.2, 0.2]],
//! };
//! let w = eomm_matrix(4, &win, &churn);
//! let mut solver = DenseBlossom::new();
//! let eomm = pair_f64(PairPolicy::Eomm, 4, &w, None, &mut solver).unwrap();
//! let skill = pair_f64(PairPolicy::Skill, 4, &w, Some(&win.skills), &mut solver).unwrap();
//! assert!(eomm.objective <= skill.objective);
//! assert_eq!(eomm.pairs.len(), 2);
//! ```
//!
//! Modules: [`blossom`] (the exact solver and its optimality certificate), [`scoring`] (models
//! and the EOMM weight), [`from_artifact`] (those models from an exported artifact), [`pairing`]
//! (EOMM, WorstMM, SkillMM, RandomMM, greedy), [`teams`] (Karmarkar–Karp feasibility,
//! exhaustive and ABBA splits).
//!
//! Live queues of party searches: [`queue`] (searches, the [`queue::Policy`] trait, the quality
//! score, backoff curves, candidate selection, the maximum-wait rule, explanations) and three
//! policies, [`cod`] (the Call of Duty rules), [`threshold`] (the Dota 2 / Awesomenauts quality
//! threshold with swap search) and [`eomm_teams`] (engagement-optimised team lobbies);
//! [`sim_queue`] builds seeded synthetic queues.

pub mod blossom;
pub mod cod;
pub mod eomm_teams;
pub mod from_artifact;
mod knn;
pub mod lap;
pub mod pairing;
pub mod queue;
pub mod scoring;
pub mod sim_queue;
pub mod teams;
pub mod threshold;

pub use mm_artifact::Outcome;
