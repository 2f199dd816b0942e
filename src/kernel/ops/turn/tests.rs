//! Tests of a turn's start and end.

use super::*;
use crate::kernel::ops::{NewTodo, add_todo, claim};

const AGENT: &str = "a1";

fn new_todo() -> NewTodo {
    NewTodo::new("t-aaaaaa", "work")
}

fn world() -> (Snapshot, Ts) {
    let now = Ts(1_800_000_000_000);
    let mut snap = Snapshot::new(Config::new("g-test", "test", now));
    let (c, _) = add_todo(&snap, "me", now, new_todo()).unwrap();
    snap = snap.after(&c.writes);
    (snap, now)
}

fn started(snap: &Snapshot, now: Ts) -> (Snapshot, Todo) {
    let (c, s) = start_turn(snap, AGENT, now, Dur::from_mins(5), ("u-1", None)).unwrap();
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
        check: None,
        closed_fence: None,
        progress: Default::default(),
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
            Write::Agent(_) => "agent",
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
        AGENT,
        "u-1"
    ));
    // The same turn again records nothing, at its start or its end.
    let (c, ended) = end_turn(&after, AGENT, now, end(&t, true)).unwrap();
    assert!(matches!(ended, Ended::Replayed) && c.writes.is_empty());
    let (c, s) = start_turn(&after, AGENT, now, Dur::from_mins(5), ("u-1", None)).unwrap();
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
    let new = NewTodo::new("t-bbbbbb", "work");
    let (c, _) = add_todo(&snap, "me", now, new).unwrap();
    snap = snap.after(&c.writes);
    snap.config.quota.slots = 1;
    let (snap, t) = started(&snap, now);
    // One slot, held by the running turn u-1: another agent's turn waits.
    let (c, s) = start_turn(&snap, "a2", now, Dur::from_mins(5), ("u-2", None)).unwrap();
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
    let (_, s) = start_turn(&after, "a2", now, Dur::from_mins(5), ("u-2", None)).unwrap();
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
fn a_lapsed_lease_is_lost_to_a_reservation_made_meanwhile() {
    let (mut snap, now) = world();
    let (c, _) = add_todo(&snap, "me", now, NewTodo::new("t-bbbbbb", "more")).unwrap();
    snap = snap.after(&c.writes);
    let mut t = snap.todos["t-aaaaaa"].clone();
    t.paths = vec!["src/**".into()];
    snap = snap.after(&[Write::Todo(t)]);
    let (snap, t) = started(&snap, now);
    let later = now.add(Dur::from_mins(10));
    let ttl = Dur::from_mins(5);
    // While the lease lapsed, bob reserved files it reserves.
    let want = crate::kernel::ops::ClaimOpts {
        id: Some("t-bbbbbb".into()),
        ttl: Some(ttl),
        paths: Some(vec!["src/store/**".to_string()]),
        ..Default::default()
    };
    let (c, _) = crate::kernel::ops::claim_with(&snap, "bob", later, &want).unwrap();
    let taken = snap.after(&c.writes);
    let e = renew_turn(&taken, AGENT, later, ttl, (&t.id, t.fence, "u-1")).unwrap_err();
    assert_eq!(e.code, Code::LeaseConflict, "{e:?}");
    let (_, ended) = end_turn(&taken, AGENT, later, end(&t, false)).unwrap();
    assert!(
        matches!(&ended, Ended::Refused(e) if e.message.contains("lapsed")),
        "{ended:?}"
    );
    // Once bob's reservation is gone, nothing newer holds the files: the lease comes back.
    let c = renew_turn(&snap, AGENT, later, ttl, (&t.id, t.fence, "u-1")).unwrap();
    assert!(
        snap.after(&c.writes).todos[&t.id]
            .live_lease(later)
            .is_some()
    );
}

#[test]
fn should_run_not_run_claims_nothing() {
    let (mut snap, now) = world();
    snap.config.goal.status = GoalStatus::Paused;
    let (c, s) = start_turn(&snap, AGENT, now, Dur::from_mins(5), ("u-2", None)).unwrap();
    assert!(matches!(s, Start::NotNow(a) if a.decision == Decision::Paused));
    assert!(c.writes.is_empty() && c.events.is_empty());
}

#[test]
fn another_agents_fence_records_and_spends_nothing() {
    let (snap, now) = world();
    let (snap, t) = started(&snap, now);
    let e = end_turn(&snap, "mallory", now, end(&t, true)).unwrap_err();
    assert_eq!(e.code, Code::LeaseConflict);
}

#[test]
fn a_claim_names_its_turn_reservation_and_worktree_in_one_change() {
    let (snap, now) = world();
    let want = crate::kernel::ops::ClaimOpts {
        ttl: Some(Dur::from_mins(5)),
        paths: Some(vec!["./src/**".into()]),
        worktree: true,
        turn: Some(("u-9".into(), None)),
        ..Default::default()
    };
    let (c, t) = crate::kernel::ops::claim_with(&snap, AGENT, now, &want).unwrap();
    let l = t.lease.as_ref().unwrap();
    assert_eq!(l.paths, ["src/**"]);
    assert_eq!(l.worktree.as_deref(), Some(".loopx/worktrees/t-aaaaaa"));
    assert_eq!(l.turn.as_deref(), Some("u-9"));
    assert!(matches!(&c.writes[..], [Write::Todo(w)] if w == &t));
    let keys: Vec<&str> = c.events[0]
        .data
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "fence",
            "expires_at",
            "reclaimed_from",
            "turn",
            "paths",
            "worktree"
        ]
    );
}
