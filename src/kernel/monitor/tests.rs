use proptest::prelude::*;

use super::*;
use crate::kernel::action::Action;
use crate::kernel::limits;
use crate::kernel::model::{Check, Config, Extra, Lease, Priority};
use crate::kernel::ops::{self, Ran, Recorded, Write};
use crate::kernel::readiness;
use crate::kernel::seal::Seal;
use crate::kernel::should_run;

const T0: Ts = Ts(1_800_000_000_000);
const HOUR: Dur = Dur(3_600_000);

fn config() -> Config {
    toml::from_str(
        "[goal]\nid = \"goal-aaaaaa\"\nobjective = \"o\"\nstatus = \"active\"\n\
         created_at = \"2020-01-01T00:00:00Z\"\nupdated_at = \"2020-01-01T00:00:00Z\"\n",
    )
    .unwrap()
}

fn todo(id: &str, every: Option<Dur>) -> Todo {
    let mut t: Todo = toml::from_str(
        "id = \"t-aaaaaa\"\ntitle = \"t\"\nstatus = \"open\"\ncreated_by = \"a\"\n\
         created_at = \"2020-01-01T00:00:00Z\"\nupdated_at = \"2020-01-01T00:00:00Z\"\n",
    )
    .unwrap();
    t.id = id.into();
    t.created_at = T0;
    t.every = every;
    t
}

fn with_check(mut t: Todo, cmd: &str) -> Todo {
    t.check = Some(Box::new(Check {
        command: cmd.into(),
        proposed_by: "agent-a".into(),
        proposed_at: T0,
        last_hash: None,
        last_run_at: None,
        last_exit: None,
        extra: Extra::new(),
    }));
    t
}

fn snap(todos: Vec<Todo>) -> Snapshot {
    let mut s = Snapshot::new(config());
    for t in todos {
        s.todos.insert(t.id.clone(), t);
    }
    s.seal = Some(Seal::default());
    s
}

fn approve(s: &mut Snapshot, id: &str) {
    let p = crate::kernel::monitor::purpose_of(&s.todos[id]);
    let (c, _) = ops::approve_check(s, "owner", T0, id, None, p).unwrap();
    assert!(c.owner, "approval is the owner's change");
    if let Some(seal) = s.seal.as_mut() {
        seal.apply_check_events(&c.events);
    }
}

fn ran(s: &Snapshot, id: &str, out: &str) -> Ran {
    let c = s.todos[id].check.as_ref().unwrap();
    Ran {
        command_sha: sha256_hex(c.command.as_bytes()),
        seen_last_run: c.last_run_at,
        exit: 0,
        timed_out: false,
        hash: result_hash(0, false, out.as_bytes()),
        tail: out.into(),
        duration: Dur(5),
    }
}

#[test]
fn a_never_done_monitor_is_due_at_once_and_overdue_after_one_period() {
    let t = todo("t-aaaaaa", Some(HOUR));
    assert!(is_due(&t, T0));
    assert_eq!(
        overdue(&t, T0.add(HOUR)),
        None,
        "exactly one period is not late"
    );
    assert_eq!(overdue(&t, T0.add(Dur(HOUR.0 + 1))), Some(Dur(HOUR.0 + 1)));
    let mut done = t.clone();
    done.next_due_at = Some(T0.add(HOUR));
    assert!(!is_due(&done, T0));
    assert_eq!(overdue(&done, T0.add(Dur(2 * HOUR.0))), None);
    assert!(overdue(&done, T0.add(Dur(2 * HOUR.0 + 1))).is_some());
    let mut blocked = t.clone();
    blocked.status = Status::Blocked;
    assert_eq!(overdue(&blocked, T0.add(Dur::from_days(9))), None);
    assert_eq!(
        overdue(&todo("t-bbbbbb", None), T0.add(Dur::from_days(9))),
        None
    );
}

#[test]
fn a_due_monitor_is_picked_before_other_work_of_its_priority_only() {
    let mut plain = todo("t-aaaaaa", None);
    plain.created_at = Ts(T0.0 - 1000);
    let mon = todo("t-bbbbbb", Some(HOUR));
    let mut high = todo("t-cccccc", None);
    high.priority = Priority::P1;
    high.created_at = T0.add(HOUR);
    let s = snap(vec![plain.clone(), mon.clone()]);
    assert_eq!(
        readiness::best(&s, "a", T0).map(|t| t.id.as_str()),
        Some("t-bbbbbb")
    );
    let s = snap(vec![plain, mon, high]);
    assert_eq!(
        readiness::best(&s, "a", T0).map(|t| t.id.as_str()),
        Some("t-cccccc")
    );
    let order: Vec<&str> = readiness::ready(&s, "a", T0)
        .iter()
        .map(|t| t.id.as_str())
        .collect();
    assert_eq!(order, ["t-cccccc", "t-bbbbbb", "t-aaaaaa"]);
}

