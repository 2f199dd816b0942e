//! Reading for a face that stays open (the board): a full tolerant load, and a reload of only the
//! files that changed, each returning the files' own values beside the seal-checked snapshot.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::{Error, GateStatus, Result, Snapshot, Todo, id};
use crate::store::cache::Cache;
use crate::store::core::decisions::gate_signed_by;
use crate::store::fs::FileStore;
use crate::store::parse;

/// A snapshot as the files say and as loopx acts on it.
#[derive(Debug, Clone)]
pub struct View {
    /// The files' values (quarantine included), before the owner's seal: the base of a reload.
    pub raw: Snapshot,
    /// `raw` checked against the owner's seal: what the rules act on, with its `owner_notes`.
    pub snap: Snapshot,
}

/// What one changed path means to a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// `todos/ID.toml`.
    Todo(String),
    /// `gates/ID.toml`.
    Gate(String),
    /// `archive/ID.toml`: the status a dependent todo sees.
    Archive(String),
    /// `journal.jsonl`: only the seal's mark is checked again.
    Journal,
    /// `loopx.toml`, `quota.toml`, the owner's files, a directory: load it all.
    Whole,
    /// Not part of a snapshot (evidence, the cache, temp files, the lock, STATE.md).
    Other,
}

/// What a path under `.loopx/` means to a snapshot.
fn part(dir: &Path, path: &Path) -> Part {
    let Ok(rel) = path.strip_prefix(dir) else {
        return Part::Other;
    };
    let parts: Vec<&str> = rel.iter().filter_map(|p| p.to_str()).collect();
    let stem = |name: &str| {
        name.strip_suffix(".toml")
            .filter(|s| !s.is_empty() && !name.starts_with('.'))
            .map(str::to_string)
    };
    match parts.as_slice() {
        [] => Part::Whole,
        ["loopx.toml" | "quota.toml" | "owner.pub" | "owner.seal" | "owner.proofs"] => Part::Whole,
        ["todos" | "gates" | "archive"] => Part::Whole,
        ["journal.jsonl"] => Part::Journal,
        ["todos", name] => stem(name).map_or(Part::Other, Part::Todo),
        ["gates", name] => stem(name).map_or(Part::Other, Part::Gate),
        ["archive", name] => stem(name).map_or(Part::Other, Part::Archive),
        _ => Part::Other,
    }
}

impl FileStore {
    /// Loads every file under the shared lock, tolerantly (a malformed todo or gate file is
    /// quarantined), after finishing an interrupted commit; the files' values and the sealed view.
    pub fn load_view(&self) -> Result<View> {
        let cache = Cache::read(&self.cache_path());
        let (view, refresh) = self.shared(|| {
            let (raw, refresh) = self.load_files(cache)?;
            Ok((self.sealed(raw)?, refresh))
        })?;
        self.refresh_cache(refresh);
        Ok(view)
    }

    /// Reads again only the files in `changed`, on top of `prev` (the `raw` of the last view,
    /// taken so that it is not copied), with the same quarantine rules as a full load, and checks
    /// the result against the owner's seal from scratch. A change to `loopx.toml`, `quota.toml`,
    /// the owner's files or a directory itself, or an interrupted commit, makes it a full load.
    pub fn reload(&self, prev: Snapshot, changed: &[PathBuf]) -> Result<View> {
        let parts: Vec<Part> = changed.iter().map(|p| part(self.dir(), p)).collect();
        if parts.contains(&Part::Whole) {
            return self.load_view();
        }
        let g = self.lock(false)?;
        if self.needs_recovery()? {
            drop(g);
            return self.load_view();
        }
        self.check_no_symlinks()?;
        let mut raw = prev;
        let key = self.owner_pub()?;
        let mut proofs = None;
        for p in &parts {
            match p {
                Part::Todo(id) => self.reread_todo(&mut raw, id)?,
                Part::Gate(id) => self.reread_gate(&mut raw, id, key.as_ref(), &mut proofs)?,
                Part::Archive(id) => {
                    raw.archived.remove(id);
                }
                Part::Journal | Part::Whole | Part::Other => {}
            }
        }
        raw.archived = self.dep_statuses(&raw);
        let view = self.sealed(raw);
        drop(g);
        view
    }

