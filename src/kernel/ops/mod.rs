//! Mutations as pure functions: each takes a snapshot and a clock and returns the change to store.

use serde_json::json;

use crate::kernel::action::Action;
use crate::kernel::bounds;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::id;
use crate::kernel::model::*;
use crate::kernel::readiness::{self, Blocker};
use crate::kernel::reserve;
use crate::kernel::time::{Dur, Ts};

/// One file to write.
#[derive(Debug, Clone)]
pub enum Write {
    /// Write `todos/ID.toml`.
    Todo(Todo),
    /// Move a todo to `archive/ID.toml`.
    Archive(Todo),
    /// Write `gates/ID.toml`.
    Gate(Gate),
    /// Write `loopx.toml`.
    Config(Config),
    /// Write `quota.toml`.
    Quota(QuotaFile),
    /// Append to `evidence/ID.jsonl`.
    Evidence(String, Evidence),
    /// Write `agents/ID.toml` (routing, issue 9).
    Agent(AgentInfo),
}

/// What a mutation changes: files to write and journal events, applied together under the lock.
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// Files to write, in order.
    pub writes: Vec<Write>,
    /// Journal events, in order.
    pub events: Vec<EventDraft>,
    /// An owner action: the store signs it, and refuses it without the owner's key.
    pub owner: bool,
    /// The owner seals the files as they are, even where they differ from the last seal.
    pub adopt_files: bool,
}

impl Change {
    /// An empty change that is the owner's: the store signs it, or refuses it without the key.
    pub fn by_owner() -> Change {
        Change {
            owner: true,
            ..Change::default()
        }
    }

    /// Adds a journal event; an event whose actor is the owner makes the whole change the owner's.
    fn event(
        &mut self,
        now: Ts,
        actor: &str,
        action: Action,
        target: &str,
        data: serde_json::Value,
    ) {
        self.owner |= actor.eq_ignore_ascii_case(OWNER);
        self.events.push(EventDraft {
            at: now,
            actor: actor.to_string(),
            action,
            target: target.to_string(),
            data,
        });
    }
}

/// The actor recorded for the owner's actions.
pub const OWNER: &str = "owner";

fn todo<'a>(snap: &'a Snapshot, id: &str) -> Result<&'a Todo> {
    if let Some(p) = snap.quarantined.get(id) {
        return Err(p.to_error());
    }
    snap.todos.get(id).ok_or_else(|| {
        let msg = match snap.archived.get(id) {
            Some(s) => format!("todo {id} is {} and archived", s.as_str()),
            None => format!("no open todo {id}"),
        };
        Error::new(Code::NotFound, msg).hint("list open todos with `loopx todo list`")
    })
}

fn gate<'a>(snap: &'a Snapshot, id: &str) -> Result<&'a Gate> {
    if let Some(p) = snap.quarantined.get(id) {
        return Err(p.to_error());
    }
    snap.gates.get(id).ok_or_else(|| {
        Error::new(Code::NotFound, format!("no gate {id}"))
            .hint("list gates with `loopx gate list`")
    })
}

/// Checks a lease length is within 1 s and 7 days.
pub fn check_ttl(ttl: Dur) -> Result<Dur> {
    if ttl < TTL_MIN || ttl > TTL_MAX {
        return Err(Error::usage(format!(
            "a lease lasts from 1s to 7d, not {ttl}"
        )));
    }
    Ok(ttl)
}

