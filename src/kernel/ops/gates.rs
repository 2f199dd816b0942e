//! Gates: opening one (with an action, at most once per question and action) and using an
//! approved action once.

use serde_json::json;

use super::{Change, Write, todo};
use crate::kernel::action::Action;
use crate::kernel::error::{Error, Result};
use crate::kernel::gate_action::{self, GateAction, GateUse};
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::time::Ts;

/// A gate to open.
#[derive(Debug, Clone, Default)]
pub struct NewGate {
    /// Its fresh id.
    pub id: String,
    /// What the owner is asked.
    pub question: String,
    /// Todos it blocks.
    pub blocks: Vec<String>,
    /// Blocks every agent todo.
    pub global: bool,
    /// The answers offered.
    pub options: Vec<String>,
    /// The exact action the approval is for.
    pub action: Option<GateAction>,
}

/// Opens a gate.
#[allow(clippy::too_many_arguments)]
pub fn open_gate(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    id: String,
    question: String,
    blocks: Vec<String>,
    global: bool,
    options: Vec<String>,
) -> Result<(Change, Gate)> {
    let new = NewGate {
        id,
        question,
        blocks,
        global,
        options,
        action: None,
    };
    open(snap, agent, now, new)
}

/// Opens a gate. The same question with the same action, pending or approved and not used,
/// returns that gate and changes nothing.
pub fn open(snap: &Snapshot, agent: &str, now: Ts, new: NewGate) -> Result<(Change, Gate)> {
    let question = new.question.trim().to_string();
    if question.is_empty() {
        return Err(Error::usage("a gate needs a question"));
    }
    for b in &new.blocks {
        todo(snap, b)?;
    }
    // An approval of an action is a yes to it: an option ("no") must never run it.
    if new.action.is_some() && !new.options.is_empty() {
        return Err(Error::usage("a gate that holds an action offers no options")
            .hint("the owner approves the action or rejects it; ask a question with options in a gate of its own"));
    }
    // The same ask: the same question and action, blocking the same todos the same way.
    if let Some(a) = &new.action
        && let Some(g) = gate_action::same_open(snap.gates.values(), &question, a)
            .filter(|g| g.blocks == new.blocks && g.global == new.global)
    {
        return Ok((Change::default(), g.clone()));
    }
    let g = Gate {
        options: new.options,
        blocks: new.blocks,
        global: new.global,
        action: new.action,
        ..Gate::pending(&new.id, question, agent, now)
    };
    limits::usage(limits::check_gate(&g))?;
    let mut data = json!({"question": g.question, "blocks": g.blocks, "global": g.global, "options": g.options});
    if let Some(a) = &g.action {
        data["action"] = json!({"kind": a.kind.as_str(), "sha256": a.sha256});
    }
    let mut c = Change::default();
    c.event(now, agent, Action::GateOpen, &g.id, data);
    c.writes.push(Write::Gate(g.clone()));
    Ok((c, g))
}

/// Uses the approved action of gate `id` once: the use is recorded (`used` in the gate and a
/// `gate.use` line) before anything runs, so an approval never runs twice. `journal_used`: the
/// journal holds a use already.
pub fn use_gate(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    id: &str,
    turn: Option<&str>,
    journal_used: bool,
) -> Result<(Change, Gate)> {
    let cur = super::gate(snap, id)?;
    let a = gate_action::runnable(cur, journal_used)?;
    let mut g = cur.clone();
    let data = json!({"kind": a.kind.as_str(), "sha256": a.sha256, "turn": turn});
    g.used = Some(GateUse {
        at: now,
        by: agent.to_string(),
        turn: turn.map(str::to_string),
        extra: Extra::new(),
    });
    limits::usage(limits::check_gate(&g))?;
    let mut c = Change::default();
    c.event(now, agent, Action::GateUse, id, data);
    c.writes.push(Write::Gate(g.clone()));
    Ok((c, g))
}
