//! Standard output for a command whose reader may go away: `mm evaluate ... | head -1` closes
//! the pipe after one line. The job goes on to its end (its results are in its files, not in
//! what it prints), what it prints after that is dropped, and it exits as it would have. Any
//! other failure to write (a full disk under a redirection) is kept for [`write_error`], and
//! the command fails with it at its end.
//!
//! Print with [`crate::outln!`] and [`crate::out!`], as with `println!` and `print!` (which
//! panic when the reader has gone).

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write has failed: nothing more is written.
static STOPPED: AtomicBool = AtomicBool::new(false);
/// The first failure that was not a closed pipe.
static ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Writes `args` to standard output and flushes it, unless an earlier write failed.
pub fn write_out(args: std::fmt::Arguments<'_>) {
    write_with(|out| out.write_fmt(args));
}

/// Writes `bytes` as they are (a generated script), as [`write_out`] does.
pub fn write_bytes(bytes: &[u8]) {
    write_with(|out| out.write_all(bytes));
}

fn write_with(write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>) {
    if STOPPED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = write(&mut out).and_then(|()| out.flush()) {
        STOPPED.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe
            && let Ok(mut slot) = ERROR.lock()
        {
            slot.get_or_insert_with(|| e.to_string());
        }
    }
}

/// The first failure to write standard output other than a closed pipe, if any.
#[must_use]
pub fn write_error() -> Option<String> {
    ERROR.lock().ok().and_then(|e| e.clone())
}

/// `println!` through [`write_out`].
#[macro_export]
macro_rules! outln {
    () => {
        $crate::stdout::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`write_out`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdout::write_out(format_args!($($arg)*))
    };
}
