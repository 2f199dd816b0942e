//! A turn's two changes: its start (should-run, then the claim) and its end (evidence, done or
//! release, and one slot spent, keyed by the turn's id), each one transaction.

use serde_json::json;

use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::model::*;
use crate::kernel::ops::{
    Change, ClaimOpts, Progress, Update, Write, check_lease, claim_with, release, renew, spend,
    update,
};
use crate::kernel::quota;
use crate::kernel::should_run::{self, Answer, Decision};
use crate::kernel::time::{Dur, Ts};

/// How a turn's start went.
#[derive(Debug, Clone)]
pub enum Start {
    /// should-run said not now: its answer.
    NotNow(Box<Answer>),
    /// This turn id was recorded already: nothing runs again.
    Replayed,
    /// The todo claimed (or renewed) for this turn.
    Claimed(Box<Todo>),
}

/// Asks should-run for `agent` and, when it says run, claims its todo for `turn` (the lease
/// names the turn): [`turn_todo`], then the claim.
pub fn start_turn(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    ttl: Dur,
    (turn, base): (&str, Option<Base>),
) -> Result<(Change, Start)> {
    let id = match turn_todo(snap, agent, now, turn)? {
        Ok(id) => id,
        Err(s) => return Ok((Change::default(), s)),
    };
    let want = ClaimOpts {
        id: Some(id),
        ttl: Some(ttl),
        turn: Some((turn.to_string(), base)),
        ..ClaimOpts::default()
    };
    let (c, t) = claim_with(snap, agent, now, &want)?;
    Ok((c, Start::Claimed(Box::new(t))))
}

/// The todo a turn of `agent`'s claims now, or how the turn starts without one. `turn` already
/// spent by `agent` in the window means the turn was recorded: nothing is claimed (another
/// agent's spend under the same id is another turn). A live lease another running turn holds
/// is never run a second time.
pub fn turn_todo(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    turn: &str,
) -> Result<std::result::Result<String, Start>> {
    if quota::has_turn(&snap.quota, &snap.config.quota, now, agent, turn) {
        return Ok(Err(Start::Replayed));
    }
    if let Some(t) = running(snap, now, turn) {
        return Err(Error::new(
            Code::LeaseConflict,
            format!("turn {turn} is running already, on {}", t.id),
        )
        .hint(format!(
            "wait for it to end; if its runner is gone, `loopx --agent {} todo release {}` frees it",
            t.lease.as_ref().map_or("", |l| l.holder.as_str()),
            t.id
        )));
    }
    let answer = should_run::decide(snap, agent, now);
    let id = match (&answer.decision, &answer.todo) {
        (Decision::Run, Some(t)) => t.id.clone(),
        _ => return Ok(Err(Start::NotNow(Box::new(answer)))),
    };
    if let Some(l) = snap.todos.get(&id).and_then(|t| t.live_lease(now))
        && let Some(other) = &l.turn
    {
        return Err(Error::new(
            Code::LeaseConflict,
            format!(
                "{id} is held by {agent}'s turn {other}, still running until {}",
                l.expires_at
            ),
        )
        .hint(format!(
            "one runner per agent id; if that runner is gone, `loopx todo release {id}`"
        )));
    }
    match slots_held(snap, now, &answer) {
        Some(held) => Ok(Err(Start::NotNow(Box::new(held)))),
        None => Ok(Ok(id)),
    }
}

/// A turn's slot is spent at its end, so turns running now (live leases naming a turn not yet
/// spent) hold one each: a new turn starts only when the window has a slot besides theirs.
/// Otherwise the answer becomes `throttled` (`turns_running`), with no retry time known.
fn slots_held(snap: &Snapshot, now: Ts, answer: &Answer) -> Option<Answer> {
    let running = snap
        .todos
        .values()
        .filter_map(|t| t.live_lease(now))
        .filter_map(|l| Some((l.holder.as_str(), l.turn.as_deref()?)))
        .filter(|(a, t)| !quota::has_turn(&snap.quota, &snap.config.quota, now, a, t))
        .count() as u64;
    if running == 0 || answer.quota.used + running < u64::from(answer.quota.limit) {
        return None;
    }
    Some(Answer {
        should_run: false,
        decision: Decision::Throttled,
        reason: "turns_running",
        todo: None,
        retry_after_s: None,
        ..answer.clone()
    })
}

