//! Teams, part D (issue 9) through the binary: hand-offs, the roster, todos with context, and
//! evidence across todos.

mod common;

use common::*;
use serde_json::Value;

fn claim(p: &Project, agent: &str, id: &str, extra: &[&str]) -> Value {
    let mut a = vec!["todo", "claim", id];
    a.extend_from_slice(extra);
    p.ok_as(agent, &a)["todo"].clone()
}

#[test]
fn a_handoff_moves_the_lease_with_a_new_fence_and_the_note_as_evidence() {
    let p = Project::new("handoff");
    let t = p.add("Port the parser", &[]);
    assert_eq!(claim(&p, "alice", &t, &[])["fence"], 1);
    let v = p.ok_as(
        "alice",
        &[
            "todo",
            "handoff",
            &t,
            "--to",
            "bob",
            "--note",
            "half done: see src/parse.rs",
        ],
    );
    let lease = &v["todo"]["lease"];
    assert_eq!(lease["holder"], "bob");
    assert_eq!(lease["fence"], 2);
    assert_eq!(lease["handoff_from"], "alice");

    // The note is evidence, under the old fence.
    let ev = p.evidence(&t);
    let note = ev.last().expect("a note");
    assert_eq!(note["kind"], "note");
    assert_eq!(note["agent"], "alice");
    assert_eq!(note["fence"], 1);
    assert!(note["summary"].as_str().unwrap().contains("half done"));
    let j = p.journal();
    let line = j
        .iter()
        .find(|l| l["action"] == "todo.handoff")
        .expect("journaled");
    assert_eq!(line["actor"], "alice");
    assert_eq!(line["data"]["to"], "bob");
    assert_eq!(line["data"]["fence"], 2);

    // The old holder is refused: its fence is stale, and it holds nothing to renew.
    p.fails_as(
        "alice",
        &["todo", "update", &t, "--fence", "1", "--evidence", "more"],
        "stale_fence",
    );
    p.fails_as("alice", &["todo", "renew", &t], "lease_conflict");
    p.fails_as(
        "alice",
        &["todo", "update", &t, "--evidence", "x"],
        "lease_conflict",
    );

    // The receiver is offered it first: by should-run, and by a bare claim (same fence).
    let other = p.add("Another thing", &["--priority", "P0"]);
    let s = p.ok_as("bob", &["quota", "should-run"]);
    assert_eq!(s["reason"], "held_lease", "{s}");
    assert_eq!(s["todo"]["id"], t.as_str(), "{s}");
    let c = p.ok_as("bob", &["todo", "claim"])["todo"].clone();
    assert_eq!(c["id"], t.as_str());
    assert_eq!(c["fence"], 2);
    assert!(c["lease"].get("handoff_from").is_none(), "{c}");
    // Once taken up, a bare claim is a new todo again.
    assert_eq!(
        p.ok_as("bob", &["todo", "claim"])["todo"]["id"],
        other.as_str()
    );
    // The receiver works under the new fence.
    p.ok_as(
        "bob",
        &[
            "todo",
            "update",
            &t,
            "--fence",
            "2",
            "--evidence",
            "done the rest",
        ],
    );
}

