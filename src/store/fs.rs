//! The file store: `.loopx/` as TOML files, one lock, atomic writes and the journal.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use crate::kernel::GateStatus;
use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::id::{self, Kind};
use crate::kernel::ops::{Change, Write};
use crate::kernel::{
    Code, Config, Error, Event, Evidence, Gate, Problem, QuotaFile, Result, Snapshot, Todo, Ts,
};
use crate::store::cache::{Cache, Key, Refresh};
use crate::store::owner;
use crate::store::parse::{self, Named, shown};
use crate::store::{Store, Transaction, atomic, journal, lock, tx};

/// The name of the state directory.
pub const DIR: &str = ".loopx";

/// Todos read from `todos/`: the good ones, the quarantined ones, and a cache refresh to do.
type Todos = (
    BTreeMap<String, Todo>,
    BTreeMap<String, Problem>,
    Option<Refresh>,
);

/// Facts from outside the project that the face reads once and hands to the store.
#[derive(Debug, Clone, Copy)]
pub struct Env {
    /// The time of the command, for the lines the store writes itself (repairs, owner init).
    pub now: Ts,
    /// How long to wait for the lock (`LOOPX_LOCK_TIMEOUT`).
    pub lock_wait: std::time::Duration,
}

impl Default for Env {
    fn default() -> Self {
        Env {
            now: Ts::now(),
            lock_wait: std::time::Duration::from_secs(
                crate::kernel::bounds::LOCK_TIMEOUT_DEFAULT_S,
            ),
        }
    }
}

/// True when a gate's state is the owner's: pending, listed in `owner.proofs`, or signed itself.
pub(crate) fn gate_proven_by(
    g: &Gate,
    proofs: &std::collections::BTreeSet<String>,
    key: Option<&OwnerPub>,
) -> bool {
    g.status == GateStatus::Pending
        || authority::decision_hash(g).is_some_and(|h| proofs.contains(&h))
        || authority::gate_proven(g, key)
}

/// A project's `.loopx/` on disk.
#[derive(Debug, Clone)]
pub struct FileStore {
    root: PathBuf,
    dir: PathBuf,
    env: Env,
}

impl FileStore {
    /// The store of a project root (which holds `.loopx/`), whether or not it exists yet.
    pub fn at(root: &Path) -> FileStore {
        FileStore {
            root: root.to_path_buf(),
            dir: root.join(DIR),
            env: Env::default(),
        }
    }

    /// The same store with the face's clock and environment.
    pub fn with_env(mut self, env: Env) -> FileStore {
        self.env = env;
        self
    }

