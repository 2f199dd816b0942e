//! Readiness: which todos an agent may take now, why the others wait, and in what order.

use crate::kernel::model::{GateStatus, GoalStatus, Role, Snapshot, Status, Todo};
use crate::kernel::time::Ts;

pub use crate::kernel::blocker::Blocker;

/// Why `agent` may not take `todo` on: the rules a claim and a hand-off both apply to the
/// taker (an exclusion, capabilities it lacks, its own slot cap spent). Empty when it may.
pub fn may_take(snap: &Snapshot, todo: &Todo, agent: &str, now: Ts) -> Vec<Blocker> {
    let mut out = Vec::new();
    routing(snap, todo, agent, &mut out);
    slots_spent(snap, agent, now, &mut out);
    out
}

/// The agent's own slot cap, when its spends in the window reach it.
fn slots_spent(snap: &Snapshot, agent: &str, now: Ts, out: &mut Vec<Blocker>) {
    let Some(limit) = crate::kernel::agents::slots_cap(snap, agent) else {
        return;
    };
    let (q, p) = (&snap.quota, &snap.config.quota);
    if let Some(d) = crate::kernel::quota::agent_throttled(q, p, agent, limit, now) {
        out.push(Blocker::SlotsSpent {
            agent: agent.to_string(),
            limit,
            until: now.add(d),
        });
    }
}

/// Every reason `todo` is not ready for `agent` at `now`; empty when ready.
///
/// A live lease held by `agent` itself is not listed when `own_lease_ok`.
pub fn blockers(
    snap: &Snapshot,
    todo: &Todo,
    agent: &str,
    now: Ts,
    own_lease_ok: bool,
) -> Vec<Blocker> {
    let mut out = Vec::new();
    if snap.config.goal.status != GoalStatus::Active {
        out.push(Blocker::GoalPaused);
    }
    if todo.role != Role::Agent {
        out.push(Blocker::UserRole);
    }
    if todo.status != Status::Open {
        out.push(Blocker::Status {
            status: todo.status,
        });
    }
    routing(snap, todo, agent, &mut out);
    for dep in &todo.depends_on {
        let status = snap.status_of(dep);
        if status != Some(Status::Done) {
            out.push(Blocker::Dependency {
                id: dep.clone(),
                status,
                role: snap.todos.get(dep).map(|t| t.role),
            });
        }
    }
    for gate in snap.gates.values() {
        if gate.effective_status() == GateStatus::Pending && gate.blocks_todo(todo) {
            out.push(Blocker::Gate {
                id: gate.id.clone(),
            });
        }
    }
    if let Some(due) = todo.next_due_at
        && now < due
    {
        out.push(Blocker::NotDue { until: due });
    }
    stalled(snap, todo, now, &mut out);
    out.extend(crate::kernel::reserve::conflict(
        snap,
        &todo.id,
        agent,
        &todo.paths,
        now,
    ));
    if let Some(lease) = todo.live_lease(now)
        && !(own_lease_ok && lease.holder == agent)
    {
        out.push(Blocker::Leased {
            holder: lease.holder.clone(),
            until: lease.expires_at,
        });
    }
    out
}

/// The breaker's blockers: parked behind a gate that does not block it itself, or backed off.
fn stalled(snap: &Snapshot, todo: &Todo, now: Ts, out: &mut Vec<Blocker>) {
    if todo.stall.is_none() {
        return;
    }
    if let Some(g) = crate::kernel::breaker::parked(snap, todo)
        && !snap.gates.get(g).is_some_and(|x| x.blocks_todo(todo))
    {
        out.push(Blocker::Parked { gate: g.into() });
    }
    if let Some(until) = crate::kernel::breaker::backed_off(todo, now) {
        out.push(Blocker::Backoff { until });
    }
}

/// The routing blockers: capabilities `agent` lacks, and an exclusion of `agent`.
fn routing(snap: &Snapshot, todo: &Todo, agent: &str, out: &mut Vec<Blocker>) {
    if todo.requires.is_empty() && todo.exclude_agents.is_empty() {
        return;
    }
    if crate::kernel::agents::excluded(todo, agent) {
        out.push(Blocker::Excluded {
            agent: agent.to_string(),
        });
    }
    let missing = crate::kernel::agents::missing(snap, todo, agent);
    if !missing.is_empty() {
        out.push(Blocker::Capability { missing });
    }
}

