//! The owner's seal: present and signed where the project has an owner key, its sealed journal
//! history still there, and no file disagreeing with it.

use crate::kernel::authority::OwnerPub;
use crate::kernel::seal::{self, Seal};
use crate::store::core::doctor::Finding;
use crate::store::fs::FileStore;

/// Every seal check (a project without an owner key has no seal to check).
pub(super) fn check(
    store: &FileStore,
    key: Option<&OwnerPub>,
    journal: &[u8],
    out: &mut Vec<Finding>,
) {
    let Some(key) = key else { return };
    let file = ".loopx/owner.seal";
    let Some(s) = read_seal(store, key, out) else {
        return;
    };
    if let (Some((id, _)), Ok(cfg)) = (&s.goal, store.read_config())
        && *id != cfg.goal.id
    {
        out.push(Finding::error(file, None, format!("is for another goal ({id}): agents count the goal as paused; the owner checks the other findings, then runs `loopx owner seal --adopt`")));
        out.push(goal_id_edited(store, id, &cfg.goal.id));
        return;
    }
    if let Some(n) = store.owner_line_after(&s, key) {
        out.push(Finding::error(file, None, format!("is older than the owner's action at journal.jsonl:{n} (an older copy put back): agents count the goal as paused; the owner checks the other findings, then runs `loopx owner seal --adopt`")));
        return;
    }
    if let Some(m) = &s.journal {
        sealed_history(journal, m, out);
    }
    remembered(store, key, journal, out);
    hand_edits(store, &s, out);
}

/// `owner.seal`, read and checked against the owner's key; `None` (with a finding) when it is
/// missing or not valid.
fn read_seal(store: &FileStore, key: &OwnerPub, out: &mut Vec<Finding>) -> Option<Seal> {
    let file = ".loopx/owner.seal";
    let text = match crate::store::parse::read_bytes(&store.path("owner.seal")) {
        Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(None) => {
            out.push(Finding::error(
                file,
                None,
                "is missing: agents count the goal as paused; the owner checks the other findings, then runs `loopx owner seal --adopt`",
            ));
            return None;
        }
        Err(e) => {
            out.push(Finding::from_error(&e, file));
            return None;
        }
    };
    match Seal::parse(&text, key) {
        Ok(s) => Some(s),
        Err(why) => {
            // A line that is not a seal line is named as `line N: ...`.
            let line = why
                .strip_prefix("line ")
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse().ok());
            out.push(Finding::error(file, line, format!("is not valid ({why}): agents count the goal as paused; the owner checks the other findings, then runs `loopx owner seal --adopt`")));
            None
        }
    }
}

/// Where the files differ from the seal, or from what the journal says the owner did: edits by
/// hand.
fn hand_edits(store: &FileStore, s: &Seal, out: &mut Vec<Finding>) {
    let file = ".loopx/owner.seal";
    if let Ok(mut raw) = store.load_raw() {
        for n in seal::apply(&mut raw, &mut s.clone()) {
            out.push(Finding::error(
                file,
                None,
                format!(
                    "{n}; if the owner made that edit, the owner runs `loopx owner seal --adopt`"
                ),
            ));
        }
        for (f, n) in store.journaled_disagreements(&mut raw, s) {
            out.push(Finding::error(
                format!(".loopx/{f}"),
                None,
                format!("edited by hand: {n}"),
            ));
        }
    }
}

/// `loopx.toml`'s goal id is not the sealed goal's: named at its line.
fn goal_id_edited(store: &FileStore, sealed: &str, here: &str) -> Finding {
    use crate::kernel::limits::Key;
    let line = crate::store::parse::read_bytes(&store.path("loopx.toml"))
        .ok()
        .flatten()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| {
            let key = [Key::Name("goal".into()), Key::Name("id".into())];
            crate::store::parse::key_line(&t, &key)
        });
    Finding::error(
        ".loopx/loopx.toml",
        line,
        format!(
            "the goal id is `{here}`, but the owner sealed `{sealed}`: edited by hand, or owner.seal came from another goal"
        ),
    )
}

/// The line the seal marks must still be the `seq`-th line, with the same bytes.
fn sealed_history(journal: &[u8], m: &seal::Mark, out: &mut Vec<Finding>) {
    let lines: Vec<&[u8]> = journal
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    let n = usize::try_from(m.seq).unwrap_or(usize::MAX);
    let msg = match lines.get(n.wrapping_sub(1)) {
        None => format!(
            "the journal was cut: it has {} lines, and the owner sealed its history up to line {n}",
            lines.len()
        ),
        Some(l) if crate::store::journal::sha256_hex(l) != m.hash => format!(
            "line {n} is not the line the owner sealed: the history up to it was rewritten (the first owner line that no longer verifies, if any, is reported too)"
        ),
        Some(_) => return,
    };
    let line = (n <= lines.len()).then_some(n);
    out.push(Finding::error(".loopx/journal.jsonl", line, msg));
}

/// Where the owner's key is here and the last line the owner signed (remembered beside the key)
/// is gone from the journal: why, as doctor says it. `None`: it is there, or no key is here.
pub fn owner_history_cut(store: &FileStore) -> Option<String> {
    let key = store.owner_pub().ok()??;
    // The journal is read only where the key is and remembers a line (never on an agent's poll).
    let (seq, hash) = last_signed(store, &key)?;
    let bytes = crate::store::parse::read_bytes(&store.journal_path()).ok()??;
    let mut out = Vec::new();
    check_line(&bytes, seq, &hash, &mut out);
    out.pop().map(|f| f.message)
}

/// The owner's last signed line here (`seq`, hash), remembered beside the owner's key: none
/// without the key, for another key, or before the owner's first act.
fn last_signed(store: &FileStore, key: &OwnerPub) -> Option<(u64, String)> {
    let secret = crate::store::owner::load(&store.env().key).ok()??;
    let cfg = store.read_config().ok()?;
    if secret.public() != *key {
        return None;
    }
    crate::store::owner::remembered_last(&secret, &cfg.goal.id)
}

/// Where the owner's key is here: the owner's last signed line, as remembered beside the key,
/// must still be in the journal (else history was cut, or an older seal put back).
fn remembered(store: &FileStore, key: &OwnerPub, journal: &[u8], out: &mut Vec<Finding>) {
    if let Some((seq, hash)) = last_signed(store, key) {
        check_line(journal, seq, &hash, out);
    }
}

/// Line `seq` of the journal must hash to `hash`.
fn check_line(journal: &[u8], seq: u64, hash: &str, out: &mut Vec<Finding>) {
    let n = usize::try_from(seq).unwrap_or(usize::MAX);
    let line = journal
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .nth(n.wrapping_sub(1));
    if line.is_some_and(|l| crate::store::journal::sha256_hex(l) == hash) {
        return;
    }
    out.push(Finding::error(
        ".loopx/journal.jsonl",
        Some(n),
        format!("line {n}, the last line you signed here, is gone or changed: the history after it was cut or rewritten, or an older owner.seal put back"),
    ));
}
