//! The evaluation's files: `evaluation.json` (everything) and `evaluation.html` (one
//! self-contained page: tables and inline SVG charts, opens from disk).

use std::fmt::Write as _;
use std::path::Path;

use mm_fit::html::{decimals, escape, interval_chart, line_chart, no_chart, page_head};

use crate::error::EvalError;
use crate::results::{
    DecileStats, DiffCi, EvalReport, HoldoutDiff, LeaverResult, OracleGain, PAPER_TABLE2, PairTest,
    SizeResult, TeamQueueResult,
};

/// Writes both files, each atomically (temporary file, then rename).
///
/// # Errors
/// The directory cannot be created or a file cannot be written.
pub fn write(out: &Path, r: &EvalReport) -> Result<(), EvalError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EvalError::Io { path, source }
    };
    std::fs::create_dir_all(out).map_err(io(out))?;
    let json = serde_json::to_vec_pretty(r).map_err(|e| EvalError::Input(e.to_string()))?;
    write_atomic(&out.join("evaluation.json"), &json)?;
    write_atomic(&out.join("evaluation.html"), html(r).as_bytes())?;
    Ok(())
}

/// [`mm_artifact::fsio::write_atomic`] with the error naming the file.
///
/// # Errors
/// The write failed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EvalError> {
    mm_artifact::fsio::write_atomic(path, bytes).map_err(|source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn pval(p: f64) -> String {
    if p == 0.0 {
        // Below the smallest positive double: the t statistic is beyond its tail.
        // In words, so that the HTML tables need no escaping.
        "below 1e-300".into()
    } else if p < 1e-4 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.2}%", 100.0 * x)
    } else {
        "–".into()
    }
}

/// The report page.
#[must_use]
pub fn html(r: &EvalReport) -> String {
    let mut h = page_head("mm evaluate");
    let _ = write!(
        h,
        "<h1>Offline evaluation</h1><p>Lake <code>{}</code>, mode <b>{}</b>. Candidate artifact \
         <code>{}</code> ({}){}. Evaluation window: {} (after the artifact's data). {} searches \
         by {} players in {} real matches; churn horizon {}. {} rounds per pool size, seed {}, \
         pools from windows of {}. Run time {:.1} s.</p>",
        escape(&r.lake),
        escape(r.mode.as_deref().unwrap_or("(all)")),
        escape(&r.artifact),
        escape(&r.artifact_version),
        r.compare.as_ref().map_or(String::new(), |c| format!(
            ", compared with <code>{}</code> ({})",
            escape(c),
            escape(r.compare_version.as_deref().unwrap_or(""))
        )),
        escape(&r.window),
        r.searches,
        r.players,
        r.real_matches,
        escape(&r.horizon),
        r.rounds,
        r.seed,
        escape(&r.pool_window),
        r.seconds
    );
    for n in &r.notes {
        let _ = write!(h, "<p><b>Note.</b> {}</p>", escape(n));
    }

    holdout_section(&mut h, r);
    historical_section(&mut h, r);

    if !r.sizes.is_empty() {
        table2(&mut h, r);
        for s in &r.sizes {
            size_section(&mut h, r, s);
        }
    }
    if let Some(t) = &r.team_queue {
        team_section(&mut h, t);
    }
    h.push_str("</body></html>\n");
    h
}

/// The models against what happened: the holdout scores per artifact and, with a baseline, the
/// paired differences with their bootstrap intervals.
fn holdout_section(h: &mut String, r: &EvalReport) {
    h.push_str(
        "<h2>The models against what happened</h2><p>Churn after the real outcome against the \
         observed label (censored searches left out); the team win model on the real matches. \
         The retrain gate compares these.</p><table><tr><th>artifact</th><th>version</th>\
         <th>churn rows</th><th>log-loss</th><th>Brier</th><th>ECE</th><th>AUC</th>\
         <th>mean predicted</th><th>observed</th><th>win-model matches</th><th>win log-loss</th>\
         <th>accuracy</th><th>new-player searches</th></tr>",
    );
    for x in &r.holdout {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&x.artifact),
            escape(&x.version),
            x.churn_rows,
            decimals(x.churn_log_loss, 4),
            decimals(x.churn_brier, 4),
            decimals(x.churn_ece, 4),
            decimals(x.churn_auc, 4),
            decimals(x.churn_mean_predicted, 4),
            decimals(x.churn_observed, 4),
            x.win_matches,
            decimals(x.win_log_loss, 4),
            decimals(x.win_accuracy, 4),
            x.new_players
        );
    }
    h.push_str("</table>");

    if let Some(d) = &r.holdout_diff {
        let _ = write!(
            h,
            "<p>Candidate ({}) minus baseline ({}) on the same {} churn rows of {} players and \
             {} matches, with 95% intervals from a paired bootstrap ({} resamples; churn \
             resampled by player, the win model by match). An interval that holds 0: the two \
             cannot be told apart on that score.</p><table><tr><th>score</th><th>candidate</th>\
             <th>baseline</th><th>difference</th><th>95% interval</th></tr>",
            escape(&d.candidate),
            escape(&d.baseline),
            d.churn_rows,
            d.players,
            d.win_matches,
            d.resamples
        );
        for (name, x) in diff_rows(d) {
            let _ = write!(
                h,
                "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{} – {}</td></tr>",
                decimals(x.candidate, 4),
                decimals(x.baseline, 4),
                decimals(x.diff, 4),
                decimals(x.ci95.0, 4),
                decimals(x.ci95.1, 4)
            );
        }
        h.push_str("</table>");
    }
}

