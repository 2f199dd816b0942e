//! Linux inotify, read without blocking: the change feed of a process that keeps a snapshot.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

/// What a watch of a state directory reports: entries made, changed, moved or removed, and the
/// directory itself going.
const MASK: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_DONT_FOLLOW
    | libc::IN_ONLYDIR
    | libc::IN_EXCL_UNLINK;

/// What a watch of one file reports, whichever name it is reached by (a hard link included).
const FILE_MASK: u32 = libc::IN_MODIFY
    | libc::IN_ATTRIB
    | libc::IN_CLOSE_WRITE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_DONT_FOLLOW;

/// The header of one event, before its name.
const HEADER: usize = 16;

/// One event: the watch it came from, what happened, and the entry's name (empty for the
/// directory itself).
#[derive(Debug)]
pub struct Event<'a> {
    /// The watch, as `watch` returned it; -1 for a queue overflow.
    pub wd: i32,
    /// The `IN_*` bits.
    pub mask: u32,
    /// The entry's name within the watched directory.
    pub name: &'a [u8],
}

impl Event<'_> {
    /// True when events were lost (the queue overflowed): everything may have changed.
    pub fn overflowed(&self) -> bool {
        self.mask & libc::IN_Q_OVERFLOW != 0
    }

    /// True when the watched directory itself is gone, moved or no longer watched.
    pub fn dir_gone(&self) -> bool {
        self.mask & (libc::IN_DELETE_SELF | libc::IN_MOVE_SELF | libc::IN_IGNORED) != 0
    }
}

/// An inotify instance that never blocks.
#[derive(Debug)]
pub struct Inotify {
    fd: OwnedFd,
}

impl Inotify {
    /// A new instance.
    pub fn new() -> io::Result<Inotify> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor this process owns.
        Ok(Inotify {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The descriptor, to wait on with `poll`.
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// Watches a directory (not through a link); gives the watch's number.
    pub fn watch(&self, dir: &Path) -> io::Result<i32> {
        self.add(dir, MASK)
    }

    /// Watches one file's inode (a link itself, not its target); gives the watch's number, the
    /// same for every name of one inode.
    pub fn watch_file(&self, file: &Path) -> io::Result<i32> {
        self.add(file, FILE_MASK)
    }

    fn add(&self, path: &Path, mask: u32) -> io::Result<i32> {
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: `c` is NUL-terminated and lives across the call.
        let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), c.as_ptr(), mask) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(wd)
    }

    /// Hands every queued event to `f`, and returns once the queue is empty.
    pub fn drain(&self, mut f: impl FnMut(&Event<'_>)) -> io::Result<()> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: `buf` is writable for its whole length.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast::<libc::c_void>(),
                    buf.len(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                return match e.kind() {
                    io::ErrorKind::WouldBlock => Ok(()),
                    io::ErrorKind::Interrupted => continue,
                    _ => Err(e),
                };
            }
            let n = usize::try_from(n).unwrap_or(0);
            if n == 0 {
                return Ok(());
            }
            parse(&buf[..n], &mut f)?;
        }
    }
}

/// Splits a read's bytes into events.
fn parse(mut b: &[u8], f: &mut impl FnMut(&Event<'_>)) -> io::Result<()> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "a torn inotify event");
    while !b.is_empty() {
        let head = b.get(..HEADER).ok_or_else(bad)?;
        let word = |i: usize| [head[i], head[i + 1], head[i + 2], head[i + 3]];
        let wd = i32::from_ne_bytes(word(0));
        let mask = u32::from_ne_bytes(word(4));
        let len = usize::try_from(u32::from_ne_bytes(word(12))).map_err(|_| bad())?;
        let name = b.get(HEADER..HEADER + len).ok_or_else(bad)?;
        // The name is padded with NULs to an alignment.
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        f(&Event {
            wd,
            mask,
            name: &name[..end],
        });
        b = &b[HEADER + len..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sees_an_edit_in_place_and_a_rename() {
        let d = std::env::temp_dir().join(format!("loopx-inotify-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.toml"), "x").unwrap();
        let ino = Inotify::new().unwrap();
        let wd = ino.watch(d.as_path()).unwrap();
        let seen = |ino: &Inotify| {
            let mut names = Vec::new();
            ino.drain(|e| {
                assert_eq!(e.wd, wd);
                names.push(String::from_utf8_lossy(e.name).into_owned());
            })
            .unwrap();
            names.dedup();
            names
        };
        assert!(seen(&ino).is_empty());
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.as_path().join("a.toml"))
            .unwrap();
        f.write_all(b"y").unwrap();
        drop(f);
        assert_eq!(seen(&ino), ["a.toml"]);
        std::fs::write(d.as_path().join(".b.tmp"), "z").unwrap();
        std::fs::rename(d.as_path().join(".b.tmp"), d.as_path().join("b.toml")).unwrap();
        assert_eq!(seen(&ino), [".b.tmp", "b.toml"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_torn_buffer_is_an_error_not_a_panic() {
        let mut n = 0;
        assert!(parse(&[1, 2, 3], &mut |_| n += 1).is_err());
        let mut b = vec![0u8; 16];
        b[12] = 200; // a name longer than the buffer
        assert!(parse(&b, &mut |_| n += 1).is_err());
        assert_eq!(n, 0);
    }
}