/// True when `todo` is this agent's kind of work: no capability it lacks, no exclusion.
/// Allocates nothing: should-run and the pick call it on every open todo.
pub fn is_yours(snap: &Snapshot, todo: &Todo, agent: &str) -> bool {
    yours(
        todo,
        agent,
        crate::kernel::agents::capabilities(snap, agent),
    )
}

/// `is_yours` with the agent's capabilities `have` looked up once for many todos.
pub fn yours(todo: &Todo, agent: &str, have: &[String]) -> bool {
    if todo.requires.is_empty() && todo.exclude_agents.is_empty() {
        return true;
    }
    !crate::kernel::agents::excluded(todo, agent) && todo.requires.iter().all(|r| have.contains(r))
}

/// True when `todo` is ready for `agent`: nothing blocks it and nobody holds a live lease.
pub fn is_ready(snap: &Snapshot, todo: &Todo, agent: &str, now: Ts) -> bool {
    is_yours(snap, todo, agent) && blockers(snap, todo, agent, now, false).is_empty()
}

/// The pick order at `now`: priority, then a due monitor before other work, then oldest, then id.
pub fn pick_key(t: &Todo, now: Ts) -> PickKey<'_> {
    let due_monitor = crate::kernel::monitor::is_due(t, now);
    (t.priority, !due_monitor, t.created_at, t.id.as_str())
}

/// Ready todos for `agent`, best first.
pub fn ready<'a>(snap: &'a Snapshot, agent: &str, now: Ts) -> Vec<&'a Todo> {
    let mut v = unordered(snap, agent, now);
    v.sort_by(|a, b| pick_key(a, now).cmp(&pick_key(b, now)));
    v
}

/// Ready todos for `agent`, in the snapshot's order.
fn unordered<'a>(snap: &'a Snapshot, agent: &str, now: Ts) -> Vec<&'a Todo> {
    let have = crate::kernel::agents::capabilities(snap, agent);
    snap.todos
        .values()
        .filter(|t| unblocked(snap, t, agent, have, now))
        .collect()
}

/// The best `k` ready todos for `agent`, best first: `ready(..)` cut at `k`, kept as it goes
/// (a claim ranks a few candidates among thousands of todos).
pub fn ready_first<'a>(snap: &'a Snapshot, agent: &str, now: Ts, k: usize) -> Vec<&'a Todo> {
    let have = crate::kernel::agents::capabilities(snap, agent);
    // The best so far with their keys, best first.
    let mut v: Vec<(PickKey<'a>, &'a Todo)> = Vec::with_capacity(k + 1);
    if k == 0 {
        return Vec::new();
    }
    for t in snap.todos.values() {
        // Most todos of a busy project are leased or done: out first, on two fields.
        if t.status != Status::Open || t.live_lease(now).is_some() {
            continue;
        }
        // No better than the k kept so far: out, before the other checks.
        let key = pick_key(t, now);
        if v.len() == k && v.last().is_some_and(|(w, _)| *w <= key) {
            continue;
        }
        if !unblocked(snap, t, agent, have, now) {
            continue;
        }
        let at = v.partition_point(|(x, _)| *x <= key);
        v.insert(at, (key, t));
        v.truncate(k);
    }
    v.into_iter().map(|(_, t)| t).collect()
}

/// A todo's place in the pick order: priority, not a due monitor, created at, id.
pub type PickKey<'a> = (crate::kernel::Priority, bool, Ts, &'a str);

/// The best ready todo for `agent`, if any.
pub fn best<'a>(snap: &'a Snapshot, agent: &str, now: Ts) -> Option<&'a Todo> {
    ready_first(snap, agent, now, 1).pop()
}

/// What a claim without an id takes: the best todo handed to `agent` (a live lease it holds
/// with `handoff_from`), else the best ready one; the flag says it was handed. One pass.
pub fn pick<'a>(snap: &'a Snapshot, agent: &str, now: Ts) -> Option<(&'a Todo, bool)> {
    let have = crate::kernel::agents::capabilities(snap, agent);
    let better =
        |cur: Option<&Todo>, t: &Todo| cur.is_none_or(|c| pick_key(t, now) < pick_key(c, now));
    let (mut handed, mut ready): (Option<&Todo>, Option<&Todo>) = (None, None);
    for t in snap.todos.values() {
        if let Some(l) = t.live_lease(now) {
            if l.handoff_from.is_some() && l.holder == agent && better(handed, t) {
                handed = Some(t);
            }
            continue;
        }
        if handed.is_none()
            && t.status == Status::Open
            && better(ready, t)
            && unblocked(snap, t, agent, have, now)
        {
            ready = Some(t);
        }
    }
    match handed {
        Some(t) => Some((t, true)),
        None => ready.map(|t| (t, false)),
    }
}

