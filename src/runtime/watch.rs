//! The command's watch: the command dies with its runner, and so does the rest of its group.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::kernel::{Code, Error, Result};

/// The command is killed if this process dies first (a `kill -9`, the OOM killer): a turn never
/// outlives its runner, whose lease then lapses. The rest of its group is the [`Watch`]'s.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: getpid before the fork; in the child only prctl and getppid, both
    // async-signal-safe.
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
            Ok(())
        });
    }
}

/// A child of this process that joins the command's process group and blocks reading a pipe
/// whose write end only this process holds. End of file means this process died without saying
/// the command is over: the watch kills the whole group (what the command started, too). Once
/// the command ended, [`Watch::disarm`] kills the watch alone; dropped armed, it kills the group.
/// Either way this process reaps it, and SIGKILL ends it even stopped: nothing waits on it.
#[derive(Debug)]
pub struct Watch {
    pid: libc::pid_t,
    pgid: i32,
    _tell: OwnedFd,
    armed: bool,
}

impl Watch {
    /// Starts the watch of the process group `pgid`; `None` when no process can be made (the
    /// command still dies with its runner, its children may not).
    pub fn start(pgid: i32) -> Option<Watch> {
        let (read, tell) = pipe().ok()?;
        // SAFETY: the child calls only async-signal-safe functions and never returns.
        match unsafe { libc::fork() } {
            -1 => None,
            0 => unsafe { watch_and_kill(read.as_raw_fd(), pgid) },
            pid => Some(Watch {
                pid,
                pgid,
                _tell: tell,
                armed: true,
            }),
        }
    }

    /// The command is over: the watch goes, and leaves the rest of its group alone.
    pub fn disarm(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            self.end(self.pid);
        }
    }

    /// Sends SIGKILL to `target` (the watch, or its whole group) and reaps the watch.
    fn end(&self, target: libc::pid_t) {
        // SAFETY: kill and waitpid on our own child (or its group, whose leader the runner has
        // not reaped yet, so its id is not reused).
        unsafe {
            libc::kill(target, libc::SIGKILL);
            while libc::waitpid(self.pid, std::ptr::null_mut(), 0) == -1
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if std::mem::replace(&mut self.armed, false) {
            self.end(-self.pgid);
        }
    }
}

/// The watch itself: in the group `pgid` (or gone, if the group is), every descriptor but `read`
/// closed (the runner's own pipes and terminal), the signals a group gets to stop or suspend it
/// ignored (the group's SIGKILL still ends it).
///
/// # Safety
/// Only in a child just forked: it calls only async-signal-safe functions.
unsafe fn watch_and_kill(read: RawFd, pgid: i32) -> ! {
    // SAFETY: sigaction, setpgid, prctl, dup2, close, read, kill and _exit are
    // async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_IGN;
        for sig in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
        ] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        // Not in the group (it ended already), or without its pipe, it has nothing to watch;
        // `kill(0)` below must never reach the runner's own group.
        if libc::setpgid(0, pgid) != 0 || libc::dup2(read, 0) != 0 {
            libc::_exit(0);
        }
        // Named for `ps` and `pgrep`: it is no second runner.
        libc::prctl(libc::PR_SET_NAME, c"loopx-watch".as_ptr());
        if libc::syscall(libc::SYS_close_range, 1, libc::c_uint::MAX, 0) != 0 {
            for fd in 1..4096 {
                libc::close(fd);
            }
        }
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
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::new(Code::Io, format!("cannot make a pipe: {e}")));
    }
    // SAFETY: both descriptors are fresh and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
