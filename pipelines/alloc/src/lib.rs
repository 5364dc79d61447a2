//! The `mm` binary's global allocator: mimalloc in the service's process, the system's (glibc's)
//! in every other command, chosen once, at the process's first allocation, from its command line.
//!
//! Why two: under `mm serve`'s steady load of small allocations on many threads, glibc's
//! per-thread arenas kept freed memory resident (the process grew to 338 MiB over a 180-s bench
//! of reports while its live heap stayed near 100 MiB, heaptrack), and its flush thread cost
//! 148 ms of CPU a 1,000 matches against 89 to 119 ms on mimalloc (`mm bench serve --reports`,
//! one run against eight). The batch jobs allocate the other way: threads that parse allocate
//! the batches and other threads free them after writing. There mimalloc kept about 100 MiB
//! more resident than glibc (`mm ingest` of the 10M-row bench CSV peaked at 285 to 311 MiB with
//! it, 184 to 199 MiB with glibc, at the same speed), so the batch jobs use the system's.
//!
//! ```
//! #[global_allocator]
//! static ALLOCATOR: mm_alloc::ByCommand = mm_alloc::ByCommand::new(b"serve");
//!
//! fn main() {
//!     let v = vec![1_u8; 64];
//!     assert_eq!(v.len(), 64);
//!     // This doctest's command line does not name `serve`.
//!     assert_eq!(ALLOCATOR.choice(), mm_alloc::Choice::System);
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU8, Ordering};

use mimalloc::MiMalloc;

const UNDECIDED: u8 = 0;
const SYSTEM: u8 = 1;
const MIMALLOC: u8 = 2;

/// Which allocator a process uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// The system's allocator (`std::alloc::System`).
    System,
    /// mimalloc.
    Mimalloc,
}

/// A global allocator that is mimalloc when an argument of the process's command line (after
/// the program's name) equals `word`, and the system's allocator otherwise (also where the
/// command line cannot be read: no `/proc`).
///
/// The choice is made at the first allocation and never changes, so every block is freed by
/// the allocator that allocated it.
#[derive(Debug)]
pub struct ByCommand {
    word: &'static [u8],
    state: AtomicU8,
}

impl ByCommand {
    /// An allocator that is mimalloc for command lines naming `word`.
    #[must_use]
    pub const fn new(word: &'static [u8]) -> ByCommand {
        ByCommand {
            word,
            state: AtomicU8::new(UNDECIDED),
        }
    }

    /// The allocator this process uses (deciding it now if nothing was allocated yet).
    pub fn choice(&self) -> Choice {
        if self.state() == MIMALLOC {
            Choice::Mimalloc
        } else {
            Choice::System
        }
    }

    fn state(&self) -> u8 {
        let s = self.state.load(Ordering::Acquire);
        if s != UNDECIDED {
            return s;
        }
        let pick = if own_command_line_names(self.word) {
            MIMALLOC
        } else {
            SYSTEM
        };
        // Two threads allocating first at once: the first decision stands for both.
        match self
            .state
            .compare_exchange(UNDECIDED, pick, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => pick,
            Err(decided) => decided,
        }
    }
}

// SAFETY: every call goes to one of two sound global allocators, the same one for the whole
// life of the process (`state` is set once, before the first allocation returns, and never
// changes), so each block is freed, resized or zero-allocated by the allocator that made it,
// with the layout the caller passed, as `GlobalAlloc` requires. Deciding allocates nothing
// (a stack buffer and raw system calls), so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for ByCommand {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if self.state() == MIMALLOC {
            // SAFETY: the caller's layout has a non-zero size, as `GlobalAlloc::alloc` requires.
            unsafe { MiMalloc.alloc(layout) }
        } else {
            // SAFETY: as above.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if self.state() == MIMALLOC {
            // SAFETY: the caller's layout has a non-zero size.
            unsafe { MiMalloc.alloc_zeroed(layout) }
        } else {
            // SAFETY: as above.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if self.state() == MIMALLOC {
            // SAFETY: `ptr` came from this allocator's `alloc` with `layout`, and the choice
            // has not changed since, so mimalloc made it.
            unsafe { MiMalloc.dealloc(ptr, layout) }
        } else {
            // SAFETY: as above, the system's allocator made it.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if self.state() == MIMALLOC {
            // SAFETY: `ptr` was made by mimalloc with `layout` (the choice never changes); the
            // caller guarantees `new_size` is non-zero and fits `layout`'s alignment.
            unsafe { MiMalloc.realloc(ptr, layout, new_size) }
        } else {
            // SAFETY: as above, for the system's allocator.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}

/// Whether an argument after the program's name in a NUL-separated command line (the format of
/// `/proc/PID/cmdline`) equals `word`.
#[must_use]
pub fn names(cmdline: &[u8], word: &[u8]) -> bool {
    cmdline.split(|&b| b == 0).skip(1).any(|arg| arg == word)
}

/// Reads this process's command line into a stack buffer, without allocating. A command line
/// longer than the buffer is read in part: the subcommand comes early.
fn own_command_line_names(word: &[u8]) -> bool {
    let mut buf = [0_u8; 4096];
    let mut len = 0;
    let Ok(fd) = rustix::fs::open(
        c"/proc/self/cmdline",
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return false;
    };
    while len < buf.len() {
        match rustix::io::read(&fd, &mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
    names(&buf[..len], word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_looks_past_the_program_only() {
        // By hand: `mm serve --artifact a`, as /proc/PID/cmdline stores it.
        assert!(names(b"mm\0serve\0--artifact\0a\0", b"serve"));
        assert!(names(b"/usr/bin/mm\0--log-format\0json\0serve\0", b"serve"));
        assert!(!names(b"mm\0ingest\0serve.csv\0--lake\0l\0", b"serve"));
        assert!(
            !names(b"serve\0ingest\0", b"serve"),
            "the program's own name is not an argument"
        );
        assert!(!names(b"mm\0observe\0", b"serve"));
        assert!(!names(b"", b"serve"));
    }
}