/// `yours(..) && blockers(..).is_empty()` without building the blockers: the pick calls it on
/// every open todo, most of them leased or not open.
fn unblocked(snap: &Snapshot, t: &Todo, agent: &str, have: &[String], now: Ts) -> bool {
    let fast = snap.config.goal.status == GoalStatus::Active
        && t.role == Role::Agent
        && t.status == Status::Open
        && t.live_lease(now).is_none()
        && t.next_due_at.is_none_or(|due| now >= due)
        && (t.stall.is_none() || {
            let mut b = Vec::new();
            stalled(snap, t, now, &mut b);
            b.is_empty()
        })
        && yours(t, agent, have)
        && (t.paths.is_empty()
            || crate::kernel::reserve::conflict(snap, &t.id, agent, &t.paths, now).is_none())
        && ((t.requires.is_empty() && t.exclude_agents.is_empty())
            || crate::kernel::agents::missing(snap, t, agent).is_empty())
        && t.depends_on
            .iter()
            .all(|d| snap.status_of(d) == Some(Status::Done))
        && !snap
            .gates
            .values()
            .any(|g| g.effective_status() == GateStatus::Pending && g.blocks_todo(t));
    debug_assert_eq!(
        fast,
        yours(t, agent, have) && blockers(snap, t, agent, now, false).is_empty(),
        "unblocked disagrees with blockers for {}",
        t.id
    );
    fast
}

/// Todos `agent` holds a live lease on, best first.
pub fn held<'a>(snap: &'a Snapshot, agent: &str, now: Ts) -> Vec<&'a Todo> {
    let mut v: Vec<&Todo> = snap
        .todos
        .values()
        .filter(|t| t.live_lease(now).is_some_and(|l| l.holder == agent))
        .collect();
    v.sort_by(|a, b| pick_key(a, now).cmp(&pick_key(b, now)));
    v
}

/// Why an open todo is not ready, in the order `why_none_ready` names them.
const WHY: [&str; 8] = [
    "held by you",
    "leased by other agents",
    "waiting on a pending gate",
    "waiting on a dependency",
    "not due yet",
    "needing capabilities you lack",
    "that you may not claim",
    "whose paths overlap another agent's reservation",
];

/// The place in `WHY` of a blocker, or None for one not counted.
fn why_index(b: &Blocker, agent: &str) -> Option<usize> {
    Some(match b {
        Blocker::Leased { holder, .. } if holder == agent => 0,
        Blocker::Leased { .. } => 1,
        Blocker::Gate { .. } | Blocker::Parked { .. } => 2,
        Blocker::Dependency { .. } => 3,
        Blocker::NotDue { .. } | Blocker::Backoff { .. } => 4,
        Blocker::Capability { .. } => 5,
        Blocker::Excluded { .. } => 6,
        Blocker::Reserved { .. } => 7,
        _ => return None,
    })
}

/// Why nothing is ready for `agent`, in a sentence, and what to do about it.
pub fn why_none_ready(snap: &Snapshot, agent: &str, now: Ts) -> (String, String) {
    match snap.config.goal.status {
        GoalStatus::Paused => {
            return (
                "the goal is paused".into(),
                "wait for the owner to resume it".into(),
            );
        }
        GoalStatus::Complete => {
            return ("the goal is complete".into(), "nothing more to do".into());
        }
        GoalStatus::Active => {}
    }
    let open: Vec<&Todo> = snap
        .todos
        .values()
        .filter(|t| t.role == Role::Agent && t.status == Status::Open)
        .collect();
    if open.is_empty() {
        return (
            "there is no open agent todo".into(),
            "add one with `loopx todo add \"...\"`".into(),
        );
    }
    // Each todo counts once, under its first blocker, so the parts add up to the open todos.
    let mut counts = [0usize; WHY.len()];
    for t in &open {
        let kinds = blockers(snap, t, agent, now, false).into_iter();
        if let Some(k) = kinds.filter_map(|b| why_index(&b, agent)).next() {
            counts[k] += 1;
        }
    }
    let parts: Vec<String> = counts
        .iter()
        .zip(WHY)
        .filter(|(n, _)| **n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    (
        format!(
            "nothing is ready: of {}, {}",
            crate::text::count(open.len(), "open todo", "open todos"),
            parts.join(", ")
        ),
        "see when to try again with `loopx quota should-run`".into(),
    )
}
