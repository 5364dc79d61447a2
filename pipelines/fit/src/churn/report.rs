//! The churn report: its figures (`churn_metrics.json`) and its page.

use std::fmt::Write as _;
use std::path::PathBuf;

use mm_trainer::stats::{BinaryMetrics, ReliabilityBin};
use serde::Serialize;

use mm_lake::schema::ms_time;

use crate::html::{decimals, escape, line_chart, page_head};

/// Calibration of the model against the simulator's true churn probabilities.
#[derive(Debug, Clone, Serialize)]
pub struct TruthCheck {
    pub column: String,
    pub rows: u64,
    /// Expected calibration error against the true probabilities (10 equal-width bins of the
    /// prediction, each `|mean predicted - mean true|`, weighted by count).
    pub ece_vs_truth: f64,
    /// Mean `|predicted - true|` over the rows.
    pub mean_abs_diff: f64,
    /// The same for a constant prediction at the training rows' churn rate, which is
    /// calibrated too: what `mean_abs_diff` must beat for the model to know more than the rate.
    pub constant_mean_abs_diff: f64,
    /// How well the true probabilities themselves rank the observed labels: the ceiling.
    pub truth_auc: f64,
    pub truth_log_loss: f64,
    pub model_auc: f64,
    pub reliability_vs_truth: Vec<ReliabilityBin>,
}

/// One group of a breakdown (skill decile, party or solo, last three outcomes).
#[derive(Debug, Clone, Serialize)]
pub struct GroupScore {
    pub group: String,
    pub rows: u64,
    pub observed: f64,
    pub mean_predicted: f64,
    pub auc: f64,
    pub ece: f64,
}

/// The exported churn model refitted at the chosen C on every labelled row.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Refit {
    pub rows: u64,
    pub churn_rate: f64,
    /// Labelled rows left out by `max_train_rows`.
    pub rows_unused: u64,
    pub seconds: f64,
}

/// Everything `mm fit churn` reports (`churn_metrics.json`).
#[derive(Debug, Clone, Serialize)]
pub struct ChurnReport {
    pub lake: PathBuf,
    /// The version of the lake's matches table the fit read (`--as-of` reproduces the fit).
    pub lake_version: Option<i64>,
    pub mode: Option<String>,
    pub horizon: String,
    pub rows: u64,
    pub censored: u64,
    pub train_rows: u64,
    /// Training rows left out by `max_train_rows`.
    pub train_rows_unused: u64,
    pub score_rows: u64,
    pub train_from_ms: i64,
    pub score_from_ms: i64,
    pub data_end_ms: i64,
    pub churn_rate_train: f64,
    pub churn_rate_score: f64,
    pub c: f64,
    pub grid: Vec<mm_trainer::churn::model::GridPoint>,
    /// The exported model's refit on every labelled row (None: the exported model is the
    /// training window's, the one scored).
    pub refit: Option<Refit>,
    /// The exported model's churn after a close and after a blowout loss (None: not fitted).
    pub blowout: Option<mm_trainer::churn::model::BlowoutShift>,
    pub scored: BinaryMetrics,
    pub auc: f64,
    pub reliability: Vec<ReliabilityBin>,
    pub truth: Option<TruthCheck>,
    pub by_party: Vec<GroupScore>,
    pub by_skill_decile: Vec<GroupScore>,
    /// EOMM Table 1: observed churn after each pattern of the last three outcomes (oldest
    /// first), over all labelled rows; predictions over the scored rows.
    pub by_last_three: Vec<GroupScore>,
    /// The feature table this fit read.
    pub build: BuildInfo,
    /// Building the feature table (0 when a complete build was found).
    pub features_seconds: f64,
    pub fit_seconds: f64,
    pub total_seconds: f64,
    pub peak_rss_bytes: Option<u64>,
    pub outputs: Vec<PathBuf>,
}

/// Where the fit's feature table came from.
#[derive(Debug, Clone, Serialize)]
pub struct BuildInfo {
    pub tables: String,
    /// The build key (a digest of the options the rows depend on).
    pub key: String,
    pub shards: u32,
    /// Whether a complete build was found (rows built by shards or an earlier run).
    pub reused: bool,
    pub features_version: Option<i64>,
    pub state_version: Option<i64>,
    pub files: usize,
    /// When this run built the table: the rows read from the lake and the buckets.
    pub rows_read: Option<u64>,
    pub buckets: Option<usize>,
}