/// What historically happened, under each artifact's models.
fn historical_section(h: &mut String, r: &EvalReport) {
    h.push_str(
        "<h2>What historically happened, under the same models</h2><table><tr><th>artifact</th>\
         <th>real matches</th><th>players</th><th>expected churn (95% CI)</th>\
         <th>observed churn</th><th>predicted blowouts</th><th>mean |P(win) − ½|</th>\
         <th>skill disparity (percentile)</th></tr>",
    );
    for x in &r.historical {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ({} – {})</td><td>{} (n = {})</td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&x.artifact),
            x.matches,
            x.players,
            decimals(x.expected_churn, 4),
            decimals(x.expected_churn_ci95.0, 4),
            decimals(x.expected_churn_ci95.1, 4),
            decimals(x.observed_churn, 4),
            x.observed_labelled,
            decimals(x.blowout_rate, 4),
            decimals(x.mean_abs_pwin_minus_half, 4),
            decimals(x.mean_skill_disparity, 4)
        );
    }
    h.push_str("</table>");
}

/// EOMM Table 2's layout: policies by pool size, retained players per round, plus the
/// real lobbies' rate and the paper's numbers.
fn table2(h: &mut String, r: &EvalReport) {
    h.push_str(
        "<h2>Retained players per round (EOMM Table 2 layout)</h2><p>Mean over rounds with its \
         95% confidence interval. “real lobbies” is the real matches' expected retention at \
         the same pool size. The paper's figures (its own game and models) are for the \
         shape only.</p><table><tr><th>policy</th>",
    );
    for s in &r.sizes {
        let _ = write!(
            h,
            "<th>P = {} ({})</th>",
            s.pool_size,
            escape(&s.pool_source)
        );
    }
    h.push_str("</tr>");
    if let Some(first) = r.sizes.first() {
        for (k, pol) in first.policies.iter().enumerate() {
            let _ = write!(h, "<tr><td>{}</td>", escape(&pol.policy));
            for s in &r.sizes {
                let x = &s.policies[k];
                let _ = write!(
                    h,
                    "<td>{} <small>({} – {})</small></td>",
                    decimals(x.retained_mean, 2),
                    decimals(x.retained_ci95.0, 2),
                    decimals(x.retained_ci95.1, 2)
                );
            }
            h.push_str("</tr>");
        }
    }
    for x in &r.historical {
        let _ = write!(h, "<tr><td>real lobbies ({})</td>", escape(&x.artifact));
        for s in &r.sizes {
            let v = x
                .expected_retained_per_size
                .iter()
                .find(|e| e.0 == s.pool_size)
                .map_or(f64::NAN, |e| e.1);
            let _ = write!(h, "<td>{} <small>(expected)</small></td>", decimals(v, 2));
        }
        h.push_str("</tr>");
    }
    for (k, name) in [
        "paper: WorstMM",
        "paper: SkillMM",
        "paper: RandomMM",
        "paper: EOMM",
    ]
    .iter()
    .enumerate()
    {
        let _ = write!(h, "<tr><td><i>{name}</i></td>");
        for s in &r.sizes {
            let v = PAPER_TABLE2
                .iter()
                .find(|e| e.0 == s.pool_size)
                .map_or(f64::NAN, |e| e.1[k]);
            let _ = write!(h, "<td><i>{}</i></td>", decimals(v, 2));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    if !r.eomm_vs_skill.is_empty() {
        eomm_over_skill(h, r);
        improvement_chart(h, r);
    }
}

/// EOMM over SkillMM per pool size, with the oracle split under the truth and the verdict.
fn eomm_over_skill(h: &mut String, r: &EvalReport) {
    h.push_str(
        "<h3>EOMM over SkillMM</h3><table><tr><th>pool size</th><th>artifact</th>\
         <th>retained, relative</th><th>Welch p</th><th>paired p</th>\
         <th>paired p, expected</th><th>paper</th></tr>",
    );
    for e in &r.eomm_vs_skill {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td></tr>",
            e.pool_size,
            escape(&e.artifact),
            pct(e.relative_improvement),
            pval(e.p_value),
            pval(e.paired_p_value),
            pval(e.paired_expected_p_value),
            e.paper_relative_improvement.map_or("–".into(), pct)
        );
    }
    h.push_str("</table>");
    if r.eomm_vs_skill.iter().any(|e| e.truth.is_some()) {
        h.push_str(
            "<h3>How much of the available gain our EOMM realises (simulator's truth)</h3>\
             <p>Every pairing scored with the simulator's true win and churn probabilities \
             (expected retained players per round), beside the oracle: EOMM pairing on \
             those probabilities themselves, the most any EOMM could retain in this world. \
             The paired t-tests compare each with SkillMM round by round. The last two \
             columns split the gap: the share EOMM realises when it pairs on the true win \
             probabilities with our churn model, and on our win model with the true churn \
             probabilities.</p><table><tr>\
             <th>pool size</th><th>artifact</th><th>SkillMM</th><th>our EOMM</th>\
             <th>oracle</th><th>oracle gain</th><th>realised gain</th><th>share</th>\
             <th>paired p, ours</th><th>paired p, oracle</th>\
             <th>share, true win + our churn</th><th>share, our win + true churn</th></tr>",
        );
        for e in &r.eomm_vs_skill {
            if let Some(t) = &e.truth {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                     <td>{}</td><td>{}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    e.pool_size,
                    escape(&e.artifact),
                    decimals(t.skill, 2),
                    decimals(t.eomm, 2),
                    decimals(t.oracle, 2),
                    pct(t.oracle_gain),
                    pct(t.realised_gain),
                    decimals(100.0 * t.share, 0),
                    pval(t.realised_p),
                    pval(t.oracle_p),
                    share_cell(t.true_win_share),
                    share_cell(t.true_churn_share),
                );
            }
        }
        h.push_str("</table>");
    }
    h.push_str("<ul>");
    for line in table2_verdict(r) {
        let _ = write!(h, "<li>{}</li>", escape(&line));
    }
    h.push_str("</ul>");
}