/// The todo whose live lease `turn` holds (whichever agent's: one runner per id at a time).
fn running<'a>(snap: &'a Snapshot, now: Ts, turn: &str) -> Option<&'a Todo> {
    snap.todos
        .values()
        .find(|t| t.live_lease(now).and_then(|l| l.turn.as_deref()) == Some(turn))
}

/// What a turn that ran leaves to record.
#[derive(Debug, Clone)]
pub struct TurnEnd {
    /// The todo it ran for.
    pub todo: String,
    /// The fence it was granted.
    pub fence: u64,
    /// The turn's id.
    pub turn: String,
    /// The command's evidence.
    pub evidence: Evidence,
    /// Mark the todo done (the command succeeded and the runner was asked to).
    pub done: bool,
    /// The run of the check that proves the todo done, when it has one.
    pub check: Option<Evidence>,
    /// The fence of the todo if the command itself closed it (it is archived now).
    pub closed_fence: Option<u64>,
    /// What the breaker needs: whether the turn progressed, and a gate id should it park.
    pub progress: Progress,
}

/// What the end of a turn recorded.
#[derive(Debug, Clone)]
pub enum Ended {
    /// Evidence recorded; the todo is done (or rescheduled, if recurring).
    Done,
    /// Evidence recorded; the lease is given back.
    Released,
    /// The todo's check failed: its run recorded, the todo still claimed (the lease kept, no
    /// longer naming the turn), so the same agent goes on with it.
    Kept,
    /// Evidence recorded on a todo whose lease the command ended itself (done, cancelled,
    /// blocked, deferred or released under the turn's fence); nothing else changed.
    Closed,
    /// The lease was lost (reassigned, or expired): evidence refused, slot spent.
    Refused(Error),
    /// This turn id was recorded already: nothing recorded twice.
    Replayed,
}

impl Ended {
    /// Its word in answers: `done`, `released`, `kept`, `closed`, `refused`, `replayed`.
    pub fn word(&self) -> &'static str {
        match self {
            Ended::Done => "done",
            Ended::Released => "released",
            Ended::Kept => "kept",
            Ended::Closed => "closed",
            Ended::Refused(_) => "refused",
            Ended::Replayed => "replayed",
        }
    }
}

/// Records a turn's end in one change: evidence under the turn's fence, done or release, and
/// one slot spent keyed by the turn's id. A lost lease refuses the evidence but spends the slot.
pub fn end_turn(snap: &Snapshot, agent: &str, now: Ts, end: TurnEnd) -> Result<(Change, Ended)> {
    if let Some(e) = not_theirs(snap, agent, &end) {
        return Err(e);
    }
    let (mut c, recorded) = spend(snap, agent, now, 1, Some(end.turn.clone()), None, None)?;
    // Spent already, by this turn's record or by its command itself (`quota spend-slot --turn
    // $LOOPX_TURN`): a lease still naming the turn says the record has not been made.
    let unrecorded = snap
        .todos
        .get(&end.todo)
        .and_then(|t| t.lease.as_ref())
        .is_some_and(|l| l.fence == end.fence && l.turn.as_deref() == Some(end.turn.as_str()));
    if !recorded && !unrecorded {
        return Ok((Change::default(), Ended::Replayed));
    }
    let (work, ended) = match snap.todos.get(&end.todo) {
        // The command gave its own lease up (blocked, deferred or released its todo): no one
        // has claimed since, so the evidence is still under the current fence.
        Some(t) if t.role == Role::Agent && t.lease.is_none() && t.fence == end.fence => {
            closed(agent, now, end)
        }
        Some(t) => match lapsed(snap, t, agent, now, (end.fence, &end.turn)) {
            Some(live) => kept(&snap.after(&[Write::Todo(live)]), agent, now, end),
            None => match reserved_since(snap, t, agent, now).filter(|_| t.fence == end.fence) {
                Some(e) => (Change::default(), Ended::Refused(e)),
                None => kept(snap, agent, now, end),
            },
        },
        None if end.closed_fence == Some(end.fence) => closed(agent, now, end),
        None => (Change::default(), Ended::Refused(gone(snap, &end.todo))),
    };
    c.writes.splice(0..0, work.writes);
    c.events.splice(0..0, work.events);
    c.owner |= work.owner;
    Ok((c, ended))
}

