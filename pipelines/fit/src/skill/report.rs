//! The skill report: its figures (`skill_metrics.json`) and its page.

use std::fmt::Write as _;
use std::path::PathBuf;

use mm_lake::schema::DAY_MS;
use mm_trainer::skill::percentile::PercentileMap;
use mm_trainer::skill::raw::RawSkillParams;
use mm_trainer::skill::team::{PartyAdjustment, TeamSample, TeamWinModel};
use mm_trainer::stats::{BinaryMetrics, ReliabilityBin};
use serde::Serialize;

use crate::html::{Series, decimals, escape, line_chart, page_head};
use crate::skill::history::Metric;
use crate::skill::replay::DistPoint;

/// The matches the exported team model was fitted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinalWindow {
    /// The scoring window: the latest matches.
    Score,
    /// The tuning and scoring windows together (the scoring window had too few decisive
    /// matches).
    Both,
}

impl FinalWindow {
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            FinalWindow::Score => "the scoring window, the latest matches",
            FinalWindow::Both => "both windows (too few decisive matches in the scoring window)",
        }
    }
}

/// One model's line of the metrics table.
#[derive(Debug, Clone, Serialize)]
pub struct ModelScore {
    pub model: String,
    /// The hyperparameters used (tuned or default).
    pub params: serde_json::Value,
    /// Log-loss on the tuning window with these parameters.
    pub tune_log_loss: f64,
    /// The held-out scoring window.
    pub scored: BinaryMetrics,
    /// Player-match updates per second of the replay (predictions included).
    pub updates_per_s: f64,
}

/// One point of our tuning grid.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TunePoint {
    pub half_life_matches: f64,
    pub margin: f64,
    /// How roles were compared (`all` when the lake has no roles).
    pub roles: mm_trainer::skill::raw::RoleComparison,
    pub log_loss: f64,
}

/// The time windows, as dates.
#[derive(Debug, Clone, Serialize)]
pub struct WindowDates {
    pub tune_from: String,
    pub tune_to: String,
    pub score_from: String,
    pub score_to: String,
    pub tune_matches: u64,
    pub scored_matches: u64,
}