    /// Runs `f` under the shared lock, after finishing an interrupted commit under the exclusive one.
    fn shared<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let g = self.lock(false)?;
        if self.needs_recovery()? {
            drop(g);
            let _x = self.lock(true)?;
            self.recover()?;
            return f();
        }
        f()
    }

    /// The view of the files' values: a copy checked against the owner's seal (the caller holds
    /// the lock).
    fn sealed(&self, raw: Snapshot) -> Result<View> {
        let mut snap = raw.clone();
        let key = self.owner_pub()?;
        self.check_seal(&mut snap, key.as_ref());
        Ok(View { raw, snap })
    }

    /// Reads one todo file again: written, gone, or quarantined.
    fn reread_todo(&self, raw: &mut Snapshot, id: &str) -> Result<()> {
        let path = self.dir().join("todos").join(format!("{id}.toml"));
        raw.quarantined.remove(id);
        let read = match meta_of(&path) {
            Ok(Some(meta)) => self.read_state::<Todo>(&path, id, &meta),
            Ok(None) => Ok(None),
            Err(e) => {
                raw.todos.remove(id);
                return Err(e);
            }
        };
        // A todo that stays is replaced where it is: taking it out first and putting it back
        // would move every todo after it twice.
        match read {
            Ok(Some(t)) => {
                raw.todos.insert(id.to_string(), t);
            }
            Ok(None) => {
                raw.todos.remove(id);
            }
            Err(p) => {
                raw.todos.remove(id);
                raw.quarantined.insert(id.to_string(), p);
            }
        }
        Ok(())
    }

    /// Reads one gate file again: written, gone, or unreadable (a pending global gate).
    fn reread_gate(
        &self,
        raw: &mut Snapshot,
        id: &str,
        key: Option<&OwnerPub>,
        proofs: &mut Option<BTreeSet<String>>,
    ) -> Result<()> {
        let path = self.dir().join("gates").join(format!("{id}.toml"));
        raw.gates.remove(id);
        raw.quarantined.remove(id);
        let Some(meta) = meta_of(&path)? else {
            return Ok(());
        };
        match self.read_state::<crate::kernel::Gate>(&path, id, &meta) {
            Ok(Some(mut g)) => {
                if g.status != GateStatus::Pending && proofs.is_none() {
                    *proofs = Some(key.map(|k| self.read_decisions(k)).unwrap_or_default());
                }
                let none = BTreeSet::new();
                g.signed = gate_signed_by(&g, proofs.as_ref().unwrap_or(&none), key, &raw.config);
                raw.gates.insert(id.to_string(), g);
            }
            Ok(None) => {}
            Err(p) => {
                raw.gates
                    .insert(id.to_string(), authority::unreadable_gate(id, &p));
                raw.quarantined.insert(id.to_string(), p);
            }
        }
        Ok(())
    }

    /// The status of every archived todo a working todo depends on, as a full load finds them:
    /// those `raw` knows kept, the others read from `archive/`.
    fn dep_statuses(&self, raw: &Snapshot) -> HashMap<String, crate::kernel::Status> {
        let mut out = HashMap::new();
        for t in raw.todos.values() {
            for dep in &t.depends_on {
                if raw.todos.contains_key(dep)
                    || out.contains_key(dep)
                    || id::check_not_path(dep).is_err()
                {
                    continue;
                }
                if let Some(s) = raw.archived.get(dep) {
                    out.insert(dep.clone(), *s);
                } else if let Ok(Some(a)) = self.archived_status(dep) {
                    out.insert(dep.clone(), a);
                }
            }
        }
        out
    }

    /// The status in `archive/ID.toml`, if it reads.
    fn archived_status(&self, id: &str) -> Result<Option<crate::kernel::Status>> {
        let p = self.dir().join("archive").join(format!("{id}.toml"));
        Ok(parse::read::<Todo>(&p)?.map(|t| t.status))
    }
}

/// A file's own metadata (never through a link), or `None` when it is gone.
fn meta_of(path: &Path) -> Result<Option<fs::Metadata>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, &e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_of_paths() {
        let d = Path::new("/p/.loopx");
        assert_eq!(part(d, &d.join("todos/t-1.toml")), Part::Todo("t-1".into()));
        assert_eq!(part(d, &d.join("gates/g-1.toml")), Part::Gate("g-1".into()));
        assert_eq!(
            part(d, &d.join("archive/t-1.toml")),
            Part::Archive("t-1".into())
        );
        assert_eq!(part(d, &d.join("journal.jsonl")), Part::Journal);
        assert_eq!(part(d, &d.join("owner.seal")), Part::Whole);
        assert_eq!(part(d, &d.join("todos")), Part::Whole);
        assert_eq!(part(d, &d.join("todos/.t-1.toml.tmp-x")), Part::Other);
        assert_eq!(part(d, &d.join("evidence/t-1.jsonl")), Part::Other);
        assert_eq!(part(d, Path::new("/elsewhere/x")), Part::Other);
    }
}
