//! Integration tests of the real binary: every command and every exit code of the contract.

mod common;

use std::process::Command;

use common::{Project, TempDir, assert_err, assert_same_files, git, is_id, parse_json, run_cmd};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|t| s(&t["id"]).to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// start-goal and goal

#[test]
fn start_goal_creates_the_layout() {
    let p = Project::empty("start");
    let v = p.ok(&[
        "start-goal",
        "--goal-text",
        "Ship the benchmark",
        "--success",
        "all suites green",
        "--success",
        "report written",
    ]);
    let g = &v["goal"];
    assert_eq!(g["objective"], "Ship the benchmark");
    assert_eq!(g["status"], "active");
    assert_eq!(
        g["success_criteria"],
        serde_json::json!(["all suites green", "report written"])
    );
    for f in [
        "loopx.toml",
        "quota.toml",
        "journal.jsonl",
        "todos",
        "archive",
        "gates",
        "evidence",
    ] {
        assert!(p.lx(f).exists(), "{f} missing after start-goal");
    }
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("loopx.toml");
    assert!(cfg.contains("schema_version = 1"), "{cfg}");
    let journal = p.journal();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0]["seq"], 1);
    assert_eq!(journal[0]["action"], "goal.start");
    assert_eq!(journal[0]["prev"], "0".repeat(64));

    let shown = p.ok(&["goal", "show"]);
    assert_eq!(shown["goal"]["id"], g["id"]);
    assert_eq!(shown["goal"]["objective"], "Ship the benchmark");
    let r = p.run(&["goal", "show"]);
    assert_eq!(r.code, 0);
    assert!(
        r.stdout.contains("Ship the benchmark") && r.stdout.contains("report written"),
        "{r:?}"
    );
}

#[test]
fn start_goal_guided_off_a_terminal_prints_the_next_commands() {
    let p = Project::empty("guided");
    let r = p.run(&["start-goal", "--guided", "--goal-text", "Guided goal"]);
    assert_eq!(r.code, 0, "{r:?}");
    for cmd in [
        "loopx todo add",
        "loopx quota should-run",
        "loopx todo claim",
        "loopx todo update",
        "loopx quota spend-slot",
        "loopx refresh-state",
    ] {
        assert!(r.stdout.contains(cmd), "guided output lacks `{cmd}`: {r:?}");
    }
    assert!(p.lx("loopx.toml").is_file());
}

