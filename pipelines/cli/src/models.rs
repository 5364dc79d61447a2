//! `mm export` and `mm models`: publishing artifacts and managing their versions.

use std::collections::BTreeMap;

use anyhow::{Result, bail};
use mm_artifact::store::Store;
use mm_artifact::{Artifact, Manifest};
use serde::Serialize;

use crate::args::{BenchArtifactArgs, ExportArgs, ModelSel, ModelsCmd, Output};

pub fn export(a: &ExportArgs, out: &Output) -> Result<()> {
    // A remote models root: export into its mirror, then upload what was added.
    let remote = mm_lake::Location::from_path(&a.models)?;
    let mirror = mm_lake::mirror::Mirror::pull(&remote)?;
    let r = mm_fit::export::export(&mm_fit::export::ExportConfig {
        skill: a.skill.clone(),
        churn: a.churn.clone(),
        models: mirror.local.clone(),
        name: a.name.clone(),
        version: a.version.clone(),
        promote: !a.no_promote,
    })?;
    mirror.push()?;
    let dir = if remote.is_remote() {
        remote.join(&r.name).join(&r.version).to_string()
    } else {
        r.dir.display().to_string()
    };
    if out.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
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
            println!(
                "  {:<24} {:>12} bytes  sha256 {}",
                f.path, f.bytes, f.sha256
            );
        }
    }
    Ok(())
}

/// The model's store: `--name`, or the only model under `--models`.
fn store(sel: &ModelSel) -> Result<Store> {
    if let Some(n) = &sel.name {
        return Ok(Store::new(sel.models.join(n)));
    }
    let names: Vec<String> = std::fs::read_dir(&sel.models)
        .map_err(|e| anyhow::anyhow!("{}: {e}", sel.models.display()))?
        .filter_map(Result::ok)
        .filter(|e| {
            e.path().join(mm_artifact::store::HISTORY).exists()
                || e.path().join(mm_artifact::store::LATEST).exists()
        })
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    match names.as_slice() {
        [one] => Ok(Store::new(sel.models.join(one))),
        [] => bail!(
            "{}: no exported models (run `mm export`)",
            sel.models.display()
        ),
        many => bail!(
            "{}: several models ({}); choose one with --name",
            sel.models.display(),
            many.join(", ")
        ),
    }
}

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
        ModelsCmd::List(sel) => {
            let store = store(sel)?;
            let latest = store.latest()?;
            let mut rows = Vec::new();
            for v in store.versions()? {
                let m = mm_artifact::load::read_manifest(&store.dir(&v));
                let (m, error) = match m {
                    Ok(m) => (Some(m), None),
                    Err(e) => (None, Some(e.to_string())),
                };
                rows.push(ListRow {
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
            if out.json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
                return Ok(());
            }
            println!("{}", store.root().display());
            println!(
                "  {:<10} {:<22} {:>9} {:>9} {:>9} {:>10}",
                "version", "created", "players", "churn AUC", "churn ECE", "skill LL"
            );
            let f = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.4}"));
            for r in rows {
                println!(
                    "{} {:<10} {:<22} {:>9} {:>9} {:>9} {:>10}{}",
                    if r.latest { "*" } else { " " },
                    r.version,
                    r.created_at.unwrap_or_default(),
                    r.players.map_or("-".into(), |p| p.to_string()),
                    f(r.churn_auc),
                    f(r.churn_ece),
                    f(r.skill_log_loss),
                    r.error
                        .map(|e| format!("  UNREADABLE: {e}"))
                        .unwrap_or_default()
                );
            }
            Ok(())
        }
        ModelsCmd::Show { version, sel } => {
            let store = store(sel)?;
            let v = version_or_latest(&store, version.as_ref())?;
            let m = mm_artifact::load::read_manifest(&store.dir(&v))?;
            println!("{}", serde_json::to_string_pretty(&m)?);
            Ok(())
        }
        ModelsCmd::Verify { version, all, sel } => {
            let store = store(sel)?;
            let versions = if *all {
                store.versions()?
            } else {
                vec![version_or_latest(&store, version.as_ref())?]
            };
            let mut failed = Vec::new();
            let mut results = BTreeMap::new();
            for v in &versions {
                match store.open(v) {
                    Ok(a) => {
                        results.insert(v.clone(), "ok".to_string());
                        if !out.json {
                            println!(
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
                            println!("{v}: REFUSED: {e}");
                        }
                        failed.push(e);
                    }
                }
            }
            if out.json {
                println!("{}", serde_json::to_string_pretty(&results)?);
            }
            match failed.into_iter().next() {
                Some(e) => Err(e.into()),
                None => Ok(()),
            }
        }
        ModelsCmd::Promote { version, sel } => {
            let store = store(sel)?;
            store.promote(version)?;
            println!("LATEST -> {version}");
            Ok(())
        }
        ModelsCmd::Rollback(sel) => {
            let store = store(sel)?;
            let v = store.rollback()?;
            println!("LATEST -> {v}");
            Ok(())
        }
        ModelsCmd::Diff { a, b, top, sel } => {
            let store = store(sel)?;
            let (x, y) = (store.open(a)?, store.open(b)?);
            let d = diff(&x, &y, *top);
            if out.json {
                println!("{}", serde_json::to_string_pretty(&d)?);
            } else {
                print_diff(a, b, &d);
            }
            Ok(())
        }
    }
}