/// What the report says of the exported model beside the training window's: its refit, and
/// the losses it tells apart.
fn export_notes(h: &mut String, r: &ChurnReport) {
    if let Some(f) = &r.refit {
        let _ = write!(
            h,
            "<p>The exported model was refitted at this C on {} labelled rows of both windows \
             (churn rate {}); the figures below are those of the training window's model on the \
             later window, and the coefficients those of the exported model.</p>",
            f.rows,
            decimals(f.churn_rate, 4)
        );
    }
    if let Some(b) = &r.blowout {
        let _ = write!(
            h,
            "<p>Losses told apart (what team EOMM reads): on {} loss rows of the exported model, \
             {} of them blowouts, its log-odds move by {} after a close loss and by {} more after \
             a blowout loss.</p>",
            b.losses,
            b.blowouts,
            decimals(b.close, 3),
            decimals(b.blowout, 3)
        );
    }
}

/// The churn calibration report page.
#[must_use]
pub fn churn_html(r: &ChurnReport, m: &mm_trainer::churn::model::ChurnModel) -> String {
    let mut h = page_head("Churn report");
    intro(&mut h, r, m);
    export_notes(&mut h, r);
    scoring(&mut h, r);
    breakdowns(&mut h, r);
    model_tables(&mut h, r, m);
    h
}

/// The heading: the horizon, the rows and how they were split, the model and its C.
fn intro(h: &mut String, r: &ChurnReport, m: &mm_trainer::churn::model::ChurnModel) {
    let _ = write!(
        h,
        "<h1>Churn report</h1><p>Churn: no match in the next <b>{}</b>{}. {} player-match rows; \
         {} censored (within {} of the end of the data, {}); trained on {} rows before {} \
         (churn rate {}{}), scored on {} later rows to {} (churn rate {}).</p>\
         <p>L2 logistic regression on {} standardised features; C = {} chosen by 5-fold \
         cross-validation grouped by player on {} rows.</p>",
        escape(&r.horizon),
        r.mode
            .as_ref()
            .map(|m| format!(", mode <code>{}</code>", escape(m)))
            .unwrap_or_default(),
        r.rows,
        r.censored,
        escape(&r.horizon),
        ms_time(r.data_end_ms),
        r.train_rows,
        ms_time(r.score_from_ms),
        decimals(r.churn_rate_train, 4),
        if r.train_rows_unused > 0 {
            format!(
                "; {} more rows left out by the row cap",
                r.train_rows_unused
            )
        } else {
            String::new()
        },
        r.score_rows,
        ms_time(r.data_end_ms),
        decimals(r.churn_rate_score, 4),
        m.feature_names.len(),
        m.c,
        m.cv_rows,
    );
}

/// The scoring window's figures and reliability, and the comparison with the simulator's truth.
fn scoring(h: &mut String, r: &ChurnReport) {
    let s = &r.scored;
    let _ = write!(
        h,
        "<h2>Scoring window</h2><table><tr><th>rows</th><th>AUC</th><th>log-loss</th>\
         <th>Brier</th><th>expected calibration error</th><th>accuracy</th></tr>\
         <tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        s.n,
        decimals(r.auc, 4),
        decimals(s.log_loss, 4),
        decimals(s.brier, 4),
        decimals(s.ece, 4),
        decimals(s.accuracy, 4)
    );
    h.push_str("<div class=\"charts\"><div>");
    reliability(
        h,
        "Reliability (scoring window)",
        "observed churn",
        &r.reliability,
    );
    h.push_str("</div>");
    if let Some(t) = &r.truth {
        h.push_str("<div>");
        reliability(
            h,
            "Against the true churn probability",
            "mean true probability",
            &t.reliability_vs_truth,
        );
        h.push_str("</div>");
    }
    h.push_str("</div>");
    if let Some(t) = &r.truth {
        let _ = write!(
            h,
            "<h2>Against the simulator's truth (<code>{}</code>)</h2><table><tr><th>rows</th>\
             <th>calibration error vs truth</th><th>mean |model - truth|</th>\
             <th>mean |training churn rate - truth|</th><th>model AUC</th>\
             <th>truth AUC (the ceiling)</th><th>truth log-loss</th><th>model log-loss</th></tr>\
             <tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
            escape(&t.column),
            t.rows,
            decimals(t.ece_vs_truth, 4),
            decimals(t.mean_abs_diff, 4),
            decimals(t.constant_mean_abs_diff, 4),
            decimals(t.model_auc, 4),
            decimals(t.truth_auc, 4),
            decimals(t.truth_log_loss, 4),
            decimals(s.log_loss, 4)
        );
    }
}

