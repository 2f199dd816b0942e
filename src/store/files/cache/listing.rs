//! The names in `todos/` and each file's key. The names come from the listing kept in
//! `cache/todos.names` while the directory's own key is the one it was kept under (adding,
//! removing or renaming an entry changes the directory's mtime and ctime), else from `readdir`.
//! Every file is still stat-ed by name, so an edit in place is seen; past a few hundred files
//! the stats run on a second thread while the caller works on the names.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd as _;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use super::{Key, codec, read_nofollow, write_unsynced};

const MAGIC: &[u8; 8] = b"loopxn\0\0";
const VERSION: u32 = 1;
/// From this many files on, a second thread does the stats.
const TWO_THREADS: usize = 256;

/// What one file's stat said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Gone since the listing.
    Gone,
    /// A regular file with this key.
    File(Key),
    /// Anything else (a link, a FIFO, a directory): it is read, and refused, the slow way.
    Other(Key),
}

/// A directory's `ID.toml` stems in name order, each with its stat.
#[derive(Debug, Default)]
pub struct Listing {
    /// The stems, sorted.
    pub names: Vec<String>,
    /// One stat per name.
    pub stats: Vec<Stat>,
    /// The listing to keep, when it was read from the directory and is worth keeping.
    pub keep: Option<Kept>,
}

/// A listing to write to `cache/todos.names`: the directory's key and its stems.
#[derive(Debug)]
pub struct Kept {
    key: Key,
    names: Vec<String>,
}

impl Kept {
    /// Writes the listing (not fsynced: it is only a cache). Safe without the lock: it is used
    /// only while the directory still has the key it was read under.
    pub fn write(&self, path: &Path) {
        let mut w = codec::W(Vec::with_capacity(32 + self.names.len() * 16));
        w.0.extend_from_slice(MAGIC);
        w.u32(VERSION);
        self.key.put(&mut w);
        w.u32(u32::try_from(self.names.len()).unwrap_or(u32::MAX));
        for n in &self.names {
            w.str(n);
        }
        write_unsynced(path, &w.0);
    }
}

/// Lists `dir` (`None` when it does not exist) and stats every file in it, using the listing
/// kept at `kept` when the directory is unchanged since.
pub fn list(dir: &Path, kept: &Path, now_ns: i64) -> io::Result<Option<Listing>> {
    Ok(list_with(dir, kept, now_ns, |_| ())?.map(|(l, ())| l))
}