/// What changed between two versions.
#[derive(Debug, Serialize)]
pub struct Diff {
    /// Numeric metrics that differ: path, a, b.
    pub metrics: Vec<(String, f64, f64)>,
    /// Churn coefficients (per standardised unit) by |change|, largest first: name, a, b.
    pub churn_coefficients: Vec<(String, Option<f64>, Option<f64>)>,
    pub churn_c: (f64, f64),
    /// Team win model and party adjustment parameters: name, a, b.
    pub skill_parameters: Vec<(String, f64, f64)>,
    /// Largest and mean absolute move of the percentile table's knots (raw skill units).
    pub percentile_knots_max_move: f64,
    pub percentile_knots_mean_move: f64,
    pub players: (usize, usize),
}

fn numbers(prefix: &str, v: &serde_json::Value, out: &mut BTreeMap<String, f64>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                numbers(&format!("{prefix}.{k}"), v, out);
            }
        }
        serde_json::Value::Array(a) if a.len() <= 20 => {
            for (i, v) in a.iter().enumerate() {
                numbers(&format!("{prefix}[{i}]"), v, out);
            }
        }
        serde_json::Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.to_string(), x);
            }
        }
        _ => {}
    }
}

fn diff(a: &Artifact, b: &Artifact, top: usize) -> Diff {
    let (mut na, mut nb) = (BTreeMap::new(), BTreeMap::new());
    for (k, v) in &a.manifest.metrics {
        numbers(k, v, &mut na);
    }
    for (k, v) in &b.manifest.metrics {
        numbers(k, v, &mut nb);
    }
    let metrics = na
        .iter()
        .filter_map(|(k, x)| nb.get(k).filter(|y| *y != x).map(|y| (k.clone(), *x, *y)))
        .collect();
    let coef = |m: &mm_artifact::churn::ChurnModel| -> BTreeMap<String, f64> {
        m.feature_names
            .iter()
            .cloned()
            .zip(m.coef.iter().copied())
            .collect()
    };
    let (ca, cb) = (coef(&a.churn.model), coef(&b.churn.model));
    let mut names: Vec<&String> = ca.keys().chain(cb.keys()).collect();
    names.sort();
    names.dedup();
    let mut churn_coefficients: Vec<(String, Option<f64>, Option<f64>)> = names
        .into_iter()
        .map(|n| (n.clone(), ca.get(n).copied(), cb.get(n).copied()))
        .collect();
    let moved =
        |r: &(String, Option<f64>, Option<f64>)| (r.1.unwrap_or(0.0) - r.2.unwrap_or(0.0)).abs();
    churn_coefficients.sort_by(|x, y| moved(y).total_cmp(&moved(x)));
    churn_coefficients.truncate(top);
    let mut skill_parameters = Vec::new();
    let team = |t: &Option<mm_artifact::team::TeamWinModel>| {
        t.map_or([f64::NAN; 3], |t| {
            [t.skill_coef, t.party_members_coef, t.party_spread_coef]
        })
    };
    for (n, (x, y)) in [
        "team_win.skill_coef",
        "team_win.party_members_coef",
        "team_win.party_spread_coef",
    ]
    .iter()
    .zip(team(&a.team_win).into_iter().zip(team(&b.team_win)))
    {
        skill_parameters.push(((*n).to_string(), x, y));
    }
    let party = |p: &Option<mm_artifact::team::PartyAdjustment>| {
        p.map_or([f64::NAN; 2], |p| [p.per_member, p.per_member_per_sd])
    };
    for (n, (x, y)) in [
        "party_adjustment.per_member",
        "party_adjustment.per_member_per_sd",
    ]
    .iter()
    .zip(
        party(&a.party_adjustment)
            .into_iter()
            .zip(party(&b.party_adjustment)),
    ) {
        skill_parameters.push(((*n).to_string(), x, y));
    }
    // Knots compared at the same quantiles, through each table's own interpolation.
    let moves: Vec<f64> = (0..=100)
        .map(|k| {
            let p = f64::from(k) / 100.0;
            (a.percentiles.skill_at(p) - b.percentiles.skill_at(p)).abs()
        })
        .collect();
    Diff {
        metrics,
        churn_coefficients,
        churn_c: (a.churn.model.c, b.churn.model.c),
        skill_parameters,
        percentile_knots_max_move: moves.iter().copied().fold(0.0, f64::max),
        percentile_knots_mean_move: moves.iter().sum::<f64>() / moves.len() as f64,
        players: (a.snapshot.len(), b.snapshot.len()),
    }
}

