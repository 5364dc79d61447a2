//! The progress bar of long runs: bytes of the current file, on stderr, only on a terminal.

use std::io::IsTerminal;
use std::path::Path;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug)]
pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    pub fn new(quiet: bool) -> Bar {
        let show = !quiet && std::io::stderr().is_terminal();
        let bar = show.then(|| {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{msg:40!} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b
        });
        Bar { bar }
    }

    /// Rounds of an evaluation done, out of `total`.
    pub fn rounds(&self, done: u64, total: u64) {
        if let Some(b) = &self.bar {
            if b.length() != Some(total) {
                b.set_style(
                    ProgressStyle::with_template(
                        "evaluating [{bar:30}] {pos}/{len} rounds eta {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                b.set_length(total);
            }
            b.set_position(done);
        }
    }

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl mm_ingest::Progress for Bar {
    fn file(&self, path: &Path, bytes: u64) {
        if let Some(b) = &self.bar {
            b.set_message(path.display().to_string());
            b.set_length(bytes);
            b.set_position(0);
        }
    }
    fn advance(&self, bytes: u64) {
        if let Some(b) = &self.bar {
            b.inc(bytes);
        }
    }
    fn stage(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
    }
}
