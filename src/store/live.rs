//! What a face that stays open (the board) asks of a store beyond [`Admin`]: how it names the
//! project, how it loads again after a change, and how it hears of changes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::kernel::{Event, Result, Snapshot, Ts};
use crate::store::{Admin, Store};

/// What a feed of changes says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// These state files changed (none named: something changed, read it all).
    Changed(Vec<PathBuf>),
    /// Events were lost: reload everything.
    Rescan,
    /// The watcher failed: fall back to polling.
    Failed(String),
    /// The database's connection dropped (why): reconnecting.
    Reconnecting(String),
    /// The database's connection is back: reload everything (events may have been missed).
    Reconnected,
}

/// Where a feed sends its signals; false once the face is gone (the feed then stops).
pub type Sink = Box<dyn Fn(Signal) -> bool + Send>;

/// What one changed path means to a face that stays open.
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
    /// The owner's files (`owner.pub`, `owner.seal`, `owner.proofs`), or a directory itself
    /// (created or removed): reload it all.
    Everything,
    /// Not state: the lock, temp files, STATE.md, history.
    Ignore,
}

/// A load for a face that stays open: the base of the next reload (the files' own values;
/// `None`: the next load is a full one), and the snapshot checked against the owner's seal.
pub type Loaded = (Option<Snapshot>, Snapshot);

/// A running feed of changes; dropping it stops it.
pub trait Feed {
    /// On the face's tick: the files a poll found changed, and why it polls from now on when
    /// change events stopped arriving.
    fn tick(&mut self) -> (Vec<PathBuf>, Option<String>);

    /// The face shows that events failed: poll from now on; true when everything should be
    /// read again.
    fn poll_instead(&mut self) -> bool;

    /// Changes arrived and were read.
    fn saw_changes(&mut self);
}

/// A feed with nothing to poll: a database's (its listening thread sends by itself), or one
/// that could not start.
#[derive(Debug)]
pub struct Silent;

impl Feed for Silent {
    fn tick(&mut self) -> (Vec<PathBuf>, Option<String>) {
        (Vec::new(), None)
    }

    fn poll_instead(&mut self) -> bool {
        false
    }

    fn saw_changes(&mut self) {}
}

/// A store a face that stays open works on: the files (reloaded by changed file, heard through
/// file events) or a database (loaded in full, heard through `LISTEN`).
pub trait Watched: Admin + Sync {
    /// The project as the status bar names it: its root, or the database's URL (no password).
    fn name(&self) -> String;

    /// What a failed load names as its file: `.loopx`, or `database`.
    fn whole(&self) -> String;

    /// What a failed read of a todo's evidence names as its file.
    fn evidence_name(&self, id: &str) -> String;

    /// Loads everything, tolerantly (a malformed todo or gate is quarantined).
    fn load_live(&self) -> Result<Loaded>;

    /// What a changed path means to a reload.
    fn target(&self, path: &Path) -> Target;

    /// Reads again only what `changed` names, on top of `base` (from the last load).
    fn reload_live(&self, base: Snapshot, changed: &[PathBuf]) -> Result<Loaded>;

    /// True when no event names a changed evidence log: the todos new journal lines name are
    /// read again instead.
    fn evidence_by_journal(&self) -> bool;

    /// Starts hearing of changes (`poll`: by polling), each signal sent to `sink`; with why it
    /// polls, when it does from the start.
    fn watch(&self, poll: bool, sink: Sink) -> Result<(Box<dyn Feed>, Option<String>)>;

    /// This store at `now`, waiting at most `wait` for its lock, for a face that holds the
    /// owner's key to seal new journal lines through (hand edits show against the seal);
    /// `None` when it needs no such seal (a database refuses agents the owner's rows).
    fn sealing(&self, now: Ts, wait: Duration) -> Option<Box<dyn Store + Sync>>;
}

/// A connection that hears of commits as they happen (a database's `LISTEN`).
pub trait Listener {
    /// Waits up to `wait` for commits: how many were heard (0: none); an error when the
    /// connection failed.
    fn notified(&mut self, wait: Duration) -> Result<usize>;

    /// Checks that a quiet connection is still there (a cut cable says nothing).
    fn alive(&mut self) -> Result<()>;
}

/// What `hook serve` follows: a store that hears of its commits as they happen
/// ([`Admin::followed`]).
pub trait Followed: Store + Sync {
    /// A connection of its own that hears of commits, holding the store's one `hook serve`
    /// lock while it lasts (busy while another holds it; denied to an agent's login).
    fn listen_alone(&self) -> Result<Box<dyn Listener>>;

    /// At most `limit` journal lines after line `after`, oldest first, and the `seq` of the last
    /// line read (`after` when there is none).
    fn journal_page(&self, after: u64, limit: usize) -> Result<(Vec<Event>, u64)>;

    /// The store as a hook's command is pointed at it (`LOOPX_STORE`).
    fn url(&self) -> &str;
}