/// The scoring window by party, skill decile and the last three outcomes.
fn breakdowns(h: &mut String, r: &ChurnReport) {
    h.push_str("<h2>Breakdowns (scoring window)</h2>");
    group_table(h, "Party or solo", "queued", &r.by_party);
    if r.by_skill_decile.is_empty() {
        h.push_str(
            "<p>No skill deciles: run with <code>--skill</code> (the skill fit's output).</p>",
        );
    } else {
        group_table(h, "By skill decile", "percentile", &r.by_skill_decile);
    }
    group_table(
        h,
        "Churn by the last three outcomes, oldest first (EOMM Table 1; observed over all labelled rows)",
        "outcomes",
        &r.by_last_three,
    );
}

/// The cross-validation grid and the coefficients; closes the page.
fn model_tables(h: &mut String, r: &ChurnReport, m: &mm_trainer::churn::model::ChurnModel) {
    h.push_str(
        "<h2>Cross-validation</h2><table><tr><th>C</th><th>CV log-loss</th><th>CV AUC</th></tr>",
    );
    for g in &r.grid {
        let _ = write!(
            h,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td></tr>",
            g.c,
            if g.c == r.c { " (chosen)" } else { "" },
            decimals(g.cv_log_loss, 5),
            decimals(g.cv_auc, 4)
        );
    }
    h.push_str("</table><h2>Coefficients (per standard deviation)</h2><table><tr><th>feature</th><th>coefficient</th><th>mean</th><th>sd</th></tr>");
    let mut order: Vec<usize> = (0..m.coef.len()).collect();
    order.sort_by(|&a, &b| m.coef[b].abs().total_cmp(&m.coef[a].abs()));
    for k in order {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&m.feature_names[k]),
            decimals(m.coef[k], 4),
            decimals(m.mean[k], 4),
            decimals(m.scale[k], 4)
        );
    }
    let _ = write!(
        h,
        "</table><p>Intercept {}. Features built in {:.1} s, model fitted in {:.1} s.</p></body></html>",
        decimals(m.intercept, 4),
        r.features_seconds,
        r.fit_seconds
    );
}

fn group_table(h: &mut String, title: &str, first: &str, groups: &[GroupScore]) {
    if groups.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h3>{}</h3><table><tr><th>{}</th><th>rows</th><th>observed churn</th>\
         <th>mean predicted</th><th>AUC</th><th>calibration error</th></tr>",
        escape(title),
        escape(first)
    );
    for g in groups {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&g.group),
            g.rows,
            decimals(g.observed, 4),
            decimals(g.mean_predicted, 4),
            decimals(g.auc, 4),
            decimals(g.ece, 4)
        );
    }
    h.push_str("</table>");
}

/// A reliability diagram: predicted against observed per bin, with the diagonal, and the bin
/// counts in a table beside it (EOMM Figure 3).
fn reliability(h: &mut String, title: &str, observed: &str, bins: &[ReliabilityBin]) {
    let pts: Vec<(f64, f64)> = bins
        .iter()
        .map(|b| (b.mean_predicted, b.observed))
        .collect();
    let hi = pts
        .iter()
        .fold(0.05_f64, |m, p| m.max(p.0).max(p.1))
        .min(1.0)
        * 1.05;
    h.push_str(&line_chart(
        title,
        "mean predicted churn",
        observed,
        (0.0, hi),
        (0.0, hi),
        &[
            ("perfect calibration", vec![(0.0, 0.0), (hi, hi)], false),
            ("model", pts, true),
        ],
    ));
    h.push_str("<table><tr><th>bin</th><th>rows</th><th>mean predicted</th><th>observed</th></tr>");
    for b in bins {
        let _ = write!(
            h,
            "<tr><td>{:.1}–{:.1}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            b.lo,
            b.hi,
            b.n,
            decimals(b.mean_predicted, 4),
            decimals(b.observed, 4)
        );
    }
    h.push_str("</table>");
}