/// The retention chart by pool size and EOMM over SkillMM against the paper's, by pool size.
fn improvement_chart(h: &mut String, r: &EvalReport) {
    let series: Vec<(String, Vec<(f64, f64)>)> = {
        let mut by: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for e in &r.eomm_vs_skill {
            let name = if e.artifact.is_empty() {
                "measured".to_string()
            } else {
                format!("measured ({})", e.artifact)
            };
            match by.iter_mut().find(|b| b.0 == name) {
                Some(b) => {
                    b.1.push((e.pool_size as f64, 100.0 * e.relative_improvement))
                }
                None => by.push((
                    name,
                    vec![(e.pool_size as f64, 100.0 * e.relative_improvement)],
                )),
            }
        }
        by.push((
            "EOMM paper".into(),
            PAPER_TABLE2
                .iter()
                .map(|e| (e.0 as f64, 100.0 * (e.1[3] / e.1[1] - 1.0)))
                .collect(),
        ));
        by
    };
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .collect();
    let (lo, hi) = ys
        .iter()
        .fold((0.0f64, 0.0f64), |(a, b), &y| (a.min(y), b.max(y)));
    let pad = 0.1 * (hi - lo).max(0.5);
    let refs: Vec<mm_fit::html::Series<'_>> = series
        .iter()
        .map(|(n, pts)| (n.as_str(), pts.clone(), true))
        .collect();
    h.push_str("<div class=\"charts\">");
    h.push_str(&retention_by_size(r));
    h.push_str(&line_chart(
        "EOMM over SkillMM: retained players",
        "pool size",
        "relative improvement (%)",
        (50.0, 550.0),
        (lo - pad, hi + pad),
        &refs,
    ));
    h.push_str("</div>");
}

/// The Table 2 findings in words: per pool size, whether EOMM retains more than SkillMM and at
/// which level each test puts it; then which policy retains the most and which the fewest (the
/// first artifact's policies).
#[must_use]
pub fn table2_verdict(r: &EvalReport) -> Vec<String> {
    let level = |p: f64| {
        if p < 0.01 {
            "significant at 1%"
        } else {
            "not significant at 1%"
        }
    };
    let mut out: Vec<String> = r
        .eomm_vs_skill
        .iter()
        .map(|e| {
            format!(
                "P={}{}: EOMM {} SkillMM ({}): paired t-test p = {} ({}), Welch p = {} ({}).",
                e.pool_size,
                if e.artifact.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", e.artifact)
                },
                if e.relative_improvement > 0.0 {
                    "retains more players than"
                } else {
                    "retains no more players than"
                },
                pct(e.relative_improvement),
                pval(e.paired_p_value),
                level(e.paired_p_value),
                pval(e.p_value),
                level(e.p_value),
            )
        })
        .collect();
    let mut ranks: Vec<(usize, &str, &str)> = Vec::new();
    for s in &r.sizes {
        let Some(first) = s.policies.first() else {
            continue;
        };
        let own: Vec<_> = s
            .policies
            .iter()
            .filter(|p| p.artifact == first.artifact)
            .collect();
        let most = own
            .iter()
            .max_by(|a, b| a.retained_mean.total_cmp(&b.retained_mean));
        let fewest = own
            .iter()
            .min_by(|a, b| a.retained_mean.total_cmp(&b.retained_mean));
        if let (Some(m), Some(f)) = (most, fewest)
            && own.len() >= 2
        {
            ranks.push((s.pool_size, m.policy.as_str(), f.policy.as_str()));
        }
    }
    for (what, most) in [("the most", true), ("the fewest", false)] {
        let names: Vec<&str> = ranks.iter().map(|r| if most { r.1 } else { r.2 }).collect();
        match names.first() {
            Some(first) if names.iter().all(|n| n == first) => {
                out.push(format!(
                    "{first} retains {what} players at every pool size."
                ));
            }
            Some(_) => out.push(format!(
                "Retains {what}: {}.",
                ranks
                    .iter()
                    .zip(&names)
                    .map(|(r, n)| format!("{n} at P={}", r.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => {}
        }
    }
    out
}

/// Retained share of the pool per policy (the first artifact's), with its 95% interval, at
/// each pool size.
fn retention_by_size(r: &EvalReport) -> String {
    let title = "Retained share of the pool per policy (95% CI)";
    let Some(first) = r.sizes.first() else {
        return no_chart(title, "no pool size was evaluated");
    };
    let artifact = first.policies.first().map(|p| p.artifact.clone());
    let policies: Vec<_> = first
        .policies
        .iter()
        .filter(|p| Some(&p.artifact) == artifact.as_ref())
        .collect();
    let xs: Vec<f64> = r.sizes.iter().map(|s| s.pool_size as f64).collect();
    let (x0, x1) = bounds(&xs, 50.0);
    // Each policy's points a little apart, so that overlapping intervals stay readable.
    let step = (x1 - x0) * 0.006;
    let series: Vec<(String, Vec<mm_fit::html::IntervalPoint>)> = policies
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let dx = (k as f64 - (policies.len() as f64 - 1.0) / 2.0) * step;
            let pts = r
                .sizes
                .iter()
                .filter_map(|s| {
                    let x = s
                        .policies
                        .iter()
                        .find(|q| q.policy == p.policy && q.artifact == p.artifact)?;
                    let share = |v: f64| 100.0 * v / s.pool_size as f64;
                    Some((
                        s.pool_size as f64 + dx,
                        share(x.retained_mean),
                        share(x.retained_ci95.0),
                        share(x.retained_ci95.1),
                    ))
                })
                .collect();
            (p.policy.clone(), pts)
        })
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().flat_map(|p| [p.2, p.3]))
        .filter(|y| y.is_finite())
        .collect();
    let (lo, hi) = bounds(&ys, 0.2);
    let refs: Vec<mm_fit::html::IntervalSeries<'_>> = series
        .iter()
        .map(|(n, p)| (n.as_str(), p.clone()))
        .collect();
    interval_chart(
        title,
        "pool size",
        "retained (% of the pool)",
        (x0, x1),
        (lo, hi),
        &refs,
    )
}

