//! What is generated from the flags' own definitions: shell completions (`mm completions`),
//! and, in the tests below, the man pages and the CLI reference page of the guide
//! (`docs/reference/`, checked against the code; `MM_BLESS=1 cargo test -p mm-cli reference`
//! writes them again).

use std::io::Write;

use clap::CommandFactory;

use crate::args::Cli;

/// Writes the completion script of `shell` for `mm`.
pub fn completions(shell: clap_complete::Shell, out: &mut impl Write) {
    clap_complete::generate(shell, &mut Cli::command(), "mm", out);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use super::*;

    /// The CLI reference page: every command, its flags, their defaults and help, in Markdown.
    #[must_use]
    pub fn markdown() -> String {
        let opts = clap_markdown::MarkdownOptions::new()
            .title("Command-line reference".to_string())
            .show_footer(false)
            .show_table_of_contents(true);
        clap_markdown::help_markdown_custom::<Cli>(&opts)
    }

    /// The man pages: `mm.1`, then one per subcommand (`mm-fit-churn.1`), as `(file name, page)`.
    ///
    /// # Errors
    /// Rendering failed (an I/O error of the in-memory buffer, which does not happen).
    pub fn man_pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut root = Cli::command();
        root.build();
        pages(&root, &mut out)?;
        Ok(out)
    }

    /// A command's page (titled by its display name, `mm-fit-churn`, set by `build`), then its
    /// subcommands'.
    fn pages(cmd: &clap::Command, out: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
        let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut page)?;
        out.push((format!("{name}.1"), page));
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            if sub.get_name() != "help" {
                pages(sub, out)?;
            }
        }
        Ok(())
    }

    fn reference_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference")
    }

    fn bless() -> bool {
        std::env::var_os("MM_BLESS").is_some_and(|v| v == "1")
    }

    /// The committed reference page is the one the flags generate: a flag added, renamed or
    /// re-documented without regenerating fails here.
    #[test]
    fn reference_page_matches_the_flags() {
        let path = reference_dir().join("cli.md");
        let want = markdown();
        if bless() {
            std::fs::create_dir_all(reference_dir()).unwrap();
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} differs from the flags' definitions: run `MM_BLESS=1 cargo test -p mm-cli reference` and commit the result",
            path.display()
        );
    }

    /// The committed man pages are the ones the flags generate, one per command, and no
    /// other page lies in the folder.
    #[test]
    fn man_pages_match_the_flags() {
        let dir = reference_dir().join("man");
        let want: BTreeMap<String, Vec<u8>> = man_pages().unwrap().into_iter().collect();
        if bless() {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for (name, page) in &want {
                std::fs::write(dir.join(name), page).unwrap();
            }
        }
        let have: BTreeMap<String, Vec<u8>> = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        std::fs::read(e.path()).unwrap(),
                    )
                })
                .collect()
            })
            .unwrap_or_default();
        let stale: Vec<&String> = want
            .keys()
            .filter(|k| have.get(*k) != want.get(*k))
            .chain(have.keys().filter(|k| !want.contains_key(*k)))
            .collect();
        assert!(
            stale.is_empty(),
            "man pages in {} differ from the flags' definitions ({stale:?}): run `MM_BLESS=1 cargo test -p mm-cli reference` and commit the result",
            dir.display()
        );
        assert!(want.contains_key("mm.1") && want.contains_key("mm-fit-churn.1"));
    }

    /// Every command and every flag says what it does: `--help`, the man pages and the
    /// reference page show nothing undocumented.
    #[test]
    fn every_command_and_flag_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                let builtin = matches!(
                    a.get_action(),
                    clap::ArgAction::Help
                        | clap::ArgAction::HelpShort
                        | clap::ArgAction::HelpLong
                        | clap::ArgAction::Version
                );
                if a.is_hide_set() || builtin {
                    continue;
                }
                if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {id}"));
                }
            }
            for s in cmd.get_subcommands() {
                if s.is_hide_set() || s.get_name() == "help" {
                    continue;
                }
                let p = format!("{path} {}", s.get_name());
                if s.get_about().is_none() {
                    missing.push(p.clone());
                }
                walk(s, &p, missing);
            }
        }
        let mut root = Cli::command();
        root.build();
        let mut missing = Vec::new();
        walk(&root, "mm", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    /// The old spellings clap accepts (aliases, which `config::warn_renamed` words) are exactly
    /// the renames the guide lists: no alias added or lost unnoticed.
    #[test]
    fn the_aliases_are_the_documented_renames() {
        fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String, String)>) {
            for a in cmd.get_arguments() {
                for old in a.get_all_aliases().unwrap_or_default() {
                    let new = a.get_long().unwrap_or_default().to_string();
                    out.push((path.trim().to_string(), old.to_string(), new));
                }
            }
            for s in cmd.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), out);
            }
        }
        let mut found = Vec::new();
        walk(&Cli::command(), "", &mut found);
        found.sort();
        let mut documented: Vec<(String, String, String)> = [
            ("fit skill", "margin", "metric-margin"),
            ("lake show", "history", "commits"),
            ("lake convert", "history", "commits"),
            ("lake vacuum", "full", "uncommitted"),
            ("ingest", "mode", "default-mode"),
            ("pair", "players", "pool"),
        ]
        .iter()
        .map(|(c, o, n)| ((*c).to_string(), (*o).to_string(), (*n).to_string()))
        .collect();
        documented.sort();
        assert_eq!(found, documented);
    }

    /// One default per concept: a flag name that several commands take has the same default in
    /// each, except the names listed here, which mean something else per command (issue 57's
    /// rule; a new difference fails here until it is made the same or listed with its reason).
    #[test]
    fn a_flag_name_has_one_default_across_commands() {
        // Flag, and why its default may differ by command.
        const DIFFERENT: [(&str, &str); 12] = [
            (
                "lake",
                "`mm serve` and `mm bench skill` have none: a lake there is optional",
            ),
            (
                "mode",
                "a bench's mode is its workload; elsewhere the lake's modes",
            ),
            ("out", "each command's own output folder"),
            ("work", "each command's own scratch folder"),
            (
                "players",
                "the size of each bench's or the simulator's population",
            ),
            ("rows", "each bench's workload"),
            ("reps", "each bench's repetitions"),
            (
                "days",
                "the simulator's world against the skill bench's lake",
            ),
            ("seed", "different draws: a world, a pool, a generated file"),
            (
                "skill",
                "the same folder: `fit churn` looks for it there and says when absent",
            ),
            (
                "metric",
                "`mm retrain` chooses it by the mode's columns when not given",
            ),
            (
                "tick-s",
                "the simulator's own matchmaker against the replay of the held-out day",
            ),
        ];
        fn walk(
            cmd: &clap::Command,
            path: &str,
            out: &mut BTreeMap<String, Vec<(String, String)>>,
        ) {
            for a in cmd.get_arguments() {
                let Some(long) = a.get_long() else { continue };
                let default: Vec<String> = a
                    .get_default_values()
                    .iter()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect();
                out.entry(long.to_string())
                    .or_default()
                    .push((path.trim().to_string(), default.join(",")));
            }
            for s in cmd.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), out);
            }
        }
        let mut flags = BTreeMap::new();
        walk(&Cli::command(), "", &mut flags);
        let mut differ = Vec::new();
        for (long, uses) in &flags {
            let first = &uses[0].1;
            if uses.iter().any(|(_, d)| d != first) && !DIFFERENT.iter().any(|(f, _)| f == long) {
                differ.push(format!("--{long}: {uses:?}"));
            }
        }
        assert!(differ.is_empty(), "one flag, several defaults: {differ:#?}");
        // Every listed name still differs somewhere (a list that outlives its reasons hides the
        // next difference).
        for (f, why) in DIFFERENT {
            let uses = &flags[f];
            assert!(
                uses.iter().any(|(_, d)| *d != uses[0].1),
                "--{f} has one default now; drop it from the list ({why})"
            );
        }
    }

    /// The bash script parses (`bash -n`) and completes the commands and a command's flags.
    #[test]
    fn bash_completions_parse_and_name_the_commands() {
        let mut script = Vec::new();
        completions(clap_complete::Shell::Bash, &mut script);
        let text = String::from_utf8(script).unwrap();
        for word in ["retrain", "serve", "--holdout-days", "--flush-s"] {
            assert!(text.contains(word), "{word} not in the bash completions");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mm.bash");
        std::fs::write(&path, &text).unwrap();
        let status = std::process::Command::new("bash")
            .arg("-n")
            .arg(&path)
            .status()
            .unwrap();
        assert!(status.success(), "bash -n refused the completion script");
        for shell in [clap_complete::Shell::Zsh, clap_complete::Shell::Fish] {
            let mut s = Vec::new();
            completions(shell, &mut s);
            assert!(String::from_utf8(s).unwrap().contains("holdout-days"));
        }
    }
}