    /// Finds `.loopx/`: in `explicit` when given, else in `cwd` and each parent (exit 5 if none).
    pub fn discover(explicit: Option<&Path>, cwd: &Path) -> Result<FileStore> {
        let not_init = |where_: &Path| {
            Error::new(
                Code::NotInitialized,
                format!("no .loopx/ in {}", where_.display()),
            )
            .hint("start one with `loopx start-goal --goal-text \"...\"`")
        };
        if let Some(root) = explicit {
            let root = if root.is_absolute() {
                root.to_path_buf()
            } else {
                cwd.join(root)
            };
            let s = FileStore::at(&root);
            return if s.dir.join("loopx.toml").is_file() {
                Ok(s)
            } else {
                Err(not_init(&root))
            };
        }
        let mut cur = Some(cwd);
        while let Some(d) = cur {
            if d.join(DIR).join("loopx.toml").is_file() {
                return Ok(FileStore::at(d));
            }
            cur = d.parent();
        }
        Err(not_init(cwd).hint(
            "no .loopx/ here or in any parent; start one with `loopx start-goal --goal-text \"...\"` or pass --dir",
        ))
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The `.loopx/` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A path inside `.loopx/`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// True when `.loopx/loopx.toml` exists.
    pub fn exists(&self) -> bool {
        self.path("loopx.toml").is_file()
    }

    fn todo_path(&self, id: &str) -> PathBuf {
        self.dir.join("todos").join(format!("{id}.toml"))
    }

    fn archive_path(&self, id: &str) -> PathBuf {
        self.dir.join("archive").join(format!("{id}.toml"))
    }

    fn gate_path(&self, id: &str) -> PathBuf {
        self.dir.join("gates").join(format!("{id}.toml"))
    }

    /// The evidence log of a todo.
    pub fn evidence_path(&self, id: &str) -> PathBuf {
        self.dir.join("evidence").join(format!("{id}.jsonl"))
    }

    /// The journal.
    pub fn journal_path(&self) -> PathBuf {
        self.dir.join("journal.jsonl")
    }

    /// Takes the lock on `.loopx/lock`.
    pub fn lock(&self, exclusive: bool) -> Result<lock::Guard> {
        lock::acquire(&self.path("lock"), exclusive, self.env.lock_wait)
    }

    /// Creates `.loopx/` with its first config and journals it. Fails with `goal_exists` if present.
    pub fn create(&self, config: &Config, actor: &str) -> Result<()> {
        fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, &e))?;
        let _g = self.lock(true)?;
        if self.exists() {
            return Err(self.goal_exists());
        }
        for sub in ["todos", "archive", "gates", "evidence"] {
            let p = self.dir.join(sub);
            fs::create_dir_all(&p).map_err(|e| Error::io(&p, &e))?;
        }
        self.recover()?;
        let mut ops = vec![
            tx::Op::put("loopx.toml", parse::encode(config)?.into_bytes()),
            tx::Op::put(
                "quota.toml",
                parse::encode(&QuotaFile {
                    schema_version: 1,
                    ..Default::default()
                })?
                .into_bytes(),
            ),
        ];
        if fs::symlink_metadata(self.dir.join(".gitignore")).is_err() {
            ops.push(tx::Op::put(
                ".gitignore",
                b"lock\ncache/\n.*.tmp-*\n".to_vec(),
            ));
        }
        // A project with an owner key (a goal replaced by the owner) starts sealed.
        let signer = match self.owner_pub()? {
            Some(p) => Some(owner::signer_for(Some(&p))?),
            None => None,
        };
        if let Some(k) = &signer {
            let snap = Snapshot::new(config.clone());
            let s = crate::kernel::seal::Seal::of(&snap, None, None, &[]);
            ops.push(tx::Op::put(
                "owner.seal",
                s.text(&k.sign(&s.body())).into_bytes(),
            ));
        }
        self.commit_ops(
            ops,
            vec![crate::kernel::EventDraft {
                at: config.goal.created_at,
                actor: actor.to_string(),
                action: crate::kernel::Action::GoalStart,
                target: config.goal.id.clone(),
                data: serde_json::json!({"objective": config.goal.objective,
                    "success_criteria": config.goal.success_criteria}),
            }],
            None,
        )?;
        Ok(())
    }

    fn goal_exists(&self) -> Error {
        Error::new(
            Code::GoalExists,
            format!("{} already holds a goal", shown(&self.path("loopx.toml"))),
        )
        .hint("see it with `loopx goal show`, or replace it with `loopx start-goal --replace`")
    }

    /// Moves the current goal's files to `history/GOAL-ID/` (under the lock) so a new goal can start.
    ///
    /// Once the project has an owner key, only the owner may do this: it ends the goal.
    pub fn retire(&self, actor: &str) -> Result<PathBuf> {
        let _g = self.lock(true)?;
        let cfg: Config = self.read_config()?;
        let pubkey = self.owner_pub()?;
        let signer = match &pubkey {
            Some(p) => Some(owner::signer_for(Some(p))?),
            None => None,
        };
        let dest = self.dir.join("history").join(&cfg.goal.id);
        if dest.exists() {
            return Err(Error::new(
                Code::Io,
                format!("{} exists already", shown(&dest)),
            ));
        }
        fs::create_dir_all(&dest).map_err(|e| Error::io(&dest, &e))?;
        journal::append(
            &self.journal_path(),
            vec![crate::kernel::EventDraft {
                at: self.env.now,
                actor: actor.to_string(),
                action: crate::kernel::Action::GoalReplace,
                target: cfg.goal.id.clone(),
                data: serde_json::json!({"moved_to": shown(&dest)}),
            }],
            signer.as_ref(),
            None,
        )?;
        for name in [
            "loopx.toml",
            "todos",
            "archive",
            "gates",
            "evidence",
            "quota.toml",
            "journal.jsonl",
            "STATE.md",
        ] {
            let from = self.dir.join(name);
            if from.exists() {
                fs::rename(&from, dest.join(name)).map_err(|e| Error::io(&from, &e))?;
            }
        }
        atomic::sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, &e))?;
        Ok(dest)
    }

    /// Reads `loopx.toml`.
    pub fn read_config(&self) -> Result<Config> {
        let p = self.path("loopx.toml");
        parse::read::<Config>(&p)?.ok_or_else(|| {
            Error::new(Code::NotInitialized, format!("{} is missing", shown(&p)))
                .hint("start one with `loopx start-goal --goal-text \"...\"`")
        })
    }

    /// The text of `loopx.toml` for `cfg`, keeping the comments and layout a person gave it where
    /// values did not change (the merged text is used only if it reads back as exactly `cfg`).
    fn config_text(&self, cfg: &Config) -> Result<Vec<u8>> {
        let path = self.path("loopx.toml");
        let fresh = parse::encode(cfg)?;
        let merged = parse::read_bytes(&path)?
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|old| parse::merge_keeping_comments(&old, &fresh))
            .filter(|m| toml::from_str::<Config>(m).is_ok_and(|back| back == *cfg));
        Ok(merged.unwrap_or(fresh).into_bytes())
    }

    /// The `ID.toml` files of a state subdirectory (no dotfiles or temp files), as (id, entry).
    fn state_files(&self, sub: &str) -> Result<Vec<(String, fs::DirEntry)>> {
        let dir = self.dir.join(sub);
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
    fn read_dir_toml<T>(&self, sub: &str) -> Result<BTreeMap<String, T>>
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
    pub(crate) fn check_no_symlinks(&self) -> Result<()> {
        for sub in ["todos", "archive", "gates", "evidence", "cache"] {
            let p = self.dir.join(sub);
            if fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(parse::symlink_error(&p));
            }
        }
        Ok(())
    }

    /// Reads the working set, from the cache where a file is unchanged.
    fn read_todos(&self, mut cache: Cache) -> Result<Todos> {
        let files = self.state_files("todos")?;
        let mut quarantined = BTreeMap::new();
        let now_ns = crate::store::cache::now_ns();
        let mut settled_misses = 0;
        let mut out = BTreeMap::new();
        let mut keys = Vec::new();
        for (stem, entry) in files {
            let stem = stem.as_str();
            let path = entry.path();
            let meta = match entry.metadata() {
                Ok(m) => m,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(&path, &e)),
            };
            let key = Key::of(&meta);
            let cached = meta
                .file_type()
                .is_file()
                .then(|| cache.take(stem, key))
                .flatten();
            let todo = match cached {
                Some(t) => t,
                None => {
                    settled_misses += usize::from(key.is_settled(now_ns));
                    match self.read_state::<Todo>(&path, stem, &meta) {
                        Ok(Some(t)) => t,
                        Ok(None) => continue,
                        Err(p) => {
                            quarantined.insert(stem.to_string(), p);
                            continue;
                        }
                    }
                }
            };
            keys.push((stem.to_string(), key));
            out.insert(stem.to_string(), todo);
        }
        let refresh =
            Cache::worth_rewrite(settled_misses, out.len()).then_some(Refresh { keys, now_ns });
        Ok((out, quarantined, refresh))
    }

    /// Reads one state file of a directory listing; a file that cannot be read is a `Problem`
    /// (quarantined), except an I/O failure of the disk itself.
    pub(crate) fn read_state<T>(
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
    pub(crate) fn refresh_cache(&self, snap: &Snapshot, refresh: Option<Refresh>) {
        if let Some(r) = refresh {
            let list: Vec<_> = r
                .keys
                .iter()
                .filter_map(|(s, k)| snap.todos.get(s).map(|t| (*k, t)))
                .collect();
            Cache::write(&self.cache_path(), &list, r.now_ns);
        }
    }

    pub(crate) fn cache_path(&self) -> PathBuf {
        self.path("cache/todos.json")
    }

    /// Loads the snapshot without taking the lock (the caller holds it).
    pub fn load_unlocked(&self) -> Result<Snapshot> {
        let (snap, refresh) = self.load_with(Cache::read(&self.cache_path()))?;
        self.refresh_cache(&snap, refresh);
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
    fn load_with(&self, cache: Cache) -> Result<(Snapshot, Option<Refresh>)> {
        let (mut snap, refresh) = self.load_files(cache)?;
        let key = self.owner_pub()?;
        self.check_seal(&mut snap, key.as_ref());
        Ok((snap, refresh))
    }

    /// Loads the snapshot as the files say.
    pub(crate) fn load_files(&self, cache: Cache) -> Result<(Snapshot, Option<Refresh>)> {
        self.check_no_symlinks()?;
        let config = self.read_config()?;
        let (todos, mut quarantined, refresh) = self.read_todos(cache)?;
        let mut gates = self.read_gates(&mut quarantined)?;
        let key = self.owner_pub()?;
        // One signature over owner.proofs stands for many decisions; a decision not listed
        // there is checked on its own.
        let decided = gates.values().any(|g| g.status != GateStatus::Pending);
        let proofs = match &key {
            Some(k) if decided => self.read_proofs(k),
            _ => Default::default(),
        };
        for g in gates
            .values_mut()
            .filter(|g| !quarantined.contains_key(&g.id))
        {
            g.proven = gate_proven_by(g, &proofs, key.as_ref());
        }
        let quota = parse::read::<QuotaFile>(&self.path("quota.toml"))?.unwrap_or_default();
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
        Ok((
            Snapshot {
                config,
                todos,
                gates,
                quota,
                archived,
                quarantined,
                owner_notes: Vec::new(),
                seal: None,
            },
            refresh,
        ))
    }

    /// Reads every gate; a gate file that cannot be read counts as a pending global gate (fail
    /// closed) and is named in `quarantined`.
    fn read_gates(
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

    /// Commits a change as one transaction (the caller holds the exclusive lock): its files are
    /// staged, its journal lines appended (the commit point), then the files put in place.
    ///
    /// An owner change is signed with the owner's key, and refused (exit 7, nothing written) without it.
    pub fn apply_change(&self, change: Change) -> Result<Vec<Event>> {
        self.apply_change_on(None, change)
    }

    /// Commits a change decided on `before` (the caller holds the exclusive lock); an owner
    /// change also writes the owner's seal of the state it leaves.
    pub(crate) fn apply_change_on(
        &self,
        before: Option<&Snapshot>,
        change: Change,
    ) -> Result<Vec<Event>> {
        if change.events.is_empty() {
            if change.writes.is_empty() {
                return Ok(Vec::new());
            }
            return Err(Error::new(
                Code::Internal,
                "a change with files but no journal line",
            ));
        }
        let signer = if change.owner {
            Some(owner::signer_for(self.owner_pub()?.as_ref())?)
        } else {
            None
        };
        let head = match &signer {
            Some(_) => journal::head(&self.journal_path())?,
            None => String::new(),
        };
        let mut ops = Vec::new();
        let mut decided = Vec::new();
        let mut writes = Vec::with_capacity(change.writes.len());
        for mut w in change.writes {
            if let (Write::Gate(g), Some(k)) = (&mut w, &signer)
                && g.status != GateStatus::Pending
                && g.signature.is_none()
            {
                g.journal_head = Some(head.clone());
                g.signature = Some(k.sign(&authority::gate_message(g, &head)));
                decided.extend(authority::decision_hash(g));
            }
            writes.push(w);
        }
        let change = Change { writes, ..change };
        for w in &change.writes {
            self.plan(w.clone(), &mut ops)?;
        }
        if let Some(k) = &signer {
            if !decided.is_empty() {
                ops.push(self.proofs_op(k, decided)?);
            }
            let loaded;
            let before = match before {
                Some(b) => b,
                None => {
                    loaded = self.load_unlocked()?;
                    &loaded
                }
            };
            ops.push(self.seal_op(k, before, &change)?);
        }
        self.commit_ops(ops, change.events, signer.as_ref())
    }

    /// Turns one kernel write into file operations, with their bytes ready.
    fn plan(&self, w: Write, ops: &mut Vec<tx::Op>) -> Result<()> {
        match w {
            Write::Todo(t) => ops.push(tx::Op::put(
                format!("todos/{}.toml", t.id),
                parse::encode(&t)?.into_bytes(),
            )),
            Write::Archive(t) => {
                ops.push(tx::Op::put(
                    format!("archive/{}.toml", t.id),
                    parse::encode(&t)?.into_bytes(),
                ));
                ops.push(tx::Op::remove(format!("todos/{}.toml", t.id)));
            }
            Write::Gate(g) => ops.push(tx::Op::put(
                format!("gates/{}.toml", g.id),
                parse::encode(&g)?.into_bytes(),
            )),
            Write::Config(c) => ops.push(tx::Op::put("loopx.toml", self.config_text(&c)?)),
            Write::Quota(q) => ops.push(tx::Op::put("quota.toml", parse::encode(&q)?.into_bytes())),
            Write::Evidence(id, e) => {
                id::check_not_path(&id)?;
                let mut line = serde_json::to_vec(&e)
                    .map_err(|e| Error::new(Code::Internal, e.to_string()))?;
                line.push(b'\n');
                ops.push(tx::Op::append(format!("evidence/{id}.jsonl"), line));
            }
        }
        Ok(())
    }

    /// Stages `ops`, appends the journal lines that commit them, then puts the files in place.
    fn commit_ops(
        &self,
        ops: Vec<tx::Op>,
        events: Vec<crate::kernel::EventDraft>,
        signer: Option<&owner::OwnerKey>,
    ) -> Result<Vec<Event>> {
        let jp = self.journal_path();
        let n = journal::next_seq(&jp)?;
        let files = tx::stage(&self.dir, n, &tx::coalesce(ops))?;
        let events = journal::append(&jp, events, signer, Some(files.clone()))?;
        tx::apply(&self.dir, n, &files)?;
        Ok(events)
    }

    /// Finishes or undoes a commit a crash interrupted (the caller holds the exclusive lock).
    pub(crate) fn recover(&self) -> Result<()> {
        if let Some(what) = tx::recover(&self.dir)? {
            self.commit_ops(
                Vec::new(),
                vec![crate::kernel::EventDraft {
                    at: self.env.now,
                    actor: "loopx".into(),
                    action: crate::kernel::Action::JournalRepair,
                    target: "journal.jsonl".into(),
                    data: serde_json::json!({ "recovered": what }),
                }],
                None,
            )?;
        }
        Ok(())
    }

    /// True when the journal's last transaction is unfinished and a load must recover it first.
    pub(crate) fn needs_recovery(&self) -> Result<bool> {
        let t = tx::tail(&self.dir)?;
        Ok(t.pending || t.torn_tx.is_some())
    }

    /// The decision hashes in `owner.proofs`, if `key` signed it (else none).
    pub(crate) fn read_proofs(&self, key: &OwnerPub) -> std::collections::BTreeSet<String> {
        parse::read_bytes(&self.path("owner.proofs"))
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| authority::parse_proofs(&t, key))
            .unwrap_or_default()
    }

    /// `owner.proofs` with these decisions added, signed again. A missing or invalid file is
    /// rebuilt from every gate whose own signature verifies.
    fn proofs_op(&self, key: &owner::OwnerKey, new: Vec<String>) -> Result<tx::Op> {
        let public = key.public();
        let mut hashes = self.read_proofs(&public);
        if hashes.is_empty() {
            let gates: BTreeMap<String, Gate> = self.read_dir_toml("gates")?;
            hashes.extend(
                gates
                    .values()
                    .filter(|g| {
                        g.status != GateStatus::Pending && authority::gate_proven(g, Some(&public))
                    })
                    .filter_map(authority::decision_hash),
            );
        }
        hashes.extend(new);
        let sig = key.sign(&authority::proofs_message(&hashes));
        Ok(tx::Op::put(
            "owner.proofs",
            authority::proofs_text(&hashes, &sig).into_bytes(),
        ))
    }

    /// The project's owner public key, if it has one.
    pub fn owner_pub(&self) -> Result<Option<OwnerPub>> {
        let p = self.path("owner.pub");
        match parse::read_bytes(&p)? {
            Some(bytes) => String::from_utf8(bytes)
                .map_err(|_| "not UTF-8 text".to_string())
                .and_then(|t| OwnerPub::parse(&t))
                .map(Some)
                .map_err(|e| Error::invalid(&shown(&p), None, e)),
            None => Ok(None),
        }
    }

    /// Installs `key` as the project's owner key (writes `owner.pub`) and journals it, signed.
    pub fn install_owner(&self, key: &owner::OwnerKey, replaced: Option<&OwnerPub>) -> Result<()> {
        let _g = self.lock(true)?;
        self.recover()?;
        let before = self.load_unlocked()?;
        let seal = self.seal_op(key, &before, &Change::default())?;
        self.commit_ops(
            vec![
                tx::Op::put("owner.pub", key.public().to_text().into_bytes()),
                seal,
            ],
            vec![crate::kernel::EventDraft {
                at: self.env.now,
                actor: crate::kernel::ops::OWNER.into(),
                action: crate::kernel::Action::OwnerInit,
                target: "owner".into(),
                data: serde_json::json!({"fingerprint": key.public().fingerprint(),
                    "replaced": replaced.map(|r| r.fingerprint())}),
            }],
            Some(key),
        )?;
        Ok(())
    }

    fn list_ids(&self, sub: &str) -> Result<Vec<String>> {
        Ok(self
            .state_files(sub)?
            .into_iter()
            .map(|(id, _)| id)
            .collect())
    }

    /// How many todos are archived, without listing `archive/` when it has not changed.
    pub fn archived_count(&self) -> Result<usize> {
        let dir = self.dir.join("archive");
        match crate::store::cache::dir_count(&dir, &self.path("cache/archive.json")) {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(Error::io(&dir, &e)),
        }
    }

    /// Every archived todo id.
    pub fn archived_ids(&self) -> Result<Vec<String>> {
        self.list_ids("archive")
    }
}

impl Store for FileStore {
    fn load(&self) -> Result<Snapshot> {
        let cache = Cache::read(&self.cache_path());
        let (snap, refresh) = {
            let g = self.lock(false)?;
            if self.needs_recovery()? {
                // A crash left a commit unfinished: finish it under the exclusive lock first.
                drop(g);
                let _x = self.lock(true)?;
                self.recover()?;
                self.load_with(cache)?
            } else {
                self.load_with(cache)?
            }
        };
        self.refresh_cache(&snap, refresh);
        Ok(snap)
    }

    fn begin(&self) -> Result<Box<dyn Transaction + '_>> {
        // The cache is parsed before the lock and rewritten after it: under the lock, every
        // entry is only checked against its file's key.
        let cache = Cache::read(&self.cache_path());
        let guard = self.lock(true)?;
        self.recover()?;
        let (snap, refresh) = self.load_with(cache)?;
        Ok(Box::new(FileTx {
            store: self,
            snap,
            refresh,
            _guard: guard,
        }))
    }

    fn fresh_id(&self, kind: Kind) -> Result<String> {
        for _ in 0..64 {
            let mut r = [0u8; 6];
            getrandom::fill(&mut r)
                .map_err(|e| Error::new(Code::Io, format!("no randomness: {e}")))?;
            let id = id::new_id(kind, r);
            let taken = match kind {
                Kind::Todo => self.todo_path(&id).exists() || self.archive_path(&id).exists(),
                Kind::Gate => self.gate_path(&id).exists(),
            };
            if !taken {
                return Ok(id);
            }
        }
        Err(Error::new(Code::Internal, "could not find a free id"))
    }

    fn resolve_todo(&self, snap: &Snapshot, input: &str) -> Result<String> {
        let want = id::normalize(Kind::Todo, input)?;
        if snap.todos.contains_key(&want)
            || snap.quarantined.contains_key(&want)
            || (id::is_full_id(Kind::Todo, &want) && self.archive_path(&want).exists())
        {
            return Ok(want);
        }
        match id::resolve(Kind::Todo, input, snap.todos.keys().map(String::as_str)) {
            Err(e) if e.code == Code::NotFound => {
                let archived = self.archived_ids()?;
                id::resolve(Kind::Todo, input, archived.iter().map(String::as_str))
            }
            other => other,
        }
    }

    fn resolve_gate(&self, snap: &Snapshot, input: &str) -> Result<String> {
        id::resolve(Kind::Gate, input, snap.gates.keys().map(String::as_str))
    }

    fn archived_todo(&self, id: &str) -> Result<Option<Todo>> {
        id::check_not_path(id)?;
        parse::read::<Todo>(&self.archive_path(id))
    }

    fn evidence_tail(&self, id: &str, n: usize) -> Result<Vec<Evidence>> {
        id::check_not_path(id)?;
        let p = self.evidence_path(id);
        let (lines, _) = journal::tail_lines(&p, n).map_err(|e| Error::io(&p, &e))?;
        Ok(lines
            .iter()
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect())
    }

    fn journal_tail(&self, n: usize) -> Result<Vec<Event>> {
        let p = self.journal_path();
        let (lines, _) = journal::tail_lines(&p, n).map_err(|e| Error::io(&p, &e))?;
        Ok(lines
            .iter()
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect())
    }
}

/// A transaction on the file store: the exclusive lock, and the snapshot loaded under it.
struct FileTx<'a> {
    store: &'a FileStore,
    snap: Snapshot,
    refresh: Option<Refresh>,
    _guard: lock::Guard,
}

impl Transaction for FileTx<'_> {
    fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    fn commit(self: Box<Self>, change: Change) -> Result<Vec<Event>> {
        let FileTx {
            store,
            snap,
            refresh,
            _guard,
        } = *self;
        let events = store.apply_change_on(Some(&snap), change)?;
        drop(_guard);
        store.refresh_cache(&snap, refresh);
        Ok(events)
    }
}
