//! The integration tests of the trainer, one module a file, in one binary.

mod churn_model;
mod raw_skill;
