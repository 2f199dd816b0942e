//! A cache of parsed todo files, keyed by each file's inode, size, ctime and mtime.
//!
//! Never authoritative: every load lists `todos/` and stats each file, and any file whose
//! key differs from the cached one (a hand edit included) is parsed again from disk.
//! Files changed in the last 25 ms are never cached, so a change within the same
//! coarse clock tick (1 to 10 ms) as the cached version cannot hide ("racy git").

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::kernel::Todo;

const VERSION: u32 = 1;
/// Files changed more recently than this are not cached.
const RACY_NS: i64 = 25_000_000;

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Key {
    ino: u64,
    size: u64,
    ctime_ns: i64,
    mtime_ns: i64,
}

impl Key {
    /// True when the file has not changed in the racy window before `now_ns`.
    pub fn is_settled(&self, now_ns: i64) -> bool {
        self.ctime_ns < now_ns - RACY_NS && self.mtime_ns < now_ns - RACY_NS
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

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    key: Key,
    todo: Todo,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    entries: HashMap<String, Entry>,
}

/// A rewrite a load decided on, done once the lock is released: (todo id, file key) pairs.
#[derive(Debug)]
pub struct Refresh {
    /// The files read, with their keys as read under the lock.
    pub keys: Vec<(String, Key)>,
    /// When they were read, in ns since the epoch.
    pub now_ns: i64,
}

/// The cache as loaded.
#[derive(Debug, Default)]
pub struct Cache {
    entries: HashMap<String, Entry>,
}

impl Cache {
    /// Reads the cache; a missing or unreadable one is empty.
    pub fn read(path: &Path) -> Cache {
        let entries = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<File>(&b).ok())
            .filter(|f| f.version == VERSION)
            .map(|f| f.entries)
            .unwrap_or_default();
        Cache { entries }
    }

    /// The cached todo for this file version, taken out of the cache.
    pub fn take(&mut self, stem: &str, key: Key) -> Option<Todo> {
        match self.entries.remove(stem) {
            Some(e) if e.key == key => Some(e.todo),
            _ => None,
        }
    }

    /// True when a rewrite would cache enough files that are stale in it now.
    ///
    /// Files changed in the racy window cannot be cached yet, so they do not count: under a
    /// burst of writes the cache is left alone rather than rewritten on every load.
    pub fn worth_rewrite(settled_misses: usize, total: usize) -> bool {
        // A miss costs a TOML parse (about 15 us) on every load until the cache is rewritten; a
        // rewrite costs about 2.5 us a todo, once. Rewriting after m misses costs a load about
        // m/2 * 15 + 2.5 * total / m us, least at m = sqrt(total / 3).
        settled_misses >= 4.max((total / 3).isqrt())
    }

    /// Writes a new cache of these todos (not fsynced: it is only a cache).
    pub fn write(path: &Path, todos: &[(Key, &Todo)], now_ns: i64) {
        let entries = todos
            .iter()
            .filter(|(k, t)| k.is_settled(now_ns) && t.extra.is_empty())
            .map(|(k, t)| {
                (
                    t.id.clone(),
                    Entry {
                        key: *k,
                        todo: (*t).clone(),
                    },
                )
            })
            .collect();
        let f = File {
            version: VERSION,
            entries,
        };
        if let Ok(bytes) = serde_json::to_vec(&f) {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("cache");
            let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
            if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, path).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}
