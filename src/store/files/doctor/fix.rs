//! `doctor --fix`: repairs only what is mechanical, under the exclusive lock, never through a link.
//!
//! It removes stray temp files (the entry itself: a link is unlinked, never followed), cuts a
//! torn last line off the journal and evidence logs (opened with `O_NOFOLLOW`, regular files
//! only), removes the working copy of a todo that is also archived as finished, and clears
//! expired leases through the store.

use std::fs::{self, File};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::files::{DIRS, entries, is_real_dir};
use crate::kernel::{Error, Event, Result, Ts};
use crate::store::fs::FileStore;
use crate::store::parse::shown;
use crate::store::{Reads, atomic, journal};

/// A temp file of STATE.md or of the cache is written without the lock: younger than this, it
/// may be a write in progress, so it is left alone.
const UNLOCKED_TEMP_AGE: Duration = Duration::from_secs(60);

/// Repairs what is safe, under the exclusive lock; returns what it did.
pub fn fix(store: &FileStore, now: Ts) -> Result<Vec<String>> {
    let g = store.lock(true)?;
    let mut did = Vec::new();
    // First finish a commit a crash interrupted: its staged files are not leftovers.
    if let Some(what) = store.recover_noted()? {
        did.push(what);
    }
    remove_temps(store.dir(), &mut did);
    // The cache is never needed: deleting it fixes a row that disagrees with its file.
    let cache = store.path(crate::store::files::load::ROWS);
    let mut rows = Vec::new();
    super::cache::check(store, &mut rows);
    if !rows.is_empty() {
        let names = store.path(crate::store::files::load::NAMES);
        let a = std::fs::remove_file(&cache).is_ok();
        let b = std::fs::remove_file(&names).is_ok();
        if a || b {
            did.push(
                "deleted cache/todos.bin and cache/todos.names (rebuilt by the next load)".into(),
            );
        }
    }
    cut_torn_tails(store, &mut did)?;
    remove_archived_copies(store, &mut did);
    let events = clear_expired_leases(store, now, &mut did)?;
    // Hooks fire once the lock is free (a supervisor that cannot start is journaled through it).
    drop(g);
    store.committed_unloaded(&events);
    Ok(did)
}

/// Removes leftover temp files; only real directories are listed, and a link is only unlinked.
fn remove_temps(d: &Path, did: &mut Vec<String>) {
    for sub in std::iter::once("").chain(DIRS) {
        let dir = d.join(sub);
        if !sub.is_empty() && !is_real_dir(&dir) {
            continue;
        }
        for (name, path) in entries(&dir) {
            if !atomic::is_temp_name(&name) {
                continue;
            }
            let Ok(meta) = fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                continue;
            }
            let unlocked_writer = sub == "cache" || name.starts_with(".STATE.md");
            let young = meta
                .modified()
                .ok()
                .and_then(|m| SystemTime::now().duration_since(m).ok())
                .is_none_or(|age| age < UNLOCKED_TEMP_AGE);
            if unlocked_writer && young {
                continue;
            }
            // remove_file unlinks the entry itself; it never follows a symlink.
            if fs::remove_file(&path).is_ok() {
                did.push(format!("removed temp file {}", shown(&path)));
            }
        }
    }
}

/// Opens a log for the cut without following a link or blocking on a FIFO; regular files only.
fn open_log(path: &Path) -> Option<File> {
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    f.metadata().ok().filter(|m| m.is_file()).map(|_| f)
}

/// Cuts a torn last line off the journal and every evidence log.
fn cut_torn_tails(store: &FileStore, did: &mut Vec<String>) -> Result<()> {
    let ev = store.dir().join("evidence");
    let logs = if is_real_dir(&ev) {
        entries(&ev)
    } else {
        Vec::new()
    };
    let all = logs
        .into_iter()
        .chain([("journal.jsonl".to_string(), store.journal_path())]);
    for (name, path) in all {
        if !name.ends_with(".jsonl") || name.starts_with('.') {
            continue;
        }
        let Some(mut f) = open_log(&path) else {
            continue;
        };
        let cut = journal::cut_torn_tail(&mut f).map_err(|e| Error::io(&path, &e))?;
        if cut > 0 {
            did.push(format!(
                "removed a torn last line ({cut} bytes) from {}",
                shown(&path)
            ));
        }
    }
    Ok(())
}

/// Removes `todos/ID.toml` when `archive/ID.toml` holds the todo as done or cancelled.
fn remove_archived_copies(store: &FileStore, did: &mut Vec<String>) {
    let d = store.dir();
    if !is_real_dir(&d.join("archive")) || !is_real_dir(&d.join("todos")) {
        return;
    }
    for (name, _) in entries(&d.join("archive")) {
        let Some(stem) = name
            .strip_suffix(".toml")
            .filter(|_| !name.starts_with('.'))
        else {
            continue;
        };
        let open = d.join("todos").join(&name);
        let is_file = fs::symlink_metadata(&open).is_ok_and(|m| m.file_type().is_file());
        if is_file
            && matches!(store.archived_todo(stem), Ok(Some(t)) if t.status.is_final())
            && fs::remove_file(&open).is_ok()
        {
            did.push(format!("removed {} (it is archived)", shown(&open)));
        }
    }
}

/// Clears expired leases through the store, journaled as `doctor`; the lines committed.
fn clear_expired_leases(store: &FileStore, now: Ts, did: &mut Vec<String>) -> Result<Vec<Event>> {
    match store.load_unlocked() {
        Ok(snap) => {
            let change = crate::kernel::ops::expire_leases(&snap, "doctor", now);
            for e in &change.events {
                did.push(format!("cleared the expired lease on {}", e.target));
            }
            store.apply_change(change)
        }
        Err(e) => {
            did.push(format!("left expired leases alone: {}", e.message));
            Ok(Vec::new())
        }
    }
}