/// The lake's first days that tuning and scoring read, when the lake had more rows than
/// `--max-tune-rows` (the chosen model then replayed every day).
#[derive(Debug, Clone, Serialize)]
pub struct TuningSample {
    pub rows: u64,
    pub matches: u64,
    /// The last match of the sample.
    pub until: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SkillReport {
    /// The version of the lake's matches table the fit read (`--as-of` reproduces the fit).
    pub lake_version: Option<i64>,
    pub metric: Metric,
    pub mode: Option<String>,
    pub matches: u64,
    pub two_team_matches: u64,
    pub player_matches: u64,
    pub players: u64,
    pub active_players: u64,
    pub skill_mean: f64,
    pub skill_sd: f64,
    pub skill_min: f64,
    pub skill_max: f64,
    pub windows: WindowDates,
    /// Set when the windows above are those of a sample of the lake's first days.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tuning_sample: Option<TuningSample>,
    /// Our model's hyperparameters (after tuning).
    pub params: RawSkillParams,
    pub tuning: Vec<TunePoint>,
    /// The metrics table: our model first, then each baseline.
    pub models: Vec<ModelScore>,
    /// "i outperforms j" on the metric, every pair of the scoring window's lobbies.
    pub pairwise: BinaryMetrics,
    /// The team win model fitted on the tuning window (the one scored).
    pub team_model: Option<TeamWinModel>,
    /// The same model refitted for export: on the scoring window (the latest matches) when it
    /// has enough decisive matches, else on both windows (`team_model_final_window`).
    pub team_model_final: Option<TeamWinModel>,
    /// Which window `team_model_final` was fitted on.
    pub team_model_final_window: Option<FinalWindow>,
    /// The whole-history win skill: its fit, its calibrated team win model, and whether that
    /// model was exported in place of `team_model_final` (None: not fitted, `--no-win-skill`).
    pub win_skill: Option<crate::skill::win::WinSkillReport>,
    pub party_adjustment: Option<PartyAdjustment>,
    /// The party adjustment after each replay (the first credits parties nothing).
    pub party_iterations: Vec<PartyAdjustment>,
    /// Against the simulator's truth, on a simulated lake.
    pub truth: Option<crate::skill::truth::SkillTruth>,
    pub reliability: Vec<ReliabilityBin>,
    pub percentile_knots: usize,
    pub seconds: f64,
    pub out: PathBuf,
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
    intro(&mut h, r);
    metrics_table(&mut h, r);
    charts(&mut h, r, dist, scored);
    percentile_table(&mut h, map);
    team_model(&mut h, r);
    // Last, so that the team model's party table and the pairwise figures (raw skill's) stay
    // under the team model's heading.
    if let Some(w) = &r.win_skill {
        win_skill_html(&mut h, w);
    }
    h.push_str("</body></html>");
    h
}

/// The heading: the metric, the lake's counts and the tuning and scoring windows.
fn intro(h: &mut String, r: &SkillReport) {
    let _ = write!(
        h,
        "<h1>Skill report</h1><p>Metric <code>{}</code>{}; {} matches ({} with two teams), {} players, \
         {} player-match rows.</p><p>Tuned on {} to {} ({} two-team matches, after a burn-in), \
         scored on {} to {} ({} matches): every prediction is made before the match is learned from.</p>",
        r.metric.name(),
        r.mode
            .as_ref()
            .map(|m| format!(", mode <code>{}</code>", escape(m)))
            .unwrap_or_default(),
        r.matches,
        r.two_team_matches,
        r.players,
        r.player_matches,
        escape(&r.windows.tune_from),
        escape(&r.windows.tune_to),
        r.windows.tune_matches,
        escape(&r.windows.score_from),
        escape(&r.windows.score_to),
        r.windows.scored_matches,
    );
    if let Some(t) = &r.tuning_sample {
        let _ = write!(
            h,
            "<p>The lake has more rows than <code>--max-tune-rows</code>: tuning, scoring, the \
             baselines and the party adjustment read its first days ({} matches, {} rows, to {}); \
             the chosen model then replayed every day, and the final team model was fitted on \
             that replay.</p>",
            t.matches,
            t.rows,
            escape(&t.until),
        );
    }
}

/// Every model's figures on the scoring window.
fn metrics_table(h: &mut String, r: &SkillReport) {
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
            escape(&m.model),
            decimals(m.scored.log_loss, 4),
            decimals(m.scored.accuracy, 4),
            decimals(m.scored.brier, 4),
            decimals(m.scored.ece, 4),
            m.scored.n,
            decimals(m.tune_log_loss, 4),
            m.updates_per_s,
            escape(&m.params.to_string()),
        );
    }
    h.push_str("</table>");
}

/// The reliability diagram, the team win curve and the skill distribution over time.
fn charts(h: &mut String, r: &SkillReport, dist: &[DistPoint], scored: &[TeamSample]) {
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
        let day = |ms: i64| (ms - t0) as f64 / DAY_MS as f64;
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
}

