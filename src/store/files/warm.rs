//! A snapshot kept in memory by a long-running process (`loopx serve`), brought up to date from
//! inotify events under the shared lock: a load that costs what changed, not what exists.
//!
//! inotify queues an event inside the write, rename or unlink that causes it, so once the queue
//! is drained under the lock, every change made before the lock was taken is known: a commit's
//! (it held the exclusive lock) and a hand edit's alike. Only a changed todo file is read again;
//! any other change re-reads the small files (config, gates, quota, agents, seal). A lost event
//! (queue overflow) or a replaced directory reloads everything.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::kernel::{Problem, Snapshot, Todo};
use crate::store::cache::Cache;
use crate::store::fs::FileStore;

use super::inotify::{Event, Inotify};

/// The state directories a snapshot is read from, below `.loopx/`.
const SUBDIRS: [&str; 4] = ["todos", "gates", "agents", "archive"];
/// Entries of `.loopx/` no snapshot reads.
const IGNORED: [&[u8]; 4] = [b"cache", b"lock", b"evidence", b"worktrees"];

/// Which directory a watch is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    Root,
    Todos,
    Other,
}

/// What changed since the snapshot was built.
#[derive(Debug, Default)]
struct Dirty {
    all: bool,
    rest: bool,
    todos: BTreeSet<String>,
}

/// A project's snapshot, kept up to date from the directory's events.
#[derive(Debug)]
pub struct Warm {
    store: FileStore,
    ino: Inotify,
    watches: HashMap<i32, Watched>,
    todos: BTreeMap<String, Todo>,
    problems: BTreeMap<String, Problem>,
    dirty: Dirty,
    gone: bool,
    snap: Option<Snapshot>,
}

impl Warm {
    /// Starts watching the project; the first snapshot is read on the first ask. Refused on a
    /// file system that does not report changes made elsewhere (NFS, SMB, FUSE, 9p).
    pub fn new(store: FileStore) -> Result<Warm, String> {
        remote_fs(store.dir())?;
        let ino = Inotify::new().map_err(|e| format!("inotify: {e}"))?;
        let mut w = Warm {
            store,
            ino,
            watches: HashMap::new(),
            todos: BTreeMap::new(),
            problems: BTreeMap::new(),
            dirty: Dirty {
                all: true,
                ..Dirty::default()
            },
            gone: false,
            snap: None,
        };
        w.watch_all()?;
        Ok(w)
    }

    /// The store it keeps warm.
    pub fn store(&self) -> &FileStore {
        &self.store
    }

    /// The descriptor that becomes readable when an event waits (for `poll`).
    pub fn events_fd(&self) -> std::os::fd::RawFd {
        self.ino.raw_fd()
    }

    /// Takes in the events that wait, so that the queue never overflows between questions.
    pub fn absorb(&mut self) -> Result<(), String> {
        self.drain()
    }

    /// True once `.loopx/` itself was removed or moved: nothing is left to keep.
    pub fn gone(&self) -> bool {
        self.gone
    }

    /// The snapshot as a load would give it now, or why it cannot be given (the asker then
    /// loads the usual way).
    pub fn snapshot(&mut self) -> Result<&Snapshot, String> {
        let guard = self.store.lock(false).map_err(|e| e.message)?;
        if self.store.needs_recovery().map_err(|e| e.message)? {
            return Err("a commit is unfinished".into());
        }
        self.drain()?;
        if self.gone {
            return Err(".loopx/ is gone".into());
        }
        if self.dirty.all {
            self.reload_todos()?;
        } else {
            self.reread_todos();
        }
        let stale = std::mem::take(&mut self.dirty);
        if self.snap.is_none() || stale.rest || stale.all || !stale.todos.is_empty() {
            self.snap = None;
            self.snap = Some(self.build()?);
        }
        drop(guard);
        self.snap.as_ref().ok_or_else(|| "no snapshot".to_string())
    }

