//! `mm.toml`: the config file, with the same keys as the flags.
//!
//! Precedence, highest first: a flag on the command line, the environment (`MM_LAKE`,
//! `MM_MODELS`, `MM_WORK`, …), the config file, the flag's default: the order of a
//! twelve-factor service, where a deployment's environment overrides the file an image or a
//! ConfigMap ships. The file is `--config FILE` (or `MM_CONFIG`), else `mm.toml` in the working
//! directory when one exists.
//!
//! Keys are flags' long names (`holdout-days` or `holdout_days`). Top-level keys apply to
//! every command that has the flag; a table named after a command applies to it alone, and
//! nested tables to subcommands (`[fit.churn]`); the deeper table wins. A key that no command
//! has, or a table that names no command, is refused with the file's name.
//!
//! How: clap parses the command line once, leniently, to learn the command and which flags
//! were given; every setting of the file that the command has and neither the command line nor
//! the environment gave is appended as a flag; clap then parses the result for real, so a value from the file
//! is checked exactly as the same flag would be. `mm config show` prints each setting with its
//! source.

use std::collections::{BTreeMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};
use serde::Serialize;

use crate::args::Cli;

/// The default config file, looked up in the working directory.
pub const DEFAULT_FILE: &str = "mm.toml";

/// One setting of the command being run, and where its value came from.
#[derive(Debug, Clone, Serialize)]
pub struct Setting {
    pub key: String,
    /// The value as the command line would give it (a list joined with commas).
    pub value: Option<String>,
    pub source: String,
    /// A list flag (values separated by commas).
    pub list: bool,
}

/// The parsed command line with the config file applied.
#[derive(Debug)]
pub struct Resolved {
    /// `None` only in the lenient parse of `mm config show`, when required flags are missing.
    pub cli: Option<Cli>,
    /// The config file read, if any.
    pub file: Option<PathBuf>,
    /// The command's path (`["fit", "churn"]`).
    pub command: Vec<String>,
    pub settings: Vec<Setting>,
}

/// How a clap failure ends the process (help, version, usage errors), or a config file error.
#[derive(Debug)]
pub enum Failure {
    Clap(clap::Error),
    Config(anyhow::Error),
}

fn long_of(key: &str) -> String {
    key.replace('_', "-")
}

/// Every long flag of `cmd` and its subcommands, with the old spellings of renamed ones.
fn all_longs(cmd: &Command, out: &mut HashSet<String>) {
    for a in cmd.get_arguments() {
        if let Some(l) = a.get_long() {
            out.insert(l.to_string());
        }
        for old in a.get_all_aliases().unwrap_or_default() {
            out.insert(old.to_string());
        }
    }
    for s in cmd.get_subcommands() {
        all_longs(s, out);
    }
}

/// Refuses keys no command has and tables that name no command.
fn check_table(
    table: &toml::Table,
    cmd: &Command,
    globals: &HashSet<String>,
    file: &Path,
) -> Result<()> {
    let mut longs = globals.clone();
    all_longs(cmd, &mut longs);
    for (k, v) in table {
        match v {
            toml::Value::Table(t) => {
                let Some(sub) = cmd.find_subcommand(k) else {
                    bail!(
                        "{}: [{k}] names no command of `mm {}`",
                        file.display(),
                        cmd.get_name()
                    );
                };
                check_table(t, sub, globals, file)?;
            }
            _ if longs.contains(&long_of(k)) => {}
            _ => bail!(
                "{}: unknown setting `{k}`: no command under `{}` has a --{} flag",
                file.display(),
                cmd.get_name(),
                long_of(k)
            ),
        }
    }
    Ok(())
}

/// The values that apply to the command at `path`: top-level keys, then each table along
/// the path (deeper wins), with the depth each came from (0: the top level). Keys are long
/// flag names.
fn applicable(table: &toml::Table, path: &[String]) -> BTreeMap<String, (toml::Value, usize)> {
    let mut out = BTreeMap::new();
    let mut level = Some(table);
    let mut depth = 0;
    while let Some(t) = level {
        for (k, v) in t {
            if !v.is_table() {
                out.insert(long_of(k), (v.clone(), depth));
            }
        }
        level = path
            .get(depth)
            .and_then(|name| t.get(name))
            .and_then(toml::Value::as_table);
        depth += 1;
    }
    out
}

