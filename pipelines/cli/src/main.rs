//! `mm`: the command line of the matchmaking trainer.
//!
//! Three layers, as in ripgrep: [`args`] parses flags into plain values, each command validates
//! them into a library config, and the library does the work. `main` only maps errors to exit
//! codes: 0 success, 2 bad input or usage (an unreadable or truncated file, a missing column, a
//! bad flag), 1 anything else. Before the command runs, [`config`] applies `mm.toml` to the
//! flags and [`logging`] installs the log subscriber; the whole command runs in one `run` span
//! that carries the run id and the stage on every log line.

mod args;
mod config;
mod evaluate;
mod logging;
mod models;
mod pair;
mod place;
mod progress;
mod reference;
mod retrain;
mod serve;

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use mm_ingest::IngestError;

use args::{Cli, Cmd, ConfigCmd, FitCmd, LakeCmd, LogFormat, Output};

/// mimalloc, not the system allocator: under `mm serve`'s steady load of small allocations on
/// many threads, glibc's per-thread arenas kept freed memory resident (the process grew to
/// 338 MiB over a 180 s bench of reports while its live heap stayed near 100 MiB, heaptrack).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    let run_id = mm_lake::new_run_id();
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
    let result = run(cli, &run_id);
    // For `mm bench scale`, which runs each stage as a child: the child's own peak memory and
    // CPU time.
    if let Some(path) = std::env::var_os(mm_bench::scale::PEAK_RSS_ENV)
        && let Some(bytes) = mm_lake::peak_rss_bytes()
    {
        let cpu = mm_lake::cpu_seconds().unwrap_or(f64::NAN);
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

fn run(cli: Cli, run_id: &str) -> Result<()> {
    let out: &Output = &cli.out;
    match cli.cmd {
        Cmd::Config(ConfigCmd::Show(a)) => {
            config::show(&a.command, out.config.as_deref(), out.json)
        }
        Cmd::Completions(a) => {
            reference::completions(a.shell, &mut std::io::stdout().lock());
            Ok(())
        }
        Cmd::Ingest(a) => {
            let cfg = a.to_config()?;
            let quiet = out.quiet || out.json;
            let bar = progress::Bar::new(quiet);
            let report = mm_ingest::ingest(&cfg, &bar)?;
            bar.finish();
            if out.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.summary());
            }
            Ok(())
        }
        Cmd::Lake(LakeCmd::Show(a)) => {
            let lake = mm_lake::Lake::open_as_of(&a.lake, a.as_of.unwrap_or_default())?;
            if lake.version().is_none() {
                return Err(mm_lake::LakeError::Location {
                    location: lake.root().to_string(),
                    reason: "no lake here (no matches table)".into(),
                }
                .into());
            }
            let summary = mm_lake::summary::summarize(&lake, a.history)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                print!("{summary}");
            }
            Ok(())
        }
        Cmd::Lake(LakeCmd::Convert(a)) => {
            let lake = mm_lake::Lake::convert_legacy(&a.lake)?;
            let summary = mm_lake::summary::summarize(&lake, a.history)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                print!("converted to Delta Lake\n{summary}");
            }
            Ok(())
        }
        Cmd::Lake(LakeCmd::Optimize(a)) => {
            let lake = mm_lake::Lake::open(&a.lake)?;
            let r = lake.optimize(a.min_files)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "optimize {}: {} days compacted, {} files replaced by {} ({} rows); version {}",
                    lake.root(),
                    r.days_compacted,
                    r.files_removed,
                    r.files_added,
                    r.rows,
                    r.version.map_or("-".into(), |v| v.to_string())
                );
            }
            Ok(())
        }
        Cmd::Lake(LakeCmd::Checkpoint(a)) => {
            let lake = mm_lake::Lake::open(&a.lake)?;
            let r = lake.checkpoint(a.expire_hours)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                let part = |t: Option<(i64, usize)>| {
                    t.map_or_else(
                        || "no table".to_string(),
                        |(v, n)| format!("checkpoint at version {v}, {n} log entries deleted"),
                    )
                };
                println!(
                    "checkpoint {}: matches {}; quarantine {}",
                    lake.root(),
                    part(r.matches),
                    part(r.quarantine)
                );
            }
            Ok(())
        }
        Cmd::Lake(LakeCmd::Vacuum(a)) => {
            let lake = mm_lake::Lake::open(&a.lake)?;
            let r = lake.vacuum(a.retention_hours, a.full, a.dry_run, a.force)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                println!(
                    "vacuum {}{}: {} matches files, {} quarantine files {}",
                    lake.root(),
                    if a.dry_run { " (dry run)" } else { "" },
                    r.matches.len(),
                    r.quarantine.len(),
                    if a.dry_run {
                        "would be deleted"
                    } else {
                        "deleted"
                    }
                );
            }
            Ok(())
        }
        Cmd::Simulate(a) => {
            let report = mm_sim::simulate(&a.to_config()?)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "simulated {} players over {} days into {}: {} 6v6 and {} 1v1 matches, {} rows in {:.1} s ({:.0} rows/s{})",
                    report.config.players,
                    report.config.days,
                    report.config.lake.display(),
                    report.matches_tdm,
                    report.matches_duel,
                    report.rows,
                    report.seconds,
                    report.rows_per_s,
                    report
                        .peak_rss_bytes
                        .map(|b| format!(", peak RSS {:.0} MiB", b as f64 / 1048576.0))
                        .unwrap_or_default()
                );
            }
            Ok(())
        }
        Cmd::Fit(FitCmd::Skill(a)) => {
            let r = mm_fit::fit_skill(&a.to_config()?)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print_skill(&r);
            }
            Ok(())
        }
        Cmd::Fit(FitCmd::Churn(a)) => {
            if let Some(shard) = a.shard()? {
                let r = mm_fit::churn::build_churn_shard(&a.to_config()?, shard)?;
                if out.json {
                    println!("{}", serde_json::to_string_pretty(&r)?);
                } else {
                    println!(
                        "shard {} of build {}: {} rows of its players ({} read), {} buckets, \
                         committed as features v{} and state v{} in {} ({:.1}s)",
                        r.shard,
                        r.build,
                        r.stats.rows,
                        r.stats.rows_read,
                        r.stats.buckets,
                        r.features_version,
                        r.state_version,
                        r.tables,
                        r.seconds
                    );
                }
                return Ok(());
            }
            let r = mm_fit::churn::fit_churn(&a.to_config()?)?;
            if out.json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                print_churn(&r);
            }
            Ok(())
        }
        Cmd::Export(a) => models::export(&a, out),
        Cmd::Models(c) => models::run(&c, out),
        Cmd::Serve(a) => serve::run(&a),
        Cmd::Pair(a) => pair::run(&a, out),
        Cmd::Bench(cmd) => mm_bench::run(&cmd, out.json),
        Cmd::Evaluate(a) => evaluate::run(&a, out),
        Cmd::Retrain(a) => retrain::run(&a, out, run_id),
    }
}

