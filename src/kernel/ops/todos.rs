//! Todo operations: add, update (progress and done), release, reopen.

use super::{Change, OWNER, Write, check_lease, gate, next_due, todo};
use serde_json::json;

use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::id;
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::reserve;
use crate::kernel::time::{Dur, Ts};

/// What `todo add` needs.
#[derive(Debug, Clone)]
pub struct NewTodo {
    /// The fresh id.
    pub id: String,
    /// The title.
    pub title: String,
    /// Agent or user.
    pub role: Role,
    /// Priority.
    pub priority: Priority,
    /// Resolved dependency ids.
    pub depends_on: Vec<String>,
    /// A cadence.
    pub every: Option<Dur>,
    /// A gate that should block it.
    pub blocked_by_gate: Option<String>,
    /// Capabilities an agent needs.
    pub requires: Vec<String>,
    /// The todo it reviews (resolved; also added to `depends_on`).
    pub reviews: Option<String>,
    /// Agents that may never claim it.
    pub exclude_agents: Vec<String>,
    // todo context
    /// What the work is, at length.
    pub body: Option<String>,
    /// URLs it refers to.
    pub links: Vec<String>,
    /// The path globs a claim of it reserves by default.
    pub paths: Vec<String>,
}

impl NewTodo {
    /// An agent todo `id` titled `title`, P2, with nothing else set.
    pub fn new(id: impl Into<String>, title: impl Into<String>) -> NewTodo {
        NewTodo {
            id: id.into(),
            title: title.into(),
            role: Role::Agent,
            priority: Priority::P2,
            depends_on: Vec::new(),
            every: None,
            blocked_by_gate: None,
            requires: Vec::new(),
            reviews: None,
            exclude_agents: Vec::new(),
            body: None,
            links: Vec::new(),
            paths: Vec::new(),
        }
    }
}

/// Adds a todo (and puts it on a gate's `blocks` list when asked).
pub fn add_todo(snap: &Snapshot, actor: &str, now: Ts, new: NewTodo) -> Result<(Change, Todo)> {
    if new.title.trim().is_empty() {
        return Err(Error::usage("a todo needs a title"));
    }
    if let Some(every) = new.every
        && every < Dur::from_secs(1)
    {
        return Err(Error::usage("--every must be at least 1s"));
    }
    let gate_id = new.blocked_by_gate.clone();
    let t = todo_of(new, actor, now)?;
    limits::usage(limits::check_todo(&t))?;
    let mut c = Change::default();
    if let Some(gid) = &gate_id {
        c.writes.push(Write::Gate(gate_blocking(snap, gid, &t.id)?));
    }
    c.writes.insert(0, Write::Todo(t.clone()));
    c.event(
        now,
        actor,
        Action::TodoAdd,
        &t.id,
        json!({"title": t.title, "priority": t.priority, "role": t.role,
               "depends_on": t.depends_on, "every": t.every, "gate": gate_id,
               "requires": t.requires, "reviews": t.reviews, "exclude_agents": t.exclude_agents,
               "body": t.body.is_some(), "links": t.links}),
    );
    Ok((c, t))
}

/// The new todo `new` describes (a review depends on the work it reviews).
fn todo_of(mut new: NewTodo, actor: &str, now: Ts) -> Result<Todo> {
    if let Some(r) = &new.reviews
        && !new.depends_on.contains(r)
    {
        new.depends_on.push(r.clone());
    }
    Ok(Todo {
        schema_version: SCHEMA_VERSION,
        id: new.id,
        title: new.title.trim().to_string(),
        role: new.role,
        priority: new.priority,
        status: Status::Open,
        depends_on: new.depends_on,
        every: new.every,
        next_due_at: None,
        created_by: actor.to_string(),
        created_at: now,
        updated_at: now,
        reason: None,
        status_by: None,
        fence: 0,
        overdue_noted: None,
        check: None,
        requires: new.requires,
        reviews: new.reviews,
        exclude_agents: new.exclude_agents,
        body: new.body,
        links: new.links,
        stall: None,
        paths: reserve::normalise("--paths", &new.paths)?,
        lease: None,
        extra: Extra::new(),
    })
}