/// When a recurring todo done at `now` is due again; an error past the latest time loopx keeps.
fn next_due(now: Ts, every: Dur) -> Result<Ts> {
    now.checked_add(every).ok_or_else(|| {
        Error::usage(format!(
            "the next due time, now plus {every}, is past {}, the latest time loopx keeps",
            Ts::MAX
        ))
        .hint("lower the todo's `every`, or check the system clock")
    })
}

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
    // --- routing (issue 9) ---
    /// Capabilities an agent needs.
    pub requires: Vec<String>,
    /// The todo it reviews (resolved; also added to `depends_on`).
    pub reviews: Option<String>,
    /// Agents that may never claim it.
    pub exclude_agents: Vec<String>,
    // --- end routing ---
    // -- teams: todo context --
    /// What the work is, at length.
    pub body: Option<String>,
    /// URLs it refers to.
    pub links: Vec<String>,
    // -- end teams --
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
    let mut new = new;
    if let Some(r) = &new.reviews
        && !new.depends_on.contains(r)
    {
        new.depends_on.push(r.clone());
    }
    let t = Todo {
        schema_version: SCHEMA_VERSION,
        id: new.id.clone(),
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
    };
    bounds::usage(bounds::check_todo(&t))?;
    let mut c = Change::default();
    if let Some(gid) = &new.blocked_by_gate {
        let mut g = gate(snap, gid)?.clone();
        if g.effective_status() != GateStatus::Pending {
            return Err(Error::new(
                Code::AlreadyDecided,
                format!(
                    "gate {gid} is {} already; it blocks nothing new",
                    g.status.as_str()
                ),
            ));
        }
        g.blocks.push(t.id.clone());
        bounds::usage(bounds::check_gate(&g))?;
        c.writes.push(Write::Gate(g));
    }
    c.writes.insert(0, Write::Todo(t.clone()));
    c.event(
        now,
        actor,
        Action::TodoAdd,
        &t.id,
        json!({"title": t.title, "priority": t.priority, "role": t.role,
               "depends_on": t.depends_on, "every": t.every, "gate": new.blocked_by_gate,
               "requires": t.requires, "reviews": t.reviews, "exclude_agents": t.exclude_agents,
               "body": t.body.is_some(), "links": t.links}),
    );
    Ok((c, t))
}

fn not_ready_error(id: &str, blockers: &[Blocker]) -> Error {
    let reasons: Vec<String> = blockers.iter().map(Blocker::describe).collect();
    Error::new(
        Code::NotReady,
        format!("{id} is not ready: {}", reasons.join("; ")),
    )
    .details(json!({ "reasons": blockers }))
}

fn grant(t: &mut Todo, agent: &str, now: Ts, ttl: Dur) -> Result<()> {
    if t.fence >= bounds::FENCE_MAX {
        return Err(Error::usage(format!(
            "{} is at fence {}, the highest; it cannot be granted again",
            t.id, t.fence
        ))
        .hint("add a new todo for this work"));
    }
    t.fence += 1;
    t.lease = Some(Lease {
        holder: agent.to_string(),
        fence: t.fence,
        acquired_at: now,
        expires_at: now.add(ttl),
        turn: None,
        handoff_from: None,
        base: None,
        paths: t.paths.clone(),
        worktree: None,
        extra: Extra::new(),
    });
    t.updated_at = now;
    Ok(())
}

/// Claims `id`, or the best ready todo: a lease with a new fence (or a renewal of one's own).
pub fn claim(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    ttl: Dur,
    id: Option<&str>,
) -> Result<(Change, Todo)> {
    claim_reserving(snap, agent, now, ttl, id, None)
}

/// `claim`, reserving `paths` (normalised, see `kernel::reserve`) with the lease instead of
/// the todo's own; a reservation that may overlap another agent's live one is refused.
pub fn claim_reserving(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    ttl: Dur,
    id: Option<&str>,
    paths: Option<&[String]>,
) -> Result<(Change, Todo)> {
    let (c, mut t) = claim_inner(snap, agent, now, ttl, id, paths)?;
    let Some(paths) = paths else {
        return Ok((c, t));
    };
    let paths = reserve::normalise("--paths", paths)?;
    if let Some(b) = reserve::conflict(snap, &t.id, agent, &paths, now) {
        return Err(reserved_error(&t.id, &b));
    }
    let mut c = c;
    if let Some(l) = t.lease.as_mut() {
        l.paths = paths;
    }
    for w in &mut c.writes {
        if let Write::Todo(x) = w
            && x.id == t.id
        {
            *x = t.clone();
        }
    }
    if let Some(e) = c.events.last_mut() {
        e.data["paths"] = json!(t.lease.as_ref().map(|l| &l.paths));
    }
    Ok((c, t))
}

