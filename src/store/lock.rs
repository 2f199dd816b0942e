//! The lock on `.loopx/lock` that serialises mutations, with a timeout.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::kernel::{Code, Error, Result};

/// How long to wait for the lock: `LOOPX_LOCK_TIMEOUT` seconds, default 10.
pub fn timeout() -> Duration {
    std::env::var("LOOPX_LOCK_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(10))
}

/// A held lock; released on drop (and by the OS if the process dies).
#[derive(Debug)]
pub struct Guard {
    _file: File,
}

/// Takes the lock, exclusive or shared, waiting up to the timeout (exit 8 `busy` after).
pub fn acquire(path: &Path, exclusive: bool) -> Result<Guard> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(path, &e))?;
    let deadline = Instant::now() + timeout();
    let mut backoff = Duration::from_micros(200);
    loop {
        let r = if exclusive { file.try_lock() } else { file.try_lock_shared() };
        match r {
            Ok(()) => return Ok(Guard { _file: file }),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(Error::io(path, &e)),
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::new(
                Code::Busy,
                format!("{} is held by another loopx process", path.display()),
            )
            .hint("try again, or raise LOOPX_LOCK_TIMEOUT (seconds)"));
        }
        std::thread::sleep(backoff.min(deadline - now));
        backoff = (backoff * 2).min(Duration::from_millis(5));
    }
}
