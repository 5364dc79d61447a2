//! The end-of-run summary: one screen with the figures a user reads first, per mode, taken
//! from the files each stage wrote (`skill_metrics.json`, `churn_metrics.json`,
//! `evaluation.json`), so a resumed run summarises the stages it skipped too.

use std::path::Path;

use serde_json::Value;

use crate::RunState;

/// The summary's lines (without the stage timings, which the caller prints).
#[must_use]
pub fn summary(work: &Path, st: &RunState) -> Vec<String> {
    let mut out = Vec::new();
    for m in &st.modes {
        let dir = m.dir(work);
        out.push(format!(
            "{} (model {}): {}",
            m.mode,
            m.name,
            m.decision.as_deref().unwrap_or("no decision")
        ));
        let read = |rel: &str| -> Value {
            std::fs::read(dir.join(rel))
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null)
        };
        if let Some(c) = &m.continued {
            out.push(continued_line(c));
        } else if m.decision.as_deref().is_some_and(|d| d.starts_with("kept"))
            && m.full_reason.is_none()
            && m.version.is_none()
        {
            // Nothing new: no stage ran.
            continue;
        } else {
            if let Some(why) = &m.full_reason {
                out.push(format!("  full fit  {why}"));
            }
            let (skill, churn) = (
                read("skill/skill_metrics.json"),
                read("churn/churn_metrics.json"),
            );
            out.extend(skill_lines(&skill));
            out.extend(churn_lines(&churn));
            // The exported team model's: the win skill's when it was exported.
            let exported = if skill["win_skill"]["exported"].as_bool() == Some(true) {
                &skill["win_skill"]["model"]
            } else {
                &skill["team_model_final"]
            };
            out.extend(blowout_line(exported, &churn));
        }
        out.extend(eval_lines(&read("evaluation/evaluation.json")));
        out.push(if m.continued.is_some() {
            format!("  reports   {}/evaluation/evaluation.html", dir.display())
        } else {
            format!(
                "  reports   {}/{{skill/skill_report,churn/churn_report,evaluation/evaluation}}.html",
                dir.display()
            )
        });
    }
    out
}

