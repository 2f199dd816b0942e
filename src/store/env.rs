//! The facts a face reads once from outside the project (the clock, the lock's wait, the owner
//! key's place, the hook that runs it) and hands to a store, and the observer it registers.

use crate::kernel::{Event, Snapshot, Ts};
use crate::store::FileStore;
use crate::store::core::owner;

/// Facts from outside the project that the face reads once and hands to the store (the
/// library reads no environment variable).
#[derive(Debug, Clone)]
pub struct Env {
    /// The time of the command, for the lines the store writes itself (repairs, owner init).
    pub now: Ts,
    /// How long to wait for the lock (`LOOPX_LOCK_TIMEOUT`).
    pub lock_wait: std::time::Duration,
    /// Where the owner's secret key is.
    pub key: owner::KeyAt,
    /// The event whose hook runs this command (`LOOPX_EVENT`): its changes say so, and fire no
    /// hook, so a hook that causes its own event cannot loop.
    pub by_hook: Option<std::sync::Arc<str>>,
    /// What runs after a commit, with the lock released (the face's alerts); `None`: nothing.
    pub on_commit: Option<OnCommit>,
}

impl Default for Env {
    fn default() -> Self {
        Env {
            now: Ts::now(),
            lock_wait: std::time::Duration::from_secs(
                crate::kernel::limits::LOCK_TIMEOUT_DEFAULT_S,
            ),
            key: owner::KeyAt::Unknown,
            by_hook: None,
            on_commit: None,
        }
    }
}

/// What runs after a transaction of the file store commits, with the lock released: the store,
/// the snapshot the change was decided on, and the lines it committed (the CLI fires the owner's
/// hooks; a database's hooks are fired by `hook serve`).
pub type OnCommit = fn(&FileStore, &Snapshot, &[Event]);