#[test]
fn the_receivers_turn_runs_the_handed_todo_first() {
    let p = Project::new("handoff-turn");
    let t = p.add("Handed", &["--priority", "P3"]);
    p.add("Better by priority", &["--priority", "P0"]);
    claim(&p, "alice", &t, &[]);
    p.ok_as("alice", &["todo", "handoff", &t, "--to", "bob"]);
    let r = p.run(&[
        "--agent",
        "bob",
        "--json",
        "turn",
        "--complete-on-success",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = parse_json(&r, "turn");
    assert_eq!(v["todo"]["id"], t.as_str(), "{v}");
    assert_eq!(p.show(&t)["status"], "done");
}

#[test]
fn a_handoff_is_refused_to_reserved_names_and_from_non_holders() {
    let p = Project::new("handoff-refused");
    let t = p.add("Work", &[]);
    p.fails_as(
        "alice",
        &["todo", "handoff", &t, "--to", "bob"],
        "lease_conflict",
    );
    claim(&p, "alice", &t, &[]);
    for name in ["owner", "loopx", "doctor", "gate:x"] {
        p.fails_as("alice", &["todo", "handoff", &t, "--to", name], "usage");
    }
    let v = p.fails_as("alice", &["todo", "handoff", &t, "--to", "alice"], "usage");
    assert_eq!(
        v["error"]["message"],
        format!("you already hold {t}").as_str(),
        "{v}"
    );
    p.fails_as(
        "carol",
        &["todo", "handoff", &t, "--to", "bob"],
        "lease_conflict",
    );
    // A non-holder handing to itself is told who holds it, not that it does.
    let v = p.fails_as(
        "carol",
        &["todo", "handoff", &t, "--to", "carol"],
        "lease_conflict",
    );
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("leased by alice"), "{v}");
    p.fails_as(
        "alice",
        &["todo", "handoff", &t, "--to", "bob", "--fence", "9"],
        "stale_fence",
    );
    // Nothing moved.
    assert_eq!(p.show(&t)["lease"]["holder"], "alice");
    // With no id, the one the holder holds.
    let v = p.ok_as("alice", &["todo", "handoff", "--to", "bob", "--fence", "1"]);
    assert_eq!(v["todo"]["id"], t.as_str());
}

#[test]
fn an_edit_is_the_creators_or_the_owners() {
    let p = Project::new("edit");
    let t = p.add("Draft", &["--agent", "alice"]);
    let v = p.ok_as(
        "alice",
        &[
            "todo",
            "edit",
            &t,
            "--title",
            "Draft the report",
            "--priority",
            "P1",
            "--body",
            "Two pages.",
            "--link",
            "https://example.com/issues/9",
        ],
    );
    assert_eq!(v["todo"]["title"], "Draft the report");
    assert_eq!(v["todo"]["priority"], "P1");
    assert_eq!(v["todo"]["body"], "Two pages.");
    let last = p.journal().last().cloned().unwrap();
    assert_eq!(last["action"], "todo.edit");
    assert_eq!(last["actor"], "alice");
    assert!(last.get("sig").is_none());

    // Another agent, where the owner's key is not: owner authority needed.
    let (code, v) = p.no_key(&["--agent", "bob", "todo", "edit", &t, "--title", "Mine now"]);
    assert_eq!(code, 7, "{v}");
    assert_err(&v, "denied");
    assert_eq!(p.show(&t)["title"], "Draft the report");

    // Where the key is, it is the owner's edit: signed.
    let v = p.ok_as(
        "bob",
        &["todo", "edit", &t, "--link", "https://example.com/pr/3"],
    );
    assert_eq!(v["todo"]["links"].as_array().unwrap().len(), 2);
    let last = p.journal().last().cloned().unwrap();
    assert_eq!(last["actor"], "owner");
    assert!(last["sig"].is_string(), "{last}");

    // Links: cleared and replaced; bad ones refused; nothing to change refused.
    let v = p.ok_as(
        "alice",
        &[
            "todo",
            "edit",
            &t,
            "--clear-links",
            "--link",
            "https://example.com/doc",
        ],
    );
    assert_eq!(
        v["todo"]["links"],
        serde_json::json!(["https://example.com/doc"])
    );
    p.fails_as(
        "alice",
        &["todo", "edit", &t, "--link", "not a url"],
        "usage",
    );
    p.fails_as(
        "alice",
        &["todo", "edit", &t, "--link", "javascript:alert(1)"],
        "usage",
    );
    p.fails_as(
        "alice",
        &["todo", "edit", &t, "--title", "Draft the report"],
        "usage",
    );

    // Dependencies: set, a cycle refused, cleared.
    let d = p.add("First", &["--agent", "alice"]);
    let v = p.ok_as("alice", &["todo", "edit", &t, "--depends-on", &d]);
    assert_eq!(v["todo"]["depends_on"], serde_json::json!([d]));
    p.fails_as("alice", &["todo", "edit", &d, "--depends-on", &t], "usage");
    let v = p.ok_as("alice", &["todo", "edit", &t, "--no-depends"]);
    assert!(v["todo"].get("depends_on").is_none());
}

#[test]
fn body_and_links_survive_archive_and_are_shown_everywhere() {
    let p = Project::new("context");
    let t = p.add(
        "Fix the flaky test",
        &[
            "--body",
            "It fails one run in ten.\nSee the CI logs.",
            "--link",
            "https://example.com/issues/12",
            "--link",
            "https://example.com/pull/13",
        ],
    );
    // The claim answer carries them.
    let c = claim(&p, "alice", &t, &[]);
    assert_eq!(c["body"], "It fails one run in ten.\nSee the CI logs.");
    assert_eq!(c["links"].as_array().unwrap().len(), 2);
    let text = p.run_as("alice", &["todo", "show", &t]).stdout;
    assert!(text.contains("It fails one run in ten."), "{text}");
    assert!(text.contains("link: https://example.com/pull/13"), "{text}");
    // STATE.md, for the holder.
    p.ok_as("alice", &["refresh-state"]);
    let md = std::fs::read_to_string(p.lx("STATE.md")).unwrap();
    assert!(md.contains("      See the CI logs."), "{md}");
    assert!(md.contains("link: https://example.com/issues/12"), "{md}");
    // Done: archived, and still there.
    p.ok_as(
        "alice",
        &[
            "todo",
            "update",
            &t,
            "--status",
            "done",
            "--evidence",
            "fixed",
        ],
    );
    assert!(p.lx(&format!("archive/{t}.toml")).is_file());
    let s = p.show(&t);
    assert_eq!(s["status"], "done");
    assert_eq!(s["body"], "It fails one run in ten.\nSee the CI logs.");
    assert_eq!(s["links"][1], "https://example.com/pull/13");
    let text = p.run(&["todo", "show", &t]).stdout;
    assert!(text.contains("See the CI logs."), "{text}");
}

#[test]
fn stored_body_text_is_escaped_for_people() {
    let p = Project::new("context-escape");
    let t = p.add("Escapes", &["--body", "red \u{1b}[31m text\u{202e}"]);
    let text = p.run(&["todo", "show", &t]).stdout;
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    assert!(text.contains("\\x1b[31m"), "{text}");
}

#[test]
fn a_body_file_is_read_but_not_through_a_link_or_a_fifo() {
    let p = Project::new("body-file");
    let f = p.root().join("body.md");
    std::fs::write(&f, "# Plan\n\n1. read\n2. write\n").unwrap();
    let t = p.add("With a file", &["--body-file", "body.md"]);
    assert_eq!(p.show(&t)["body"], "# Plan\n\n1. read\n2. write\n");

    let link = p.root().join("link.md");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    let v = p.fails(
        &["todo", "add", "Linked", "--body-file", "link.md"],
        "usage",
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("link"),
        "{v}"
    );
    p.fails(&["todo", "edit", &t, "--body-file", "link.md"], "usage");

    let fifo = p.root().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid, NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    p.fails(&["todo", "add", "Fifo", "--body-file", "fifo"], "usage");
    p.fails(
        &["todo", "add", "Missing", "--body-file", "nope.md"],
        "usage",
    );
    p.fails(
        &[
            "todo",
            "add",
            "Both",
            "--body",
            "x",
            "--body-file",
            "body.md",
        ],
        "usage",
    );

    let big = p.root().join("big.md");
    std::fs::write(&big, "x".repeat(20_000)).unwrap();
    p.fails(&["todo", "add", "Big", "--body-file", "big.md"], "usage");
    let too_many: Vec<String> = (0..21).map(|i| format!("https://e.com/{i}")).collect();
    let mut a = vec!["todo", "add", "Links"];
    for l in &too_many {
        a.push("--link");
        a.push(l);
    }
    p.fails(&a, "usage");
}

fn roster_state(p: &Project, agent: &str) -> Option<String> {
    let v = p.ok(&["agents"]);
    v["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == agent)
        .map(|r| r["state"].as_str().unwrap().to_string())
}

#[test]
fn the_roster_shows_working_idle_and_stale_agents() {
    let p = Project::new("roster");
    let t = p.add("Short lease", &[]);
    let u = p.add("Long lease", &[]);
    claim(&p, "alice", &t, &["--ttl", "1s"]);
    claim(&p, "bob", &u, &["--ttl", "1h"]);
    p.ok_as("bob", &["quota", "spend-slot"]);
    p.ok_as("carol", &["gate", "open", "Which one?"]);

    let before = p.files();
    let v = p.ok(&["agents"]);
    assert_same_files(&before, &p.files(), "agents is read-only");
    let rows = v["agents"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["agent"].as_str().unwrap()).collect();
    assert!(!names.contains(&"owner"), "{names:?}");
    let bob = rows.iter().find(|r| r["agent"] == "bob").unwrap();
    assert_eq!(bob["state"], "working");
    assert_eq!(bob["leases"], serde_json::json!([u]));
    assert_eq!(bob["turns"], 1);
    assert_eq!(roster_state(&p, "carol").as_deref(), Some("idle"));

    // Alice's 1 s lease lapses without a renewal: stale (a bounded wait, no timed assertion).
    let mut state = roster_state(&p, "alice");
    for _ in 0..100 {
        if state.as_deref() == Some("stale") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        state = roster_state(&p, "alice");
    }
    assert_eq!(state.as_deref(), Some("stale"));
    let text = p.run(&["agents"]).stdout;
    assert!(text.contains("stale") && text.contains("alice"), "{text}");
    // Carol takes the lapsed lease over: no todo names Alice now, the journal still says stale.
    let c = claim(&p, "carol", &t, &[]);
    assert_eq!(c["lease"]["holder"], "carol");
    assert_eq!(roster_state(&p, "alice").as_deref(), Some("stale"));
    assert_eq!(roster_state(&p, "carol").as_deref(), Some("working"));
    // Alice writes again: idle.
    p.ok_as("alice", &["todo", "add", "Back at it"]);
    assert_eq!(roster_state(&p, "alice").as_deref(), Some("idle"));
}

fn metric(p: &Project, agent: &str, id: &str, m: &str) {
    p.ok_as(agent, &["todo", "update", id, "--metric", m]);
}

#[test]
fn evidence_list_filters_and_finds_the_best_run() {
    let p = Project::new("evidence-list");
    let a = p.add("Run A", &[]);
    let b = p.add("Run B", &[]);
    claim(&p, "alice", &a, &[]);
    claim(&p, "bob", &b, &[]);
    metric(&p, "alice", &a, "loss=0.50");
    metric(&p, "bob", &b, "loss=0.20");
    metric(&p, "alice", &a, "loss=0.90");
    metric(&p, "bob", &b, "loss=0.20");
    metric(&p, "bob", &b, "accuracy=0.99");
    p.ok_as(
        "alice",
        &["todo", "update", &a, "--evidence", "tried lr 3e-4"],
    );

    let best = |how: &str| p.ok(&["evidence", "list", "--metric", "loss", "--best", how]);
    let v = best("max");
    assert_eq!(v["entries"].as_array().unwrap().len(), 1);
    assert_eq!(v["best"]["value"], 0.9);
    assert_eq!(v["best"]["todo"], a.as_str());
    let v = best("min");
    assert_eq!(v["best"]["value"], 0.2);
    assert_eq!(v["best"]["todo"], b.as_str());
    // Of two equal runs, the earliest.
    let all = p.ok(&["evidence", "list", "--metric", "loss"]);
    let twenty: Vec<&Value> = all["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["value"] == 0.2)
        .collect();
    assert_eq!(twenty.len(), 2);
    assert_eq!(
        v["best"]["at"], twenty[1]["at"],
        "newest first, so the earliest is last"
    );

    // Newest first, and the filters.
    let v = p.ok(&["evidence", "list"]);
    let e = v["entries"].as_array().unwrap();
    assert!(
        e.windows(2)
            .all(|w| w[0]["at"].as_str() >= w[1]["at"].as_str())
    );
    assert_eq!(e[0]["summary"], "tried lr 3e-4");
    let n = |args: &[&str]| {
        let mut a = vec!["evidence", "list"];
        a.extend_from_slice(args);
        p.ok(&a)["entries"].as_array().unwrap().len()
    };
    assert_eq!(n(&["--todo", &a]), 3);
    assert_eq!(n(&["--by", "bob"]), 3);
    assert_eq!(n(&["--kind", "note"]), 1);
    assert_eq!(n(&["--kind", "metric"]), 5);
    assert_eq!(n(&["--metric", "accuracy"]), 1);
    assert_eq!(n(&["--limit", "2"]), 2);
    // An old entry (a hand-written line) falls outside --since.
    let old = r#"{"at":"2020-01-01T00:00:00.000Z","agent":"alice","kind":"metric","summary":"loss=0.01","name":"loss","value":0.01}"#;
    let path = p.lx(&format!("evidence/{a}.jsonl"));
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(old);
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    assert_eq!(n(&["--metric", "loss", "--since", "1d"]), 4);
    assert_eq!(n(&["--metric", "loss"]), 5);
    assert_eq!(best("min")["best"]["value"], 0.01);
    assert_eq!(
        p.ok(&[
            "evidence", "list", "--metric", "loss", "--best", "min", "--since", "1d"
        ])["best"]["value"],
        0.2
    );
    let text = p
        .run(&["evidence", "list", "--metric", "loss", "--best", "max"])
        .stdout;
    assert!(
        text.starts_with("best: ") && text.contains("loss=0.90"),
        "{text}"
    );

    p.fails(&["evidence", "list", "--best", "max"], "usage");
    p.fails(&["evidence", "list", "--limit", "0"], "usage");
    p.fails(&["evidence", "list", "--todo", "t-zzzzzz"], "not_found");
}

#[test]
fn evidence_list_refuses_a_linked_evidence_file() {
    let p = Project::new("evidence-link");
    let a = p.add("Run A", &[]);
    claim(&p, "alice", &a, &[]);
    metric(&p, "alice", &a, "loss=0.5");
    let outside = p.root().join("outside.jsonl");
    std::fs::write(&outside, "{}\n").unwrap();
    std::os::unix::fs::symlink(&outside, p.lx("evidence/t-zzzzzz.jsonl")).unwrap();
    let (code, v) = p.json(&["evidence", "list"]);
    assert_eq!(code, 1, "a link in evidence/ is refused: {v}");
}
