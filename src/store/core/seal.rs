//! The owner's signatures on a change: each gate decision signed over the journal's head, and
//! the seal of the state a change leaves (and of a new goal).

use crate::kernel::authority;
use crate::kernel::ops::{Change, Write};
use crate::kernel::seal::{Mark, Seal};
use crate::kernel::{Action, Config, GateStatus, Result, Snapshot};
use crate::store::core::owner::OwnerKey;

/// The owner's seal after `change`, made on `base` (the snapshot it was decided on, or the state
/// as stored when it adopts that or there was no valid seal), over the seal `prior`, marking
/// the journal at `mark`.
pub fn seal_text(
    key: &OwnerKey,
    base: &Snapshot,
    prior: Option<&Seal>,
    change: &Change,
    mark: Option<Mark>,
) -> Result<String> {
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
            Write::Gate(g) => Some(g.id.as_str()),
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
    let mut s = Seal::of(&after, mark, prior, &written, &set);
    s.apply_check_events(&change.events);
    s.apply_device_events(&change.events);
    let sig = key.sign(&s.body());
    Ok(s.text(&sig))
}

/// Signs every gate decision in `writes` that is not signed yet, over the journal's head;
/// returns the writes and the decisions' hashes (for `owner.proofs`).
pub fn sign_decisions(writes: Vec<Write>, key: &OwnerKey, head: &str) -> (Vec<Write>, Vec<String>) {
    let mut decided = Vec::new();
    let mut out = Vec::with_capacity(writes.len());
    for mut w in writes {
        if let Write::Gate(g) = &mut w
            && g.status != GateStatus::Pending
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

/// The seal of a new goal: its config, nothing else yet, signed.
pub fn new_goal_seal(key: &OwnerKey, config: &Config) -> String {
    let s = Seal::of(&Snapshot::new(config.clone()), None, None, &[], &[]);
    s.text(&key.sign(&s.body()))
}
