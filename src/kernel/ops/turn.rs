//! A turn's two changes: its start (should-run, then the claim) and its end (evidence, done or
//! release, and one slot spent, keyed by the turn's id), each one transaction.

use serde_json::json;

use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::model::*;
use crate::kernel::ops::{Change, Update, Write, check_lease, claim, spend, update};
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
        .hint("wait for it to end; a turn id names one turn"));
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
    /// Evidence recorded on a todo the command closed itself.
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
    if !recorded {
        return Ok((Change::default(), Ended::Replayed));
    }
    let (work, ended) = match snap.todos.get(&end.todo) {
        Some(t) => match check_lease(t, agent, now, Some(end.fence)) {
            Ok(()) => record(snap, agent, now, end)?,
            Err(e) => (Change::default(), Ended::Refused(e)),
        },
        None if end.closed_fence == Some(end.fence) => closed(agent, now, end),
        None => (Change::default(), Ended::Refused(gone(&end.todo))),
    };
    c.writes.splice(0..0, work.writes);
    c.events.splice(0..0, work.events);
    c.owner |= work.owner;
    Ok((c, ended))
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

/// The evidence of a turn whose command closed its own todo under the turn's fence.
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

fn gone(id: &str) -> Error {
    Error::new(
        Code::LeaseConflict,
        format!("{id} was closed during the turn by someone else"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ops::{NewTodo, add_todo};

    const AGENT: &str = "a1";

    fn world() -> (Snapshot, Ts) {
        let now = Ts(1_800_000_000_000);
        let mut snap = Snapshot::new(Config::new("g-test", "test", now));
        let new = NewTodo {
            id: "t-aaaaaa".into(),
            title: "work".into(),
            role: Role::Agent,
            priority: Priority::P2,
            depends_on: vec![],
            every: None,
            blocked_by_gate: None,
        };
        let (c, _) = add_todo(&snap, "me", now, new).unwrap();
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
    fn should_run_not_run_claims_nothing() {
        let (mut snap, now) = world();
        snap.config.goal.status = GoalStatus::Paused;
        let (c, s) = start_turn(&snap, AGENT, now, Dur::from_mins(5), "u-2").unwrap();
        assert!(matches!(s, Start::NotNow(a) if a.decision == Decision::Paused));
        assert!(c.writes.is_empty() && c.events.is_empty());
    }
}
