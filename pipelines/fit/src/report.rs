//! The HTML skill report: one self-contained file (inline SVG charts drawn with plotters), to
//! open in a browser with no server.

use std::fmt::Write as _;

use mm_trainer::skill::percentile::PercentileMap;
use mm_trainer::skill::team::TeamSample;
use mm_trainer::stats::ReliabilityBin;
use plotters::prelude::*;

use crate::replay::DistPoint;
use crate::skill::SkillReport;

const W: u32 = 560;
const H: u32 = 380;
const PALETTE: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// Escapes text for HTML.
#[must_use]
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One series of a chart: name, points, and whether to mark the points.
pub type Series<'a> = (&'a str, Vec<(f64, f64)>, bool);

/// A line (and point) chart.
#[must_use]
pub fn line_chart(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    x: (f64, f64),
    y: (f64, f64),
    series: &[Series<'_>],
) -> String {
    let mut svg = String::new();
    let drawn = (|| -> Result<(), Box<dyn std::error::Error + '_>> {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(52)
            .build_cartesian_2d(x.0..x.1, y.0..y.1)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (k, (name, pts, points)) in series.iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
                .label(*name)
                .legend(move |(a, b)| {
                    PathElement::new(vec![(a, b), (a + 16, b)], c.stroke_width(2))
                });
            if *points {
                chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    })();
    match drawn {
        Ok(()) => svg,
        Err(e) => format!("<p>chart not drawn: {}</p>", esc(&e.to_string())),
    }
}

/// `x` with `d` decimals, or a dash when it is not finite.
#[must_use]
pub fn f(x: f64, d: usize) -> String {
    if x.is_finite() {
        format!("{x:.d$}")
    } else {
        "–".into()
    }
}

/// The start of a report page: title and the shared style, up to `<body>`.
#[must_use]
pub fn page_head(title: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>body{{font-family:sans-serif;max-width:1180px;margin:2em auto;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}\
         th{{background:#f3f3f3}}td:first-child{{text-align:left}}\
         .charts{{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}}\
         code{{background:#f6f6f6}}</style></head><body>",
        esc(title)
    )
}

/// The report page.
#[must_use]
pub fn skill_html(
    r: &SkillReport,
    dist: &[DistPoint],
    map: &PercentileMap,
    scored: &[TeamSample],
) -> String {
    let mut h = page_head("Skill report");
    let _ = write!(
        h,
        "<h1>Skill report</h1><p>Metric <code>{}</code>{}; {} matches ({} with two teams), {} players, \
         {} player-match rows.</p><p>Tuned on {} to {} ({} two-team matches, after a burn-in), \
         scored on {} to {} ({} matches): every prediction is made before the match is learned from.</p>",
        r.metric.name(),
        r.mode
            .as_ref()
            .map(|m| format!(", mode <code>{}</code>", esc(m)))
            .unwrap_or_default(),
        r.matches,
        r.two_team_matches,
        r.players,
        r.player_matches,
        esc(&r.windows.tune_from),
        esc(&r.windows.tune_to),
        r.windows.tune_matches,
        esc(&r.windows.score_from),
        esc(&r.windows.score_to),
        r.windows.scored_matches,
    );
    h.push_str(
        "<h2>Metrics on the scoring window</h2><table><tr><th>model</th><th>log-loss</th>\
         <th>accuracy</th><th>Brier</th><th>calibration error</th><th>n</th>\
         <th>tuning log-loss</th><th>updates/s</th><th>parameters</th></tr>",
    );
    for m in &r.models {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{:.0}</td><td style=\"text-align:left\"><code>{}</code></td></tr>",
            esc(&m.model),
            f(m.scored.log_loss, 4),
            f(m.scored.accuracy, 4),
            f(m.scored.brier, 4),
            f(m.scored.ece, 4),
            m.scored.n,
            f(m.tune_log_loss, 4),
            m.updates_per_s,
            esc(&m.params.to_string()),
        );
    }
    h.push_str("</table>");

    h.push_str("<div class=\"charts\">");
    // Reliability of our predicted win probability.
    let rel: Vec<(f64, f64)> = r
        .reliability
        .iter()
        .map(|b| (b.mean_predicted, b.observed))
        .collect();
    h.push_str(&line_chart(
        "Reliability (scoring window)",
        "predicted expected score of team A",
        "observed",
        (0.0, 1.0),
        (0.0, 1.0),
        &[
            ("raw-skill team model", rel, true),
            ("perfect", vec![(0.0, 0.0), (1.0, 1.0)], false),
        ],
    ));
    // The team win curve (CoD Figure 2) with observed rates by skill-difference decile.
    if let Some(t) = &r.team_model {
        let mut d: Vec<&TeamSample> = scored.iter().filter(|s| s.outcome != 0.5).collect();
        d.sort_by(|a, b| a.skill_diff.total_cmp(&b.skill_diff));
        let obs: Vec<(f64, f64)> = d
            .chunks(d.len().div_ceil(10).max(1))
            .map(|c| {
                let n = c.len() as f64;
                (
                    c.iter().map(|s| s.skill_diff).sum::<f64>() / n,
                    c.iter().map(|s| s.outcome).sum::<f64>() / n,
                )
            })
            .collect();
        let half = obs.iter().map(|p| p.0.abs()).fold(0.05, f64::max).min(4.0);
        h.push_str(&line_chart(
            "Team win curve",
            "team A raw-skill sum minus team B's",
            "P(A wins | decisive)",
            (-half, half),
            (0.0, 1.0),
            &[
                ("fitted (tuning window)", t.curve(half, 81), false),
                ("observed, by decile (scoring window)", obs, true),
            ],
        ));
    }
    // Skill distribution over time.
    if !dist.is_empty() {
        let t0 = dist[0].end_ms;
        let day = |ms: i64| (ms - t0) as f64 / 86_400_000.0;
        let names = ["5th", "25th", "50th", "75th", "95th"];
        let series: Vec<Series<'_>> = (0..5)
            .map(|k| {
                (
                    names[k],
                    dist.iter().map(|p| (day(p.end_ms), p.q[k])).collect(),
                    false,
                )
            })
            .collect();
        let lo = dist.iter().map(|p| p.q[0]).fold(0.0, f64::min) - 0.02;
        let hi = dist.iter().map(|p| p.q[4]).fold(0.0, f64::max) + 0.02;
        let x1 = day(dist[dist.len() - 1].end_ms).max(1.0);
        h.push_str(&line_chart(
            "Raw skill of the players seen, over time",
            "days since the first stretch",
            "raw skill percentiles",
            (0.0, x1),
            (lo, hi),
            &series,
        ));
    }
    h.push_str("</div>");

    // Percentile table.
    h.push_str("<h2>Percentile map (active population)</h2><table><tr><th>percentile</th>");
    let ps: Vec<f64> = (0..=20).map(|k| f64::from(k) * 5.0).collect();
    for p in &ps {
        let _ = write!(h, "<th>{p:.0}</th>");
    }
    h.push_str("</tr><tr><td>raw skill</td>");
    for p in &ps {
        let _ = write!(h, "<td>{}</td>", f(map.skill_at(p / 100.0), 3));
    }
    h.push_str("</tr></table>");

    // The team model and the party adjustment.
    if let Some(t) = &r.team_model_final {
        let _ = write!(
            h,
            "<h2>Team win model (exported; fitted on both windows)</h2><p>logit P(A wins | decisive) = \
             {} × skill-sum difference + {} × party-member difference + {} × party-spread difference; \
             {} matches, {} draws.</p>",
            f(t.skill_coef, 3),
            f(t.party_members_coef, 4),
            f(t.party_spread_coef, 4),
            t.samples,
            t.draws
        );
        if let Some(d) = t.draw {
            let _ = write!(
                h,
                "<p>logit P(draw) = {} + {} × |skill-sum difference|.</p>",
                f(d.intercept, 3),
                f(d.abs_diff_coef, 3)
            );
        }
    }
    if !r.party_iterations.is_empty() {
        h.push_str(
            "<h3>Party adjustment (raw-skill units per party member)</h3><table><tr><th>replay</th>\
             <th>per member</th><th>per member per unit of party skill sd</th></tr>",
        );
        for (k, a) in r.party_iterations.iter().enumerate() {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                k + 1,
                f(a.per_member, 4),
                f(a.per_member_per_sd, 4)
            );
        }
        h.push_str("</table>");
    }
    let _ = write!(
        h,
        "<p>Pairwise (\"i outperforms j\" on the metric, scoring window): log-loss {}, accuracy {}, \
         {} pairs.</p></body></html>",
        f(r.pairwise.log_loss, 4),
        f(r.pairwise.accuracy, 4),
        r.pairwise.n
    );
    h
}

fn ms_date(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|d| d.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_default()
}

fn group_table(h: &mut String, title: &str, first: &str, groups: &[crate::churn::GroupScore]) {
    if groups.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<h3>{}</h3><table><tr><th>{}</th><th>rows</th><th>observed churn</th>\
         <th>mean predicted</th><th>AUC</th><th>calibration error</th></tr>",
        esc(title),
        esc(first)
    );
    for g in groups {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.group),
            g.rows,
            f(g.observed, 4),
            f(g.mean_predicted, 4),
            f(g.auc, 4),
            f(g.ece, 4)
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
            f(b.mean_predicted, 4),
            f(b.observed, 4)
        );
    }
    h.push_str("</table>");
}