#[test]
fn start_goal_twice_is_goal_exists_and_replace_moves_to_history() {
    let p = Project::new("replace");
    let old = p.ok(&["goal", "show"])["goal"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let todo = p.add("old work", &[]);
    let before = p.files();

    let v = p.fails(&["start-goal", "--goal-text", "Another"], "goal_exists");
    assert!(
        v["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("--replace")),
        "{v}"
    );
    assert_same_files(&before, &p.files(), "start-goal on an existing goal");

    let v = p.ok(&["start-goal", "--goal-text", "The new goal", "--replace"]);
    let new = s(&v["goal"]["id"]).to_string();
    assert_ne!(new, old);
    let hist = p.lx(&format!("history/{old}"));
    for f in ["loopx.toml", "journal.jsonl", "quota.toml"] {
        assert!(hist.join(f).is_file(), "history/{old}/{f} missing");
    }
    assert!(
        hist.join(format!("todos/{todo}.toml")).is_file(),
        "the old todo did not move to history"
    );
    let old_cfg = std::fs::read_to_string(hist.join("loopx.toml")).expect("old config");
    assert!(old_cfg.contains("Test objective"), "{old_cfg}");

    assert_eq!(p.ok(&["goal", "show"])["goal"]["objective"], "The new goal");
    assert_eq!(ids(&p.ok(&["todo", "list"])["todos"]).len(), 0);
    assert_eq!(p.journal().len(), 1, "the new goal starts a new journal");
    assert_eq!(p.run(&["log", "--verify"]).code, 0);
    assert_eq!(p.run(&["doctor"]).code, 0);
}

#[test]
fn start_goal_needs_an_existing_project_dir() {
    let p = Project::empty("noproj");
    let missing = p.root().join("does-not-exist");
    let v = p.fails(
        &[
            "start-goal",
            "--goal-text",
            "x",
            "--project",
            missing.to_str().expect("utf8"),
        ],
        "usage",
    );
    assert!(s(&v["error"]["message"]).contains("does-not-exist"), "{v}");
    assert!(!missing.exists());
}

#[test]
fn goal_pause_resume_complete() {
    let p = Project::new("pause");
    let id = p.add("work", &[]);

    let v = p.ok(&["goal", "pause", "--reason", "budget review"]);
    assert_eq!(v["goal"]["status"], "paused");
    let (code, v) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3);
    assert_eq!(v["ok"], true);
    assert_eq!(v["decision"], "paused");
    assert_eq!(v["should_run"], false);
    assert_eq!(v["todo"], Value::Null);
    p.fails(&["todo", "claim"], "nothing_ready");
    let r = p.run(&["goal", "show"]);
    assert!(
        r.stdout.contains("paused") && r.stdout.contains("budget review"),
        "{r:?}"
    );

    let v = p.ok(&["goal", "resume"]);
    assert_eq!(v["goal"]["status"], "active");
    let (code, v) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["decision"], "run");
    assert_eq!(v["todo"]["id"], id.as_str());

    let v = p.ok(&["goal", "complete", "--reason", "all done"]);
    assert_eq!(v["goal"]["status"], "complete");
    assert_eq!(v["goal"]["reason"], "all done");
    let (code, v) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3);
    assert_eq!(v["decision"], "paused");
    p.fails(&["todo", "claim"], "nothing_ready");
    let actions: Vec<String> = p
        .journal()
        .iter()
        .map(|e| s(&e["action"]).to_string())
        .collect();
    for a in ["goal.pause", "goal.resume", "goal.complete"] {
        assert!(
            actions.iter().any(|x| x == a),
            "journal lacks {a}: {actions:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The seed agent loop, exactly as typed

#[test]
fn seed_agent_loop_as_typed() {
    let p = Project::empty("seed");
    let typed: &[&[&str]] = &[
        &[
            "start-goal",
            "--guided",
            "--project",
            ".",
            "--goal-text",
            "Run a multi-day benchmark suite",
        ],
        &["doctor"],
        &["status"],
        &["todo", "add", "first step", "--priority", "P1"],
        &["quota", "should-run"],
        &["todo", "claim"],
        &["todo", "update", "--evidence", "what this turn proved"],
        &["quota", "spend-slot"],
        &["refresh-state"],
    ];
    for args in typed {
        let r = p.run(args);
        assert_eq!(r.code, 0, "loopx {args:?} in the seed loop: {r:?}");
        assert!(
            !r.stdout.trim().is_empty(),
            "loopx {args:?} printed nothing: {r:?}"
        );
    }
    let state = std::fs::read_to_string(p.lx("STATE.md")).expect("STATE.md written");
    assert!(state.contains("Run a multi-day benchmark suite"), "{state}");
    assert!(state.contains("first step"), "{state}");
    assert!(state.contains("what this turn proved"), "{state}");
    // And the loop left a healthy project with one spent slot and evidence.
    assert_eq!(p.run(&["doctor"]).code, 0);
    assert_eq!(p.ok(&["quota", "show"])["quota"]["used"], 1);
    let todos = p.ok(&["todo", "list"])["todos"].clone();
    let id = s(&todos[0]["id"]).to_string();
    let ev = p.evidence(&id);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["summary"], "what this turn proved");
    assert_eq!(ev[0]["agent"], "local");
}

// ---------------------------------------------------------------------------------------------
// Finding the state

#[test]
fn discovery_walks_up_from_a_subdirectory() {
    let p = Project::new("discover");
    let sub = p.root().join("a").join("b").join("c");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let goal = p.ok(&["goal", "show"])["goal"]["id"].clone();
    let mut c = p.cmd(&["todo", "add", "from below", "--json"]);
    c.current_dir(&sub);
    let r = run_cmd(&mut c);
    assert_eq!(r.code, 0, "{r:?}");
    let v = parse_json(&r, "todo add from a subdirectory");
    let id = s(&v["todo"]["id"]).to_string();
    assert!(p.lx(&format!("todos/{id}.toml")).is_file());
    assert!(!sub.join(".loopx").exists());
    let mut c = p.cmd(&["status", "--json"]);
    c.current_dir(&sub);
    let v = parse_json(&run_cmd(&mut c), "status from a subdirectory");
    assert_eq!(v["goal"]["id"], goal);
}

#[test]
fn no_loopx_dir_is_not_initialized_with_a_hint() {
    let p = Project::empty("noinit");
    let dir = p.root().to_str().expect("utf8").to_string();
    for args in [
        vec!["status"],
        vec!["todo", "list"],
        vec!["todo", "claim"],
        vec!["quota", "should-run"],
        vec!["doctor"],
        vec!["gate", "list"],
        vec!["log"],
    ] {
        let mut a = vec!["--dir", dir.as_str()];
        a.extend(args.iter());
        let v = p.fails(&a, "not_initialized");
        let hint = s(&v["error"]["hint"]);
        assert!(
            hint.contains("loopx start-goal --goal-text"),
            "{args:?}: {v}"
        );
        let r = p.run(&a);
        assert_eq!(r.code, 5);
        assert!(r.stderr.contains("loopx start-goal --goal-text"), "{r:?}");
    }
    // Without --dir too (the temp dir has no .loopx/ above it).
    let v = p.fails(&["status"], "not_initialized");
    assert!(
        s(&v["error"]["hint"]).contains("loopx start-goal --goal-text"),
        "{v}"
    );
    assert!(!p.root().join(".loopx").exists(), "a read created .loopx/");
}

#[test]
fn dir_flag_beats_loopx_dir_env() {
    let a = Project::new("env-a");
    let b = Project::new("env-b");
    let elsewhere = TempDir::new("elsewhere");
    let goal_a = a.ok(&["goal", "show"])["goal"]["id"].clone();
    let goal_b = b.ok(&["goal", "show"])["goal"]["id"].clone();
    assert_ne!(goal_a, goal_b);

    let mut c = a.cmd(&[
        "goal",
        "show",
        "--json",
        "--dir",
        b.root().to_str().expect("utf8"),
    ]);
    c.current_dir(&elsewhere.path).env("LOOPX_DIR", a.root());
    let v = parse_json(&run_cmd(&mut c), "--dir with LOOPX_DIR");
    assert_eq!(v["goal"]["id"], goal_b, "--dir must beat LOOPX_DIR");

    let mut c = a.cmd(&["goal", "show", "--json"]);
    c.current_dir(&elsewhere.path).env("LOOPX_DIR", a.root());
    let v = parse_json(&run_cmd(&mut c), "LOOPX_DIR alone");
    assert_eq!(v["goal"]["id"], goal_a);

    // LOOPX_AGENT names the agent; --agent beats it.
    let id = a.add("x", &[]);
    let mut c = a.cmd(&["todo", "claim", &id, "--json", "--agent", "flag-agent"]);
    c.env("LOOPX_AGENT", "env-agent");
    let v = parse_json(&run_cmd(&mut c), "claim with LOOPX_AGENT and --agent");
    assert_eq!(v["todo"]["lease"]["holder"], "flag-agent");
    let mut c = a.cmd(&["todo", "list", "--mine", "--json"]);
    c.env("LOOPX_AGENT", "flag-agent");
    let v = parse_json(&run_cmd(&mut c), "list --mine with LOOPX_AGENT");
    assert_eq!(ids(&v["todos"]), vec![id]);
}

// ---------------------------------------------------------------------------------------------
// todo add, list, show, ids

#[test]
fn todo_add_list_show() {
    let p = Project::new("add");
    let low = p.add("low", &["--priority", "P3"]);
    let high = p.add("high", &["--priority", "P0"]);
    let user = p.add("sign the form", &["--role", "user"]);
    let dep = p.add("after high", &["--depends-on", &high]);
    let every = p.add("monitor", &["--every", "1h"]);

    let t = p.show(&dep);
    assert_eq!(t["depends_on"], serde_json::json!([high.clone()]));
    assert_eq!(t["status"], "open");
    assert_eq!(t["priority"], "P2");
    assert_eq!(t["role"], "agent");
    assert_eq!(t["fence"], 0);
    assert!(
        t["blockers"].as_array().is_some_and(|b| b.len() == 1),
        "{t}"
    );
    assert!(t["evidence"].as_array().is_some_and(Vec::is_empty), "{t}");
    assert_eq!(p.show(&user)["role"], "user");
    assert_eq!(p.show(&every)["every"], "1h");
    assert_eq!(p.show(&low)["priority"], "P3");

    let all = ids(&p.ok(&["todo", "list"])["todos"]);
    assert_eq!(all.len(), 5);
    assert_eq!(all[0], high, "list is in pick order: {all:?}");
    assert_eq!(all.last(), Some(&low));
    let ready = ids(&p.ok(&["todo", "list", "--ready"])["todos"]);
    assert!(
        ready.contains(&high) && ready.contains(&low) && ready.contains(&every),
        "{ready:?}"
    );
    assert!(!ready.contains(&user) && !ready.contains(&dep), "{ready:?}");
    assert_eq!(ready[0], high);
    assert!(ids(&p.ok(&["todo", "list", "--mine"])["todos"]).is_empty());
    p.ok(&["todo", "claim", &low]);
    assert_eq!(
        ids(&p.ok(&["todo", "list", "--mine"])["todos"]),
        vec![low.clone()]
    );
    assert!(ids(&p.ok_as("other", &["todo", "list", "--mine"])["todos"]).is_empty());

    // Text output is one line a todo, with the id.
    let r = p.run(&["todo", "list"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout.lines().count(), 5, "{r:?}");
    assert!(r.stdout.contains(&high));
    // todo add prints the id.
    let r = p.run(&["todo", "add", "plain"]);
    assert_eq!(r.code, 0);
    assert!(is_id(r.stdout.trim(), "t-"), "{r:?}");
    // A dependency that does not exist.
    p.fails(&["todo", "add", "x", "--depends-on", "zzzzzz"], "not_found");
}

#[test]
fn done_todos_are_archived_and_listed_by_status() {
    let p = Project::new("archive");
    let id = p.add("finish me", &[]);
    let keep = p.add("stay open", &["--priority", "P4"]);
    p.ok(&["todo", "claim", &id]);
    let v = p.ok(&[
        "todo",
        "update",
        &id,
        "--evidence",
        "done it",
        "--status",
        "done",
    ]);
    assert_eq!(v["todo"]["status"], "done");
    assert!(v["todo"].get("lease").is_none(), "{v}");
    assert!(!p.lx(&format!("todos/{id}.toml")).exists());
    let arch = std::fs::read_to_string(p.lx(&format!("archive/{id}.toml"))).expect("archived");
    assert!(arch.contains("status = \"done\""), "{arch}");

    assert_eq!(ids(&p.ok(&["todo", "list"])["todos"]), vec![keep.clone()]);
    assert_eq!(
        ids(&p.ok(&["todo", "list", "--status", "done"])["todos"]),
        vec![id.clone()]
    );
    assert!(ids(&p.ok(&["todo", "list", "--status", "cancelled"])["todos"]).is_empty());
    let t = p.show(&id);
    assert_eq!(t["status"], "done");
    assert_eq!(t["evidence"].as_array().map(Vec::len), Some(1));
    // An archived todo cannot change, nor be claimed.
    p.fails(&["todo", "update", &id, "--evidence", "late"], "not_found");
    let e = p.fails(&["todo", "claim", &id], "not_found");
    assert_eq!(
        e["error"]["message"],
        format!("{id} is done and archived: there is nothing to claim").as_str(),
        "{e}"
    );
    // A dependency on a done todo is satisfied.
    let after = p.add("after", &["--depends-on", &id, "--priority", "P0"]);
    assert_eq!(p.ok(&["todo", "claim"])["todo"]["id"], after.as_str());

    // cancelled archives too.
    p.ok(&["todo", "claim", &keep]);
    p.ok(&[
        "todo",
        "update",
        &keep,
        "--status",
        "cancelled",
        "--reason",
        "not needed",
    ]);
    assert_eq!(
        ids(&p.ok(&["todo", "list", "--status", "cancelled"])["todos"]),
        vec![keep.clone()]
    );
    let v = p.ok(&["status"]);
    assert_eq!(v["archived"], 2);
}

#[test]
fn id_prefixes_ambiguity_and_not_found() {
    let p = Project::new("ids");
    p.write_todo("t-abcdef", "");
    p.write_todo("t-abcxyz", "");
    assert_eq!(p.show("abcd")["id"], "t-abcdef");
    assert_eq!(p.show("t-abcx")["id"], "t-abcxyz");
    assert_eq!(p.show("ABCDEF")["id"], "t-abcdef");
    assert_eq!(p.show("t-abcdef")["id"], "t-abcdef");
    let v = p.fails(&["todo", "show", "abc"], "ambiguous_id");
    let m = s(&v["error"]["message"]);
    assert!(m.contains("t-abcdef") && m.contains("t-abcxyz"), "{v}");
    p.fails(&["todo", "claim", "t-abc"], "ambiguous_id");
    p.fails(&["todo", "show", "zzz"], "not_found");
    p.fails(&["todo", "claim", "t-zzzzzz"], "not_found");
    p.fails(&["todo", "show", "ab"], "usage");
    p.fails(&["gate", "approve", "g-zzzzzz"], "not_found");
    // A prefix resolves for claim and update too.
    let v = p.ok(&["todo", "claim", "abcx"]);
    assert_eq!(v["todo"]["id"], "t-abcxyz");
    p.ok(&["todo", "update", "abcx", "--evidence", "by prefix"]);
    assert_eq!(p.evidence("t-abcxyz").len(), 1);
}

#[test]
fn path_like_ids_are_refused_and_touch_nothing() {
    let p = Project::new("paths");
    let id = p.add("target", &[]);
    p.ok(&["todo", "claim", &id]);
    let g = p.gate("q?", &[]);
    assert!(is_id(&g, "g-"));
    let before = p.files();
    for bad in ["../x", "a/b", "..\\x", "..", "/etc/passwd", "t-../../x"] {
        for args in [
            vec!["todo", "show", bad],
            vec!["todo", "claim", bad],
            vec!["todo", "update", bad, "--evidence", "x"],
            vec!["todo", "update", bad, "--status", "done"],
            vec!["todo", "release", bad],
            vec!["todo", "renew", bad],
            vec!["todo", "reopen", bad],
            vec!["todo", "reassign", bad, "--to", "b"],
            vec!["todo", "add", "x", "--depends-on", bad],
            vec!["gate", "open", "q", "--blocks", bad],
            vec!["gate", "approve", bad],
            vec!["gate", "reject", bad, "--reason", "no"],
        ] {
            let v = p.fails(&args, "usage");
            assert!(
                s(&v["error"]["message"]).contains("path")
                    || s(&v["error"]["message"]).contains("id"),
                "{v}"
            );
        }
    }
    assert_same_files(&before, &p.files(), "path-like ids");
}

#[test]
fn unknown_keys_survive_a_rewrite() {
    let p = Project::new("extra");
    p.write_todo(
        "t-keepme",
        "custom_note = \"keep me\"\n\n[custom_table]\nanswer = 42\n",
    );
    p.ok(&["todo", "claim", "keepme"]);
    p.ok(&[
        "todo", "update", "keepme", "--status", "blocked", "--reason", "wait",
    ]);
    let text = std::fs::read_to_string(p.lx("todos/t-keepme.toml")).expect("todo");
    assert!(text.contains("custom_note = \"keep me\""), "{text}");
    assert!(text.contains("answer = 42"), "{text}");

    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("config");
    std::fs::write(
        p.lx("loopx.toml"),
        format!("{cfg}\n[owner_notes]\nremember = \"this\"\n"),
    )
    .expect("write");
    p.ok(&["quota", "set", "--slots", "7"]);
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("config");
    assert!(cfg.contains("remember = \"this\""), "{cfg}");
    assert!(cfg.contains("slots = 7"), "{cfg}");
}

// ---------------------------------------------------------------------------------------------
// claim

#[test]
fn claim_takes_the_best_by_priority_then_age() {
    let p = Project::new("claim");
    let p2 = p.add("normal", &[]);
    let p1_old = p.add("urgent, older", &["--priority", "P1"]);
    let p1_new = p.add("urgent, newer", &["--priority", "P1"]);

    let v = p.ok(&["todo", "claim"]);
    let t = &v["todo"];
    assert_eq!(t["id"], p1_old.as_str());
    assert_eq!(t["fence"], 1);
    assert_eq!(t["lease"]["holder"], "local");
    assert_eq!(t["lease"]["fence"], 1);
    assert!(s(&t["lease"]["expires_at"]) > s(&t["lease"]["acquired_at"]));
    // A bare claim never returns what this agent holds.
    assert_eq!(p.ok(&["todo", "claim"])["todo"]["id"], p1_new.as_str());
    assert_eq!(p.ok(&["todo", "claim"])["todo"]["id"], p2.as_str());
    let v = p.fails(&["todo", "claim"], "nothing_ready");
    assert!(v["error"]["hint"].is_string(), "{v}");
    let r = p.run(&["todo", "claim"]);
    assert_eq!(r.code, 3);
    assert!(r.stdout.is_empty(), "{r:?}");
    // Another agent finds nothing ready either: every todo is leased.
    p.fails_as("agent-b", &["todo", "claim"], "nothing_ready");
    assert_eq!(ids(&p.ok(&["todo", "list", "--mine"])["todos"]).len(), 3);
}

#[test]
fn claim_of_a_todo_that_is_not_ready_says_why() {
    let p = Project::new("notready");
    let first = p.add("first", &[]);
    let second = p.add("second", &["--depends-on", &first]);
    let v = p.fails(&["todo", "claim", &second], "not_ready");
    assert!(s(&v["error"]["message"]).contains(&first), "{v}");
    assert_eq!(v["error"]["details"]["reasons"][0]["kind"], "dependency");

    let gated = p.add("gated", &[]);
    let g = p.gate("May I?", &["--blocks", &gated]);
    let v = p.fails(&["todo", "claim", &gated], "not_ready");
    assert!(s(&v["error"]["message"]).contains(&g), "{v}");
    assert_eq!(v["error"]["details"]["reasons"][0]["kind"], "gate");

    let user = p.add("the owner signs", &["--role", "user"]);
    let v = p.fails(&["todo", "claim", &user], "not_ready");
    assert_eq!(v["error"]["details"]["reasons"][0]["kind"], "user_role");

    let monitor = p.add("monitor", &["--every", "1h"]);
    p.ok(&["todo", "claim", &monitor]);
    p.ok(&["todo", "update", &monitor, "--status", "done"]);
    let v = p.fails(&["todo", "claim", &monitor], "not_ready");
    assert_eq!(v["error"]["details"]["reasons"][0]["kind"], "not_due");
    assert!(s(&v["error"]["message"]).contains("not due"), "{v}");

    let r = p.run(&["todo", "claim", &second]);
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains("not ready"), "{r:?}");
    // None of them was leased.
    for id in [&second, &gated, &user, &monitor] {
        assert!(p.show(id).get("lease").is_none(), "{id} got a lease");
    }
}

#[test]
fn claim_of_a_todo_leased_by_another_is_lease_conflict() {
    let p = Project::new("conflict");
    let id = p.add("contended", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let before = p.files();
    let v = p.fails_as("agent-b", &["todo", "claim", &id], "lease_conflict");
    assert!(s(&v["error"]["message"]).contains("agent-a"), "{v}");
    assert_eq!(v["error"]["details"]["holder"], "agent-a");
    assert_same_files(&before, &p.files(), "a conflicting claim");
    p.fails_as(
        "agent-b",
        &["todo", "update", &id, "--evidence", "x"],
        "lease_conflict",
    );
    p.fails_as("agent-b", &["todo", "release", &id], "lease_conflict");
    p.fails_as("agent-b", &["todo", "renew", &id], "lease_conflict");
    assert_same_files(&before, &p.files(), "writes by a non-holder");
}

#[test]
fn claiming_again_what_you_hold_renews_with_the_same_fence() {
    let p = Project::new("renew");
    let id = p.add("mine", &[]);
    let first = p.ok(&["todo", "claim", &id, "--ttl", "1m"])["todo"].clone();
    let again = p.ok(&["todo", "claim", &id, "--ttl", "1h"])["todo"].clone();
    assert_eq!(again["fence"], 1);
    assert_eq!(again["lease"]["fence"], 1);
    assert_eq!(again["lease"]["acquired_at"], first["lease"]["acquired_at"]);
    assert!(
        s(&again["lease"]["expires_at"]) > s(&first["lease"]["expires_at"]),
        "{first} {again}"
    );
    let renewed = p.ok(&["todo", "renew", "--ttl", "2h"])["todo"].clone();
    assert_eq!(renewed["lease"]["fence"], 1);
    assert!(s(&renewed["lease"]["expires_at"]) > s(&again["lease"]["expires_at"]));
    let actions: Vec<String> = p
        .journal()
        .iter()
        .map(|e| s(&e["action"]).to_string())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| *a == "todo.claim").count(),
        1,
        "{actions:?}"
    );
    assert_eq!(
        actions.iter().filter(|a| *a == "todo.renew").count(),
        2,
        "{actions:?}"
    );
    p.fails(&["todo", "claim", &id, "--ttl", "0s"], "usage");
    p.fails(&["todo", "renew", &id, "--ttl", "8d"], "usage");
}

