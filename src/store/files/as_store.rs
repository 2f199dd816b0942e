//! The file store as a [`Store`] and an [`Admin`]: the traits' methods on `.loopx/`, most
//! delegating to the file store's own, and what belongs to files alone (STATE.md, repairs).

use std::path::{Path, PathBuf};

use crate::kernel::authority::OwnerPub;
use crate::kernel::id::{self, Kind};
use crate::kernel::roster::Seen;
use crate::kernel::{Code, Config, Error, Event, Evidence, Result, Snapshot, Todo};
use crate::store::cache::Cache;
use crate::store::files::commit::FileTx;
use crate::store::follow::FollowedJournal;
use crate::store::logs::JournalCheck;
use crate::store::{
    Admin, FileStore, GoalPlan, Reads, Store, Transaction, atomic, doctor, evidence, journal,
    owner, parse,
};

impl Store for FileStore {
    fn env(&self) -> &crate::store::Env {
        FileStore::env(self)
    }

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
        self.refresh_cache(refresh);
        Ok(snap)
    }

    fn begin(&self) -> Result<Box<dyn Transaction + '_>> {
        // The cache is parsed before the lock and rewritten after it: under the lock, every
        // entry is only checked against its file's key.
        let cache = Cache::read(&self.cache_path());
        let guard = self.lock(true)?;
        let tail = self.recover_tail()?;
        let (snap, refresh) = self.load_with(cache)?;
        Ok(Box::new(FileTx {
            store: self,
            snap,
            refresh,
            tail,
            _guard: guard,
        }))
    }

    fn fresh_id(&self, kind: Kind) -> Result<String> {
        crate::store::fresh_id_where(kind, |id| {
            Ok(match kind {
                Kind::Todo => self.todo_path(id).exists() || self.archive_path(id).exists(),
                Kind::Gate => self.gate_path(id).exists(),
            })
        })
    }
}

impl Reads for FileStore {
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

    fn archived_todo(&self, id: &str) -> Result<Option<Todo>> {
        id::check_not_path(id)?;
        parse::read::<Todo>(&self.archive_path(id))
    }

    fn evidence_tail(&self, id: &str, n: usize) -> Result<Vec<Evidence>> {
        id::check_not_path(id)?;
        tail_of(&self.evidence_path(id), n)
    }

    fn evidence_all(
        &self,
        only: Option<&str>,
        keep: evidence::Keep<'_>,
    ) -> Result<Vec<(String, Evidence)>> {
        self.evidence_scan(only, keep)
    }

    fn journal_tail(&self, n: usize) -> Result<Vec<Event>> {
        tail_of(&self.journal_path(), n)
    }

    fn archived_ids(&self) -> Result<Vec<String>> {
        FileStore::archived_ids(self)
    }

    fn archived_count(&self) -> Result<usize> {
        FileStore::archived_count(self)
    }

    fn journal_seen(&self) -> Result<Seen> {
        FileStore::journal_seen(self)
    }

    fn journal_end(&self) -> Result<u64> {
        FileStore::journal_end(self)
    }

    fn journal_after(&self, pos: u64) -> Result<(Vec<Event>, u64)> {
        FileStore::journal_after(self, pos)
    }

    fn journal_line(&self, seq: u64) -> Result<Option<Event>> {
        let tail = self.journal_tail(crate::store::JOURNAL_SCAN)?;
        Ok(tail.into_iter().find(|e| e.seq == seq))
    }

    fn owner_pub(&self) -> Result<Option<crate::kernel::authority::OwnerPub>> {
        FileStore::owner_pub(self)
    }

    fn local_root(&self) -> Option<&Path> {
        Some(self.root())
    }
}

impl Admin for FileStore {
    fn install_owner(&self, key: &owner::OwnerKey, replaced: Option<&OwnerPub>) -> Result<()> {
        FileStore::install_owner(self, key, replaced)
    }

    fn plan_goal(&self, replace: bool) -> Result<GoalPlan> {
        let replacing = self.exists();
        if replacing && !replace {
            return Err(Error::new(
                Code::GoalExists,
                format!("{} already holds a goal", self.dir().display()),
            )
            .hint(
                "see it with `loopx goal show`, or replace it with `loopx start-goal --replace`",
            ));
        }
        Ok(GoalPlan {
            replacing,
            at: ("dir", self.dir().display().to_string()),
            first: None,
        })
    }

    fn start_goal(&self, config: &Config, actor: &str, replacing: bool) -> Result<Option<String>> {
        if !replacing {
            self.create(config, actor)?;
            return Ok(None);
        }
        // The old goal moves to history/ and the new one starts in one step.
        let to = self.replace(config, actor)?;
        Ok(Some(to.display().to_string()))
    }

    fn doctor(&self) -> Result<Vec<doctor::Finding>> {
        crate::store::files::doctor::check_locked(self, self.env().now)
    }

    fn live_worktrees(&self) -> Result<Vec<String>> {
        crate::store::files::doctor::live_worktrees(self, self.env().now)
    }

    fn followed_journal(&self) -> Result<&dyn FollowedJournal> {
        Err(Error::usage(
            "`hook serve` is for a project in a database: on files, hooks fire when a change commits",
        )
        .hint("nothing to serve here; give --store or LOOPX_STORE to serve a database's hooks"))
    }

    fn place_of(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }

    fn verify_journal(&self) -> Result<JournalCheck> {
        FileStore::verify_journal(self)
    }

    fn poll_lock(&self) -> Result<Option<Box<dyn crate::store::poll::PollLock>>> {
        crate::store::poll::files(self)
    }

    fn files(&self) -> Option<&FileStore> {
        Some(self)
    }
}

/// The last `n` lines of the log `p` that parse, oldest first.
fn tail_of<T: serde::de::DeserializeOwned>(p: &Path, n: usize) -> Result<Vec<T>> {
    let (lines, _) = journal::tail_lines(p, n).map_err(|e| Error::io(p, &e))?;
    Ok(lines
        .iter()
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect())
}

impl FileStore {
    /// Writes STATE.md (a projection, never read back) and says where.
    pub fn write_projection(&self, text: &str) -> Result<PathBuf> {
        let p = self.path("STATE.md");
        atomic::write(&p, text.as_bytes()).map_err(|e| Error::io(&p, &e))?;
        Ok(p)
    }

    /// `doctor --fix`: repairs what is mechanical, and says what it did.
    pub fn doctor_fix(&self) -> Result<Vec<String>> {
        crate::store::files::doctor::fix(self, self.env().now)
    }
}
