//! Writing the fit's outputs: the model, the players' state, the report and its figures, each
//! published atomically.

use std::path::PathBuf;
use std::time::Instant;

use mm_trainer::churn::model::ChurnModel;

use super::ChurnConfig;
use super::sample::read_part;
use super::score::StreamOut;
use crate::churn::report::ChurnReport;
use crate::churn::table::CompleteBuild;
use crate::error::FitError;

/// Writes `name` into `cfg.out` atomically and records it in `outputs`.
fn write(
    cfg: &ChurnConfig,
    name: &str,
    bytes: &[u8],
    outputs: &mut Vec<PathBuf>,
) -> Result<(), FitError> {
    let p = cfg.out.join(name);
    mm_lake::parquet_io::write_atomic(&p, bytes).map_err(|e| FitError::Output {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    outputs.push(p);
    Ok(())
}

/// `churn_model.json`, then the scored feature table (`table`, already written) and
/// `churn_state.parquet`, the players' state at the end of the data (what `mm export` puts in
/// the snapshot). Returns the files in that order.
pub(super) fn write_model_and_state(
    cfg: &ChurnConfig,
    model: &ChurnModel,
    build: &CompleteBuild,
    table: Option<PathBuf>,
) -> Result<Vec<PathBuf>, FitError> {
    let mut outputs = Vec::new();
    let model_json = serde_json::json!({
        "kind": "churn-logistic",
        "horizon": cfg.horizon,
        "horizon_ms": cfg.horizon_ms,
        "mode": cfg.mode,
        "blowout_margin": cfg.blowout_margin,
        "model": model,
    });
    write(
        cfg,
        "churn_model.json",
        serde_json::to_string_pretty(&model_json)
            .unwrap_or_default()
            .as_bytes(),
        &mut outputs,
    )?;
    outputs.extend(table);
    // The players' state at the end of the data: what `mm export` puts in the snapshot.
    let mut state_out = StreamOut::new(cfg.out.join("churn_state.parquet"));
    let mut empty_state = None;
    for f in &build.state {
        let df = read_part(f, None)?;
        if empty_state.is_none() {
            empty_state = Some(df.clear());
        }
        if df.height() > 0 {
            state_out.write(&df)?;
        }
    }
    if let Some(empty) = empty_state {
        outputs.push(state_out.finish(&empty)?);
    }
    Ok(outputs)
}

/// `churn_report.html` (with `cfg.html`) and `churn_metrics.json`, which lists every output;
/// `report.outputs` ends as that list.
pub(super) fn write_report(
    cfg: &ChurnConfig,
    report: &mut ChurnReport,
    model: &ChurnModel,
    mut outputs: Vec<PathBuf>,
    t0: Instant,
) -> Result<(), FitError> {
    if cfg.html {
        let html = crate::churn::report::churn_html(report, model);
        write(cfg, "churn_report.html", html.as_bytes(), &mut outputs)?;
    }
    report.total_seconds = t0.elapsed().as_secs_f64();
    report.peak_rss_bytes = mm_run::peak_rss_bytes();
    report.outputs = outputs.clone();
    let metrics = serde_json::to_string_pretty(&report).unwrap_or_default();
    write(cfg, "churn_metrics.json", metrics.as_bytes(), &mut outputs)?;
    report.outputs = outputs;
    Ok(())
}
