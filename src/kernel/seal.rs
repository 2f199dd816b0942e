//! The owner's seal: the facts only the owner sets (goal status, quota policy and budgets, each
//! gate, which todos are `user` todos, owner-set leases, hooks) and the journal's head, signed as
//! one text.
//!
//! Agents read the seal on every load and act on its values, not on what a file says: a file
//! that disagrees with it is named, and where the seal cannot be matched the rule fails closed.

use std::collections::{BTreeMap, BTreeSet};

use sha2::Digest;

use crate::kernel::authority::to_hex;
use crate::kernel::model::{Gate, GateStatus, GoalStatus, Role, Snapshot, Status};
use crate::kernel::time::{Dur, Ts};

pub use crate::kernel::model::{LeaseFact, Mark, Purpose, Seal, SealedCheck, SealedGate};

pub mod journaled;
mod text;
pub use journaled::{Disagreement, Journaled};

mod devices;

/// The first line of `owner.seal`.
pub const HEADER: &str = "# loopx owner seal: facts only the owner sets, signed. Do not edit.";

/// The hash of the facts of a gate only the owner may change once it exists: its question,
/// options, whether it is global, its decision and its action's digest (`blocks` is sealed
/// apart, as a floor; `used` is the agent's record).
pub fn gate_hash(g: &Gate) -> String {
    let mut facts = serde_json::json!([
        g.id,
        g.question,
        g.options,
        g.global,
        g.status.as_str(),
        g.option,
        g.reason,
        g.decided_at.map(|t| t.0),
        g.decided_by,
    ]);
    // Only a gate with an action hashes it: the hashes of older gates stay what they were.
    if let (Some(a), Some(list)) = (&g.action, facts.as_array_mut()) {
        list.push(serde_json::json!([a.kind.as_str(), a.sha256]));
    }
    to_hex(&sha2::Sha256::digest(facts.to_string().as_bytes()))
}

pub(crate) fn status_str(s: GoalStatus) -> &'static str {
    match s {
        GoalStatus::Active => "active",
        GoalStatus::Paused => "paused",
        GoalStatus::Complete => "complete",
    }
}

impl Seal {
    /// The seal of the state a change leaves: `written` names the gates the change wrote (and the
    /// hook events it set, removed or adopted), and `set` the todos whose lease it set. A gate
    /// that disagreed with the last seal keeps its sealed entry unless the owner's change wrote
    /// it; a decision that is not signed is never sealed (it stays pending until the owner
    /// decides it).
    pub fn of(
        snap: &Snapshot,
        journal: Option<Mark>,
        prev: Option<&Seal>,
        written: &[&str],
        set: &[&str],
    ) -> Seal {
        let g = &snap.config.goal;
        let q = &snap.config.quota;
        let gates = sealed_gates(snap, prev, written);
        Seal {
            journal,
            goal: Some((g.id.clone(), g.status)),
            quota: Some((q.slots, q.window.0, q.min_interval.0)),
            gates,
            users: snap
                .todos
                .values()
                .filter(|t| t.role == Role::User && plain(&t.id))
                .map(|t| t.id.clone())
                .collect(),
            blocked: snap
                .todos
                .values()
                .filter(|t| t.status == Status::Blocked && plain(&t.id))
                .filter_map(|t| {
                    let by = t.status_by.as_ref()?;
                    let owners =
                        by == "owner" || by.starts_with("gate:") || by.starts_with("device:");
                    (owners && plain(by)).then(|| (t.id.clone(), by.clone()))
                })
                .collect(),
            leases: lease_facts(snap, prev, set),
            checks: check_facts(snap, prev),
            budget: Some((q.tokens, q.cost_usd)),
            hooks: crate::kernel::alert::hook_facts(snap, prev, written),
            agents: crate::kernel::agents::facts(&snap.config),
            devices: prev.map(|p| p.devices.clone()).unwrap_or_default(),
            revoked: prev.map(|p| p.revoked.clone()).unwrap_or_default(),
            breaker: Some(snap.config.breaker.turns()),
            held: journaled::held_facts(snap),
            spends: journaled::spend_facts(snap),
            mismatched: BTreeSet::new(),
        }
    }

