//! The integration tests of the fit jobs, one module a file, in one binary.

mod churn_buckets;
mod churn_on_simulated;
mod skill_on_simulated;
mod win_skill;
