//! The file store: `.loopx/` as TOML files, one lock, atomic writes and the journal.

use std::fs;
use std::path::{Path, PathBuf};

use crate::kernel::authority::OwnerPub;
use crate::kernel::id;
use crate::kernel::ops::Change;
use crate::kernel::seal::Seal;
use crate::kernel::{Code, Config, Error, Event, QuotaFile, Result, Snapshot};
use crate::store::owner;
use crate::store::parse::{self, shown};
use crate::store::{Store, atomic, journal, lock, tx};

use crate::store::Env;
use crate::store::core::seal::{new_goal_seal, seal_text};

/// The name of the state directory.
pub const DIR: &str = ".loopx";

/// The marker of a goal being moved to `history/` (`start-goal --replace`).
const RETIRING: &str = "retiring";

impl FileStore {
    /// Tells the commit observer, if any, what a transaction committed.
    pub(crate) fn committed(&self, snap: &Snapshot, events: &[Event]) {
        if let Some(f) = self.env.on_commit
            && !events.is_empty()
        {
            f(self, snap, events);
        }
    }

    /// `committed` for a commit made without a transaction's snapshot (`doctor --fix`, once it
    /// released the lock): loads one only when a line is an event and an observer is set.
    pub(crate) fn committed_unloaded(&self, events: &[Event]) {
        let alerting = events
            .iter()
            .any(|e| crate::kernel::alert::event_of(e).is_some());
        if self.env.on_commit.is_some()
            && alerting
            && let Ok(snap) = self.load()
        {
            self.committed(&snap, events);
        }
    }
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