fn print_diff(a: &str, b: &str, d: &Diff) {
    println!("{a} -> {b}");
    println!("players: {} -> {}", d.players.0, d.players.1);
    println!("churn C: {} -> {}", d.churn_c.0, d.churn_c.1);
    println!("churn coefficients that moved most (per sd of the feature):");
    let f = |x: Option<f64>| x.map_or("absent".into(), |x| format!("{x:+.4}"));
    for (n, x, y) in &d.churn_coefficients {
        println!("  {n:<34} {:>10} -> {:>10}", f(*x), f(*y));
    }
    println!("skill parameters:");
    for (n, x, y) in &d.skill_parameters {
        println!("  {n:<34} {x:>10.4} -> {y:>10.4}");
    }
    println!(
        "percentile table: knots moved by {:.4} at most, {:.4} on average (raw skill)",
        d.percentile_knots_max_move, d.percentile_knots_mean_move
    );
    println!("metrics that changed ({}):", d.metrics.len());
    for (k, x, y) in d.metrics.iter().take(40) {
        println!("  {k:<50} {x:>12.6} -> {y:>12.6}");
    }
    if d.metrics.len() > 40 {
        println!("  ... {} more (--json lists all)", d.metrics.len() - 40);
    }
}

/// `VmRSS` and `VmHWM` (peak) of this process, bytes (Linux; 0 elsewhere).
fn rss() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |key: &str| {
        s.lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

/// `mm bench artifact`: writes a synthetic artifact of `--players` players, then loads it
/// `--reps` times, each in a fresh process (so the peak memory is the load's own).
pub fn bench(a: &BenchArtifactArgs, out: &Output) -> Result<()> {
    let tmp;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            tmp = std::env::temp_dir().join(format!("mm-bench-artifact-{}", std::process::id()));
            tmp.clone()
        }
    };
    if a.load_only {
        let (before, _) = rss();
        let t = std::time::Instant::now();
        let art = mm_artifact::Artifact::open(&dir.join("v1"))?;
        let seconds = t.elapsed().as_secs_f64();
        let (after, peak) = rss();
        println!(
            "{}",
            serde_json::json!({"seconds": seconds, "players": art.snapshot.len(),
                "rss_before": before, "rss_after": after, "peak_rss": peak})
        );
        return Ok(());
    }
    let t = std::time::Instant::now();
    let (m, files) = mm_artifact::synthetic::artifact(a.players, 1);
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    let _ = std::fs::remove_dir_all(&dir);
    Store::new(&dir).publish("v1", m, &files, true, None)?;
    drop(files);
    let write_s = t.elapsed().as_secs_f64();
    let exe = std::env::current_exe()?;
    let mut runs = Vec::new();
    for _ in 0..a.reps.max(1) {
        let run = std::process::Command::new(&exe)
            .args(["bench", "artifact", "--load-only", "--dir"])
            .arg(&dir)
            .output()?;
        if !run.status.success() {
            bail!("load run failed: {}", String::from_utf8_lossy(&run.stderr));
        }
        runs.push(serde_json::from_slice::<serde_json::Value>(&run.stdout)?);
    }
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut secs: Vec<f64> = runs.iter().filter_map(|r| r["seconds"].as_f64()).collect();
    let median = crate::bench::median(&mut secs);
    let mib = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap_or(0.0) / 1048576.0;
    let held = runs
        .iter()
        .map(|r| mib(r, "rss_after") - mib(r, "rss_before"))
        .fold(0.0, f64::max);
    let peak = runs.iter().map(|r| mib(r, "peak_rss")).fold(0.0, f64::max);
    let report = serde_json::json!({
        "players": a.players, "artifact_bytes": bytes, "write_seconds": write_s,
        "load_seconds_median": median, "load_seconds": secs,
        "resident_mib_held": held, "peak_rss_mib": peak,
    });
    if out.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "artifact of {} players ({:.1} MiB on disk, written in {:.2} s): load + verify median {:.3} s over {} runs; {:.0} MiB resident after loading, peak {:.0} MiB",
            a.players,
            bytes as f64 / 1048576.0,
            write_s,
            median,
            secs.len(),
            held,
            peak
        );
    }
    Ok(())
}
