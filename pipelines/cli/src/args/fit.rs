//! `mm fit skill` and `mm fit churn`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

use super::{day_ms, metric_of, parse_as_of};

#[derive(Debug, Subcommand)]
pub enum FitCmd {
    /// Raw skill (CoD style), percentiles, team win model, party adjustment, and the baselines
    /// (Elo, Glicko-2, TrueSkill, Weng-Lin), all scored on a later window than they were tuned on.
    Skill(FitSkillArgs),
    /// The EOMM churn model: features from the lake (polars), L2 logistic regression with C by
    /// player-grouped cross-validation, scored on a later window, with a calibration report.
    Churn(FitChurnArgs),
}

#[derive(Debug, Args)]
pub struct FitChurnArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Read the lake as it was: a table version (`17`), a time (`2024-01-07T12:00:00Z`) or a
    /// day (`2024-01-07`, its end). Default: the latest version. `mm lake show` lists versions.
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// Output directory (churn_model.json, churn_metrics.json, churn_report.html,
    /// churn_features.parquet).
    #[arg(long, default_value = "out/churn")]
    pub out: PathBuf,
    /// Only this mode (e.g. tdm-6v6); all modes when absent.
    #[arg(long)]
    pub mode: Option<String>,
    /// Only matches starting before this day (UTC, YYYY-MM-DD): fit on the data up to a
    /// cutoff, and evaluate on what follows (`mm evaluate`).
    #[arg(long)]
    pub until: Option<chrono::NaiveDate>,
    /// Churn = no match within this long after a match: 8h, 1d, 7d, 14d (any Nm, Nh, Nd, Nw).
    #[arg(long, default_value = "8h")]
    pub horizon: String,
    /// Earlier matches described per row.
    #[arg(long, default_value_t = 10)]
    pub history: usize,
    /// How many of the most recent earlier outcomes are crossed with the upcoming one, each on
    /// its own (`now_loss_x_last1_loss`, ...): how sensitive a player is to a loss depends on
    /// the outcomes before it (EOMM Table 1). 0 (the default) leaves them out: the outcome
    /// pattern holds the same runs, and more (measured in docs/benchmarks.md, issue 29). Without the
    /// pattern too, the model is additive in the outcome.
    #[arg(long, default_value_t = 0)]
    pub interactions: usize,
    /// The outcome pattern's length k: the upcoming outcome and the k - 1 before it, one-hot
    /// over the 3^k sequences (`now_pattern_LWW`: a loss now after two wins), the paper's
    /// Table 1 states. A loss's cost then depends on the exact run of outcomes before it, not
    /// on a sum over them. 0 leaves it out (and the artifact reads with a format-3 reader);
    /// at most 4.
    #[arg(long, default_value_t = 3)]
    pub outcome_pattern: usize,
    /// Leave out the player's churn history features (`past_churn_*`: how many of their
    /// earlier matches were followed by churn, shrunk by how many there are, and crossed with
    /// the upcoming outcome). With them, the artifact needs a format-3 reader.
    #[arg(long)]
    pub no_past_churn: bool,
    /// A loss by more than this many team-score points is a blowout (CoD: 30 in TDM).
    #[arg(long, default_value_t = 30.0)]
    pub blowout_margin: f64,
    /// First day of the scoring window (YYYY-MM-DD); earlier rows train. Default: the last
    /// quarter of the data's span.
    #[arg(long)]
    pub score_from: Option<chrono::NaiveDate>,
    /// Inverse L2 strengths to cross-validate (scikit-learn's C), comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.0001,0.001,0.01,0.1,1,10"
    )]
    pub c_grid: Vec<f64>,
    /// Cross-validation folds for choosing C (players split by a hash of their id).
    #[arg(long, default_value_t = 5)]
    pub folds: usize,
    /// Cross-validate on at most this many rows (whole players).
    #[arg(long, default_value_t = 1_000_000)]
    pub cv_rows: usize,
    /// Train on at most this many rows (whole players, a fixed hash sample). The sample is
    /// held in memory as float64: 2M rows of 106 features is 1.7 GB.
    #[arg(long, default_value_t = 2_000_000)]
    pub max_train_rows: usize,
    /// The skill fit's output directory: its match_skill.parquet gives each row's pre-match
    /// skill percentile (a feature, and the report's skill deciles). Default: `out/skill`, as
    /// `mm export` reads it, when it holds a skill fit (else the feature is off, with a warning).
    #[arg(long)]
    pub skill: Option<PathBuf>,
    /// Fit without the skill feature, even where `out/skill` holds a skill fit.
    #[arg(long, conflicts_with = "skill")]
    pub no_skill: bool,
    /// Do not write churn_report.html.
    #[arg(long)]
    pub no_html: bool,
    /// Do not write churn_features.parquet.
    #[arg(long)]
    pub no_table: bool,
    /// Where the feature and state tables (Delta) live: a directory or an object-store URL
    /// (`s3://bucket/prefix`). Default: `<out>/tables`. Shards and the fit need the same one.
    #[arg(long, env = "MM_TABLES")]
    pub tables: Option<PathBuf>,
    /// Only build and commit shard K of N of the feature table (players by id hash), then exit;
    /// run all N (any order, any machines), then `mm fit churn` without --shard fits on them.
    #[arg(long, conflicts_with = "shards")]
    pub shard: Option<mm_fit::churn::build::Shard>,
    /// Like `--shard K/N` with K from the environment variable JOB_COMPLETION_INDEX (a
    /// Kubernetes Indexed Job sets it).
    #[arg(long)]
    pub shards: Option<u32>,
    /// Rows per player-hash bucket of the feature build: memory grows with it.
    #[arg(long, default_value_t = 1_000_000)]
    pub chunk_rows: usize,
    /// Build the feature table in this process even when some shards of it are committed
    /// and others are not.
    #[arg(long)]
    pub rebuild: bool,
    /// Export the model fitted on the training window, as scored. By default the exported
    /// model is refitted at the chosen C on every labelled row, the scoring window's included.
    #[arg(long)]
    pub no_refit: bool,
}

