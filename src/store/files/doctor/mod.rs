//! doctor: checks every file of `.loopx/`, the journal's chain and owner lines, the relations
//! between files (leases, statuses, dependencies, quota, durations), temp files and the lock.
//!
//! [`check`] reads under the shared lock, so a write in progress is never half seen, and writes
//! nothing but the finish of a commit a crash interrupted (which any command's load does).
//! [`fix`] repairs only what is mechanical, under the exclusive lock, and never follows a link.

mod cache;
mod files;
mod fix;
mod owner;
mod seal;
pub use seal::owner_history_cut;

use std::fs;
use std::path::Path;

use crate::kernel::{Result, Ts};
use crate::store::core::doctor::{self as shared, Finding};
use crate::store::fs::FileStore;

pub use fix::fix;

/// Runs every check under the shared lock; never writes. A lock that cannot be taken is a finding.
pub fn check(store: &FileStore, now: Ts) -> Vec<Finding> {
    check_locked(store, now).unwrap_or_else(|e| {
        vec![Finding::error(
            ".loopx/lock",
            None,
            format!("cannot take the shared lock: {}", e.message),
        )]
    })
}

/// Runs every check under the shared lock; `busy` (exit 8) when a writer holds it too long.
///
/// A commit a crash interrupted after its journal line is finished first, under the exclusive
/// lock, as every command's load finishes it: doctor judges the state that commit leaves, not
/// files it has not put in place yet (which would read as edited by hand).
pub fn check_locked(store: &FileStore, now: Ts) -> Result<Vec<Finding>> {
    let finished = finish_commit(store);
    let _guard = store.lock(false)?;
    let mut out = check_unlocked(store, now);
    out.extend(finished);
    Ok(out)
}

/// Finishes (or cuts) a transaction a crash interrupted, as the next command would; a warning
/// says what it did. Where it cannot (no write access), the check reports the commit unfinished.
fn finish_commit(store: &FileStore) -> Option<Finding> {
    if !store.needs_recovery().unwrap_or(false) {
        return None;
    }
    let _guard = store.lock(true).ok()?;
    let what = store.recover_noted().ok()??;
    Some(Finding::warning(
        ".loopx/journal.jsonl",
        None,
        format!("{what} (a crash): nothing to do"),
    ))
}

/// The worktrees live leases name (`[lease] worktree`), read as doctor reads the files: under
/// the shared lock, writing nothing (no recovery, no cache).
pub fn live_worktrees(store: &FileStore, now: Ts) -> Result<Vec<String>> {
    let _guard = store.lock(false)?;
    let state = files::read_all(store, &mut Vec::new());
    Ok(state
        .todos
        .iter()
        .filter_map(|d| d.value.live_lease(now).and_then(|l| l.worktree.clone()))
        .collect())
}

/// Every check, with the lock held by the caller.
fn check_unlocked(store: &FileStore, now: Ts) -> Vec<Finding> {
    let mut out = Vec::new();
    let state = files::read_all(store, &mut out);
    shared::check_relations(&state, now, &mut out);
    owner::check(store, &state, &mut out);
    check_network_fs(store, &mut out);
    check_unfinished(store, &mut out);
    cache::check(store, &mut out);
    out
}

/// A commit a crash interrupted: fixable, and finished by the next command anyway.
fn check_unfinished(store: &FileStore, out: &mut Vec<Finding>) {
    let Ok(t) = crate::store::recover::tail(store.dir()) else {
        return;
    };
    let what = match (t.torn_tx, t.pending, t.last.and_then(|e| e.tx)) {
        (Some(n), ..) => {
            format!("transaction {n} did not reach the journal whole: its lines will be cut")
        }
        (None, true, Some(n)) => {
            format!("transaction {n} is committed but its files are not all in place yet")
        }
        _ => return,
    };
    let mut f = Finding::warning(
        ".loopx/journal.jsonl",
        None,
        format!("{what} (a crash); `loopx doctor --fix` or the next command finishes it"),
    );
    f.fixable = true;
    out.push(f);
}

fn check_network_fs(store: &FileStore, out: &mut Vec<Finding>) {
    if let Some(fs_type) = crate::store::lock::network_fs(store.dir()) {
        out.push(Finding::warning(
            ".loopx/lock",
            None,
            format!(".loopx/ is on {fs_type}: locks may not be shared between machines; run agents on one machine"),
        ));
    }
}

/// True when `path` is a regular file (not a link, FIFO, socket, device or directory).
fn is_regular(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}
