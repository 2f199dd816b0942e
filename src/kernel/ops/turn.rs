//! A turn's two changes: its start (should-run, then the claim) and its end (evidence, done or
//! release, and one slot spent, keyed by the turn's id), each one transaction.

use serde_json::json;

use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::model::*;
use crate::kernel::ops::{
    Change, Update, Write, check_lease, claim, release, renew, spend, update,
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
/// names the turn). `turn` already spent in the window means the turn was recorded: nothing is
/// claimed. A live lease another running turn holds is never run a second time.
pub fn start_turn(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    ttl: Dur,
    turn: &str,
) -> Result<(Change, Start)> {
    if quota::has_turn(&snap.quota, &snap.config.quota, now, turn) {
        return Ok((Change::default(), Start::Replayed));
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
        _ => return Ok((Change::default(), Start::NotNow(Box::new(answer)))),
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
    if let Some(held) = slots_held(snap, now, &answer) {
        return Ok((Change::default(), Start::NotNow(Box::new(held))));
    }
    let (mut c, mut t) = claim(snap, agent, now, ttl, Some(&id))?;
    if let Some(l) = t.lease.as_mut() {
        l.turn = Some(turn.to_string());
    }
    for w in &mut c.writes {
        if let Write::Todo(w) = w
            && w.id == t.id
        {
            *w = t.clone();
        }
    }
    Ok((c, Start::Claimed(Box::new(t))))
}

/// A turn's slot is spent at its end, so turns running now (live leases naming a turn not yet
/// spent) hold one each: a new turn starts only when the window has a slot besides theirs.
/// Otherwise the answer becomes `throttled` (`turns_running`), with no retry time known.
fn slots_held(snap: &Snapshot, now: Ts, answer: &Answer) -> Option<Answer> {
    let running = snap
        .todos
        .values()
        .filter_map(|t| t.live_lease(now)?.turn.as_deref())
        .filter(|t| !quota::has_turn(&snap.quota, &snap.config.quota, now, t))
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

/// The todo whose live lease `turn` holds.
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
    /// The fence of the todo if the command itself closed it (it is archived now).
    pub closed_fence: Option<u64>,
}

/// What the end of a turn recorded.
#[derive(Debug, Clone)]
pub enum Ended {
    /// Evidence recorded; the todo is done (or rescheduled, if recurring).
    Done,
    /// Evidence recorded; the lease is given back.
    Released,
    /// Evidence recorded on a todo whose lease the command ended itself (done, cancelled,
    /// blocked, deferred or released under the turn's fence); nothing else changed.
    Closed,
    /// The lease was lost (reassigned, or expired): evidence refused, slot spent.
    Refused(Error),
    /// This turn id was recorded already: nothing recorded twice.
    Replayed,
}

/// Records a turn's end in one change: evidence under the turn's fence, done or release, and
/// one slot spent keyed by the turn's id. A lost lease refuses the evidence but spends the slot.
pub fn end_turn(snap: &Snapshot, agent: &str, now: Ts, end: TurnEnd) -> Result<(Change, Ended)> {
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
        Some(t) => match lapsed(t, agent, now, end.fence, &end.turn) {
            Some(live) => kept(&snap.after(&[Write::Todo(live)]), agent, now, end),
            None => kept(snap, agent, now, end),
        },
        None if end.closed_fence == Some(end.fence) => closed(agent, now, end),
        None => (Change::default(), Ended::Refused(gone(snap, &end.todo))),
    };
    c.writes.splice(0..0, work.writes);
    c.events.splice(0..0, work.events);
    c.owner |= work.owner;
    Ok((c, ended))
}

/// Renews a running turn's lease: live, or lapsed with no one claiming since (the fence did not
/// move). A lease taken over, given up or gone is an error, and the renewals stop.
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
    let (c, _) = match lapsed(t, agent, now, fence, turn) {
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

/// This turn's lease, lapsed (its renewals could not be written in time) with no one claiming
/// since, made live again for the record: the fence did not move, so the work is still the
/// current holder's. `None` for any other lease.
fn lapsed(t: &Todo, agent: &str, now: Ts, fence: u64, turn: &str) -> Option<Todo> {
    let l = t.lease.as_ref()?;
    let ours = l.holder == agent
        && l.fence == fence
        && t.fence == fence
        && l.turn.as_deref() == Some(turn);
    if !ours || l.is_live(now) {
        return None;
    }
    let mut live = t.clone();
    if let Some(l) = live.lease.as_mut() {
        l.expires_at = now.add(Dur(1));
    }
    Some(live)
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
    let u = Update {
        fence: Some(end.fence),
        evidence: vec![end.evidence],
        status: end.done.then_some(Status::Done),
        reason: None,
    };
    let (mut c, t) = update(snap, agent, now, &end.todo, u)?;
    if end.done {
        return Ok((c, Ended::Done));
    }
    let mut released = t;
    released.lease = None;
    for w in &mut c.writes {
        if let Write::Todo(t) = w
            && t.id == released.id
        {
            *t = released.clone();
        }
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
mod tests {
    use super::*;
    use crate::kernel::ops::{NewTodo, add_todo};

    const AGENT: &str = "a1";

    fn new_todo() -> NewTodo {
        NewTodo {
            id: "t-aaaaaa".into(),
            title: "work".into(),
            role: Role::Agent,
            priority: Priority::P2,
            depends_on: vec![],
            every: None,
            blocked_by_gate: None,
        }
    }

    fn world() -> (Snapshot, Ts) {
        let now = Ts(1_800_000_000_000);
        let mut snap = Snapshot::new(Config::new("g-test", "test", now));
        let (c, _) = add_todo(&snap, "me", now, new_todo()).unwrap();
        snap = snap.after(&c.writes);
        (snap, now)
    }

    fn started(snap: &Snapshot, now: Ts) -> (Snapshot, Todo) {
        let (c, s) = start_turn(snap, AGENT, now, Dur::from_mins(5), "u-1").unwrap();
        let Start::Claimed(t) = s else {
            panic!("not claimed: {s:?}")
        };
        (snap.after(&c.writes), *t)
    }

    fn end(t: &Todo, done: bool) -> TurnEnd {
        let e = Evidence::new(Ts(0), AGENT, None, EvidenceKind::Command, "ran".into());
        TurnEnd {
            todo: t.id.clone(),
            fence: t.fence,
            turn: "u-1".into(),
            evidence: e,
            done,
            closed_fence: None,
        }
    }

    fn kinds(c: &Change) -> Vec<&'static str> {
        c.writes
            .iter()
            .map(|w| match w {
                Write::Todo(_) => "todo",
                Write::Archive(_) => "archive",
                Write::Evidence(..) => "evidence",
                Write::Quota(_) => "quota",
                Write::Gate(_) => "gate",
                Write::Config(_) => "config",
            })
            .collect()
    }

    #[test]
    fn a_turn_claims_then_records_evidence_done_and_one_slot_together() {
        let (snap, now) = world();
        let (snap, t) = started(&snap, now);
        assert_eq!(t.fence, 1);
        let (c, ended) = end_turn(&snap, AGENT, now, end(&t, true)).unwrap();
        assert!(matches!(ended, Ended::Done));
        assert_eq!(kinds(&c), ["evidence", "archive", "quota"]);
        let after = snap.after(&c.writes);
        assert!(quota::has_turn(
            &after.quota,
            &after.config.quota,
            now,
            "u-1"
        ));
        // The same turn again records nothing, at its start or its end.
        let (c, ended) = end_turn(&after, AGENT, now, end(&t, true)).unwrap();
        assert!(matches!(ended, Ended::Replayed) && c.writes.is_empty());
        let (c, s) = start_turn(&after, AGENT, now, Dur::from_mins(5), "u-1").unwrap();
        assert!(matches!(s, Start::Replayed) && c.events.is_empty());
    }

    #[test]
    fn a_failed_turn_releases_the_lease() {
        let (snap, now) = world();
        let (snap, t) = started(&snap, now);
        let (c, ended) = end_turn(&snap, AGENT, now, end(&t, false)).unwrap();
        assert!(matches!(ended, Ended::Released));
        let after = snap.after(&c.writes);
        let t = &after.todos["t-aaaaaa"];
        assert!(t.lease.is_none() && t.status == Status::Open && t.fence == 1);
    }

    #[test]
    fn a_lease_taken_over_refuses_the_evidence_but_spends_the_slot() {
        let (snap, now) = world();
        let (mut snap, t) = started(&snap, now);
        let other = snap.todos.get_mut("t-aaaaaa").unwrap();
        other.fence = 2;
        other.lease.as_mut().unwrap().holder = "bob".into();
        let (c, ended) = end_turn(&snap, AGENT, now, end(&t, true)).unwrap();
        let Ended::Refused(e) = ended else {
            panic!("not refused")
        };
        assert_eq!(e.code, Code::StaleFence);
        assert_eq!(kinds(&c), ["quota"]);
    }

    #[test]
    fn a_todo_the_command_closed_itself_keeps_the_evidence() {
        let (snap, now) = world();
        let (mut snap, t) = started(&snap, now);
        snap.todos.clear();
        let mut e = end(&t, true);
        let (c, ended) = end_turn(&snap, AGENT, now, e.clone()).unwrap();
        assert!(matches!(ended, Ended::Refused(_)));
        assert_eq!(kinds(&c), ["quota"]);
        e.closed_fence = Some(t.fence);
        let (c, ended) = end_turn(&snap, AGENT, now, e).unwrap();
        assert!(matches!(ended, Ended::Closed));
        assert_eq!(kinds(&c), ["evidence", "quota"]);
    }

    #[test]
    fn turns_running_hold_their_slots_until_they_end() {
        let (mut snap, now) = world();
        let new = NewTodo {
            id: "t-bbbbbb".into(),
            ..new_todo()
        };
        let (c, _) = add_todo(&snap, "me", now, new).unwrap();
        snap = snap.after(&c.writes);
        snap.config.quota.slots = 1;
        let (snap, t) = started(&snap, now);
        // One slot, held by the running turn u-1: another agent's turn waits.
        let (c, s) = start_turn(&snap, "a2", now, Dur::from_mins(5), "u-2").unwrap();
        let Start::NotNow(a) = s else {
            panic!("a second turn started past the quota: {s:?}")
        };
        assert_eq!(
            (a.decision, a.reason),
            (Decision::Throttled, "turns_running")
        );
        assert!(c.writes.is_empty());
        // Once u-1 is recorded its slot is spent, and the quota says the rest.
        let (c, _) = end_turn(&snap, AGENT, now, end(&t, false)).unwrap();
        let after = snap.after(&c.writes);
        let (_, s) = start_turn(&after, "a2", now, Dur::from_mins(5), "u-2").unwrap();
        assert!(matches!(s, Start::NotNow(a) if a.reason == "quota_spent"));
    }

    #[test]
    fn a_todo_quarantined_during_the_turn_is_named_with_its_file() {
        let (snap, now) = world();
        let (mut snap, t) = started(&snap, now);
        snap.todos.clear();
        let p = crate::kernel::snapshot::Problem {
            file: ".loopx/todos/t-aaaaaa.toml".into(),
            line: Some(3),
            message: "bad".into(),
            code: Code::InvalidState,
            hint: None,
        };
        snap.quarantined.insert(t.id.clone(), p);
        let (_, ended) = end_turn(&snap, AGENT, now, end(&t, true)).unwrap();
        let Ended::Refused(e) = ended else {
            panic!("not refused")
        };
        assert!(e.message.contains("todos/t-aaaaaa.toml:3"), "{}", e.message);
        assert!(e.hint.is_some());
    }

    #[test]
    fn a_todo_the_command_blocked_itself_keeps_the_evidence() {
        let (snap, now) = world();
        let (snap, t) = started(&snap, now);
        let u = Update {
            fence: Some(t.fence),
            status: Some(Status::Blocked),
            reason: Some("needs a key".into()),
            ..Update::default()
        };
        let (c, _) = update(&snap, AGENT, now, &t.id, u).unwrap();
        let snap = snap.after(&c.writes);
        let (c, ended) = end_turn(&snap, AGENT, now, end(&t, true)).unwrap();
        assert!(matches!(ended, Ended::Closed), "{ended:?}");
        assert_eq!(kinds(&c), ["evidence", "quota"]);
        // Claimed again by someone else since: the fence moved, the evidence is refused.
        let mut moved = snap.clone();
        if let Some(x) = moved.todos.get_mut(&t.id) {
            x.fence += 1;
        }
        let (_, ended) = end_turn(&moved, AGENT, now, end(&t, true)).unwrap();
        assert!(matches!(ended, Ended::Refused(_)));
    }

    #[test]
    fn a_todo_made_the_owners_during_the_turn_is_given_back_unrecorded() {
        let (snap, now) = world();
        let (mut snap, t) = started(&snap, now);
        if let Some(x) = snap.todos.get_mut(&t.id) {
            x.role = Role::User;
        }
        let (c, ended) = end_turn(&snap, AGENT, now, end(&t, true)).unwrap();
        assert!(!c.owner, "an agent's turn made an owner change");
        assert!(
            matches!(&ended, Ended::Refused(e) if e.code == Code::Denied),
            "{ended:?}"
        );
        assert_eq!(kinds(&c), ["todo", "quota"]);
        let after = snap.after(&c.writes);
        assert!(after.todos[&t.id].lease.is_none());
    }

    #[test]
    fn a_turn_its_command_spent_itself_is_still_recorded_once() {
        let (snap, now) = world();
        let (snap, t) = started(&snap, now);
        let (c, _) = spend(&snap, AGENT, now, 1, Some("u-1".into()), None, None).unwrap();
        let snap = snap.after(&c.writes);
        let (c, ended) = end_turn(&snap, AGENT, now, end(&t, false)).unwrap();
        assert!(matches!(ended, Ended::Released), "{ended:?}");
        assert_eq!(kinds(&c), ["evidence", "todo"], "no second spend");
        let after = snap.after(&c.writes);
        let (c, ended) = end_turn(&after, AGENT, now, end(&t, false)).unwrap();
        assert!(matches!(ended, Ended::Replayed) && c.writes.is_empty());
    }

    #[test]
    fn a_lease_that_lapsed_with_no_one_claiming_still_takes_the_record() {
        let (snap, now) = world();
        let (snap, t) = started(&snap, now);
        // Five minutes of lease, and the renewals never got through: the end comes later.
        let later = now.add(Dur::from_mins(10));
        let (c, ended) = end_turn(&snap, AGENT, later, end(&t, true)).unwrap();
        assert!(matches!(ended, Ended::Done), "{ended:?}");
        assert_eq!(kinds(&c), ["evidence", "archive", "quota"]);
        // Claimed by another agent meanwhile: the fence moved, the record is refused.
        let (c, _) = claim(&snap, "bob", later, Dur::from_mins(5), Some(&t.id)).unwrap();
        let taken = snap.after(&c.writes);
        let (_, ended) = end_turn(&taken, AGENT, later, end(&t, true)).unwrap();
        assert!(
            matches!(&ended, Ended::Refused(e) if e.code == Code::StaleFence),
            "{ended:?}"
        );
    }

    #[test]
    fn a_running_turns_lapsed_lease_is_renewed_while_no_one_claimed() {
        let (snap, now) = world();
        let (snap, t) = started(&snap, now);
        let later = now.add(Dur::from_mins(10));
        let ttl = Dur::from_mins(5);
        let c = renew_turn(&snap, AGENT, later, ttl, (&t.id, t.fence, "u-1")).unwrap();
        let after = snap.after(&c.writes);
        assert!(after.todos[&t.id].live_lease(later).is_some());
        // Another turn's lease, or a moved fence, is not this turn's to renew.
        assert!(renew_turn(&snap, AGENT, later, ttl, (&t.id, t.fence, "u-2")).is_err());
        let (c, _) = claim(&snap, "bob", later, ttl, Some(&t.id)).unwrap();
        let taken = snap.after(&c.writes);
        let e = renew_turn(&taken, AGENT, later, ttl, (&t.id, t.fence, "u-1")).unwrap_err();
        assert_eq!(e.code, Code::StaleFence);
    }

    #[test]
    fn should_run_not_run_claims_nothing() {
        let (mut snap, now) = world();
        snap.config.goal.status = GoalStatus::Paused;
        let (c, s) = start_turn(&snap, AGENT, now, Dur::from_mins(5), "u-2").unwrap();
        assert!(matches!(s, Start::NotNow(a) if a.decision == Decision::Paused));
        assert!(c.writes.is_empty() && c.events.is_empty());
    }
}