impl FitChurnArgs {
    /// The shard to build, if this run builds one (`--shard`, or `--shards` with the index
    /// from JOB_COMPLETION_INDEX).
    pub fn shard(&self) -> anyhow::Result<Option<mm_fit::churn::build::Shard>> {
        match (self.shard, self.shards) {
            (Some(s), _) => Ok(Some(s)),
            (None, Some(n)) => {
                let k = std::env::var("JOB_COMPLETION_INDEX").map_err(|_| {
                    anyhow::anyhow!(
                        "--shards {n}: JOB_COMPLETION_INDEX is not set (use --shard K/N)"
                    )
                })?;
                let s = format!("{}/{n}", k.trim()).parse().map_err(|e: String| {
                    anyhow::anyhow!("--shards with JOB_COMPLETION_INDEX={k}: {e}")
                })?;
                Ok(Some(s))
            }
            (None, None) => Ok(None),
        }
    }

    /// The skill fit to read: `--skill`, else `out/skill` when it holds one (the folder `mm fit
    /// skill` and `mm export` default to), else none, said in a warning.
    fn skill_dir(&self) -> anyhow::Result<Option<PathBuf>> {
        const DEFAULT: &str = "out/skill";
        if self.no_skill {
            return Ok(None);
        }
        if let Some(s) = &self.skill {
            return Ok(Some(crate::place::local("skill", s)?));
        }
        let d = PathBuf::from(DEFAULT);
        if d.join("match_skill.parquet").is_file() {
            return Ok(Some(d));
        }
        tracing::warn!(
            "no skill fit in {DEFAULT} (its match_skill.parquet): the churn model is fitted \
             without the skill feature; run `mm fit skill` first, pass --skill DIR, or \
             --no-skill to fit without it on purpose"
        );
        Ok(None)
    }

