//! The command's watch: the command dies with its runner, and so does the rest of its group.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::kernel::{Code, Error, Result};

/// The command is killed if this process dies first (a `kill -9`, the OOM killer), and so is
/// the rest of its group (see [`watch_runner`]): a turn never outlives its runner, whose lease
/// then lapses.
pub fn die_with_parent(cmd: &mut Command, watch: RawFd) {
    // SAFETY: getpid before the fork; in the child only prctl, getppid and what `watch_runner`
    // calls, all async-signal-safe.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died between the fork and the prctl.
            if libc::getppid() != parent {
                return Err(std::io::Error::other(
                    "loopx ended before the command started",
                ));
            }
            watch_runner(watch)
        });
    }
}

/// Leaves a watch in the command's group, before its program starts: a process (forked twice,
/// so it is no child of the command's) that blocks reading `watch`, a pipe whose write end only
/// the runner holds. End of file means the runner died without saying the command is over: the
/// watch kills its whole group. The runner writes one byte when the command ended, and the
/// watch leaves quietly.
///
/// # Safety
/// Only in a forked child before exec: it calls only async-signal-safe functions.
unsafe fn watch_runner(watch: RawFd) -> std::io::Result<()> {
    // SAFETY: fork, waitpid and _exit are async-signal-safe; the middle process exits at once,
    // and the command waits for it, so the watch is reparented and no child of the command.
    unsafe {
        match libc::fork() {
            -1 => return Err(std::io::Error::last_os_error()),
            0 => {
                if libc::fork() == 0 {
                    watch_and_kill(watch);
                }
                libc::_exit(0);
            }
            middle => {
                while libc::waitpid(middle, std::ptr::null_mut(), 0) == -1
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                }
            }
        }
    }
    Ok(())
}

/// The watch itself: every descriptor but `watch` closed (the command's pipes, and the one
/// `spawn` waits on), SIGINT and SIGTERM ignored (the group's SIGKILL still ends it).
unsafe fn watch_and_kill(watch: RawFd) -> ! {
    // SAFETY: dup2, close, sigaction, read, kill and _exit are async-signal-safe.
    unsafe {
        libc::dup2(watch, 0);
        if libc::syscall(libc::SYS_close_range, 1, libc::c_uint::MAX, 0) != 0 {
            for fd in 1..4096 {
                libc::close(fd);
            }
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_IGN;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
        let mut byte = 0u8;
        let n = loop {
            let n = libc::read(0, (&raw mut byte).cast(), 1);
            if n >= 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break n;
            }
        };
        if n == 0 {
            libc::kill(0, libc::SIGKILL);
        }
        libc::_exit(0)
    }
}

/// A pipe, both ends closed on exec.
pub fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::new(Code::Io, format!("cannot make a pipe: {e}")));
    }
    // SAFETY: both descriptors are fresh and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
