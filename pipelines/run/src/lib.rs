//! # mm-run: what every job's run shares
//!
//! A run's id ([`new_run_id`]), its process figures for the run reports and benches
//! ([`peak_rss_bytes`], [`cpu_seconds`]) and the progress of its long stages as log events
//! ([`progress::Meter`]), and its printing to a standard output whose reader may close it early
//! ([`stdout`], [`outln!`]). Standard library, `chrono` and `tracing` only, so any crate can use
//! it.

pub mod progress;
pub mod stdout;

/// A run id that sorts by time and is unique across processes and machines in practice:
/// `YYYYMMDDTHHMMSSmmmZ-<pid><nanos>` (letters, digits and `-` only, so it can name files and
/// partitions).
#[must_use]
pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!(
        "{}-{:05x}{:05x}",
        now.format("%Y%m%dT%H%M%S%3fZ"),
        std::process::id() & 0xfffff,
        now.timestamp_subsec_nanos() & 0xfffff
    )
}

/// The peak resident memory of this process so far (Linux `VmHWM`), for run reports; `None`
/// where `/proc` is not available.
#[must_use]
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The CPU time this process has used so far, user and system, all threads (Linux
/// `/proc/self/stat`), for run reports; `None` where `/proc` is not available.
#[must_use]
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat_cpu(&stat).map(|(_, s)| s)
}

/// The command name and the CPU seconds (user and system) of a process's or a thread's
/// `/proc/.../stat` line (`/proc/PID/task/TID/stat` for one thread); `None` for a line not in
/// that layout.
#[must_use]
pub fn stat_cpu(stat: &str) -> Option<(&str, f64)> {
    // The command name may hold spaces and parentheses: it runs from the first `(` to the last
    // `)`. utime and stime are fields 14 and 15.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    Some((stat.get(open + 1..close)?, stat_seconds(stat, 14)?))
}

/// The CPU time, user and system, of this process's children that have ended and been waited
/// for (Linux `/proc/self/stat`): a bench that runs its contenders one at a time reads it before
/// and after each. `None` where `/proc` is not available.
#[must_use]
pub fn children_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    stat_children_cpu(&stat)
}

/// The CPU seconds (user and system) of the waited-for children in a process's `/proc/.../stat`
/// line: cutime and cstime, fields 16 and 17.
#[must_use]
pub fn stat_children_cpu(stat: &str) -> Option<f64> {
    stat_seconds(stat, 16)
}

/// Fields `field` and `field + 1` (numbered from 1, as in proc(5)) of a stat line, summed: ticks
/// of USER_HZ (100 a second, the kernel's fixed unit for these files), in seconds. The fields
/// are counted after the command name, whose end is the line's last `)`; the state is field 3.
fn stat_seconds(stat: &str, field: usize) -> Option<f64> {
    let close = stat.rfind(')')?;
    let f: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let at = |n: usize| f.get(n.checked_sub(3)?)?.parse::<u64>().ok();
    Some((at(field)? + at(field + 1)?) as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::{stat_children_cpu, stat_cpu};

    /// A stat line written by hand in proc(5)'s layout: the name (here with a space and a
    /// parenthesis) between the first `(` and the last `)`, utime 250 and stime 50 ticks.
    #[test]
    fn stat_cpu_by_hand() {
        let line = "4242 (mm serve (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 \
                    123 456 789";
        let (name, s) = stat_cpu(line).unwrap();
        assert_eq!(name, "mm serve (x)");
        assert!((s - 3.0).abs() < 1e-12, "{s}");
        assert_eq!(stat_cpu("4242 (short) S 1 2"), None);
        assert_eq!(stat_cpu(""), None);
    }

    /// The same layout with the children's times, cutime 1234 and cstime 66 ticks, after the
    /// process's own.
    #[test]
    fn stat_children_cpu_by_hand() {
        let line = "4242 (mm (bench)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 1234 66 20 0 \
                    9 0 123 456 789";
        let s = stat_children_cpu(line).unwrap();
        assert!((s - 13.0).abs() < 1e-12, "{s}");
        assert_eq!(
            stat_children_cpu("4242 (short) S 1 2 3 4 5 6 7 8 9 10 11 12 13"),
            None
        );
    }
}