/// A fence is granted once: a lease under the turn's fence held by another agent means the
/// turn was never this agent's, so nothing is recorded or spent for it.
fn not_theirs(snap: &Snapshot, agent: &str, end: &TurnEnd) -> Option<Error> {
    let t = snap.todos.get(&end.todo)?;
    let l = t.lease.as_ref()?;
    (t.fence == end.fence && l.fence == end.fence && l.holder != agent).then(|| {
        Error::new(
            Code::LeaseConflict,
            format!(
                "fence {} of {} is {}'s, not {agent}'s",
                end.fence, end.todo, l.holder
            ),
        )
        .hint("end only your own turn, with the --todo and --fence your `turn start` gave")
    })
}

/// Renews a running turn's lease: live, or lapsed with no one claiming since (the fence did not
/// move) and no other agent's live reservation overlapping its own. A lease taken over, given
/// up, gone or lapsed under another's reservation is an error, and the renewals stop.
pub fn renew_turn(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    ttl: Dur,
    (id, fence, turn): (&str, u64, &str),
) -> Result<Change> {
    let t = snap
        .todos
        .get(id)
        .ok_or_else(|| Error::new(Code::NotFound, format!("{id} left the working set")))?;
    if t.fence != fence {
        return Err(Error::new(Code::StaleFence, "the lease was taken over"));
    }
    if let Some(e) = reserved_since(snap, t, agent, now) {
        return Err(e);
    }
    let (c, _) = match lapsed(snap, t, agent, now, (fence, turn)) {
        Some(live) => renew(&snap.after(&[Write::Todo(live)]), agent, now, ttl, id)?,
        None => renew(snap, agent, now, ttl, id)?,
    };
    Ok(c)
}

/// The record of a turn whose todo is in the working set: under its live lease, else refused.
fn kept(snap: &Snapshot, agent: &str, now: Ts, end: TurnEnd) -> (Change, Ended) {
    let Some(t) = snap.todos.get(&end.todo) else {
        return (Change::default(), Ended::Refused(gone(snap, &end.todo)));
    };
    match check_lease(t, agent, now, Some(end.fence)) {
        Ok(()) if t.role == Role::User => given_back(snap, agent, now, t, owners(&t.id)),
        Ok(()) => match record(snap, agent, now, end.clone()) {
            Ok(r) => r,
            Err(e) => given_back(snap, agent, now, t, e),
        },
        Err(e) => (Change::default(), Ended::Refused(e)),
    }
}

/// This turn's lease, lapsed (its renewals could not be written in time, or its process was
/// stopped) with no one claiming since, made live again for the record: the fence did not move,
/// so the work is still the current holder's. `None` for any other lease, and for one whose
/// reservation another agent's live lease overlaps now (taken while it lapsed: the lease is lost).
fn lapsed(
    snap: &Snapshot,
    t: &Todo,
    agent: &str,
    now: Ts,
    (fence, turn): (u64, &str),
) -> Option<Todo> {
    let l = t.lease.as_ref()?;
    let ours = l.holder == agent
        && l.fence == fence
        && t.fence == fence
        && l.turn.as_deref() == Some(turn);
    if !ours || l.is_live(now) || reserved_since(snap, t, agent, now).is_some() {
        return None;
    }
    let mut live = t.clone();
    if let Some(l) = live.lease.as_mut() {
        l.expires_at = now.add(Dur(1));
    }
    Some(live)
}

