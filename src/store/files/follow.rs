//! Following the files: named by the project's root, reloaded by the files that changed, heard
//! through file events on `.loopx/` (notify with a full debouncer on the directory), or by
//! polling its files when events fail or stop; and what a path in it is.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};

use crate::kernel::{Result, Snapshot, Ts};
use crate::store::follow::{Feed, Followed, Loaded, Signal, Sink, Target};
use crate::store::parse::shown;
use crate::store::{Env, FileStore};
use crate::store::{Store, atomic, lock};

/// How long the journal may grow without a file event before the feed polls instead.
const SILENT: Duration = Duration::from_millis(1500);

impl Followed for FileStore {
    fn name(&self) -> String {
        self.root().display().to_string()
    }

    fn whole(&self) -> String {
        shown(self.dir())
    }

    fn evidence_name(&self, id: &str) -> String {
        shown(&self.evidence_path(id))
    }

    fn load_followed(&self) -> Result<Loaded> {
        self.load_view().map(|v| (Some(v.raw), v.snap))
    }

    fn target(&self, path: &Path) -> Target {
        classify(self.dir(), path)
    }

    fn reload_followed(&self, base: Snapshot, changed: &[PathBuf]) -> Result<Loaded> {
        self.reload(base, changed).map(|v| (Some(v.raw), v.snap))
    }

    fn evidence_by_journal(&self) -> bool {
        false
    }

    fn follow(&self, poll: bool, sink: Sink) -> Result<(Box<dyn Feed>, Option<String>)> {
        let (feed, why) = FileFeed::start(self.dir(), poll, sink);
        Ok((Box::new(feed), why))
    }

    fn sealing(&self, now: Ts, wait: Duration) -> Option<Box<dyn Store + Sync>> {
        let env = Env {
            now,
            lock_wait: wait,
            ..self.env().clone()
        };
        Some(Box::new(self.clone().with_env(env)))
    }
}

/// File events on `.loopx/`, with polling when they fail or do not arrive.
#[derive(Debug)]
struct FileFeed {
    dir: PathBuf,
    poller: Option<Poller>,
    events: Option<Events>,
    journal_seen: Option<(u64, Option<SystemTime>)>,
    unseen_since: Option<Instant>,
    last_event: Instant,
}

impl FileFeed {
    /// Follows `dir` by its file events (or polls it: asked to, on a network file system, or
    /// when the events fail, and then says why).
    fn start(dir: &Path, poll: bool, sink: Sink) -> (FileFeed, Option<String>) {
        let mut f = FileFeed {
            dir: dir.to_path_buf(),
            poller: None,
            events: None,
            journal_seen: journal_stamp(dir),
            unseen_since: None,
            last_event: Instant::now(),
        };
        let why = if poll {
            Some("--poll".into())
        } else if let Some(fs) = lock::network_fs(dir) {
            Some(format!("{fs}: no events there"))
        } else {
            match events(dir, move |s| {
                let _ = sink(s);
            }) {
                Ok(w) => {
                    f.events = Some(w);
                    None
                }
                Err(e) => Some(format!("watch failed: {e}")),
            }
        };
        if why.is_some() {
            f.poller = Some(Poller::new(dir));
        }
        (f, why)
    }
}

impl Feed for FileFeed {
    fn tick(&mut self) -> (Vec<PathBuf>, Option<String>) {
        if let Some(p) = self.poller.as_mut() {
            return (p.scan(), None);
        }
        // No events while the journal grows: events do not arrive here, so poll.
        let stamp = journal_stamp(&self.dir);
        if stamp == self.journal_seen {
            return (Vec::new(), None);
        }
        match self.unseen_since {
            None => self.unseen_since = Some(Instant::now()),
            Some(t) if self.last_event < t && t.elapsed() >= SILENT => {
                return (Vec::new(), Some("no file events arrive".into()));
            }
            Some(_) => {}
        }
        (Vec::new(), None)
    }

    fn poll_instead(&mut self) -> bool {
        if self.poller.is_some() {
            return false;
        }
        self.poller = Some(Poller::new(&self.dir));
        self.events = None;
        true
    }

    fn saw_changes(&mut self) {
        self.last_event = Instant::now();
        self.journal_seen = journal_stamp(&self.dir);
        self.unseen_since = None;
    }
}

