//! `mm models`: an artifact store's versions: list, show, promote, roll back, verify.

use std::collections::BTreeMap;

use anyhow::Result;
use mm_artifact::Manifest;
use mm_artifact::store::Store;
use serde::Serialize;

use crate::args::{ModelSel, ModelsCmd, Output};
use crate::place::{store, stores};

fn version_or_latest(store: &Store, v: Option<&String>) -> Result<String> {
    match v {
        Some(v) => Ok(v.clone()),
        None => store
            .latest()?
            .ok_or_else(|| anyhow::anyhow!("{}: no LATEST yet", store.root().display())),
    }
}

/// A number inside the metrics JSON, by path.
fn metric(m: &Manifest, path: &[&str]) -> Option<f64> {
    let (first, rest) = path.split_first()?;
    let mut v = m.metrics.get(*first)?;
    for k in rest {
        v = v.get(k)?;
    }
    v.as_f64()
}

#[derive(Serialize)]
struct ListRow {
    /// The model (its directory under `--models`).
    name: String,
    version: String,
    latest: bool,
    created_at: Option<String>,
    players: Option<u64>,
    churn_auc: Option<f64>,
    churn_ece: Option<f64>,
    skill_log_loss: Option<f64>,
    error: Option<String>,
}

/// Runs a `mm models` command; a remote `--models` is used through its local mirror, and the
/// commands that move pointers (promote, rollback) upload them afterwards.
pub fn run(cmd: &ModelsCmd, out: &Output) -> Result<()> {
    let sel = match cmd {
        ModelsCmd::List(sel) | ModelsCmd::Rollback(sel) => sel,
        ModelsCmd::Show { sel, .. }
        | ModelsCmd::Verify { sel, .. }
        | ModelsCmd::Promote { sel, .. }
        | ModelsCmd::Diff { sel, .. } => sel,
    };
    let remote = mm_lake::Location::from_path(&sel.models)?;
    if !remote.is_remote() {
        return run_local(cmd, out);
    }
    let mirror = mm_lake::mirror::Mirror::pull(&remote)?;
    let mut local = cmd.clone();
    match &mut local {
        ModelsCmd::List(sel) | ModelsCmd::Rollback(sel) => sel.models.clone_from(&mirror.local),
        ModelsCmd::Show { sel, .. }
        | ModelsCmd::Verify { sel, .. }
        | ModelsCmd::Promote { sel, .. }
        | ModelsCmd::Diff { sel, .. } => sel.models.clone_from(&mirror.local),
    }
    run_local(&local, out)?;
    if matches!(cmd, ModelsCmd::Promote { .. } | ModelsCmd::Rollback(_)) {
        mirror.push()?;
    }
    Ok(())
}

fn run_local(cmd: &ModelsCmd, out: &Output) -> Result<()> {
    match cmd {
        ModelsCmd::List(sel) => list(sel, out),
        ModelsCmd::Show { version, sel } => {
            let store = store(&sel.models, sel.name.as_deref())?;
            let v = version_or_latest(&store, version.as_ref())?;
            let m = mm_artifact::load::read_manifest(&store.dir(&v))?;
            mm_run::outln!("{}", serde_json::to_string_pretty(&m)?);
            Ok(())
        }
        ModelsCmd::Verify { version, all, sel } => verify(version.as_ref(), *all, sel, out),
        ModelsCmd::Promote { version, sel } => {
            let store = store(&sel.models, sel.name.as_deref())?;
            store.promote(version)?;
            mm_run::outln!("LATEST -> {version}");
            Ok(())
        }
        ModelsCmd::Rollback(sel) => {
            let store = store(&sel.models, sel.name.as_deref())?;
            let v = store.rollback()?;
            mm_run::outln!("LATEST -> {v}");
            Ok(())
        }
        ModelsCmd::Diff { a, b, top, sel } => {
            let store = store(&sel.models, sel.name.as_deref())?;
            let (x, y) = (store.open(a)?, store.open(b)?);
            let d = mm_artifact::diff::diff(&x, &y, *top);
            if out.json {
                mm_run::outln!("{}", serde_json::to_string_pretty(&d)?);
            } else {
                print_diff(a, b, &d);
            }
            Ok(())
        }
    }
}

