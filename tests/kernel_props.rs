//! Property tests of the kernel's rules over generated snapshots and an injected clock.

use std::collections::{BTreeMap, HashMap};

use loopx::kernel::ops::{self, Write};
use loopx::kernel::quota;
use loopx::kernel::readiness;
use loopx::kernel::should_run::{self, Decision};
use loopx::kernel::*;
use proptest::prelude::*;

const NOW: Ts = Ts(1_800_000_000_000);
const AGENTS: [&str; 3] = ["a", "b", "c"];

fn id(i: usize) -> String {
    format!(
        "t-aaa{}",
        [
            "aaa", "aab", "aac", "aad", "aae", "aaf", "aag", "aah", "aai", "aaj"
        ][i % 10]
    )
}

fn config(status: GoalStatus, slots: u32, min_interval_s: i64) -> Config {
    Config {
        schema_version: 1,
        goal: Goal {
            id: "goal-test".into(),
            objective: "test".into(),
            success_criteria: vec![],
            status,
            created_at: Ts(0),
            updated_at: Ts(0),
            reason: None,
            extra: Extra::new(),
        },
        quota: QuotaPolicy {
            slots,
            window: Dur::from_hours(24),
            min_interval: Dur::from_secs(min_interval_s),
            ..QuotaPolicy::default()
        },
        lease: LeasePolicy::default(),
        agents: BTreeMap::new(),
        hooks: BTreeMap::new(),
        done: Default::default(),
        breaker: Default::default(),
        devices: Default::default(),
        extra: Extra::new(),
    }
}

#[derive(Debug, Clone)]
struct TodoSpec {
    priority: u8,
    status: u8,
    user: bool,
    deps: Vec<usize>,
    lease: Option<(usize, i64)>,
    due_in_s: Option<i64>,
    age_s: i64,
}

fn todo_spec() -> impl Strategy<Value = TodoSpec> {
    (
        0u8..5,
        prop_oneof![4 => Just(0u8), 1 => 1u8..3],
        prop::bool::weighted(0.15),
        prop::collection::vec(0usize..10, 0..2),
        prop::option::weighted(0.4, (0usize..3, -600i64..600)),
        prop::option::weighted(0.2, -600i64..600),
        0i64..10_000,
    )
        .prop_map(
            |(priority, status, user, deps, lease, due_in_s, age_s)| TodoSpec {
                priority,
                status,
                user,
                deps,
                lease,
                due_in_s,
                age_s,
            },
        )
}

#[derive(Debug, Clone)]
struct World {
    snap: Snapshot,
}