#[test]
fn an_expired_lease_is_reclaimed_with_a_new_fence_and_the_old_holder_is_fenced_off() {
    let p = Project::new("expire");
    let id = p.add("long job", &[]);
    let v = p.ok_as("agent-a", &["todo", "claim", &id, "--ttl", "1s"]);
    assert_eq!(v["todo"]["lease"]["fence"], 1);
    std::thread::sleep(std::time::Duration::from_millis(1100));

    // doctor warns about the expired lease but the project is healthy.
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ok"], true);
    let f = v["findings"].as_array().expect("findings");
    assert!(
        f.iter().any(|f| f["severity"] == "warning"
            && s(&f["message"]).contains("expired")
            && f["fixable"] == true),
        "{v}"
    );
    // The old holder cannot write any more, even without a fence.
    p.fails_as(
        "agent-a",
        &["todo", "update", &id, "--evidence", "late"],
        "lease_conflict",
    );

    let v = p.ok_as("agent-b", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], id.as_str());
    assert_eq!(v["todo"]["fence"], 2);
    assert_eq!(v["todo"]["lease"]["holder"], "agent-b");
    let last = p.journal().pop().expect("journal");
    assert_eq!(last["action"], "todo.claim");
    assert_eq!(last["data"]["reclaimed_from"]["holder"], "agent-a");

    let before = p.files();
    let v = p.fails_as(
        "agent-a",
        &[
            "todo",
            "update",
            &id,
            "--fence",
            "1",
            "--evidence",
            "late",
            "--status",
            "done",
        ],
        "stale_fence",
    );
    assert_eq!(v["error"]["details"]["fence"], 2);
    assert_same_files(&before, &p.files(), "an update with a stale fence");
    p.fails_as(
        "agent-a",
        &["todo", "update", &id, "--evidence", "late"],
        "lease_conflict",
    );
    assert_same_files(&before, &p.files(), "an update by the old holder");
    // The new holder with the right fence writes.
    p.ok_as(
        "agent-b",
        &["todo", "update", &id, "--fence", "2", "--evidence", "fresh"],
    );
    let ev = p.evidence(&id);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["fence"], 2);
    assert_eq!(ev[0]["agent"], "agent-b");
}

// ---------------------------------------------------------------------------------------------
// update, release, renew, reopen, reassign

#[test]
fn update_appends_notes_artifacts_and_metrics() {
    let p = Project::new("evidence");
    let id = p.add("measure", &[]);
    p.ok(&["todo", "claim", &id]);
    let artifact = p.root().join("report.txt");
    std::fs::write(&artifact, b"benchmark report\n").expect("artifact");
    let want_sha: String = Sha256::digest(b"benchmark report\n")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let v = p.ok(&[
        "todo",
        "update",
        &id,
        "--fence",
        "1",
        "--evidence",
        "unit tests pass (42/42)",
        "--artifact",
        "report.txt",
        "--metric",
        "p95_ms=12.5",
        "--metric",
        "mode=fast",
    ]);
    assert_eq!(v["todo"]["status"], "open");
    assert_eq!(
        v["todo"]["lease"]["holder"], "local",
        "evidence alone keeps the lease"
    );
    let ev = p.evidence(&id);
    assert_eq!(ev.len(), 4, "{ev:?}");
    assert_eq!(ev[0]["kind"], "note");
    assert_eq!(ev[0]["summary"], "unit tests pass (42/42)");
    assert_eq!(ev[0]["fence"], 1);
    assert_eq!(ev[0]["agent"], "local");
    assert!(
        s(&ev[0]["at"]).ends_with('Z') && s(&ev[0]["at"]).len() == 24,
        "{}",
        ev[0]
    );
    assert_eq!(ev[1]["kind"], "artifact");
    assert_eq!(ev[1]["path"], "report.txt");
    assert_eq!(ev[1]["sha256"], want_sha.as_str());
    assert_eq!(ev[2]["kind"], "metric");
    assert_eq!(ev[2]["name"], "p95_ms");
    assert_eq!(ev[2]["value"], 12.5);
    assert_eq!(ev[3]["name"], "mode");
    assert_eq!(ev[3]["value"], "fast");
    // --kind applies to --evidence entries.
    p.ok(&[
        "todo",
        "update",
        &id,
        "--evidence",
        "cargo test",
        "--kind",
        "command",
    ]);
    assert_eq!(p.evidence(&id)[4]["kind"], "command");
    // A missing artifact is a usage error and writes nothing.
    let before = p.files();
    p.fails(&["todo", "update", &id, "--artifact", "nope.bin"], "usage");
    p.fails(&["todo", "update", &id, "--metric", "novalue"], "usage");
    p.fails(
        &["todo", "update", &id, "--kind", "bogus", "--evidence", "x"],
        "usage",
    );
    assert_same_files(&before, &p.files(), "failed updates");
    // show lists the recent evidence.
    let t = p.show(&id);
    assert_eq!(t["evidence"].as_array().map(Vec::len), Some(5));
}