/// The range of `ys` padded by a tenth of its width (at least `min_pad`).
fn bounds(ys: &[f64], min_pad: f64) -> (f64, f64) {
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let pad = (0.1 * (hi - lo)).max(min_pad);
    (lo - pad, hi + pad)
}

/// One chart series per policy: `value` of each skill decile that has players.
fn by_decile<'a>(
    policies: impl Iterator<Item = (&'a str, &'a [DecileStats])>,
    value: impl Fn(&DecileStats) -> f64,
) -> Vec<(String, Vec<(f64, f64)>)> {
    policies
        .map(|(name, deciles)| {
            (
                name.to_string(),
                deciles
                    .iter()
                    .filter(|d| d.players > 0)
                    .map(|d| (d.decile as f64, value(d)))
                    .collect(),
            )
        })
        .collect()
}

/// The two decile charts: retained share and balance (mean |P(win) − ½|) by skill decile,
/// one series per policy.
fn decile_charts<'a>(
    h: &mut String,
    what: &str,
    policies: impl Iterator<Item = (&'a str, &'a [DecileStats])> + Clone,
) {
    let series = by_decile(policies.clone(), |d| 100.0 * d.retained_share);
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .collect();
    let title = format!("Retained share by skill decile, {what}");
    h.push_str("<div class=\"charts\">");
    if ys.is_empty() {
        h.push_str(&no_chart(&title, "no decile has players"));
        h.push_str("</div>");
        return;
    }
    let (lo, hi) = bounds(&ys, 0.1);
    let refs: Vec<mm_fit::html::Series<'_>> = series
        .iter()
        .map(|(n, pts)| (n.as_str(), pts.clone(), true))
        .collect();
    h.push_str(&line_chart(
        &title,
        "skill decile",
        "retained (%)",
        (0.5, 10.5),
        (lo, hi),
        &refs,
    ));
    let bal = by_decile(policies, |d| d.mean_abs_pwin_minus_half);
    let bmax = bal
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0f64, f64::max);
    let brefs: Vec<mm_fit::html::Series<'_>> = bal
        .iter()
        .map(|(n, pts)| (n.as_str(), pts.clone(), true))
        .collect();
    h.push_str(&line_chart(
        &format!("Mean |P(win) − ½| by skill decile, {what}"),
        "skill decile",
        "|P(win) − ½|",
        (0.5, 10.5),
        (0.0, bmax * 1.1 + 1e-3),
        &brefs,
    ));
    h.push_str("</div>");
}

