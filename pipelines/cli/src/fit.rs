//! `mm fit skill` and `mm fit churn` (and one shard of the churn feature build).

use anyhow::Result;

use crate::args::{FitCmd, Output};
use crate::output::emit;

pub fn run(cmd: &FitCmd, out: &Output) -> Result<()> {
    match cmd {
        FitCmd::Skill(a) => emit(out, &mm_fit::fit_skill(&a.to_config()?)?, print_skill),
        FitCmd::Churn(a) => {
            if let Some(shard) = a.shard()? {
                let r = mm_fit::churn::build_churn_shard(&a.to_config()?, shard)?;
                return emit(out, &r, |r| {
                    mm_run::outln!(
                        "shard {} of build {}: {} rows of its players ({} read), {} buckets, \
                         committed as features v{} and state v{} in {} ({:.1}s)",
                        r.shard,
                        r.build,
                        r.stats.rows,
                        r.stats.rows_read,
                        r.stats.buckets,
                        r.features_version,
                        r.state_version,
                        r.tables,
                        r.seconds
                    );
                });
            }
            emit(
                out,
                &mm_fit::churn::fit_churn(&a.to_config()?)?,
                print_churn,
            )
        }
    }
}

fn print_churn(r: &mm_fit::churn::ChurnReport) {
    mm_run::outln!(
        "churn within {}: {} rows, {} censored; trained on {} rows (churn {:.4}), scored on {} later rows (churn {:.4}); C = {}",
        r.horizon,
        r.rows,
        r.censored,
        r.train_rows,
        r.churn_rate_train,
        r.score_rows,
        r.churn_rate_score,
        r.c
    );
    mm_run::outln!(
        "scoring window: AUC {:.4}, log-loss {:.4}, Brier {:.4}, calibration error {:.4}",
        r.auc,
        r.scored.log_loss,
        r.scored.brier,
        r.scored.ece
    );
    if let Some(t) = &r.truth {
        mm_run::outln!(
            "against the true {}: calibration error {:.4}, mean |model - truth| {:.4} (the training churn rate's {:.4}); AUC model {:.4}, truth {:.4}",
            t.column,
            t.ece_vs_truth,
            t.mean_abs_diff,
            t.constant_mean_abs_diff,
            t.model_auc,
            t.truth_auc
        );
    }
    if let Some(f) = &r.refit {
        mm_run::outln!(
            "exported: refitted at C = {} on {} labelled rows of both windows (churn {:.4}); the figures above are the training window's model",
            r.c,
            f.rows,
            f.churn_rate
        );
    }
    let b = &r.build;
    mm_run::outln!(
        "feature table: build {} in {} ({} shard{}, {}), features v{}",
        b.key,
        b.tables,
        b.shards,
        if b.shards == 1 { "" } else { "s" },
        if b.reused {
            "found complete"
        } else {
            "built by this run"
        },
        b.features_version.unwrap_or(-1)
    );
    mm_run::outln!(
        "features {:.1} s, fit {:.1} s, total {:.1} s",
        r.features_seconds,
        r.fit_seconds,
        r.total_seconds
    );
    for o in &r.outputs {
        mm_run::outln!("wrote {}", o.display());
    }
}

fn print_skill(r: &mm_fit::SkillReport) {
    mm_run::outln!(
        "raw skill ({}): {} matches ({} two-team), {} players ({} active); skill mean {:.3}, sd {:.3}, range [{:.3}, {:.3}]",
        r.metric.name(),
        r.matches,
        r.two_team_matches,
        r.players,
        r.active_players,
        r.skill_mean,
        r.skill_sd,
        r.skill_min,
        r.skill_max
    );
    mm_run::outln!(
        "tuned on {} .. {} ({} matches), scored on {} .. {} ({} matches); half-life {} matches, margin {:.4}",
        r.windows.tune_from,
        r.windows.tune_to,
        r.windows.tune_matches,
        r.windows.score_from,
        r.windows.score_to,
        r.windows.scored_matches,
        r.params.half_life_matches,
        r.params.margin
    );
    mm_run::outln!(
        "{:<34} {:>9} {:>9} {:>9} {:>9} {:>8} {:>12}",
        "model",
        "log-loss",
        "accuracy",
        "Brier",
        "ECE",
        "n",
        "updates/s"
    );
    for m in &r.models {
        mm_run::outln!(
            "{:<34} {:>9.4} {:>9.4} {:>9.4} {:>9.4} {:>8} {:>12.0}",
            m.model,
            m.scored.log_loss,
            m.scored.accuracy,
            m.scored.brier,
            m.scored.ece,
            m.scored.n,
            m.updates_per_s
        );
    }
    if let Some(a) = &r.party_adjustment {
        mm_run::outln!(
            "party adjustment: {:+.4} raw skill per member {:+.4} per unit of party skill sd",
            a.per_member,
            a.per_member_per_sd
        );
    }
    mm_run::outln!(
        "pairwise (metric) predictions: log-loss {:.4}, accuracy {:.4}, {} pairs",
        r.pairwise.log_loss,
        r.pairwise.accuracy,
        r.pairwise.n
    );
    mm_run::outln!(
        "wrote {}/players.parquet, percentiles.json, team_model.json, skill_metrics.json, skill_report.html in {:.1} s",
        r.out.display(),
        r.seconds
    );
}