/// Gate `gid` blocking todo `id` too: only a pending gate blocks something new.
fn gate_blocking(snap: &Snapshot, gid: &str, id: &str) -> Result<Gate> {
    let mut g = gate(snap, gid)?.clone();
    if g.effective_status() != GateStatus::Pending {
        let status = g.status.as_str();
        return Err(Error::new(
            Code::AlreadyDecided,
            format!("gate {gid} is {status} already; it blocks nothing new"),
        ));
    }
    g.blocks.push(id.to_string());
    limits::usage(limits::check_gate(&g))?;
    Ok(g)
}

/// What `todo update` asks for.
#[derive(Debug, Clone, Default)]
pub struct Update {
    /// The fence the agent believes it holds.
    pub fence: Option<u64>,
    /// Evidence to append.
    pub evidence: Vec<Evidence>,
    /// A new status.
    pub status: Option<Status>,
    /// Why.
    pub reason: Option<String>,
}

/// Appends evidence and changes status; done and cancelled archive (or reschedule a recurring todo).
///
/// A `user` todo needs no lease: the change is the owner's (the store signs it or refuses it).
pub fn update(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    id: &str,
    u: Update,
) -> Result<(Change, Todo)> {
    let mut t = todo(snap, id)?.clone();
    let owner = t.role == Role::User;
    let agent = if owner { OWNER } else { agent };
    check_update_fence(&t, agent, now, owner, id, u.fence)?;
    let fence = t.lease.as_ref().map(|l| l.fence);
    let proven = proof_data(snap, &t, owner, id, &u)?;
    let mut c = Change {
        owner,
        ..Change::default()
    };
    for mut e in u.evidence {
        limits::usage(limits::check_evidence(&e))?;
        e.fence = e.fence.or(fence);
        c.writes.push(Write::Evidence(t.id.clone(), e));
    }
    let n_evidence = c.writes.len();
    t.updated_at = now;
    let (action, archive) = match u.status {
        Some(s) => apply_status(&mut t, s, agent, now)?,
        None => (Action::TodoUpdate, false),
    };
    if let Some(r) = &u.reason {
        t.reason = Some(r.clone());
    }
    limits::usage(limits::check_todo(&t))?;
    let mut data = json!({"fence": fence, "status": u.status, "reason": u.reason, "evidence": n_evidence,
               "next_due_at": t.next_due_at});
    if action == Action::TodoDone {
        exclude_finisher(snap, &t, agent, now, &mut data, &mut c);
    }
    if let Some(p) = proven.filter(|_| action == Action::TodoDone) {
        data["check"] = p;
    }
    c.event(now, agent, action, &t.id, data);
    c.writes.push(if archive {
        Write::Archive(t.clone())
    } else {
        Write::Todo(t.clone())
    });
    Ok((c, t))
}

/// Checks an update's fence: the owner's only when given, an agent's against its lease.
fn check_update_fence(
    t: &Todo,
    agent: &str,
    now: Ts,
    owner: bool,
    id: &str,
    fence: Option<u64>,
) -> Result<()> {
    if !owner {
        return check_lease(t, agent, now, fence);
    }
    if let Some(f) = fence
        && f != t.fence
    {
        return Err(Error::new(
            Code::StaleFence,
            format!("fence {f} is stale: {id} is at fence {}", t.fence),
        ));
    }
    Ok(())
}

/// Proven work: a todo with an approved check is done only with a passing run of that text.
/// Returns the check's data for the done event, or none when no proof is needed.
fn proof_data(
    snap: &Snapshot,
    t: &Todo,
    owner: bool,
    id: &str,
    u: &Update,
) -> Result<Option<serde_json::Value>> {
    if u.status == Some(Status::Done)
        && !owner
        && let Some(n) = crate::kernel::proof::needed(snap, t)?
    {
        let run = crate::kernel::proof::proof_of(&n, &u.evidence);
        let run = run.ok_or_else(|| crate::kernel::proof::unproven(id, &n))?;
        return Ok(Some(crate::kernel::proof::done_data(&n, run)));
    }
    Ok(None)
}

