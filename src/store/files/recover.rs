//! Recovery of journal-first transactions: where the journal stands, and the finish (or the
//! cut) at the next load of a commit a crash interrupted.

use std::fs::{self, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::tx::{apply_all, safe_rel, staged_rel, state_error};
use crate::kernel::{Error, Event, Result};
use crate::store::{atomic, journal};

/// Where the journal stands: its last complete line, and whether a commit is unfinished.
#[derive(Debug, Default)]
pub struct Tail {
    /// The last complete line, parsed.
    pub last: Option<Event>,
    /// A transaction whose lines did not all reach the journal: cut from this `seq` on.
    pub torn_tx: Option<u64>,
    /// The last transaction's staged files still waiting to be put in place.
    pub pending: bool,
    /// The same tail, as the next append needs it.
    pub journal: journal::Tail,
}

/// Reads the journal's tail and checks whether its last transaction is complete.
pub fn tail(dir: &Path) -> Result<Tail> {
    let path = dir.join("journal.jsonl");
    let (mut lines, torn) = journal::tail_lines(&path, 1).map_err(|e| state_error(&path, &e))?;
    let raw = lines.pop();
    let mut t = Tail {
        journal: journal::Tail::from_parts(raw.clone(), torn),
        ..Tail::default()
    };
    let Some(line) = raw else {
        return Ok(t);
    };
    let Ok(last) = serde_json::from_slice::<Event>(&line) else {
        return Ok(t);
    };
    match (&last.tx, &last.files) {
        (Some(first), None)
            if last
                .seq
                .checked_sub(*first)
                .is_some_and(|d| d < MAX_TX_LINES) =>
        {
            t.torn_tx = Some(*first)
        }
        (Some(first), Some(files)) => {
            for f in files.iter().filter(|f| safe_rel(&f.path)) {
                let staged = dir.join(staged_rel(&f.path, *first));
                if fs::symlink_metadata(&staged).is_ok() {
                    t.pending = true;
                    break;
                }
            }
        }
        _ => {}
    }
    t.last = Some(last);
    Ok(t)
}

/// Finishes or undoes the journal's last transaction (the caller holds the exclusive lock).
///
/// Returns what it did, for the journal: `None` when there was nothing to do.
pub fn recover(dir: &Path) -> Result<Option<String>> {
    let t = tail(dir)?;
    if let Some(first) = t.torn_tx {
        let last_seq = t.last.as_ref().map_or(0, |e| e.seq);
        if !cut_from(dir, first, last_seq)? {
            return Ok(None);
        }
        remove_staged(dir, first);
        return Ok(Some(format!(
            "cut the lines of transaction {first}, which a crash left unfinished"
        )));
    }
    if t.pending
        && let Some(ev) = &t.last
        && let (Some(first), Some(files)) = (ev.tx, &ev.files)
    {
        apply_all(dir, first, files, true)?;
        return Ok(Some(format!("finished transaction {first}")));
    }
    Ok(None)
}

/// The most lines one transaction has (a rejected gate with its most blocks, and a repair).
pub const MAX_TX_LINES: u64 = 1100;

/// Cuts the journal back to just before the line whose `seq` is `first`, but only when every
/// line from there on is a line of that one transaction: a line planted to look torn never
/// makes loopx cut history that came before it. Returns whether it cut.
fn cut_from(dir: &Path, first: u64, last_seq: u64) -> Result<bool> {
    let path = dir.join("journal.jsonl");
    let Some(n) = last_seq
        .checked_sub(first)
        .map(|d| d + 1)
        .filter(|n| *n <= MAX_TX_LINES)
    else {
        return Ok(false);
    };
    let (lines, _) = journal::tail_lines(&path, n as usize).map_err(|e| Error::io(&path, &e))?;
    let whole = lines.len() as u64 == n
        && lines.iter().enumerate().all(|(i, l)| {
            serde_json::from_slice::<Event>(l).is_ok_and(|e| {
                e.seq == first + i as u64 && e.tx == Some(first) && e.files.is_none()
            })
        });
    if !whole {
        return Ok(false);
    }
    let keep_lines: u64 = lines.iter().map(|l| l.len() as u64 + 1).sum();
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| Error::io(&path, &e))?;
    journal::cut_torn_tail(&mut f).map_err(|e| Error::io(&path, &e))?;
    let len = f.metadata().map_err(|e| Error::io(&path, &e))?.len();
    f.set_len(len.saturating_sub(keep_lines))
        .and_then(|_| f.sync_data())
        .map_err(|e| Error::io(&path, &e))?;
    Ok(true)
}

/// Removes the staged files of an uncommitted transaction, wherever they are.
fn remove_staged(dir: &Path, tx: u64) {
    let suffix = format!("{}tx{tx}", atomic::TEMP_MARK);
    for sub in ["", "todos", "archive", "gates", "evidence", "agents"] {
        let Ok(rd) = fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            if e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with('.') && n.ends_with(&suffix))
            {
                let _ = fs::remove_file(e.path());
            }
        }
    }
}