    /// Watches `.loopx/` and each state directory there is.
    fn watch_all(&mut self) -> Result<(), String> {
        self.watches.clear();
        let root = self.store.dir().to_path_buf();
        let wd = self
            .ino
            .watch(&root)
            .map_err(|e| format!("cannot watch {}: {e}", root.display()))?;
        self.watches.insert(wd, Watched::Root);
        for sub in SUBDIRS {
            let dir = root.join(sub);
            match self.ino.watch(&dir) {
                Ok(wd) => {
                    let kind = if sub == "todos" {
                        Watched::Todos
                    } else {
                        Watched::Other
                    };
                    self.watches.insert(wd, kind);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot watch {}: {e}", dir.display())),
            }
        }
        Ok(())
    }

    /// Reads every queued event into `dirty`.
    fn drain(&mut self) -> Result<(), String> {
        let (watches, dirty, gone) = (&self.watches, &mut self.dirty, &mut self.gone);
        self.ino
            .drain(|e| note(watches.get(&e.wd).copied(), e, dirty, gone))
            .map_err(|e| format!("inotify: {e}"))
    }

    /// Reads `todos/` whole (through the disk cache), watching anew first.
    fn reload_todos(&mut self) -> Result<(), String> {
        self.watch_all()?;
        self.store.check_no_symlinks().map_err(|e| e.message)?;
        let cache = Cache::read(&self.store.cache_path());
        let (todos, problems, _) = self.store.read_todos(cache).map_err(|e| e.message)?;
        self.todos = todos;
        self.problems = problems;
        Ok(())
    }

    /// Reads again the todo files events named.
    fn reread_todos(&mut self) {
        let dir = self.store.dir().join("todos");
        for stem in &self.dirty.todos {
            match self.store.read_missed(&dir, stem) {
                Ok(Some(t)) => {
                    self.problems.remove(stem);
                    self.todos.insert(stem.clone(), t);
                }
                Ok(None) => {
                    self.problems.remove(stem);
                    self.todos.remove(stem);
                }
                Err(p) => {
                    self.todos.remove(stem);
                    self.problems.insert(stem.clone(), p);
                }
            }
        }
    }

    /// The snapshot of the kept todos and the small files read now, checked against the seal.
    fn build(&self) -> Result<Snapshot, String> {
        let s = &self.store;
        s.check_no_symlinks().map_err(|e| e.message)?;
        if crate::store::open::pointed_url(&s.path("loopx.toml"))
            .map_err(|e| e.message)?
            .is_some()
        {
            return Err("loopx.toml names a database".into());
        }
        let config = s.read_config().map_err(|e| e.message)?;
        let mut snap = s
            .assemble(config, self.todos.clone(), self.problems.clone())
            .map_err(|e| e.message)?;
        let key = s.owner_pub().map_err(|e| e.message)?;
        s.check_seal(&mut snap, key.as_ref());
        Ok(snap)
    }
}

/// What one event makes stale.
fn note(w: Option<Watched>, e: &Event<'_>, dirty: &mut Dirty, gone: &mut bool) {
    if e.overflowed() {
        dirty.all = true;
        return;
    }
    let temp = e.name.first() == Some(&b'.');
    match w {
        // A watch given up earlier (its directory was replaced).
        None => {}
        Some(Watched::Root) if e.dir_gone() => *gone = true,
        Some(Watched::Root) => {
            if SUBDIRS.iter().any(|s| s.as_bytes() == e.name) {
                dirty.all = true;
            } else if !temp && !IGNORED.contains(&e.name) {
                dirty.rest = true;
            }
        }
        Some(_) if e.dir_gone() => dirty.all = true,
        Some(Watched::Todos) => {
            let stem = e
                .name
                .strip_suffix(b".toml")
                .and_then(|s| std::str::from_utf8(s).ok());
            if let Some(stem) = stem.filter(|_| !temp) {
                dirty.todos.insert(stem.to_string());
            }
        }
        Some(Watched::Other) => dirty.rest |= !temp,
    }
}

/// Refuses a file system whose changes made on another machine raise no inotify event.
fn remote_fs(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt as _;
    const REMOTE: [(i64, &str); 8] = [
        (0x6969, "NFS"),
        (0x517B, "SMB"),
        (0xFF53_4D42, "CIFS"),
        (0xFE53_4D42, "SMB2"),
        (0x6573_5546, "FUSE"),
        (0x0102_1997, "9p"),
        (0x00C3_6400, "Ceph"),
        (0x5346_414F, "AFS"),
    ];
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| "a path with a NUL byte".to_string())?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c` is NUL-terminated and `st` is written by the call before it is read.
    if unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(format!(
            "{}: {}",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: statfs returned 0, so it filled `st`.
    // `f_type` is an i64 here and narrower on some targets.
    #[allow(clippy::useless_conversion)]
    let kind = i64::from(unsafe { st.assume_init() }.f_type);
    match REMOTE.iter().find(|(m, _)| *m == kind) {
        Some((_, name)) => Err(format!(
            "{} is on {name}, where changes made elsewhere raise no event",
            dir.display()
        )),
        None => Ok(()),
    }
}
