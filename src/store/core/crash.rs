//! Crash points for tests: `LOOPX_CRASH_AT=N` (debug builds only) kills this process with
//! SIGKILL at the N-th point a commit reaches, so a test can stop it between any two writes.

#[cfg(debug_assertions)]
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(debug_assertions)]
static REACHED: AtomicU64 = AtomicU64::new(0);

/// True when this is the point `LOOPX_CRASH_AT` names; always false in release builds.
fn due() -> bool {
    #[cfg(debug_assertions)]
    {
        static AT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let at = AT.get_or_init(|| {
            std::env::var("LOOPX_CRASH_AT")
                .ok()
                .and_then(|v| v.parse().ok())
        });
        if let Some(n) = at {
            return REACHED.fetch_add(1, Ordering::SeqCst) + 1 == *n;
        }
    }
    false
}

/// Dies here (SIGKILL) when this is the crash point a test asked for.
pub fn point() {
    point_then(|| {});
}

/// Like `point`, running `before` first (a test's torn write).
pub fn point_then(before: impl FnOnce()) {
    if due() {
        before();
        // SAFETY: sends a signal to this process; no memory is passed.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
        // SIGKILL cannot be caught; wait for it to land.
        loop {
            std::thread::park();
        }
    }
}
