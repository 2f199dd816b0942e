//! Names that carry authority: reserved agent ids are refused, only the owner undoes an owner's or
//! a gate's status, the board's todos are signed, and journal actions stay readable.

mod common;

use std::collections::BTreeMap;

use common::{Project, assert_err, assert_same_files, parse_json, run_cmd};
use loopx::kernel::authority::{self, OwnerPub};
use loopx::kernel::{Action, Ts, ops};
use loopx::store::{FileStore, Store};
use serde_json::Value;

/// Every agent id that names loopx's own actors.
const RESERVED: &[&str] = &[
    "owner",
    "OWNER",
    "Owner",
    "doctor",
    "loopx",
    "gate:g-abcdef",
];

#[track_caller]
fn assert_reserved(v: &Value, name: &str) {
    assert_err(v, "usage");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("reserved"), "{name}: {v}");
    let hint = v["error"]["hint"].as_str().unwrap_or_default();
    assert!(
        !hint.is_empty(),
        "{name}: no hint says what to use instead: {v}"
    );
}

/// The files under `.loopx/` but the cache, which any load may rewrite.
fn state_files(p: &Project) -> BTreeMap<String, Vec<u8>> {
    let mut f = p.files();
    f.retain(|k, _| !k.starts_with("cache/"));
    f
}

#[test]
fn reserved_agent_ids_exit_2_and_write_nothing() {
    let p = Project::new("names-reserved");
    let id = p.add("work", &[]);
    let before = p.files();
    for name in RESERVED {
        for args in [
            vec!["todo", "claim", id.as_str()],
            vec!["todo", "add", "sneaky"],
            vec!["quota", "should-run"],
        ] {
            let (code, v) = p.json_as(name, &args);
            assert_eq!(code, 2, "--agent {name} {args:?}: {v}");
            assert_reserved(&v, name);
        }
    }
    assert_same_files(&before, &p.files(), "reserved --agent");
}

#[test]
fn loopx_agent_from_the_environment_is_checked_too() {
    let p = Project::new("names-env");
    let id = p.add("work", &[]);
    let before = p.files();
    for name in RESERVED {
        let mut c = p.cmd(&["todo", "claim", &id, "--json"]);
        c.env("LOOPX_AGENT", name);
        let r = run_cmd(&mut c);
        let v = parse_json(&r, "claim with a reserved LOOPX_AGENT");
        assert_eq!(r.code, 2, "LOOPX_AGENT={name}: {v}");
        assert_reserved(&v, name);
    }
    assert_same_files(&before, &p.files(), "reserved LOOPX_AGENT");
}

