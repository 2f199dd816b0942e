//! The owner's seal: the facts only the owner sets (goal status, quota policy and budgets, each
//! gate, which todos are `user` todos, owner-set leases, hooks) and the journal's head, signed as
//! one text.
//!
//! Agents read the seal on every load and act on its values, not on what a file says: a file
//! that disagrees with it is named, and where the seal cannot be matched the rule fails closed.

use std::collections::{BTreeMap, BTreeSet};

use sha2::Digest;

use crate::kernel::authority::{OwnerPub, to_hex};
use crate::kernel::model::{Gate, GateStatus, GoalStatus, Role, Snapshot, Status};
use crate::kernel::time::{Dur, Ts};

pub use crate::kernel::model::{LeaseFact, Mark, Purpose, Seal, SealedCheck, SealedGate};

pub mod journaled;
pub use journaled::{Disagreement, Journaled};

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

fn status_str(s: GoalStatus) -> &'static str {
    match s {
        GoalStatus::Active => "active",
        GoalStatus::Paused => "paused",
        GoalStatus::Complete => "complete",
    }
}

fn status_of(s: &str) -> Option<GoalStatus> {
    match s {
        "active" => Some(GoalStatus::Active),
        "paused" => Some(GoalStatus::Paused),
        "complete" => Some(GoalStatus::Complete),
        _ => None,
    }
}

impl Seal {
    /// The seal of the state a change leaves: `written` names the gates the change wrote (and the
    /// hook events it set, removed or adopted), and `set` the todos whose lease it set. A gate
    /// that disagreed with the last seal keeps its sealed entry unless the owner's change wrote
    /// it; a decision that is not proven is never sealed (it stays pending until the owner
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
        // A name with white space cannot be a seal field; such ids are never valid ids anyway.
        let plain = |id: &String| !id.is_empty() && !id.contains(char::is_whitespace);
        let mut gates = BTreeMap::new();
        for (id, gate) in snap.gates.iter().filter(|(id, _)| plain(id)) {
            let kept = prev
                .filter(|p| p.mismatched.contains(id) || snap.quarantined.contains_key(id))
                .filter(|_| !written.contains(&id.as_str()))
                .and_then(|p| p.gates.get(id));
            if let Some(k) = kept {
                gates.insert(id.clone(), k.clone());
            } else if !snap.quarantined.contains_key(id)
                && (gate.status == GateStatus::Pending || gate.proven)
            {
                let blocks = gate.blocks.iter().filter(|b| plain(b)).cloned().collect();
                gates.insert(
                    id.clone(),
                    SealedGate {
                        hash: gate_hash(gate),
                        blocks,
                    },
                );
            }
        }
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
                    let owners = by == "owner" || by.starts_with("gate:");
                    (owners && plain(by)).then(|| (t.id.clone(), by.clone()))
                })
                .collect(),
            leases: lease_facts(snap, prev, set),
            checks: check_facts(snap, prev),
            budget: Some((q.tokens, q.cost_usd)),
            hooks: crate::kernel::alert::hook_facts(snap, prev, written),
            agents: crate::kernel::agents::facts(&snap.config),
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

    /// The text the signature covers: every line of the file but the header and `sig`.
    pub fn body(&self) -> String {
        let mut s = String::from("seal 1\n");
        if let Some(m) = &self.journal {
            s.push_str(&format!("journal {} {} {}\n", m.seq, m.offset, m.hash));
        }
        if let Some((id, st)) = &self.goal {
            s.push_str(&format!("goal {id} {}\n", status_str(*st)));
        }
        if let Some((slots, w, mi)) = self.quota {
            s.push_str(&format!("quota {slots} {w} {mi}\n"));
        }
        if let Some((t, c)) = self.budget {
            let t = t.map_or("-".to_string(), |t| t.to_string());
            let c = c.map_or("-".to_string(), |c| c.to_string());
            s.push_str(&format!("budget {t} {c}\n"));
        }
        for (id, g) in &self.gates {
            let blocks = if g.blocks.is_empty() {
                "-".to_string()
            } else {
                g.blocks.join(",")
            };
            s.push_str(&format!("gate {id} {} {blocks}\n", g.hash));
        }
        for id in &self.users {
            s.push_str(&format!("user {id}\n"));
        }
        for (id, by) in &self.blocked {
            s.push_str(&format!("blocked {id} {by}\n"));
        }
        for (id, f) in &self.leases {
            let h = f.holder.as_deref().unwrap_or("-");
            s.push_str(&format!("lease {id} {} {h}\n", f.fence));
        }
        for (id, c) in &self.checks {
            // A line from before purposes keeps its old form: the signature covers it so.
            match c.purpose {
                Some(p) => s.push_str(&format!("check {id} {} {}\n", c.sha256, p.as_str())),
                None => s.push_str(&format!("check {id} {}\n", c.sha256)),
            }
        }
        for (event, hash) in &self.hooks {
            s.push_str(&format!("hook {event} {hash}\n"));
        }
        for (id, f) in &self.agents {
            let (slots, caps) = crate::kernel::agents::fact_fields(f);
            s.push_str(&format!("agent {id} {slots} {caps}\n"));
        }
        if let Some(n) = self.breaker {
            s.push_str(&format!("breaker {n}\n"));
        }
        journaled::body_lines(self, &mut s);
        s
    }

    /// The file's text with its signature.
    pub fn text(&self, sig: &str) -> String {
        format!("{HEADER}\n{}sig {sig}\n", self.body())
    }

    /// Parses `owner.seal` and checks its signature; `Err` says why it is not the owner's.
    pub fn parse(text: &str, key: &OwnerPub) -> Result<Seal, String> {
        let mut seal = Seal::default();
        let mut sig = None;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line == "seal 1" {
                continue;
            }
            let f: Vec<&str> = line.split(' ').collect();
            let bad = || format!("line {}: `{line}` is not a seal line", n + 1);
            match f.as_slice() {
                ["sig", s] => sig = Some(s.to_string()),
                ["journal", seq, off, h] => {
                    seal.journal = Some(Mark {
                        seq: seq.parse().map_err(|_| bad())?,
                        offset: off.parse().map_err(|_| bad())?,
                        hash: h.to_string(),
                    })
                }
                ["goal", .., st] if f.len() >= 3 => {
                    let id = f[1..f.len() - 1].join(" ");
                    seal.goal = Some((id, status_of(st).ok_or_else(bad)?));
                }
                ["quota", s, w, m] => {
                    let p = |v: &str| v.parse::<i64>().map_err(|_| bad());
                    seal.quota = Some((s.parse().map_err(|_| bad())?, p(w)?, p(m)?));
                }
                ["gate", id, h, b] => {
                    let blocks = match *b {
                        "-" => Vec::new(),
                        b => b.split(',').map(str::to_string).collect(),
                    };
                    let hash = h.to_string();
                    seal.gates
                        .insert(id.to_string(), SealedGate { hash, blocks });
                }
                ["blocked", id, by] => {
                    seal.blocked.insert(id.to_string(), by.to_string());
                }
                ["user", id] => {
                    seal.users.insert(id.to_string());
                }
                ["budget", t, c] => {
                    let t = (*t != "-").then(|| t.parse::<u64>()).transpose();
                    let c = (*c != "-").then(|| c.parse::<f64>()).transpose();
                    seal.budget = Some((t.map_err(|_| bad())?, c.map_err(|_| bad())?));
                }
                ["hook", event, hash] => {
                    seal.hooks.insert(event.to_string(), hash.to_string());
                }
                ["lease", id, fence, h] => {
                    let holder = (*h != "-").then(|| h.to_string());
                    let fence = fence.parse().map_err(|_| bad())?;
                    seal.leases
                        .insert(id.to_string(), LeaseFact { fence, holder });
                }
                ["agent", id, slots, caps] => {
                    let f = crate::kernel::agents::parse_fields(slots, caps).ok_or_else(bad)?;
                    seal.agents.insert(id.to_string(), f);
                }
                ["breaker", n] => seal.breaker = Some(n.parse().map_err(|_| bad())?),
                ["check", id, h, rest @ ..] if is_sha256(h) && rest.len() <= 1 => {
                    let purpose = match rest.first() {
                        Some(p) => Some(Purpose::parse(p).ok_or_else(bad)?),
                        None => None,
                    };
                    let sha256 = h.to_string();
                    seal.checks
                        .insert(id.to_string(), SealedCheck { sha256, purpose });
                }
                other => match journaled::parse_line(other, &mut seal) {
                    Some(true) => {}
                    _ => return Err(bad()),
                },
            }
        }
        let sig = sig.ok_or("it has no signature")?;
        if !key.verify(&seal.body(), &sig) {
            return Err(
                "its signature is not the owner's (edited, or made with another key)".into(),
            );
        }
        // The default's `*` line only ever approved a done: an old one without a purpose is that.
        if let Some(c) = seal.checks.get_mut(crate::kernel::proof::DEFAULT_ID) {
            c.purpose.get_or_insert(Purpose::Done);
        }
        Ok(seal)
    }
}

