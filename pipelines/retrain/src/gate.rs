//! The promotion gate: the candidate against the current `LATEST` on the held-out days.

use mm_eval::Holdout;

/// The promotion rule: no baseline, or the candidate's holdout churn and win log-losses are
/// each at most the baseline's plus `margin` (a figure that is not a number compares as
/// not worse).
#[must_use]
pub fn gate(
    candidate: Option<&Holdout>,
    baseline: Option<&Holdout>,
    margin: f64,
) -> (bool, String) {
    let Some(c) = candidate else {
        return (false, "no holdout figures for the candidate".into());
    };
    let Some(b) = baseline else {
        return (true, "no current LATEST to compare with".into());
    };
    let worse = |x: f64, y: f64| x.is_finite() && y.is_finite() && x > y + margin;
    let churn_worse = worse(c.churn_log_loss, b.churn_log_loss);
    let win_worse = worse(c.win_log_loss, b.win_log_loss);
    let figures = format!(
        "holdout churn log-loss {:.4} vs {:.4}, win log-loss {:.4} vs {:.4}, margin {margin}",
        c.churn_log_loss, b.churn_log_loss, c.win_log_loss, b.win_log_loss
    );
    if churn_worse || win_worse {
        (false, format!("candidate worse: {figures}"))
    } else {
        (true, figures)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::ModeRun;

    fn holdout(churn: f64, win: f64) -> Holdout {
        serde_json::from_value(serde_json::json!({
            "artifact": "a", "version": "v0001", "churn_rows": 10, "churn_log_loss": churn,
            "churn_brier": 0.1, "churn_ece": 0.01, "churn_auc": 0.6, "churn_mean_predicted": 0.2,
            "churn_observed": 0.2, "win_matches": 0, "win_log_loss": win,
            "win_accuracy": null, "new_players": 0,
        }))
        .unwrap()
    }

    /// The gate promotes unless churn or win log-loss is worse by more than the margin; a
    /// figure that is not a number (a 1v1 mode has no team matches) does not block; the
    /// figures go through the state file (where JSON writes NaN as null) unchanged.
    #[test]
    fn the_gate_compares_holdout_figures_that_survive_the_state_file() {
        let base = holdout(0.50, 0.60);
        assert!(gate(Some(&holdout(0.501, 0.60)), Some(&base), 0.002).0);
        assert!(!gate(Some(&holdout(0.503, 0.60)), Some(&base), 0.002).0);
        assert!(!gate(Some(&holdout(0.50, 0.603)), Some(&base), 0.002).0);
        assert!(gate(Some(&holdout(0.50, f64::NAN)), Some(&base), 0.002).0);
        assert!(gate(Some(&base), None, 0.0).0);
        assert!(!gate(None, Some(&base), 0.0).0);
        let mode = ModeRun {
            candidate: Some(holdout(0.5, f64::NAN)),
            ..ModeRun::default()
        };
        let back: ModeRun = serde_json::from_slice(&serde_json::to_vec(&mode).unwrap()).unwrap();
        let c = back.candidate.unwrap();
        assert!(c.win_log_loss.is_nan() && c.win_accuracy.is_nan());
        assert!((c.churn_log_loss - 0.5).abs() < 1e-15);
    }
}
