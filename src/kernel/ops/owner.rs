//! Owner mutations: gate decisions, the goal's status, the quota, reassigns and owner releases,
//! and the seal. Each is the owner's change: the store signs it, or refuses it without the key.

use serde_json::json;

use super::{Change, Write, check_ttl, gate, grant, todo};
use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::id;
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::time::{Dur, Ts};

/// Owner: takes the lease back from `holder`; refuses when the lease changed hands meanwhile.
pub fn release_by_owner(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    id: &str,
    holder: &str,
) -> Result<(Change, Todo)> {
    let Some(cur) = snap.todos.get(id) else {
        return Err(Error::new(Code::NotFound, format!("no open todo {id}")));
    };
    let mut t = cur.clone();
    let Some(l) = t.lease.take() else {
        return Err(Error::new(
            Code::LeaseConflict,
            format!("{id} has no lease any more"),
        ));
    };
    if l.holder != holder {
        return Err(Error::new(
            Code::LeaseConflict,
            format!(
                "{id} is now held by {}, not {holder}; nothing released",
                l.holder
            ),
        ));
    }
    t.updated_at = now;
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        Action::TodoRelease,
        id,
        json!({"fence": l.fence, "holder": l.holder, "by_owner": true}),
    );
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}

/// Owner: moves the lease to `to` with a new fence.
pub fn reassign(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    ttl: Dur,
    id: &str,
    to: &str,
) -> Result<(Change, Todo)> {
    let ttl = check_ttl(ttl)?;
    id::check_agent(to)?;
    let mut t = todo(snap, id)?.clone();
    if t.role != Role::Agent || t.status != Status::Open {
        return Err(Error::new(
            Code::NotReady,
            format!("{id} is not an open agent todo"),
        ));
    }
    let from = t
        .lease
        .as_ref()
        .map(|l| json!({"holder": l.holder, "fence": l.fence}));
    // A live lease's reservation moves with it; a new one is the todo's own, as a claim's.
    let paths = match t.live_lease(now) {
        Some(l) => l.paths.clone(),
        None => t.paths.clone(),
    };
    if let Some(b) = crate::kernel::reserve::conflict(snap, id, to, &paths, now) {
        return Err(super::team::clash(id, to, &b));
    }
    grant(&mut t, to, now, ttl)?;
    if let Some(l) = t.lease.as_mut() {
        l.paths = paths;
    }
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        Action::TodoReassign,
        id,
        json!({"to": to, "fence": t.fence, "from": from}),
    );
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}

/// The owner's decision on a gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Approved, rejected or cancelled.
    pub status: GateStatus,
    /// The option chosen.
    pub option: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// The digest of the action the owner read (needed to approve a gate that holds one).
    pub sha: Option<String>,
}

impl Decision {
    /// A decision without an option, a reason or a digest.
    pub fn new(status: GateStatus) -> Decision {
        Decision {
            status,
            option: None,
            reason: None,
            sha: None,
        }
    }
}

/// Owner: approves, rejects or cancels a pending gate. A rejection blocks the todos it names;
/// an approval of a gate that holds an action needs that action's digest.
pub fn decide_gate(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    id: &str,
    d: Decision,
) -> Result<(Change, Gate)> {
    let cur = gate(snap, id)?;
    check_decision(cur, id, &d)?;
    let Decision {
        status,
        option,
        reason,
        sha: _,
    } = d;
    let mut g = cur.clone();
    g.status = status;
    g.decided_by = Some(owner.to_string());
    g.decided_at = Some(now);
    g.option = option;
    g.reason = reason;
    // Whatever signature the file held (forged or stale) is replaced by the store's.
    g.journal_head = None;
    g.signature = None;
    g.signed = true;
    limits::usage(limits::check_gate(&g))?;
    let mut c = Change::by_owner();
    let action = Action::gate_decision(status);
    let mut data = json!({"option": g.option, "reason": g.reason});
    if let (Some(a), GateStatus::Approved) = (&g.action, status) {
        data["sha256"] = json!(a.sha256);
    }
    c.event(now, owner, action, id, data);
    c.writes.push(Write::Gate(g.clone()));
    super::breaker::on_decision(snap, (owner, now), &g, &mut c);
    if status == GateStatus::Rejected {
        block_rejected(snap, owner, now, id, &g, &mut c);
    }
    Ok((c, g))
}

/// Refuses a decision the gate `cur` cannot take: it is decided already, the option is not
/// one it offers or is missing, a rejection has no reason, or the digest is wrong or misplaced.
pub(super) fn check_decision(cur: &Gate, id: &str, d: &Decision) -> Result<()> {
    let Decision {
        status,
        option,
        reason,
        sha,
    } = d;
    let status = *status;
    if cur.effective_status() != GateStatus::Pending {
        return Err(Error::new(
            Code::AlreadyDecided,
            format!(
                "gate {id} was {} by {} at {}",
                cur.status.as_str(),
                cur.decided_by.as_deref().unwrap_or("?"),
                cur.decided_at.map(|t| t.to_string()).unwrap_or_default()
            ),
        ));
    }
    if status == GateStatus::Pending {
        return Err(Error::new(Code::Internal, "a decision cannot be pending"));
    }
    if let Some(o) = option
        && !cur.options.is_empty()
        && !cur.options.contains(o)
    {
        return Err(Error::usage(format!(
            "`{o}` is not an option of {id}; choose one of: {}",
            cur.options.join(", ")
        )));
    }
    if status == GateStatus::Approved && option.is_none() && !cur.options.is_empty() {
        return Err(Error::usage(format!(
            "{id} offers options; approve it with --option, one of: {}",
            cur.options.join(", ")
        ))
        .hint(format!(
            "for example: loopx gate approve {id} --option '{}'",
            cur.options[0].replace('\'', r"'\''")
        ))
        .details(json!({"options": cur.options})));
    }
    if status == GateStatus::Rejected && reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(Error::usage("a rejection needs --reason"));
    }
    if status == GateStatus::Approved {
        crate::kernel::gate_action::approve_sha(cur, sha.as_deref())?;
    } else if sha.is_some() {
        return Err(Error::usage("--sha is for approving"));
    }
    Ok(())
}

