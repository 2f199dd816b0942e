//! The floor of a load that sees every hand edit without a process watching: one `fstatat` per
//! todo file, by name, as the load does, and nothing else. Prints the median of 50 passes over
//! each directory given, in ms, on one thread and on two.
//!
//! usage: cargo bench --bench stat_floor -- DIR/.loopx/todos...
//! With `--once`, one pass on one thread and no timing: time the process itself (a fresh
//! process meets the files' metadata cold, as a command does; repeated passes meet it warm).
//! `--list-only` lists without stating: the difference of the two is the stats alone. `--two`
//! makes the one pass on two threads.

use std::ffi::CString;
use std::os::fd::AsRawFd as _;
use std::time::Instant;

fn main() {
    let once = std::env::args().any(|a| a == "--once");
    let list_only = std::env::args().any(|a| a == "--list-only");
    let two = std::env::args().any(|a| a == "--two");
    for dir in std::env::args().skip(1).filter(|a| !a.starts_with("--")) {
        let names: Vec<CString> = std::fs::read_dir(&dir)
            .expect("a directory")
            .filter_map(|e| e.ok())
            .map(|e| CString::new(e.file_name().into_encoded_bytes()).expect("a name"))
            .collect();
        let d = std::fs::File::open(&dir).expect("a directory");
        if list_only {
            // The same process without the stats: what `--once` costs beyond them.
            std::hint::black_box(&names);
            continue;
        }
        if once {
            // One pass in a fresh process, as a command makes it: time the process.
            std::hint::black_box(if two {
                halves(&d, &names)
            } else {
                stat_all(&d, &names)
            });
            continue;
        }
        let one = median(|| stat_all(&d, &names));
        let both = median(|| halves(&d, &names));
        println!(
            "{dir}: {} files, one thread {one:.2} ms, two threads {both:.2} ms",
            names.len()
        );
    }
}

/// Stats every name, half of them on a second thread.
fn halves(d: &std::fs::File, names: &[CString]) -> usize {
    let (a, b) = names.split_at(names.len() / 2);
    std::thread::scope(|s| {
        let h = s.spawn(|| stat_all(d, b));
        stat_all(d, a) + h.join().unwrap_or(0)
    })
}

/// Stats every name; gives how many were regular files.
fn stat_all(d: &std::fs::File, names: &[CString]) -> usize {
    let mut files = 0;
    for n in names {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `d` is an open directory, `n` is NUL-terminated, `st` is read only on success.
        let rc = unsafe {
            libc::fstatat(
                d.as_raw_fd(),
                n.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        // SAFETY: fstatat returned 0, so it filled `st`.
        if rc == 0 && unsafe { st.assume_init() }.st_mode & libc::S_IFMT == libc::S_IFREG {
            files += 1;
        }
    }
    files
}

/// The median of 50 timed passes, after 5 untimed ones, in ms.
fn median(mut f: impl FnMut() -> usize) -> f64 {
    let mut ms: Vec<f64> = (0..55)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1000.0
        })
        .skip(5)
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}