#[test]
fn should_run_lists_overdue_ids_only_when_there_are_some() {
    let mut ts: Vec<Todo> = (0..5)
        .map(|i| todo(&format!("t-aaaaa{i}"), Some(HOUR)))
        .collect();
    ts[2].created_at = Ts(T0.0 - 10 * HOUR.0);
    let s = snap(ts);
    let a = should_run::decide(&s, "a", Ts(T0.0 - 9 * HOUR.0));
    assert!(a.overdue.is_empty());
    let json = serde_json::to_string(&a).unwrap();
    assert!(!json.contains("overdue"), "{json}");
    let a = should_run::decide(&s, "a", T0.add(Dur(3 * HOUR.0)));
    assert_eq!(a.overdue.len(), MAX_OVERDUE_LISTED);
    assert_eq!(a.overdue[0], "t-aaaaa2", "the latest first");
    assert!(serde_json::to_string(&a).unwrap().len() < 1024);
}

#[test]
fn only_the_sealed_text_is_approved() {
    let mut s = snap(vec![with_check(todo("t-aaaaaa", Some(HOUR)), "echo hi")]);
    let t = s.todos["t-aaaaaa"].clone();
    assert_eq!(approval(&s, &t), Approval::NotApproved);
    assert!(matches!(step(&s, &t, T0), Some(Step::Skip(_))));
    approve(&mut s, "t-aaaaaa");
    assert_eq!(approval(&s, &t), Approval::Approved);
    assert_eq!(step(&s, &t, T0), Some(Step::Run));
    let mut edited = t.clone();
    if let Some(c) = edited.check.as_mut() {
        c.command.push(' ');
    }
    assert_eq!(approval(&s, &edited), Approval::Changed);
    let (c, _) = ops::revoke_check(&s, "owner", T0, "t-aaaaaa").unwrap();
    assert!(c.owner);
    if let Some(seal) = s.seal.as_mut() {
        seal.apply_check_events(&c.events);
    }
    assert_eq!(approval(&s, &t), Approval::NotApproved);
    s.seal = None;
    assert_eq!(approval(&s, &t), Approval::NoSeal);
}

#[test]
fn approval_with_an_expected_sha_refuses_another_text() {
    let s = snap(vec![with_check(todo("t-aaaaaa", Some(HOUR)), "echo hi")]);
    let sha = sha256_hex(b"echo hi");
    assert!(
        ops::approve_check(
            &s,
            "owner",
            T0,
            "t-aaaaaa",
            Some(&sha[..16]),
            Purpose::Watch
        )
        .is_ok()
    );
    let e = ops::approve_check(
        &s,
        "owner",
        T0,
        "t-aaaaaa",
        Some("deadbeefdeadbeef"),
        Purpose::Watch,
    )
    .unwrap_err();
    assert_eq!(e.code.exit_code(), 4);
    for short in ["", &sha[..8], &sha[..15]] {
        let e = ops::approve_check(&s, "owner", T0, "t-aaaaaa", Some(short), Purpose::Watch)
            .unwrap_err();
        assert_eq!(e.code.exit_code(), 2, "a too short prefix proves nothing");
    }
    let e = ops::approve_check(
        &s,
        "owner",
        T0,
        "t-aaaaaa",
        Some("not hex at all!!"),
        Purpose::Watch,
    )
    .unwrap_err();
    assert_eq!(e.code.exit_code(), 2);
}