/// A continued run's line: from which model and lake version to which, and what it read.
fn continued_line(c: &crate::daily::Continued) -> String {
    format!(
        "  continued {} (lake version {} -> {}): {} new matches ({} rows), {} late ({} rows); \
         {} players, {} new; raw skill, states and percentiles updated; team win model {}; \
         churn model {}",
        c.base,
        c.from_lake_version,
        c.to_lake_version,
        c.new_matches,
        c.new_rows,
        c.late_matches,
        c.late_rows,
        c.players,
        c.new_players,
        if c.team_model.is_empty() {
            "kept"
        } else {
            c.team_model.as_str()
        },
        if c.churn_model.is_empty() {
            "kept"
        } else {
            c.churn_model.as_str()
        }
    )
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn skill_lines(s: &Value) -> Vec<String> {
    let Some(models) = s["models"].as_array().filter(|m| !m.is_empty()) else {
        return vec!["  skill     no scored model".into()];
    };
    let ours = &models[0];
    let ll = |m: &Value| f(&m["scored"]["log_loss"]);
    let best = models[1..]
        .iter()
        .filter(|m| ll(m).is_finite())
        .min_by(|a, b| ll(a).total_cmp(&ll(b)));
    let mut line = format!(
        "  skill     raw skill log-loss {:.4} on {} scored matches",
        ll(ours),
        ours["scored"]["n"].as_u64().unwrap_or(0)
    );
    if let Some(b) = best {
        line += &format!(
            " vs best baseline {} {:.4} ({:+.4})",
            b["model"].as_str().unwrap_or("?"),
            ll(b),
            ll(ours) - ll(b)
        );
    }
    let mut lines = vec![line];
    let t = &s["truth"];
    let team = &s["team_model_final"];
    if t.is_object() {
        lines.push(format!(
            "  vs truth  Spearman {:.3} over {} players; team-model slope {:.3} per latent unit (oracle {:.3})",
            f(&t["spearman"]),
            t["players"].as_u64().unwrap_or(0),
            f(&t["team_coef_latent"]),
            f(&t["oracle_team_coef"])
        ));
        // Parties exist in the mode when the oracle finds a party effect at all.
        let parties =
            f(&t["oracle_party_per_member"]) != 0.0 || f(&t["oracle_party_per_sd"]) != 0.0;
        if t["party_per_sd"].is_number() && parties {
            lines.push(format!(
                "            party adjustment {:.3} + {:.3} sd (oracle {:.3} + {:.3} sd; simulator {} + {} sd)",
                f(&t["party_per_member_latent"]),
                f(&t["party_per_sd"]),
                f(&t["oracle_party_per_member"]),
                f(&t["oracle_party_per_sd"]),
                t["sim_party_base"],
                t["sim_party_spread"]
            ));
        }
    } else if team.is_object() {
        lines.push(format!(
            "            team model: {:.3} × skill-sum difference (no truth in this lake)",
            f(&team["skill_coef"])
        ));
    }
    // Which skill the exported team model reads: the figures above are raw skill's.
    let w = &s["win_skill"];
    if w.is_object() {
        lines.push(if w["exported"].as_bool() == Some(true) {
            // Fits from before the performance strength have no estimator: the outcomes'.
            let (name, loss) = match w["estimator"].as_str() {
                Some("performance") => ("performance", &w["perf_log_loss"]),
                _ => ("outcomes", &w["win_log_loss"]),
            };
            format!(
                "  win skill ({name}) exported, the team model reads it: log-loss {:.4} against raw skill's {:.4} on the last ten days",
                f(loss),
                f(&w["raw_log_loss"])
            )
        } else {
            format!(
                "  win skill not exported: {}",
                w["reason"].as_str().unwrap_or("no reason recorded")
            )
        });
    }
    lines
}

fn churn_lines(c: &Value) -> Vec<String> {
    if !c.is_object() {
        return vec!["  churn     not fitted".into()];
    }
    let mut line = format!(
        "  churn     AUC {:.3}, calibration error {:.4} on {} scored rows (C = {})",
        f(&c["auc"]),
        f(&c["scored"]["ece"]),
        c["scored"]["n"].as_u64().unwrap_or(0),
        c["c"]
    );
    let t = &c["truth"];
    if t.is_object() {
        line += &format!(
            "; vs truth: calibration error {:.4}, truth's own AUC {:.3}",
            f(&t["ece_vs_truth"]),
            f(&t["truth_auc"])
        );
    }
    vec![line]
}

/// The blowout terms team EOMM reads: how often a losing team is blown out (the team model's,
/// at even odds and as an underdog at log-odds -1) and what a blowout loss adds to the churn
/// log-odds of a close one. Nothing when neither was fitted.
fn blowout_line(team: &Value, churn: &Value) -> Option<String> {
    let b = &team["blowout"];
    let c = &churn["blowout"];
    let given = |z: f64| mm_artifact::team::sigmoid(f(&b["intercept"]) + f(&b["coef"]) * z);
    let team_part = b.is_object().then(|| {
        format!(
            "a losing team is blown out {:.1}% of the time at even odds, {:.1}% as an underdog at log-odds -1",
            100.0 * given(0.0),
            100.0 * given(-1.0)
        )
    });
    let churn_part = c.is_object().then(|| {
        format!(
            "a blowout loss adds {:+.2} to the churn log-odds of a close one",
            f(&c["blowout"])
        )
    });
    match (team_part, churn_part) {
        (None, None) => None,
        (t, c) => Some(format!(
            "  blowouts  {}",
            [t, c].into_iter().flatten().collect::<Vec<_>>().join("; ")
        )),
    }
}

fn eval_lines(e: &Value) -> Vec<String> {
    if !e.is_object() {
        return vec!["  evaluate  no evaluation".into()];
    }
    let mut lines = Vec::new();
    if let Some(h) = e["holdout"].as_array().and_then(|h| h.first()) {
        lines.push(format!(
            "  holdout   churn log-loss {:.4}, win/draw/loss log-loss {:.4}, accuracy {:.3} on {}",
            f(&h["churn_log_loss"]),
            f(&h["win_log_loss"]),
            f(&h["win_accuracy"]),
            e["window"].as_str().unwrap_or("the held-out days")
        ));
    }
    // The candidate's rows: the first artifact's (the compared `LATEST` follows).
    let first = |rows: &Value| -> Vec<Value> {
        let rows = rows.as_array().cloned().unwrap_or_default();
        let label = rows.first().map(|r| r["artifact"].clone());
        rows.into_iter()
            .filter(|r| Some(&r["artifact"]) == label.as_ref())
            .collect()
    };
    let vs: Vec<String> = first(&e["eomm_vs_skill"])
        .iter()
        .map(|r| {
            format!(
                "P={} {:+.3}% (paired p {:.3}, Welch p {:.3})",
                r["pool_size"],
                100.0 * f(&r["relative_improvement"]),
                f(&r["paired_p_value"]),
                f(&r["p_value"])
            )
        })
        .collect();
    if !vs.is_empty() {
        lines.push(format!(
            "  EOMM      retained per round over SkillMM: {}",
            vs.join("; ")
        ));
    }
    // On a simulated lake: the gain the world holds, and the share our EOMM realises.
    let oracle: Vec<String> = first(&e["eomm_vs_skill"])
        .iter()
        .filter(|r| r["truth"].is_object())
        .map(|r| {
            let t = &r["truth"];
            format!(
                "P={} oracle {:+.3}%, ours {:+.3}% ({:.0}%)",
                r["pool_size"],
                100.0 * f(&t["oracle_gain"]),
                100.0 * f(&t["realised_gain"]),
                100.0 * f(&t["share"])
            )
        })
        .collect();
    if !oracle.is_empty() {
        lines.push(format!(
            "  vs truth  expected retained over SkillMM under the truth: {}",
            oracle.join("; ")
        ));
    }
    lines.extend(queue_lines(&e["team_queue"], &first));
    lines
}

/// A policy whose blowout rate is more than this multiple of the CoD rules' is flagged.
pub const BLOWOUT_FLAG_RATIO: f64 = 1.5;

/// The team replay: each policy's waits, blowouts, balance, skill disparity and churn on one
/// line, and a flag in words for a policy that makes blowouts at more than
/// [`BLOWOUT_FLAG_RATIO`] times the CoD rules' rate.
fn queue_lines(tq: &Value, first: &dyn Fn(&Value) -> Vec<Value>) -> Vec<String> {
    let rows = first(&tq["policies"]);
    if rows.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "  queue     {}v{} over the window's real searches (expected churn under our model):",
        tq["team_size"], tq["team_size"]
    )];
    for p in &rows {
        lines.push(format!(
            "            {:<15} wait {:.1} s (p90 {:.0} s), blowouts {:.1}%, |P(win)-1/2| {:.3}, \
             disparity {:.3}, churn {:.4}, retained {:.4}",
            p["policy"].as_str().unwrap_or("?"),
            f(&p["wait_s_mean"]),
            f(&p["wait_s_p90"]),
            100.0 * f(&p["blowout_rate"]),
            f(&p["mean_abs_pwin_minus_half"]),
            f(&p["mean_skill_disparity"]),
            f(&p["expected_churn"]),
            f(&p["retained_share"])
        ));
        let t = &p["truth"];
        if t.is_object() {
            // Evaluations from before the truth's balance was recorded have none.
            let balance = if t["favourite_excess"].is_number() {
                // Rounded first, so that a small negative prints as +0.000, not -0.000.
                let excess = (f(&t["favourite_excess"]) * 1e3).round() / 1e3 + 0.0;
                format!(
                    ", |P(win)-1/2| {:.3}, favourite {excess:+.3}",
                    f(&t["mean_abs_pwin_minus_half"])
                )
            } else {
                String::new()
            };
            lines.push(format!(
                "            {:<15} under the truth: churn {:.4}, blowouts {:.1}%{balance}",
                "",
                f(&t["expected_churn"]),
                100.0 * f(&t["blowout_rate"])
            ));
        }
    }
    let o = &tq["oracle"];
    if o.is_object() {
        lines.push(format!(
            "  vs truth  true retention per player over the CoD rules: team oracle {:+.5} (paired \
             p {:.3}), team EOMM {:+.5} (p {:.3}): {:.0}% of the available gain",
            f(&o["available_gain"]),
            f(&o["available_p"]),
            f(&o["realised_gain"]),
            f(&o["realised_p"]),
            100.0 * f(&o["share"])
        ));
    }
    // The half-oracles (evaluations from before them have none).
    if o["true_churn_gain"].is_number() {
        let avail = f(&o["available_gain"]);
        let part = |k: &str| f(&o[k]);
        lines.push(format!(
            "            half-oracles: true churn with our win model {:+.5} (p {:.3}, {:.0}%), our \
             churn with the true outcomes {:+.5} (p {:.3}, {:.0}%)",
            part("true_churn_gain"),
            part("true_churn_p"),
            100.0 * part("true_churn_gain") / avail,
            part("true_outcomes_gain"),
            part("true_outcomes_p"),
            100.0 * part("true_outcomes_gain") / avail,
        ));
    }
    lines.extend(leaver_lines(&tq["leavers"]));
    let Some(cod) = rows.iter().find(|p| p["policy"] == "cod") else {
        return lines;
    };
    let base = f(&cod["blowout_rate"]);
    for p in &rows {
        let rate = f(&p["blowout_rate"]);
        // A rate both 1.5 times the CoD rules' and a point above it (a few lobbies of a
        // handful are not a factory).
        // The oracles are yardsticks, not policies a queue could run.
        let policy = p["policy"].as_str().unwrap_or("?");
        if policy != "cod"
            && !policy.starts_with("oracle")
            && rate > BLOWOUT_FLAG_RATIO * base
            && rate - base > 0.01
        {
            lines.push(format!(
                "  FLAG      {} makes blowouts in {:.1}% of its lobbies, more than {} times the \
                 CoD rules' {:.1}%: players leave after blowouts, so its churn figure flatters it",
                policy,
                100.0 * rate,
                BLOWOUT_FLAG_RATIO,
                100.0 * base
            ));
        }
    }
    lines
}