fn world() -> impl Strategy<Value = World> {
    (
        prop::collection::vec(todo_spec(), 0..10),
        prop::collection::vec((prop::bool::ANY, prop::bool::weighted(0.2), prop::collection::vec(0usize..10, 0..3)), 0..3),
        prop_oneof![8 => Just(GoalStatus::Active), 1 => Just(GoalStatus::Paused), 1 => Just(GoalStatus::Complete)],
        1u32..6,
        prop::collection::vec((0u32..3, 0i64..100_000), 0..6),
        prop_oneof![3 => Just(0i64), 1 => 1i64..600],
    )
        .prop_map(|(specs, gates, goal, slots, spends, min_interval)| {
            let n = specs.len();
            let mut todos = loopx::kernel::TodoMap::new();
            for (i, s) in specs.iter().enumerate() {
                let mut fence = 0;
                let lease = s.lease.map(|(h, exp)| {
                    fence = 3;
                    Lease { holder: AGENTS[h].into(), fence, acquired_at: NOW.sub(Dur::from_secs(60)), expires_at: NOW.add(Dur(exp * 1000)), turn: None, handoff_from: None, base: None, paths: Vec::new(), worktree: None, extra: Extra::new() }
                });
                let t = Todo {
                    schema_version: 1,
                    id: id(i),
                    title: format!("todo {i}"),
                    role: if s.user { Role::User } else { Role::Agent },
                    priority: [Priority::P0, Priority::P1, Priority::P2, Priority::P3, Priority::P4][s.priority as usize],
                    status: [Status::Open, Status::Blocked, Status::Deferred][s.status as usize],
                    depends_on: s.deps.iter().filter(|d| **d != i).map(|d| id(*d % n.max(1))).filter(|d| *d != id(i)).collect(),
                    every: None,
                    next_due_at: s.due_in_s.map(|d| NOW.add(Dur(d * 1000))),
                    created_by: "gen".into(),
                    created_at: NOW.sub(Dur::from_secs(s.age_s)),
                    updated_at: NOW,
                    reason: None,
                    status_by: None,
                    fence,
                    overdue_noted: None,
                    requires: Vec::new(),
                    reviews: None,
                    exclude_agents: Vec::new(),
                    check: None,
                    body: None,
                    links: Vec::new(),
                    // The breaker: some todos backed off (in the past or the future), some parked
                    // on a gate that may be pending, decided or missing.
                    stall: (s.age_s % 3 == 0 || s.age_s % 7 == 0).then(|| {
                        Box::new(Stall {
                            turns: 1,
                            failures: 1,
                            retry_at: (s.age_s % 3 == 0).then(|| NOW.add(Dur((s.age_s % 1200 - 600) * 1000))),
                            parked: (s.age_s % 7 == 0).then(|| format!("g-aaaaa{}", s.age_s % 4)),
                            extra: Extra::new(),
                        })
                    }),
                    paths: Vec::new(),
                    lease: lease.map(Box::new),
                    extra: Extra::new(),
                };
                todos.insert(t.id.clone(), t);
            }
            let mut gs = BTreeMap::new();
            for (i, (pending, global, blocks)) in gates.into_iter().enumerate() {
                let g = Gate {
                    schema_version: 1,
                    id: format!("g-aaaaa{i}"),
                    question: format!("question {i}?"),
                    options: vec![],
                    blocks: blocks.iter().filter(|b| **b < n).map(|b| id(*b)).collect(),
                    global,
                    opened_by: "a".into(),
                    opened_at: NOW.sub(Dur::from_secs(i as i64)),
                    status: if pending { GateStatus::Pending } else { GateStatus::Approved },
                    decided_by: None,
                    decided_at: None,
                    option: None,
                    reason: None,
                    journal_head: None,
                    signature: None,
                    action: None,
                    used: None,
                    extra: Extra::new(),
                    signed: true,
                };
                gs.insert(g.id.clone(), g);
            }
            let quota = QuotaFile {
                schema_version: 1,
                spends: spends
                    .into_iter()
                    .map(|(slots, ago)| Spend { at: NOW.sub(Dur(ago * 1000)), agent: "a".into(), slots: slots.max(1), turn: None, tokens: None, cost_usd: None, extra: Extra::new() })
                    .collect(),
                extra: Extra::new(),
            };
            World { snap: Snapshot { config: config(goal, slots, min_interval), todos, gates: gs, quota, archived: HashMap::new(), quarantined: Default::default(), owner_notes: Vec::new(), seal: None, unsealed: false, agents: Default::default(), reserve_budget: Default::default() } }
        })
}