/// `mm models list`: every version of each model, LATEST starred; unreadable ones named.
fn list(sel: &ModelSel, out: &Output) -> Result<()> {
    // Without --name, every model under --models, one table each.
    let mut rows = Vec::new();
    let mut roots = Vec::new();
    for (name, store) in stores(&sel.models, sel.name.as_deref())? {
        roots.push((name.clone(), store.root().display().to_string()));
        let latest = store.latest()?;
        for v in store.versions()? {
            let m = mm_artifact::load::read_manifest(&store.dir(&v));
            let (m, error) = match m {
                Ok(m) => (Some(m), None),
                Err(e) => (None, Some(e.to_string())),
            };
            rows.push(ListRow {
                name: name.clone(),
                latest: latest.as_ref() == Some(&v),
                version: v,
                created_at: m.as_ref().map(|m| m.created_at.clone()),
                players: m.as_ref().map(|m| m.data.players),
                churn_auc: m.as_ref().and_then(|m| metric(m, &["churn", "auc"])),
                churn_ece: m
                    .as_ref()
                    .and_then(|m| metric(m, &["churn", "scored", "ece"])),
                skill_log_loss: m.as_ref().and_then(|m| {
                    m.metrics
                        .get("skill")?
                        .get("models")?
                        .get(0)?
                        .get("scored")?
                        .get("log_loss")?
                        .as_f64()
                }),
                error,
            });
        }
    }
    if out.json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(());
    }
    let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.4}"));
    for (name, root) in roots {
        mm_run::outln!("{root}");
        mm_run::outln!(
            "  {:<10} {:<22} {:>9} {:>9} {:>9} {:>10}",
            "version",
            "created",
            "players",
            "churn AUC",
            "churn ECE",
            "skill LL"
        );
        for r in rows.iter().filter(|r| r.name == name) {
            mm_run::outln!(
                "{} {:<10} {:<22} {:>9} {:>9} {:>9} {:>10}{}",
                if r.latest { "*" } else { " " },
                r.version,
                r.created_at.clone().unwrap_or_default(),
                r.players.map_or("-".into(), |p| p.to_string()),
                f(r.churn_auc),
                f(r.churn_ece),
                f(r.skill_log_loss),
                r.error
                    .as_ref()
                    .map(|e| format!("  UNREADABLE: {e}"))
                    .unwrap_or_default()
            );
        }
    }
    Ok(())
}

/// `mm models verify`: each version opened as a service would open it; the first refusal is
/// the command's error.
fn verify(version: Option<&String>, all: bool, sel: &ModelSel, out: &Output) -> Result<()> {
    let store = store(&sel.models, sel.name.as_deref())?;
    let versions = if all {
        store.versions()?
    } else {
        vec![version_or_latest(&store, version)?]
    };
    let mut failed = Vec::new();
    let mut results = BTreeMap::new();
    for v in &versions {
        match store.open(v) {
            Ok(a) => {
                results.insert(v.clone(), "ok".to_string());
                if !out.json {
                    mm_run::outln!(
                        "{v}: ok ({} files, {} players, format {})",
                        a.manifest.files.len() + 1,
                        a.snapshot.len(),
                        a.manifest.format_version
                    );
                }
            }
            Err(e) => {
                results.insert(v.clone(), e.to_string());
                if !out.json {
                    mm_run::outln!("{v}: REFUSED: {e}");
                }
                failed.push(e);
            }
        }
    }
    if out.json {
        mm_run::outln!("{}", serde_json::to_string_pretty(&results)?);
    }
    match failed.into_iter().next() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn print_diff(a: &str, b: &str, d: &mm_artifact::diff::Diff) {
    mm_run::outln!("{a} -> {b}");
    mm_run::outln!("players: {} -> {}", d.players.0, d.players.1);
    mm_run::outln!("churn C: {} -> {}", d.churn_c.0, d.churn_c.1);
    mm_run::outln!("churn coefficients that moved most (per sd of the feature):");
    let f = |x: Option<f64>| x.map_or("absent".into(), |x| format!("{x:+.4}"));
    for (n, x, y) in &d.churn_coefficients {
        mm_run::outln!("  {n:<34} {:>10} -> {:>10}", f(*x), f(*y));
    }
    mm_run::outln!("skill parameters:");
    for (n, x, y) in &d.skill_parameters {
        mm_run::outln!("  {n:<34} {x:>10.4} -> {y:>10.4}");
    }
    mm_run::outln!(
        "percentile table: knots moved by {:.4} at most, {:.4} on average (raw skill)",
        d.percentile_knots_max_move,
        d.percentile_knots_mean_move
    );
    mm_run::outln!("metrics that changed ({}):", d.metrics.len());
    for (k, x, y) in d.metrics.iter().take(40) {
        mm_run::outln!("  {k:<50} {x:>12.6} -> {y:>12.6}");
    }
    if d.metrics.len() > 40 {
        mm_run::outln!("  ... {} more (--json lists all)", d.metrics.len() - 40);
    }
}
