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

use crate::kernel::{Check, Dur, Extra, Lease, Priority, Role, Status, Todo, Ts};
use crate::store::atomic;

const VERSION: u32 = 5;
/// Files changed more recently than this are not cached.
const RACY_NS: i64 = 25_000_000;

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

/// A cached todo: every field in a fixed order, times in milliseconds, so reading it parses no
/// names and no dates. Only todos without unknown keys are cached.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Row(
    String,                             // id
    String,                             // title
    Role,                               // role
    Priority,                           // priority
    Status,                             // status
    Vec<String>,                        // depends_on
    Option<i64>,                        // every (ms)
    Option<i64>,                        // next_due_at (ms)
    String,                             // created_by
    i64,                                // created_at (ms)
    i64,                                // updated_at (ms)
    Option<String>,                     // reason
    Option<String>,                     // status_by
    u64,                                // fence
    Option<(String, u64, i64, i64)>,    // lease: holder, fence, acquired_at, expires_at
    Option<i64>,                        // overdue_noted (ms)
    Option<CheckRow>,                   // check
    Option<String>, // routing: "requires;reviews;exclude_agents" (see route_row)
    Option<(Vec<String>, Vec<String>)>, // reservations: the todo's paths, the lease's
);

/// A cached check: command, proposed_by, proposed_at, last_hash, last_run_at, last_exit.
type CheckRow = (
    String,
    String,
    i64,
    Option<String>,
    Option<i64>,
    Option<i32>,
);

impl Row {
    fn of(t: &Todo) -> Option<Row> {
        let plain = t.extra.is_empty()
            && t.schema_version == crate::kernel::SCHEMA_VERSION
            && t.lease
                .as_ref()
                .is_none_or(|l| {
                    l.extra.is_empty()
                        && l.turn.is_none()
                        && l.handoff_from.is_none()
                        && l.base.is_none()
                        && l.worktree.is_none()
                })
            && t.check.as_ref().is_none_or(|c| c.extra.is_empty())
            // A todo with a body or links is parsed from its file each time (rare, and kept
            // out of the fixed row).
            && t.body.is_none()
            && t.links.is_empty()
            && t.stall.is_none()
            && route_cacheable(t);
        plain.then(|| {
            Row(
                t.id.clone(),
                t.title.clone(),
                t.role,
                t.priority,
                t.status,
                t.depends_on.clone(),
                t.every.map(|d| d.0),
                t.next_due_at.map(|x| x.0),
                t.created_by.clone(),
                t.created_at.0,
                t.updated_at.0,
                t.reason.clone(),
                t.status_by.clone(),
                t.fence,
                t.lease
                    .as_ref()
                    .map(|l| (l.holder.clone(), l.fence, l.acquired_at.0, l.expires_at.0)),
                t.overdue_noted.map(|x| x.0),
                t.check.as_ref().map(|c| {
                    (
                        c.command.clone(),
                        c.proposed_by.clone(),
                        c.proposed_at.0,
                        c.last_hash.clone(),
                        c.last_run_at.map(|x| x.0),
                        c.last_exit,
                    )
                }),
                route_row(t),
                paths_row(t),
            )
        })
    }

    fn into_todo(self) -> Option<Todo> {
        let Row(
            id,
            title,
            role,
            priority,
            status,
            depends_on,
            every,
            next_due_at,
            created_by,
            created_at,
            updated_at,
            reason,
            status_by,
            fence,
            lease,
            overdue_noted,
            check,
            route,
            paths,
        ) = self;
        let (paths, lease_paths) = paths.unwrap_or_default();
        let (requires, reviews, exclude_agents) = match route {
            Some(r) => parse_route(r)?,
            None => Default::default(),
        };
        Some(Todo {
            schema_version: crate::kernel::SCHEMA_VERSION,
            id,
            title,
            role,
            priority,
            status,
            depends_on,
            every: every.map(Dur),
            next_due_at: next_due_at.map(Ts),
            created_by,
            created_at: Ts(created_at),
            updated_at: Ts(updated_at),
            reason,
            status_by,
            fence,
            overdue_noted: overdue_noted.map(Ts),
            requires,
            reviews,
            exclude_agents,
            body: None,
            links: Vec::new(),
            stall: None,
            paths,
            check: check.map(
                |(command, proposed_by, proposed_at, last_hash, last_run_at, last_exit)| {
                    Box::new(Check {
                        command,
                        proposed_by,
                        proposed_at: Ts(proposed_at),
                        last_hash,
                        last_run_at: last_run_at.map(Ts),
                        last_exit,
                        extra: Extra::new(),
                    })
                },
            ),
            lease: lease.map(|(holder, fence, acquired_at, expires_at)| Lease {
                holder,
                fence,
                acquired_at: Ts(acquired_at),
                expires_at: Ts(expires_at),
                turn: None,
                handoff_from: None,
                base: None,
                paths: lease_paths,
                worktree: None,
                extra: Extra::new(),
            }),
            extra: Extra::new(),
        })
    }
}