/// Blocks every unfinished todo the rejected gate `g` names, whatever its status: a todo
/// deferred while the gate was pending must not be reopened past the rejection.
pub(super) fn block_rejected(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    id: &str,
    g: &Gate,
    c: &mut Change,
) {
    for tid in &g.blocks {
        let already = |t: &&Todo| {
            t.status == Status::Blocked && t.status_by.as_deref() == Some(&format!("gate:{id}"))
        };
        if let Some(t) = snap.todos.get(tid).filter(|t| !already(t)) {
            let mut t = t.clone();
            if t.stall.as_ref().and_then(|s| s.parked.as_deref()) == Some(id) {
                t.stall = None;
            }
            t.status = Status::Blocked;
            t.reason = g.reason.clone();
            t.status_by = Some(format!("gate:{id}"));
            t.lease = None;
            t.updated_at = now;
            c.event(
                now,
                owner,
                Action::TodoBlock,
                tid,
                json!({"gate": id, "reason": t.reason}),
            );
            c.writes.push(Write::Todo(t));
        }
    }
}

/// Owner: pauses, resumes or completes the goal.
pub fn set_goal_status(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    status: GoalStatus,
    reason: Option<String>,
) -> Result<(Change, Config)> {
    let mut cfg = snap.config.clone();
    let from = cfg.goal.status;
    cfg.goal.status = status;
    cfg.goal.reason = reason.clone();
    cfg.goal.updated_at = now;
    limits::usage(limits::check_config(&cfg))?;
    let action = Action::goal_status(status);
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        action,
        &cfg.goal.id,
        json!({"from": from, "reason": reason}),
    );
    c.writes.push(Write::Config(cfg.clone()));
    Ok((c, cfg))
}

/// What `quota set` changes; `None` keeps a value. A budget is `Some(None)` to remove it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QuotaChange {
    /// Slots per window.
    pub slots: Option<u32>,
    /// The window.
    pub window: Option<Dur>,
    /// The least time between spends.
    pub min_interval: Option<Dur>,
    /// Tokens per window (`Some(None)`: no token budget).
    pub tokens: Option<Option<u64>>,
    /// US dollars per window (`Some(None)`: no cost budget).
    pub cost_usd: Option<Option<f64>>,
    /// Turns without progress that park a todo (0: never).
    pub breaker: Option<u32>,
}

impl QuotaChange {
    /// True when it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == QuotaChange::default()
    }
}

/// Owner: changes the quota policy and the budgets.
pub fn set_quota(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    set: QuotaChange,
) -> Result<(Change, Config)> {
    if set.window.is_some_and(|w| w < Dur::from_secs(1)) {
        return Err(Error::usage("--window must be at least 1s"));
    }
    if set.min_interval.is_some_and(|m| m.0 < 0) {
        return Err(Error::usage("--min-interval cannot be negative"));
    }
    let mut cfg = snap.config.clone();
    let q = &mut cfg.quota;
    q.slots = set.slots.unwrap_or(q.slots);
    q.window = set.window.unwrap_or(q.window);
    q.min_interval = set.min_interval.unwrap_or(q.min_interval);
    q.tokens = set.tokens.unwrap_or(q.tokens);
    q.cost_usd = set.cost_usd.unwrap_or(q.cost_usd);
    if let Some(n) = set.breaker {
        cfg.breaker.turns = Some(n);
    }
    limits::usage(limits::check_config(&cfg))?;
    let q = &cfg.quota;
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        Action::QuotaSet,
        "quota",
        json!({"slots": q.slots, "window": q.window, "min_interval": q.min_interval,
               "tokens": q.tokens, "cost_usd": q.cost_usd, "breaker": cfg.breaker.turns()}),
    );
    c.writes.push(Write::Config(cfg.clone()));
    Ok((c, cfg))
}

/// The owner seals the journal's head and the owner's facts: as last sealed, or with `adopt`,
/// as the files say now (after the owner edited one by hand).
pub fn seal(snap: &Snapshot, owner: &str, now: Ts, adopt: bool) -> Result<(Change, Vec<String>)> {
    let mut c = Change::by_owner();
    c.adopt_files = adopt;
    c.event(
        now,
        owner,
        Action::OwnerSeal,
        "journal",
        json!({"adopt": adopt, "differences": snap.owner_notes.len()}),
    );
    Ok((c, snap.owner_notes.clone()))
}
