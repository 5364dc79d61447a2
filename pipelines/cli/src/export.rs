//! `mm export`: publishing a skill fit and a churn fit as a versioned artifact.

use anyhow::Result;

use crate::args::{ExportArgs, Output};

pub fn run(a: &ExportArgs, out: &Output) -> Result<()> {
    // A remote models root: export into its mirror, then upload what was added.
    let (remote, mirror) = crate::place::models_root(&a.models)?;
    let r = mm_fit::export::export(&mm_fit::export::ExportConfig {
        skill: crate::place::local("skill", &a.skill)?,
        churn: crate::place::local("churn", &a.churn)?,
        models: mirror.local.clone(),
        name: a.name.clone(),
        version: a.version.clone(),
        promote: !a.no_promote,
    })?;
    mirror.push()?;
    tracing::Span::current().record("model_version", r.version.as_str());
    tracing::info!(name = %r.name, promoted = !a.no_promote, "published {}/{}", r.name, r.version);
    let dir = if remote.is_remote() {
        remote.join(&r.name).join(&r.version).to_string()
    } else {
        r.dir.display().to_string()
    };
    if out.json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        mm_run::outln!(
            "exported {}/{} ({} players) to {}{}",
            r.name,
            r.version,
            r.players,
            dir,
            if r.promoted {
                "; LATEST points to it"
            } else {
                ""
            }
        );
        for f in &r.files {
            mm_run::outln!(
                "  {:<24} {:>12} bytes  sha256 {}",
                f.path,
                f.bytes,
                f.sha256
            );
        }
    }
    Ok(())
}
