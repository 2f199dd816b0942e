//! The file system calls a worktree's removal makes: directories opened relative to an opened
//! one, never through a link (`O_NOFOLLOW`), entries looked at with `statx` (its mount too), and
//! the processes that have a path open (Linux `/proc`).

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// An opened directory.
pub struct Dir(OwnedFd);

/// What an entry is, looked at without following a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `st_mode`: the type and permission bits.
    pub mode: u32,
    /// The device and inode.
    pub dev: (u32, u32),
    /// The inode.
    pub ino: u64,
    /// The mount it is on (`STATX_MNT_ID`).
    pub mnt: u64,
    /// True when it is the root of a mount.
    pub mount_root: bool,
    /// Its size in bytes.
    pub size: u64,
    /// Its last change (`ctime`, which no one can set back) and modification, in nanoseconds.
    pub times: (i128, i128),
}

impl Stat {
    /// The file type bits.
    pub fn kind(&self) -> u32 {
        self.mode & libc::S_IFMT
    }
}

fn cname(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a name"))
}

fn ok(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn nanos(t: libc::statx_timestamp) -> i128 {
    i128::from(t.tv_sec) * 1_000_000_000 + i128::from(t.tv_nsec)
}

impl Dir {
    /// Opens the project's root (links in the path to it are the user's own choice).
    pub fn root(path: &Path) -> io::Result<Dir> {
        let c = cname(path.as_os_str())?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // SAFETY: a NUL-terminated path; the fd returned is ours.
        let fd = ok(unsafe { libc::open(c.as_ptr(), flags) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(Dir(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The directory `name` in this one, never through a link (`ELOOP`, `ENOTDIR` otherwise).
    pub fn sub(&self, name: &OsStr) -> io::Result<Dir> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        self.open_at(name, flags).map(Dir)
    }

    /// The regular file `name` in this one, opened to read, never through a link and never
    /// waiting (a FIFO put there meanwhile is refused by the caller's check of its inode).
    pub fn file(&self, name: &OsStr) -> io::Result<OwnedFd> {
        let flags =
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        self.open_at(name, flags)
    }

    fn open_at(&self, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
        let c = cname(name)?;
        // SAFETY: a valid directory fd and a NUL-terminated name; the fd returned is ours.
        let fd = ok(unsafe { libc::openat(self.0.as_raw_fd(), c.as_ptr(), flags) })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `name` in this directory (`None`: this directory itself), not following a link.
    pub fn stat(&self, name: Option<&OsStr>) -> io::Result<Stat> {
        stat_at(self.0.as_raw_fd(), name)
    }

    /// The entries' names (`.` and `..` left out), sorted.
    pub fn names(&self) -> io::Result<Vec<OsString>> {
        let mut out = std::fs::read_dir(self.proc_path())?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<Vec<_>>>()?;
        out.sort();
        Ok(out)
    }

    /// `/proc/self/fd/N`: this very directory, for a reader that takes a path.
    pub fn proc_path(&self) -> PathBuf {
        proc_fd(&self.0)
    }

    /// Where this directory is now, as the kernel names it.
    pub fn path(&self) -> io::Result<PathBuf> {
        std::fs::read_link(self.proc_path())
    }

    /// The target of the link `name`, as bytes.
    pub fn link_target(&self, name: &OsStr) -> io::Result<Vec<u8>> {
        let c = cname(name)?;
        let mut buf = vec![0u8; 4096];
        // SAFETY: a valid directory fd, a NUL-terminated name and a buffer of its length.
        let n = unsafe {
            libc::readlinkat(
                self.0.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(buf)
    }

    /// Removes the entry `name` (a directory when `dir`; it must be empty).
    pub fn remove(&self, name: &OsStr, dir: bool) -> io::Result<()> {
        let c = cname(name)?;
        let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
        // SAFETY: a valid directory fd and a NUL-terminated name.
        ok(unsafe { libc::unlinkat(self.0.as_raw_fd(), c.as_ptr(), flags) }).map(drop)
    }

    /// Renames `from` to `to` in this directory, never over an existing entry.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (a, b) = (cname(from)?, cname(to)?);
        let d = self.0.as_raw_fd();
        // SAFETY: valid directory fds and NUL-terminated names.
        let r = unsafe { libc::renameat2(d, a.as_ptr(), d, b.as_ptr(), libc::RENAME_NOREPLACE) };
        ok(r).map(drop)
    }
}

/// `/proc/self/fd/N` of an open fd.
pub fn proc_fd(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The `statx` of `name` in the directory `dirfd` (of `dirfd` itself when `None`), never
/// following a link; refused when the kernel does not say which mount it is on.
pub fn stat_at(dirfd: libc::c_int, name: Option<&OsStr>) -> io::Result<Stat> {
    let (c, flags) = match name {
        Some(n) => (cname(n)?, libc::AT_SYMLINK_NOFOLLOW),
        None => (
            CString::default(),
            libc::AT_SYMLINK_NOFOLLOW | libc::AT_EMPTY_PATH,
        ),
    };
    // SAFETY: `statx` is plain old data, written by the call before it is read.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_BASIC_STATS | libc::STATX_MNT_ID;
    // SAFETY: a valid directory fd, a NUL-terminated name and a statx buffer.
    ok(unsafe { libc::statx(dirfd, c.as_ptr(), flags, mask, &mut st) })?;
    if st.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::other(
            "the kernel does not say which mount a file is on (Linux 5.8 or later does)",
        ));
    }
    let root_known = st.stx_attributes_mask & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0;
    Ok(Stat {
        mode: u32::from(st.stx_mode),
        dev: (st.stx_dev_major, st.stx_dev_minor),
        ino: st.stx_ino,
        mnt: st.stx_mnt_id,
        mount_root: root_known && st.stx_attributes & libc::STATX_ATTR_MOUNT_ROOT as u64 != 0,
        size: st.stx_size,
        times: (nanos(st.stx_ctime), nanos(st.stx_mtime)),
    })
}

/// A process other than this one with `under` (or a path below it) as its working directory,
/// its root, an open file or a mapped file: its pid and the path. Only the processes this user
/// may look at are seen.
pub fn holder(under: &Path, inodes: &Inodes) -> Option<(u32, PathBuf)> {
    let me = std::process::id();
    let procs = std::fs::read_dir("/proc").ok()?;
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Some(p) = held_by(&e.path(), under, inodes) {
            return Some((pid, p));
        }
    }
    None
}

/// The device (major, minor) and inode of each entry a walk saw: what a process holds is
/// matched by these too, since its path may name another way in (a bind mount, a container).
pub type Inodes = std::collections::HashSet<(u32, u32, u64)>;

/// The first path under `under`, or entry in `inodes`, that the process at `/proc/PID` holds.
fn held_by(proc: &Path, under: &Path, inodes: &Inodes) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let inside = |p: &Path| p.starts_with(under);
    let mut links: Vec<PathBuf> = vec![proc.join("cwd"), proc.join("root")];
    if let Ok(fds) = std::fs::read_dir(proc.join("fd")) {
        links.extend(fds.flatten().map(|f| f.path()));
    }
    for l in links {
        let p = std::fs::read_link(&l).ok();
        let same = std::fs::metadata(&l)
            .is_ok_and(|m| inodes.contains(&(libc::major(m.dev()), libc::minor(m.dev()), m.ino())));
        if same || p.as_deref().is_some_and(inside) {
            return Some(p.unwrap_or(l));
        }
    }
    let maps = std::fs::read_to_string(proc.join("maps")).unwrap_or_default();
    maps.lines().find_map(|l| mapped(l, under, inodes))
}

/// The file a `/proc/PID/maps` line maps, when it is under `under` or in `inodes`.
fn mapped(line: &str, under: &Path, inodes: &Inodes) -> Option<PathBuf> {
    // The path is the line's last field and starts with its first " /" (it may hold spaces);
    // the device (`major:minor`, hex) and inode are its fourth and fifth fields.
    let path = line.find(" /").map(|i| PathBuf::from(&line[i + 1..]))?;
    let mut f = line.split_whitespace().skip(3);
    let dev = f.next().and_then(|d| d.split_once(':'));
    let dev = dev.and_then(|(a, b)| {
        Some((
            u32::from_str_radix(a, 16).ok()?,
            u32::from_str_radix(b, 16).ok()?,
        ))
    });
    let ino = f.next().and_then(|i| i.parse::<u64>().ok());
    let same = matches!((dev, ino), (Some((a, b)), Some(i)) if inodes.contains(&(a, b, i)));
    (same || path.starts_with(under)).then_some(path)
}