fn auto_evidence_for(p: &Project, ceiling: bool) -> Value {
    let id = p.add("auto", &[]);
    p.ok(&["todo", "claim", &id]);
    let mut c = p.cmd(&["todo", "update", "--json"]);
    if ceiling {
        c.env(
            "GIT_CEILING_DIRECTORIES",
            p.root().parent().expect("parent"),
        );
    }
    let r = run_cmd(&mut c);
    assert_eq!(r.code, 0, "{r:?}");
    parse_json(&r, "todo update without flags");
    let ev = p.evidence(&id);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["kind"], "auto");
    assert_eq!(ev[0]["fence"], 1);
    assert!(
        ev[0]["since_claim_s"].as_i64().is_some_and(|n| n >= 0),
        "{}",
        ev[0]
    );
    p.ok(&["todo", "release", &id]);
    ev[0].clone()
}

#[test]
fn update_without_flags_captures_auto_evidence_outside_git() {
    let p = Project::new("nogit");
    let e = auto_evidence_for(&p, true);
    assert!(s(&e["summary"]).contains("not a git work tree"), "{e}");
    assert!(e.get("commit").is_none(), "{e}");
}

#[test]
fn update_without_flags_captures_auto_evidence_in_git() {
    let p = Project::new("git");
    git(p.root(), &["init", "-q"]);
    std::fs::write(p.root().join("work.txt"), "draft").expect("write");
    let e = auto_evidence_for(&p, false);
    assert!(s(&e["summary"]).contains("no commits yet"), "{e}");
    let files: Vec<&str> = e["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(s)
        .collect();
    assert!(files.contains(&"work.txt"), "{e}");
    assert!(files.iter().all(|f| !f.starts_with(".loopx")), "{e}");

    git(p.root(), &["add", "work.txt"]);
    git(p.root(), &["commit", "-q", "-m", "first"]);
    let head = Command::new("git")
        .arg("-C")
        .arg(p.root())
        .args(["rev-parse", "HEAD"])
        .output()
        .expect("git");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    std::fs::write(p.root().join("work.txt"), "changed").expect("write");
    let e = auto_evidence_for(&p, false);
    assert_eq!(e["commit"], head.as_str(), "{e}");
    assert!(s(&e["summary"]).contains(&head[..12]), "{e}");
    assert!(
        e["files"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "work.txt")),
        "{e}"
    );

    // A rename, a staged new file and a name with a space are all listed, by their new names.
    git(p.root(), &["mv", "work.txt", "renamed work.txt"]);
    std::fs::write(p.root().join("new.txt"), "n").expect("write");
    git(p.root(), &["add", "new.txt"]);
    let e = auto_evidence_for(&p, false);
    let files: Vec<&str> = e["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(s)
        .collect();
    assert!(files.contains(&"renamed work.txt"), "{e}");
    assert!(files.contains(&"new.txt"), "{e}");
    assert!(!files.contains(&"work.txt"), "{e}");
}

#[test]
fn update_blocked_releases_and_reopen_returns_it() {
    let p = Project::new("blocked");
    let id = p.add("needs data", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let v = p.ok_as(
        "agent-a",
        &[
            "todo",
            "update",
            &id,
            "--status",
            "blocked",
            "--reason",
            "no dataset yet",
        ],
    );
    assert_eq!(v["todo"]["status"], "blocked");
    assert_eq!(v["todo"]["reason"], "no dataset yet");
    assert!(v["todo"].get("lease").is_none(), "{v}");
    assert_eq!(
        v["todo"]["fence"], 1,
        "the fence is kept after the lease ends"
    );
    p.fails_as("agent-a", &["todo", "claim", &id], "not_ready");
    let (code, sr) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3);
    assert_eq!(sr["decision"], "idle", "{sr}");

    let v = p.ok_as("agent-a", &["todo", "reopen", &id]);
    assert_eq!(v["todo"]["status"], "open");
    let v = p.ok_as("agent-b", &["todo", "claim", &id]);
    assert_eq!(v["todo"]["fence"], 2);
    // deferred releases too.
    p.ok_as("agent-b", &["todo", "update", &id, "--status", "deferred"]);
    assert_eq!(p.show(&id)["status"], "deferred");
    assert!(p.show(&id).get("lease").is_none());
    p.ok_as("agent-b", &["todo", "reopen", &id]);
}

#[test]
fn a_recurring_todo_done_stays_open_with_next_due_at() {
    let p = Project::new("recur");
    let id = p.add("check the queue", &["--every", "1h"]);
    p.ok(&["todo", "claim", &id]);
    let v = p.ok(&[
        "todo",
        "update",
        &id,
        "--evidence",
        "queue ok",
        "--status",
        "done",
    ]);
    assert_eq!(v["todo"]["status"], "open");
    assert!(v["todo"].get("lease").is_none(), "{v}");
    let due = s(&v["todo"]["next_due_at"]).to_string();
    assert!(due.as_str() > s(&v["todo"]["updated_at"]), "{v}");
    assert!(p.lx(&format!("todos/{id}.toml")).is_file());
    assert!(!p.lx(&format!("archive/{id}.toml")).exists());
    // It waits until due: should-run says wait with about an hour.
    let (code, sr) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3);
    assert_eq!(sr["decision"], "wait", "{sr}");
    let retry = sr["retry_after_s"].as_i64().expect("retry_after_s");
    assert!((3500..=3600).contains(&retry), "{sr}");
    p.fails(&["todo", "claim"], "nothing_ready");
}

#[test]
fn update_with_two_leases_and_no_id_lists_them() {
    let p = Project::new("two");
    let a = p.add("a", &[]);
    let b = p.add("b", &[]);
    p.ok(&["todo", "claim"]);
    p.ok(&["todo", "claim"]);
    let before = p.files();
    let v = p.fails(&["todo", "update", "--evidence", "which one?"], "usage");
    let m = s(&v["error"]["message"]);
    assert!(m.contains(&a) && m.contains(&b), "{v}");
    p.fails(&["todo", "release"], "usage");
    p.fails(&["todo", "renew"], "usage");
    assert_same_files(&before, &p.files(), "ambiguous default todo");
    p.ok(&["todo", "update", &a, "--evidence", "this one"]);
}

#[test]
fn update_without_a_lease_is_refused() {
    let p = Project::new("nolease");
    let id = p.add("unclaimed", &[]);
    let before = p.files();
    let v = p.fails(
        &["todo", "update", &id, "--evidence", "x"],
        "lease_conflict",
    );
    assert!(
        v["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("claim")),
        "{v}"
    );
    p.fails(
        &["todo", "update", &id, "--status", "done"],
        "lease_conflict",
    );
    p.fails(
        &["todo", "update", &id, "--fence", "0", "--evidence", "x"],
        "lease_conflict",
    );
    p.fails(
        &["todo", "update", &id, "--fence", "5", "--evidence", "x"],
        "stale_fence",
    );
    p.fails(&["todo", "update", "--evidence", "x"], "lease_conflict");
    p.fails(&["todo", "release", &id], "lease_conflict");
    assert_same_files(&before, &p.files(), "updates without a lease");
}

#[test]
fn release_gives_the_lease_back() {
    let p = Project::new("release");
    let id = p.add("give back", &[]);
    p.ok_as("agent-a", &["todo", "claim"]);
    let v = p.ok_as("agent-a", &["todo", "release"]);
    assert_eq!(v["todo"]["id"], id.as_str());
    assert!(v["todo"].get("lease").is_none(), "{v}");
    assert_eq!(v["todo"]["fence"], 1);
    p.fails_as("agent-a", &["todo", "release", &id], "lease_conflict");
    let v = p.ok_as("agent-b", &["todo", "claim"]);
    assert_eq!(v["todo"]["fence"], 2);
    p.fails_as(
        "agent-a",
        &["todo", "update", &id, "--fence", "1", "--evidence", "x"],
        "stale_fence",
    );
}

#[test]
fn reassign_moves_the_lease_and_fences_off_the_old_holder() {
    let p = Project::new("reassign");
    let id = p.add("hand over", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let v = p.ok(&["todo", "reassign", &id, "--to", "agent-b"]);
    assert_eq!(v["todo"]["fence"], 2);
    assert_eq!(v["todo"]["lease"]["holder"], "agent-b");
    let before = p.files();
    p.fails_as(
        "agent-a",
        &["todo", "update", &id, "--fence", "1", "--evidence", "x"],
        "stale_fence",
    );
    p.fails_as(
        "agent-a",
        &["todo", "update", &id, "--evidence", "x"],
        "lease_conflict",
    );
    assert_same_files(&before, &p.files(), "writes by the old holder");
    p.ok_as(
        "agent-b",
        &[
            "todo",
            "update",
            &id,
            "--fence",
            "2",
            "--evidence",
            "taken over",
        ],
    );
    p.fails(&["todo", "reassign", &id, "--to", "bad agent"], "usage");
    let last = p
        .journal()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "todo.reassign")
        .expect("journaled");
    assert_eq!(last["data"]["from"]["holder"], "agent-a");
}

// ---------------------------------------------------------------------------------------------
// gates

#[test]
fn gates_block_until_approved_and_decisions_are_final() {
    let p = Project::new("gates");
    let id = p.add("spend GPU hours", &[]);
    let v = p.ok(&[
        "gate",
        "open",
        "Spend 40 GPU hours?",
        "--blocks",
        &id,
        "--option",
        "yes",
        "--option",
        "no",
    ]);
    let g = v["gate"].clone();
    let gid = s(&g["id"]).to_string();
    assert!(is_id(&gid, "g-"), "{g}");
    assert_eq!(g["status"], "pending");
    assert_eq!(g["blocks"], serde_json::json!([id.clone()]));
    assert_eq!(g["options"], serde_json::json!(["yes", "no"]));
    assert_eq!(g["opened_by"], "local");
    assert!(p.lx(&format!("gates/{gid}.toml")).is_file());

    assert_eq!(
        ids(&p.ok(&["gate", "list", "--pending"])["gates"]),
        vec![gid.clone()]
    );
    p.fails(&["todo", "claim", &id], "not_ready");
    p.fails(&["todo", "claim"], "nothing_ready");
    let (code, sr) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3);
    assert_eq!(sr["decision"], "ask", "{sr}");
    assert_eq!(sr["questions"][0]["gate"], gid.as_str());
    assert_eq!(sr["questions"][0]["question"], "Spend 40 GPU hours?");

    p.fails(&["gate", "approve", &gid, "--option", "maybe"], "usage");
    let v = p.ok(&[
        "gate", "approve", &gid, "--option", "yes", "--reason", "worth it",
    ]);
    assert_eq!(v["gate"]["status"], "approved");
    assert_eq!(v["gate"]["option"], "yes");
    assert_eq!(v["gate"]["reason"], "worth it");
    assert!(
        v["gate"]["decided_at"].is_string() && v["gate"]["decided_by"].is_string(),
        "{v}"
    );
    let before = p.files();
    p.fails(&["gate", "approve", &gid], "already_decided");
    p.fails(
        &["gate", "reject", &gid, "--reason", "changed my mind"],
        "already_decided",
    );
    p.fails(&["gate", "cancel", &gid], "already_decided");
    assert_same_files(&before, &p.files(), "deciding a decided gate");
    assert!(ids(&p.ok(&["gate", "list", "--pending"])["gates"]).is_empty());
    assert_eq!(ids(&p.ok(&["gate", "list"])["gates"]), vec![gid.clone()]);
    assert_eq!(p.ok(&["todo", "claim"])["todo"]["id"], id.as_str());
    // Text list.
    let r = p.run(&["gate", "list"]);
    assert!(
        r.stdout.contains(&gid) && r.stdout.contains("approved"),
        "{r:?}"
    );
}

