//! `mm`: the command line of the matchmaking trainer.
//!
//! Three layers, as in ripgrep: [`args`] parses flags into plain values, each command validates
//! them into a library config, and the library does the work. `main` only maps errors to exit
//! codes: 0 success, 2 bad input or usage (an unreadable or truncated file, a missing column, a
//! bad flag), 1 anything else. Output goes through [`mm_run::outln!`]: a reader that closes
//! standard output early (`mm evaluate ... | head -1`) stops the printing, not the command.
//! Before the command runs, [`config`] applies `mm.toml` to the flags and [`logging`] installs
//! the log subscriber; the whole command runs in one `run` span that carries the run id and the
//! stage on every log line.

mod args;
mod config;
mod evaluate;
mod export;
mod fit;
mod ingest;
mod lake;
mod logging;
mod models;
mod output;
mod pair;
mod place;
mod progress;
mod reference;
mod retrain;
mod serve;
mod simulate;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use mm_ingest::IngestError;

use args::{Cli, Cmd, ConfigCmd, LogFormat, Output};

/// mimalloc in `mm serve`'s process, the system's allocator in the batch jobs (see `mm_alloc`
/// for the measurements behind each).
#[global_allocator]
static ALLOCATOR: mm_alloc::ByCommand = mm_alloc::ByCommand::new(b"serve");

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let (resolved, cli) = match config::resolve(&argv, false) {
        // A strict parse always yields the command line (or a clap failure).
        Ok(mut r) => match r.cli.take() {
            Some(cli) => (r, cli),
            None => return ExitCode::from(2),
        },
        Err(config::Failure::Clap(e)) => e.exit(),
        Err(config::Failure::Config(e)) => {
            eprintln!("mm: error: {e:#}");
            return ExitCode::from(2);
        }
    };
    config::warn_renamed(&argv, &resolved.command);
    logging::init(&cli.out);
    let run_id = mm_run::new_run_id();
    let stage = resolved.command.join("-");
    // `model_version` is recorded by the commands that load or publish one artifact.
    let span = tracing::info_span!(
        "run",
        run_id = %run_id,
        stage = %stage,
        model_version = tracing::field::Empty
    );
    let _entered = span.enter();
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        config = resolved.file.as_ref().map(|f| f.display().to_string()),
        "mm {}",
        argv.iter()
            .skip(1)
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let t0 = Instant::now();
    let json_logs = cli.out.log_format == LogFormat::Json;
    let result = run(cli, &run_id, resolved.file.as_deref()).and_then(|()| {
        // A reader that closed the pipe (`| head`) is not a failure; a full disk is.
        mm_run::stdout::write_error().map_or(Ok(()), |e| {
            Err(anyhow::anyhow!("cannot write to standard output: {e}"))
        })
    });
    // For `mm bench scale`, which runs each stage as a child: the child's own peak memory and
    // CPU time.
    if let Some(path) = std::env::var_os(mm_bench::scale::PEAK_RSS_ENV)
        && let Some(bytes) = mm_run::peak_rss_bytes()
    {
        let cpu = mm_run::cpu_seconds().unwrap_or(f64::NAN);
        let _ = std::fs::write(path, format!("{bytes} {cpu}"));
    }
    let seconds = (t0.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    match result {
        Ok(()) => {
            tracing::info!(seconds, "done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            let code = exit_code(&e);
            if json_logs {
                tracing::error!(error = %format!("{e:#}"), exit_code = code, seconds, "failed");
            } else {
                eprintln!("mm: error: {e:#}");
            }
            ExitCode::from(code)
        }
    }
}

/// 3 when another retrain holds the lock, 2 for bad input (every library error says whether it
/// is), 1 for anything else.
fn exit_code(e: &anyhow::Error) -> u8 {
    if let Some(mm_retrain::RetrainError::Locked { .. }) = e.downcast_ref() {
        return 3;
    }
    let input = e
        .downcast_ref::<mm_matcher::pool::PoolFileError>()
        .is_some()
        || e.downcast_ref::<place::PlaceError>().is_some()
        || e.downcast_ref::<mm_artifact::ArtifactError>().is_some()
        || e.downcast_ref().is_some_and(mm_lake::LakeError::is_input)
        || e.downcast_ref().is_some_and(IngestError::is_input)
        || e.downcast_ref().is_some_and(mm_sim::SimError::is_input)
        || e.downcast_ref().is_some_and(mm_fit::FitError::is_input)
        || e.downcast_ref().is_some_and(mm_eval::EvalError::is_input)
        || e.downcast_ref()
            .is_some_and(mm_retrain::RetrainError::is_input);
    if input { 2 } else { 1 }
}

fn run(cli: Cli, run_id: &str, file: Option<&std::path::Path>) -> Result<()> {
    let out: &Output = &cli.out;
    match cli.cmd {
        Cmd::Config(ConfigCmd::Show(a)) => {
            config::show(&a.command, out.config.as_deref(), out.json)
        }
        Cmd::Completions(a) => {
            // Generated whole, then printed: clap_complete panics when its writer fails.
            let mut script = Vec::new();
            reference::completions(a.shell, &mut script);
            mm_run::stdout::write_bytes(&script);
            Ok(())
        }
        Cmd::Ingest(a) => ingest::run(&a, out),
        Cmd::Lake(c) => lake::run(&c, out),
        Cmd::Simulate(a) => simulate::run(&a, out),
        Cmd::Fit(c) => fit::run(&c, out),
        Cmd::Export(a) => export::run(&a, out),
        Cmd::Models(c) => models::run(&c, out),
        Cmd::Serve(a) => serve::run(&a),
        Cmd::Pair(a) => pair::run(&a, out),
        Cmd::Bench(cmd) => mm_bench::run(&cmd, out.json),
        Cmd::Evaluate(a) => evaluate::run(&a, out),
        Cmd::Retrain(a) => retrain::run(&a, out, run_id, file),
    }
}
