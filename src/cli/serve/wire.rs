//! What `loopx serve` and the commands that ask it say to each other, and how each makes sure
//! the other is this user's process, running this very binary, for this very project.

use std::io::{self, Read as _};
use std::os::fd::AsRawFd as _;
use std::os::linux::net::SocketAddrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::path::Path;

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
pub fn address(dir: &Path) -> io::Result<SocketAddr> {
    let m = std::fs::metadata(dir)?;
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let name = format!("loopx-serve/{uid}/{}/{}", m.dev(), m.ino());
    SocketAddr::from_abstract_name(name.as_bytes())
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

/// Reads until the other end stops writing, at most `max` bytes (more is an error).
pub fn read_all(s: &mut UnixStream, max: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    s.take(max + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "too long"));
    }
    Ok(buf)
}