#[test]
fn a_rejected_gate_leaves_its_todos_blocked_with_its_reason() {
    let p = Project::new("reject");
    let id = p.add("risky", &[]);
    let other = p.add("independent", &["--priority", "P3"]);
    let gid = p.gate("Delete the old data?", &["--blocks", &id]);
    // Independent work runs while the owner is asked.
    let (code, sr) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 0);
    assert_eq!(sr["decision"], "run");
    assert_eq!(sr["todo"]["id"], other.as_str());
    assert_eq!(sr["questions"][0]["gate"], gid.as_str());

    p.fails(&["gate", "reject", &gid], "usage");
    let v = p.ok(&["gate", "reject", &gid, "--reason", "keep the data"]);
    assert_eq!(v["gate"]["status"], "rejected");
    let t = p.show(&id);
    assert_eq!(t["status"], "blocked");
    assert_eq!(t["reason"], "keep the data");
    p.fails(&["todo", "claim", &id], "not_ready");
    assert_eq!(p.ok(&["todo", "claim"])["todo"]["id"], other.as_str());
}

#[test]
fn global_gates_block_every_agent_todo_and_questions_block_nothing() {
    let p = Project::new("global");
    let id = p.add("anything", &[]);
    let q = p.gate("Just asking: which region?", &[]);
    let (code, sr) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 0, "a question blocks nothing: {sr}");
    assert_eq!(sr["questions"][0]["gate"], q.as_str());

    let gid = p.gate("Stop everything?", &["--global"]);
    p.fails(&["todo", "claim"], "nothing_ready");
    let v = p.fails(&["todo", "claim", &id], "not_ready");
    assert!(s(&v["error"]["message"]).contains(&gid), "{v}");
    let (code, sr) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3);
    assert_eq!(sr["decision"], "ask");
    assert_eq!(sr["questions"].as_array().map(Vec::len), Some(2));
    let v = p.ok(&["gate", "cancel", &gid, "--reason", "never mind"]);
    assert_eq!(v["gate"]["status"], "cancelled");
    assert_eq!(p.ok(&["todo", "claim"])["todo"]["id"], id.as_str());
    // --blocked-by-gate puts a new todo on a pending gate.
    let late = p.add("late", &["--blocked-by-gate", &q]);
    p.fails(&["todo", "claim", &late], "not_ready");
    let g = p.ok(&["gate", "list", "--pending"])["gates"][0].clone();
    assert_eq!(g["blocks"], serde_json::json!([late]));
    p.fails(
        &["todo", "add", "x", "--blocked-by-gate", &gid],
        "already_decided",
    );
}

#[test]
fn should_run_questions_are_capped_and_cut() {
    let p = Project::new("questions");
    p.add("work", &[]);
    let long = "Q".repeat(300);
    for _ in 0..7 {
        p.gate(&long, &[]);
    }
    let (code, v) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 0);
    let qs = v["questions"].as_array().expect("questions");
    assert_eq!(qs.len(), 5);
    assert_eq!(v["questions_more"], 2);
    for q in qs {
        assert_eq!(s(&q["question"]).chars().count(), 200, "{q}");
    }
}

// ---------------------------------------------------------------------------------------------
// quota

fn should_run(p: &Project, agent: &str) -> (i32, Value) {
    let r = p.run(&["--agent", agent, "quota", "should-run", "--json"]);
    assert!(
        r.stdout.len() < 1024,
        "should-run JSON is {} bytes: {}",
        r.stdout.len(),
        r.stdout
    );
    let v = parse_json(&r, "should-run");
    assert_eq!(v["ok"], true, "{v}");
    for k in [
        "should_run",
        "decision",
        "reason",
        "todo",
        "questions",
        "questions_more",
        "quota",
        "retry_after_s",
    ] {
        assert!(v.get(k).is_some(), "should-run lacks {k}: {v}");
    }
    for k in ["used", "limit", "window", "resets_at"] {
        assert!(
            v["quota"].get(k).is_some(),
            "should-run quota lacks {k}: {v}"
        );
    }
    assert_eq!(v["should_run"], v["decision"] == "run");
    assert_eq!(r.code, if v["decision"] == "run" { 0 } else { 3 }, "{v}");
    if v["decision"] != "run" {
        assert_eq!(v["todo"], Value::Null, "{v}");
    }
    (r.code, v)
}

#[test]
fn should_run_decisions() {
    let p = Project::new("decide");
    let (_, v) = should_run(&p, "agent-a");
    assert_eq!(v["decision"], "idle");
    assert_eq!(v["retry_after_s"], Value::Null);

    let id = p.add("the work", &["--priority", "P1"]);
    let (code, v) = should_run(&p, "agent-a");
    assert_eq!(code, 0);
    assert_eq!(v["decision"], "run");
    assert_eq!(v["reason"], "ready_todo");
    assert_eq!(v["todo"]["id"], id.as_str());
    assert_eq!(v["todo"]["priority"], "P1");
    assert_eq!(v["todo"]["title"], "the work");

    p.ok_as("agent-a", &["todo", "claim", "--ttl", "10m"]);
    let (_, v) = should_run(&p, "agent-a");
    assert_eq!(v["decision"], "run");
    assert_eq!(v["reason"], "held_lease");
    assert_eq!(v["todo"]["id"], id.as_str());

    // Another agent waits for the lease to lapse.
    let (_, v) = should_run(&p, "agent-b");
    assert_eq!(v["decision"], "wait");
    let retry = v["retry_after_s"].as_i64().expect("retry_after_s");
    assert!((1..=600).contains(&retry), "{v}");

    // A dependency on leased work: wait as well.
    p.add("after", &["--depends-on", &id]);
    let (_, v) = should_run(&p, "agent-b");
    assert_eq!(v["decision"], "wait");
    assert!(v["retry_after_s"].as_i64().is_some(), "{v}");

    // The text form.
    let r = p.run(&["--agent", "agent-a", "quota", "should-run"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.starts_with("run"), "{r:?}");
}

#[test]
fn should_run_throttles_and_waits_for_the_min_interval() {
    let p = Project::new("throttle");
    p.add("work", &[]);
    // Holding a lease does not beat the quota: throttled comes before run.
    p.ok(&["todo", "claim"]);
    let v = p.ok(&["quota", "set", "--slots", "1"]);
    assert_eq!(v["quota"]["limit"], 1);
    let v = p.ok(&["quota", "spend-slot"]);
    assert_eq!(v["quota"]["used"], 1);
    assert_eq!(v["recorded"], true);
    let (code, v) = should_run(&p, "local");
    assert_eq!(code, 3);
    assert_eq!(v["decision"], "throttled");
    assert_eq!(v["quota"]["used"], 1);
    assert_eq!(v["quota"]["limit"], 1);
    let retry = v["retry_after_s"].as_i64().expect("retry_after_s");
    assert!((86_000..=86_400).contains(&retry), "{v}");

    p.ok(&["quota", "set", "--slots", "100", "--min-interval", "1h"]);
    let (code, v) = should_run(&p, "local");
    assert_eq!(code, 3);
    assert_eq!(v["decision"], "wait");
    assert_eq!(v["reason"], "min_interval");
    let retry = v["retry_after_s"].as_i64().expect("retry_after_s");
    assert!((3500..=3600).contains(&retry), "{v}");
    p.ok(&["quota", "set", "--min-interval", "0s"]);
    assert_eq!(should_run(&p, "local").0, 0);
}

#[test]
fn should_run_never_writes() {
    let p = Project::new("readonly");
    let id = p.add("work", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id, "--ttl", "1s"]);
    p.gate("A question?", &[]);
    p.ok(&["quota", "spend-slot"]);
    let before = p.files();
    for agent in ["agent-a", "agent-b", "local"] {
        should_run(&p, agent);
        p.run(&["--agent", agent, "quota", "should-run"]);
    }
    assert_same_files(&before, &p.files(), "should-run");
}

