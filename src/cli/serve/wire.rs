//! What `loopx serve` and the commands that ask it say to each other, and how each makes sure
//! the other is this user's process, running this very binary, for this very project.

use std::io::{self, Read as _};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The protocol's version.
pub const VERSION: u32 = 1;
/// The most a question may take, in bytes.
pub const ASK_MAX: u64 = 16 * 1024;
/// The most an answer may take, in bytes.
pub const REPLY_MAX: u64 = 4 * 1024 * 1024;

/// A question: which command, for which agent, from which binary.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ask {
    /// [`VERSION`].
    pub v: u32,
    /// The asking binary's identity ([`exe_id`]).
    pub exe: [i64; 4],
    /// The command.
    pub cmd: Asked,
    /// The agent's id, as `--agent` or `LOOPX_AGENT` gave it.
    pub agent: String,
    /// `--json`.
    pub json: bool,
    /// The `.loopx/` directory as the asker spells it (messages name files by it).
    pub dir: String,
}

/// The commands a server answers.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Asked {
    /// `quota should-run`.
    ShouldRun,
    /// `monitor poll --timeout`, answered only when nothing is due.
    Poll {
        /// The checks' time limit, in ms.
        timeout_ms: i64,
    },
}

/// An answer: what the command prints and its exit code, or why the asker must run it itself.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply {
    /// The command's output.
    Answer {
        /// The exit code.
        exit: i32,
        /// What goes to stdout.
        stdout: String,
        /// What goes to stderr.
        stderr: String,
    },
    /// Run the command the usual way.
    Decline {
        /// Why.
        why: String,
    },
}

/// The socket's name: abstract (no file to leave behind or plant a link at), and naming the
/// user and the `.loopx/` directory by device and inode.
pub fn name(dir: &Path) -> io::Result<String> {
    let m = std::fs::metadata(dir)?;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    Ok(format!("loopx-serve/{uid}/{}/{}", m.dev(), m.ino()))
}

/// Connects without waiting: a name nobody listens on, or whose queue is full (a stranger may
/// hold it), is no server. The stream is blocking once connected.
pub fn connect(name: &str) -> io::Result<UnixStream> {
    use std::os::fd::{FromRawFd as _, OwnedFd};
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: plain syscall; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_UNIX, flags, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor this process owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = name.as_bytes();
    // The first byte stays NUL: an abstract name.
    if bytes.len() + 1 > sa.sun_path.len() {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (d, b) in sa.sun_path[1..].iter_mut().zip(bytes) {
        *d = *b as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + bytes.len();
    // SAFETY: `sa` is a valid sockaddr_un and `len` covers the family and the name.
    let rc = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&raw const sa).cast::<libc::sockaddr>(),
            len as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let s = UnixStream::from(fd);
    s.set_nonblocking(false)?;
    Ok(s)
}

/// This binary's identity: the device, inode, size and mtime of `/proc/self/exe`. A server and
/// an asker of different builds never answer each other.
pub fn exe_id() -> io::Result<[i64; 4]> {
    let m = std::fs::metadata("/proc/self/exe")?;
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    Ok([
        n(m.dev()),
        n(m.ino()),
        n(m.size()),
        m.mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(m.mtime_nsec()),
    ])
}

/// True when the other end of the socket runs as this user.
pub fn same_user(s: &UnixStream) -> bool {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: u32::MAX,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast::<libc::c_void>(),
            &raw mut len,
        )
    };
    // SAFETY: getuid cannot fail.
    rc == 0 && cred.uid == unsafe { libc::getuid() }
}

/// Reads until the other end stops writing, at most `max` bytes (more is an error), within
/// `limit` in all (a peer that trickles bytes gets no longer).
pub fn read_all(s: &mut UnixStream, max: u64, limit: Duration) -> io::Result<Vec<u8>> {
    let deadline = Instant::now() + limit;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        s.set_read_timeout(Some(left))?;
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() as u64 > max {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "too long"));
        }
    }
}