/// The refusal of a claim whose reservation may overlap a live one: exit 4, `lease_conflict`.
fn reserved_error(id: &str, b: &Blocker) -> Error {
    let Blocker::Reserved { holder, todo, .. } = b else {
        return not_ready_error(id, std::slice::from_ref(b));
    };
    Error::new(Code::LeaseConflict, format!("{id}: {}", b.describe()))
        .hint(format!(
            "claim other work, narrow --paths, or wait for {holder} to finish {todo}"
        ))
        .details(json!({ "reasons": [b] }))
}

fn claim_inner(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    ttl: Dur,
    id: Option<&str>,
    paths: Option<&[String]>,
) -> Result<(Change, Todo)> {
    let ttl = check_ttl(ttl)?;
    let mut c = Change::default();
    let Some(id) = id else {
        // A todo handed to this agent comes first: the claim takes it up (teams).
        let best = match readiness::pick(snap, agent, now) {
            Some((t, true)) => return claim_inner(snap, agent, now, ttl, Some(&t.id), paths),
            Some((t, false)) => Some(t),
            None => None,
        };
        debug_assert_eq!(
            best.map(|t| &t.id),
            handed_to(snap, agent, now)
                .is_none()
                .then(|| readiness::best(snap, agent, now).map(|t| &t.id))
                .flatten()
        );
        let Some(best) = best else {
            let (why, hint) = readiness::why_none_ready(snap, agent, now);
            return Err(Error::new(Code::NothingReady, why).hint(hint));
        };
        // Routing is in the pick already; the agent's own slot cap is not.
        if let Some(b) = readiness::may_take(snap, best, agent, now).first() {
            return Err(Error::new(Code::NothingReady, b.describe())
                .hint("see when to try again with `loopx quota should-run`")
                .details(json!({"reasons": [b]})));
        }
        let mut t = best.clone();
        grant_claim(&mut c, &mut t, agent, now, ttl)?;
        c.writes.push(Write::Todo(t.clone()));
        return Ok((c, t));
    };
    let cur = todo(snap, id)?;
    if let Some(l) = cur.live_lease(now)
        && l.holder != agent
    {
        return Err(Error::new(
            Code::LeaseConflict,
            format!("{id} is leased by {} until {}", l.holder, l.expires_at),
        )
        .hint("claim another todo with a bare `loopx todo claim`")
        .details(json!({"holder": l.holder, "expires_at": l.expires_at})));
    }
    let mut b = readiness::blockers(snap, cur, agent, now, true);
    if paths.is_some() {
        // The claim names its own reservation: the todo's is not the one that counts.
        b.retain(|x| !matches!(x, Blocker::Reserved { .. }));
    } else if let Some(r) = b.iter().find(|x| matches!(x, Blocker::Reserved { .. })) {
        return Err(reserved_error(id, r));
    }
    if cur.live_lease(now).is_none() {
        // A new lease: the taker's rules, exactly as a hand-off applies them to its receiver.
        b.retain(|x| !x.not_yours());
        b.extend(readiness::may_take(snap, cur, agent, now));
    }
    if !b.is_empty() {
        return Err(not_ready_error(id, &b));
    }
    let mut t = cur.clone();
    if let Some(l) = t.lease.as_mut().filter(|l| l.is_live(now)) {
        l.expires_at = now.add(ttl);
        let mut data = json!({"fence": t.fence, "expires_at": l.expires_at});
        if let Some(from) = l.handoff_from.take() {
            data["handoff_from"] = json!(from);
        }
        t.updated_at = now;
        c.event(now, agent, Action::TodoRenew, &t.id, data);
    } else {
        grant_claim(&mut c, &mut t, agent, now, ttl)?;
    }
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}