/// The replay with leavers: per policy, matches finished short-handed with and without
/// backfill, and the median time to fill a slot against the new lobbies' median wait.
fn leaver_lines(l: &Value) -> Vec<String> {
    let Some(runs) = l["runs"].as_array() else {
        return Vec::new();
    };
    let mut lines = vec![
        "  backfill  with leavers (the true race): finished short-handed with backfill vs \
         without; slot fill vs new-lobby wait"
            .to_string(),
    ];
    for w in runs.iter().filter(|r| r["backfill"] == true) {
        let Some(wo) = runs
            .iter()
            .find(|r| r["backfill"] == false && r["policy"] == w["policy"])
        else {
            continue;
        };
        lines.push(format!(
            "            {:<10} short-handed {:.1}% vs {:.1}%, fill {:.0} s (p95 {:.0} s) vs wait \
             {:.0} s, quits {:.1}%, {} searches superseded",
            w["policy"].as_str().unwrap_or("?"),
            100.0 * f(&w["short_handed"]),
            100.0 * f(&wo["short_handed"]),
            f(&w["fill_s_p50"]),
            f(&w["fill_s_p95"]),
            f(&w["wait_s_p50"]),
            100.0 * f(&w["quit_share"]),
            w["superseded"]
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The blowout line says what each fitted piece gives, worked out by hand: sigmoid(-2.78)
    /// = 5.8 %, sigmoid(-2.78 + 0.89) = 13.1 %; and nothing without either piece.
    #[test]
    fn the_blowout_line_reads_both_fits() {
        let team = serde_json::json!({"blowout": {"intercept": -2.78, "coef": -0.89}});
        let churn = serde_json::json!({"blowout": {"close": -0.06, "blowout": 0.49}});
        assert_eq!(
            blowout_line(&team, &churn).unwrap(),
            "  blowouts  a losing team is blown out 5.8% of the time at even odds, 13.1% as an \
             underdog at log-odds -1; a blowout loss adds +0.49 to the churn log-odds of a close one"
        );
        let none = serde_json::json!({});
        assert_eq!(
            blowout_line(&none, &churn).unwrap(),
            "  blowouts  a blowout loss adds +0.49 to the churn log-odds of a close one"
        );
        assert_eq!(blowout_line(&none, &none), None);
        assert_eq!(blowout_line(&Value::Null, &Value::Null), None);
    }

    fn metrics(win_skill: Value) -> Value {
        serde_json::json!({
            "models": [{"model": "raw skill", "scored": {"log_loss": 0.61, "n": 100}}],
            "win_skill": win_skill,
        })
    }

    #[test]
    fn the_skill_lines_say_which_skill_the_team_model_reads() {
        let exported = skill_lines(&metrics(serde_json::json!({
            "exported": true, "win_log_loss": 0.6350, "raw_log_loss": 0.6465, "reason": ""
        })));
        assert_eq!(
            exported.last().unwrap(),
            "  win skill (outcomes) exported, the team model reads it: log-loss 0.6350 against raw skill's 0.6465 on the last ten days"
        );
        let performance = skill_lines(&metrics(serde_json::json!({
            "exported": true, "estimator": "performance", "win_log_loss": 0.6172,
            "perf_log_loss": 0.5693, "raw_log_loss": 0.5734, "reason": ""
        })));
        assert_eq!(
            performance.last().unwrap(),
            "  win skill (performance) exported, the team model reads it: log-loss 0.5693 against raw skill's 0.5734 on the last ten days"
        );
        let kept = skill_lines(&metrics(serde_json::json!({
            "exported": false, "win_log_loss": 0.6493, "raw_log_loss": 0.5644,
            "reason": "raw skill predicts the last 10 days at least as well"
        })));
        assert_eq!(
            kept.last().unwrap(),
            "  win skill not exported: raw skill predicts the last 10 days at least as well"
        );
        // A fit from before the win skill (or with --no-win-skill) has no such line.
        let none = skill_lines(&metrics(Value::Null));
        assert!(none.iter().all(|l| !l.contains("win skill")), "{none:?}");
    }

    fn team_queue(eomm_blowouts: f64) -> Value {
        let row = |policy: &str, blowouts: f64| {
            serde_json::json!({
                "policy": policy, "artifact": "candidate", "label": policy,
                "wait_s_mean": 50.0, "wait_s_p90": 90.0, "blowout_rate": blowouts,
                "mean_abs_pwin_minus_half": 0.02, "mean_skill_disparity": 0.03,
                "expected_churn": 0.21, "retained_share": 0.79
            })
        };
        serde_json::json!({"evaluation": {}, "team_queue": {"team_size": 6, "policies": [
            row("cod", 0.014), row("threshold", 0.014), row("eomm", eomm_blowouts)
        ]}})
    }

    /// A blowout factory is flagged in words; a policy below 1.5 times the CoD rules' rate is
    /// not; every policy's line shows blowouts beside churn.
    #[test]
    fn a_policy_making_blowouts_is_flagged_in_the_summary() {
        let bad = eval_lines(&team_queue(0.487));
        let flags: Vec<&String> = bad.iter().filter(|l| l.contains("FLAG")).collect();
        assert_eq!(flags.len(), 1, "{bad:?}");
        assert_eq!(
            flags[0].as_str(),
            "  FLAG      eomm makes blowouts in 48.7% of its lobbies, more than 1.5 times the \
             CoD rules' 1.4%: players leave after blowouts, so its churn figure flatters it"
        );
        let eomm = bad
            .iter()
            .find(|l| l.trim_start().starts_with("eomm"))
            .unwrap();
        assert!(
            eomm.contains("blowouts 48.7%") && eomm.contains("churn 0.2100"),
            "{eomm}"
        );
        // Below 1.5 times is not flagged, nor are the CoD rules against themselves.
        let fine = eval_lines(&team_queue(0.020));
        assert!(fine.iter().all(|l| !l.contains("FLAG")), "{fine:?}");
        // Over 1.5 times a tiny rate but not a point above it: 2 lobbies in 700 against none.
        let mut few = team_queue(0.003);
        for k in [0, 1] {
            few["team_queue"]["policies"][k]["blowout_rate"] = serde_json::json!(0.0);
        }
        let few = eval_lines(&few);
        assert!(few.iter().all(|l| !l.contains("FLAG")), "{few:?}");
        // An oracle is a yardstick, not a policy a queue could run: never flagged.
        let mut oracle = team_queue(0.020);
        let mut row = oracle["team_queue"]["policies"][2].clone();
        row["policy"] = serde_json::json!("oracle-churn");
        row["blowout_rate"] = serde_json::json!(0.487);
        oracle["team_queue"]["policies"]
            .as_array_mut()
            .unwrap()
            .push(row);
        let oracle = eval_lines(&oracle);
        assert!(oracle.iter().all(|l| !l.contains("FLAG")), "{oracle:?}");
    }

    /// The vs-truth line gives the team oracle's gain and EOMM's share; the next line the two
    /// half-oracles' gains as shares of the available gain.
    #[test]
    fn the_half_oracles_are_shares_of_the_available_gain() {
        let mut e = team_queue(0.020);
        e["team_queue"]["oracle"] = serde_json::json!({
            "available_gain": 0.0016, "available_p": 0.00001, "realised_gain": 0.0004,
            "realised_p": 0.2, "share": 0.25, "true_churn_gain": 0.0008, "true_churn_p": 0.04,
            "true_outcomes_gain": 0.0012, "true_outcomes_p": 0.0001
        });
        let lines = eval_lines(&e);
        let at = lines.iter().position(|l| l.contains("vs truth")).unwrap();
        assert!(lines[at].ends_with("team EOMM +0.00040 (p 0.200): 25% of the available gain"));
        assert_eq!(
            lines[at + 1],
            "            half-oracles: true churn with our win model +0.00080 (p 0.040, 50%), our \
             churn with the true outcomes +0.00120 (p 0.000, 75%)"
        );
    }

    /// Under the truth: churn and blowouts, and, from evaluations that record them, the true
    /// balance and the favourite's excess (a small negative prints as +0.000).
    #[test]
    fn the_truth_line_gives_the_true_balance_when_recorded() {
        let mut e = team_queue(0.020);
        e["team_queue"]["policies"][0]["truth"] = serde_json::json!({
            "expected_churn": 0.2156, "blowout_rate": 0.068,
            "mean_abs_pwin_minus_half": 0.1319, "favourite_excess": -0.0002
        });
        e["team_queue"]["policies"][2]["truth"] = serde_json::json!({
            "expected_churn": 0.2155, "blowout_rate": 0.081,
            "mean_abs_pwin_minus_half": 0.173, "favourite_excess": 0.0271
        });
        e["team_queue"]["policies"][1]["truth"] =
            serde_json::json!({"expected_churn": 0.2156, "blowout_rate": 0.067});
        let lines = eval_lines(&e);
        let truth: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains("under the truth"))
            .map(|l| l.trim_start())
            .collect();
        assert_eq!(
            truth,
            [
                "under the truth: churn 0.2156, blowouts 6.8%, |P(win)-1/2| 0.132, favourite +0.000",
                "under the truth: churn 0.2156, blowouts 6.7%",
                "under the truth: churn 0.2155, blowouts 8.1%, |P(win)-1/2| 0.173, favourite +0.027",
            ]
        );
    }

    /// The leaver lines pair each policy's run with backfill with its run without.
    #[test]
    fn the_leaver_lines_pair_each_policy_with_and_without_backfill() {
        let run = |policy: &str, backfill: bool, short: f64| {
            serde_json::json!({"policy": policy, "backfill": backfill, "short_handed": short,
                "fill_s_p50": 65.0, "fill_s_p95": 195.0, "wait_s_p50": 85.0,
                "quit_share": 0.026, "superseded": 61})
        };
        let mut e = team_queue(0.014);
        e["team_queue"]["leavers"] = serde_json::json!({"runs": [
            run("cod", true, 0.094), run("cod", false, 0.264)
        ]});
        let lines = eval_lines(&e);
        let cod = lines
            .iter()
            .find(|l| l.contains("short-handed 9.4%"))
            .unwrap();
        assert_eq!(
            cod.trim(),
            "cod        short-handed 9.4% vs 26.4%, fill 65 s (p95 195 s) vs wait 85 s, quits \
             2.6%, 61 searches superseded"
        );
        assert!(
            eval_lines(&team_queue(0.014))
                .iter()
                .all(|l| !l.contains("backfill"))
        );
    }
}
