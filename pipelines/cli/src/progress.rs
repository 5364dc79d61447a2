//! The progress of long runs: on a terminal a bar (bytes of the current file) on stderr;
//! otherwise, for schedulers, progress log events every few seconds
//! ([`mm_run::progress::Meter`]).

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mm_run::progress::Meter;

#[derive(Debug)]
pub struct Bar {
    bar: Option<ProgressBar>,
    /// When no bar is shown (and not quiet): bytes read, reported as log events.
    meter: Option<Mutex<Meter>>,
    span: tracing::Span,
}

impl Bar {
    pub fn new(quiet: bool) -> Bar {
        let show = !quiet && std::io::stderr().is_terminal();
        let meter =
            (!quiet && !show).then(|| Mutex::new(Meter::new("ingest: reading", "bytes", None)));
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
        Bar {
            bar,
            meter,
            span: tracing::Span::current(),
        }
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
        if let Some(m) = &self.meter
            && let Ok(m) = m.lock()
            && m.done() > 0
        {
            m.finish();
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
        if self.meter.is_some() {
            self.span.in_scope(|| {
                tracing::info!(file = %path.display(), bytes, "reading {}", path.display());
            });
        }
    }
    fn advance(&self, bytes: u64) {
        if let Some(b) = &self.bar {
            b.inc(bytes);
        }
        if let Some(m) = &self.meter
            && let Ok(mut m) = m.lock()
        {
            m.add(bytes);
        }
    }
    fn stage(&self, what: &str) {
        if let Some(b) = &self.bar {
            b.set_message(what.to_string());
        }
        if self.meter.is_some() {
            self.span.in_scope(|| tracing::info!("ingest: {what}"));
        }
    }
}