/// The loss of `agent`'s lapsed lease on `t` to another agent's live reservation that overlaps
/// its own (made while it lapsed: a live lease's reservation is never overlapped by another's).
fn reserved_since(snap: &Snapshot, t: &Todo, agent: &str, now: Ts) -> Option<Error> {
    let l = t
        .lease
        .as_ref()
        .filter(|l| l.holder == agent && !l.is_live(now))?;
    let b = crate::kernel::reserve::conflict(snap, &t.id, agent, &l.paths, now)?;
    Some(
        Error::new(
            Code::LeaseConflict,
            format!(
                "your lease on {} lapsed at {}, and {}",
                t.id,
                l.expires_at,
                b.describe()
            ),
        )
        .hint(format!(
            "stop work on {}: its files are another agent's now; claim it again once they are free",
            t.id
        )),
    )
}

/// A record the rules refuse though the lease held: the evidence is refused, the lease given
/// back, and the slot still spent (the turn happened).
fn given_back(snap: &Snapshot, agent: &str, now: Ts, t: &Todo, e: Error) -> (Change, Ended) {
    let c = release(snap, agent, now, &t.id)
        .map(|(c, _)| c)
        .unwrap_or_default();
    (c, Ended::Refused(e))
}

fn owners(id: &str) -> Error {
    Error::new(
        Code::Denied,
        format!("{id} became a user todo during the turn; only the owner records on it"),
    )
    .hint(format!(
        "the owner records the work with `loopx todo update {id}`; the turn's slot is spent"
    ))
}

/// The evidence and the status change of a turn that kept its lease.
fn record(snap: &Snapshot, agent: &str, now: Ts, end: TurnEnd) -> Result<(Change, Ended)> {
    let kept = !end.done && end.check.is_some();
    let mut evidence = vec![end.evidence];
    evidence.extend(end.check);
    let u = Update {
        fence: Some(end.fence),
        evidence,
        status: end.done.then_some(Status::Done),
        reason: None,
    };
    let (mut c, t) = update(snap, agent, now, &end.todo, u)?;
    let mut released = t;
    if end.done {
        // Done is progress: a recurring todo starts its next round with no stall.
        released.stall = None;
    } else {
        match released.lease.as_mut() {
            Some(l) if kept => l.turn = None,
            _ => released.lease = None,
        }
        super::breaker::after_turn(snap, agent, now, &mut released, &end.progress, &mut c);
    }
    for w in &mut c.writes {
        if let Write::Todo(t) = w
            && t.id == released.id
        {
            *t = released.clone();
        }
    }
    if end.done {
        return Ok((c, Ended::Done));
    }
    if kept {
        return Ok((c, Ended::Kept));
    }
    c.events.push(EventDraft {
        at: now,
        actor: agent.to_string(),
        action: Action::TodoRelease,
        target: released.id.clone(),
        data: json!({"fence": end.fence, "turn": end.turn}),
    });
    Ok((c, Ended::Released))
}

/// The evidence of a turn whose command ended its own lease under the turn's fence.
fn closed(agent: &str, now: Ts, end: TurnEnd) -> (Change, Ended) {
    let mut c = Change::default();
    c.events.push(EventDraft {
        at: now,
        actor: agent.to_string(),
        action: Action::TodoUpdate,
        target: end.todo.clone(),
        data: json!({"fence": end.fence, "evidence": 1, "turn": end.turn}),
    });
    c.writes.push(Write::Evidence(end.todo, end.evidence));
    (c, Ended::Closed)
}

/// Why a turn's todo is not in the working set at its end: its file broke, or it went.
fn gone(snap: &Snapshot, id: &str) -> Error {
    if let Some(p) = snap.quarantined.get(id) {
        let at = p.line.map(|l| format!(":{l}")).unwrap_or_default();
        return Error::new(
            Code::LeaseConflict,
            format!(
                "{}{at} became unreadable during the turn: {}",
                p.file, p.message
            ),
        )
        .hint(
            "fix or restore the file (`loopx doctor` names the problem); the turn's slot is spent",
        );
    }
    Error::new(
        Code::LeaseConflict,
        format!("{id} was closed or removed during the turn by someone else"),
    )
    .hint(format!(
        "see what happened with `loopx log`; `loopx todo show {id}` shows it if it was archived"
    ))
}

#[cfg(test)]
mod tests;