/// `list`, running `meanwhile` over the names while the stats are taken (on another thread for
/// a large directory); gives what it returned.
pub fn list_with<T>(
    dir: &Path,
    kept: &Path,
    now_ns: i64,
    meanwhile: impl FnOnce(&[String]) -> T,
) -> io::Result<Option<(Listing, T)>> {
    let d = match open_dir(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let key = Key::of(&d.metadata()?);
    let (names, keep) = match read_kept(kept, key) {
        Some(names) => (names, None),
        None => {
            let names = read_names(dir)?;
            // Kept only if the directory was settled before the listing and is unchanged after.
            let same = key.is_settled(now_ns) && Key::of(&d.metadata()?) == key;
            let keep = same.then(|| Kept {
                key,
                names: names.clone(),
            });
            (names, keep)
        }
    };
    let (stats, got) = stat_all(&d, &names, meanwhile);
    Ok(Some((
        Listing {
            names,
            stats: stats?,
            keep,
        },
        got,
    )))
}

/// The kept listing that the next load would use instead of `readdir`, and the directory's
/// own listing, when they differ (a forged or corrupted `cache/todos.names`).
pub fn kept_but_wrong(dir: &Path, kept: &Path) -> io::Result<Option<(Vec<String>, Vec<String>)>> {
    let key = Key::of(&open_dir(dir)?.metadata()?);
    let Some(names) = read_kept(kept, key) else {
        return Ok(None);
    };
    let real = read_names(dir)?;
    Ok((names != real).then_some((names, real)))
}

/// Opens a directory without following a link.
fn open_dir(dir: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
}

/// The kept stems, if they were kept under this directory key.
fn read_kept(path: &Path, key: Key) -> Option<Vec<String>> {
    let b = read_nofollow(path)?;
    let mut r = codec::R(b.strip_prefix(MAGIC)?);
    if r.u32()? != VERSION || Key::get(&mut r)? != key {
        return None;
    }
    let n = usize::try_from(r.u32()?).ok()?;
    let mut names: Vec<String> = Vec::with_capacity(n.min(b.len() / 4));
    for _ in 0..n {
        let s = r.str()?;
        // Sorted, and each a name `read_names` would give: a forged list is not used.
        if names.last().is_some_and(|l| *l >= s) || !plain_stem(&s) {
            return None;
        }
        names.push(s);
    }
    r.0.is_empty().then_some(names)
}

/// True for a stem `read_names` can return: no dot first, no slash, no NUL.
fn plain_stem(s: &str) -> bool {
    !s.starts_with('.') && !s.contains(['/', '\0'])
}

/// The sorted stems of the directory's `*.toml` entries (no dotfiles or temp files).
fn read_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let stem = name
            .to_str()
            .filter(|n| !n.starts_with('.'))
            .and_then(|n| n.strip_suffix(".toml"));
        if let Some(stem) = stem {
            out.push(stem.to_string());
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Stats every `NAME.toml` in the directory, without following links, while `meanwhile` runs.
/// On a large directory a second thread starts on the stats at once, and this one joins it
/// once `meanwhile` is done: both take the next 64 names until none are left.
fn stat_all<T>(
    d: &File,
    names: &[String],
    meanwhile: impl FnOnce(&[String]) -> T,
) -> (io::Result<Vec<Stat>>, T) {
    if names.len() < TWO_THREADS {
        let got = meanwhile(names);
        return (names.iter().map(|n| stat_at(d, n)).collect(), got);
    }
    let mut stats = vec![Stat::Gone; names.len()];
    let work = Mutex::new(stats.chunks_mut(64).zip(names.chunks(64)));
    let failed = Mutex::new(None);
    let fail = |e: io::Error| {
        failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert(e);
    };
    let stat_some = || {
        loop {
            let next = match work.lock() {
                Ok(mut w) => w.next(),
                Err(_) => return fail(io::Error::other("a stat thread panicked")),
            };
            let Some((out, names)) = next else { return };
            for (o, n) in out.iter_mut().zip(names) {
                match stat_at(d, n) {
                    Ok(st) => *o = st,
                    Err(e) => {
                        fail(e);
                        return;
                    }
                }
            }
        }
    };
    let got = std::thread::scope(|s| {
        // No thread to be had (a container's limit on processes): this one stats them all.
        let second = std::thread::Builder::new().spawn_scoped(s, stat_some);
        let got = meanwhile(names);
        stat_some();
        if second.is_ok_and(|h| h.join().is_err()) {
            fail(io::Error::other("a stat thread panicked"));
        }
        got
    });
    match failed.into_inner().unwrap_or_else(PoisonError::into_inner) {
        Some(e) => (Err(e), got),
        None => (Ok(stats), got),
    }
}

/// One file's stat, by name relative to the directory.
fn stat_at(d: &File, stem: &str) -> io::Result<Stat> {
    // `STEM.toml` and its NUL, on the stack (a file name is at most 255 bytes).
    let mut buf = [0u8; 256];
    let name = buf[..255]
        .get_mut(..stem.len() + 5)
        .filter(|_| !stem.as_bytes().contains(&0))
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    name[..stem.len()].copy_from_slice(stem.as_bytes());
    name[stem.len()..].copy_from_slice(b".toml");
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `d` is an open directory, `buf` holds the name NUL-terminated (its last byte is
    // never written), and `st` is written by the call before it is read (only when it returns 0).
    let rc = unsafe {
        libc::fstatat(
            d.as_raw_fd(),
            buf.as_ptr().cast::<libc::c_char>(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::NotFound => Ok(Stat::Gone),
            _ => Err(e),
        };
    }
    // SAFETY: fstatat returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    let key = Key::of_stat(&st);
    Ok(if st.st_mode & libc::S_IFMT == libc::S_IFREG {
        Stat::File(key)
    } else {
        Stat::Other(key)
    })
}
