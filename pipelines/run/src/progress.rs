//! Progress of long stages as log events, for operators who cannot see a terminal.
//!
//! A [`Meter`] counts work done (rows, bytes, days, rounds) and, at most every few seconds,
//! emits one `info` event with the count, the total when known, the rate and the estimated
//! time left. Under a scheduler these lines are how a slow run is told from a hung one. The
//! interval is 5 s, or `MM_PROGRESS_MS` milliseconds (tests set it to 0 to see every update).
//! A meter reports inside the span it was created in, so a report made on a worker thread
//! still carries the run id and the stage.

use std::time::{Duration, Instant};

/// Counts one stage's work and reports it every few seconds.
#[derive(Debug)]
pub struct Meter {
    task: &'static str,
    unit: &'static str,
    total: Option<u64>,
    done: u64,
    start: Instant,
    last: Instant,
    every: Duration,
    /// The span the meter was made in: reports from worker threads carry its fields too.
    span: tracing::Span,
}

fn interval() -> Duration {
    std::env::var("MM_PROGRESS_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(5), Duration::from_millis)
}

impl Meter {
    /// A meter of `task` (for example `"churn features: pass 1"`) counting `unit`s (`"rows"`)
    /// out of `total`, when known.
    #[must_use]
    pub fn new(task: &'static str, unit: &'static str, total: Option<u64>) -> Meter {
        let now = Instant::now();
        Meter {
            task,
            unit,
            total,
            done: 0,
            start: now,
            last: now,
            every: interval(),
            span: tracing::Span::current(),
        }
    }

    /// Sets the total (when it becomes known after the start).
    pub fn set_total(&mut self, total: u64) {
        self.total = Some(total);
    }

    /// Adds `n` units done; reports when the interval has passed since the last report.
    pub fn add(&mut self, n: u64) {
        self.done += n;
        if self.last.elapsed() >= self.every {
            self.last = Instant::now();
            self.report(false);
        }
    }

    /// Units done so far.
    #[must_use]
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Reports the final count (one event, whatever the interval).
    pub fn finish(&self) {
        self.report(true);
    }

    fn report(&self, finished: bool) {
        let secs = self.start.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            self.done as f64 / secs
        } else {
            0.0
        };
        let eta_s = self
            .total
            .filter(|_| rate > 0.0 && !finished)
            .map(|t| t.saturating_sub(self.done) as f64 / rate);
        let of = self.total.map(|t| format!(" of {t}")).unwrap_or_default();
        let left = eta_s
            .map(|e| format!(", {e:.0} s left"))
            .unwrap_or_default();
        let _entered = self.span.enter();
        tracing::info!(
            task = self.task,
            done = self.done,
            total = self.total,
            unit = self.unit,
            rate_per_s = rate.round(),
            eta_s = eta_s.map(f64::round),
            elapsed_s = (secs * 10.0).round() / 10.0,
            finished,
            "{}: {}{} {}, {:.0} {}/s{}{}",
            self.task,
            self.done,
            of,
            self.unit,
            rate,
            self.unit,
            left,
            if finished { " (done)" } else { "" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_sets_the_total() {
        let mut m = Meter::new("t", "rows", None);
        m.add(3);
        m.add(4);
        m.set_total(10);
        assert_eq!(m.done(), 7);
        assert_eq!(m.total, Some(10));
        m.finish();
    }
}
