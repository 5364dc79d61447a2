//! Log lines on stderr, through `tracing`.
//!
//! - `--log-format text` (the default): one readable line per event, with the run's fields
//!   (`run{run_id=… stage=…}`) in front.
//! - `--log-format json` (or `MM_LOG_FORMAT=json`): one JSON object per line, with the
//!   timestamp, level, target, message, the event's fields and the fields of every span it is
//!   in flattened on top: `run_id` and `stage` always, `model_version` where one is loaded.
//!
//! Levels come from `RUST_LOG` (for example `RUST_LOG=mm_fit=debug`); by default our crates
//! log at `info` and dependencies at `warn`; `-q` keeps warnings and errors only.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use crate::args::{LogFormat, Output};

/// Our crates, logged at `info` unless `RUST_LOG` says otherwise.
const OURS: [&str; 9] = [
    "mm",
    "mm_cli",
    "mm_lake",
    "mm_ingest",
    "mm_sim",
    "mm_fit",
    "mm_eval",
    "mm_artifact",
    "mm_matcher",
];

fn filter(quiet: bool) -> EnvFilter {
    if let Ok(f) = EnvFilter::try_from_default_env() {
        return f;
    }
    let level = if quiet { "warn" } else { "info" };
    // delta-rs's kernel logs an ERROR whenever a snapshot it tries fails, even where delta-rs
    // expects it to (creating a table first looks for one, and finds an empty log); what does go
    // wrong reaches us as an error, which `mm` reports in its own words.
    let spec = ["warn".to_string(), "buoyant_kernel=off".to_string()]
        .into_iter()
        .chain(OURS.iter().map(|c| format!("{c}={level}")))
        .collect::<Vec<_>>()
        .join(",");
    EnvFilter::new(spec)
}

/// Installs the subscriber for this process.
pub fn init(out: &Output) {
    let filter = filter(out.quiet);
    match out.log_format {
        LogFormat::Json => {
            let mut layer = json_subscriber::JsonLayer::stderr();
            layer
                .with_timer("timestamp", tracing_subscriber::fmt::time::SystemTime)
                .with_level("level")
                .with_target("target")
                .with_flattened_event()
                .with_top_level_flattened_span_list();
            let _ = tracing_subscriber::registry()
                .with(filter)
                .with(layer)
                .try_init();
        }
        LogFormat::Text => {
            let _ = tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(false)
                .with_env_filter(filter)
                .try_init();
        }
    }
}
