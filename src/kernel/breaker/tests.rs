use super::*;
use crate::kernel::model::Config;
use proptest::prelude::*;

fn todo() -> Todo {
    let snap = Snapshot::new(Config::new("g-1", "x", Ts(0)));
    let new = crate::kernel::ops::NewTodo::new("t-aaaaaa", "work");
    crate::kernel::ops::add_todo(&snap, "me", Ts(0), new)
        .unwrap()
        .1
}

fn metric(name: &str, v: f64) -> Evidence {
    let mut e = Evidence::new(Ts(5), "a", None, EvidenceKind::Metric, "m".into());
    e.name = Some(name.into());
    e.value = Some(serde_json::json!(v));
    e
}

#[test]
fn progress_is_git_moving_or_evidence_that_is_not_a_flat_metric() {
    let none = Facts::default();
    assert!(!progressed(&none));
    let head = Facts {
        head: (Some("a".into()), Some("b".into())),
        ..Facts::default()
    };
    assert!(progressed(&head));
    let tree = Facts {
        tree: (Some("x".into()), Some("y".into())),
        ..Facts::default()
    };
    assert!(progressed(&tree));
    let note = Facts {
        new: vec![Evidence::new(
            Ts(5),
            "a",
            None,
            EvidenceKind::Note,
            "n".into(),
        )],
        ..Facts::default()
    };
    assert!(progressed(&note));
    let flat = Facts {
        new: vec![metric("acc", 0.5)],
        earlier: vec![metric("acc", 0.4), metric("acc", 0.6)],
        ..Facts::default()
    };
    assert!(
        !progressed(&flat),
        "a value inside the range seen is no gain"
    );
    let best = Facts {
        new: vec![metric("acc", 0.7)],
        earlier: vec![metric("acc", 0.4), metric("acc", 0.6)],
        ..Facts::default()
    };
    assert!(progressed(&best));
    let mut failed = Evidence::new(Ts(5), "a", None, EvidenceKind::Check, "c".into());
    failed.exit_code = Some(1);
    let check = Facts {
        new: vec![failed],
        ..Facts::default()
    };
    assert!(!progressed(&check), "a failed check is no progress");
}

#[test]
fn the_third_turn_without_progress_parks_and_a_failure_backs_off() {
    let mut t = todo();
    let now = Ts(1_000_000);
    let Verdict::Count(s) = judge(&t, 3, now, Some(false), false) else {
        panic!("one turn counts");
    };
    assert_eq!((s.turns, s.failures, s.retry_at), (1, 1, None));
    t.stall = Some(Box::new(s));
    let Verdict::Count(s) = judge(&t, 3, now, Some(false), false) else {
        panic!("two turns count");
    };
    assert_eq!(s.retry_at, Some(now.add(Dur(1000))));
    t.stall = Some(Box::new(s));
    assert!(matches!(judge(&t, 3, now, Some(false), false), Verdict::Park(s) if s.turns == 3));
    assert_eq!(judge(&t, 3, now, Some(true), false), Verdict::Clear);
    // A failure that progressed backs off but does not count toward parking.
    let Verdict::Count(s) = judge(&t, 3, now, Some(true), true) else {
        panic!("a failure backs off");
    };
    assert_eq!((s.turns, s.failures), (0, 3));
    // Off: no progress counts for nothing, a failure still backs off.
    t.stall.as_mut().unwrap().turns = 999;
    assert_eq!(judge(&t, 0, now, Some(false), false), Verdict::Clear);
    assert!(matches!(judge(&t, 0, now, Some(false), true), Verdict::Count(s) if s.turns == 0));
    // Nothing measured and no failure: nothing counted.
    assert_eq!(judge(&t, 3, now, None, false), Verdict::Clear);
}

#[test]
fn a_seal_from_before_the_breaker_holds_the_default() {
    let mut cfg = Config::new("g-1", "x", Ts(0));
    cfg.breaker.turns = Some(0);
    let mut notes = Vec::new();
    apply_sealed(&mut cfg, None, &mut notes);
    assert_eq!(cfg.breaker.turns(), TURNS_DEFAULT);
    assert_eq!(notes.len(), 1, "{notes:?}");
    apply_sealed(&mut cfg, Some(3), &mut notes);
    assert_eq!(notes.len(), 1, "no note when the file agrees");
}

proptest! {
    #[test]
    fn the_backoff_grows_and_stays_bounded(n in 0u32..2_000) {
        let d = backoff(n);
        prop_assert!(d <= BACKOFF_MAX);
        prop_assert!(backoff(n.saturating_add(1)) >= d);
    }

    #[test]
    fn a_stall_never_passes_its_bounds(turns in 0u32..u32::MAX, failures in 0u32..u32::MAX, n in 1u32..5) {
        let mut t = todo();
        t.stall = Some(Box::new(Stall { turns, failures, ..Stall::default() }));
        match judge(&t, n, Ts(0), Some(false), true) {
            Verdict::Count(s) | Verdict::Park(s) => {
                prop_assert!(s.turns <= TURNS_MAX && s.failures <= TURNS_MAX);
            }
            Verdict::Clear => prop_assert!(false, "a failed turn without progress is counted"),
        }
    }
}

#[test]
fn a_gate_gone_or_decided_parks_nothing_and_a_far_retry_is_ignored() {
    let mut snap = Snapshot::new(Config::new("g-1", "x", Ts(0)));
    let mut t = todo();
    t.stall = Some(Box::new(Stall {
        parked: Some("g-bbbbbb".into()),
        retry_at: Some(Ts(1_000_000 + 400_000)),
        ..Stall::default()
    }));
    assert_eq!(parked(&snap, &t), None, "no such gate");
    let g = crate::kernel::model::Gate::pending("g-bbbbbb", "q?".into(), "a", Ts(0));
    snap.gates.insert(g.id.clone(), g);
    assert_eq!(parked(&snap, &t), Some("g-bbbbbb"));
    snap.gates.get_mut("g-bbbbbb").unwrap().status = GateStatus::Cancelled;
    assert_eq!(parked(&snap, &t), None, "decided");
    assert_eq!(
        backed_off(&t, Ts(1_000_000)),
        None,
        "more than 5 minutes ahead"
    );
    assert!(backed_off(&t, Ts(1_000_000 + 200_000)).is_some());
}