#[test]
fn spend_slot_dedups_turns_and_quota_show_set() {
    let p = Project::new("spend");
    let v = p.ok(&["quota", "show"]);
    assert_eq!(v["quota"]["limit"], 100);
    assert_eq!(v["quota"]["window"], "24h");
    assert_eq!(v["quota"]["used"], 0);
    assert_eq!(v["quota"]["spends"], serde_json::json!([]));

    let v = p.ok(&[
        "quota",
        "spend-slot",
        "--turn",
        "turn-1",
        "--tokens",
        "1200",
        "--cost-usd",
        "0.25",
    ]);
    assert_eq!(v["recorded"], true);
    let v = p.ok(&["quota", "spend-slot", "--turn", "turn-1"]);
    assert_eq!(v["recorded"], false);
    assert_eq!(v["quota"]["used"], 1);
    p.ok(&["quota", "spend-slot", "--turn", "turn-2", "--slots", "3"]);
    let v = p.ok(&["quota", "show"]);
    assert_eq!(v["quota"]["used"], 4);
    let spends = v["quota"]["spends"].as_array().expect("spends");
    assert_eq!(spends.len(), 2);
    assert_eq!(spends[0]["turn"], "turn-1");
    assert_eq!(spends[0]["tokens"], 1200);
    assert_eq!(spends[0]["cost_usd"], 0.25);
    assert!(v["quota"]["resets_at"].is_string(), "{v}");
    let spent = p
        .journal()
        .iter()
        .filter(|e| e["action"] == "quota.spend")
        .count();
    assert_eq!(spent, 2);

    let v = p.ok(&[
        "quota",
        "set",
        "--slots",
        "5",
        "--window",
        "12h",
        "--min-interval",
        "30s",
    ]);
    assert_eq!(v["quota"]["limit"], 5);
    assert_eq!(v["quota"]["window"], "12h");
    assert_eq!(v["quota"]["min_interval"], "30s");
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("config");
    assert!(
        cfg.contains("slots = 5") && cfg.contains("window = \"12h\""),
        "{cfg}"
    );
    let v = p.ok(&["quota", "show"]);
    assert_eq!(v["quota"]["limit"], 5);
    p.fails(&["quota", "set"], "usage");
    p.fails(&["quota", "set", "--window", "0s"], "usage");
    p.fails(&["quota", "set", "--window", "soon"], "usage");
    let r = p.run(&["quota", "show"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("4 of 5"), "{r:?}");
}

// ---------------------------------------------------------------------------------------------
// status, refresh-state, log, doctor

#[test]
fn status_shows_counts_leases_gates_and_quota() {
    let p = Project::new("status");
    let a = p.add("a", &[]);
    p.add("b", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a]);
    let g = p.gate("Go?", &[]);
    p.ok(&["quota", "spend-slot"]);
    let v = p.ok(&["status"]);
    assert_eq!(v["goal"]["objective"], "Test objective");
    assert_eq!(v["counts"]["open"], 2);
    assert_eq!(v["claimed"][0]["id"], a.as_str());
    assert_eq!(v["claimed"][0]["holder"], "agent-a");
    assert!(
        v["claimed"][0]["left_s"].as_i64().is_some_and(|n| n > 0),
        "{v}"
    );
    assert_eq!(v["pending_gates"][0]["id"], g.as_str());
    assert_eq!(v["quota"]["used"], 1);
    let r = p.run(&["status"]);
    assert_eq!(r.code, 0);
    for want in ["Test objective", a.as_str(), "agent-a", g.as_str()] {
        assert!(r.stdout.contains(want), "status text lacks {want}: {r:?}");
    }
    // No subcommand off a terminal prints status.
    let r = p.run(&[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Test objective"), "{r:?}");
}

#[test]
fn refresh_state_writes_state_md_and_the_packet() {
    let p = Project::new("refresh");
    let a = p.add("first", &["--priority", "P1"]);
    p.add("second", &[]);
    p.ok(&["todo", "claim", &a]);
    p.ok(&["todo", "update", &a, "--evidence", "halfway there"]);
    let g = p.gate("Which dataset?", &[]);
    let v = p.ok(&["refresh-state"]);
    assert_eq!(v["objective"], "Test objective");
    assert_eq!(v["leases"][0]["id"], a.as_str());
    assert_eq!(v["questions"][0]["gate"], g.as_str());
    assert_eq!(v["decision"], "run");
    assert!(s(&v["next"]).contains("loopx"), "{v}");
    assert!(
        v["evidence"]
            .as_array()
            .is_some_and(|e| e.iter().any(|x| x["summary"] == "halfway there")),
        "{v}"
    );
    let md = std::fs::read_to_string(p.lx("STATE.md")).expect("STATE.md");
    assert!(md.len() < 4096, "STATE.md is {} bytes", md.len());
    for want in ["Test objective", a.as_str(), g.as_str(), "halfway there"] {
        assert!(md.contains(want), "STATE.md lacks {want}:\n{md}");
    }
    let r = p.run(&["refresh-state"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.len() < 4096);
}

#[test]
fn log_limits_and_verifies_the_chain() {
    let p = Project::new("log");
    for t in ["a", "b", "c"] {
        p.add(t, &[]);
    }
    let n = p.journal().len();
    assert!(n >= 4, "start-goal and three adds make at least 4 lines");
    let v = p.ok(&["log", "--limit", "2"]);
    let ev = v["events"].as_array().expect("events");
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0]["seq"], n - 1);
    assert_eq!(ev[1]["seq"], n);
    assert_eq!(ev[1]["action"], "todo.add");
    let all = p.ok(&["log", "--limit", "100"]);
    assert_eq!(all["events"].as_array().map(Vec::len), Some(n));
    assert_eq!(all["events"][0]["seq"], 1);
    let v = p.ok(&["log", "--verify"]);
    assert_eq!(v["lines"], n);
    let r = p.run(&["log"]);
    assert_eq!(r.code, 0);
    assert_eq!(r.stdout.lines().count(), n, "{r:?}");

    // Edit a middle line (the second todo.add, line n-1): the link to line n breaks; n-1 is named.
    let text = std::fs::read_to_string(p.lx("journal.jsonl")).expect("journal");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let k = n - 2;
    assert!(lines[k].contains("\"actor\":\"local\""), "{}", lines[k]);
    lines[k] = lines[k].replace("\"actor\":\"local\"", "\"actor\":\"mallory\"");
    std::fs::write(p.lx("journal.jsonl"), lines.join("\n") + "\n").expect("write");
    let v = p.fails(&["log", "--verify"], "invalid_state");
    let at = format!("journal.jsonl:{}", k + 1);
    assert!(s(&v["error"]["message"]).contains(&at), "{v}");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6);
    assert_eq!(v["ok"], false);
    let f = v["findings"].as_array().expect("findings");
    assert!(
        f.iter().any(|f| f["file"] == ".loopx/journal.jsonl"
            && f["line"] == k + 1
            && f["severity"] == "error"),
        "{v}"
    );
}

#[test]
fn doctor_healthy_torn_journal_and_fix() {
    let p = Project::new("torn");
    p.add("a", &[]);
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0);
    assert_eq!(v["ok"], true);
    assert_eq!(v["findings"], serde_json::json!([]));
    let r = p.run(&["doctor"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("healthy"), "{r:?}");

    let good = std::fs::read(p.lx("journal.jsonl")).expect("journal");
    let torn_line = p.journal().len() + 1;
    let mut torn = good.clone();
    torn.extend_from_slice(b"{\"seq\":99,\"at\":\"2026-");
    std::fs::write(p.lx("journal.jsonl"), &torn).expect("write");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["ok"], false);
    let f = v["findings"].as_array().expect("findings");
    assert!(
        f.iter().any(|f| f["file"] == ".loopx/journal.jsonl"
            && f["line"] == torn_line
            && f["fixable"] == true),
        "{v}"
    );
    for fld in ["severity", "file", "line", "message", "fixable"] {
        assert!(f[0].get(fld).is_some(), "finding lacks {fld}: {v}");
    }
    assert_eq!(
        std::fs::read(p.lx("journal.jsonl")).expect("journal"),
        torn,
        "doctor without --fix wrote"
    );
    let v = p.ok(&["doctor", "--fix"]);
    assert!(v["fixed"].as_array().is_some_and(|f| !f.is_empty()), "{v}");
    assert_eq!(std::fs::read(p.lx("journal.jsonl")).expect("journal"), good);
    assert_eq!(p.run(&["doctor"]).code, 0);
    assert_eq!(p.run(&["log", "--verify"]).code, 0);
}