fn written_todo(c: &ops::Change) -> Option<&Todo> {
    c.writes.iter().find_map(|w| match w {
        Write::Todo(t) | Write::Archive(t) => Some(t),
        _ => None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A bare claim takes the best ready todo, with the next fence, and never a live lease of another.
    #[test]
    fn claim_takes_the_best_ready_todo(w in world(), agent in 0usize..3) {
        let agent = AGENTS[agent];
        let ready = readiness::ready(&w.snap, agent, NOW);
        match ops::claim(&w.snap, agent, NOW, Dur::from_mins(30), None) {
            Ok((c, t)) => {
                prop_assert_eq!(&t.id, &ready[0].id);
                let before = &w.snap.todos[&t.id];
                prop_assert!(before.live_lease(NOW).is_none(), "claimed a live lease");
                prop_assert_eq!(t.fence, before.fence + 1);
                let l = t.lease.as_ref().unwrap();
                prop_assert_eq!(l.fence, t.fence);
                prop_assert_eq!(l.holder.as_str(), agent);
                prop_assert_eq!(written_todo(&c).map(|x| &x.id), Some(&t.id));
                prop_assert_eq!(c.events.len(), 1);
                for r in &ready {
                    prop_assert!(readiness::pick_key(&t, NOW) <= readiness::pick_key(r, NOW));
                }
            }
            Err(e) => {
                prop_assert!(ready.is_empty());
                prop_assert_eq!(e.code, Code::NothingReady);
            }
        }
    }

    /// The first `k` ready todos are `ready`'s first `k`, in its order.
    #[test]
    fn ready_first_is_the_head_of_ready(w in world(), agent in 0usize..3, k in 0usize..12) {
        let agent = AGENTS[agent];
        let all: Vec<&str> = readiness::ready(&w.snap, agent, NOW).iter().map(|t| t.id.as_str()).collect();
        let first: Vec<&str> =
            readiness::ready_first(&w.snap, agent, NOW, k).iter().map(|t| t.id.as_str()).collect();
        prop_assert_eq!(&first[..], &all[..k.min(all.len())]);
    }

    /// Ready means no blocker, and every blocker reason is consistent with the todo.
    #[test]
    fn ready_means_no_blockers(w in world(), agent in 0usize..3) {
        let agent = AGENTS[agent];
        for t in w.snap.todos.values() {
            let b = readiness::blockers(&w.snap, t, agent, NOW, false);
            let ready = readiness::is_ready(&w.snap, t, agent, NOW);
            prop_assert_eq!(ready, b.is_empty());
            if ready {
                prop_assert_eq!(t.role, Role::Agent);
                prop_assert_eq!(t.status, Status::Open);
                prop_assert!(t.live_lease(NOW).is_none());
                prop_assert!(t.next_due_at.is_none_or(|d| d <= NOW));
                prop_assert_eq!(w.snap.config.goal.status, GoalStatus::Active);
            }
        }
    }

    /// should-run follows the contract's order of precedence.
    #[test]
    fn should_run_follows_precedence(w in world(), agent in 0usize..3) {
        let agent = AGENTS[agent];
        let s = &w.snap;
        let a = should_run::decide(s, agent, NOW);
        let open_agent = s.todos.values().any(|t| t.role == Role::Agent && t.status == Status::Open);
        let throttled = quota::throttled_for(&s.quota, &s.config.quota, NOW).is_some();
        let interval = quota::interval_wait(&s.quota, &s.config.quota, NOW).is_some();
        let expected_first = if s.config.goal.status != GoalStatus::Active {
            Some(Decision::Paused)
        } else if !open_agent {
            Some(Decision::Idle)
        } else if throttled {
            Some(Decision::Throttled)
        } else if interval {
            Some(Decision::Wait)
        } else {
            None
        };
        match expected_first {
            Some(d) => prop_assert_eq!(a.decision, d),
            None => {
                // A held todo runs unless something else (a gate opened since) blocks it.
                let held_ok = readiness::held(s, agent, NOW)
                    .iter()
                    .any(|t| readiness::blockers(s, t, agent, NOW, true).is_empty());
                let runnable = held_ok || readiness::best(s, agent, NOW).is_some();
                prop_assert_eq!(a.decision == Decision::Run, runnable);
            }
        }
        prop_assert_eq!(a.should_run, a.decision == Decision::Run);
        prop_assert_eq!(a.todo.is_some(), a.decision == Decision::Run);
        if matches!(a.decision, Decision::Throttled | Decision::Wait) {
            prop_assert!(a.retry_after_s.is_some_and(|r| r >= 1));
        }
        let pending = s.gates.values().filter(|g| g.effective_status() == GateStatus::Pending).count();
        prop_assert_eq!(a.questions.len() + a.questions_more, pending);
        prop_assert!(a.questions.len() <= 5);
        let json = serde_json::to_string(&a).unwrap();
        prop_assert!(json.len() < 1024, "should-run answer is {} bytes", json.len());
    }

    /// The quota frees a slot exactly when it says it will.
    #[test]
    fn throttle_ends_when_it_says(w in world()) {
        let s = &w.snap;
        let p = &s.config.quota;
        let u = quota::usage(&s.quota, p, NOW);
        let t = quota::throttled_for(&s.quota, p, NOW);
        prop_assert_eq!(t.is_some(), u.used >= u64::from(u.limit));
        if let Some(d) = t {
            let later = NOW.add(d).add(Dur(1));
            prop_assert!(quota::usage(&s.quota, p, later).used < u64::from(u.limit));
            if d.0 > 1 {
                let before = NOW.add(Dur(d.0 - 1));
                prop_assert!(quota::usage(&s.quota, p, before).used >= u64::from(u.limit));
            }
        }
    }

    /// Fences only grow; a stale fence or someone else's lease is refused and writes nothing.
    #[test]
    fn fences_grow_and_stale_writers_are_refused(w in world(), steps in prop::collection::vec((0usize..3, 0u8..4, 0i64..900), 1..25)) {
        let mut snap = w.snap.clone();
        snap.config.goal.status = GoalStatus::Active;
        snap.gates.clear();
        let mut now = NOW;
        let mut max_fence: HashMap<String, u64> = snap.todos.iter().map(|(k, t)| (k.clone(), t.fence)).collect();
        for (agent, op, dt) in steps {
            let agent = AGENTS[agent];
            now = now.add(Dur(dt * 1000));
            let result = match op {
                0 => ops::claim(&snap, agent, now, Dur::from_mins(5), None).map(|(c, _)| c),
                1 => match readiness::held(&snap, agent, now).first() {
                    Some(t) => ops::update(&snap, agent, now, &t.id.clone(), ops::Update { fence: Some(t.fence), ..Default::default() }).map(|(c, _)| c),
                    None => continue,
                },
                2 => {
                    // A stale write: a fence below the current one.
                    let Some(t) = snap.todos.values().find(|t| t.fence > 1) else { continue };
                    let r = ops::update(&snap, agent, now, &t.id.clone(), ops::Update { fence: Some(t.fence - 1), ..Default::default() });
                    prop_assert!(r.is_err());
                    continue;
                }
                _ => match readiness::held(&snap, agent, now).first() {
                    Some(t) => ops::release(&snap, agent, now, &t.id.clone()).map(|(c, _)| c),
                    None => continue,
                },
            };
            let Ok(change) = result else { continue };
            for wr in change.writes {
                if let Write::Todo(t) = wr {
                    let m = max_fence.entry(t.id.clone()).or_default();
                    prop_assert!(t.fence >= *m, "fence went down on {}", t.id);
                    *m = t.fence;
                    if let Some(l) = &t.lease {
                        prop_assert_eq!(l.fence, t.fence);
                    }
                    snap.todos.insert(t.id.clone(), t);
                }
            }
        }
    }

    /// Durations print and parse back.
    #[test]
    fn durations_round_trip(secs in 1i64..10_000_000) {
        let d = Dur::from_secs(secs);
        prop_assert_eq!(d.to_string().parse::<Dur>().unwrap(), d);
    }

    /// Times print with milliseconds and parse back.
    #[test]
    fn times_round_trip(ms in 0i64..4_000_000_000_000) {
        let t = Ts(ms);
        prop_assert_eq!(t.to_string().parse::<Ts>().unwrap(), t);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever bytes a state file holds, reading it gives a value or an error naming the file.
    #[test]
    fn any_state_text_parses_or_names_the_file(text in "(?s)[ -~\n\t\u{e9}\u{4e2d}]{0,300}") {
        let path = std::path::Path::new("/p/.loopx/todos/t-abcdef.toml");
        for r in [
            loopx::store::parse::decode::<Todo>(path, &text).err(),
            loopx::store::parse::decode::<Gate>(path, &text).err(),
            loopx::store::parse::decode::<Config>(path, &text).err(),
            loopx::store::parse::decode::<QuotaFile>(path, &text).err(),
        ].into_iter().flatten() {
            prop_assert!(r.message.starts_with(".loopx/todos/t-abcdef.toml"), "{}", r.message);
            prop_assert!(matches!(r.code, Code::InvalidState | Code::SchemaTooNew));
        }
    }

    /// Any bytes in the journal are verified without a panic, and a break names a real line.
    #[test]
    fn any_journal_bytes_verify_without_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let (brk, _) = loopx::store::journal::verify(&bytes);
        if let Some(b) = brk {
            let lines = bytes.iter().filter(|c| **c == b'\n').count();
            prop_assert!(b.line >= 1 && b.line <= lines.max(1), "line {} of {}", b.line, lines);
        }
    }

    /// Durations and times from any text parse or are refused, never panic.
    #[test]
    fn any_duration_or_time_text_is_handled(text in "[0-9dhmsPT:.Z+-]{0,24}") {
        let _ = text.parse::<Dur>();
        let _ = text.parse::<Ts>();
    }
}