fn print_churn(r: &mm_fit::churn::ChurnReport) {
    println!(
        "churn within {}: {} rows, {} censored; trained on {} rows (churn {:.4}), scored on {} later rows (churn {:.4}); C = {}",
        r.horizon,
        r.rows,
        r.censored,
        r.train_rows,
        r.churn_rate_train,
        r.score_rows,
        r.churn_rate_score,
        r.c
    );
    println!(
        "scoring window: AUC {:.4}, log-loss {:.4}, Brier {:.4}, calibration error {:.4}",
        r.auc, r.scored.log_loss, r.scored.brier, r.scored.ece
    );
    if let Some(t) = &r.truth {
        println!(
            "against the true {}: calibration error {:.4}, mean |model - truth| {:.4} (the training churn rate's {:.4}); AUC model {:.4}, truth {:.4}",
            t.column,
            t.ece_vs_truth,
            t.mean_abs_diff,
            t.constant_mean_abs_diff,
            t.model_auc,
            t.truth_auc
        );
    }
    if let Some(f) = &r.refit {
        println!(
            "exported: refitted at C = {} on {} labelled rows of both windows (churn {:.4}); the figures above are the training window's model",
            r.c, f.rows, f.churn_rate
        );
    }
    let b = &r.build;
    println!(
        "feature table: build {} in {} ({} shard{}, {}), features v{}",
        b.key,
        b.tables,
        b.shards,
        if b.shards == 1 { "" } else { "s" },
        if b.reused {
            "found complete"
        } else {
            "built by this run"
        },
        b.features_version.unwrap_or(-1)
    );
    println!(
        "features {:.1} s, fit {:.1} s, total {:.1} s",
        r.features_seconds, r.fit_seconds, r.total_seconds
    );
    for o in &r.outputs {
        println!("wrote {}", o.display());
    }
}

fn print_skill(r: &mm_fit::SkillReport) {
    println!(
        "raw skill ({}): {} matches ({} two-team), {} players ({} active); skill mean {:.3}, sd {:.3}, range [{:.3}, {:.3}]",
        r.metric.name(),
        r.matches,
        r.two_team_matches,
        r.players,
        r.active_players,
        r.skill_mean,
        r.skill_sd,
        r.skill_min,
        r.skill_max
    );
    println!(
        "tuned on {} .. {} ({} matches), scored on {} .. {} ({} matches); half-life {} matches, margin {:.4}",
        r.windows.tune_from,
        r.windows.tune_to,
        r.windows.tune_matches,
        r.windows.score_from,
        r.windows.score_to,
        r.windows.scored_matches,
        r.params.half_life_matches,
        r.params.margin
    );
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>8} {:>12}",
        "model", "log-loss", "accuracy", "Brier", "ECE", "n", "updates/s"
    );
    for m in &r.models {
        println!(
            "{:<34} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>8} {:>12.0}",
            m.model,
            m.scored.log_loss,
            m.scored.accuracy,
            m.scored.brier,
            m.scored.ece,
            m.scored.n,
            m.updates_per_s
        );
    }
    if let Some(a) = &r.party_adjustment {
        println!(
            "party adjustment: {:+.4} raw skill per member {:+.4} per unit of party skill sd",
            a.per_member, a.per_member_per_sd
        );
    }
    println!(
        "pairwise (metric) predictions: log-loss {:.4}, accuracy {:.4}, {} pairs",
        r.pairwise.log_loss, r.pairwise.accuracy, r.pairwise.n
    );
    println!(
        "wrote {}/players.parquet, percentiles.json, team_model.json, skill_metrics.json, skill_report.html in {:.1} s",
        r.out.display(),
        r.seconds
    );
}
