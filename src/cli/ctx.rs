//! What every command gets (flags, identity, the clock), and the store it works on.

use std::path::{Path, PathBuf};

use crate::kernel::{Code, Error, Result, Ts};
use crate::store::open::{self, Choice};
use crate::store::{Admin, FileStore, Followed, Store};

/// What every command gets: flags, identity, the clock.
#[derive(Clone)]
pub struct Ctx {
    /// `--json`.
    pub json: bool,
    /// The agent id (default `local`).
    pub agent: String,
    /// `--dir`.
    pub dir: Option<PathBuf>,
    /// The working directory.
    pub cwd: PathBuf,
    /// Now.
    pub now: Ts,
    /// How long to wait for the lock (`LOOPX_LOCK_TIMEOUT`, read once).
    pub lock_wait: std::time::Duration,
    /// The database chosen (`--store`, `LOOPX_STORE` or `[store] url`); `None`: the files.
    pub store_url: Option<String>,
    /// True when `--store` or `LOOPX_STORE` chose the database (not a project's `[store] url`).
    pub explicit_store: bool,
    /// Where the list of projects is (`projects.toml` under `XDG_CONFIG_HOME` or `HOME`, read once).
    pub projects: Option<PathBuf>,
    /// Where the owner's secret key is (`LOOPX_OWNER_KEY`, `XDG_CONFIG_HOME`, `HOME`, read once).
    pub key: crate::store::owner::KeyAt,
    /// The event whose hook runs this command (`LOOPX_EVENT`, read once).
    pub by_hook: Option<std::sync::Arc<str>>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The store's URL may hold a password: never shown.
        f.debug_struct("Ctx")
            .field("json", &self.json)
            .field("agent", &self.agent)
            .field("dir", &self.dir)
            .field("cwd", &self.cwd)
            .field("now", &self.now)
            .field("lock_wait", &self.lock_wait)
            .field("store_url", &self.store_url.as_ref().map(|_| "(hidden)"))
            .field("explicit_store", &self.explicit_store)
            .field("projects", &self.projects)
            .field("key", &self.key)
            .field("by_hook", &self.by_hook)
            .finish()
    }
}

impl Ctx {
    /// Chooses the store once, for the whole command: the database's URL, or `None` for the
    /// files (also when there is no project yet: the command that needs one says so).
    pub fn choose_store(&self, explicit_url: Option<&str>) -> Result<Option<String>> {
        let explicit = explicit_url.filter(|u| !u.is_empty());
        match open::choose(explicit, self.dir.as_deref(), &self.cwd, self.env()) {
            Ok(Choice::Url(u)) => Ok(Some(u)),
            Ok(Choice::Files(_)) => Ok(None),
            Err(e) if e.code == Code::NotInitialized => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The store this command works on: the database chosen, or the project's files, with all a
    /// face asks of it (its state, its admin, and for the board how it reloads and hears of
    /// changes).
    pub fn open(&self) -> Result<Box<dyn Followed>> {
        match &self.store_url {
            Some(url) => open::connect(url, self.env()),
            None => Ok(Box::new(self.files()?)),
        }
    }

    /// The store a new goal starts in (`start-goal`): the database chosen, or the files under
    /// `project` (else `--dir`, else here), which must be an existing directory.
    pub fn open_new(&self, project: Option<&Path>) -> Result<Box<dyn Admin + Sync>> {
        if let Some(url) = &self.store_url {
            return Ok(open::connect(url, self.env())?);
        }
        let root = project
            .or(self.dir.as_deref())
            .unwrap_or_else(|| Path::new("."));
        let root = self.cwd.join(root);
        let root = root.canonicalize().map_err(|e| {
            Error::usage(format!("{}: {e}", root.display()))
                .hint("give --project an existing directory")
        })?;
        Ok(Box::new(FileStore::at(&root).with_env(self.env())))
    }

    /// The project's files, for a command that works on them only (`hook`), or for the files'
    /// path of one that works on both; refused (exit 2) when a database was chosen, so nothing
    /// is written beside it.
    pub fn files(&self) -> Result<FileStore> {
        self.files_only()?;
        Ok(FileStore::discover(self.dir.as_deref(), &self.cwd)?.with_env(self.env()))
    }

    /// Refuses (exit 2) when a database was chosen: this command works on the files only.
    pub fn files_only(&self) -> Result<()> {
        match self.store_url {
            Some(_) => Err(
                Error::usage("this command works on the file store only for now")
                    .hint("unset --store / LOOPX_STORE (and [store] url in .loopx/loopx.toml)"),
            ),
            None => Ok(()),
        }
    }

    /// The directory the agent works in: the store's project root, else `--dir`, else here.
    pub fn work_dir(&self, store: &dyn Store) -> PathBuf {
        match (store.local_root(), &self.dir) {
            (Some(root), _) => root.to_path_buf(),
            (None, Some(d)) => self.cwd.join(d),
            (None, None) => self.cwd.clone(),
        }
    }

    /// The clock and environment facts the store needs.
    pub fn env(&self) -> crate::store::Env {
        crate::store::Env {
            now: self.now,
            lock_wait: self.lock_wait,
            key: self.key.clone(),
            by_hook: self.by_hook.clone(),
            // Every commit of this face (CLI, board, runtime) fires the owner's sealed hooks.
            on_commit: Some(crate::runtime::hooks::fire),
        }
    }
}

/// An environment variable as text; `None` when unset, exit 2 when not UTF-8.
pub(super) fn env_text(name: &str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(Error::usage(format!("{name} is not valid UTF-8")))
        }
    }
}