fn size_section(h: &mut String, _r: &EvalReport, s: &SizeResult) {
    let _ = write!(
        h,
        "<h2>P = {}</h2><p>Pools from {} ({} windows with enough players); {:.1} s.</p>\
         <table><tr><th>policy</th><th>matched</th><th>retained (sd)</th><th>expected retained</th>\
         <th>predicted blowouts</th><th>mean |P(win) − ½|</th><th>skill disparity</th>\
         <th>solve ms</th></tr>",
        s.pool_size,
        escape(&s.pool_source),
        s.windows_eligible,
        s.seconds
    );
    for x in &s.policies {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td></tr>",
            escape(&x.policy),
            decimals(x.matched_players, 1),
            decimals(x.retained_mean, 3),
            decimals(x.retained_sd, 3),
            decimals(x.expected_retained_mean, 3),
            decimals(x.blowout_rate, 4),
            decimals(x.mean_abs_pwin_minus_half, 4),
            decimals(x.mean_skill_disparity, 4),
            decimals(x.solve_ms_mean, 2)
        );
    }
    h.push_str(
        "</table><p>Welch t-tests of retained players per round (row minus column: difference, \
         p-value), and the paired t-tests of the same rounds (both policies ran on the same pool \
         with the same draws): of retained players, and of expected retained players.</p>",
    );
    let names: Vec<String> = s.policies.iter().map(|x| x.policy.clone()).collect();
    welch_matrix(h, &names, &s.tests, 3);
    decile_charts(
        h,
        &format!("P = {}", s.pool_size),
        s.policies
            .iter()
            .map(|x| (x.policy.as_str(), x.by_decile.as_slice())),
    );
    h.push_str("<details><summary>By skill decile</summary><table><tr><th>policy</th>");
    for d in 1..=10 {
        let _ = write!(h, "<th>decile {d}</th>");
    }
    h.push_str("</tr>");
    for x in &s.policies {
        let _ = write!(h, "<tr><td>{}</td>", escape(&x.policy));
        for d in &x.by_decile {
            let _ = write!(
                h,
                "<td>{}%<br><small>({}–{}, n = {})</small></td>",
                decimals(100.0 * d.retained_share, 2),
                decimals(100.0 * d.retained_ci95.0, 1),
                decimals(100.0 * d.retained_ci95.1, 1),
                d.players
            );
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></details>");
}

/// A matrix of Welch tests: row minus column, difference (`digits` decimals) and p-value.
fn welch_matrix(h: &mut String, names: &[String], tests: &[PairTest], digits: usize) {
    // Wide with many policies (eight with --compare): it scrolls inside its box, not the page.
    h.push_str("<div class=\"wide\"><table><tr><th></th>");
    for n in names {
        let _ = write!(h, "<th>{}</th>", escape(n));
    }
    h.push_str("</tr>");
    for a in names {
        let _ = write!(h, "<tr><td>{}</td>", escape(a));
        for b in names {
            match tests.iter().find(|t| &t.a == a && &t.b == b) {
                Some(t) => {
                    let _ = write!(
                        h,
                        "<td>{:+.digits$}<br><small>p = {}</small>",
                        t.welch.diff,
                        pval(t.welch.p)
                    );
                    if let (Some(p), Some(e)) = (t.paired, t.paired_expected) {
                        let _ = write!(
                            h,
                            "<br><small>paired p = {}; expected {:+.digits$}, p = {}</small>",
                            pval(p.p),
                            e.diff,
                            pval(e.p)
                        );
                    }
                    h.push_str("</td>");
                }
                None => h.push_str("<td>–</td>"),
            }
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></div>");
}

/// On a simulated lake: each policy's lobbies under the simulator's truth, and the paired tests
/// of true retention against the CoD rules over the players both placed.
fn team_truth_section(h: &mut String, t: &TeamQueueResult) {
    if t.policies.iter().all(|x| x.truth.is_none()) {
        return;
    }
    h.push_str(
        "<h3>Under the simulator's truth</h3><p>The same lobbies scored by the kill race's true \
         win, draw and blowout probabilities and each player's true churn after a win, a draw, \
         a close loss and a blowout loss (the simulator's players stop more often after a \
         blowout loss). Paired tests over the players both policies placed. Balance: \
         |P(A wins | decisive) - 1/2| by our team win model and by the truth; the favourite's \
         excess is how much more often than our model predicts its favourite wins under the \
         truth.</p><table><tr>\
         <th>policy</th><th>true churn per player (95% CI)</th><th>true blowouts per lobby</th>\
         <th>balance, ours / true</th><th>favourite's excess</th>\
         <th>true retention over the CoD rules (paired p)</th></tr>",
    );
    for x in &t.policies {
        let Some(tr) = &x.truth else { continue };
        let cod = t
            .policies
            .iter()
            .find(|y| y.policy == "cod" && y.artifact == x.artifact)
            .map(|y| y.label.as_str());
        let vs = t
            .tests
            .iter()
            .find(|p| p.a == x.label && Some(p.b.as_str()) == cod)
            .and_then(|p| p.paired_truth)
            .map_or_else(
                || "–".to_string(),
                |p| format!("{:+.5} (p {})", p.diff, decimals(p.p, 4)),
            );
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{} ({} – {})</td><td>{}</td><td>{} / {}</td><td>{:+.4}</td>\
             <td>{}</td></tr>",
            escape(&x.label),
            decimals(tr.expected_churn, 4),
            decimals(tr.expected_churn_ci95.0, 4),
            decimals(tr.expected_churn_ci95.1, 4),
            decimals(tr.blowout_rate, 4),
            decimals(x.mean_abs_pwin_minus_half, 3),
            decimals(tr.mean_abs_pwin_minus_half, 3),
            tr.favourite_excess,
            vs
        );
    }
    h.push_str("</table>");
    if let Some(o) = &t.oracle {
        let _ = write!(
            h,
            "<p>The team oracle (team EOMM choosing by the true churn and outcomes, under the same rules and \
             balance bound) gains {:+.5} true retention per player over the CoD rules (paired p \
             {}); team EOMM gains {:+.5} (p {}): <strong>{}%</strong> of the available gain.</p>\
             <p>Where the rest is lost: team EOMM with the true churn but our team win model \
             (<code>oracle-churn</code>) gains {:+.5} (p {}, {}% of the available gain); with our \
             churn model but the true outcome probabilities (<code>oracle-outcomes</code>) \
             {:+.5} (p {}, {}%). The half-oracle that reaches more names the model whose errors \
             cost more.</p>",
            o.available_gain,
            decimals(o.available_p, 4),
            o.realised_gain,
            decimals(o.realised_p, 4),
            decimals(100.0 * o.share, 0),
            o.true_churn_gain,
            decimals(o.true_churn_p, 4),
            decimals(100.0 * o.true_churn_gain / o.available_gain, 0),
            o.true_outcomes_gain,
            decimals(o.true_outcomes_p, 4),
            decimals(100.0 * o.true_outcomes_gain / o.available_gain, 0),
        );
    }
}

/// The team-queue replay: one row per policy, the Welch matrix, and the decile tables.
fn team_section(h: &mut String, t: &TeamQueueResult) {
    let _ = write!(
        h,
        "<h2>Team-queue policies replayed on the window ({n}v{n})</h2><p>The real searches \
         (parties kept together) arrive at their real start times; each policy ticks every {} s \
         until {} s after the last arrival. Waits are from arrival to the lobby; churn is the \
         artifact's prediction for each placed player before the outcome; retained share uses \
         draws shared by all policies. {} parties larger than a team were queued as solo \
         players. {:.1} s.</p><table><tr><th>policy</th><th>searches (superseded)</th>\
         <th>placed / unplaced</th><th>lobbies (max-wait rule)</th><th>wait s: mean (95% CI), \
         median, p90, max</th><th>predicted churn per player (95% CI)</th><th>retained share \
         (95% CI)</th><th>predicted blowouts</th><th>mean |P(win) − ½|</th><th>skill \
         disparity</th><th>party parity (identical)</th><th>quality</th><th>tick ms mean / max</th></tr>",
        t.tick_s,
        t.drain_s,
        t.split_parties,
        t.seconds,
        n = t.team_size
    );
    for x in &t.policies {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{} ({})</td><td>{} / {}</td><td>{} ({})</td>\
             <td>{} ({} – {}), {}, {}, {}</td><td>{} ({} – {})</td><td>{} ({} – {})</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{} / {}</td></tr>",
            escape(&x.label),
            x.searches,
            x.superseded,
            x.placed_searches,
            x.unplaced_searches,
            x.lobbies,
            x.rescued,
            decimals(x.wait_s_mean, 1),
            decimals(x.wait_s_ci95.0, 1),
            decimals(x.wait_s_ci95.1, 1),
            decimals(x.wait_s_p50, 0),
            decimals(x.wait_s_p90, 0),
            decimals(x.wait_s_max, 0),
            decimals(x.expected_churn, 4),
            decimals(x.expected_churn_ci95.0, 4),
            decimals(x.expected_churn_ci95.1, 4),
            decimals(x.retained_share, 4),
            decimals(x.retained_ci95.0, 4),
            decimals(x.retained_ci95.1, 4),
            decimals(x.blowout_rate, 4),
            decimals(x.mean_abs_pwin_minus_half, 4),
            decimals(x.mean_skill_disparity, 4),
            decimals(x.party_parity, 3),
            decimals(x.party_parity_exact, 3),
            decimals(x.mean_quality, 3),
            decimals(x.tick_ms_mean, 2),
            decimals(x.tick_ms_max, 1)
        );
    }
    h.push_str(
        "</table><p>Welch t-tests of predicted retention per placed player (row minus column: \
         difference, p-value).</p>",
    );
    let names: Vec<String> = t.policies.iter().map(|x| x.label.clone()).collect();
    welch_matrix(h, &names, &t.tests, 5);
    team_truth_section(h, t);
    if let Some(l) = &t.leavers {
        leaver_section(h, l);
    }
    h.push_str("<div class=\"charts\">");
    h.push_str(&wait_chart(t));
    h.push_str("</div>");
    decile_charts(
        h,
        &format!("{n}v{n} queue", n = t.team_size),
        t.policies
            .iter()
            .map(|x| (x.label.as_str(), x.by_decile.as_slice())),
    );
    h.push_str("<details><summary>By skill decile (predicted retention, mean |P(win) − ½|)</summary><table><tr><th>policy</th>");
    for d in 1..=10 {
        let _ = write!(h, "<th>decile {d}</th>");
    }
    h.push_str("</tr>");
    for x in &t.policies {
        let _ = write!(h, "<tr><td>{}</td>", escape(&x.label));
        for d in &x.by_decile {
            let _ = write!(
                h,
                "<td>{}%<br><small>{} (n = {})</small></td>",
                decimals(100.0 * d.retained_share, 2),
                decimals(d.mean_abs_pwin_minus_half, 3),
                d.players
            );
        }
        h.push_str("</tr>");
    }
    h.push_str("</table></details>");
}

/// The replay with leavers: each policy with and without backfill, and two charts.
fn leaver_section(h: &mut String, l: &LeaverResult) {
    let _ = write!(
        h,
        "<h3>Leavers and backfill</h3><p>Each lobby plays the simulator's kill race on its \
         players' true skills; a player quits at {} per minute in a level match, times e for \
         every {} kills their team is behind, and a quit opens a slot. With backfill the slot \
         is offered at once and filled from the queue by the policy's backfill rule (the CoD \
         rules; the threshold policy's quality floor over the lobby's nearest searches; team \
         EOMM's least churn within its balance bound, or no more uneven than the lobby is, under \
         the CoD rules); without, it stays empty. A player still in a match searches again \
         when it ends. {:.1} s.</p><table><tr><th>policy</th><th>backfill</th><th>matches</th>\
         <th>quits (share)</th><th>slots filled</th><th>fill s: median, p95</th><th>new-lobby \
         wait s: median, p95</th><th>searches superseded</th><th>finished short-handed (95% \
         CI)</th><th>size differential after backfill (worsened)</th><th>skill differential \
         after backfill</th><th>true blowouts</th><th>true churn per player (95% CI)</th>\
         <th>retention over no backfill (Welch p)</th></tr>",
        decimals(l.quit_base_per_min, 4),
        decimals(l.quit_deficit_kills, 0),
        l.seconds
    );
    for r in &l.runs {
        let vs = r.retention_vs_no_backfill.map_or_else(
            || "–".to_string(),
            |w| format!("{:+.5} (p {})", w.diff, decimals(w.p, 3)),
        );
        let after = if r.backfills > 0 {
            (
                format!(
                    "{} ({})",
                    decimals(r.size_diff_after_backfill, 3),
                    r.worsened
                ),
                decimals(r.skill_diff_after_backfill, 3),
            )
        } else {
            ("–".to_string(), "–".to_string())
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{} ({}%)</td><td>{}</td><td>{}, {}</td>\
             <td>{}, {}</td><td>{}</td><td>{}% ({} – {})</td><td>{}</td><td>{}</td><td>{}%</td>\
             <td>{} ({} – {})</td><td>{}</td></tr>",
            escape(&r.policy),
            if r.backfill { "yes" } else { "no" },
            r.lobbies,
            r.quits,
            decimals(100.0 * r.quit_share, 1),
            r.slots_filled,
            decimals(r.fill_s_p50, 0),
            decimals(r.fill_s_p95, 0),
            decimals(r.wait_s_p50, 0),
            decimals(r.wait_s_p95, 0),
            r.superseded,
            decimals(100.0 * r.short_handed, 1),
            decimals(100.0 * r.short_handed_ci95.0, 1),
            decimals(100.0 * r.short_handed_ci95.1, 1),
            after.0,
            after.1,
            decimals(100.0 * r.true_blowouts, 1),
            decimals(r.true_churn, 4),
            decimals(r.true_churn_ci95.0, 4),
            decimals(r.true_churn_ci95.1, 4),
            vs
        );
    }
    h.push_str("</table><div class=\"charts\">");
    h.push_str(&fill_chart(l));
    h.push_str(&short_chart(l));
    h.push_str("</div>");
}

/// Time to fill a slot per policy (with backfill): the share of filled slots within x seconds.
fn fill_chart(l: &LeaverResult) -> String {
    let series: Vec<(String, &[f64])> = l
        .runs
        .iter()
        .filter(|r| r.backfill && r.slots_filled > 0)
        .map(|r| (r.policy.clone(), r.fill_s_quantiles.as_slice()))
        .collect();
    let title = "Time to fill an open slot: share of filled slots within x seconds";
    if series.is_empty() {
        return no_chart(title, "no slot was filled");
    }
    quantile_chart(title, "time to fill (s)", "filled slots (%)", &series)
}

/// A distribution per series from its 5% quantiles (0, 5, ..., 100%): the share within x.
fn quantile_chart(title: &str, x_desc: &str, y_desc: &str, series: &[(String, &[f64])]) -> String {
    let pts: Vec<(&str, Vec<(f64, f64)>)> = series
        .iter()
        .map(|(name, q)| {
            let pts = q
                .iter()
                .enumerate()
                .filter(|(_, x)| x.is_finite())
                .map(|(k, &x)| (x, 5.0 * k as f64))
                .collect();
            (name.as_str(), pts)
        })
        .collect();
    let xmax = pts
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let refs: Vec<mm_fit::html::Series<'_>> =
        pts.iter().map(|(n, p)| (*n, p.clone(), false)).collect();
    line_chart(
        title,
        x_desc,
        y_desc,
        (0.0, xmax * 1.05 + 1.0),
        (0.0, 102.0),
        &refs,
    )
}

/// Matches finished short-handed per policy (x: the policy's place in the table), with and
/// without backfill, with 95% intervals.
fn short_chart(l: &LeaverResult) -> String {
    let names: Vec<&str> = l
        .runs
        .iter()
        .filter(|r| r.backfill)
        .map(|r| r.policy.as_str())
        .collect();
    let series: Vec<mm_fit::html::IntervalSeries<'_>> =
        [(true, "with backfill"), (false, "without")]
            .into_iter()
            .map(|(b, label)| {
                let pts = l
                    .runs
                    .iter()
                    .filter(|r| r.backfill == b)
                    .enumerate()
                    .map(|(i, r)| {
                        (
                            (i + 1) as f64,
                            100.0 * r.short_handed,
                            100.0 * r.short_handed_ci95.0,
                            100.0 * r.short_handed_ci95.1,
                        )
                    })
                    .collect();
                (label, pts)
            })
            .collect();
    let ymax = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.3))
        .fold(0.0f64, f64::max);
    let x_desc = names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{} {n}", i + 1))
        .collect::<Vec<_>>()
        .join(", ");
    interval_chart(
        "Matches finished short-handed, with and without backfill (95% CI)",
        &format!("policy ({x_desc})"),
        "matches (%)",
        (0.5, names.len() as f64 + 0.5),
        (0.0, ymax * 1.1 + 1.0),
        &series,
    )
}