/// The percentile map in two rows of knots (0-50 and 55-100), so that it fits the page.
fn percentile_table(h: &mut String, map: &PercentileMap) {
    h.push_str("<h2>Percentile map (active population)</h2><table>");
    for half in [0..=10, 11..=20] {
        let ps: Vec<f64> = half.map(|k| f64::from(k) * 5.0).collect();
        h.push_str("<tr><th>percentile</th>");
        for p in &ps {
            let _ = write!(h, "<th>{p:.0}</th>");
        }
        h.push_str("</tr><tr><td>raw skill</td>");
        for p in &ps {
            let _ = write!(h, "<td>{}</td>", decimals(map.skill_at(p / 100.0), 3));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
}

/// The team win model on raw skill, the party adjustment's replays and the pairwise figures.
fn team_model(h: &mut String, r: &SkillReport) {
    let win_exported = r.win_skill.as_ref().is_some_and(|w| w.exported);
    if let Some(t) = &r.team_model_final {
        let _ = write!(
            h,
            "<h2>Team win model on raw skill ({}fitted on {})</h2><p>logit P(A wins | decisive) = \
             {} × skill-sum difference + {} × party-member difference + {} × party-spread difference; \
             {} matches, {} draws.</p>",
            if win_exported {
                "not exported: the win skill's is; "
            } else {
                "exported; "
            },
            r.team_model_final_window.map_or("?", FinalWindow::describe),
            decimals(t.skill_coef, 3),
            decimals(t.party_members_coef, 4),
            decimals(t.party_spread_coef, 4),
            t.samples,
            t.draws
        );
        if let Some(d) = t.draw {
            let _ = write!(
                h,
                "<p>logit P(draw) = {} + {} × |skill-sum difference|.</p>",
                decimals(d.intercept, 3),
                decimals(d.abs_diff_coef, 3)
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
                decimals(a.per_member, 4),
                decimals(a.per_member_per_sd, 4)
            );
        }
        h.push_str("</table>");
    }
    let _ = write!(
        h,
        "<p>Pairwise (\"i outperforms j\" on the metric, scoring window): log-loss {}, accuracy {}, \
         {} pairs.</p>",
        decimals(r.pairwise.log_loss, 4),
        decimals(r.pairwise.accuracy, 4),
        r.pairwise.n
    );
}

/// The win skill's section: what it was fitted on, how it compared with raw skill, its model.
fn win_skill_html(h: &mut String, w: &crate::skill::win::WinSkillReport) {
    let _ = write!(
        h,
        "<h2>Win skill (a whole-history strength; {})</h2><p>Two strengths per player, fitted \
         on the {} most recent two-team matches of {} ({} to {}; {} decisive, {} players): \
         Bradley-Terry on the decisive matches' outcomes (L2 penalty {}), and least squares on \
         each row's in-match metric against the opponents' mean strength (L2 penalty {}, each \
         match weighted by a half-life of {} days). Calibrated on the {} matches from {} ({} \
         decisive; {} decisive matches before them), each predicted by the strengths refitted on \
         every match before its {}-day step: log-loss of the decisive ones {} (outcomes) and {} \
         (performance) against raw skill's {} (each through a team model fitted on those \
         matches).{}{}</p>",
        if w.exported {
            "exported: the team win model reads it"
        } else {
            "not exported"
        },
        w.kept_matches,
        w.offered_matches,
        escape(&w.first_kept),
        escape(&w.last_kept),
        w.decisive,
        w.players,
        decimals(w.alpha, 3),
        decimals(w.perf_lambda, 3),
        decimals(w.perf_half_life_days, 1),
        w.calibration_matches,
        escape(&w.calibration_from),
        w.calibration_decisive,
        w.early_decisive,
        crate::skill::win::CALIBRATION_STEP_DAYS,
        w.win_log_loss
            .map_or_else(|| "-".to_string(), |x| decimals(x, 4)),
        w.perf_log_loss
            .map_or_else(|| "-".to_string(), |x| decimals(x, 4)),
        w.raw_log_loss
            .map_or_else(|| "-".to_string(), |x| decimals(x, 4)),
        w.estimator.map_or_else(String::new, |e| format!(
            " The better of the two: {}.",
            e.name()
        )),
        if w.reason.is_empty() {
            String::new()
        } else {
            format!(" Not exported: {}.", escape(&w.reason))
        }
    );
    if let (true, Some(t)) = (w.exported, &w.model) {
        let _ = write!(
            h,
            "<p>Exported model: logit P(A wins | decisive) = {} × win-skill-sum difference + {} \
             × party-member difference + {} × party-spread difference (win-skill units); final \
             fit {} iterations{}.</p>",
            decimals(t.skill_coef, 3),
            decimals(t.party_members_coef, 4),
            decimals(t.party_spread_coef, 4),
            w.iterations,
            if w.converged { "" } else { ", not converged" }
        );
        if let Some(d) = t.draw {
            let _ = write!(
                h,
                "<p>logit P(draw) = {} + {} × |win-skill-sum difference|.</p>",
                decimals(d.intercept, 3),
                decimals(d.abs_diff_coef, 3)
            );
        }
    }
}
