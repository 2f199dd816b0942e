//! Loading a snapshot from `.loopx/`: the listing of each state directory, the todo cache, and
//! the quarantine of files that cannot be read.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use crate::kernel::authority;
use crate::kernel::id;
use crate::kernel::{Error, Gate, GateStatus, Problem, QuotaFile, Result, Snapshot, Todo, TodoMap};
use crate::store::cache::listing::{self, Stat};
use crate::store::cache::{Cache, Refresh};
use crate::store::core::decisions::gate_signed_by;
use crate::store::fs::FileStore;
use crate::store::parse::{self, Named, shown};

/// The todo cache's rows, in `.loopx/`.
pub(crate) const ROWS: &str = "cache/todos.bin";
/// The kept listing of `todos/`, in `.loopx/`.
pub(crate) const NAMES: &str = "cache/todos.names";

/// Todos read from `todos/`: the good ones, the quarantined ones, and a cache refresh to do.
type Todos = (TodoMap, BTreeMap<String, Problem>, Option<Refresh>);

impl FileStore {
    /// The `ID.toml` files of a state subdirectory (no dotfiles or temp files), as (id, entry).
    pub(super) fn state_files(&self, sub: &str) -> Result<Vec<(String, fs::DirEntry)>> {
        let dir = self.dir().join(sub);
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&dir, &e)),
        };
        let mut out = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| Error::io(&dir, &e))?;
            let name = entry.file_name();
            let stem = name
                .to_str()
                .filter(|n| !n.starts_with('.'))
                .and_then(|n| n.strip_suffix(".toml"))
                .map(str::to_string);
            if let Some(stem) = stem {
                out.push((stem, entry));
            }
        }
        Ok(out)
    }

    /// Reads every `*.toml` in a state subdirectory, checking each file's name matches its id.
    pub(super) fn read_dir_toml<T>(&self, sub: &str) -> Result<BTreeMap<String, T>>
    where
        T: serde::de::DeserializeOwned + Named,
    {
        let mut out = BTreeMap::new();
        for (stem, entry) in self.state_files(sub)? {
            if let Some(v) = parse::read_named::<T>(&entry.path(), &stem)? {
                out.insert(stem, v);
            }
        }
        Ok(out)
    }

    /// Refuses state directories that are symlinks (they could lead out of `.loopx/`).
    pub(super) fn check_no_symlinks(&self) -> Result<()> {
        for sub in ["todos", "archive", "gates", "evidence", "cache", "agents"] {
            let p = self.dir().join(sub);
            if fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(parse::symlink_error(&p));
            }
        }
        Ok(())
    }

    /// Reads the working set, from the cache where a file is unchanged. The cached rows are
    /// decoded while the files are stat-ed; a row is kept only if its file has the key it was
    /// cached under.
    pub(super) fn read_todos(&self, cache: Cache) -> Result<Todos> {
        let dir = self.dir().join("todos");
        let now_ns = crate::store::cache::now_ns();
        let Some((listing, (mut out, cached))) =
            listing::list_with(&dir, &self.path(NAMES), now_ns, |names| cache.decode(names))
                .map_err(|e| Error::io(&dir, &e))?
        else {
            return Ok(Default::default());
        };
        drop(cache);
        let mut quarantined = BTreeMap::new();
        let mut settled_misses = 0;
        let mut keys = Vec::with_capacity(out.len());
        for (((stem, todo), stat), was) in out.iter_mut().zip(listing.stats).zip(cached) {
            let key = match stat {
                Stat::Gone => None,
                Stat::File(k) if was == Some(k) => Some(k),
                Stat::File(k) | Stat::Other(k) => {
                    settled_misses += usize::from(k.is_settled(now_ns));
                    match self.read_missed(&dir, stem) {
                        Ok(Some(t)) => {
                            *todo = Some(t);
                            Some(k)
                        }
                        Ok(None) => None,
                        Err(p) => {
                            quarantined.insert(stem.clone(), p);
                            None
                        }
                    }
                }
            };
            match key {
                Some(k) => keys.push(k),
                None => *todo = None,
            }
        }
        let todos: TodoMap = out.into_iter().filter_map(|(s, t)| Some((s, t?))).collect();
        let rows = Cache::worth_rewrite(settled_misses, todos.len()).then(|| {
            let read = todos.iter().zip(keys);
            read.map(|((s, t), k)| (s.clone(), k, t.clone())).collect()
        });
        let refresh = (rows.is_some() || listing.keep.is_some()).then_some(Refresh {
            rows,
            names: listing.keep,
            now_ns,
        });
        Ok((todos, quarantined, refresh))
    }

    /// Reads a todo file the cache did not have; `Ok(None)` when it is gone.
    pub(super) fn read_missed(
        &self,
        dir: &Path,
        stem: &str,
    ) -> std::result::Result<Option<Todo>, Problem> {
        let path = dir.join(format!("{stem}.toml"));
        match fs::symlink_metadata(&path) {
            Ok(meta) => self.read_state::<Todo>(&path, stem, &meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Problem::of(&Error::io(&path, &e), &shown(&path))),
        }
    }

    /// Reads one state file of a directory listing; a file that cannot be read is a `Problem`
    /// (quarantined), except an I/O failure of the disk itself.
    pub(super) fn read_state<T>(
        &self,
        path: &Path,
        stem: &str,
        meta: &fs::Metadata,
    ) -> std::result::Result<Option<T>, Problem>
    where
        T: serde::de::DeserializeOwned + Named,
    {
        let problem = |e: Error| Problem::of(&e, &shown(path));
        if meta.file_type().is_symlink() {
            return Err(problem(parse::symlink_error(path)));
        }
        parse::read_named::<T>(path, stem).map_err(problem)
    }

    /// Writes the cache a load asked for. Safe without the lock: every entry carries the key of
    /// the file version it was read from, and is used only while the file still has that key.
    pub(super) fn refresh_cache(&self, refresh: Option<Refresh>) {
        let Some(r) = refresh else { return };
        if let Some(rows) = &r.rows {
            let list: Vec<_> = rows.iter().map(|(s, k, t)| (s.as_str(), *k, t)).collect();
            Cache::write(&self.cache_path(), &list, r.now_ns);
        }
        if let Some(names) = &r.names {
            names.write(&self.path(NAMES));
        }
    }

    pub(super) fn cache_path(&self) -> PathBuf {
        self.path(ROWS)
    }

    /// Loads the snapshot without taking the lock (the caller holds it).
    pub fn load_unlocked(&self) -> Result<Snapshot> {
        let (snap, refresh) = self.load_with(Cache::read(&self.cache_path()))?;
        self.refresh_cache(refresh);
        Ok(snap)
    }

    /// The snapshot as the files say, without the owner's seal applied (for the owner to adopt).
    pub(crate) fn load_raw(&self) -> Result<Snapshot> {
        let (mut snap, _) = self.load_files(Cache::default())?;
        snap.seal = None;
        Ok(snap)
    }

    /// Loads the snapshot with a cache read beforehand (outside the lock: it is checked under
    /// it), checked against the owner's seal.
    pub(super) fn load_with(&self, cache: Cache) -> Result<(Snapshot, Option<Refresh>)> {
        let (mut snap, refresh) = self.load_files(cache)?;
        let key = self.owner_pub()?;
        self.check_seal(&mut snap, key.as_ref());
        Ok((snap, refresh))
    }

    /// Loads the snapshot as the files say.
    pub(super) fn load_files(&self, cache: Cache) -> Result<(Snapshot, Option<Refresh>)> {
        self.check_no_symlinks()?;
        let config = self.read_config()?;
        let (todos, quarantined, refresh) = self.read_todos(cache)?;
        Ok((self.assemble(config, todos, quarantined)?, refresh))
    }

    /// The snapshot around todos already read: the gates and their proofs, the quota, the
    /// agents, and the state of archived todos that todos depend on.
    pub(super) fn assemble(
        &self,
        config: crate::kernel::Config,
        todos: TodoMap,
        mut quarantined: BTreeMap<String, Problem>,
    ) -> Result<Snapshot> {
        let mut gates = self.read_gates(&mut quarantined)?;
        let key = self.owner_pub()?;
        // One signature over owner.proofs stands for many decisions; a decision not listed
        // there is checked on its own.
        let decided = gates.values().any(|g| g.status != GateStatus::Pending);
        let proofs = match &key {
            Some(k) if decided => self.read_decisions(k),
            _ => Default::default(),
        };
        for g in gates
            .values_mut()
            .filter(|g| !quarantined.contains_key(&g.id))
        {
            g.signed = gate_signed_by(g, &proofs, key.as_ref(), &config);
        }
        let quota = parse::read::<QuotaFile>(&self.path("quota.toml"))?.unwrap_or_default();
        let agents = self.read_agents(&mut quarantined)?;
        let mut archived = HashMap::new();
        for t in todos.values() {
            for dep in &t.depends_on {
                if todos.contains_key(dep)
                    || archived.contains_key(dep)
                    || id::check_not_path(dep).is_err()
                {
                    continue;
                }
                // An unreadable archived todo counts as not done: its dependents wait.
                if let Ok(Some(a)) = parse::read::<Todo>(&self.archive_path(dep)) {
                    archived.insert(dep.clone(), a.status);
                }
            }
        }
        Ok(Snapshot {
            config,
            todos,
            gates,
            quota,
            archived,
            quarantined,
            owner_notes: Vec::new(),
            seal: None,
            unsealed: false,
            agents,
            reserve_budget: Default::default(),
        })
    }

    /// Reads agents' own declarations (`agents/ID.toml`); a file that cannot be read is
    /// quarantined (as `agents/ID`) and that agent has no declared capabilities.
    pub(super) fn read_agents(
        &self,
        quarantined: &mut BTreeMap<String, Problem>,
    ) -> Result<BTreeMap<String, crate::kernel::model::AgentInfo>> {
        let mut out = BTreeMap::new();
        for (stem, entry) in self.state_files("agents")? {
            let path = entry.path();
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&path, &e)),
            };
            match self.read_state(&path, &stem, &meta) {
                Ok(Some(a)) => {
                    out.insert(stem, a);
                }
                Ok(None) => {}
                Err(p) => {
                    quarantined.insert(format!("agents/{stem}"), p);
                }
            }
        }
        Ok(out)
    }

    /// Reads every gate; a gate file that cannot be read counts as a pending global gate (fail
    /// closed) and is named in `quarantined`.
    pub(super) fn read_gates(
        &self,
        quarantined: &mut BTreeMap<String, Problem>,
    ) -> Result<BTreeMap<String, Gate>> {
        let mut out = BTreeMap::new();
        for (stem, entry) in self.state_files("gates")? {
            let path = entry.path();
            let meta = match fs::symlink_metadata(&path) {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&path, &e)),
            };
            match self.read_state::<Gate>(&path, &stem, &meta) {
                Ok(Some(g)) => {
                    out.insert(stem, g);
                }
                Ok(None) => {}
                Err(p) => {
                    out.insert(stem.clone(), authority::unreadable_gate(&stem, &p));
                    quarantined.insert(stem, p);
                }
            }
        }
        Ok(out)
    }
}
