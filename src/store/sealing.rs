//! The owner's seal on disk: reading and checking `owner.seal` on every load, and writing it
//! again in every owner transaction.

use std::io::{Read, Seek, SeekFrom};

use crate::kernel::authority::OwnerPub;
use crate::kernel::ops::Change;
use crate::kernel::seal::{self, Mark, Seal};
use crate::kernel::{Action, Error, Result, Snapshot};
use crate::store::fs::FileStore;
use crate::store::{atomic, journal, owner, parse, tx};

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
        if offset > 0 {
            // The byte before a line is the previous line's newline.
            (buf.first() == Some(&b'\n')).then(|| buf.split_off(1))
        } else {
            Some(buf)
        }
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

    /// The new `owner.seal` for an owner change made on `before`: the state after the change,
    /// the journal's head, and the leases the change set.
    pub(crate) fn seal_op(
        &self,
        key: &owner::OwnerKey,
        before: &Snapshot,
        change: &Change,
    ) -> Result<tx::Op> {
        let text = seal_text(key, before, change, self.journal_mark()?, || {
            self.load_raw()
        })?;
        Ok(tx::Op::put("owner.seal", text.into_bytes()))
    }
}

/// The owner's seal after `change`, made on `before` (`raw` loads the state as stored, for a
/// change that adopts it or a project without a valid seal), marking the journal at `mark`.
pub(crate) fn seal_text(
    key: &owner::OwnerKey,
    before: &Snapshot,
    change: &Change,
    mark: Option<Mark>,
    raw: impl FnOnce() -> Result<Snapshot>,
) -> Result<String> {
    // Without a valid seal, the owner adopts the files as they are.
    let base = match &before.seal {
        Some(_) if !change.adopt_files => before.clone(),
        _ => raw()?,
    };
    let after = base.after(&change.writes);
    let set: Vec<&str> = change
        .events
        .iter()
        .filter(|e| matches!(e.action, Action::TodoReassign | Action::TodoRelease))
        .map(|e| e.target.as_str())
        .collect();
    let mut written: Vec<&str> = change
        .writes
        .iter()
        .filter_map(|w| match w {
            crate::kernel::ops::Write::Gate(g) => Some(g.id.as_str()),
            _ => None,
        })
        .collect();
    // Hooks the owner set or removed, and with --adopt every hook as the file has it.
    written.extend(
        change
            .events
            .iter()
            .filter(|e| matches!(e.action, Action::HookSet | Action::HookRemove))
            .map(|e| e.target.as_str()),
    );
    if change.adopt_files {
        written.extend(after.config.hooks.keys().map(String::as_str));
    }
    let mut s = Seal::of(&after, mark, before.seal.as_ref(), &written, &set);
    s.apply_check_events(&change.events);
    let sig = key.sign(&s.body());
    Ok(s.text(&sig))
}

/// Signs every gate decision in `writes` that is not signed yet, over the journal's head;
/// returns the writes and the decisions' hashes (for `owner.proofs`).
pub(crate) fn sign_decisions(
    writes: Vec<crate::kernel::ops::Write>,
    key: &owner::OwnerKey,
    head: &str,
) -> (Vec<crate::kernel::ops::Write>, Vec<String>) {
    use crate::kernel::authority;
    use crate::kernel::ops::Write;
    let mut decided = Vec::new();
    let mut out = Vec::with_capacity(writes.len());
    for mut w in writes {
        if let Write::Gate(g) = &mut w
            && g.status != crate::kernel::GateStatus::Pending
            && g.signature.is_none()
        {
            g.journal_head = Some(head.to_string());
            g.signature = Some(key.sign(&authority::gate_message(g, head)));
            decided.extend(authority::decision_hash(g));
        }
        out.push(w);
    }
    (out, decided)
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
            e.tx.is_some_and(|t| t > own_tx) && crate::kernel::authority::event_proven(e, Some(key))
        })
        .map(|e| e.seq)
}
