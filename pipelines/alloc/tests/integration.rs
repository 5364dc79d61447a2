//! The allocator as the `mm` binary installs it: this test binary's own global allocator.

use std::process::Command;

#[global_allocator]
static ALLOCATOR: mm_alloc::ByCommand = mm_alloc::ByCommand::new(b"serve");

/// Allocations of many sizes and alignments, grown, shrunk, zeroed and freed on other threads
/// than the ones that made them: whichever allocator was chosen, every block comes back intact.
fn exercise() {
    let handles: Vec<_> = (0..4_usize)
        .map(|t| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for i in 0..2_000_usize {
                    let n = (i * 37 + t) % 5_000 + 1;
                    let mut v: Vec<u64> = (0..n as u64).collect();
                    v.truncate(n / 2 + 1);
                    v.shrink_to_fit();
                    v.extend(0..n as u64);
                    let z = vec![0_u8; n * 3];
                    assert!(z.iter().all(|&b| b == 0));
                    out.push((v, Box::new([i as u8; 4096])));
                }
                out
            })
        })
        .collect();
    for (t, h) in handles.into_iter().enumerate() {
        let out = h.join().expect("thread");
        for (i, (v, page)) in out.iter().enumerate() {
            let n = (i * 37 + t) % 5_000 + 1;
            let want: Vec<u64> = (0..(n / 2 + 1) as u64).chain(0..n as u64).collect();
            assert_eq!(*v, want);
            assert!(page.iter().all(|&b| b == i as u8));
        }
    }
    #[repr(align(4096))]
    struct Aligned([u8; 8192]);
    let a = Box::new(Aligned([7; 8192]));
    assert_eq!(std::ptr::from_ref(&*a) as usize % 4096, 0);
    assert!(a.0.iter().all(|&b| b == 7));
}

/// Run by `chosen_by_command_line` in a child process: prints this process's choice.
#[test]
fn child_prints_choice() {
    exercise();
    println!("choice={:?}", ALLOCATOR.choice());
}

/// The same test binary run with and without the word `serve` on its command line: mimalloc
/// exactly when it is there, and the allocations work in both.
#[test]
fn chosen_by_command_line() {
    let exe = std::env::current_exe().expect("own path");
    let run = |extra: &[&str]| {
        let out = Command::new(&exe)
            .args([
                "--exact",
                "child_prints_choice",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .args(extra)
            .output()
            .expect("run the test binary");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // libtest prints the test's name and then its output on the same line.
        let at = text
            .find("choice=")
            .unwrap_or_else(|| panic!("no choice printed: {text}"));
        text[at + "choice=".len()..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect::<String>()
    };
    // libtest takes "serve" as a second name filter; no test is named that, so only the child
    // test runs, with "serve" on its process's command line.
    assert_eq!(run(&["serve"]), "Mimalloc");
    assert_eq!(run(&[]), "System");
    assert_eq!(run(&["observe"]), "System");
}
