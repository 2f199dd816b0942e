//! The owner's seal on disk: reading and checking `owner.seal` on every load, and writing it
//! again in every owner transaction.

use std::io::{Read, Seek, SeekFrom};

use crate::kernel::authority::OwnerPub;
use crate::kernel::seal::{self, Mark, Seal};
use crate::kernel::{Error, Result, Snapshot};
use crate::store::fs::FileStore;
use crate::store::{atomic, journal, parse, tx};

/// The most journal bytes after the seal read for later owner lines (about 200,000 lines).
const MAX_SCAN: u64 = 64 << 20;

impl FileStore {
    /// Checks a snapshot against the owner's seal and acts on the seal's values where a file
    /// disagrees. A project with an owner key but no valid seal counts as paused.
    pub(crate) fn check_seal(&self, snap: &mut Snapshot, key: Option<&OwnerPub>) {
        let p = self.path("owner.seal");
        let Some(key) = key else {
            // A seal with no owner.pub: the key was deleted to switch the owner's checks off.
            if std::fs::symlink_metadata(&p).is_ok() {
                snap.owner_notes = seal::unsealed(snap, "exists but owner.pub is gone");
            }
            return;
        };
        let text = match parse::read_bytes(&p) {
            Ok(Some(b)) => String::from_utf8(b).map_err(|_| "is not UTF-8 text".to_string()),
            Ok(None) => Err("is missing".to_string()),
            Err(e) => Err(format!("cannot be read ({})", e.message)),
        };
        let goal = snap.config.goal.id.clone();
        let parsed = text
            .and_then(|t| Seal::parse(&t, key).map_err(|why| format!("is not valid: {why}")))
            .and_then(|s| match &s.goal {
                Some((id, _)) if *id != goal => Err(format!("is for another goal ({id})")),
                _ => Ok(s),
            });
        match parsed {
            Ok(mut s) => {
                // One read of the journal from the sealed line on serves both checks.
                let since = self.since_mark(&s);
                if let Some(n) = later_owner_line(since.as_deref().unwrap_or_default(), &s, key) {
                    // An older seal put back: the owner acted after it.
                    snap.owner_notes = seal::unsealed(
                        snap,
                        &format!("is older than the owner's action at journal.jsonl:{n}"),
                    );
                    return;
                }
                let mut notes = seal::apply(snap, &mut s);
                let journaled = seal::Journaled::read(since.as_deref().unwrap_or_default());
                let found = seal::journaled::apply(snap, &s, &journaled);
                notes.extend(found.into_iter().map(|(_, n)| n));
                if let Some(m) = &s.journal
                    && !starts_with_line(since.as_deref(), &m.hash)
                {
                    notes.push(format!(
                        "journal.jsonl was rewritten or cut at or before line {}, which the owner sealed: run `loopx doctor`",
                        m.seq
                    ));
                }
                snap.owner_notes = notes;
                snap.seal = Some(s);
            }
            Err(why) => snap.owner_notes = seal::unsealed(snap, &why),
        }
    }

    /// The journal from the line a seal marks on (from the start without a mark); `None` when
    /// no line starts there (the journal was cut or rewritten before it).
    fn since_mark(&self, s: &Seal) -> Option<Vec<u8>> {
        let offset = s.journal.as_ref().map_or(0, |m| m.offset);
        let mut f = atomic::open_nofollow(&self.journal_path()).ok()?;
        let from = offset.saturating_sub(1);
        f.seek(SeekFrom::Start(from)).ok()?;
        let mut buf = Vec::new();
        f.take(MAX_SCAN).read_to_end(&mut buf).ok()?;
        // A torn last line (a crash mid-append) was never committed, even when it parses.
        buf.truncate(buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1));
        if offset > 0 {
            // The byte before a line is the previous line's newline.
            (buf.first() == Some(&b'\n')).then(|| buf.split_off(1))
        } else {
            Some(buf)
        }
    }

    /// Where files disagree with the seal's leases and spends and with the journal after the
    /// seal: each file (in `.loopx/`) and what loopx acts on instead (doctor's view).
    pub(crate) fn journaled_disagreements(
        &self,
        snap: &mut Snapshot,
        s: &Seal,
    ) -> Vec<seal::Disagreement> {
        let since = self.since_mark(s);
        let j = seal::Journaled::read(since.as_deref().unwrap_or_default());
        seal::journaled::apply(snap, s, &j)
    }

    /// The `seq` of a signed owner line after the seal's own transaction (see `later_owner_line`).
    pub(crate) fn owner_line_after(&self, s: &Seal, key: &OwnerPub) -> Option<u64> {
        later_owner_line(self.since_mark(s).as_deref().unwrap_or_default(), s, key)
    }

    /// The journal's last complete line, as a seal marks it.
    pub(crate) fn journal_mark(&self) -> Result<Option<Mark>> {
        let p = self.journal_path();
        let (lines, _) = journal::tail_lines(&p, 1).map_err(|e| Error::io(&p, &e))?;
        let Some(line) = lines.first() else {
            return Ok(None);
        };
        let end = tx::clean_len(&p).map_err(|e| Error::io(&p, &e))?;
        let seq = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v["seq"].as_u64())
            .unwrap_or(0);
        Ok(Some(Mark {
            seq,
            offset: end.saturating_sub(line.len() as u64 + 1),
            hash: journal::sha256_hex(line),
        }))
    }
}

/// True when `since` starts with a whole line whose hash is `hash`.
fn starts_with_line(since: Option<&[u8]>, hash: &str) -> bool {
    since
        .and_then(|b| b.iter().position(|c| *c == b'\n').map(|i| &b[..i]))
        .is_some_and(|l| journal::sha256_hex(l) == hash)
}

/// The `seq` of an owner line, signed, after the seal's own transaction in `since` (the journal
/// from the sealed line on): then the seal is not the owner's last (an older copy put back). It
/// costs what was written since the last seal.
fn later_owner_line(since: &[u8], s: &Seal, key: &OwnerPub) -> Option<u64> {
    let own_tx = s.journal.as_ref().map_or(1, |m| m.seq + 1);
    const OWNER: &[u8] = b"\"actor\":\"owner\"";
    since
        .split(|b| *b == b'\n')
        .filter(|l| l.windows(OWNER.len()).any(|w| w == OWNER))
        .filter_map(|l| serde_json::from_slice::<crate::kernel::Event>(l).ok())
        .find(|e| {
            e.tx.is_some_and(|t| t > own_tx) && crate::kernel::authority::event_signed(e, Some(key))
        })
        .map(|e| e.seq)
}
