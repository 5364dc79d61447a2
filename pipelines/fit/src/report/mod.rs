//! The HTML skill and churn reports, one self-contained file each (see [`crate::html`]), with
//! the types of the figures they show (also written as JSON beside them).

use std::fmt::Write as _;

use mm_trainer::stats::ReliabilityBin;

use crate::html::{decimals, escape, line_chart};

pub mod churn;
pub mod skill;

pub(crate) fn group_table(h: &mut String, title: &str, first: &str, groups: &[churn::GroupScore]) {
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
pub(crate) fn reliability(h: &mut String, title: &str, observed: &str, bins: &[ReliabilityBin]) {
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