    /// Applies an owner change's check approvals and revocations (`check.approve` carries the
    /// approved text's `sha256` and its `purpose` in its data; `check.revoke` drops the todo's
    /// line). An approval without a purpose is sealed without one: it approves nothing.
    pub fn apply_check_events(&mut self, events: &[crate::kernel::model::EventDraft]) {
        use crate::kernel::action::Action;
        for e in events {
            match e.action {
                Action::CheckApprove => {
                    let sha = e.data.get("sha256").and_then(|v| v.as_str());
                    let purpose = e.data.get("purpose").and_then(|v| v.as_str());
                    if let Some(sha) = sha.filter(|h| is_sha256(h))
                        && !e.target.is_empty()
                        && !e.target.contains(char::is_whitespace)
                    {
                        let c = SealedCheck {
                            sha256: sha.to_string(),
                            purpose: purpose.and_then(Purpose::parse),
                        };
                        self.checks.insert(e.target.clone(), c);
                    }
                }
                Action::CheckRevoke => {
                    self.checks.remove(&e.target);
                }
                _ => {}
            }
        }
    }
}

/// True for a name that can be a seal field: not empty, no white space (never a valid id anyway).
fn plain(id: &str) -> bool {
    !id.is_empty() && !id.contains(char::is_whitespace)
}

/// The gates the seal holds: a gate that disagreed with the last seal keeps its sealed entry
/// unless the change wrote it; a pending or signed gate is sealed as it is.
fn sealed_gates(
    snap: &Snapshot,
    prev: Option<&Seal>,
    written: &[&str],
) -> BTreeMap<String, SealedGate> {
    let mut gates = BTreeMap::new();
    for (id, gate) in snap.gates.iter().filter(|(id, _)| plain(id)) {
        let kept = prev
            .filter(|p| p.mismatched.contains(id) || snap.quarantined.contains_key(id))
            .filter(|_| !written.contains(&id.as_str()))
            .and_then(|p| p.gates.get(id));
        if let Some(k) = kept {
            gates.insert(id.clone(), k.clone());
        } else if !snap.quarantined.contains_key(id)
            && (gate.status == GateStatus::Pending || gate.signed)
        {
            let blocks = gate.blocks.iter().filter(|b| plain(b)).cloned().collect();
            let hash = gate_hash(gate);
            gates.insert(id.clone(), SealedGate { hash, blocks });
        }
    }
    gates
}

/// The owner-set leases: those the change set, and those carried over at the same fence.
fn lease_facts(snap: &Snapshot, prev: Option<&Seal>, set: &[&str]) -> BTreeMap<String, LeaseFact> {
    let mut leases = BTreeMap::new();
    for (id, t) in snap.todos.iter().filter(|(id, _)| plain(id)) {
        let fact = if set.contains(&id.as_str()) {
            Some(LeaseFact {
                fence: t.fence,
                holder: t.lease.as_ref().map(|l| l.holder.clone()),
            })
        } else {
            prev.and_then(|p| p.leases.get(id))
                .filter(|f| f.fence == t.fence)
                .cloned()
        };
        if let Some(f) = fact.filter(|f| f.holder.as_ref().is_none_or(|h| plain(h))) {
            leases.insert(id.clone(), f);
        }
    }
    leases
}