    pub fn to_config(&self) -> anyhow::Result<mm_fit::churn::ChurnConfig> {
        let horizon_ms = mm_fit::churn::parse_horizon(&self.horizon)?;
        let out = crate::place::local("out", &self.out)?;
        let base = mm_fit::churn::ChurnConfig::new(self.lake.clone(), out);
        let cfg = mm_fit::churn::ChurnConfig {
            as_of: self.as_of.unwrap_or_default(),
            until_ms: day_ms(self.until),
            mode: self.mode.clone(),
            horizon: self.horizon.clone(),
            horizon_ms,
            // The data's start is set by the fit, from the lake.
            spec: mm_trainer::churn::features::FeatureSpec {
                history: self.history,
                data_start_ms: None,
                outcome_interactions: self.interactions,
                past_churn_horizon_ms: (!self.no_past_churn).then_some(horizon_ms),
                outcome_pattern: self.outcome_pattern,
            },
            blowout_margin: self.blowout_margin,
            score_from_ms: day_ms(self.score_from),
            fit: mm_trainer::churn::model::ChurnFitConfig {
                c_grid: self.c_grid.clone(),
                folds: self.folds,
                cv_max_rows: self.cv_rows,
                ..base.fit.clone()
            },
            max_train_rows: self.max_train_rows,
            skill: self.skill_dir()?,
            html: !self.no_html,
            table: !self.no_table,
            tables: self.tables.clone(),
            chunk_rows: self.chunk_rows.max(1),
            rebuild: self.rebuild,
            refit: !self.no_refit,
            ..base
        };
        cfg.check()?;
        Ok(cfg)
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MetricArg {
    /// (kills + 1) / (deaths by enemy + 1): self-kills never help; time-invariant.
    KillsPerEnemyDeath,
    /// Score per minute played.
    ScorePerMinute,
    /// The lake's perf column (tennis: share of points won).
    Perf,
    /// Win/draw/loss only.
    Outcome,
}

/// How raw skill compares players whose rows carry a role.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RolesArg {
    /// Every player with every other (the CoD paper's rule).
    All,
    /// Only players of the same role.
    WithinRole,
    /// Everyone, on the metric standardised within each role.
    Normalised,
}

#[derive(Debug, Args)]
pub struct FitSkillArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Read the lake as it was: a table version (`17`), a time (`2024-01-07T12:00:00Z`) or a
    /// day (`2024-01-07`, its end). Default: the latest version. `mm lake show` lists versions.
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// Output directory (players.parquet, percentiles.json, team_model.json, skill_metrics.json,
    /// skill_report.html).
    #[arg(long, default_value = "out/skill")]
    pub out: PathBuf,
    /// Only this mode (e.g. tdm-6v6); all modes when absent.
    #[arg(long)]
    pub mode: Option<String>,
    /// Only matches starting before this day (UTC, YYYY-MM-DD): fit on the data up to a
    /// cutoff, and evaluate on what follows (`mm evaluate`).
    #[arg(long)]
    pub until: Option<chrono::NaiveDate>,
    /// The in-match performance metric raw skill compares between the lobby's players.
    #[arg(long, value_enum, default_value = "kills-per-enemy-death")]
    pub metric: MetricArg,
    /// Matches for an established player to move halfway to a new level.
    #[arg(long, default_value_t = 12.0)]
    pub half_life: f64,
    /// Log-odds of outperforming per unit of raw-skill difference. Default: chosen so the
    /// established players' raw skill has the CoD spread (sd 0.119: 80th minus 50th percentile
    /// is 0.1).
    #[arg(long)]
    pub scale: Option<f64>,
    /// Days since last played for the active population of the percentile map.
    #[arg(long, default_value_t = 28)]
    pub active_days: u32,
    /// Points of the percentile map (raw skill to the population's percentile).
    #[arg(long, default_value_t = 101)]
    pub knots: usize,
    /// Start of the tuning window (YYYY-MM-DD); earlier matches are burn-in. Default: the 40%
    /// point of the matches in time.
    #[arg(long)]
    pub tune_from: Option<chrono::NaiveDate>,
    /// End of the tuning window (exclusive). Default: the 80% point.
    #[arg(long)]
    pub tune_to: Option<chrono::NaiveDate>,
    /// Start of the scoring window (not before --tune-to). Default: --tune-to.
    #[arg(long)]
    pub score_from: Option<chrono::NaiveDate>,
    /// Last day of the scoring window (inclusive). Default: the end of the data.
    #[arg(long)]
    pub score_to: Option<chrono::NaiveDate>,
    /// Do not tune: our model as given (--half-life, --metric-margin), the baselines' defaults.
    #[arg(long)]
    pub no_tune: bool,
    /// Metric margin for scoring comparisons, in the metric's units (0: only the ordering
    /// counts). Tuned unless --no-tune. (Was `--margin`, which `mm retrain` uses for its
    /// promotion gate; the old spelling is still accepted, with a warning.)
    #[arg(long = "metric-margin", alias = "margin", default_value_t = 0.0)]
    pub margin: f64,
    /// How players with a role (the lake's `role` column, LoL positions) are compared. Default:
    /// tuned among the three when the lake's rows carry roles (unless --no-tune), else `all`.
    #[arg(long, value_enum)]
    pub roles: Option<RolesArg>,
    /// Baselines to run, comma-separated (elo, glicko2, trueskill, weng-lin), or none.
    #[arg(long, default_value = "elo,glicko2,trueskill,weng-lin")]
    pub baselines: String,
    /// Refits of the party adjustment with parties credited in the raw-skill replay.
    #[arg(long, default_value_t = 2)]
    pub party_iterations: u32,
    /// Do not write skill_report.html.
    #[arg(long)]
    pub no_html: bool,
    /// The most player-match rows held in memory. Tuning, the baselines, the team model and
    /// the party adjustment use the lake's first days up to this many rows; a larger lake is
    /// then replayed with the chosen model one day at a time (memory bounded by the players).
    #[arg(long, default_value_t = mm_fit::MAX_TUNE_ROWS)]
    pub max_tune_rows: usize,
    /// Do not fit the whole-history win skill: the exported team win model reads raw skill.
    /// By default the win skill (the better of a Bradley-Terry fit on the outcomes and a
    /// least-squares fit on the in-match metric, over the most recent two-team matches) is
    /// exported with its model when it predicts the last 10 days better than raw skill.
    #[arg(long)]
    pub no_win_skill: bool,
    /// The most recent two-team matches the win skill is fitted on (memory: about 150 bytes a
    /// 6v6 match).
    #[arg(long, default_value_t = mm_fit::skill::win::MAX_WIN_MATCHES)]
    pub max_win_matches: usize,
    /// A loss by more than this many team-score points is a blowout (CoD: 30 in TDM): the team
    /// win model's blowout model, which team EOMM reads, is fitted on it. Give `mm fit churn`
    /// the same.
    #[arg(long, default_value_t = 30.0)]
    pub blowout_margin: f64,
}

