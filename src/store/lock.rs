//! The lock on `.loopx/lock` that serialises mutations, with a timeout; and where locks cannot be trusted.

use std::fs::{self, File, OpenOptions, TryLockError};
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
    // Never through a link (a planted one would make loopx create a file outside the
    // project), and never blocking on a FIFO; anything but a regular file is refused.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .and_then(|f| crate::store::atomic::check_regular(&f).map(|()| f))
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => crate::store::parse::symlink_error(path),
                _ => crate::store::parse::io_error(path, &e),
            })?
    };
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

/// Network file systems: flock may be emulated or local only, and file events may not arrive.
pub const NETWORK_FS: &[&str] = &[
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "9p",
    "fuse.sshfs",
    "afs",
    "ceph",
    "glusterfs",
    "lustre",
    "drvfs",
];

/// The network file system `path` is on, if any (from `/proc/self/mounts`).
pub fn network_fs(path: &Path) -> Option<String> {
    let path = path.canonicalize().ok()?;
    let mounts = fs::read_to_string("/proc/self/mounts").ok()?;
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (_, Some(mnt), Some(ty)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let mnt = mnt.replace("\\040", " ");
        if path.starts_with(&mnt) && best.as_ref().is_none_or(|(l, _)| mnt.len() > *l) {
            best = Some((mnt.len(), ty.to_string()));
        }
    }
    best.map(|(_, t)| t)
        .filter(|t| NETWORK_FS.contains(&t.as_str()))
}