/// The distribution of waits per team policy: the share of placed searches that waited at most
/// x seconds (from the 5% quantiles).
fn wait_chart(t: &TeamQueueResult) -> String {
    let series: Vec<(String, &[f64])> = t
        .policies
        .iter()
        .map(|p| (p.label.clone(), p.wait_s_quantiles.as_slice()))
        .collect();
    quantile_chart(
        "Waits per policy: share of placed searches within x seconds",
        "wait (s)",
        "placed searches (%)",
        &series,
    )
}

fn share_cell(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{}%", decimals(100.0 * x, 0)))
}

/// The oracle figures of one pool size in words.
#[must_use]
pub fn oracle_sentence(t: &OracleGain) -> String {
    let mut s = format!(
        "under the simulator's truth: the oracle gains {:+.3}% over SkillMM (paired p = {}), our \
         EOMM {:+.3}% (paired p = {}): {:.0}% of the available gain",
        100.0 * t.oracle_gain,
        pval(t.oracle_p),
        100.0 * t.realised_gain,
        pval(t.realised_p),
        100.0 * t.share
    );
    if let (Some(w), Some(c)) = (t.true_win_share, t.true_churn_share) {
        let _ = write!(
            s,
            " ({:.0}% with the true win probabilities and our churn model, {:.0}% with our win \
             model and the true churn)",
            100.0 * w,
            100.0 * c
        );
    }
    s
}