/// The owner-set leases: those the change set, and those carried over at the same fence.
fn lease_facts(snap: &Snapshot, prev: Option<&Seal>, set: &[&str]) -> BTreeMap<String, LeaseFact> {
    let plain = |id: &String| !id.is_empty() && !id.contains(char::is_whitespace);
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
        if let Some(f) = fact.filter(|f| f.holder.as_ref().is_none_or(plain)) {
            leases.insert(id.clone(), f);
        }
    }
    leases
}

/// True for 64 lowercase hex digits.
fn is_sha256(h: &str) -> bool {
    h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Approved checks carried over from the last seal, for todos still in the working set (or
/// quarantined): an owner change that does not approve or revoke a check keeps it as it was.
fn check_facts(snap: &Snapshot, prev: Option<&Seal>) -> BTreeMap<String, SealedCheck> {
    prev.map(|p| {
        p.checks
            .iter()
            .filter(|(id, _)| {
                snap.todos.contains_key(*id)
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
/// owner's decision (every decision rewrites the seal): it counts as pending.
fn apply_gates(snap: &mut Snapshot, seal: &mut Seal, notes: &mut Vec<String>) {
    for (id, g) in snap.gates.iter_mut() {
        if !seal.gates.contains_key(id) && g.status != GateStatus::Pending && g.proven {
            notes.push(format!(
                "gates/{id}.toml holds a decision the owner's seal does not: it counts as pending"
            ));
            g.proven = false;
        }
    }
    for (id, sg) in &seal.gates {
        match snap.gates.get_mut(id) {
            Some(g)
                if gate_hash(g) == sg.hash && sg.blocks.iter().all(|b| g.blocks.contains(b)) =>
            {
                g.proven = true;
            }
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
    g.proven = true;
}

/// The goal counts as paused: the project has an owner key but no valid seal.
pub fn unsealed(snap: &mut Snapshot, why: &str) -> Vec<String> {
    snap.config.goal.status = GoalStatus::Paused;
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