/// The flags that say `value` for an argument of this action.
fn tokens(long: &str, action: &ArgAction, value: &toml::Value, file: &Path) -> Result<Vec<String>> {
    let scalar = |v: &toml::Value| -> Result<String> {
        Ok(match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Datetime(d) => d.to_string(),
            toml::Value::Array(_) | toml::Value::Table(_) => {
                bail!("{}: `{long}` takes a single value", file.display())
            }
        })
    };
    match (action, value) {
        (ArgAction::SetTrue, toml::Value::Boolean(b)) => Ok(if *b {
            vec![format!("--{long}")]
        } else {
            vec![]
        }),
        (ArgAction::SetTrue, _) => bail!("{}: `{long}` is true or false", file.display()),
        (ArgAction::Append, toml::Value::Array(items)) => items
            .iter()
            .map(|v| Ok(format!("--{long}={}", scalar(v)?)))
            .collect(),
        (_, toml::Value::Array(items)) => {
            let parts: Result<Vec<String>> = items.iter().map(scalar).collect();
            Ok(vec![format!("--{long}={}", parts?.join(","))])
        }
        (_, v) => Ok(vec![format!("--{long}={}", scalar(v)?)]),
    }
}

/// The leaf command's matches and definition, and the path to it.
fn leaf<'a>(m: &'a ArgMatches, root: &'a Command) -> (&'a ArgMatches, &'a Command, Vec<String>) {
    let (mut m, mut c, mut path) = (m, root, Vec::new());
    while let Some((name, sub)) = m.subcommand() {
        let Some(sc) = c.find_subcommand(name) else {
            break;
        };
        path.push(name.to_string());
        m = sub;
        c = sc;
    }
    (m, c, path)
}

fn config_path(m: &ArgMatches) -> Result<Option<PathBuf>> {
    if let Ok(Some(p)) = m.try_get_one::<PathBuf>("config") {
        if !p.exists() {
            bail!(
                "{}: config file not found (--config or MM_CONFIG)",
                p.display()
            );
        }
        return Ok(Some(p.clone()));
    }
    let p = PathBuf::from(DEFAULT_FILE);
    Ok(p.is_file().then_some(p))
}

