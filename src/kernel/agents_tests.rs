//! Unit tests of the routing rules: capabilities, exclusion, the owner's sealed facts.

use super::*;
use crate::kernel::model::{Config, Priority, Role, Status};
use crate::kernel::readiness;

const T0: Ts = Ts(1_800_000_000_000);

fn todo(id: &str, requires: &[&str]) -> Todo {
    let (mut c, t) = crate::kernel::ops::add_todo(
        &Snapshot::new(Config::new("g", "o", T0)),
        "a",
        T0,
        crate::kernel::ops::NewTodo {
            id: id.into(),
            title: "t".into(),
            role: Role::Agent,
            priority: Priority::P2,
            depends_on: Vec::new(),
            every: None,
            blocked_by_gate: None,
            requires: requires.iter().map(|s| s.to_string()).collect(),
            reviews: None,
            exclude_agents: Vec::new(),
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