#[test]
fn reassign_to_a_reserved_name_exits_2_and_writes_nothing() {
    let p = Project::new("names-reassign");
    let id = p.add("work", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let before = p.files();
    for name in RESERVED {
        let (code, v) = p.json(&["todo", "reassign", &id, "--to", name]);
        assert_eq!(code, 2, "--to {name}: {v}");
        assert_reserved(&v, name);
    }
    assert_same_files(&before, &p.files(), "reassign to a reserved name");
    // An ordinary name still works (the owner's key is here).
    p.ok(&["todo", "reassign", &id, "--to", "agent-b"]);
}

/// A todo blocked by a rejected gate, and the gate's id.
fn blocked_by_rejection(p: &Project) -> (String, String) {
    let id = p.add("risky", &[]);
    let g = p.gate("Go ahead?", &["--blocks", &id]);
    p.ok(&["gate", "reject", &g, "--reason", "too risky"]);
    let t = p.show(&id);
    assert_eq!(t["status"], "blocked");
    assert_eq!(t["status_by"], format!("gate:{g}"), "{t}");
    (id, g)
}

#[test]
fn a_todo_a_rejected_gate_blocked_is_reopened_only_by_the_owner() {
    let p = Project::new("names-gate-reopen");
    let (id, g) = blocked_by_rejection(&p);
    let before = state_files(&p);
    // No agent can: without the key the reopen is the owner's and is denied (exit 7) ...
    for agent in ["agent-a", "local", "gate-g"] {
        let (code, v) = p.no_key(&["--agent", agent, "todo", "reopen", &id]);
        assert_eq!(code, 7, "{agent}: {v}");
        assert_err(&v, "denied");
    }
    // ... and the gate's own name is no agent id at all (exit 2).
    let gate_actor = format!("gate:{g}");
    let (code, v) = p.no_key(&["--agent", &gate_actor, "todo", "reopen", &id]);
    assert_eq!(code, 2, "{v}");
    assert_reserved(&v, &gate_actor);
    assert_same_files(&before, &state_files(&p), "agents reopening a gate's block");
    assert_eq!(p.show(&id)["status"], "blocked");
    // The owner can: the line is the owner's, signed.
    let v = p.ok(&["todo", "reopen", &id]);
    assert_eq!(v["todo"]["status"], "open");
    assert_eq!(v["todo"]["status_by"], "owner");
    let last = p.journal().pop().expect("a journal line");
    assert_eq!(last["action"], "todo.reopen");
    assert_eq!(last["actor"], "owner");
    assert!(last["sig"].is_string(), "{last}");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_status_the_owner_set_is_undone_only_by_the_owner() {
    let p = Project::new("names-owner-reopen");
    let user = p.add("the owner signs", &["--role", "user"]);
    p.ok(&["todo", "update", &user, "--status", "blocked"]);
    assert_eq!(p.show(&user)["status_by"], "owner");
    let before = state_files(&p);
    let (code, v) = p.no_key(&["--agent", "agent-a", "todo", "reopen", &user]);
    assert_eq!(code, 7, "{v}");
    assert_same_files(
        &before,
        &state_files(&p),
        "an agent reopening the owner's block",
    );
    p.ok(&["todo", "reopen", &user]);
}

#[test]
fn the_kernel_makes_any_reopen_of_a_reserved_status_the_owners() {
    let p = Project::new("names-kernel");
    let (id, g) = blocked_by_rejection(&p);
    let snap = FileStore::at(p.root()).load().expect("load");
    // Even a caller that skips the agent id check cannot pass as the gate or the owner.
    for actor in [format!("gate:{g}"), "owner".into(), "OWNER".into()] {
        let (c, t) = ops::reopen(&snap, &actor, Ts::now(), &id).expect("reopen");
        assert!(c.owner, "{actor}: an unsigned reopen");
        assert_eq!(t.status_by.as_deref(), Some(ops::OWNER));
        assert!(c.events.iter().all(|e| e.actor == ops::OWNER));
    }
}

/// The in-process store with the owner key at `path` (the face hands the key's place down).
fn keyed(store: &FileStore, path: &std::path::Path) -> FileStore {
    store.clone().with_env(loopx::store::Env {
        key: loopx::store::owner::KeyAt::at(path),
        ..Default::default()
    })
}

#[test]
fn the_boards_add_todo_is_a_signed_owner_line_or_nothing() {
    use loopx::flows::owner::{Owner, OwnerAct, perform};
    let p = Project::new("names-board");
    let store = FileStore::at(p.root());
    let add = OwnerAct::AddTodo {
        title: "from the board".into(),
        priority: loopx::kernel::Priority::P2,
    };
    // Without the key: denied, nothing written.
    let store = keyed(&store, &p.home.path.join("no-such-key"));
    let before = state_files(&p);
    let e = perform(&store, &Owner::unverified(), &add, Ts::now()).unwrap_err();
    assert_eq!(e.code.exit_code(), 7, "{e:?}");
    assert_same_files(
        &before,
        &state_files(&p),
        "the board's add-todo without the key",
    );
    // With it: the todo.add line is the owner's and its signature verifies.
    let store = keyed(&store, &p.key);
    let owner = Owner::detect(&store);
    assert!(owner.verified, "{owner:?}");
    perform(&store, &owner, &add, Ts::now()).expect("add");
    let text = std::fs::read_to_string(p.lx("journal.jsonl")).unwrap();
    let ev: loopx::kernel::Event = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(ev.action, Action::TodoAdd);
    assert_eq!(ev.actor, ops::OWNER);
    let key = OwnerPub::parse(&std::fs::read_to_string(p.lx("owner.pub")).unwrap()).unwrap();
    assert!(authority::event_signed(&ev, Some(&key)), "unsigned: {ev:?}");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_journal_line_with_an_unknown_action_still_reads() {
    use sha2::Digest;
    let p = Project::new("names-unknown-action");
    p.add("work", &[]);
    let path = p.lx("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let last = text.lines().last().unwrap();
    let seq = serde_json::from_str::<Value>(last).unwrap()["seq"]
        .as_u64()
        .unwrap();
    let prev = authority::to_hex(&sha2::Sha256::digest(last.as_bytes()));
    let line = format!(
        "{{\"seq\":{},\"at\":\"2026-01-01T00:00:00.000Z\",\"actor\":\"future\",\"action\":\"todo.teleport\",\"target\":\"t-aaaaaa\",\"data\":{{}},\"prev\":\"{prev}\"}}\n",
        seq + 1
    );
    std::fs::write(&path, format!("{text}{line}")).unwrap();
    let v = p.ok(&["log", "--verify"]);
    assert_eq!(v["ok"], true);
    let v = p.ok(&["log", "--limit", "1"]);
    assert_eq!(v["events"][0]["action"], "todo.teleport", "{v}");
    // A new line after it keeps the chain, and the unknown line is written back unchanged.
    p.add("more", &[]);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(line.trim_end()), "the unknown line changed");
    let ev: loopx::kernel::Event = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(ev.action, Action::Other("todo.teleport".into()));
    assert_eq!(serde_json::to_string(&ev).unwrap(), line.trim_end());
}
