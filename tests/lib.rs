//! Shared helpers live in the test modules; this library is intentionally empty.
