//! `mm evaluate`: the offline evaluation and its summary.

use anyhow::Result;

use crate::args::EvaluateArgs;

pub fn run(a: &EvaluateArgs, out: &crate::args::Output) -> Result<()> {
    let mut cfg = a.to_config();
    cfg.out = crate::place::local("out", &a.out)?;
    // Artifacts given as URLs are evaluated from their local mirrors.
    cfg.artifact = mm_lake::mirror::localize(&cfg.artifact)?;
    if let Some(c) = &cfg.compare {
        cfg.compare = Some(mm_lake::mirror::localize(c)?);
    }
    let quiet = out.quiet || out.json;
    let bar = crate::progress::Bar::new(quiet);
    let report = mm_eval::evaluate_with(&cfg, &mut |done, total| bar.rounds(done, total))?;
    bar.finish();
    if out.json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    mm_run::out!("{}", mm_eval::report::summary(&report));
    mm_run::outln!(
        "wrote {} and {}",
        cfg.out.join("evaluation.html").display(),
        cfg.out.join("evaluation.json").display()
    );
    Ok(())
}
