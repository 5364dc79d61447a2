//! `mm retrain`: the chain for a scheduler, then what it decided.

use anyhow::{Context, Result};

/// `mm retrain`: the chain, then what it decided. `file`: the config file the command line
/// was resolved with, whose stage tables (`[ingest]`, `[fit.skill]`, `[fit.churn]`) the stages
/// read as their own commands would.
pub fn run(
    a: &crate::args::RetrainArgs,
    out: &crate::args::Output,
    run_id: &str,
    file: Option<&std::path::Path>,
) -> Result<()> {
    let mut cfg = a.to_config()?;
    cfg.run_id = Some(run_id.to_string());
    if let Some(f) = file {
        let stages = crate::config::stage_args(f)?;
        for r in &stages.read {
            tracing::info!("{}: {r}", f.display());
        }
        for i in &stages.ignored {
            tracing::warn!(
                "{}: {i}: mm retrain sets these itself (its own flags, and for each mode its \
                 folders, cutoff and snapshot) and does not read them",
                f.display()
            );
        }
        let what = |stage: &str| format!("{}: the settings of `mm {stage}` in it", f.display());
        if let Some(s) = &stages.skill {
            if cfg.metric.is_none() && stages.metric_from_file {
                cfg.metric = Some(crate::args::metric_of(s.metric));
            }
            cfg.skill = Some(s.to_config().with_context(|| what("fit skill"))?);
        }
        if let Some(c) = &stages.churn {
            cfg.churn = Some(c.to_config().with_context(|| what("fit churn"))?);
        }
        if let Some(i) = &stages.ingest {
            cfg.ingest = Some(i.to_config().with_context(|| what("ingest"))?);
        }
    }
    // A remote models root: the chain publishes into its mirror, which is uploaded (the
    // versions' files first, the pointers last) once the chain has run; the promotion gate
    // compares with the remote's current LATEST, pulled first.
    let (remote, mirror) = crate::place::models_root(&cfg.models)?;
    cfg.models.clone_from(&mirror.local);
    let report = mm_retrain::retrain(&cfg);
    // What the chain published is uploaded whether it promoted or stopped later (as on a local
    // root, where it stays); the chain's own error comes first.
    let pushed = mirror.push();
    let report = report?;
    let pushed = pushed?;
    if remote.is_remote() {
        tracing::info!(files = pushed.len(), "uploaded the models to {remote}");
    }
    if out.json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    let st = &report.state;
    if let Some(c) = st.cutoff_ms {
        mm_run::outln!(
            "trained on matches before {}, evaluated on the rest",
            chrono::DateTime::from_timestamp_millis(c)
                .map_or_else(|| c.to_string(), |d| d.format("%Y-%m-%d").to_string())
        );
    }
    // The stages' times: the shared ones on a line, then one line per mode, in the run's mode
    // order (modes run side by side, so their stages interleave in the state).
    let mut lines: Vec<(String, Vec<String>)> = Vec::new();
    for (key, s) in &st.timings_s {
        let (group, stage) = key.split_once('/').unwrap_or(("", key.as_str()));
        let item = format!("{stage} {s:.2} s");
        match lines.iter_mut().find(|(g, _)| g == group) {
            Some((_, items)) => items.push(item),
            None => lines.push((group.to_string(), vec![item])),
        }
    }
    lines.sort_by_key(|(g, _)| (!g.is_empty(), st.modes.iter().position(|m| m.mode == *g)));
    for (group, items) in lines {
        let head = if group.is_empty() {
            String::new()
        } else {
            format!("{group}: ")
        };
        mm_run::outln!("  {head}{}", items.join(", "));
    }
    // The run's notes: a stale lock taken over, a resume, modes left out, pools skipped.
    for n in &st.notes {
        mm_run::outln!("{n}");
    }
    // Paths under the working directory are shown as the user typed them (`out/retrain/…`).
    let cwd = std::env::current_dir().unwrap_or_default();
    let work = cfg.work.strip_prefix(&cwd).unwrap_or(&cfg.work);
    for l in mm_retrain::summary(work, st) {
        mm_run::outln!("{l}");
    }
    mm_run::outln!("run log: {}", work.join("runs.jsonl").display());
    Ok(())
}
