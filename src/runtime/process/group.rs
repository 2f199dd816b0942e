//! A command's process group: waiting for its leader without reaping it (so the group's id is
//! not reused), the group's stop at the timeout, and SIGINT and SIGTERM passed on to it.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};

use super::Limits;
use crate::kernel::{Code, Error, Result};

/// Blocks until `pid` has exited, without reaping it.
pub(super) fn wait_exited(pid: i32) -> Result<()> {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid writes only into `info`; WNOWAIT leaves the child to be reaped later.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(Error::new(
                Code::Io,
                format!("waiting for the command: {e}"),
            ));
        }
    }
}

/// The timeout's thread: at `limits.timeout` it sets `flag` and sends the group SIGTERM, then
/// SIGKILL after the grace; the command's exit (`exited` closing) ends it.
pub(super) fn timer(
    pid: i32,
    limits: Limits,
    flag: Arc<AtomicBool>,
    exited: mpsc::Receiver<()>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if exited.recv_timeout(limits.timeout) != Err(mpsc::RecvTimeoutError::Timeout) {
            return;
        }
        flag.store(true, Ordering::SeqCst);
        signal_group(pid, libc::SIGTERM);
        if exited.recv_timeout(limits.grace) == Err(mpsc::RecvTimeoutError::Timeout) {
            signal_group(pid, libc::SIGKILL);
        }
    })
}

/// Sends `sig` to the process group `pgid`.
pub(super) fn signal_group(pgid: i32, sig: i32) {
    if pgid > 0 {
        // SAFETY: kill has no memory effects; a group that is gone gives ESRCH.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}

/// The process group of the command SIGINT and SIGTERM are forwarded to (0: none).
static CHILD_GROUP: AtomicI32 = AtomicI32::new(0);

/// SIGINT and SIGTERM are forwarded to the process group `pgid` from now on (0: to none).
pub(super) fn forward_to(pgid: i32) {
    CHILD_GROUP.store(pgid, Ordering::SeqCst);
}
/// The last SIGINT or SIGTERM this process got (0: none).
pub(super) static SIGNALLED: AtomicI32 = AtomicI32::new(0);
/// How many SIGINT and SIGTERM this process got.
static SIGNALS: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only async-signal-safe work here: atomics and kill.
    SIGNALS.fetch_add(1, Ordering::SeqCst);
    let again = SIGNALLED.swap(sig, Ordering::SeqCst) != 0;
    let group = CHILD_GROUP.load(Ordering::SeqCst);
    if group > 0 {
        let sig = if again { libc::SIGKILL } else { sig };
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(-group, sig);
        }
    }
}

/// From now on, SIGINT and SIGTERM to this process go to the running command's group (a second
/// one as SIGKILL), and are remembered for [`signalled`] instead of ending this process.
pub fn forward_signals() {
    // SAFETY: a zeroed sigaction with a handler, an empty mask and SA_RESTART is valid.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}

/// How many SIGINT and SIGTERM this process got since [`forward_signals`].
pub fn signal_count() -> usize {
    SIGNALS.load(Ordering::SeqCst)
}

/// The signal (SIGINT or SIGTERM) this process got since [`forward_signals`], if any.
pub fn signalled() -> Option<i32> {
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}
