//! Project files opened relative to an opened directory, never through a link (`openat` with
//! `O_NOFOLLOW`), so the check that a path holds no link and the write are one: a directory
//! swapped for a link meanwhile is never followed.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::store::atomic;

/// An opened directory.
pub struct Dir {
    fd: OwnedFd,
}

/// What an entry of a directory is, looked at without following a link.
pub enum Kind {
    /// Nothing by that name.
    Missing,
    /// A symbolic link.
    Link,
    /// A regular file, with its mode bits, owner and group.
    File {
        /// The permission bits (`st_mode & 0o7777`).
        mode: u32,
        /// The owner.
        uid: u32,
        /// The group.
        gid: u32,
    },
    /// A directory.
    Dir,
    /// Something else (a FIFO, a socket, a device).
    Other,
}

/// The mode a replaced file gets: the old file's, or for a new one `0o666` less the umask.
#[derive(Clone, Copy)]
pub enum Mode {
    /// A new file: `0o666` less the umask.
    New,
    /// Readable and writable by its owner only.
    Private,
    /// The old file's mode bits and owner.
    Keep {
        /// The permission bits.
        mode: u32,
        /// The owner.
        uid: u32,
        /// The group.
        gid: u32,
    },
}

fn name_c(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a name"))
}

fn ok(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Dir {
    /// Opens the project root (links in the path to it are the user's own choice).
    pub fn root(path: &Path) -> io::Result<Dir> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(path)?;
        Ok(Dir { fd: f.into() })
    }

    fn open_at(&self, name: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
        let c = name_c(name)?;
        let flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        // SAFETY: a valid directory fd and a NUL-terminated name; the fd returned is ours.
        let fd = ok(unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags, mode) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// What `name` in this directory is, not following a link.
    pub fn kind(&self, name: &str) -> io::Result<Kind> {
        let c = name_c(name)?;
        // SAFETY: `stat` is plain old data, written by fstatat before it is read.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let flags = libc::AT_SYMLINK_NOFOLLOW;
        // SAFETY: a valid directory fd, a NUL-terminated name and a stat buffer.
        let r = unsafe { libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), &mut st, flags) };
        if let Err(e) = ok(r) {
            return match e.kind() {
                io::ErrorKind::NotFound => Ok(Kind::Missing),
                _ => Err(e),
            };
        }
        Ok(match st.st_mode & libc::S_IFMT {
            libc::S_IFLNK => Kind::Link,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFREG => Kind::File {
                mode: st.st_mode & 0o7777,
                uid: st.st_uid,
                gid: st.st_gid,
            },
            _ => Kind::Other,
        })
    }

    /// The directory `name` in this one, never through a link; `None` when it does not exist.
    /// A link or a non-directory there is an error (`ELOOP`, `ENOTDIR`).
    pub fn sub(&self, name: &str) -> io::Result<Option<Dir>> {
        match self.open_at(name, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            Ok(fd) => Ok(Some(Dir { fd })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The directory `name` in this one, made (0o777 less the umask) when it does not exist.
    pub fn sub_or_make(&self, name: &str) -> io::Result<Dir> {
        if let Some(d) = self.sub(name)? {
            return Ok(d);
        }
        let c = name_c(name)?;
        // SAFETY: a valid directory fd and a NUL-terminated name.
        match ok(unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o777) }) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        self.sub(name)?
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    /// Opens the regular file `name` for reading, never through a link; `None` when missing.
    pub fn open_file(&self, name: &str) -> io::Result<Option<File>> {
        match self.open_at(name, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
            Ok(fd) => {
                let f = File::from(fd);
                atomic::check_regular(&f)?;
                Ok(Some(f))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Replaces `name` with `bytes` atomically: a temp file in this directory, fsync, `renameat`
    /// within it, fsync of the directory. The new file gets `mode` (and the old owner, when it
    /// may be given).
    pub fn replace(&self, name: &str, bytes: &[u8], mode: Mode) -> io::Result<()> {
        let (tmp, mut f) = self.create_temp(name, mode)?;
        let r = (|| {
            f.write_all(bytes)?;
            set_mode(&f, mode)?;
            f.sync_all()?;
            drop(f);
            self.rename(&tmp, name)?;
            File::from(self.fd.try_clone()?).sync_all()
        })();
        if r.is_err() {
            let c = name_c(&tmp)?;
            // SAFETY: a valid directory fd and a NUL-terminated name.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
        }
        r
    }

    /// A fresh temp file beside `name`: 0o666 less the umask for a new file, else 0o600 until
    /// its mode is set (a private file is never readable by others on the way).
    fn create_temp(&self, name: &str, mode: Mode) -> io::Result<(String, File)> {
        let bits = if matches!(mode, Mode::New) {
            0o666
        } else {
            0o600
        };
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL;
        let mut last = io::Error::other("no temp name was free");
        for _ in 0..8 {
            let tmp = atomic::temp_name(name)?;
            match self.open_at(&tmp, flags, bits) {
                Ok(fd) => return Ok((tmp, File::from(fd))),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }

    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (a, b) = (name_c(from)?, name_c(to)?);
        let d = self.fd.as_raw_fd();
        // SAFETY: valid directory fds and NUL-terminated names.
        ok(unsafe { libc::renameat(d, a.as_ptr(), d, b.as_ptr()) }).map(|_| ())
    }
}

/// Gives the open temp file its final mode (and the old owner, best effort: only root may).
fn set_mode(f: &File, mode: Mode) -> io::Result<()> {
    let fd = f.as_raw_fd();
    match mode {
        Mode::New => Ok(()),
        Mode::Private => ok(unsafe { libc::fchmod(fd, 0o600) }).map(|_| ()),
        Mode::Keep { mode, uid, gid } => {
            // SAFETY: a valid fd. The owner first: a chown may clear set-id bits.
            unsafe { libc::fchown(fd, uid, gid) };
            // SAFETY: a valid fd.
            ok(unsafe { libc::fchmod(fd, mode) }).map(|_| ())
        }
    }
}
