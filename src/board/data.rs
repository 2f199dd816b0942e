//! Reading `.loopx/` for the board: full and per-file loads as deltas, with per-file problems.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::{
    Action, Config, Error, Event, Evidence, Gate, QuotaFile, Snapshot, Status, Todo, Ts,
};
use crate::store::parse::{self, Named, shown};
use crate::store::{FileStore, Store, atomic};

/// How many journal events the board keeps for the activity feed and the Done column.
pub const JOURNAL_TAIL: usize = 400;
/// How many evidence entries of the selected todo the board reads.
pub const EVIDENCE_TAIL: usize = 200;
/// How many recently done todos the Done column shows at most.
pub const DONE_MAX: usize = 50;

/// A file that failed to read or parse: shown in the banner while the last good state stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file, relative to the project (`.loopx/todos/t-abc.toml`).
    pub file: String,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// A store error as a problem, at its file and line; `fallback` names the file otherwise.
    pub fn from_error(e: &Error, fallback: &str) -> Problem {
        match e.location.as_deref() {
            Some(l) => Problem {
                file: l.file.clone(),
                line: l.line,
                message: l.what.clone(),
            },
            None => Problem {
                file: fallback.to_string(),
                line: None,
                message: e.message.clone(),
            },
        }
    }

    /// `file:line: message`.
    pub fn display(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}: {}", self.file, self.message),
            None => format!("{}: {}", self.file, self.message),
        }
    }
}

/// A todo that left the working set recently (done or cancelled).
#[derive(Debug, Clone, PartialEq)]
pub struct DoneItem {
    /// Its id.
    pub id: String,
    /// Its title (or the id when the archive file is gone).
    pub title: String,
    /// Done or cancelled.
    pub status: Status,
    /// When.
    pub at: Ts,
    /// Who.
    pub by: String,
}

/// What a load found: applied to the board's state by [`crate::board::app::App`], without I/O.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// A whole new snapshot (a full load).
    pub full: Option<Snapshot>,
    /// A new `loopx.toml`.
    pub config: Option<Config>,
    /// A new `quota.toml`.
    pub quota: Option<QuotaFile>,
    /// Todos written.
    pub todos: Vec<Todo>,
    /// Todos gone from the working set.
    pub todos_removed: Vec<String>,
    /// Gates written.
    pub gates: Vec<Gate>,
    /// Gates gone.
    pub gates_removed: Vec<String>,
    /// Statuses of archived todos.
    pub archived: Vec<(String, Status)>,
    /// The journal's tail, newest last, when it changed.
    pub journal: Option<Vec<Event>>,
    /// The recently done todos, newest first, when the journal changed.
    pub done: Option<Vec<DoneItem>>,
    /// Files read without trouble this time: their problems are gone.
    pub ok_files: Vec<String>,
    /// Files that failed this time.
    pub problems: Vec<Problem>,
    /// Todos whose evidence changed.
    pub evidence_changed: Vec<String>,
    /// When the load happened.
    pub at: Ts,
}

impl Delta {
    /// True when nothing at all was found.
    pub fn is_empty(&self) -> bool {
        self.full.is_none()
            && self.config.is_none()
            && self.quota.is_none()
            && self.todos.is_empty()
            && self.todos_removed.is_empty()
            && self.gates.is_empty()
            && self.gates_removed.is_empty()
            && self.archived.is_empty()
            && self.journal.is_none()
            && self.ok_files.is_empty()
            && self.problems.is_empty()
            && self.evidence_changed.is_empty()
    }
}

/// Reads the store for the board; keeps a cache of archived titles for the Done column.
#[derive(Debug)]
pub struct Loader {
    store: FileStore,
    archive_cache: HashMap<String, Option<(String, Status)>>,
    owner_pub: Option<OwnerPub>,
}

/// What one changed path means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `loopx.toml`.
    Config,
    /// `quota.toml`.
    Quota,
    /// `journal.jsonl`.
    Journal,
    /// `todos/ID.toml`.
    Todo(String),
    /// `archive/ID.toml`.
    Archive(String),
    /// `gates/ID.toml`.
    Gate(String),
    /// `evidence/ID.jsonl`.
    Evidence(String),
    /// A directory itself (created or removed): reload it all.
    Everything,
    /// Not state: the lock, temp files, STATE.md, history.
    Ignore,
}