impl FitSkillArgs {
    pub fn to_config(&self) -> anyhow::Result<mm_fit::SkillConfig> {
        use mm_trainer::skill::baselines::BaselineKind;
        let mut baselines = Vec::new();
        for name in self
            .baselines
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if name == "none" {
                continue;
            }
            match BaselineKind::ALL.iter().find(|k| k.name() == name) {
                Some(&k) => baselines.push(k),
                None => {
                    return Err(mm_fit::FitError::Config {
                        field: "baselines",
                        reason: format!(
                            "unknown baseline '{name}' (elo, glicko2, trueskill, weng-lin, none)"
                        ),
                    }
                    .into());
                }
            }
        }
        Ok(mm_fit::SkillConfig {
            as_of: self.as_of.unwrap_or_default(),
            until_ms: day_ms(self.until),
            mode: self.mode.clone(),
            metric: metric_of(self.metric),
            params: mm_trainer::skill::raw::RawSkillParams {
                half_life_matches: self.half_life,
                scale: self.scale.unwrap_or(6.0),
                margin: self.margin,
                roles: match self.roles {
                    None | Some(RolesArg::All) => mm_trainer::skill::raw::RoleComparison::All,
                    Some(RolesArg::WithinRole) => {
                        mm_trainer::skill::raw::RoleComparison::WithinRole
                    }
                    Some(RolesArg::Normalised) => {
                        mm_trainer::skill::raw::RoleComparison::Normalised
                    }
                },
                ..Default::default()
            },
            tune: !self.no_tune,
            tune_roles: self.roles.is_none(),
            baselines,
            party_iterations: self.party_iterations,
            active_days: self.active_days,
            knots: self.knots,
            tune_from_ms: day_ms(self.tune_from),
            tune_to_ms: day_ms(self.tune_to),
            score_from_ms: day_ms(self.score_from),
            // The last day counts whole.
            score_to_ms: day_ms(self.score_to).map(|t| t + 86_399_999),
            html: !self.no_html,
            target_sd: self.scale.is_none().then_some(mm_fit::COD_SKILL_SD),
            max_tune_rows: self.max_tune_rows,
            win_skill: !self.no_win_skill,
            max_win_matches: self.max_win_matches,
            blowout_margin: self.blowout_margin,
            ..mm_fit::SkillConfig::new(self.lake.clone(), crate::place::local("out", &self.out)?)
        })
    }
}