fn read_table(path: &Path) -> Result<toml::Table> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    text.parse::<toml::Table>()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// The flags that carry the config file's `values` for the command's `args` (those neither the
/// command line nor the environment gave), and the ids they set into `injected`.
fn file_flags(
    args: &[&clap::Arg],
    m1: &ArgMatches,
    values: &BTreeMap<String, (toml::Value, usize)>,
    f: &Path,
    injected: &mut HashSet<String>,
) -> Result<Vec<OsString>> {
    let mut extra: Vec<OsString> = Vec::new();
    for a in args {
        let long = a.get_long().unwrap_or_default();
        // A renamed flag's old spelling still applies, with a warning, in the command's own
        // table: at the top level it names the other command's flag.
        let old = || {
            let aliases = a.get_all_aliases().unwrap_or_default();
            aliases.into_iter().find_map(|al| {
                values.get(al).filter(|(_, depth)| *depth > 0).inspect(|_| {
                    eprintln!(
                        "mm: warning: {}: `{al}` is now `{long}` (the old name is still read, \
                         and will not be in a later release)",
                        f.display()
                    );
                })
            })
        };
        let Some((v, _)) = values.get(long).or_else(old) else {
            continue;
        };
        if matches!(
            m1.value_source(a.get_id().as_str()),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        for t in tokens(long, a.get_action(), v, f)? {
            extra.push(t.into());
        }
        injected.insert(a.get_id().to_string());
    }
    Ok(extra)
}

/// One setting as the command will run with it, and where its value came from: `m1` is the
/// command line alone, `m2` with the config file's flags (`injected`) added.
fn setting(
    a: &clap::Arg,
    m1: &ArgMatches,
    m2: &ArgMatches,
    injected: &HashSet<String>,
    file: Option<&Path>,
) -> Setting {
    let id = a.get_id().as_str();
    let value = m2.get_raw(id).map(|vs| {
        vs.map(|v| v.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(",")
    });
    let source = if m1.value_source(id) == Some(ValueSource::CommandLine) {
        "command line".to_string()
    } else if injected.contains(id) {
        format!(
            "config {}",
            file.map_or_else(String::new, |f| f.display().to_string())
        )
    } else {
        match m2.value_source(id) {
            Some(ValueSource::EnvVariable) => format!(
                "environment {}",
                a.get_env()
                    .map_or_else(String::new, |e| e.to_string_lossy().into_owned())
            ),
            Some(ValueSource::DefaultValue) => "default".to_string(),
            Some(_) => "command line".to_string(),
            None => "unset".to_string(),
        }
    };
    Setting {
        key: a.get_long().unwrap_or_default().to_string(),
        value,
        source,
        list: a.get_value_delimiter().is_some(),
    }
}

/// Parses `argv` with the config file applied. `lenient` (for `mm config show`) lets required
/// flags stay missing.
///
/// # Errors
/// A clap failure (the caller exits through it) or a bad config file.
pub fn resolve(argv: &[OsString], lenient: bool) -> std::result::Result<Resolved, Failure> {
    let root = Cli::command();
    let first = root
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(argv)
        .map_err(Failure::Clap)?;
    let (m1, _, path) = leaf(&first, &root);
    let file = config_path(m1).map_err(Failure::Config)?;
    let mut globals: Vec<&clap::Arg> = root.get_arguments().filter(|a| a.is_global_set()).collect();
    globals.retain(|a| a.get_id() != "config");
    let global_longs: HashSet<String> = globals
        .iter()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect();
    let leaf_cmd = {
        let mut c = &root;
        for name in &path {
            c = c.find_subcommand(name).unwrap_or(c);
        }
        c
    };
    // The command's own flags, then the global ones (once: at the root they are the same),
    // without help, version, hidden test hooks and `--config` itself.
    let mut seen = HashSet::new();
    let args: Vec<&clap::Arg> = leaf_cmd
        .get_arguments()
        .chain(globals.iter().copied())
        .filter(|a| {
            a.get_long().is_some()
                && !a.is_hide_set()
                && !["help", "version", "config"].contains(&a.get_id().as_str())
                && seen.insert(a.get_id().clone())
        })
        .collect();

    let mut injected: HashSet<String> = HashSet::new();
    let mut argv2: Vec<OsString> = argv.to_vec();
    if let Some(f) = &file {
        let table = read_table(f).map_err(Failure::Config)?;
        check_table(&table, &root, &global_longs, f).map_err(Failure::Config)?;
        let values = applicable(&table, &path);
        let extra = file_flags(&args, m1, &values, f, &mut injected).map_err(Failure::Config)?;
        let at = argv2.iter().position(|a| a == "--").unwrap_or(argv2.len());
        argv2.splice(at..at, extra);
    }

    let cmd2 = if lenient {
        root.clone().ignore_errors(true)
    } else {
        root.clone()
    };
    let m2 = match cmd2.try_get_matches_from(&argv2) {
        Ok(m) => m,
        Err(e) => {
            if !injected.is_empty()
                && let Some(f) = &file
            {
                eprintln!(
                    "mm: note: settings from {} were applied: {}",
                    f.display(),
                    injected.iter().cloned().collect::<Vec<_>>().join(", ")
                );
            }
            return Err(Failure::Clap(e));
        }
    };
    let cli = match Cli::from_arg_matches(&m2) {
        Ok(c) => Some(c),
        // Required flags may be missing here; `config show` only reads the settings.
        Err(_) if lenient => None,
        Err(e) => return Err(Failure::Clap(e)),
    };
    let (m2leaf, _, _) = leaf(&m2, &root);
    let settings = args
        .iter()
        .map(|a| setting(a, m1, m2leaf, &injected, file.as_deref()))
        .collect();
    Ok(Resolved {
        cli,
        file,
        command: path,
        settings,
    })
}

/// Warns, on stderr, about each renamed flag the command line spells the old way. A renamed
/// flag (issue 57: one name meant two things) keeps its old name as a clap alias; that alias is
/// the whole record of the rename.
pub fn warn_renamed(argv: &[OsString], command: &[String]) {
    let root = Cli::command();
    let mut cmd = &root;
    for name in command {
        match cmd.find_subcommand(name) {
            Some(c) => cmd = c,
            None => return,
        }
    }
    let path = command.join(" ");
    for a in cmd.get_arguments() {
        let Some(new) = a.get_long() else { continue };
        for old in a.get_all_aliases().unwrap_or_default() {
            let spelled = argv.iter().any(|t| {
                let t = t.to_string_lossy();
                t == format!("--{old}") || t.starts_with(&format!("--{old}="))
            });
            if spelled {
                eprintln!(
                    "mm: warning: `mm {path} --{old}` is now `--{new}` (the old name still works, \
                     and will not in a later release)"
                );
            }
        }
    }
}

/// The commands `mm retrain` runs as stages, with the settings it sets itself in each (the
/// run's folders, cutoff and snapshot; also every flag of `mm retrain` itself): a config
/// file's value for one of those in a stage's table is not read, and a warning says so. Each
/// stage: its command, a placeholder for what the command requires and the run supplies
/// (`mm ingest`'s inputs), and the settings the run sets itself.
const STAGES: [(&str, &[&str], &[&str]); 3] = [
    ("ingest", &["retrain-inputs"], &[]),
    ("fit skill", &[], &["out", "until", "as-of"]),
    (
        "fit churn",
        &[],
        &["out", "until", "as-of", "skill", "no-skill", "score-from"],
    ),
];

/// What `mm retrain` runs its stages with: each stage's command resolved against the config
/// file as if it were run on its own (the top-level keys, `[ingest]`, `[fit]`, `[fit.skill]`,
/// `[fit.churn]`; flags given to `mm retrain` are its own), so a setting in the file means the
/// same whether the command runs alone or inside the chain.
#[derive(Debug, Default)]
pub struct StageArgs {
    pub ingest: Option<crate::args::IngestArgs>,
    pub skill: Option<crate::args::FitSkillArgs>,
    pub churn: Option<crate::args::FitChurnArgs>,
    /// `[fit.skill]`'s metric, when the file sets it.
    pub metric_from_file: bool,
    /// The settings read from the file, per stage (`fit churn: horizon, c-grid`).
    pub read: Vec<String>,
    /// The settings the file gives a stage that the run sets itself.
    pub ignored: Vec<String>,
}

/// Resolves `mm retrain`'s stages against the config file `file` (see [`StageArgs`]).
///
/// # Errors
/// A stage's settings in the file fail its own flags' checks (named as the stage's flags).
pub fn stage_args(file: &Path) -> Result<StageArgs> {
    use crate::args::{Cmd, FitCmd};
    let mut out = StageArgs::default();
    let root = Cli::command();
    let mut own: HashSet<String> = HashSet::new();
    if let Some(c) = root.find_subcommand("retrain") {
        all_longs(c, &mut own);
    }
    for a in root.get_arguments() {
        own.extend(a.get_long().map(str::to_string));
    }
    let table = read_table(file)?;
    for (name, required, set_by_run) in STAGES {
        let mut argv: Vec<OsString> = vec!["mm".into(), "--config".into(), file.into()];
        argv.extend(
            name.split(' ')
                .chain(required.iter().copied())
                .map(OsString::from),
        );
        let r = match resolve(&argv, false) {
            Ok(r) => r,
            Err(Failure::Config(e)) => return Err(e),
            Err(Failure::Clap(e)) => {
                return Err(mm_retrain::RetrainError::Input(format!(
                    "{}: the settings of `mm {}` in it (mm retrain runs it): {}",
                    file.display(),
                    name,
                    e.to_string()
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .trim_start_matches("error: ")
                ))
                .into());
            }
        };
        let from_file: Vec<&str> = r
            .settings
            .iter()
            .filter(|s| s.source.starts_with("config"))
            .map(|s| s.key.as_str())
            .collect();
        // Keys mm retrain has itself (`lake`, `mode`, the global flags) are its own: at the top
        // level they are the same value for both, in a stage's table they are not read (and
        // said so). The skill fit's metric applies when mm retrain is not given one.
        let words: Vec<String> = name.split(' ').map(str::to_string).collect();
        let depth = applicable(&table, &words);
        let (read, ignored): (Vec<&str>, Vec<&str>) = from_file
            .iter()
            .filter(|k| {
                !own.contains(**k) || **k == "metric" || depth.get(**k).is_some_and(|d| d.1 > 0)
            })
            .partition(|k| !set_by_run.contains(k) && (!own.contains(**k) || **k == "metric"));
        if !read.is_empty() {
            out.read.push(format!("{name}: {}", read.join(", ")));
        }
        if !ignored.is_empty() {
            out.ignored.push(format!("{name}: {}", ignored.join(", ")));
        }
        match r.cli.map(|c| c.cmd) {
            Some(Cmd::Ingest(a)) => out.ingest = Some(a),
            Some(Cmd::Fit(FitCmd::Skill(a))) => {
                out.metric_from_file = from_file.contains(&"metric");
                out.skill = Some(a);
            }
            Some(Cmd::Fit(FitCmd::Churn(mut a))) => {
                // The run gives the churn fit its own skill fit.
                a.skill = None;
                a.no_skill = true;
                out.churn = Some(a);
            }
            _ => {}
        }
    }
    Ok(out)
}

/// `mm config show [COMMAND…]`: the settings the command would run with, and their sources.
pub fn show(argv_of_command: &[String], config: Option<&Path>, json: bool) -> Result<()> {
    let mut argv: Vec<OsString> = vec!["mm".into()];
    if let Some(c) = config {
        argv.push("--config".into());
        argv.push(c.into());
    }
    argv.extend(argv_of_command.iter().map(OsString::from));
    let r = match resolve(&argv, true) {
        Ok(r) => r,
        Err(Failure::Config(e)) => return Err(e),
        Err(Failure::Clap(e)) => bail!("{e}"),
    };
    if json {
        let v = serde_json::json!({
            "config_file": r.file,
            "command": r.command,
            "settings": r.settings,
        });
        mm_run::outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    match &r.file {
        Some(f) => mm_run::outln!("# config file: {}", f.display()),
        None => mm_run::outln!("# config file: none ({DEFAULT_FILE} not in the working directory)"),
    }
    if r.command.is_empty() {
        mm_run::outln!("# mm: the global flags (name a command to see its settings)");
    } else {
        mm_run::outln!("# mm {}", r.command.join(" "));
    }
    let width = r
        .settings
        .iter()
        .map(|s| s.key.len() + s.value.as_deref().map_or(0, str::len) + 5)
        .max()
        .unwrap_or(0);
    for s in &r.settings {
        let Some(v) = s.value.as_deref() else {
            mm_run::outln!("# {} is unset", s.key);
            continue;
        };
        let scalar = |v: &str| {
            if v.parse::<f64>().is_ok() || v == "true" || v == "false" {
                v.to_string()
            } else {
                format!("{v:?}")
            }
        };
        // A list flag (`--pool-sizes 100,200`) is shown as a TOML array.
        let value = if s.list {
            let items: Vec<String> = v.split(',').map(scalar).collect();
            format!("[{}]", items.join(", "))
        } else {
            scalar(v)
        };
        let line = format!("{} = {value}", s.key);
        mm_run::outln!("{line:<width$}  # {}", s.source);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn argv(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn setting<'a>(r: &'a Resolved, key: &str) -> &'a Setting {
        r.settings.iter().find(|s| s.key == key).unwrap()
    }

    #[test]
    fn flag_beats_file_beats_default() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        std::fs::write(
            &f,
            "lake = \"from-file/lake\"\nrounds = 7\n[retrain]\nholdout_days = 3\npool-sizes = [50, 60]\n[fit.churn]\nrebuild = true\n",
        )
        .unwrap();
        let c = f.to_str().unwrap();
        let r = resolve(
            &argv(&["mm", "--config", c, "retrain", "--rounds", "9"]),
            false,
        )
        .unwrap();
        let Some(crate::args::Cmd::Retrain(a)) = r.cli.as_ref().map(|c| &c.cmd) else {
            panic!("retrain")
        };
        assert_eq!(a.lake, PathBuf::from("from-file/lake"));
        assert_eq!(a.rounds, 9, "the flag wins");
        assert_eq!(a.holdout_days, 3, "the command's table applies");
        assert_eq!(a.pool_sizes, vec![50, 60]);
        assert_eq!(setting(&r, "rounds").source, "command line");
        assert!(setting(&r, "lake").source.starts_with("config "));
        assert_eq!(setting(&r, "margin").source, "default");
        // [fit.churn] applies to fit churn only, a boolean flag set from the file.
        let r = resolve(&argv(&["mm", "--config", c, "fit", "churn"]), false).unwrap();
        let Some(crate::args::Cmd::Fit(crate::args::FitCmd::Churn(a))) =
            r.cli.as_ref().map(|c| &c.cmd)
        else {
            panic!("fit churn")
        };
        assert!(a.rebuild);
        assert_eq!(a.lake, PathBuf::from("from-file/lake"));
    }

    #[test]
    fn unknown_keys_and_sections_are_refused_with_the_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        for (body, says) in [
            ("lakes = 1\n", "unknown setting `lakes`"),
            ("[retrian]\nlake = \"x\"\n", "[retrian] names no command"),
            (
                "[retrain]\nchunk-rows = 5\n",
                "unknown setting `chunk-rows`",
            ),
            ("lake = [\n", "c.toml"),
        ] {
            std::fs::write(&f, body).unwrap();
            let Err(Failure::Config(e)) = resolve(
                &argv(&["mm", "--config", f.to_str().unwrap(), "retrain"]),
                false,
            ) else {
                panic!("{body} should be refused")
            };
            let msg = format!("{e:#}");
            assert!(msg.contains(says), "{msg}");
            assert!(msg.contains("c.toml"), "{msg}");
        }
    }

    #[test]
    fn a_bad_value_from_the_file_is_checked_as_the_flag_would_be() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        std::fs::write(&f, "[retrain]\nrounds = \"many\"\n").unwrap();
        assert!(matches!(
            resolve(
                &argv(&["mm", "--config", f.to_str().unwrap(), "retrain"]),
                false
            ),
            Err(Failure::Clap(_))
        ));
    }
}