/// True for 64 lowercase hex digits.
pub(crate) fn is_sha256(h: &str) -> bool {
    h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Approved checks carried over from the last seal, for todos still in the working set (or
/// quarantined): an owner change that does not approve or revoke a check keeps it as it was.
fn check_facts(snap: &Snapshot, prev: Option<&Seal>) -> BTreeMap<String, SealedCheck> {
    prev.map(|p| {
        p.checks
            .iter()
            .filter(|(id, _)| {
                snap.todos.contains_key(id)
                    || snap.quarantined.contains_key(*id)
                    || id.as_str() == crate::kernel::proof::DEFAULT_ID
            })
            .map(|(id, h)| (id.clone(), h.clone()))
            .collect()
    })
    .unwrap_or_default()
}

/// Budgets as the seal holds them, and a note for each hook the seal does not hold as it is.
fn apply_budget_and_hooks(snap: &mut Snapshot, seal: &Seal, notes: &mut Vec<String>) {
    let q = &mut snap.config.quota;
    if let Some((t, c)) = seal.budget
        && (q.tokens, q.cost_usd) != (t, c)
    {
        let show = |t: Option<u64>, c: Option<f64>| {
            let none = || "none".to_string();
            let (t, c) = (
                t.map_or_else(none, |t| t.to_string()),
                c.map_or_else(none, |c| c.to_string()),
            );
            format!("tokens {t}, cost_usd {c}")
        };
        notes.push(format!(
            "loopx.toml's [quota] budgets differ from the owner's seal (the file: {}; the seal: {}): acting on the seal",
            show(q.tokens, q.cost_usd),
            show(t, c)
        ));
        q.tokens = t;
        q.cost_usd = c;
    }
    for (event, text) in &snap.config.hooks {
        if seal.hooks.get(event) != Some(&crate::kernel::alert::hook_hash(text)) {
            notes.push(crate::kernel::alert::unsealed_note(event, text));
        }
    }
}

/// Where a file disagrees with the owner's seal: what loopx acts on instead.
pub fn apply(snap: &mut Snapshot, seal: &mut Seal) -> Vec<String> {
    let mut notes = Vec::new();
    let cfg = &mut snap.config;
    if let Some((id, st)) = &seal.goal
        && *id == cfg.goal.id
        && *st != cfg.goal.status
    {
        notes.push(format!(
            "loopx.toml says the goal is {}, the owner's seal says {}: acting on the seal",
            status_str(cfg.goal.status),
            status_str(*st)
        ));
        cfg.goal.status = *st;
    }
    if let Some((slots, w, mi)) = seal.quota {
        let q = &mut cfg.quota;
        if (q.slots, q.window.0, q.min_interval.0) != (slots, w, mi) {
            notes.push(format!(
                "loopx.toml's [quota] differs from the owner's seal ({slots} slots in {}): acting on the seal",
                Dur(w)
            ));
            q.slots = slots;
            q.window = Dur(w);
            q.min_interval = Dur(mi);
        }
    }
    apply_budget_and_hooks(snap, seal, &mut notes);
    crate::kernel::agents::apply_sealed(snap, &seal.agents, &mut notes);
    crate::kernel::breaker::apply_sealed(&mut snap.config, seal.breaker, &mut notes);
    devices::apply(&mut snap.config, seal, &mut notes);
    apply_gates(snap, seal, &mut notes);
    apply_todos(snap, seal, &mut notes);
    for (id, f) in &seal.leases {
        let Some(t) = snap.todos.get_mut(id) else {
            continue;
        };
        let held = t.lease.as_ref().map(|l| (l.fence, l.holder.clone()));
        match (held, &f.holder) {
            (Some((fence, h)), Some(want)) if fence == f.fence && h != *want => {
                notes.push(format!(
                    "todo {id}: the owner gave fence {fence} to {want}, not {h}"
                ));
                if let Some(l) = t.lease.as_mut() {
                    l.holder = want.clone();
                }
            }
            (Some((fence, h)), None) if fence == f.fence => {
                notes.push(format!(
                    "todo {id}: the owner released fence {fence}, which {h} holds again"
                ));
                t.lease = None;
            }
            _ => {}
        }
    }
    notes
}

/// Sealed gates must match their facts and block at least what they blocked: a changed or
/// deleted one counts as a pending global gate. A decided gate the seal does not hold is not the
/// owner's decision (every decision rewrites the seal): it counts as pending. A decision signed
/// on a device counts while the seal enrolls that device, on a gate the seal held pending (or
/// one opened since).
fn apply_gates(snap: &mut Snapshot, seal: &mut Seal, notes: &mut Vec<String>) {
    let (devices, goal) = (&snap.config.devices, &snap.config.goal.id);
    for (id, g) in snap.gates.iter_mut() {
        if by_device(g) {
            if g.signed && !crate::kernel::device::gate_signed(g, devices, goal) {
                notes.push(format!(
                    "gates/{id}.toml holds a decision of a device the owner's seal does not enroll: it counts as pending"
                ));
                g.signed = false;
            }
        } else if !seal.gates.contains_key(id) && g.status != GateStatus::Pending && g.signed {
            notes.push(format!(
                "gates/{id}.toml holds a decision the owner's seal does not: it counts as pending"
            ));
            g.signed = false;
        }
    }
    for (id, sg) in &seal.gates {
        let holds = |g: &Gate| sg.blocks.iter().all(|b| g.blocks.contains(b));
        match snap.gates.get_mut(id) {
            Some(g) if gate_hash(g) == sg.hash && holds(g) => {
                g.signed = !by_device(g) || g.signed;
            }
            // Decided on a device since the seal held it pending: the facts are the sealed ones.
            Some(g) if by_device(g) && gate_hash(&undecided(g)) == sg.hash && holds(g) => {}
            Some(g) => {
                seal.mismatched.insert(id.clone());
                notes.push(format!(
                    "gates/{id}.toml differs from the owner's seal: it counts as a pending gate on every todo"
                ));
                fail_closed(g);
            }
            None => {
                seal.mismatched.insert(id.clone());
                notes.push(format!(
                    "gate {id} is in the owner's seal but its file is gone: it counts as a pending gate on every todo"
                ));
                let mut g = crate::kernel::authority::unreadable_gate(
                    id,
                    &crate::kernel::model::Problem {
                        file: format!(".loopx/gates/{id}.toml"),
                        line: None,
                        message: "deleted".into(),
                        code: crate::kernel::Code::InvalidState,
                        hint: None,
                    },
                );
                g.question = format!("gate {id} was deleted; the owner must look");
                snap.gates.insert(id.clone(), g);
            }
        }
    }
}

/// True when a gate's decision names a device as its decider.
fn by_device(g: &Gate) -> bool {
    g.status != GateStatus::Pending
        && g.decided_by
            .as_deref()
            .and_then(crate::kernel::device::of_actor)
            .is_some()
}

/// The gate as it was before its decision.
fn undecided(g: &Gate) -> Gate {
    Gate {
        status: GateStatus::Pending,
        decided_by: None,
        decided_at: None,
        option: None,
        reason: None,
        ..g.clone()
    }
}

/// User todos stay the owner's, and what the owner or a rejected gate blocked stays blocked:
/// in the working set, and when a file was moved to `archive/` by hand (it counts as not done).
fn apply_todos(snap: &mut Snapshot, seal: &Seal, notes: &mut Vec<String>) {
    for id in &seal.users {
        if let Some(t) = snap.todos.get_mut(id)
            && t.role != Role::User
        {
            notes.push(format!(
                "todo {id} is a user todo in the owner's seal: not offered to agents"
            ));
            t.role = Role::User;
        }
    }
    for (id, by) in &seal.blocked {
        if let Some(t) = snap.todos.get_mut(id)
            && t.status != Status::Blocked
        {
            notes.push(format!(
                "todo {id} was blocked by {by} in the owner's seal: it stays blocked"
            ));
            t.status = Status::Blocked;
            t.status_by = Some(by.clone());
        }
    }
    for id in seal.users.iter().chain(seal.blocked.keys()) {
        if !snap.todos.contains_key(id) && snap.archived.remove(id).is_some() {
            notes.push(format!(
                "todo {id} was archived by hand, but the owner's seal holds it open: it counts as not done"
            ));
        }
    }
}

fn fail_closed(g: &mut Gate) {
    g.status = GateStatus::Pending;
    g.global = true;
    g.signed = true;
}

/// The goal counts as paused: the project has an owner key but no valid seal.
pub fn unsealed(snap: &mut Snapshot, why: &str) -> Vec<String> {
    snap.config.goal.status = GoalStatus::Paused;
    // Only the seal enrolls devices: without one, no device decides anything.
    snap.config.devices.clear();
    for g in snap.gates.values_mut().filter(|g| by_device(g)) {
        g.signed = false;
    }
    snap.unsealed = true;
    let mut notes = vec![format!(
        "owner.seal {why}: the goal counts as paused until the owner checks `loopx doctor` and runs `loopx owner seal --adopt`"
    )];
    notes.extend(crate::kernel::alert::adopt_notes(snap));
    notes
}

/// The time a seal is due again on a board that holds the key.
pub const BOARD_SEAL_EVERY: Dur = Dur(60_000);

/// True when a running board should seal again: journal lines the seal does not cover, and no
/// seal of its own within `every`.
pub fn board_seal_due(
    last_seq: u64,
    sealed_seq: u64,
    sealed_at: Option<Ts>,
    now: Ts,
    every: Dur,
) -> bool {
    last_seq > sealed_seq && sealed_at.is_none_or(|t| now.since(t) >= every)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "seal_budget_tests.rs"]
mod budget_tests;
