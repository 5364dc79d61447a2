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
//! ## For a service: an artifact in, pairings and lobbies out
//!
//! A service loads an exported artifact, then needs two calls: [`from_artifact::pair_pool`]
//! pairs a 1v1 pool of player ids, and [`queue::Member::lookup`] turns each player of a party
//! search into what a team-queue [`queue::Policy`] reads (a player the snapshot does not hold is
//! a new player).
//!
//! ```
//! use mm_matcher::cod::{CodConfig, CodRules};
//! use mm_matcher::from_artifact::pair_pool;
//! use mm_matcher::pairing::PairPolicy;
//! use mm_matcher::queue::{Input, LobbyModels, Member, Mode, Policy, Queue, Search};
//!
//! # let dir = std::env::temp_dir().join(format!("mm-matcher-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! # let (manifest, files) = mm_artifact::synthetic::artifact(100, 1);
//! # mm_artifact::Store::new(&dir).publish("v1", manifest, &files, true, None).unwrap();
//! let art = mm_artifact::Store::open_any(&dir)?; // a model directory (its LATEST) or a version
//! let now = art.manifest.snapshot_as_of_ms + 60_000;
//!
//! // A 1v1 pool: EOMM pairs by least expected churn.
//! let ids: Vec<String> = (0..10).map(|i| art.snapshot.id(i).to_string()).collect();
//! let paired = pair_pool(&art, &ids, now, PairPolicy::Eomm)?;
//! assert_eq!(paired.pairing.pairs.len(), 5);
//!
//! // A 2v2 team queue under the Call of Duty rules: four solo searches form one lobby.
//! let models = LobbyModels::from_artifact(&art).expect("the artifact has a team win model");
//! let mut queue = Queue::new(Mode { team_size: 2 })?;
//! for (k, id) in ids.iter().take(4).enumerate() {
//!     queue.push(Search {
//!         id: k as u64,
//!         members: vec![Member::lookup(&art, id, now, false)],
//!         start_ms: now,
//!         lat: 48.8,
//!         lon: 2.3,
//!         input: Input::Controller,
//!         platform: 0,
//!         crossplay: true,
//!         pings: vec![],
//!     })?;
//! }
//! let mut policy = CodRules::new(CodConfig::new(2), models);
//! let lobbies = policy.tick(now + 120_000, &mut queue);
//! assert_eq!(lobbies.len(), 1);
//! assert!(queue.is_empty());
//! # let _ = std::fs::remove_dir_all(&dir);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Modules: [`blossom`] (the exact solver and its optimality certificate), [`scoring`] (models
//! and the EOMM weight), [`from_artifact`] (those models from an exported artifact), [`pairing`]
//! (EOMM, WorstMM, SkillMM, RandomMM, greedy), [`teams`] (Karmarkar–Karp feasibility,
//! exhaustive and ABBA splits), [`geo`] (great-circle distance and the platform rule).
//!
//! Live queues of party searches: [`queue`] (searches, the [`queue::Policy`] trait, the quality
//! score, backoff curves, candidate selection, the maximum-wait rule, explanations) and three
//! policies, [`cod`] (the Call of Duty rules), [`threshold`] (the Dota 2 / Awesomenauts quality
//! threshold with swap search) and [`eomm_teams`] (engagement-optimised team lobbies);
//! [`sim_queue`] builds seeded synthetic queues.

pub mod backfill;
pub mod blossom;
pub mod cod;
pub mod eomm_teams;
pub mod from_artifact;
pub mod geo;
mod knn;
#[doc(hidden)]
pub mod lap;
pub mod pairing;
pub mod pool;
pub mod queue;
pub mod scoring;
#[doc(hidden)]
pub mod sim_queue;
pub mod teams;
pub mod threshold;

pub use mm_artifact::Outcome;
