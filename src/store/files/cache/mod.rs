//! A cache of parsed todo files, keyed by each file's inode, size, ctime and mtime.
//!
//! Never authoritative: every load stats each todo file (the names come from `listing`), and
//! any file whose key differs from the cached one (a hand edit included) is parsed again.
//! Files changed in the last 25 ms are never cached, so a change within the same
//! coarse clock tick (1 to 10 ms) as the cached version cannot hide ("racy git").

use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::kernel::Todo;
use crate::store::atomic;

mod codec;
pub mod listing;

const VERSION: u32 = 6;
/// Files changed more recently than this are not cached.
const RACY_NS: i64 = 25_000_000;
/// The same on a file system that keeps times in whole seconds.
const COARSE_RACY_NS: i64 = 2_000_000_000;

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "(u64, u64, i64, i64)", from = "(u64, u64, i64, i64)")]
pub struct Key {
    ino: u64,
    size: u64,
    ctime_ns: i64,
    mtime_ns: i64,
}

impl From<Key> for (u64, u64, i64, i64) {
    fn from(k: Key) -> Self {
        (k.ino, k.size, k.ctime_ns, k.mtime_ns)
    }
}

impl From<(u64, u64, i64, i64)> for Key {
    fn from((ino, size, ctime_ns, mtime_ns): (u64, u64, i64, i64)) -> Self {
        Key {
            ino,
            size,
            ctime_ns,
            mtime_ns,
        }
    }
}

impl Key {
    /// True when the file has not changed in the racy window before `now_ns`. Times in whole
    /// seconds (a file system that keeps no finer ones) wait out two seconds instead: a change
    /// later in the same second would keep the same times.
    pub fn is_settled(&self, now_ns: i64) -> bool {
        let whole = |t: i64| t % 1_000_000_000 == 0;
        let racy = if whole(self.ctime_ns) && whole(self.mtime_ns) {
            COARSE_RACY_NS
        } else {
            RACY_NS
        };
        self.ctime_ns < now_ns - racy && self.mtime_ns < now_ns - racy
    }

    /// Appends the key to a cache row.
    fn put(&self, w: &mut codec::W) {
        w.u64(self.ino);
        w.u64(self.size);
        w.i64(self.ctime_ns);
        w.i64(self.mtime_ns);
    }

    /// Reads a key written by `put`.
    fn get(r: &mut codec::R<'_>) -> Option<Key> {
        Some(Key {
            ino: r.u64()?,
            size: r.u64()?,
            ctime_ns: r.i64()?,
            mtime_ns: r.i64()?,
        })
    }

    /// The key of a `stat` result.
    pub fn of_stat(st: &libc::stat) -> Key {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Key {
            ino: st.st_ino,
            size: u64::try_from(st.st_size).unwrap_or(0),
            ctime_ns: ns(st.st_ctime, st.st_ctime_nsec),
            mtime_ns: ns(st.st_mtime, st.st_mtime_nsec),
        }
    }

    /// The key of a file's metadata.
    pub fn of(m: &std::fs::Metadata) -> Key {
        Key {
            ino: m.ino(),
            size: m.size(),
            ctime_ns: m
                .ctime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.ctime_nsec()),
            mtime_ns: m
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(m.mtime_nsec()),
        }
    }
}

/// A rewrite a load decided on, done once the lock is released.
#[derive(Debug)]
pub struct Refresh {
    /// The files read, with their keys as read under the lock and their todos as the files
    /// say (before the owner's seal corrects any), when the rows are worth rewriting.
    pub rows: Option<Vec<(String, Key, Todo)>>,
    /// The listing of `todos/` to keep, when it was read from the directory.
    pub names: Option<listing::Kept>,
    /// When they were read, in ns since the epoch.
    pub now_ns: i64,
}

/// The cache as loaded: the file's bytes and where each row is in them, sorted by file name.
/// A row is decoded only when its file's name is asked for.
#[derive(Debug, Default)]
pub struct Cache {
    bytes: Vec<u8>,
    rows: Vec<Row>,
}

/// Each name with its cached todo, and the key each was cached under, in the names' order.
pub type Decoded = (Vec<(String, Option<Todo>)>, Vec<Option<Key>>);