/// A todo's reservations, when it has any: its own paths and its lease's.
fn paths_row(t: &Todo) -> Option<(Vec<String>, Vec<String>)> {
    let lease = t
        .lease
        .as_ref()
        .map(|l| l.paths.clone())
        .unwrap_or_default();
    (!t.paths.is_empty() || !lease.is_empty()).then(|| (t.paths.clone(), lease))
}

/// The routing fields of a todo, when it has any, as one string: `requires;reviews;exclude_agents`
/// with lists comma-joined (one JSON string parses several times faster than nested arrays). No
/// capability, todo id or agent id holds `;` or `,`; a todo whose values would is not cached.
fn route_row(t: &Todo) -> Option<String> {
    let none = t.requires.is_empty() && t.reviews.is_none() && t.exclude_agents.is_empty();
    (!none).then(|| {
        format!(
            "{};{};{}",
            t.requires.join(","),
            t.reviews.as_deref().unwrap_or(""),
            t.exclude_agents.join(",")
        )
    })
}

/// True when a todo's routing survives `route_row` and `parse_route` unchanged.
fn route_cacheable(t: &Todo) -> bool {
    let plain = |v: &str| !v.is_empty() && !v.contains([';', ',']);
    t.requires.iter().chain(&t.exclude_agents).all(|v| plain(v))
        && t.reviews.as_deref().is_none_or(plain)
}

/// A routing string back to `requires`, `reviews`, `exclude_agents`; None when it is not one.
fn parse_route(mut r: String) -> Option<(Vec<String>, Option<String>, Vec<String>)> {
    // The common case, one requirement and nothing else: the string itself becomes it.
    if let Some(req) = r.strip_suffix(";;")
        && !req.is_empty()
        && !req.contains([',', ';'])
    {
        r.truncate(req.len());
        return Some((vec![r], None, Vec::new()));
    }
    let mut parts = r.split(';');
    let (req, rev, ex) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let list = |s: &str| -> Vec<String> {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split(',').map(str::to_string).collect()
        }
    };
    let rev = (!rev.is_empty()).then(|| rev.to_string());
    Some((list(req), rev, list(ex)))
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry(Key, Row);

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    entries: Vec<Entry>,
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
    entries: HashMap<String, (Key, Todo)>,
}

impl Cache {
    /// Reads the cache; a missing or unreadable one is empty.
    pub fn read(path: &Path) -> Cache {
        let entries = read_nofollow(path)
            .and_then(|b| serde_json::from_slice::<File>(&b).ok())
            .filter(|f| f.version == VERSION)
            .map(|f| {
                // Rows become todos here, before the lock is taken, and get the bounds a file
                // gets: a forged or stale row out of range is dropped (a miss).
                f.entries
                    .into_iter()
                    .filter_map(|Entry(k, r)| Some((r.0.clone(), (k, r.into_todo()?))))
                    .filter(|(_, (_, t))| crate::kernel::bounds::check_todo(t).is_ok())
                    .collect()
            })
            .unwrap_or_default();
        Cache { entries }
    }

