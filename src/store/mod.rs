//! The store: where snapshots come from and where changes go, behind one trait.

pub mod atomic;
pub mod cache;
mod commit;
pub mod doctor;
pub mod evidence;
pub mod fs;
pub mod journal;
mod load;
pub mod lock;
pub mod logs;
pub mod owner;
pub mod parse;
pub(crate) mod sealing;
pub mod seen;
pub mod tx;
pub mod view;

pub mod pg;

pub use fs::FileStore;

use crate::kernel::id::Kind;
use crate::kernel::ops::Change;
use crate::kernel::{Event, Evidence, Result, Snapshot};

/// A place that keeps a project's state: the file store now, a database later.
///
/// Usable as `dyn Store`: every change goes through [`Store::begin`] and [`Transaction::commit`].
pub trait Store {
    /// A consistent snapshot of the working state (an interrupted commit is finished first).
    fn load(&self) -> Result<Snapshot>;

    /// Starts a transaction: the exclusive lock, and a fresh snapshot loaded under it.
    fn begin(&self) -> Result<Box<dyn Transaction + '_>>;

    /// A fresh random id of this kind, unused in the project.
    fn fresh_id(&self, kind: Kind) -> Result<String>;

    /// Resolves a todo id or unique prefix against open and archived todos.
    fn resolve_todo(&self, snap: &Snapshot, input: &str) -> Result<String>;

    /// Resolves a gate id or unique prefix.
    fn resolve_gate(&self, snap: &Snapshot, input: &str) -> Result<String>;

    /// Reads an archived todo.
    fn archived_todo(&self, id: &str) -> Result<Option<crate::kernel::Todo>>;

    /// The last `n` evidence entries of a todo, oldest first.
    fn evidence_tail(&self, id: &str, n: usize) -> Result<Vec<Evidence>>;

    /// The last `n` journal events, oldest first.
    fn journal_tail(&self, n: usize) -> Result<Vec<Event>>;

    /// Every evidence entry `keep` accepts, across todos (or only `only`'s), as (todo id, entry).
    fn evidence_all(
        &self,
        only: Option<&str>,
        keep: evidence::Keep<'_>,
    ) -> Result<Vec<(String, Evidence)>>;
}

/// One change in the making: the snapshot it decides on, and the commit of what it decided.
pub trait Transaction {
    /// The snapshot loaded under the lock.
    fn snapshot(&self) -> &Snapshot;

    /// Commits the change (journal line first, then files) and ends the transaction.
    fn commit(self: Box<Self>, change: Change) -> Result<Vec<Event>>;

    /// Before an unnamed claim: locks the todo the kernel would give `agent`, skipping todos
    /// other transactions hold, and freshens the snapshot for it.
    fn reserve_claim(&mut self, _agent: &str, _now: crate::kernel::Ts) -> Result<()> {
        Ok(())
    }
}

/// `mutate` for every store, `dyn Store` included.
pub trait StoreExt {
    /// Runs `f` on a fresh snapshot in a transaction and commits its change; returns `f`'s value.
    /// An error from `f` ends the transaction with nothing written.
    fn mutate<T>(&self, f: impl FnOnce(&Snapshot) -> Result<(Change, T)>) -> Result<T>;

    /// `mutate`, with the snapshot's owner notes (where files disagree with the owner's seal)
    /// attached: to the error's details on failure, returned beside the value on success.
    fn mutate_noted<T>(
        &self,
        f: impl FnOnce(&Snapshot) -> Result<(Change, T)>,
    ) -> Result<(T, Vec<String>)> {
        let mut notes = Vec::new();
        let r = self.mutate(|snap| {
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
    fn mutate<T>(&self, f: impl FnOnce(&Snapshot) -> Result<(Change, T)>) -> Result<T> {
        let tx = self.begin()?;
        let (change, out) = f(tx.snapshot())?;
        tx.commit(change)?;
        Ok(out)
    }
}
