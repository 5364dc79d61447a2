//! End-to-end tests over the real `mm` binary, hand-built inputs and the real data sets in
//! `../shared/data/real/` (skipped with a message when that folder is absent).

#![allow(clippy::unwrap_used)] // tests fail loudly by design

mod util;

mod churn_shards;
mod daily;
mod delta;
mod ingest_canonical;
mod ingest_real;
mod lake_crash;
mod locations;
mod pair;
mod ratings_peer;
mod results;
mod retrain;
mod roundtrip;
mod scheduler;
mod serve;
mod simulate;
mod skill_real;