#[test]
fn a_proposal_needs_a_recurring_todo_and_a_bounded_command() {
    let s = snap(vec![todo("t-aaaaaa", None), todo("t-bbbbbb", Some(HOUR))]);
    assert_eq!(
        ops::propose_check(&s, "a", T0, "t-aaaaaa", "true", true)
            .unwrap_err()
            .code
            .exit_code(),
        2
    );
    let long = "x".repeat(limits::CHECK_COMMAND_MAX + 1);
    assert!(ops::propose_check(&s, "a", T0, "t-bbbbbb", &long, true).is_err());
    assert!(ops::propose_check(&s, "a", T0, "t-bbbbbb", "a\0b", true).is_err());
    assert!(ops::propose_check(&s, "a", T0, "t-bbbbbb", "  ", true).is_err());
    let (c, t) = ops::propose_check(&s, "a", T0, "t-bbbbbb", "echo hi", true).unwrap();
    assert!(!c.owner);
    assert_eq!(c.events[0].action, Action::CheckPropose);
    assert_eq!(t.check.unwrap().proposed_by, "a");
}

#[test]
fn a_changed_result_makes_the_todo_ready_and_the_same_result_puts_it_off() {
    let mut s = snap(vec![with_check(todo("t-aaaaaa", Some(HOUR)), "cat f")]);
    approve(&mut s, "t-aaaaaa");
    // The first result counts as a change.
    let (c, t, r) =
        ops::record_check(&s, "poll", T0, "t-aaaaaa", &ran(&s, "t-aaaaaa", "a")).unwrap();
    assert_eq!(r, Recorded::Changed);
    assert_eq!(c.events[0].action, Action::MonitorChange);
    assert!(c.writes.iter().any(|w| matches!(w, Write::Evidence(..))));
    assert_eq!(t.next_due_at, Some(T0));
    s = s.after(&c.writes);
    assert!(readiness::is_ready(&s, &s.todos["t-aaaaaa"], "a", T0));
    assert_eq!(
        should_run::decide(&s, "a", T0).todo.map(|b| b.id),
        Some("t-aaaaaa".into())
    );
    // Waiting for an agent: the next poll leaves it.
    let later = T0.add(Dur(1000));
    assert!(matches!(
        step(&s, &s.todos["t-aaaaaa"], later),
        Some(Step::Skip(_))
    ));
    // An agent marks it done: due again after `every`, then the same result puts it off.
    let mut t = s.todos["t-aaaaaa"].clone();
    t.next_due_at = Some(later.add(HOUR));
    s.todos.insert(t.id.clone(), t);
    let at = later.add(HOUR);
    assert_eq!(step(&s, &s.todos["t-aaaaaa"], at), Some(Step::Run));
    let (c, t, r) =
        ops::record_check(&s, "poll", at, "t-aaaaaa", &ran(&s, "t-aaaaaa", "a")).unwrap();
    assert_eq!(r, Recorded::Unchanged);
    assert_eq!(c.events[0].action, Action::MonitorCheck);
    assert!(!c.writes.iter().any(|w| matches!(w, Write::Evidence(..))));
    assert_eq!(t.next_due_at, Some(at.add(HOUR)));
}

#[test]
fn a_second_record_of_the_same_run_is_refused() {
    let mut s = snap(vec![with_check(todo("t-aaaaaa", Some(HOUR)), "cat f")]);
    approve(&mut s, "t-aaaaaa");
    let r = ran(&s, "t-aaaaaa", "a");
    let (c, ..) = ops::record_check(&s, "poll", T0, "t-aaaaaa", &r).unwrap();
    let s2 = s.after(&c.writes);
    let e = ops::record_check(&s2, "poll", T0, "t-aaaaaa", &r).unwrap_err();
    assert_eq!(e.code.exit_code(), 4);
    let mut gone = s.clone();
    if let Some(seal) = gone.seal.as_mut() {
        seal.checks.clear();
    }
    assert!(ops::record_check(&gone, "poll", T0, "t-aaaaaa", &r).is_err());
}

#[test]
fn a_timeout_keeps_the_last_result_and_reschedules() {
    let mut s = snap(vec![with_check(todo("t-aaaaaa", Some(HOUR)), "sleep 9")]);
    approve(&mut s, "t-aaaaaa");
    let mut r = ran(&s, "t-aaaaaa", "");
    r.timed_out = true;
    r.exit = 143;
    let (c, t, rec) = ops::record_check(&s, "poll", T0, "t-aaaaaa", &r).unwrap();
    assert_eq!(rec, Recorded::TimedOut);
    assert_eq!(c.events[0].action, Action::MonitorCheck);
    let check = t.check.unwrap();
    assert_eq!((check.last_hash, check.last_exit), (None, Some(143)));
    assert_eq!(t.next_due_at, Some(T0.add(HOUR)));
}