/// Sets status `s` on `t` for `agent`; returns the event's action and whether `t` is archived.
fn apply_status(t: &mut Todo, s: Status, agent: &str, now: Ts) -> Result<(Action, bool)> {
    // A change of status drops the old reason, unless a new one is given.
    if s != t.status {
        t.reason = None;
    }
    t.status_by = Some(agent.to_string());
    Ok(match (s, t.every) {
        (Status::Open, _) => (Action::TodoUpdate, false),
        (Status::Done, Some(every)) => {
            t.next_due_at = Some(next_due(now, every)?);
            t.lease = None;
            (Action::TodoDoneRecurring, false)
        }
        (Status::Done | Status::Cancelled, _) => {
            t.status = s;
            t.lease = None;
            if s == Status::Done {
                (Action::TodoDone, true)
            } else {
                (Action::TodoCancel, true)
            }
        }
        (Status::Blocked | Status::Deferred, _) => {
            t.status = s;
            t.lease = None;
            if s == Status::Blocked {
                (Action::TodoBlock, false)
            } else {
                (Action::TodoDefer, false)
            }
        }
    })
}

/// The finisher of a todo may never claim its reviews: excludes `agent` from them and names
/// them in the done event's `data`.
fn exclude_finisher(
    snap: &Snapshot,
    t: &Todo,
    agent: &str,
    now: Ts,
    data: &mut serde_json::Value,
    c: &mut Change,
) {
    let reviews = crate::kernel::agents::exclude_finisher(snap, &t.id, agent, now);
    if !reviews.is_empty() {
        data["reviews_excluded"] = json!(reviews.iter().map(|r| &r.id).collect::<Vec<_>>());
    }
    c.writes.extend(reviews.into_iter().map(Write::Todo));
}

/// Gives `agent`'s lease back.
pub fn release(snap: &Snapshot, agent: &str, now: Ts, id: &str) -> Result<(Change, Todo)> {
    let mut t = todo(snap, id)?.clone();
    match &t.lease {
        Some(l) if l.holder == agent => {}
        Some(l) if l.is_live(now) => {
            return Err(Error::new(
                Code::LeaseConflict,
                format!("{id} is leased by {}, not you", l.holder),
            ));
        }
        _ => {
            return Err(Error::new(
                Code::LeaseConflict,
                format!("you hold no lease on {id}"),
            ));
        }
    }
    let fence = t.fence;
    t.lease = None;
    t.updated_at = now;
    let mut c = Change::default();
    c.event(now, agent, Action::TodoRelease, id, json!({"fence": fence}));
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}

/// Returns a blocked or deferred todo to open: the agent that set it, or the owner.
///
/// Anyone else's reopen is the owner's change (the store signs it or refuses it), and so is
/// every reopen of a status loopx set itself (`owner`, `gate:ID`): no agent can match those.
pub fn reopen(snap: &Snapshot, agent: &str, now: Ts, id: &str) -> Result<(Change, Todo)> {
    let mut t = todo(snap, id)?.clone();
    if !matches!(t.status, Status::Blocked | Status::Deferred) {
        return Err(Error::new(
            Code::NotReady,
            format!("{id} is {}, not blocked or deferred", t.status.as_str()),
        ));
    }
    let owner = t.status_by.as_deref() != Some(agent) || id::is_reserved_actor(agent);
    let agent = if owner { OWNER } else { agent };
    t.status = Status::Open;
    t.reason = None;
    t.status_by = Some(agent.to_string());
    t.updated_at = now;
    let mut c = Change {
        owner,
        ..Change::default()
    };
    c.event(now, agent, Action::TodoReopen, id, json!({}));
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}
