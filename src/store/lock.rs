//! The lock on `.loopx/lock` that serialises mutations, with a timeout.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

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
    let fast = if exclusive {
        file.try_lock()
    } else {
        file.try_lock_shared()
    };
    match fast {
        Ok(()) => return Ok(Guard { _file: file }),
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(e)) => return Err(Error::io(path, &e)),
    }
    // Wait in a blocking flock on a clone of the descriptor, so the kernel wakes us the
    // moment the lock is free. On timeout the waiting thread is abandoned: when it gets the
    // lock it drops its descriptor at once, which releases it (flock belongs to the open file).
    let waiter = file.try_clone().map_err(|e| Error::io(path, &e))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = if exclusive {
            waiter.lock()
        } else {
            waiter.lock_shared()
        };
        let _ = tx.send(r);
    });
    match rx.recv_timeout(timeout()) {
        Ok(Ok(())) => Ok(Guard { _file: file }),
        Ok(Err(e)) => Err(Error::io(path, &e)),
        Err(_) => Err(Error::new(
            Code::Busy,
            format!("{} is held by another loopx process", path.display()),
        )
        .hint("try again, or raise LOOPX_LOCK_TIMEOUT (seconds)")),
    }
}
