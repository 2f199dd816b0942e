//! A snapshot kept in memory by a long-running process (`loopx serve`), brought up to date from
//! inotify events under the shared lock: a load that costs what changed, not what exists.
//!
//! inotify queues an event inside the write, rename or unlink that causes it, so once the queue
//! is drained under the lock, every change made before the lock was taken is known: a commit's
//! (it held the exclusive lock) and a hand edit's alike. Each state file's inode is watched too,
//! so a write through a hard link made elsewhere is seen. Only a changed todo file is read
//! again; any other change re-reads the small files (config, gates, quota, agents, seal). A lost
//! event (queue overflow) or a replaced directory reloads everything.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::kernel::{Problem, Snapshot, Todo};
use crate::store::cache::Cache;
use crate::store::fs::FileStore;

use super::inotify::{Event, Inotify};

/// The state directories a snapshot is read from, below `.loopx/`.
const SUBDIRS: [&str; 4] = ["todos", "gates", "agents", "archive"];
/// Entries of `.loopx/` no snapshot reads.
const IGNORED: [&[u8]; 4] = [b"cache", b"lock", b"evidence", b"worktrees"];
/// The files of `.loopx/` a snapshot reads.
const ROOT_FILES: [&str; 6] = [
    "loopx.toml",
    "quota.toml",
    "owner.pub",
    "owner.seal",
    "owner.proofs",
    "journal.jsonl",
];

/// What a watch is on.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Watched {
    Root,
    Todos,
    /// `gates/` or `agents/`.
    Other(&'static str),
    /// A todo file's inode, and the stems it is reached by.
    TodoFile(BTreeSet<String>),
    /// Another state file's inode.
    OtherFile,
}

/// A file to watch once the queue is drained: a todo's stem, or another state file by its
/// path in `.loopx/`.
#[derive(Debug)]
enum Fresh {
    Todo(String),
    Other(std::path::PathBuf),
}

/// What changed since the snapshot was built.
#[derive(Debug, Default)]
struct Dirty {
    all: bool,
    rest: bool,
    todos: BTreeSet<String>,
    fresh: Vec<Fresh>,
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
    /// The device and inode of `.loopx/`: a path that comes to name another is not followed.
    id: (u64, u64),
}