/// Grants a new lease (and fence) on `t` and journals the claim, naming any expired lease it replaces.
fn grant_claim(c: &mut Change, t: &mut Todo, agent: &str, now: Ts, ttl: Dur) -> Result<()> {
    let expired = t.lease.clone();
    grant(t, agent, now, ttl)?;
    c.event(
        now,
        agent,
        Action::TodoClaim,
        &t.id,
        claim_data(t, expired.as_ref()),
    );
    Ok(())
}

fn claim_data(t: &Todo, expired: Option<&Lease>) -> serde_json::Value {
    let l = t.lease.as_ref();
    json!({
        "fence": t.fence,
        "expires_at": l.map(|l| l.expires_at),
        "reclaimed_from": expired.map(|e| json!({"holder": e.holder, "fence": e.fence, "expired_at": e.expires_at})),
    })
}

/// The todo this agent means when it names none: the one it holds.
pub fn default_held(snap: &Snapshot, agent: &str, now: Ts) -> Result<String> {
    let held = readiness::held(snap, agent, now);
    match held.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => {
            let expired: Vec<&Todo> = snap
                .todos
                .values()
                .filter(|t| t.lease.as_ref().is_some_and(|l| l.holder == agent))
                .collect();
            if let [t] = expired.as_slice() {
                let exp = t.lease.as_ref().map(|l| l.expires_at).unwrap_or_default();
                return Err(Error::new(
                    Code::LeaseConflict,
                    format!("your lease on {} expired at {exp}", t.id),
                )
                .hint(format!("claim it again with `loopx todo claim {}`", t.id)));
            }
            Err(Error::new(
                Code::LeaseConflict,
                format!("agent `{agent}` holds no lease"),
            )
            .hint("claim one with `loopx todo claim`"))
        }
        many => {
            let ids: Vec<&str> = many.iter().map(|t| t.id.as_str()).collect();
            Err(Error::usage(format!(
                "{agent} holds {} leases: {}; name one",
                ids.len(),
                ids.join(", ")
            ))
            .details(json!({"held": ids})))
        }
    }
}

/// Checks `agent` holds a live lease on `t` with the current fence (when one is given).
pub fn check_lease(t: &Todo, agent: &str, now: Ts, fence: Option<u64>) -> Result<()> {
    if let Some(f) = fence
        && f != t.fence
    {
        return Err(Error::new(
            Code::StaleFence,
            format!("fence {f} is stale: {} is at fence {}", t.id, t.fence),
        )
        .hint("your lease was taken over; stop work on it and claim again")
        .details(json!({"fence": t.fence})));
    }
    match &t.lease {
        Some(l) if l.holder == agent && l.is_live(now) => Ok(()),
        Some(l) if l.holder == agent => Err(Error::new(
            Code::LeaseConflict,
            format!("your lease on {} expired at {}", t.id, l.expires_at),
        )
        .hint(format!("claim it again with `loopx todo claim {}`", t.id))),
        Some(l) if l.is_live(now) => Err(Error::new(
            Code::LeaseConflict,
            format!("{} is leased by {} until {}", t.id, l.holder, l.expires_at),
        )),
        _ => Err(Error::new(
            Code::LeaseConflict,
            format!("you hold no lease on {}", t.id),
        )
        .hint(format!("claim it with `loopx todo claim {}`", t.id))),
    }
}