/// How long a burst of raw events is folded into one.
pub const DEBOUNCE: Duration = Duration::from_millis(150);
/// How often the poller scans.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// What a path under `.loopx/` is, for its file events and a reload.
pub fn classify(dir: &Path, path: &Path) -> Target {
    let Ok(rel) = path.strip_prefix(dir) else {
        return Target::Ignore;
    };
    let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
    let stem = |name: &str, ext: &str| {
        name.strip_suffix(ext)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    match parts.as_slice() {
        [] => Target::Everything,
        [name] if atomic::is_temp_name(name) || name.starts_with('.') => Target::Ignore,
        ["loopx.toml"] => Target::Config,
        ["owner.pub" | "owner.seal" | "owner.proofs"] => Target::Everything,
        ["quota.toml"] => Target::Quota,
        ["journal.jsonl"] => Target::Journal,
        ["todos" | "gates" | "archive" | "evidence"] => Target::Everything,
        [_, name] if atomic::is_temp_name(name) || name.starts_with('.') => Target::Ignore,
        ["todos", name] => stem(name, ".toml").map_or(Target::Ignore, Target::Todo),
        ["archive", name] => stem(name, ".toml").map_or(Target::Ignore, Target::Archive),
        ["gates", name] => stem(name, ".toml").map_or(Target::Ignore, Target::Gate),
        ["evidence", name] => stem(name, ".jsonl").map_or(Target::Ignore, Target::Evidence),
        _ => Target::Ignore,
    }
}

/// The paths of a raw notify event that matter: not access events, not temp files, not the lock.
pub fn relevant(dir: &Path, kind: &EventKind, paths: &[PathBuf]) -> Vec<PathBuf> {
    if matches!(kind, EventKind::Access(_)) {
        return Vec::new();
    }
    paths
        .iter()
        .filter(|p| classify(dir, p) != Target::Ignore)
        .cloned()
        .collect()
}

/// File events on a directory; dropping it stops them.
pub struct Events {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Events")
    }
}

/// Hears file events under `dir`; each debounced batch that matters is sent through `send`.
pub fn events<F>(dir: &Path, send: F) -> std::result::Result<Events, String>
where
    F: Fn(Signal) + Send + 'static,
{
    let root = dir.to_path_buf();
    let mut deb = new_debouncer(DEBOUNCE, None, move |res: DebounceEventResult| match res {
        Ok(events) => {
            let mut rescan = false;
            let mut paths = Vec::new();
            for e in &events {
                if e.need_rescan() {
                    rescan = true;
                }
                paths.extend(relevant(&root, &e.kind, &e.paths));
            }
            if rescan {
                send(Signal::Rescan);
            } else if !paths.is_empty() {
                paths.sort();
                paths.dedup();
                send(Signal::Changed(paths));
            }
        }
        Err(errs) => {
            let msg = errs
                .first()
                .map(|e| e.to_string())
                .unwrap_or_else(|| "watch error".into());
            send(Signal::Failed(msg));
        }
    })
    .map_err(|e| e.to_string())?;
    deb.watch(dir, RecursiveMode::Recursive)
        .map_err(|e| e.to_string())?;
    Ok(Events { _debouncer: deb })
}

/// The polling fallback: compares sizes and modification times of the state files.
#[derive(Debug, Default)]
pub struct Poller {
    dir: PathBuf,
    seen: HashMap<PathBuf, (u64, Option<SystemTime>)>,
}

impl Poller {
    /// A poller over `dir`, primed with what is there now.
    pub fn new(dir: &Path) -> Poller {
        let mut p = Poller {
            dir: dir.to_path_buf(),
            seen: HashMap::new(),
        };
        p.seen = p.stat_all();
        p
    }

    fn stat_all(&self) -> HashMap<PathBuf, (u64, Option<SystemTime>)> {
        let mut out = HashMap::new();
        let mut add = |p: PathBuf| {
            if let Ok(m) = fs::metadata(&p) {
                out.insert(p, (m.len(), m.modified().ok()));
            }
        };
        for f in ["loopx.toml", "quota.toml", "journal.jsonl"] {
            add(self.dir.join(f));
        }
        for sub in ["todos", "gates", "archive", "evidence"] {
            let Ok(rd) = fs::read_dir(self.dir.join(sub)) else {
                continue;
            };
            for e in rd.filter_map(|e| e.ok()) {
                let p = e.path();
                if classify(&self.dir, &p) != Target::Ignore {
                    add(p);
                }
            }
        }
        out
    }

    /// The files created, changed or removed since the last scan.
    pub fn scan(&mut self) -> Vec<PathBuf> {
        let now = self.stat_all();
        let mut changed: Vec<PathBuf> = now
            .iter()
            .filter(|(p, v)| self.seen.get(*p) != Some(*v))
            .map(|(p, _)| p.clone())
            .collect();
        changed.extend(self.seen.keys().filter(|p| !now.contains_key(*p)).cloned());
        changed.sort();
        self.seen = now;
        changed
    }
}

/// The size and modification time of the journal: it grows with every mutation.
pub fn journal_stamp(dir: &Path) -> Option<(u64, Option<SystemTime>)> {
    fs::metadata(dir.join("journal.jsonl"))
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
}
