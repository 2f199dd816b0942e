//! Unit tests of the routing rules: capabilities, exclusion, the owner's sealed facts.

use super::*;
use crate::kernel::model::{Config, Status};
use crate::kernel::ops::Write;
use crate::kernel::ops::agents::{Fix, fix, set};
use crate::kernel::readiness;

const T0: Ts = Ts(1_800_000_000_000);

fn todo(id: &str, requires: &[&str]) -> Todo {
    let (mut c, t) = crate::kernel::ops::add_todo(
        &Snapshot::new(Config::new("g", "o", T0)),
        "a",
        T0,
        crate::kernel::ops::NewTodo {
            requires: requires.iter().map(|s| s.to_string()).collect(),
            ..crate::kernel::ops::NewTodo::new(id, "t")
        },
    )
    .expect("add");
    c.writes.clear();
    t
}

fn snap(todos: Vec<Todo>) -> Snapshot {
    let mut s = Snapshot::new(Config::new("g", "o", T0));
    for t in todos {
        s.todos.insert(t.id.clone(), t);
    }
    s
}

#[test]
fn capability_names_are_checked() {
    assert!(is_capability("code.rust"));
    assert!(is_capability("a-b_c.9"));
    assert!(!is_capability(""));
    assert!(!is_capability("Code"));
    assert!(!is_capability("a b"));
    assert!(!is_capability(&"a".repeat(65)));
    let many: Vec<String> = (0..33).map(|i| format!("c{i}")).collect();
    assert!(check_capabilities("--x", &many).is_err());
    assert_eq!(
        check_capabilities("--x", &["b".into(), "a".into(), "b".into()]).expect("ok"),
        vec!["a".to_string(), "b".to_string()]
    );
}

#[test]
fn owner_fixed_capabilities_replace_the_agents_own() {
    let mut s = snap(vec![todo("t-aaaaaa", &["review"])]);
    let (c, _) = set(&s, "exec", T0, vec!["review".into()], false).expect("set");
    s = s.after(&c.writes);
    assert!(readiness::is_ready(&s, &s.todos["t-aaaaaa"], "exec", T0));
    let (c, _) = fix(
        &s,
        "owner",
        T0,
        "exec",
        Fix {
            capabilities: Some(Some(vec!["code".into()])),
            slots: None,
        },
    )
    .expect("fix");
    assert!(c.owner);
    s = s.after(&c.writes);
    let b = readiness::blockers(&s, &s.todos["t-aaaaaa"], "exec", T0, false);
    assert_eq!(
        b,
        vec![readiness::Blocker::Capability {
            missing: vec!["review".into()]
        }]
    );
}

#[test]
fn the_finisher_is_excluded_from_open_reviews_only() {
    let mut r = todo("t-bbbbbb", &[]);
    r.reviews = Some("t-aaaaaa".into());
    let mut done = todo("t-cccccc", &[]);
    done.reviews = Some("t-aaaaaa".into());
    done.status = Status::Cancelled;
    let s = snap(vec![todo("t-aaaaaa", &[]), r]);
    let out = exclude_finisher(&s, "t-aaaaaa", "exec", T0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].exclude_agents, vec!["exec".to_string()]);
    let s2 = s.after(&[Write::Todo(out[0].clone())]);
    assert!(exclude_finisher(&s2, "t-aaaaaa", "exec", T0).is_empty());
}

#[test]
fn sealed_facts_round_trip_and_override_hand_edits() {
    for f in [
        (Some(3), Some(vec!["a".to_string(), "b".to_string()])),
        (None, None),
        (Some(1), Some(Vec::new())),
    ] {
        let (a, b) = fact_fields(&f);
        assert_eq!(parse_fields(&a, &b), Some(f));
    }
    let mut s = snap(Vec::new());
    s.config.agents.insert(
        "x".into(),
        AgentPolicy {
            slots: Some(50),
            ..AgentPolicy::default()
        },
    );
    s.config.agents.insert(
        "y".into(),
        AgentPolicy {
            slots: Some(9),
            ..AgentPolicy::default()
        },
    );
    let mut sealed = AgentFacts::new();
    sealed.insert("x".into(), (Some(2), None));
    let mut notes = Vec::new();
    apply_sealed(&mut s, &sealed, &mut notes);
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(slots_cap(&s, "x"), Some(2));
    assert_eq!(slots_cap(&s, "y"), None);
}

mod props {
    use super::*;
    use crate::kernel::should_run::{Decision, decide};
    use proptest::prelude::*;

    const CAPS: [&str; 4] = ["a", "b.c", "d-e", "f_9"];

    fn caps_of(mask: u8) -> Vec<String> {
        (0..4)
            .filter(|i| mask & (1 << i) != 0)
            .map(|i| CAPS[i].to_string())
            .collect()
    }

    proptest! {
        /// With nothing else blocking, a todo is ready for an agent exactly when the agent has
        /// every capability it requires (the owner's fixed list replacing its own) and is not
        /// excluded; should-run runs one of those, or says `no_work_for_you` when there is none.
        #[test]
        fn only_an_agents_own_work_is_offered(
            own in 0u8..16,
            fixed in proptest::option::of(0u8..16),
            todos in proptest::collection::vec((0u8..16, any::<bool>()), 1..8),
        ) {
            let mut s = snap(Vec::new());
            let (c, _) = set(&s, "ag", T0, caps_of(own), true).expect("set");
            s = s.after(&c.writes);
            if let Some(f) = fixed {
                let (c, _) = fix(&s, "owner", T0, "ag", Fix {
                    capabilities: Some(Some(caps_of(f))),
                    slots: None,
                }).expect("fix");
                s = s.after(&c.writes);
            }
            let have = fixed.unwrap_or(own);
            for (n, (req, excl)) in todos.iter().enumerate() {
                let mut t = todo(&format!("t-aaaaa{}", (b'a' + n as u8) as char), &[]);
                t.requires = caps_of(*req);
                if *excl {
                    t.exclude_agents = vec!["ag".into()];
                }
                s.todos.insert(t.id.clone(), t);
            }
            let mut any = false;
            for t in s.todos.values() {
                let req = todos[(t.id.as_bytes()[7] - b'a') as usize].0;
                let want = req & !have == 0 && t.exclude_agents.is_empty();
                any |= want;
                prop_assert_eq!(readiness::is_ready(&s, t, "ag", T0), want, "{:?}", t);
                prop_assert_eq!(readiness::is_yours(&s, t, "ag"), want);
            }
            let a = decide(&s, "ag", T0);
            if any {
                prop_assert_eq!(a.decision, Decision::Run);
                let id = a.todo.map(|b| b.id).unwrap_or_default();
                prop_assert!(readiness::is_ready(&s, &s.todos[&id], "ag", T0));
            } else {
                prop_assert_eq!(a.decision, Decision::Idle);
                prop_assert_eq!(a.reason, "no_work_for_you");
            }
        }
    }
}