/// What a path under `.loopx/` is, for the watcher and the loader.
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
        ["owner.pub"] => Target::Everything,
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

impl Loader {
    /// A loader over a store.
    pub fn new(store: FileStore) -> Loader {
        Loader {
            store,
            archive_cache: HashMap::new(),
            owner_pub: None,
        }
    }

    /// The store read.
    pub fn store(&self) -> &FileStore {
        &self.store
    }

    fn rel(&self, sub: &str, name: &str) -> String {
        shown(&self.store.dir().join(sub).join(name))
    }

    /// Reads everything. Files that fail are problems; the rest loads.
    pub fn full(&mut self, now: Ts) -> Delta {
        let mut d = Delta {
            at: now,
            ..Delta::default()
        };
        let cfg_file = ".loopx/loopx.toml".to_string();
        let config = match self.store.read_config() {
            Ok(c) => {
                d.ok_files.push(cfg_file);
                Some(c)
            }
            Err(e) => {
                d.problems.push(Problem::from_error(&e, &cfg_file));
                None
            }
        };
        let mut todos = BTreeMap::new();
        for (id, r) in self.read_dir::<Todo>("todos") {
            match r {
                Ok(t) => {
                    d.ok_files.push(self.rel("todos", &format!("{id}.toml")));
                    todos.insert(id, t);
                }
                Err(p) => d.problems.push(p),
            }
        }
        self.owner_pub = match self.store.owner_pub() {
            Ok(k) => {
                d.ok_files.push(".loopx/owner.pub".into());
                k
            }
            Err(e) => {
                d.problems.push(Problem::from_error(&e, ".loopx/owner.pub"));
                None
            }
        };
        let mut gates = BTreeMap::new();
        for (id, r) in self.read_dir::<Gate>("gates") {
            match r {
                Ok(mut g) => {
                    g.proven = authority::gate_proven(&g, self.owner_pub.as_ref());
                    d.ok_files.push(self.rel("gates", &format!("{id}.toml")));
                    gates.insert(id, g);
                }
                Err(p) => d.problems.push(p),
            }
        }
        let quota = match self.read_quota() {
            Ok(q) => {
                d.ok_files.push(".loopx/quota.toml".into());
                q
            }
            Err(p) => {
                d.problems.push(p);
                QuotaFile::default()
            }
        };
        let mut archived = HashMap::new();
        for t in todos.values() {
            for dep in &t.depends_on {
                if todos.contains_key(dep) || archived.contains_key(dep) {
                    continue;
                }
                if let Some((_, s)) = self.archived(dep) {
                    archived.insert(dep.clone(), s);
                }
            }
        }
        self.journal_into(&mut d);
        if let Some(config) = config {
            d.full = Some(Snapshot {
                quarantined: Default::default(),
                owner_notes: Vec::new(),
                seal: None,
                config,
                todos,
                gates,
                quota,
                archived,
            });
        } else {
            // No goal file: keep whatever was shown, but still take the parts that did load.
            d.todos = todos.into_values().collect();
            d.gates = gates.into_values().collect();
            d.quota = Some(quota);
        }
        d
    }

    /// Reads only what these paths name; `Everything` falls back to a full load.
    pub fn changed(&mut self, paths: &[PathBuf], now: Ts) -> Delta {
        let mut targets: Vec<Target> = paths
            .iter()
            .map(|p| classify(self.store.dir(), p))
            .collect();
        targets.sort_by_key(|t| format!("{t:?}"));
        targets.dedup();
        if targets.contains(&Target::Everything) {
            return self.full(now);
        }
        let mut d = Delta {
            at: now,
            ..Delta::default()
        };
        for t in targets {
            match t {
                Target::Config => match self.store.read_config() {
                    Ok(c) => {
                        d.ok_files.push(".loopx/loopx.toml".into());
                        d.config = Some(c);
                    }
                    Err(e) => d
                        .problems
                        .push(Problem::from_error(&e, ".loopx/loopx.toml")),
                },
                Target::Quota => match self.read_quota() {
                    Ok(q) => {
                        d.ok_files.push(".loopx/quota.toml".into());
                        d.quota = Some(q);
                    }
                    Err(p) => d.problems.push(p),
                },
                Target::Journal => self.journal_into(&mut d),
                Target::Todo(id) => {
                    let name = format!("{id}.toml");
                    let path = self.store.dir().join("todos").join(&name);
                    match read_one::<Todo>(&path, &id) {
                        Ok(Some(t)) => {
                            d.ok_files.push(shown(&path));
                            d.todos.push(t);
                        }
                        Ok(None) => {
                            d.ok_files.push(shown(&path));
                            d.todos_removed.push(id);
                        }
                        Err(p) => d.problems.push(p),
                    }
                }
                Target::Gate(id) => {
                    let path = self.store.dir().join("gates").join(format!("{id}.toml"));
                    match read_one::<Gate>(&path, &id) {
                        Ok(Some(mut g)) => {
                            g.proven = authority::gate_proven(&g, self.owner_pub.as_ref());
                            d.ok_files.push(shown(&path));
                            d.gates.push(g);
                        }
                        Ok(None) => {
                            d.ok_files.push(shown(&path));
                            d.gates_removed.push(id);
                        }
                        Err(p) => d.problems.push(p),
                    }
                }
                Target::Archive(id) => {
                    self.archive_cache.remove(&id);
                    if let Some((_, s)) = self.archived(&id) {
                        d.archived.push((id, s));
                    }
                }
                Target::Evidence(id) => d.evidence_changed.push(id),
                Target::Everything | Target::Ignore => {}
            }
        }
        d
    }