/// The churn calibration report page.
#[must_use]
pub fn churn_html(
    r: &crate::churn::ChurnReport,
    m: &mm_trainer::churn::model::ChurnModel,
) -> String {
    let mut h = page_head("Churn report");
    let _ = write!(
        h,
        "<h1>Churn report</h1><p>Churn: no match in the next <b>{}</b>{}. {} player-match rows; \
         {} censored (within {} of the end of the data, {}); trained on {} rows before {} \
         (churn rate {}{}), scored on {} later rows to {} (churn rate {}).</p>\
         <p>L2 logistic regression on {} standardised features; C = {} chosen by 5-fold \
         cross-validation grouped by player on {} rows.</p>",
        esc(&r.horizon),
        r.mode
            .as_ref()
            .map(|m| format!(", mode <code>{}</code>", esc(m)))
            .unwrap_or_default(),
        r.rows,
        r.censored,
        esc(&r.horizon),
        ms_date(r.data_end_ms),
        r.train_rows,
        ms_date(r.score_from_ms),
        f(r.churn_rate_train, 4),
        if r.train_rows_unused > 0 {
            format!(
                "; {} more rows left out by the row cap",
                r.train_rows_unused
            )
        } else {
            String::new()
        },
        r.score_rows,
        ms_date(r.data_end_ms),
        f(r.churn_rate_score, 4),
        m.feature_names.len(),
        m.c,
        m.cv_rows,
    );
    let s = &r.scored;
    let _ = write!(
        h,
        "<h2>Scoring window</h2><table><tr><th>rows</th><th>AUC</th><th>log-loss</th>\
         <th>Brier</th><th>expected calibration error</th><th>accuracy</th></tr>\
         <tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
        s.n,
        f(r.auc, 4),
        f(s.log_loss, 4),
        f(s.brier, 4),
        f(s.ece, 4),
        f(s.accuracy, 4)
    );
    h.push_str("<div class=\"charts\"><div>");
    reliability(
        &mut h,
        "Reliability (scoring window)",
        "observed churn",
        &r.reliability,
    );
    h.push_str("</div>");
    if let Some(t) = &r.truth {
        h.push_str("<div>");
        reliability(
            &mut h,
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
             <th>calibration error vs truth</th><th>mean |model - truth|</th><th>model AUC</th>\
             <th>truth AUC (the ceiling)</th><th>truth log-loss</th><th>model log-loss</th></tr>\
             <tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr></table>",
            esc(&t.column),
            t.rows,
            f(t.ece_vs_truth, 4),
            f(t.mean_abs_diff, 4),
            f(t.model_auc, 4),
            f(t.truth_auc, 4),
            f(t.truth_log_loss, 4),
            f(s.log_loss, 4)
        );
    }
    h.push_str("<h2>Breakdowns (scoring window)</h2>");
    group_table(&mut h, "Party or solo", "queued", &r.by_party);
    if r.by_skill_decile.is_empty() {
        h.push_str(
            "<p>No skill deciles: run with <code>--skill</code> (the skill fit's output).</p>",
        );
    } else {
        group_table(&mut h, "By skill decile", "percentile", &r.by_skill_decile);
    }
    group_table(
        &mut h,
        "Churn by the last three outcomes, oldest first (EOMM Table 1; observed over all labelled rows)",
        "outcomes",
        &r.by_last_three,
    );
    h.push_str(
        "<h2>Cross-validation</h2><table><tr><th>C</th><th>CV log-loss</th><th>CV AUC</th></tr>",
    );
    for g in &r.grid {
        let _ = write!(
            h,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td></tr>",
            g.c,
            if g.c == r.c { " (chosen)" } else { "" },
            f(g.cv_log_loss, 5),
            f(g.cv_auc, 4)
        );
    }
    h.push_str("</table><h2>Coefficients (per standard deviation)</h2><table><tr><th>feature</th><th>coefficient</th><th>mean</th><th>sd</th></tr>");
    let mut order: Vec<usize> = (0..m.coef.len()).collect();
    order.sort_by(|&a, &b| m.coef[b].abs().total_cmp(&m.coef[a].abs()));
    for k in order {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.feature_names[k]),
            f(m.coef[k], 4),
            f(m.mean[k], 4),
            f(m.scale[k], 4)
        );
    }
    let _ = write!(
        h,
        "</table><p>Intercept {}. Features built in {:.1} s, model fitted in {:.1} s.</p></body></html>",
        f(m.intercept, 4),
        r.features_seconds,
        r.fit_seconds
    );
    h
}
