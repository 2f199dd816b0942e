//! Claim operations: claim (with reservations), renew, the held default, expiring leases.

use super::{Change, Write, check_ttl, handed_to, todo};
use serde_json::json;

use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::readiness::{self, Blocker};
use crate::kernel::reserve;
use crate::kernel::time::{Dur, Ts};

fn not_ready_error(id: &str, blockers: &[Blocker]) -> Error {
    let reasons: Vec<String> = blockers.iter().map(Blocker::describe).collect();
    Error::new(
        Code::NotReady,
        format!("{id} is not ready: {}", reasons.join("; ")),
    )
    .details(json!({ "reasons": blockers }))
}

pub(super) fn grant(t: &mut Todo, agent: &str, now: Ts, ttl: Dur) -> Result<()> {
    if t.fence >= limits::FENCE_MAX {
        return Err(Error::usage(format!(
            "{} is at fence {}, the highest; it cannot be granted again",
            t.id, t.fence
        ))
        .hint("add a new todo for this work"));
    }
    t.fence += 1;
    t.lease = Some(Box::new(Lease {
        paths: t.paths.clone(),
        ..Lease::new(agent.to_string(), t.fence, now, now.add(ttl))
    }));
    t.updated_at = now;
    Ok(())
}

/// Where todo worktrees live, relative to the project's root (`--worktree`).
pub const WORKTREES: &str = ".loopx/worktrees";

/// The git worktree of todo `id`, relative to the project's root.
pub fn worktree_path(id: &str) -> String {
    format!("{WORKTREES}/{id}")
}

/// What a claim asks besides who and when: the kernel decides its whole change from it.
#[derive(Debug, Clone, Default)]
pub struct ClaimOpts {
    /// The todo's full id; `None`: the best ready todo.
    pub id: Option<String>,
    /// The lease's length; `None`: the project's.
    pub ttl: Option<Dur>,
    /// The files the lease reserves instead of the todo's own (normalised here, see
    /// `kernel::reserve`); one that may overlap another agent's live reservation is refused.
    pub paths: Option<Vec<String>>,
    /// Name the todo's git worktree ([`worktree_path`]) in the lease and its journal line.
    pub worktree: bool,
    /// The turn the lease is for, and the work tree's state as the turn begins.
    pub turn: Option<(String, Option<Base>)>,
}

/// Claims `id`, or the best ready todo: a lease with a new fence (or a renewal of one's own).
pub fn claim(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    ttl: Dur,
    id: Option<&str>,
) -> Result<(Change, Todo)> {
    let want = ClaimOpts {
        id: id.map(str::to_string),
        ttl: Some(ttl),
        ..ClaimOpts::default()
    };
    claim_with(snap, agent, now, &want)
}

/// Claims as `want` asks, in one change: the lease (granted or renewed) with its reservation,
/// worktree and turn, and the journal line naming them.
pub fn claim_with(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    want: &ClaimOpts,
) -> Result<(Change, Todo)> {
    let ttl = check_ttl(want.ttl.unwrap_or(snap.config.lease.ttl))?;
    let paths = want.paths.as_deref();
    let paths = paths
        .map(|p| reserve::normalise("--paths", p))
        .transpose()?;
    let own = paths.is_some();
    let cur = match want.id.as_deref() {
        Some(id) => claimable(snap, agent, now, id, own)?,
        None => best(snap, agent, now, own)?,
    };
    if let Some(b) = paths
        .as_ref()
        .and_then(|p| reserve::conflict(snap, &cur.id, agent, p, now))
    {
        return Err(reserved_error(&cur.id, &b));
    }
    let mut t = cur.clone();
    let (action, mut data) = lease(&mut t, agent, now, ttl)?;
    let worktree = want.worktree.then(|| worktree_path(&t.id));
    if let Some(l) = t.lease.as_mut() {
        if let Some((turn, base)) = &want.turn {
            l.turn = Some(turn.clone());
            l.base = Some(Base {
                at: Some(now),
                ..base.clone().unwrap_or_default()
            });
            // The claim names its turn, so the turn's end finds its todo after the lease is gone.
            if action == Action::TodoClaim {
                data["turn"] = json!(turn);
            }
        }
        if let Some(p) = paths {
            data["paths"] = json!(p);
            l.paths = p;
        }
        if let Some(w) = worktree {
            data["worktree"] = json!(w);
            l.worktree = Some(w);
        }
    }
    let mut c = Change::default();
    c.event(now, agent, action, &t.id, data);
    c.writes.push(Write::Todo(t.clone()));
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

/// The todo a claim without an id takes: the one handed to `agent`, else the best ready one
/// its own slot cap lets it take.
fn best<'a>(snap: &'a Snapshot, agent: &str, now: Ts, own_paths: bool) -> Result<&'a Todo> {
    // A todo handed to this agent comes first: the claim takes it up (teams).
    let best = match readiness::pick(snap, agent, now) {
        Some((t, true)) => return claimable(snap, agent, now, &t.id, own_paths),
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
    Ok(best)
}

/// Todo `id`, when `agent` may claim it now (`own_paths`: the claim names its own reservation,
/// so the todo's is not the one that counts).
fn claimable<'a>(
    snap: &'a Snapshot,
    agent: &str,
    now: Ts,
    id: &str,
    own_paths: bool,
) -> Result<&'a Todo> {
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
    if own_paths {
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
    Ok(cur)
}

/// Gives `t` its lease: renews `agent`'s live one, else grants a new one (and fence), naming
/// any expired lease it replaces; the journal's action and data.
fn lease(t: &mut Todo, agent: &str, now: Ts, ttl: Dur) -> Result<(Action, serde_json::Value)> {
    if let Some(l) = t.lease.as_mut().filter(|l| l.is_live(now)) {
        l.expires_at = now.add(ttl);
        let mut data = json!({"fence": t.fence, "expires_at": l.expires_at});
        if let Some(from) = l.handoff_from.take() {
            data["handoff_from"] = json!(from);
        }
        t.updated_at = now;
        return Ok((Action::TodoRenew, data));
    }
    let expired = t.lease.clone();
    grant(t, agent, now, ttl)?;
    Ok((Action::TodoClaim, claim_data(t, expired.as_deref())))
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
