//! The integration tests of the simulator, one module a file, in one binary.

mod calibration;
mod run;