/// The paired scores in the order the report shows them.
fn diff_rows(d: &HoldoutDiff) -> [(&'static str, &DiffCi); 5] {
    [
        ("churn log-loss", &d.churn_log_loss),
        ("churn Brier", &d.churn_brier),
        ("churn ECE", &d.churn_ece),
        ("churn AUC", &d.churn_auc),
        ("win log-loss", &d.win_log_loss),
    ]
}

/// The text summary `mm evaluate` prints.
#[must_use]
pub fn summary(r: &EvalReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "evaluation window {}: {} searches by {} players, {} real matches ({} rounds per size, {:.1} s)",
        r.window, r.searches, r.players, r.real_matches, r.rounds, r.seconds
    );
    for x in &r.holdout {
        let _ = writeln!(
            s,
            "{} {}: churn log-loss {:.4} AUC {:.4} ECE {:.4} on {} searches; win log-loss {:.4} on {} matches",
            x.artifact,
            x.version,
            x.churn_log_loss,
            x.churn_auc,
            x.churn_ece,
            x.churn_rows,
            x.win_log_loss,
            x.win_matches
        );
    }
    if let Some(d) = &r.holdout_diff {
        let _ = write!(
            s,
            "candidate - baseline (95% paired bootstrap, {} players):",
            d.players
        );
        for (name, x) in diff_rows(d) {
            let _ = write!(
                s,
                " {name} {:+.4} ({:+.4} to {:+.4});",
                x.diff, x.ci95.0, x.ci95.1
            );
        }
        s.pop();
        s.push('\n');
    }
    for x in &r.historical {
        let _ = writeln!(
            s,
            "real lobbies ({}): expected churn {:.4}, observed {:.4}; blowouts {:.4}, |P(win)-1/2| {:.4}",
            x.artifact,
            x.expected_churn,
            x.observed_churn,
            x.blowout_rate,
            x.mean_abs_pwin_minus_half
        );
    }
    if let Some(first) = r.sizes.first() {
        let _ = write!(s, "{:<24}", "retained per round");
        for z in &r.sizes {
            let _ = write!(s, "{:>12}", format!("P={}", z.pool_size));
        }
        s.push('\n');
        for (k, p) in first.policies.iter().enumerate() {
            let _ = write!(s, "{:<24}", p.policy);
            for z in &r.sizes {
                let _ = write!(s, "{:>12.2}", z.policies[k].retained_mean);
            }
            s.push('\n');
        }
    }
    for e in &r.eomm_vs_skill {
        let _ = writeln!(
            s,
            "P={} {}EOMM over SkillMM: {:+.2}% (Welch p = {}, paired p = {}, paired p of \
             expected retained = {}); paper {}",
            e.pool_size,
            if e.artifact.is_empty() {
                String::new()
            } else {
                format!("{} ", e.artifact)
            },
            100.0 * e.relative_improvement,
            pval(e.p_value),
            pval(e.paired_p_value),
            pval(e.paired_expected_p_value),
            e.paper_relative_improvement
                .map_or("–".into(), |x| format!("{:+.2}%", 100.0 * x))
        );
    }
    for e in &r.eomm_vs_skill {
        if let Some(t) = &e.truth {
            let _ = writeln!(s, "P={} {}", e.pool_size, oracle_sentence(t));
        }
    }
    for line in table2_verdict(r) {
        let _ = writeln!(s, "{line}");
    }
    if let Some(t) = &r.team_queue {
        team_summary(&mut s, t);
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The summary's team-queue lines: one per policy, then the team oracle's.
fn team_summary(s: &mut String, t: &TeamQueueResult) {
    let _ = writeln!(
        s,
        "team queue replay ({n}v{n}, tick {} s): policy, placed/unplaced searches, mean wait s, \
         p90 wait s, predicted blowouts, |P(win)-1/2|, skill disparity, party parity, \
         predicted churn per player; under the truth: churn, blowouts, |P(win)-1/2|, the \
         favourite's excess",
        t.tick_s,
        n = t.team_size
    );
    for x in &t.policies {
        let truth = x.truth.as_ref().map_or_else(String::new, |tr| {
            format!(
                " {:>8.4} {:>6.3} {:>6.3} {:>+7.4}",
                tr.expected_churn,
                tr.blowout_rate,
                tr.mean_abs_pwin_minus_half,
                tr.favourite_excess
            )
        });
        let _ = writeln!(
            s,
            "  {:<22} {:>7}/{:<6} {:>8.1} {:>8.0} {:>7.4} {:>8.4} {:>7.4} {:>7.3} {:>10.4}{truth}",
            x.label,
            x.placed_searches,
            x.unplaced_searches,
            x.wait_s_mean,
            x.wait_s_p90,
            x.blowout_rate,
            x.mean_abs_pwin_minus_half,
            x.mean_skill_disparity,
            x.party_parity,
            x.expected_churn,
        );
    }
    if let Some(o) = &t.oracle {
        let _ = writeln!(
            s,
            "team oracle: true retention per player over the CoD rules {:+.5} (paired p {:.3}); \
             team EOMM {:+.5} (p {:.3}): {:.0}% of the available gain; half-oracles: true \
             churn with our win model {:+.5} (p {:.3}), our churn with the true outcomes \
             {:+.5} (p {:.3})",
            o.available_gain,
            o.available_p,
            o.realised_gain,
            o.realised_p,
            100.0 * o.share,
            o.true_churn_gain,
            o.true_churn_p,
            o.true_outcomes_gain,
            o.true_outcomes_p,
        );
    }
}
