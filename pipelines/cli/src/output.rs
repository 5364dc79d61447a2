//! How a command prints its result: one JSON object with `--json`, else its text for people.

use anyhow::Result;
use serde::Serialize;

use crate::args::Output;

/// Prints `value` as pretty JSON with `--json`, else through `text`.
///
/// # Errors
/// The value does not serialise (a bug).
pub fn emit<T: Serialize>(out: &Output, value: &T, text: impl FnOnce(&T)) -> Result<()> {
    if out.json {
        mm_run::outln!("{}", serde_json::to_string_pretty(value)?);
    } else {
        text(value);
    }
    Ok(())
}
