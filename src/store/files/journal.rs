//! The journal file: append-only JSON Lines, read from its end and appended under the lock.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use crate::kernel::{Error, Event, EventDraft, Result};
pub use crate::store::core::chain::{Break, GENESIS, build_lines, seq_of, sha256_hex, verify};

/// A log's length without a torn last line (bytes after the last newline).
pub fn clean_len(f: &mut File) -> io::Result<u64> {
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(0);
    }
    let mut last = [0u8; 1];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(len);
    }
    Ok(last_newline(f, len)?.map_or(0, |p| p + 1))
}

/// Cuts a torn last line (bytes after the last newline) off a file; returns the bytes cut.
pub fn cut_torn_tail(f: &mut File) -> io::Result<u64> {
    let len = f.metadata()?.len();
    let keep = clean_len(f)?;
    if keep == len {
        return Ok(0);
    }
    f.set_len(keep)?;
    f.sync_data()?;
    Ok(len - keep)
}

/// The offset of the last newline before `end`, reading backwards in chunks.
fn last_newline(f: &mut File, end: u64) -> io::Result<Option<u64>> {
    let mut pos = end;
    let mut buf = vec![0u8; 8192];
    while pos > 0 {
        let n = (pos.min(buf.len() as u64)) as usize;
        pos -= n as u64;
        f.seek(SeekFrom::Start(pos))?;
        f.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|b| *b == b'\n') {
            return Ok(Some(pos + i as u64));
        }
    }
    Ok(None)
}

/// The last `n` complete lines of a file (without newlines), oldest first, and whether a torn tail follows.
pub fn tail_lines(path: &Path, n: usize) -> io::Result<(Vec<Vec<u8>>, bool)> {
    let mut f = match crate::store::atomic::open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(e) => return Err(e),
    };
    let len = f.metadata()?.len();
    let mut pos = len;
    // Chunks read backwards, newest first, until n+1 newlines (or the start): linear in what
    // is read, however long a line is.
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut count = 0;
    let mut step = 4 * 1024u64;
    while pos > 0 && count <= n {
        let take = pos.min(step);
        pos -= take;
        let mut buf = vec![0u8; take as usize];
        f.seek(SeekFrom::Start(pos))?;
        f.read_exact(&mut buf)?;
        count += buf.iter().filter(|b| **b == b'\n').count();
        chunks.push(buf);
        step = (step * 2).min(1 << 22);
    }
    let mut data: Vec<u8> = Vec::with_capacity(chunks.iter().map(Vec::len).sum());
    for c in chunks.iter().rev() {
        data.extend_from_slice(c);
    }
    let torn = !data.is_empty() && data.last() != Some(&b'\n');
    let complete_end = data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let body = &data[..complete_end];
    let mut lines: Vec<Vec<u8>> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| l.to_vec())
        .collect();
    // The first piece may be a partial line when we did not read from the start.
    if pos > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let skip = lines.len().saturating_sub(n);
    Ok((lines.split_off(skip), torn))
}

/// The `prev` the next line will carry: the hash of the last complete line.
pub fn head(path: &Path) -> Result<String> {
    let (last, _) = tail_lines(path, 1).map_err(|e| Error::io(path, &e))?;
    Ok(last
        .first()
        .map_or_else(|| GENESIS.to_string(), |l| sha256_hex(l)))
}

/// Appends events to the journal, chained to its last line, in one write; `signer` signs each line.
///
/// With `files`, the lines are one transaction: each carries `tx` (the first line's `seq`) and
/// the last one lists the files, which makes it the commit point.
pub fn append(
    path: &Path,
    drafts: Vec<EventDraft>,
    signer: Option<&crate::store::owner::OwnerKey>,
    files: Option<Vec<crate::kernel::TxFile>>,
) -> Result<Vec<Event>> {
    let tail = Tail::read(path)?;
    append_after(path, &tail, drafts, signer, files)
}

/// The journal's last complete line and whether a torn one follows: read once a commit.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    last: Option<Vec<u8>>,
    torn: bool,
}

impl Tail {
    /// Reads it (the caller holds the lock, so it stays true until the append).
    pub fn read(path: &Path) -> Result<Tail> {
        let (mut last, torn) = tail_lines(path, 1).map_err(|e| Error::io(path, &e))?;
        Ok(Tail {
            last: last.pop(),
            torn,
        })
    }

    /// The tail from a read already made: the last complete line and whether a torn one follows.
    pub fn from_parts(last: Option<Vec<u8>>, torn: bool) -> Tail {
        Tail { last, torn }
    }

    /// The `seq` the next line gets.
    pub fn next_seq(&self) -> u64 {
        self.last.as_deref().map_or(0, seq_of) + 1
    }
}

/// `append`, after a tail read under the same lock.
pub fn append_after(
    path: &Path,
    tail: &Tail,
    drafts: Vec<EventDraft>,
    signer: Option<&crate::store::owner::OwnerKey>,
    files: Option<Vec<crate::kernel::TxFile>>,
) -> Result<Vec<Event>> {
    if drafts.is_empty() {
        return Ok(Vec::new());
    }
    let (last, torn) = (tail.last.as_deref(), tail.torn);
    let mut drafts = drafts;
    if torn {
        // The append cuts a torn last line (a crash mid-append) first; the journal says so.
        let at = drafts[0].at;
        drafts.insert(
            0,
            EventDraft {
                at,
                actor: "loopx".into(),
                action: crate::kernel::Action::JournalRepair,
                target: "journal.jsonl".into(),
                data: serde_json::json!({"removed": "a torn last line"}),
            },
        );
    }
    let (out, buf) = build_lines(last, drafts, signer, files)?;
    crate::store::atomic::append_line(path, &buf).map_err(|e| Error::io(path, &e))?;
    Ok(out)
}
