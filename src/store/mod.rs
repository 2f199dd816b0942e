//! The store: where snapshots come from and where changes go, behind one trait.

pub mod core;
pub mod env;
pub mod files;
pub mod live;
pub mod open;
pub mod pg;
pub mod port;
pub mod projects;

// The file store's modules and the shared ones, by their short paths.
pub use self::core::{atomic, doctor, owner, parse};
pub use env::{Env, OnCommit};
pub use files::{cache, evidence, fs, journal, lock, logs, poll, recover, seen, tx, view, watch};
pub use fs::FileStore;
pub use live::Watched;

use std::path::Path;

use crate::kernel::id::Kind;
use crate::kernel::ops::Change;
use crate::kernel::roster::Seen;
use crate::kernel::{Event, Evidence, Result, Snapshot, Ts};

/// What a check of the whole journal found.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalCheck {
    /// Complete lines.
    pub lines: usize,
    /// A torn last line follows them.
    pub torn: bool,
    /// The first broken link, if any.
    pub broken: Option<core::chain::Break>,
}

/// A held poll lock; released when dropped (and when the process dies).
pub trait PollLock {
    /// True while the lock is still held: a database's goes with its connection.
    fn held(&mut self) -> bool;
}

/// Which entries a scan keeps: the todo's id and the entry.
pub type Keep<'a> = &'a dyn Fn(&str, &Evidence) -> bool;

/// A place that keeps a project's state: the files of `.loopx/`, or a PostgreSQL database. What
/// a transaction needs; what commands read beyond a snapshot is [`Reads`], and the rest [`Admin`].
///
/// Usable as `dyn Store`: every change goes through [`Store::begin`] and [`Transaction::commit`].
pub trait Store: Reads {
    /// A consistent snapshot of the working state (an interrupted commit is finished first).
    fn load(&self) -> Result<Snapshot>;

    /// Starts a transaction: the exclusive lock, and a fresh snapshot loaded under it.
    fn begin(&self) -> Result<Box<dyn Transaction + '_>>;

    /// A fresh random id of this kind, unused in the project.
    fn fresh_id(&self, kind: Kind) -> Result<String>;

    /// The facts the face gave this store (the clock, the lock's wait, the owner key's place).
    fn env(&self) -> &Env;
}

/// What the commands read of a store beyond a snapshot: ids resolved, the archive, the logs
/// (evidence and the journal), the owner's key, and where the project is on this machine.
pub trait Reads {
    /// Resolves a todo id or unique prefix against open and archived todos.
    fn resolve_todo(&self, snap: &Snapshot, input: &str) -> Result<String>;

    /// Resolves a gate id or unique prefix.
    fn resolve_gate(&self, snap: &Snapshot, input: &str) -> Result<String> {
        crate::kernel::id::resolve(Kind::Gate, input, snap.gates.keys().map(String::as_str))
    }

    /// Reads an archived todo.
    fn archived_todo(&self, id: &str) -> Result<Option<crate::kernel::Todo>>;

    /// Every archived todo's id.
    fn archived_ids(&self) -> Result<Vec<String>>;

    /// How many todos are archived.
    fn archived_count(&self) -> Result<usize>;

    /// The last `n` evidence entries of a todo, oldest first.
    fn evidence_tail(&self, id: &str, n: usize) -> Result<Vec<Evidence>>;

    /// Every evidence entry `keep` accepts, across todos (or only `only`'s), as (todo id, entry).
    fn evidence_all(&self, only: Option<&str>, keep: Keep<'_>) -> Result<Vec<(String, Evidence)>>;

    /// The last `n` journal events, oldest first.
    fn journal_tail(&self, n: usize) -> Result<Vec<Event>>;

    /// Every actor of the recent journal with the time of its latest event, and the lapsed leases.
    fn journal_seen(&self) -> Result<Seen>;

    /// Where the journal's committed events end now: an opaque position to follow from.
    fn journal_end(&self) -> Result<u64>;

    /// The committed events after position `pos` (from `journal_end`), and the next position.
    fn journal_after(&self, pos: u64) -> Result<(Vec<Event>, u64)>;

    /// The journal line `seq`, if the journal holds it (the file store looks among its last
    /// [`JOURNAL_SCAN`] lines).
    fn journal_line(&self, seq: u64) -> Result<Option<Event>>;

    /// The project's owner public key, if it has one.
    fn owner_pub(&self) -> Result<Option<crate::kernel::authority::OwnerPub>>;

    /// The project root on this machine (the directory that holds `.loopx/`); `None` for a database.
    fn local_root(&self) -> Option<&Path>;
}

/// What a face asks of a store beyond the state its commands change: the owner's key, a goal's
/// start, doctor, the poll lock, and the way to what belongs to the file store alone.
pub trait Admin: Store {
    /// The whole journal's hash chain checked: its events, a torn end, the first broken link.
    fn verify_journal(&self) -> Result<JournalCheck>;

