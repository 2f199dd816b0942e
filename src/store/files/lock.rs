//! The lock on `.loopx/lock` that serialises mutations, with a timeout; and where locks cannot be trusted.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use crate::kernel::limits;
use crate::kernel::{Code, Error, Result};

/// The lock timeout a `LOOPX_LOCK_TIMEOUT` value gives: seconds from 0 to 3600 (fractions
/// allowed); unset or empty is 10. Anything else is exit 2.
pub fn lock_timeout_from(value: Option<&str>) -> Result<Duration> {
    let max = limits::LOCK_TIMEOUT_MAX_S;
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(Duration::from_secs(limits::LOCK_TIMEOUT_DEFAULT_S));
    };
    match v.parse::<f64>() {
        Ok(s) if (0.0..=max as f64).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => {
            let shown: String = v.chars().take(40).collect();
            Err(Error::usage(format!(
                "LOOPX_LOCK_TIMEOUT must be a number of seconds from 0 to {max}, not `{shown}`"
            ))
            .hint("unset it for the default (10 seconds), or set it like LOOPX_LOCK_TIMEOUT=30"))
        }
    }
}

/// A held lock; released on drop (and by the OS if the process dies).
#[derive(Debug)]
pub struct Guard {
    _file: File,
}

/// Takes the lock, exclusive or shared, waiting up to `wait` (exit 8 `busy` after).
pub fn acquire(path: &Path, exclusive: bool, wait: Duration) -> Result<Guard> {
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
    match rx.recv_timeout(wait) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_timeouts_are_bounded() {
        assert_eq!(lock_timeout_from(None).unwrap(), Duration::from_secs(10));
        assert_eq!(
            lock_timeout_from(Some(" ")).unwrap(),
            Duration::from_secs(10)
        );
        assert_eq!(lock_timeout_from(Some("0")).unwrap(), Duration::ZERO);
        assert_eq!(lock_timeout_from(Some("-0")).unwrap(), Duration::ZERO);
        assert_eq!(
            lock_timeout_from(Some("2.5")).unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(
            lock_timeout_from(Some("3600")).unwrap(),
            Duration::from_secs(3600)
        );
        for bad in [
            "1e30",
            "3600.001",
            "-1",
            "NaN",
            "inf",
            "-inf",
            "ten",
            "1e308",
            "not UTF-8",
        ] {
            let e = lock_timeout_from(Some(bad)).unwrap_err();
            assert_eq!(e.code.exit_code(), 2, "{bad}");
            assert!(e.message.contains("0 to 3600"), "{}", e.message);
        }
    }
}