/// Where one row's stem and todo are in the cache's bytes, and the key it was cached under.
#[derive(Debug)]
struct Row {
    stem: Range<usize>,
    key: Key,
    todo: Range<usize>,
}

impl Cache {
    /// Reads the cache; a missing, unreadable or forged one is empty.
    pub fn read(path: &Path) -> Cache {
        read_nofollow(path)
            .and_then(|bytes| {
                let rows = index(&bytes)?;
                Some(Cache { bytes, rows })
            })
            .unwrap_or_default()
    }

    fn stem(&self, r: &Row) -> &[u8] {
        &self.bytes[r.stem.clone()]
    }

    /// The todo of a row, if its bytes are one and it is within the bounds a file gets (a
    /// forged or stale row out of range is a miss).
    fn todo(&self, r: &Row) -> Option<Todo> {
        let mut rd = codec::R(&self.bytes[r.todo.clone()]);
        let t = codec::get_todo(&mut rd)?;
        (rd.0.is_empty() && crate::kernel::limits::check_todo(&t).is_ok()).then_some(t)
    }

    /// Every row: the file name's stem, the key it was cached under, and the todo it holds.
    pub fn rows(&self) -> impl Iterator<Item = (&str, Key, Todo)> + '_ {
        self.rows.iter().filter_map(|r| {
            let stem = std::str::from_utf8(self.stem(r)).ok()?;
            Some((stem, r.key, self.todo(r)?))
        })
    }

    /// Each name's cached todo and the key it was cached under, in the order of `names`,
    /// decoded before the files are stat-ed: the caller keeps one only while its file still
    /// has that key.
    pub fn decode(&self, names: &[String]) -> Decoded {
        let mut todos = Vec::with_capacity(names.len());
        let mut keys = Vec::with_capacity(names.len());
        let mut next = 0;
        for stem in names {
            let want = stem.as_bytes();
            let i = match self.rows.get(next) {
                Some(r) if self.stem(r) == want => Some(next),
                _ => self.rows.binary_search_by(|r| self.stem(r).cmp(want)).ok(),
            };
            let row = i.map(|i| &self.rows[i]);
            next = i.map_or(next, |i| i + 1);
            let todo = row.and_then(|r| self.todo(r));
            keys.push(todo.as_ref().and(row.map(|r| r.key)));
            todos.push((stem.clone(), todo));
        }
        (todos, keys)
    }

    /// True when a rewrite would cache enough files that are stale in it now.
    ///
    /// Files changed in the racy window cannot be cached yet, so they do not count: under a
    /// burst of writes the cache is left alone rather than rewritten on every load.
    pub fn worth_rewrite(settled_misses: usize, total: usize) -> bool {
        // A miss costs a TOML parse (about 15 us) on every load until the cache is rewritten; a
        // rewrite costs about 0.3 us a todo, once. Rewriting after m misses costs a load about
        // m/2 * 15 + 0.3 * total / m us, least at m = sqrt(total / 25).
        settled_misses >= 2.max((total / 25).isqrt())
    }

    /// Writes a new cache of these todos (not fsynced: it is only a cache).
    pub fn write(path: &Path, todos: &[(&str, Key, &Todo)], now_ns: i64) {
        let mut rows: Vec<_> = todos
            .iter()
            .filter(|(_, k, t)| k.is_settled(now_ns) && codec::cacheable(t))
            .collect();
        rows.sort_unstable_by_key(|(s, _, _)| *s);
        rows.dedup_by_key(|(s, _, _)| *s);
        let mut w = codec::W(Vec::with_capacity(64 + rows.len() * 200));
        w.0.extend_from_slice(MAGIC);
        w.u32(VERSION);
        w.u32(u32::try_from(rows.len()).unwrap_or(u32::MAX));
        for (stem, k, t) in rows {
            w.str(stem);
            k.put(&mut w);
            let at = w.0.len();
            w.u32(0);
            codec::put_todo(&mut w, t);
            let len = u32::try_from(w.0.len() - at - 4).unwrap_or(u32::MAX);
            w.0[at..at + 4].copy_from_slice(&len.to_le_bytes());
        }
        write_unsynced(path, &w.0);
        // The JSON cache (version 5 and before) is never read again.
        let _ = std::fs::remove_file(path.with_file_name("todos.json"));
    }
}