    /// Makes `key` the project's owner key (`owner init`), replacing `replaced` if given.
    fn install_owner(
        &self,
        key: &owner::OwnerKey,
        replaced: Option<&crate::kernel::authority::OwnerPub>,
    ) -> Result<()>;

    /// What starting a goal here means: whether it replaces one (refused, exit 4, when the store
    /// holds a goal and `replace` is not given), and how `start-goal` reports it.
    fn plan_goal(&self, replace: bool) -> Result<GoalPlan>;

    /// Starts the project's goal (`start-goal`): `config` and its first journal line by `actor`;
    /// `replacing` moves the goal there to the store's history first, in one step, and says
    /// where it went.
    fn start_goal(
        &self,
        config: &crate::kernel::Config,
        actor: &str,
        replacing: bool,
    ) -> Result<Option<String>>;

    /// `doctor`: what is wrong with the project (repairs are the file store's own:
    /// [`FileStore::doctor_fix`]).
    fn doctor(&self) -> Result<Vec<doctor::Finding>>;

    /// The worktrees live leases name, read as doctor reads (writing nothing).
    fn live_worktrees(&self) -> Result<Vec<String>>;

    /// The store `hook serve` follows; on files an error (exit 2): there, hooks fire when a
    /// change commits.
    fn followed(&self) -> Result<&dyn live::Followed>;

    /// Where a state file such as `owner.pub` is, as shown to the user.
    fn place_of(&self, file: &str) -> String;

    /// The lock one `monitor poll` holds while it runs checks (released when dropped), or
    /// `None` when another poll holds it.
    fn poll_lock(&self) -> Result<Option<Box<dyn PollLock>>>;

    /// The file store, when the state is in files: what belongs to files alone (STATE.md, the
    /// repairs of `doctor --fix`, the files' own reading); `None` for a database.
    fn files(&self) -> Option<&FileStore>;
}

/// What starting a goal in a store means, before it starts ([`Admin::plan_goal`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalPlan {
    /// A goal is there and moves to history.
    pub replacing: bool,
    /// Where the project is, as `start-goal` shows it: the answer's field (`dir`, or `store`
    /// for a database) and its value.
    pub at: (&'static str, String),
    /// The store's own next step after a new goal (a database: the owner's key, from the
    /// owner's login); `None`: an agent's commands come next, and `--guided` asks for todos.
    pub first: Option<&'static str>,
}

/// How many of the journal's last lines the file store searches for one line by its `seq`.
pub const JOURNAL_SCAN: usize = 10_000;

/// A change made where a hook's command runs (`Env::by_hook`): its lines say so, and fire no
/// hook on any store, so a hook that causes its own event cannot loop.
fn marked(mut change: Change, by_hook: Option<&str>) -> Change {
    if let Some(hook) = by_hook {
        crate::kernel::alert::mark_by_hook(&mut change.events, hook);
    }
    change
}

/// A fresh random id of `kind` that `taken` says is free (64 tries).
pub fn fresh_id_where(kind: Kind, mut taken: impl FnMut(&str) -> Result<bool>) -> Result<String> {
    for _ in 0..64 {
        let mut r = [0u8; 6];
        getrandom::fill(&mut r).map_err(|e| {
            crate::kernel::Error::new(crate::kernel::Code::Io, format!("no randomness: {e}"))
        })?;
        let id = crate::kernel::id::new_id(kind, r);
        if !taken(&id)? {
            return Ok(id);
        }
    }
    Err(crate::kernel::Error::new(
        crate::kernel::Code::Internal,
        "could not find a free id",
    ))
}

/// One change in the making: the snapshot it decides on, and the commit of what it decided.
pub trait Transaction {
    /// The snapshot loaded under the lock.
    fn snapshot(&self) -> &Snapshot;

    /// Before an unnamed claim: locks the todo the kernel would give `agent`, skipping todos
    /// other transactions hold, and freshens the snapshot for it.
    fn reserve_claim(&mut self, agent: &str, now: Ts) -> Result<()> {
        // The file store holds one lock for the whole transaction: nothing to do.
        let _ = (agent, now);
        Ok(())
    }