    /// The last evidence entries of a todo, newest first.
    pub fn evidence(&self, id: &str) -> Result<Vec<Evidence>, Problem> {
        let mut v = self
            .store
            .evidence_tail(id, EVIDENCE_TAIL)
            .map_err(|e| Problem::from_error(&e, &shown(&self.store.evidence_path(id))))?;
        v.reverse();
        Ok(v)
    }

    fn read_quota(&self) -> Result<QuotaFile, Problem> {
        let p = self.store.path("quota.toml");
        parse::read::<QuotaFile>(&p)
            .map(Option::unwrap_or_default)
            .map_err(|e| Problem::from_error(&e, &shown(&p)))
    }

    fn archived(&mut self, id: &str) -> Option<(String, Status)> {
        if let Some(c) = self.archive_cache.get(id) {
            return c.clone();
        }
        let v = self
            .store
            .archived_todo(id)
            .ok()
            .flatten()
            .map(|t| (t.title, t.status));
        self.archive_cache.insert(id.to_string(), v.clone());
        v
    }

    fn journal_into(&mut self, d: &mut Delta) {
        match self.store.journal_tail(JOURNAL_TAIL) {
            Ok(events) => {
                let mut done = Vec::new();
                for ev in events.iter().rev() {
                    if done.len() >= DONE_MAX {
                        break;
                    }
                    let status = match ev.action {
                        Action::TodoDone => Status::Done,
                        Action::TodoCancel => Status::Cancelled,
                        _ => continue,
                    };
                    if done.iter().any(|x: &DoneItem| x.id == ev.target) {
                        continue;
                    }
                    let (title, status) = self
                        .archived(&ev.target)
                        .unwrap_or((ev.target.clone(), status));
                    done.push(DoneItem {
                        id: ev.target.clone(),
                        title,
                        status,
                        at: ev.at,
                        by: ev.actor.clone(),
                    });
                }
                d.ok_files.push(".loopx/journal.jsonl".into());
                d.done = Some(done);
                d.journal = Some(events);
            }
            Err(e) => d
                .problems
                .push(Problem::from_error(&e, ".loopx/journal.jsonl")),
        }
    }

    fn read_dir<T: serde::de::DeserializeOwned + Named>(
        &self,
        sub: &str,
    ) -> Vec<(String, Result<T, Problem>)> {
        let dir = self.store.dir().join(sub);
        let Ok(rd) = fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in rd.filter_map(|e| e.ok()) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let Some(stem) = name.strip_suffix(".toml") else {
                continue;
            };
            match read_one::<T>(&entry.path(), stem) {
                Ok(Some(v)) => out.push((stem.to_string(), Ok(v))),
                Ok(None) => {}
                Err(p) => out.push((stem.to_string(), Err(p))),
            }
        }
        out
    }
}

/// Reads one state file and checks its id matches its name; `None` when it is gone.
fn read_one<T: serde::de::DeserializeOwned + Named>(
    path: &Path,
    stem: &str,
) -> Result<Option<T>, Problem> {
    parse::read_named::<T>(path, stem).map_err(|e| Problem::from_error(&e, &shown(path)))
}