#[test]
fn doctor_torn_evidence_and_temp_files() {
    let p = Project::new("torn-ev");
    let id = p.add("a", &[]);
    p.ok(&["todo", "claim", &id]);
    p.ok(&["todo", "update", &id, "--evidence", "one"]);
    let ev_path = p.lx(&format!("evidence/{id}.jsonl"));
    let good = std::fs::read(&ev_path).expect("evidence");
    let mut torn = good.clone();
    torn.extend_from_slice(b"{\"at\":\"2026");
    std::fs::write(&ev_path, &torn).expect("write");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    let file = format!(".loopx/evidence/{id}.jsonl");
    assert!(
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["file"] == file.as_str() && f["line"] == 2),
        "{v}"
    );
    p.ok(&["doctor", "--fix"]);
    assert_eq!(std::fs::read(&ev_path).expect("evidence"), good);
    assert_eq!(p.run(&["doctor"]).code, 0);

    let tmp = p.lx("todos/.t-abcdef.toml.tmp-123-deadbeef");
    std::fs::write(&tmp, "half a todo").expect("write");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "a temp file is a warning: {v}");
    assert_eq!(v["ok"], true);
    assert!(
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["severity"] == "warning"
                && s(&f["file"]).contains(".t-abcdef.toml.tmp-123-deadbeef")
                && f["fixable"] == true),
        "{v}"
    );
    // The temp file is not state: commands ignore it.
    assert_eq!(ids(&p.ok(&["todo", "list"])["todos"]), vec![id.clone()]);
    let v = p.ok(&["doctor", "--fix"]);
    assert!(
        v["fixed"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| s(x).contains("temp"))),
        "{v}"
    );
    assert!(!tmp.exists());
    let v = p.ok(&["doctor"]);
    assert_eq!(v["findings"], serde_json::json!([]));
}

#[test]
fn doctor_fix_clears_expired_leases_only() {
    let p = Project::new("fix-lease");
    let id = p.add("a", &[]);
    let live = p.add("b", &[]);
    p.ok(&["todo", "claim", &live]);
    // A lease that expired long ago, written by hand.
    let path = p.lx(&format!("todos/{id}.toml"));
    let text = std::fs::read_to_string(&path)
        .expect("todo")
        .replace("fence = 0", "fence = 4");
    std::fs::write(
        &path,
        format!(
            "{text}\n[lease]\nholder = \"gone\"\nfence = 4\nacquired_at = \"2020-01-01T00:00:00.000Z\"\nexpires_at = \"2020-01-01T00:30:00.000Z\"\n"
        ),
    )
    .expect("write");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
    let v = p.ok(&["doctor", "--fix"]);
    assert!(
        v["fixed"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| s(x).contains(&id))),
        "{v}"
    );
    let t = p.show(&id);
    assert!(t.get("lease").is_none(), "{t}");
    assert_eq!(t["fence"], 4, "the fence is kept");
    assert_eq!(
        p.show(&live)["lease"]["holder"],
        "local",
        "a live lease stays"
    );
    assert_eq!(p.ok_as("b", &["todo", "claim", &id])["todo"]["fence"], 5);
}

// ---------------------------------------------------------------------------------------------
// busy, completions, usage

