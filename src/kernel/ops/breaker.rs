//! The breaker's changes: a turn's end counts, backs off or parks its todo; the owner's
//! decision of a parked todo's gate retries, rewrites or drops it.

use serde_json::json;

use super::{Change, Write};
use crate::kernel::action::Action;
use crate::kernel::breaker::{self, Verdict};
use crate::kernel::model::*;
use crate::kernel::time::Ts;

/// What a turn's end knows of its progress, for the breaker.
#[derive(Debug, Clone, Default)]
pub struct Progress {
    /// True when the turn progressed; `None` when nothing was measured.
    pub progressed: Option<bool>,
    /// The command failed (non-zero exit, a signal, the timeout).
    pub failed: bool,
    /// The id for the gate, should this turn park its todo.
    pub gate: Option<String>,
}

/// Applies a turn's verdict to `t` (the todo as the end leaves it): clears, counts or parks. A
/// park opens the gate that asks the owner, blocking `t`.
pub(super) fn after_turn(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    t: &mut Todo,
    p: &Progress,
    c: &mut Change,
) {
    let turns = snap.config.breaker.turns();
    match breaker::judge(t, turns, now, p.progressed, p.failed) {
        Verdict::Clear => t.stall = None,
        Verdict::Count(s) => t.stall = Some(Box::new(s)),
        Verdict::Park(mut s) => {
            // An id taken meanwhile is never overwritten: the next turn parks it.
            let Some(id) = p.gate.clone().filter(|g| !snap.gates.contains_key(g)) else {
                t.stall = Some(Box::new(s));
                return;
            };
            s.parked = Some(id.clone());
            t.stall = Some(Box::new(s));
            let mut g = Gate::pending(&id, breaker::question(t, turns), agent, now);
            g.options = breaker::OPTIONS.iter().map(|o| o.to_string()).collect();
            g.blocks = vec![t.id.clone()];
            c.event(
                now,
                agent,
                Action::GateOpen,
                &id,
                json!({"question": g.question, "blocks": g.blocks, "global": false,
                       "options": g.options, "breaker": t.id, "turns": turns}),
            );
            c.writes.push(Write::Gate(g));
        }
    }
}

/// What the owner's decision of gate `g` does to the todos it parked: approved `drop` cancels
/// them, `rewrite` blocks them for the owner, anything else (or a cancel) clears the stall so
/// they are offered again. A rejection's block is the caller's; the stall is cleared here.
pub(super) fn on_decision(snap: &Snapshot, (by, now): (&str, Ts), g: &Gate, c: &mut Change) {
    for tid in &g.blocks {
        let Some(t) = snap.todos.get(tid) else {
            continue;
        };
        if t.stall.as_ref().and_then(|s| s.parked.as_deref()) != Some(g.id.as_str()) {
            continue;
        }
        let mut t = t.clone();
        t.stall = None;
        t.updated_at = now;
        let option = g.option.as_deref();
        match (g.status, option) {
            (GateStatus::Approved, Some("drop")) => {
                t.status = Status::Cancelled;
                t.status_by = Some(by.into());
                t.reason = Some(format!("dropped by the owner (gate {})", g.id));
                t.lease = None;
                let data = json!({"gate": g.id, "reason": t.reason});
                c.event(now, by, Action::TodoCancel, tid, data);
                c.writes.push(Write::Archive(t));
            }
            (GateStatus::Approved, Some("rewrite")) => {
                t.status = Status::Blocked;
                t.status_by = Some(by.into());
                t.reason = Some(format!(
                    "the owner asked for a rewrite (gate {}): edit it, then `loopx todo reopen {tid}`",
                    g.id
                ));
                t.lease = None;
                let data = json!({"gate": g.id, "reason": t.reason});
                c.event(now, by, Action::TodoBlock, tid, data);
                c.writes.push(Write::Todo(t));
            }
            // A rejection blocks the todo in the caller's loop, which clears the stall too.
            (GateStatus::Rejected, _) => {}
            _ => c.writes.push(Write::Todo(t)),
        }
    }
}
