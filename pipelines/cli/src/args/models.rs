//! `mm export` and `mm models`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The skill fit's output folder.
    #[arg(long, default_value = "out/skill")]
    pub skill: PathBuf,
    /// The churn fit's output folder.
    #[arg(long, default_value = "out/churn")]
    pub churn: PathBuf,
    /// The models root: artifacts go to `<models>/<name>/<version>/`.
    #[arg(long, env = "MM_MODELS", default_value = "out/models")]
    pub models: PathBuf,
    /// The model's name. Default: the fits' mode (e.g. tdm-6v6), else `all-modes`.
    #[arg(long)]
    pub name: Option<String>,
    /// The version's name. Default: v0001, or one more than the highest vNNNN there.
    #[arg(long)]
    pub version: Option<String>,
    /// Publish without moving LATEST (promote later with `mm models promote`).
    #[arg(long)]
    pub no_promote: bool,
}

/// Which model: `--models` root and `--name` (optional when the root holds one model).
#[derive(Debug, Clone, Args)]
pub struct ModelSel {
    /// The models root: a path, or an s3://, gs://, az:// URL.
    #[arg(long, env = "MM_MODELS", default_value = "out/models")]
    pub models: PathBuf,
    /// The model's name under --models (default: the only one there; `list` shows them all).
    #[arg(long)]
    pub name: Option<String>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ModelsCmd {
    /// Versions with their main metrics; `*` marks LATEST.
    List(ModelSel),
    /// One version's manifest (LATEST by default).
    Show {
        /// The version (default: the one LATEST names).
        version: Option<String>,
        #[command(flatten)]
        sel: ModelSel,
    },
    /// Verify checksums, format and contents of one version (LATEST by default) or all.
    Verify {
        /// The version (default: the one LATEST names).
        version: Option<String>,
        /// Verify every version, not one.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        sel: ModelSel,
    },
    /// Point LATEST at a version, after verifying it.
    Promote {
        /// The version to promote.
        version: String,
        #[command(flatten)]
        sel: ModelSel,
    },
    /// Point LATEST back at the version promoted before the current one.
    Rollback(ModelSel),
    /// What changed between two versions: metrics and parameters (the churn coefficients that
    /// moved most, the team win model, the party adjustment, the percentile table).
    Diff {
        /// The older version.
        a: String,
        /// The newer version.
        b: String,
        /// Churn coefficients to list.
        #[arg(long, default_value_t = 10)]
        top: usize,
        #[command(flatten)]
        sel: ModelSel,
    },
}
