//! `mm evaluate`.

use std::path::PathBuf;

use clap::Args;

use super::{day_ms, parse_as_of};

#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// The lake: a path, or an s3://, gs://, az://, file:// URL.
    #[arg(long, env = "MM_LAKE", default_value = "out/lake")]
    pub lake: PathBuf,
    /// Read the lake as it was: a table version (`17`), a time (`2024-01-07T12:00:00Z`) or a
    /// day (`2024-01-07`, its end). Default: the latest version. `mm lake show` lists versions.
    #[arg(long, value_parser = parse_as_of)]
    pub as_of: Option<mm_lake::AsOf>,
    /// The artifact: a version directory, or a model directory (its LATEST).
    #[arg(long)]
    pub artifact: PathBuf,
    /// A second artifact, evaluated on the same pools and draws (e.g. the current LATEST); the
    /// holdout scores of the two are paired, each difference with a 95% bootstrap interval.
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Output directory (evaluation.json, evaluation.html).
    #[arg(long, default_value = "out/evaluation")]
    pub out: PathBuf,
    /// The mode (default: the artifact's).
    #[arg(long)]
    pub mode: Option<String>,
    /// First day of the evaluation window (UTC, YYYY-MM-DD). Default: just after the
    /// artifact's data. It must be after the artifact's data in any case.
    #[arg(long)]
    pub from: Option<chrono::NaiveDate>,
    /// Day after the window's last (UTC, YYYY-MM-DD). Default: the end of the lake.
    #[arg(long)]
    pub to: Option<chrono::NaiveDate>,
    /// Pool sizes (players per round), as `mm retrain`'s. The EOMM paper's Table 2 protocol:
    /// 100,200,300,400,500 with --rounds 1000.
    #[arg(long, value_delimiter = ',', default_value = "100,200")]
    pub pool_sizes: Vec<usize>,
    /// Rounds per pool size, as `mm retrain`'s.
    #[arg(long, default_value_t = mm_eval::DEFAULT_ROUNDS)]
    pub rounds: usize,
    /// Seed of the pools drawn from the evaluated days.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Pools come from the players searching within windows of this many minutes; 0: from
    /// the whole evaluation window (the EOMM paper's collection of states).
    #[arg(long, default_value_t = 60)]
    pub pool_window_min: i64,
    /// A match is a predicted blowout when its favourite wins a decisive result with at least
    /// this probability.
    #[arg(long, default_value_t = 0.75)]
    pub blowout_p: f64,
    /// Policies (1v1): eomm, skill, random, worst, greedy.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "worst,skill,random,eomm,greedy"
    )]
    pub policies: Vec<String>,
    /// Team modes: the queue replay's tick, seconds (every team-queue policy runs: cod,
    /// threshold, eomm).
    #[arg(long, default_value_t = 5.0)]
    pub tick_s: f64,
    /// Team modes: how long the replay runs on after the last arrival, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub drain_s: f64,
    /// Team modes: team EOMM's balance bound, the largest |P(win) - 1/2| a search accepts at
    /// 0 s and from 120 s of waiting (linear between), or `none` for no bound. Default: the
    /// library's for the artifact, `0.1,0.2` when its models weigh blowouts (format 6), else
    /// `0.05,0.1`.
    #[arg(long, value_parser = parse_balance)]
    pub eomm_balance: Option<Balance>,
}

/// `--eomm-balance`: the bound's curve, or none.
#[derive(Debug, Clone)]
pub struct Balance(pub Option<mm_matcher::queue::Backoff>);

fn parse_balance(s: &str) -> Result<Balance, String> {
    if s == "none" {
        return Ok(Balance(None));
    }
    let v: Vec<f64> = s
        .split(',')
        .map(|x| x.trim().parse::<f64>().map_err(|e| format!("{x:?}: {e}")))
        .collect::<Result<_, _>>()?;
    match v[..] {
        [a, b] if (0.0..=0.5).contains(&a) && (a..=0.5).contains(&b) => {
            Ok(Balance(Some(mm_matcher::queue::Backoff::new(&[
                (0.0, a),
                (120.0, b),
            ]))))
        }
        _ => Err(format!(
            "{s:?}: give two bounds in [0, 0.5], the second at least the first (`0.05,0.1`), or \
             `none`"
        )),
    }
}

impl EvaluateArgs {
    pub fn to_config(&self) -> mm_eval::EvalConfig {
        let mut c = mm_eval::EvalConfig::new(&self.lake, &self.artifact, &self.out);
        c.compare.clone_from(&self.compare);
        c.mode.clone_from(&self.mode);
        c.as_of = self.as_of.unwrap_or_default();
        c.from_ms = day_ms(self.from);
        c.to_ms = day_ms(self.to);
        c.pool_sizes.clone_from(&self.pool_sizes);
        c.rounds = self.rounds;
        c.seed = self.seed;
        c.pool_window_ms = (self.pool_window_min > 0).then(|| self.pool_window_min * 60_000);
        c.blowout_p = self.blowout_p;
        c.policies.clone_from(&self.policies);
        c.tick_s = self.tick_s;
        c.drain_s = self.drain_s;
        if let Some(b) = &self.eomm_balance {
            c.eomm_balance = Some(b.0.clone());
        }
        c
    }
}