/// Extends `agent`'s live lease.
pub fn renew(snap: &Snapshot, agent: &str, now: Ts, ttl: Dur, id: &str) -> Result<(Change, Todo)> {
    let ttl = check_ttl(ttl)?;
    let mut t = todo(snap, id)?.clone();
    check_lease(&t, agent, now, None)?;
    let mut c = Change::default();
    if let Some(l) = t.lease.as_mut() {
        l.expires_at = now.add(ttl);
        l.handoff_from = None;
        c.event(
            now,
            agent,
            Action::TodoRenew,
            id,
            json!({"fence": l.fence, "expires_at": l.expires_at}),
        );
    }
    t.updated_at = now;
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
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
    if owner {
        if let Some(f) = u.fence
            && f != t.fence
        {
            return Err(Error::new(
                Code::StaleFence,
                format!("fence {f} is stale: {id} is at fence {}", t.fence),
            ));
        }
    } else {
        check_lease(&t, agent, now, u.fence)?;
    }
    let fence = t.lease.as_ref().map(|l| l.fence);
    // Proven work: a todo with an approved check is done only with a passing run of that text.
    let mut proven = None;
    if u.status == Some(Status::Done)
        && !owner
        && let Some(n) = crate::kernel::proof::needed(snap, &t)?
    {
        let run = crate::kernel::proof::proof_of(&n, &u.evidence);
        let run = run.ok_or_else(|| crate::kernel::proof::unproven(id, &n))?;
        proven = Some(crate::kernel::proof::done_data(&n, run));
    }
    let mut c = Change {
        owner,
        ..Change::default()
    };
    for mut e in u.evidence {
        bounds::usage(bounds::check_evidence(&e))?;
        e.fence = e.fence.or(fence);
        c.writes.push(Write::Evidence(t.id.clone(), e));
    }
    let n_evidence = c.writes.len();
    t.updated_at = now;
    let mut archive = false;
    let mut action = Action::TodoUpdate;
    if let Some(s) = u.status {
        // A change of status drops the old reason, unless a new one is given.
        if s != t.status {
            t.reason = None;
        }
        t.status_by = Some(agent.to_string());
        action = match (s, t.every) {
            (Status::Open, _) => Action::TodoUpdate,
            (Status::Done, Some(every)) => {
                t.next_due_at = Some(next_due(now, every)?);
                t.lease = None;
                Action::TodoDoneRecurring
            }
            (Status::Done | Status::Cancelled, _) => {
                t.status = s;
                t.lease = None;
                archive = true;
                if s == Status::Done {
                    Action::TodoDone
                } else {
                    Action::TodoCancel
                }
            }
            (Status::Blocked | Status::Deferred, _) => {
                t.status = s;
                t.lease = None;
                if s == Status::Blocked {
                    Action::TodoBlock
                } else {
                    Action::TodoDefer
                }
            }
        };
    }
    if let Some(r) = &u.reason {
        t.reason = Some(r.clone());
    }
    bounds::usage(bounds::check_todo(&t))?;
    let mut data = json!({"fence": fence, "status": u.status, "reason": u.reason, "evidence": n_evidence,
               "next_due_at": t.next_due_at});
    // -- routing (issue 9): the finisher of a todo may never claim its reviews --
    if action == Action::TodoDone {
        let reviews = crate::kernel::agents::exclude_finisher(snap, &t.id, agent, now);
        if !reviews.is_empty() {
            data["reviews_excluded"] = json!(reviews.iter().map(|r| &r.id).collect::<Vec<_>>());
        }
        c.writes.extend(reviews.into_iter().map(Write::Todo));
    }
    // -- end routing --
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

/// Clears every expired lease (doctor --fix); fences are kept.
pub fn expire_leases(snap: &Snapshot, actor: &str, now: Ts) -> Change {
    let mut c = Change::default();
    for t in snap.todos.values() {
        if let Some(l) = &t.lease
            && !l.is_live(now)
        {
            let mut t2 = t.clone();
            t2.lease = None;
            t2.updated_at = now;
            c.event(
                now,
                actor,
                Action::LeaseExpire,
                &t.id,
                json!({"holder": l.holder, "fence": l.fence, "expired_at": l.expires_at}),
            );
            c.writes.push(Write::Todo(t2));
        }
    }
    c
}

mod breaker;
mod gates;
pub use gates::*;
mod hooks;
mod owner;
// teams: hand-off and edit (issue 9)
mod team;
pub use team::*;
mod spend;
mod turn;
pub use breaker::Progress;
pub use hooks::*;
pub use owner::*;
pub use spend::*;
pub use turn::*;

// monitors (issue 8)
mod monitor;
pub use monitor::*;
