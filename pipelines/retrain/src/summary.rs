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
        out.extend(skill_lines(&read("skill/skill_metrics.json")));
        out.extend(churn_lines(&read("churn/churn_metrics.json")));
        out.extend(eval_lines(&read("evaluation/evaluation.json")));
        out.push(format!(
            "  reports   {}/{{skill/skill_report,churn/churn_report,evaluation/evaluation}}.html",
            dir.display()
        ));
    }
    out
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
            format!(
                "  win skill exported, the team model reads it: log-loss {:.4} against raw skill's {:.4} on the last ten days",
                f(&w["win_log_loss"]),
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
    let tq = &e["team_queue"];
    let policies: Vec<String> = first(&tq["policies"])
        .iter()
        .map(|p| {
            format!(
                "{} wait {:.1} s (p90 {:.0} s), churn {:.4}",
                p["label"].as_str().unwrap_or("?"),
                f(&p["wait_s_mean"]),
                f(&p["wait_s_p90"]),
                f(&p["expected_churn"])
            )
        })
        .collect();
    if !policies.is_empty() {
        lines.push(format!(
            "  queue     {}v{} over the window's real searches: {}",
            tq["team_size"],
            tq["team_size"],
            policies.join("; ")
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
            "  win skill exported, the team model reads it: log-loss 0.6350 against raw skill's 0.6465 on the last ten days"
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
}