    /// Every row: the file name's stem, the key it was cached under, and the todo it holds.
    pub fn rows(&self) -> impl Iterator<Item = (&str, Key, Todo)> + '_ {
        self.entries
            .iter()
            .map(|(stem, (k, t))| (stem.as_str(), *k, t.clone()))
    }

    /// The cached todo for this file version, taken out of the cache.
    pub fn take(&mut self, stem: &str, key: Key) -> Option<Todo> {
        match self.entries.remove(stem) {
            Some((k, t)) if k == key => Some(t),
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
            .filter(|(k, _)| k.is_settled(now_ns))
            .filter_map(|(k, t)| Row::of(t).map(|r| Entry(*k, r)))
            .collect();
        let f = File {
            version: VERSION,
            entries,
        };
        if let Ok(bytes) = serde_json::to_vec(&f) {
            write_unsynced(path, &bytes);
        }
    }
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
mod tests {
    use super::*;

    fn todo() -> Todo {
        Todo {
            schema_version: 1,
            id: "t-abcdef".into(),
            title: "a title, with \"quotes\"".into(),
            role: Role::User,
            priority: Priority::P1,
            status: Status::Blocked,
            depends_on: vec!["t-zzzzzz".into()],
            every: Some(Dur::from_hours(2)),
            next_due_at: Some(Ts(1_800_000_000_123)),
            created_by: "agent-a".into(),
            created_at: Ts(1_700_000_000_001),
            updated_at: Ts(1_700_000_000_002),
            reason: Some("waiting".into()),
            status_by: Some("agent-a".into()),
            fence: 7,
            overdue_noted: Some(Ts(1_800_000_000_124)),
            requires: vec!["code.rust".into()],
            reviews: Some("t-zzzzzz".into()),
            exclude_agents: vec!["agent-c".into()],
            check: Some(Box::new(Check {
                command: "gh pr view 12 --json state".into(),
                proposed_by: "agent-a".into(),
                proposed_at: Ts(1_700_000_000_005),
                last_hash: Some("ab".repeat(32)),
                last_run_at: Some(Ts(1_700_000_000_006)),
                last_exit: Some(-3),
                extra: Extra::new(),
            })),
            lease: Some(Lease {
                holder: "agent-b".into(),
                fence: 7,
                acquired_at: Ts(1_700_000_000_003),
                expires_at: Ts(1_700_000_000_004),
                turn: None,
                handoff_from: None,
                base: None,
                paths: vec!["src/store/**".into()],
                worktree: None,
                extra: Extra::new(),
            }),
            body: None,
            links: Vec::new(),
            stall: None,
            paths: vec!["src/a;b,c".into(), "docs/*.md".into()],
            extra: Extra::new(),
        }
    }

    #[test]
    fn a_row_keeps_every_field() {
        let t = todo();
        let json = serde_json::to_vec(&Row::of(&t).unwrap()).unwrap();
        let back: Row = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.into_todo(), Some(t));
    }

    #[test]
    fn todos_with_unknown_keys_are_not_cached() {
        let mut t = todo();
        t.extra.insert("mine".into(), toml::Value::Integer(1));
        assert!(Row::of(&t).is_none());
        let mut t = todo();
        if let Some(l) = t.lease.as_mut() {
            l.extra.insert("mine".into(), toml::Value::Integer(1));
        }
        assert!(Row::of(&t).is_none());
        let mut t = todo();
        if let Some(c) = t.check.as_mut() {
            c.extra.insert("mine".into(), toml::Value::Integer(1));
        }
        assert!(Row::of(&t).is_none());
    }

    #[test]
    fn routing_round_trips_and_a_bad_route_string_is_a_miss() {
        let mut t = todo();
        t.requires = vec!["a".into(), "b.c".into()];
        t.reviews = None;
        t.exclude_agents = vec!["x@y".into(), "z".into()];
        let json = serde_json::to_vec(&Row::of(&t).unwrap()).unwrap();
        let back: Row = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.into_todo(), Some(t.clone()));
        t.exclude_agents = vec!["a,b".into()];
        assert!(
            Row::of(&t).is_none(),
            "a value with a separator is not cached"
        );
        assert_eq!(parse_route("a;b".into()), None);
        assert_eq!(parse_route("a;b;c;d".into()), None);
        assert_eq!(
            parse_route(";;".into()),
            Some((Vec::new(), None, Vec::new()))
        );
        assert_eq!(
            parse_route("a;;".into()),
            Some((vec!["a".into()], None, Vec::new()))
        );
        assert_eq!(parse_route("a;;;".into()), None);
    }

    #[test]
    fn todos_with_a_body_or_links_are_not_cached() {
        let mut t = todo();
        t.body = Some("why".into());
        assert!(Row::of(&t).is_none());
        let mut t = todo();
        t.links = vec!["https://example.com/1".into()];
        assert!(Row::of(&t).is_none());
    }
}
