//! The store: where snapshots come from and where changes go, behind one trait.

pub mod atomic;
pub mod cache;
pub mod doctor;
pub mod fs;
pub mod journal;
pub mod lock;
pub mod owner;
pub mod parse;

pub use fs::FileStore;

use crate::kernel::id::Kind;
use crate::kernel::ops::Change;
use crate::kernel::{Event, Evidence, Result, Snapshot};

/// A place that keeps a project's state: the file store now, a database later.
pub trait Store {
    /// A consistent snapshot of the working state.
    fn load(&self) -> Result<Snapshot>;

    /// Runs `f` on a fresh snapshot under the exclusive lock, then commits its change and journals it.
    fn mutate<T>(&self, f: impl FnOnce(&Snapshot) -> Result<(Change, T)>) -> Result<T>;

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
}