    /// Commits the change (journal line first, then files) and ends the transaction.
    fn commit(self: Box<Self>, change: Change) -> Result<Vec<Event>>;
}

/// The most times a change is tried when its commit meets a conflict worth retrying.
pub const COMMIT_TRIES: u32 = 16;

/// True when a commit failed on a conflict that a fresh try may not meet (`Code::Conflict`: a
/// database's optimistic conflict). The file store never says so.
pub fn worth_retry(e: &crate::kernel::Error) -> bool {
    e.code == crate::kernel::Code::Conflict
}

/// An unnamed claim's agent and time, for [`Transaction::reserve_claim`].
pub type Claim<'a> = Option<(&'a str, Ts)>;

/// `mutate` for every store, `dyn Store` included.
pub trait StoreExt {
    /// Runs `f` on a fresh snapshot in a transaction and commits its change; returns `f`'s value.
    /// `claim` reserves an unnamed claim's todo first. An error from `f` ends the transaction
    /// with nothing written; a commit that says `retry` runs `f` again on a fresh snapshot.
    fn mutate_with<T>(
        &self,
        claim: Claim<'_>,
        f: impl FnMut(&Snapshot) -> Result<(Change, T)>,
    ) -> Result<T>;

    /// `mutate_with` without a claim.
    fn mutate<T>(&self, f: impl FnMut(&Snapshot) -> Result<(Change, T)>) -> Result<T> {
        self.mutate_with(None, f)
    }

    /// `mutate_with` for an unnamed claim of `agent` at `now`.
    fn mutate_claim<T>(
        &self,
        agent: &str,
        now: Ts,
        f: impl FnMut(&Snapshot) -> Result<(Change, T)>,
    ) -> Result<T> {
        self.mutate_with(Some((agent, now)), f)
    }

    /// `mutate`, with the snapshot's owner notes (where files disagree with the owner's seal)
    /// attached: to the error's details on failure, returned beside the value on success.
    fn mutate_noted<T>(
        &self,
        f: impl FnMut(&Snapshot) -> Result<(Change, T)>,
    ) -> Result<(T, Vec<String>)> {
        self.mutate_noted_with(None, f)
    }

    /// `mutate_noted`, reserving an unnamed claim's todo first when `claim` says so.
    fn mutate_noted_with<T>(
        &self,
        claim: Claim<'_>,
        mut f: impl FnMut(&Snapshot) -> Result<(Change, T)>,
    ) -> Result<(T, Vec<String>)> {
        let mut notes = Vec::new();
        let r = self.mutate_with(claim, |snap| {
            notes = snap.owner_notes.clone();
            f(snap)
        });
        match r {
            Ok(v) => Ok((v, notes)),
            Err(e) if notes.is_empty() => Err(e),
            Err(e) => {
                let mut d = e
                    .details
                    .as_deref()
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({}));
                if let Some(m) = d.as_object_mut() {
                    m.insert("owner_notes".into(), serde_json::json!(notes));
                }
                let msg = format!("{} ({})", e.message, notes.join("; "));
                let mut e = e.details(d);
                e.message = msg;
                Err(e)
            }
        }
    }
}

impl<S: Store + ?Sized> StoreExt for S {
    fn mutate_with<T>(
        &self,
        claim: Claim<'_>,
        mut f: impl FnMut(&Snapshot) -> Result<(Change, T)>,
    ) -> Result<T> {
        let mut tries = 0;
        loop {
            tries += 1;
            match try_once(self, claim, &mut f) {
                Err(e) if tries < COMMIT_TRIES && worth_retry(&e) => {
                    // A tiny backoff, longer each time, so racing writers spread out.
                    std::thread::sleep(std::time::Duration::from_micros(50 << tries.min(8)));
                }
                // Past the tries, a conflict is what it is to the caller: busy.
                Err(mut e) if worth_retry(&e) => {
                    e.code = crate::kernel::Code::Busy;
                    return Err(e);
                }
                r => return r,
            }
        }
    }
}

/// One try of `mutate_with`: a transaction, the claim's reservation, `f`, the commit.
fn try_once<S: Store + ?Sized, T>(
    store: &S,
    claim: Claim<'_>,
    f: &mut impl FnMut(&Snapshot) -> Result<(Change, T)>,
) -> Result<T> {
    let mut tx = store.begin()?;
    if let Some((agent, now)) = claim {
        tx.reserve_claim(agent, now)?;
    }
    let (change, out) = f(tx.snapshot())?;
    tx.commit(marked(change, store.env().by_hook.as_deref()))?;
    Ok(out)
}

#[cfg(test)]
mod tests;
