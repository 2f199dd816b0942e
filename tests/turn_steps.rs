//! `turn start` and `turn end` through the real binary: the turn runner's two halves for a host
//! that is itself the turn, with every exit code they give.

mod common;

use common::Project;
use serde_json::Value;

fn start(p: &Project, agent: &str, turn: &str, extra: &[&str]) -> (i32, Value) {
    let mut a = vec!["turn", "start", "--turn", turn];
    a.extend_from_slice(extra);
    p.json_as(agent, &a)
}

fn end(p: &Project, agent: &str, turn: &str, extra: &[&str]) -> (i32, Value) {
    let mut a = vec!["turn", "end", "--turn", turn];
    a.extend_from_slice(extra);
    p.json_as(agent, &a)
}

fn used(p: &Project) -> u64 {
    p.ok(&["quota", "show"])["quota"]["used"].as_u64().unwrap()
}

#[test]
fn a_turn_claims_records_and_spends_once() {
    let p = Project::new("steps-once");
    let id = p.add("Write it", &[]);
    let (code, v) = start(&p, "a1", "t-1", &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["todo"]["id"], id.as_str());
    assert_eq!(v["todo"]["lease"]["turn"], "t-1");
    let (code, v) = start(&p, "a1", "t-1", &[]);
    assert_eq!((code, &v["resumed"]), (0, &Value::Bool(true)), "{v}");
    // Another agent may not take it over by naming the same turn.
    let (code, v) = start(&p, "a2", "t-1", &[]);
    assert_eq!(code, 4, "{v}");
    let (code, v) = end(&p, "a1", "t-1", &["--done", "--summary", "wrote it"]);
    assert_eq!((code, v["ended"].as_str()), (0, Some("done")), "{v}");
    let (code, v) = end(&p, "a1", "t-1", &["--done"]);
    assert_eq!((code, &v["replayed"]), (0, &Value::Bool(true)), "{v}");
    let (code, v) = start(&p, "a1", "t-1", &[]);
    assert_eq!((code, &v["replayed"]), (0, &Value::Bool(true)), "{v}");
    assert_eq!(used(&p), 1);
    let ev = p.evidence(&id);
    let e = ev
        .iter()
        .find(|e| e["summary"] == "wrote it")
        .expect("the turn's evidence");
    assert_eq!(e["turn"], "t-1");
    assert_eq!(e["kind"], "note");
}

#[test]
fn not_now_answers_should_run_with_exit_3() {
    let p = Project::new("steps-idle");
    let (code, v) = start(&p, "a1", "t-1", &[]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["decision"], "idle");
    assert_eq!(v["turn"], "t-1");
    assert_eq!(used(&p), 0);
}

#[test]
fn a_failed_turn_releases_even_when_done_is_asked() {
    let p = Project::new("steps-fail");
    let id = p.add("Try it", &[]);
    start(&p, "a1", "t-1", &[]);
    let (code, v) = end(&p, "a1", "t-1", &["--done", "--exit-code", "2"]);
    assert_eq!((code, v["ended"].as_str()), (0, Some("released")), "{v}");
    let t = p.show(&id);
    assert_eq!(t["status"], "open");
    assert!(t.get("lease").is_none_or(Value::is_null), "{t}");
    assert_eq!(p.evidence(&id).last().unwrap()["exit_code"], 2);
}

#[test]
fn ending_an_unknown_turn_is_not_found() {
    let p = Project::new("steps-unknown");
    p.add("Something", &[]);
    let (code, v) = end(&p, "a1", "never-started", &[]);
    assert_eq!(code, 5, "{v}");
    assert_eq!(v["error"]["code"], "not_found");
    // Someone else's turn is not this agent's to end.
    start(&p, "a1", "t-1", &[]);
    let (code, _) = end(&p, "a2", "t-1", &[]);
    assert_eq!(code, 5);
    assert_eq!(used(&p), 0);
}

#[test]
fn a_lease_lost_meanwhile_refuses_the_evidence_and_spends_the_slot() {
    let p = Project::new("steps-lost");
    let id = p.add("Slow work", &[]);
    let (_, v) = start(&p, "a1", "t-1", &["--ttl", "1s"]);
    let fence = v["fence"].as_u64().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1300));
    p.ok_as("a2", &["todo", "claim", &id]);
    let f = fence.to_string();
    let (code, v) = end(&p, "a1", "t-1", &["--todo", &id, "--fence", &f, "--done"]);
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["error"]["code"], "stale_fence");
    assert_eq!(used(&p), 1, "the slot is spent");
    assert!(!p.evidence(&id).iter().any(|e| e["turn"] == "t-1"));
    assert_eq!(p.show(&id)["lease"]["holder"], "a2");
}

#[test]
fn a_turn_that_closed_its_own_todo_is_recorded_as_closed() {
    let p = Project::new("steps-closed");
    let id = p.add("Quick one", &[]);
    let (_, v) = start(&p, "a1", "t-1", &[]);
    let f = v["fence"].as_u64().unwrap().to_string();
    p.ok_as(
        "a1",
        &[
            "todo",
            "update",
            &id,
            "--status",
            "done",
            "--evidence",
            "did it",
        ],
    );
    let (code, v) = end(&p, "a1", "t-1", &[]);
    assert_eq!(code, 5, "no lease names the turn now: {v}");
    let (code, v) = end(&p, "a1", "t-1", &["--todo", &id, "--fence", &f]);
    assert_eq!((code, v["ended"].as_str()), (0, Some("closed")), "{v}");
    assert_eq!(used(&p), 1);
}

#[test]
fn bad_arguments_exit_2() {
    let p = Project::new("steps-usage");
    let long = "x".repeat(100_000);
    for args in [
        vec!["turn", "end"],
        vec!["turn", "end", "--turn", "t", "--summary", long.as_str()],
        vec!["turn", "start", "--turn", "bad id with spaces"],
        vec!["turn", "start", "--ttl", "0s"],
    ] {
        let (code, v) = p.json_as("a1", &args);
        assert_eq!(code, 2, "{args:?}: {v}");
    }
}