#[test]
fn a_held_lock_makes_mutations_busy() {
    let p = Project::new("busy");
    let before = p.files();
    let lock = std::fs::File::open(p.lx("lock")).expect("open lock");
    lock.lock().expect("take the lock");
    let mut c = p.cmd(&["todo", "add", "blocked by the lock", "--json"]);
    c.env("LOOPX_LOCK_TIMEOUT", "0.3");
    let r = run_cmd(&mut c);
    assert_eq!(r.code, 8, "{r:?}");
    let v = parse_json(&r, "todo add under a held lock");
    assert_err(&v, "busy");
    assert!(
        v["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("LOOPX_LOCK_TIMEOUT")),
        "{v}"
    );
    let mut c = p.cmd(&["quota", "spend-slot"]);
    c.env("LOOPX_LOCK_TIMEOUT", "0.3");
    assert_eq!(run_cmd(&mut c).code, 8);
    assert_same_files(&before, &p.files(), "commands refused as busy");
    lock.unlock().expect("unlock");
    drop(lock);
    let mut c = p.cmd(&["todo", "add", "after the lock", "--json"]);
    c.env("LOOPX_LOCK_TIMEOUT", "0.3");
    assert_eq!(run_cmd(&mut c).code, 0);
}

#[test]
fn completions_and_usage_errors() {
    let p = Project::empty("usage");
    let r = p.run(&["completions", "bash"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("loopx") && r.stdout.contains("COMPLETE="),
        "completions look empty"
    );
    let r = p.run(&["completions", "nosuchshell"]);
    assert_eq!(r.code, 2);

    let r = p.run(&["todo", "list", "--bogus"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
    assert!(!r.stderr.is_empty());
    let v = p.fails(&["todo", "list", "--bogus"], "usage");
    assert!(s(&v["error"]["message"]).contains("--bogus"), "{v}");
    p.fails(&["no-such-command"], "usage");
    p.fails(&["todo", "claim", "--ttl", "forever"], "usage");
    p.fails(&["--agent", "has space", "status"], "usage");
    p.fails(&["start-goal"], "usage");
    let r = p.run(&["--help"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("start-goal"), "{r:?}");
    let r = p.run(&["--version"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("loopx"), "{r:?}");
}

#[test]
fn an_io_failure_is_exit_1() {
    let p = Project::new("io");
    std::fs::remove_dir_all(p.lx("todos")).expect("rm todos");
    std::fs::write(p.lx("todos"), "not a directory").expect("write");
    let before = p.files();
    let v = p.fails(&["todo", "list"], "io");
    assert!(s(&v["error"]["message"]).contains("todos"), "{v}");
    p.fails(&["todo", "add", "x"], "io");
    p.fails(&["quota", "should-run"], "io");
    assert_same_files(&before, &p.files(), "commands failing on I/O");
}

#[test]
fn doctor_reports_a_state_dir_that_is_not_a_directory() {
    let p = Project::new("io-doctor");
    std::fs::remove_dir_all(p.lx("todos")).expect("rm todos");
    std::fs::write(p.lx("todos"), "not a directory").expect("write");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    assert_eq!(v["ok"], false);
}

#[test]
fn a_user_todo_is_finished_without_a_lease() {
    let p = Project::new("user");
    let id = p.add("sign the contract", &["--role", "user"]);
    let (code, sr) = p.json(&["quota", "should-run"]);
    assert_eq!(code, 3);
    assert_eq!(
        sr["decision"], "idle",
        "a user todo is not agent work: {sr}"
    );
    let v = p.ok(&[
        "todo",
        "update",
        &id,
        "--evidence",
        "signed",
        "--status",
        "done",
    ]);
    assert_eq!(v["todo"]["status"], "done");
    assert!(p.lx(&format!("archive/{id}.toml")).is_file());
    assert_eq!(p.evidence(&id)[0]["summary"], "signed");
}

#[test]
fn every_command_answers_json() {
    let p = Project::new("json");
    let v = p.ok(&["completions", "bash"]);
    assert!(s(&v["script"]).contains("loopx"), "{v}");
    let v = p.ok(&[
        "start-goal",
        "--guided",
        "--goal-text",
        "again",
        "--replace",
    ]);
    assert!(v["next"].as_array().is_some_and(|n| !n.is_empty()), "{v}");
    let v = p.ok(&["gate", "list"]);
    assert_eq!(v["gates"], serde_json::json!([]));
    let v = p.ok(&["todo", "list", "--ready"]);
    assert_eq!(v["todos"], serde_json::json!([]));
}

#[test]
fn doctor_finds_dangling_ids_and_interrupted_archives() {
    let p = Project::new("dangling");
    p.write_todo("t-orphan", "depends_on = [\"t-zzzzzz\"]\n");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    assert!(
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["file"] == ".loopx/todos/t-orphan.toml"
                && s(&f["message"]).contains("t-zzzzzz")),
        "{v}"
    );
    let v = p.fails(&["todo", "claim", "t-orphan"], "not_ready");
    assert!(s(&v["error"]["message"]).contains("t-zzzzzz"), "{v}");
    std::fs::remove_file(p.lx("todos/t-orphan.toml")).expect("rm");

    // A todo both open and archived (a crash between the two steps of archiving).
    let id = p.add("finish", &[]);
    p.ok(&["todo", "claim", &id]);
    let open_copy = std::fs::read(p.lx(&format!("todos/{id}.toml"))).expect("todo");
    p.ok(&["todo", "update", &id, "--status", "done"]);
    std::fs::write(p.lx(&format!("todos/{id}.toml")), open_copy).expect("restore");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    let v = p.ok(&["doctor", "--fix"]);
    assert!(
        v["fixed"]
            .as_array()
            .is_some_and(|f| f.iter().any(|x| s(x).contains(&id))),
        "{v}"
    );
    assert!(!p.lx(&format!("todos/{id}.toml")).exists());
    assert!(p.lx(&format!("archive/{id}.toml")).is_file());
    assert_eq!(p.run(&["doctor"]).code, 0);
}

#[test]
fn a_removed_journal_line_breaks_the_chain_at_the_line_before() {
    let p = Project::new("removed");
    for t in ["a", "b", "c", "d"] {
        p.add(t, &[]);
    }
    let text = std::fs::read_to_string(p.lx("journal.jsonl")).expect("journal");
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() >= 5, "{}", lines.len());
    lines.remove(2);
    std::fs::write(p.lx("journal.jsonl"), lines.join("\n") + "\n").expect("write");
    let v = p.fails(&["log", "--verify"], "invalid_state");
    assert!(s(&v["error"]["message"]).contains("journal.jsonl:2"), "{v}");
    assert_eq!(p.run(&["doctor"]).code, 6);
}

#[test]
fn log_follow_prints_new_events() {
    use std::io::{BufRead, BufReader};
    let p = Project::new("follow");
    let mut child = p
        .cmd(&["log", "--follow", "--json", "--limit", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn log --follow");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait = std::time::Duration::from_secs(20);
    let first = rx
        .recv_timeout(wait)
        .expect("the last event")
        .expect("read");
    let first: Value = serde_json::from_str(&first).expect("JSON line");
    assert_eq!(first["seq"], p.journal().len());
    let id = p.add("followed", &[]);
    let next = rx.recv_timeout(wait);
    let _ = child.kill();
    let _ = child.wait();
    let next: Value =
        serde_json::from_str(&next.expect("a new event").expect("read")).expect("JSON line");
    assert_eq!(next["action"], "todo.add");
    assert_eq!(next["target"], id.as_str());
    assert_eq!(next["seq"], p.journal().len());
}

#[test]
fn owner_actions_without_the_owner_key_are_denied_and_write_nothing() {
    let p = Project::new("denied");
    let id = p.add("work", &[]);
    let user = p.add("the owner signs", &["--role", "user"]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let blocked = p.add("blocked by a", &[]);
    p.ok_as("agent-a", &["todo", "claim", &blocked]);
    p.ok_as(
        "agent-a",
        &["todo", "update", &blocked, "--status", "blocked"],
    );
    let g = p.gate("Go?", &[]);
    let before = p.files();
    for args in [
        vec!["gate", "approve", g.as_str()],
        vec!["gate", "reject", g.as_str(), "--reason", "no"],
        vec!["gate", "cancel", g.as_str()],
        vec!["goal", "pause"],
        vec!["goal", "resume"],
        vec!["goal", "complete"],
        vec!["quota", "set", "--slots", "1"],
        vec!["todo", "reassign", id.as_str(), "--to", "agent-b"],
        vec!["todo", "update", user.as_str(), "--status", "done"],
        vec!["--agent", "agent-b", "todo", "reopen", blocked.as_str()],
    ] {
        let (code, v) = p.no_key(&args);
        assert_eq!(code, 7, "{args:?}: {v}");
        assert_err(&v, "denied");
    }
    assert_same_files(&before, &p.files(), "owner actions without the key");
    // Agent work needs no key.
    let (code, v) = p.no_key(&[
        "--agent",
        "agent-a",
        "todo",
        "update",
        &id,
        "--evidence",
        "fine",
    ]);
    assert_eq!(code, 0, "{v}");
    let (code, v) = p.no_key(&["--agent", "agent-a", "todo", "reopen", &blocked]);
    assert_eq!(code, 0, "the agent that blocked it reopens it: {v}");
    let (code, v) = p.no_key(&["gate", "open", "Another?"]);
    assert_eq!(code, 0, "{v}");
    let (code, _) = p.no_key(&["--agent", "agent-a", "quota", "should-run"]);
    assert_eq!(code, 0);
}

#[test]
fn nothing_ready_says_why() {
    let p = Project::new("why");
    let msg = |v: &serde_json::Value| v["error"]["message"].as_str().unwrap_or("").to_string();
    let v = p.fails_as("a1", &["todo", "claim"], "nothing_ready");
    assert!(msg(&v).contains("no open agent todo"), "{v}");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap_or("")
            .contains("todo add"),
        "{v}"
    );
    p.add("one", &[]);
    p.add("two", &[]);
    p.ok_as("a1", &["todo", "claim"]);
    p.ok_as("a2", &["todo", "claim"]);
    let v = p.fails_as("a1", &["todo", "claim"], "nothing_ready");
    assert!(
        msg(&v).contains("1 held by you") && msg(&v).contains("1 leased by other agents"),
        "{v}"
    );
    p.add("three", &[]);
    p.gate("stop everything?", &["--global"]);
    let v = p.fails_as("a3", &["todo", "claim"], "nothing_ready");
    // Each todo counts once, under its first blocker: the parts add up to the open todos.
    let m = msg(&v);
    let (head, parts) = m.split_once(", ").unwrap();
    assert!(head.ends_with("of 3 open todos"), "{v}");
    let sum: u32 = parts
        .split(", ")
        .filter_map(|p| p.split(' ').next()?.parse::<u32>().ok())
        .sum();
    assert_eq!(sum, 3, "{v}");
    assert!(m.contains("waiting on a pending gate"), "{v}");
    p.ok(&["goal", "pause"]);
    let v = p.fails_as("a3", &["todo", "claim"], "nothing_ready");
    assert!(msg(&v).contains("paused"), "{v}");
}

#[test]
fn a_mutation_after_a_torn_journal_line_cuts_it_and_says_so() {
    let p = Project::new("torn-journal-append");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(p.lx("journal.jsonl"))
        .expect("open journal");
    std::io::Write::write_all(&mut f, b"{\"seq\":99,\"at\":\"torn").expect("tear");
    drop(f);
    p.add("after the crash", &[]);
    let actions: Vec<String> = p
        .journal()
        .iter()
        .map(|e| e["action"].as_str().unwrap_or("").to_string())
        .collect();
    let n = actions.len();
    assert_eq!(
        &actions[n - 2..],
        ["journal.repair", "todo.add"],
        "{actions:?}"
    );
    p.ok(&["log", "--verify"]);
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn owner_commands_keep_the_comments_of_loopx_toml() {
    let p = Project::new("comments");
    let path = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&path).expect("read");
    let text = format!("# edited by hand\n{text}")
        .replace("[quota]", "# for the whole team\n[quota]")
        .replace(
            "slots = 100",
            "slots = 100  # raise it for the benchmark week",
        );
    std::fs::write(
        &path,
        format!("{text}\n[notes]\nowner = \"dana\" # who to ask\n"),
    )
    .expect("write");
    p.ok(&["goal", "pause", "--reason", "weekend"]);
    p.ok(&["quota", "set", "--slots", "40"]);
    let after = std::fs::read_to_string(&path).expect("read");
    for kept in [
        "# edited by hand",
        "# for the whole team",
        "slots = 40  # raise it for the benchmark week",
        "owner = \"dana\" # who to ask",
        "status = \"paused\"",
        "reason = \"weekend\"",
    ] {
        assert!(after.contains(kept), "`{kept}` is missing:\n{after}");
    }
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_replace_a_crash_interrupted_is_finished_by_the_next_command() {
    // A project without an owner key: any marker is finished.
    let p = Project::empty("retire-crash");
    p.ok(&["start-goal", "--goal-text", "Test objective"]);
    let goal = s(&p.ok(&["goal", "show"])["goal"]["id"]).to_string();
    p.add("old work", &[]);
    // As a crash leaves it: the marker holding the next goal written, some files moved, the
    // old loopx.toml still there.
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).expect("config");
    let next = cfg
        .replace(&goal, "goal-newnew")
        .replace("Test objective", "The new goal");
    let marker = serde_json::json!({"old": goal, "actor": "local", "next": next});
    let hist = p.lx(&format!("history/{goal}"));
    std::fs::create_dir_all(&hist).expect("mkdir");
    std::fs::write(p.lx("retiring"), marker.to_string()).expect("marker");
    std::fs::rename(p.lx("todos"), hist.join("todos")).expect("mv");
    let v = p.ok(&["status"]);
    assert_eq!(v["goal"]["id"], "goal-newnew", "{v}");
    assert_eq!(v["goal"]["objective"], "The new goal", "{v}");
    for f in ["loopx.toml", "journal.jsonl", "quota.toml", "todos"] {
        assert!(hist.join(f).exists(), "history/{goal}/{f} missing");
    }
    assert!(!p.lx("retiring").exists());
    assert_eq!(p.journal().len(), 1, "the new goal starts a new journal");
    assert_eq!(p.run(&["doctor"]).code, 0);
    // With an owner key, a marker the owner did not sign moves nothing.
    let p2 = Project::new("retire-forged");
    let goal2 = s(&p2.ok(&["goal", "show"])["goal"]["id"]).to_string();
    let cfg2 = std::fs::read_to_string(p2.lx("loopx.toml")).expect("config");
    let marker2 = serde_json::json!({"old": goal2, "actor": "local",
        "next": cfg2.replace(&goal2, "goal-second")});
    std::fs::write(p2.lx("retiring"), marker2.to_string()).expect("marker");
    let v = p2.fails(&["status"], "invalid_state");
    assert!(
        v["error"]["message"]
            .to_string()
            .contains("not signed by the owner"),
        "{v}"
    );
    assert!(p2.lx("loopx.toml").exists() && p2.lx("journal.jsonl").exists());
}

#[test]
fn an_empty_list_names_the_archived_and_help_names_every_exit_code() {
    let p = Project::new("empty-list");
    let r = p.run(&["todo", "list"]);
    assert_eq!(r.stdout.trim(), "no open todos", "{r:?}");
    let id = p.add("finish me", &[]);
    p.ok(&["todo", "claim", &id]);
    p.ok(&[
        "todo",
        "update",
        &id,
        "--evidence",
        "ok",
        "--status",
        "done",
    ]);
    let r = p.run(&["todo", "list"]);
    assert_eq!(
        r.stdout.trim(),
        "no open todos (1 archived: `loopx todo list --status done`)",
        "{r:?}"
    );
    let help = p.run(&["--help"]).stdout;
    assert!(help.contains("8 busy, 9 check failed."), "{help}");
    // A command's own flags first; the global ones under their own heading.
    let help = p.run(&["todo", "claim", "--help"]).stdout;
    let (own, global) = help
        .split_once("Global options:")
        .expect("a global heading");
    assert!(own.contains("--ttl") && !own.contains("--store"), "{help}");
    assert!(
        global.contains("--agent <ID>") && global.contains("default: `local`"),
        "{help}"
    );
}

#[test]
fn a_lease_error_without_an_agent_says_who_it_ran_as() {
    let p = Project::new("who-am-i");
    let r = p.run(&["todo", "update", "--evidence", "x"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stderr.contains("this ran as agent `local`"), "{r:?}");
    assert!(r.stderr.contains("--agent ID or LOOPX_AGENT"), "{r:?}");
    // Named, it is not said.
    let r = p.run_as("bob", &["todo", "update", "--evidence", "x"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(!r.stderr.contains("ran as agent"), "{r:?}");
}

#[test]
fn a_write_as_local_beside_named_agents_warns() {
    let p = Project::new("local-warns");
    p.add("a", &[]);
    p.add("b", &[]);
    // Alone, `local` is fine: nothing said.
    let r = p.run(&["todo", "list"]);
    assert!(!r.stderr.contains("warning"), "{r:?}");
    p.ok_as("agent-a", &["todo", "claim"]);
    let r = p.run(&["todo", "claim"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("this ran as agent `local`") && r.stderr.contains("(agent-a)"),
        "{r:?}"
    );
    // Named, no warning.
    let r = p.run_as("agent-b", &["todo", "update", "--evidence", "x"]);
    assert!(!r.stderr.contains("warning"), "{r:?}");
}