/// The first bytes of a cache file.
const MAGIC: &[u8; 8] = b"loopxc\0\0";

/// Where each row of a cache file is, or `None` if the file is not one `Cache::write` wrote
/// (a row's todo is checked when it is decoded).
fn index(b: &[u8]) -> Option<Vec<Row>> {
    let body = b.strip_prefix(MAGIC)?;
    let mut r = codec::R(body);
    if r.u32()? != VERSION {
        return None;
    }
    let n = usize::try_from(r.u32()?).ok()?;
    // A row takes more than 40 bytes: a count beyond that is forged.
    let mut rows: Vec<Row> = Vec::with_capacity(n.min(b.len() / 40));
    let at = |r: &codec::R<'_>| b.len() - r.0.len();
    for _ in 0..n {
        let len = usize::try_from(r.u32()?).ok()?;
        let start = at(&r);
        r.skip(len)?;
        let stem = start..start + len;
        let key = Key::get(&mut r)?;
        let len = usize::try_from(r.u32()?).ok()?;
        let start = at(&r);
        r.skip(len)?;
        // Strictly sorted, so that a lookup finds the one row of a name.
        if rows
            .last()
            .is_some_and(|l| b[l.stem.clone()] >= b[stem.clone()])
        {
            return None;
        }
        rows.push(Row {
            stem,
            key,
            todo: start..start + len,
        });
    }
    r.0.is_empty().then_some(rows)
}

/// Rewrites every row of a cache file through `f`, keeping its file keys: what a forger with
/// write access to `.loopx/cache/` can do (for tests of what catches it).
#[doc(hidden)]
pub fn forge_rows(path: &Path, mut f: impl FnMut(&mut Todo)) -> bool {
    let cache = Cache::read(path);
    let mut todos: Vec<(String, Key, Todo)> = cache
        .rows()
        .map(|(s, k, t)| (s.to_string(), k, t))
        .collect();
    if todos.is_empty() {
        return false;
    }
    todos.iter_mut().for_each(|(_, _, t)| f(t));
    let list: Vec<_> = todos.iter().map(|(s, k, t)| (s.as_str(), *k, t)).collect();
    Cache::write(path, &list, i64::MAX);
    true
}

/// The system clock in ns since the epoch, to compare with file times.
pub fn now_ns() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    )
    .unwrap_or(i64::MAX)
}

/// The largest cache file read: 64 MiB (about 200 000 todos).
const MAX_CACHE: u64 = 64 << 20;

/// Reads a cache file without following a link, never blocking on a FIFO, and bounded; `None`
/// for anything but a regular file that can be read whole.
fn read_nofollow(path: &Path) -> Option<Vec<u8>> {
    let mut f = atomic::open_nofollow(path).ok()?;
    atomic::read_bounded(&mut f, MAX_CACHE).ok()
}

/// Replaces a cache file by temp file and rename, without fsync (it is only a cache). The temp
/// file is created exclusively, under a random name, never through a link.
fn write_unsynced(path: &Path, bytes: &[u8]) {
    use std::io::Write as _;
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let Ok((tmp, mut f)) = atomic::create_temp(path) else {
        return;
    };
    let written = f.write_all(bytes).is_ok();
    drop(f);
    if !written || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// How many files a directory holds, cached by the directory's own key: adding or removing an
/// entry changes the directory's mtime and ctime, so a count read while its key is unchanged
/// (and settled, as for todos) is still right.
pub fn dir_count(dir: &Path, cache: &Path) -> std::io::Result<usize> {
    let meta = std::fs::metadata(dir)?;
    let key = Key::of(&meta);
    let cached = read_nofollow(cache).and_then(|b| serde_json::from_slice::<(Key, usize)>(&b).ok());
    if let Some((k, n)) = cached
        && k == key
    {
        return Ok(n);
    }
    let n = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && name.ends_with(".toml")
        })
        .count();
    let now_ns = now_ns();
    // Re-stat: the count is only worth keeping if nothing changed while counting.
    if key.is_settled(now_ns)
        && std::fs::metadata(dir).map(|m| Key::of(&m)).ok() == Some(key)
        && let Ok(bytes) = serde_json::to_vec(&(key, n))
    {
        write_unsynced(cache, &bytes);
    }
    Ok(n)
}

#[cfg(test)]
mod tests;