#[test]
fn a_leased_or_paused_monitor_is_skipped() {
    let mut t = with_check(todo("t-aaaaaa", Some(HOUR)), "true");
    t.lease = Some(Box::new(Lease {
        holder: "b".into(),
        fence: 1,
        acquired_at: T0,
        expires_at: T0.add(HOUR),
        turn: None,
        handoff_from: None,
        base: None,
        paths: Vec::new(),
        worktree: None,
        extra: Extra::new(),
    }));
    let mut s = snap(vec![t]);
    approve(&mut s, "t-aaaaaa");
    assert!(matches!(
        step(&s, &s.todos["t-aaaaaa"], T0),
        Some(Step::Skip(_))
    ));
    assert_eq!(
        step(&s, &s.todos["t-aaaaaa"], T0.add(HOUR)),
        Some(Step::Run)
    );
    s.config.goal.status = GoalStatus::Paused;
    assert!(matches!(
        step(&s, &s.todos["t-aaaaaa"], T0.add(HOUR)),
        Some(Step::Skip(_))
    ));
}

#[test]
fn overdue_is_noted_once_per_due_time() {
    let s = snap(vec![todo("t-aaaaaa", Some(HOUR))]);
    let late = T0.add(Dur(2 * HOUR.0));
    let (c, ids) = ops::note_overdue(&s, "poll", late);
    assert_eq!(ids, ["t-aaaaaa"]);
    assert_eq!(c.events[0].action, Action::MonitorOverdue);
    let s = s.after(&c.writes);
    let (c, ids) = ops::note_overdue(&s, "poll", late.add(HOUR));
    assert!(ids.is_empty() && c.events.is_empty() && c.writes.is_empty());
    // Done: a new due time, a new period.
    let mut t = s.todos["t-aaaaaa"].clone();
    t.next_due_at = Some(late);
    let mut s = s;
    s.todos.insert(t.id.clone(), t);
    assert!(ops::note_overdue(&s, "poll", late.add(HOUR)).1.is_empty());
    assert_eq!(
        ops::note_overdue(&s, "poll", late.add(Dur(HOUR.0 + 1)))
            .1
            .len(),
        1
    );
}

#[test]
fn check_limits_name_the_key() {
    let mut t = with_check(todo("t-aaaaaa", Some(HOUR)), "true");
    assert_eq!(limits::check_todo(&t), Ok(()));
    if let Some(c) = t.check.as_mut() {
        c.last_hash = Some("not hex".into());
    }
    assert_eq!(
        limits::check_todo(&t).unwrap_err().path(),
        "check.last_hash"
    );
    if let Some(c) = t.check.as_mut() {
        c.last_hash = None;
        c.command = "é".repeat(limits::CHECK_COMMAND_MAX / 2 + 1);
    }
    assert_eq!(limits::check_todo(&t).unwrap_err().path(), "check.command");
}

proptest! {
    #[test]
    fn overdue_means_more_than_one_period_since_due(
        every_s in 1i64..100_000, done_at in proptest::option::of(0i64..1_000_000), after in 0i64..1_000_000_000,
    ) {
        let mut t = todo("t-aaaaaa", Some(Dur::from_secs(every_s)));
        t.next_due_at = done_at.map(|d| T0.add(Dur::from_secs(d)));
        let due = t.next_due_at.unwrap_or(T0);
        let now = T0.add(Dur(after));
        let late = overdue(&t, now);
        prop_assert_eq!(late.is_some(), now.since(due).0 > every_s * 1000);
        if late.is_some() {
            prop_assert!(is_due(&t, now));
        }
    }

    #[test]
    fn a_due_monitor_never_beats_a_higher_priority(p_mon in 0usize..5, p_other in 0usize..5) {
        let ps = [Priority::P0, Priority::P1, Priority::P2, Priority::P3, Priority::P4];
        let mut mon = todo("t-bbbbbb", Some(HOUR));
        mon.priority = ps[p_mon];
        let mut other = todo("t-aaaaaa", None);
        other.priority = ps[p_other];
        other.created_at = Ts(T0.0 - 1);
        let s = snap(vec![mon, other]);
        let best = readiness::best(&s, "a", T0).map(|t| t.id.clone());
        let want = if p_mon <= p_other { "t-bbbbbb" } else { "t-aaaaaa" };
        prop_assert_eq!(best.as_deref(), Some(want));
    }
}