    /// The clock and environment facts the face gave.
    pub fn env(&self) -> &Env {
        &self.env
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
            return if s.dir.join("loopx.toml").is_file() || s.dir.join(RETIRING).is_file() {
                Ok(s)
            } else {
                Err(not_init(&root))
            };
        }
        let mut cur = Some(cwd);
        while let Some(d) = cur {
            if d.join(DIR).join("loopx.toml").is_file() || d.join(DIR).join(RETIRING).is_file() {
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

    pub(super) fn todo_path(&self, id: &str) -> PathBuf {
        self.dir.join("todos").join(format!("{id}.toml"))
    }

    pub(super) fn archive_path(&self, id: &str) -> PathBuf {
        self.dir.join("archive").join(format!("{id}.toml"))
    }

    pub(super) fn gate_path(&self, id: &str) -> PathBuf {
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
        self.finish_retire()?;
        if self.exists() {
            return Err(self.goal_exists());
        }
        self.recover()?;
        self.create_locked(config, actor, None)
    }

    /// Creates the goal's files and journal (the caller holds the exclusive lock); `seal` is the
    /// new goal's seal, signed by the owner beforehand (a replace finished by another process).
    fn create_locked(&self, config: &Config, actor: &str, seal: Option<&str>) -> Result<()> {
        for sub in ["todos", "archive", "gates", "evidence"] {
            let p = self.dir.join(sub);
            fs::create_dir_all(&p).map_err(|e| Error::io(&p, &e))?;
        }
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
        match (seal, self.owner_pub()?) {
            (Some(text), _) => ops.push(tx::Op::put("owner.seal", text.as_bytes().to_vec())),
            (None, Some(p)) => {
                let k = owner::signer_for(&self.env.key, Some(&p))?;
                ops.push(tx::Op::put(
                    "owner.seal",
                    new_goal_seal(&k, config).into_bytes(),
                ));
            }
            (None, None) => {}
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

    /// Replaces the goal with `next`, under the lock: the current goal's files move to
    /// `history/GOAL-ID/` and the new goal is created, as one step a crash cannot split (a
    /// marker holding `next` lets the next command finish it). Returns the history directory.
    ///
    /// Once the project has an owner key, only the owner may do this: it ends the goal.
    pub fn replace(&self, next: &Config, actor: &str) -> Result<PathBuf> {
        let _g = self.lock(true)?;
        self.recover()?;
        let history = self.dir.join("history");
        if !self.exists() {
            self.create_locked(next, actor, None)?;
            return Ok(history);
        }
        let cfg: Config = self.read_config()?;
        // The goal's id names a directory under history/: never a path out of it.
        id::check_not_path(&cfg.goal.id)?;
        let pubkey = self.owner_pub()?;
        let signer = match &pubkey {
            Some(p) => Some(owner::signer_for(&self.env.key, Some(p))?),
            None => None,
        };
        let dest = history.join(&cfg.goal.id);
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
        // From here the replace is finished by whoever takes the lock next, if this one dies.
        let next_text = parse::encode(next)?;
        let seal = signer.as_ref().map(|k| new_goal_seal(k, next));
        let sig = signer.as_ref().map(|k| {
            k.sign(&replace_message(
                &cfg.goal.id,
                actor,
                &next_text,
                seal.as_deref(),
            ))
        });
        let marker = serde_json::json!({"old": cfg.goal.id, "actor": actor,
            "next": next_text, "seal": seal, "sig": sig});
        let p = self.path(RETIRING);
        atomic::write(&p, marker.to_string().as_bytes()).map_err(|e| Error::io(&p, &e))?;
        self.finish_retire()?;
        Ok(dest)
    }

    /// Finishes a replace: moves the old goal's files to `history/GOAL-ID/` (`loopx.toml` last),
    /// creates the new goal, then removes the marker. Idempotent, so a replace a crash
    /// interrupted is finished by the next command.
    pub(crate) fn finish_retire(&self) -> Result<()> {
        let marker = self.path(RETIRING);
        let Some(bytes) = parse::read_bytes(&marker)? else {
            return Ok(());
        };
        let bad = |what: &str| {
            Error::invalid(
                &shown(&marker),
                None,
                format!("is not a replace marker ({what})"),
            )
        };
        let m: serde_json::Value = serde_json::from_slice(&bytes).map_err(|_| bad("not JSON"))?;
        let (Some(old), Some(actor), Some(next)) =
            (m["old"].as_str(), m["actor"].as_str(), m["next"].as_str())
        else {
            return Err(bad("a field is missing"));
        };
        id::check_not_path(old)?;
        let seal = m["seal"].as_str();
        // Once the project has an owner key, only a replace the owner signed is finished.
        if let Some(key) = self.owner_pub()? {
            let msg = replace_message(old, actor, next, seal);
            if !m["sig"].as_str().is_some_and(|s| key.verify(&msg, s)) {
                return Err(bad("not signed by the owner"));
            }
        }
        let next: Config = parse::decode(&marker, next)?;
        let dest = self.dir.join("history").join(old);
        fs::create_dir_all(&dest).map_err(|e| Error::io(&dest, &e))?;
        let moving_config = self.read_config().is_ok_and(|c| c.goal.id == old);
        for name in [
            "todos",
            "archive",
            "gates",
            "evidence",
            "quota.toml",
            "journal.jsonl",
            "STATE.md",
            "owner.seal",
            "owner.proofs",
            "loopx.toml",
        ] {
            let from = self.dir.join(name);
            if name == "loopx.toml" && !moving_config {
                continue;
            }
            if fs::symlink_metadata(&from).is_ok() && fs::symlink_metadata(dest.join(name)).is_err()
            {
                fs::rename(&from, dest.join(name)).map_err(|e| Error::io(&from, &e))?;
            }
        }
        atomic::sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, &e))?;
        if !self.exists() {
            self.create_locked(&next, actor, seal)?;
        }
        fs::remove_file(&marker).map_err(|e| Error::io(&marker, &e))?;
        atomic::sync_dir(&self.dir).map_err(|e| Error::io(&self.dir, &e))
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
    pub(super) fn config_text(&self, cfg: &Config) -> Result<Vec<u8>> {
        let path = self.path("loopx.toml");
        let fresh = parse::encode(cfg)?;
        let merged = parse::read_bytes(&path)?
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|old| parse::merge_keeping_comments(&old, &fresh))
            .filter(|m| toml::from_str::<Config>(m).is_ok_and(|back| back == *cfg));
        Ok(merged.unwrap_or(fresh).into_bytes())
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
        let base = match before.seal {
            Some(_) => before.clone(),
            None => self.load_raw()?,
        };
        let mark = self.journal_mark()?;
        // A key installed enrolls no device: devices are the key's own to enroll again.
        let prior = before.seal.clone().map(|s| Seal {
            devices: Default::default(),
            ..s
        });
        let seal = seal_text(key, &base, prior.as_ref(), &Change::default(), mark)?;
        self.commit_ops(
            vec![
                tx::Op::put("owner.pub", key.public().to_text().into_bytes()),
                tx::Op::put("owner.seal", seal.into_bytes()),
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
            None,
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

/// The text the owner signs to replace a goal, so another process may finish it.
fn replace_message(old: &str, actor: &str, next: &str, seal: Option<&str>) -> String {
    format!(
        "loopx-replace-v1\n{old}\n{actor}\n{next}\n{}",
        seal.unwrap_or("")
    )
}