impl Warm {
    /// Starts watching the project; the first snapshot is read on the first ask. Refused on a
    /// file system that does not report changes made elsewhere (NFS, SMB, FUSE, 9p).
    pub fn new(store: FileStore) -> Result<Warm, String> {
        remote_fs(store.dir())?;
        let id = dir_id(store.dir()).map_err(|e| format!("{}: {e}", store.dir().display()))?;
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
            id,
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

    /// Marks the project gone when its path no longer names the directory watched (the root
    /// was moved, or a link to it turned).
    pub fn check_place(&mut self) {
        if dir_id(self.store.dir()).ok() != Some(self.id) {
            self.gone = true;
        }
    }

    /// True once `.loopx/` itself was removed or moved: nothing is left to keep.
    pub fn gone(&self) -> bool {
        self.gone
    }

    /// The snapshot as a load would give it now, or why it cannot be given (the asker then
    /// loads the usual way).
    pub fn snapshot(&mut self) -> Result<&Snapshot, String> {
        let guard = self.store.lock(false).map_err(|e| e.message)?;
        if dir_id(self.store.dir()).ok() != Some(self.id) {
            self.gone = true;
            return Err(".loopx/ was moved or replaced".into());
        }
        if self.store.needs_recovery().map_err(|e| e.message)? {
            return Err("a commit is unfinished".into());
        }
        self.drain()?;
        self.watch_fresh()?;
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
                        Watched::Other(sub)
                    };
                    self.watches.insert(wd, kind);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot watch {}: {e}", dir.display())),
            }
        }
        let mut files: Vec<_> = ROOT_FILES.iter().map(PathBuf::from).collect();
        for sub in ["gates", "agents"] {
            for (stem, _) in self.store.state_files(sub).map_err(|e| e.message)? {
                files.push(Path::new(sub).join(format!("{stem}.toml")));
            }
        }
        self.dirty.fresh.extend(files.into_iter().map(Fresh::Other));
        Ok(())
    }

    /// Watches the files named since the last call, each by its inode: a todo file under its
    /// stem, any other state file as such. Called before the files are read, so no write
    /// between the event and the watch goes unseen.
    fn watch_fresh(&mut self) -> Result<(), String> {
        for f in std::mem::take(&mut self.dirty.fresh) {
            let (path, stem) = match f {
                Fresh::Todo(stem) => (self.store.todo_path(&stem), Some(stem)),
                Fresh::Other(rel) => (self.store.dir().join(rel), None),
            };
            let wd = match self.ino.watch_file(&path) {
                Ok(wd) => wd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    return Err("no inotify watch left (fs.inotify.max_user_watches)".into());
                }
                Err(e) => return Err(format!("cannot watch {}: {e}", path.display())),
            };
            match (self.watches.get_mut(&wd), stem) {
                (Some(Watched::TodoFile(stems)), Some(stem)) => {
                    stems.insert(stem);
                }
                (_, Some(stem)) => {
                    self.watches
                        .insert(wd, Watched::TodoFile(BTreeSet::from([stem])));
                }
                (_, None) => {
                    self.watches.insert(wd, Watched::OtherFile);
                }
            }
        }
        Ok(())
    }

    /// Reads every queued event into `dirty`.
    fn drain(&mut self) -> Result<(), String> {
        let (watches, dirty, gone) = (&mut self.watches, &mut self.dirty, &mut self.gone);
        self.ino
            .drain(|e| {
                note(watches.get(&e.wd), e, dirty, gone);
                if e.mask & libc::IN_IGNORED != 0 && e.wd >= 0 {
                    watches.remove(&e.wd);
                }
            })
            .map_err(|e| format!("inotify: {e}"))
    }

    /// Reads `todos/` whole (through the disk cache), watching anew first.
    fn reload_todos(&mut self) -> Result<(), String> {
        self.watch_all()?;
        self.store.check_no_symlinks().map_err(|e| e.message)?;
        let cache = Cache::read(&self.store.cache_path());
        let (todos, problems, _) = self.store.read_todos(cache).map_err(|e| e.message)?;
        let stems = todos
            .keys()
            .chain(problems.keys())
            .cloned()
            .map(Fresh::Todo);
        self.dirty.fresh.extend(stems);
        self.watch_fresh()?;
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

/// What one event makes stale, and which new files to watch.
fn note(w: Option<&Watched>, e: &Event<'_>, dirty: &mut Dirty, gone: &mut bool) {
    if e.overflowed() {
        dirty.all = true;
        return;
    }
    let temp = e.name.first() == Some(&b'.');
    let named = e.mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0;
    match w {
        // A watch given up earlier (its directory was replaced).
        None => {}
        Some(Watched::Root) if e.dir_gone() => *gone = true,
        Some(Watched::Root) => note_root(e, temp, named, dirty),
        Some(Watched::TodoFile(stems)) => dirty.todos.extend(stems.iter().cloned()),
        Some(Watched::OtherFile) => dirty.rest = true,
        Some(_) if e.dir_gone() => dirty.all = true,
        Some(Watched::Other(sub)) if !temp => {
            dirty.rest = true;
            if named && let Ok(name) = std::str::from_utf8(e.name) {
                dirty.fresh.push(Fresh::Other(Path::new(sub).join(name)));
            }
        }
        Some(Watched::Todos) => {
            let stem = e
                .name
                .strip_suffix(b".toml")
                .and_then(|s| std::str::from_utf8(s).ok());
            if let Some(stem) = stem.filter(|_| !temp) {
                if named {
                    dirty.fresh.push(Fresh::Todo(stem.to_string()));
                }
                dirty.todos.insert(stem.to_string());
            }
        }
        Some(Watched::Other(_)) => {}
    }
}

/// An event of `.loopx/` itself.
fn note_root(e: &Event<'_>, temp: bool, named: bool, dirty: &mut Dirty) {
    if SUBDIRS.iter().any(|s| s.as_bytes() == e.name) {
        dirty.all = true;
    } else if !temp && !IGNORED.contains(&e.name) {
        dirty.rest = true;
        if named && let Ok(name) = std::str::from_utf8(e.name) {
            dirty.fresh.push(Fresh::Other(PathBuf::from(name)));
        }
    }
}

/// The device and inode of a directory.
fn dir_id(dir: &std::path::Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(dir)?;
    Ok((m.dev(), m.ino()))
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
