//! Watching `.loopx/`: what a path in it is, notify with a full debouncer on the directory, and
//! a polling fallback.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use notify::{EventKind, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};

use crate::store::atomic;
use crate::store::live::{Signal, Target};

/// How long a burst of raw events is folded into one.
pub const DEBOUNCE: Duration = Duration::from_millis(150);
/// How often the poller scans.
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// What a path under `.loopx/` is, for the watcher and a reload.
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

/// A live watcher; dropping it stops watching.
pub struct Watch {
    _debouncer: Debouncer<notify::RecommendedWatcher, RecommendedCache>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

/// Watches `dir` recursively; each debounced batch that matters is sent through `send`.
pub fn watch<F>(dir: &Path, send: F) -> Result<Watch, String>
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
    Ok(Watch { _debouncer: deb })
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
