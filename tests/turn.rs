//! `loopx turn` and `loopx heartbeat` through the real binary: success, failure, timeout,
//! refusal, a lease lost mid-run, a replayed turn id, and stops on pause and on signals.

mod common;

use std::path::Path;
use std::process::Child;

use common::turns::*;
use common::*;
use serde_json::Value;

#[test]
fn a_turn_that_succeeds_records_evidence_marks_done_and_spends_one_slot() {
    let p = Project::new("turn-ok");
    let id = p.add("write the report", &[]);
    let script = r#"echo "$LOOPX_TODO_ID|$LOOPX_FENCE|$LOOPX_TURN|$LOOPX_AGENT|$LOOPX_TODO_TITLE|$LOOPX_DIR" > env.txt; echo working; echo warn >&2"#;
    let (code, v) = turn(&p, &["--complete-on-success", "--turn", "t-1"], script);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ended"], "done");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["todo"]["id"], id.as_str());
    let env = std::fs::read_to_string(p.root().join("env.txt")).unwrap();
    let root = p.root().canonicalize().unwrap();
    assert_eq!(
        env.trim(),
        format!("{id}|1|t-1|local|write the report|{}", root.display())
    );
    let ev = evidence(&p, &id);
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!(e["kind"], "command");
    assert_eq!(e["exit_code"], 0);
    assert_eq!(e["turn"], "t-1");
    assert_eq!(e["fence"], 1);
    assert_eq!(e["argv"][0], "sh");
    assert!(e["duration_ms"].is_u64());
    let out = e["output"].as_str().unwrap();
    assert!(out.contains("working") && out.contains("warn"), "{out}");
    assert_eq!(p.ok(&["todo", "show", &id])["todo"]["status"], "done");
    assert_eq!(quota_used(&p), 1);
}

#[test]
fn a_turn_that_fails_gives_its_exit_code_and_releases_the_lease() {
    let p = Project::new("turn-fail");
    let id = p.add("flaky", &[]);
    let (code, v) = turn(&p, &["--complete-on-success"], "echo boom; exit 7");
    assert_eq!(code, 7, "{v}");
    assert_eq!(v["ended"], "released");
    let t = &p.ok(&["todo", "show", &id])["todo"];
    assert_eq!(t["status"], "open");
    assert!(t.get("lease").is_none_or(Value::is_null), "{t}");
    let ev = evidence(&p, &id);
    assert_eq!(ev[0]["exit_code"], 7);
    assert_eq!(ev[0]["output"], "boom");
    assert_eq!(quota_used(&p), 1);
}

#[test]
fn a_turn_that_times_out_is_stopped_with_its_children() {
    let p = Project::new("turn-timeout");
    let id = p.add("hangs", &[]);
    // The shell ignores SIGTERM and its child sleeps on: both must be gone afterwards.
    let script = "trap '' TERM; sleep 60 & echo $$ $! > pids; wait";
    let (code, v) = turn(&p, &["--timeout", "1s", "--grace", "1s"], script);
    assert_eq!(code, 124, "{v}");
    assert_eq!(v["timed_out"], true);
    let pids = std::fs::read_to_string(p.root().join("pids")).unwrap();
    for pid in pids.split_whitespace() {
        let pid: i32 = pid.parse().unwrap();
        until("the killed process to go", || gone(pid));
    }
    let ev = evidence(&p, &id);
    assert_eq!(ev[0]["timed_out"], true);
    assert!(
        ev[0]["summary"]
            .as_str()
            .unwrap()
            .contains("timed out after")
    );
    assert_eq!(p.ok(&["todo", "show", &id])["todo"]["status"], "open");
}

#[test]
fn a_turn_should_run_refuses_runs_nothing_and_exits_3() {
    let p = Project::new("turn-refused");
    let (code, v) = turn(&p, &[], "touch ran");
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["decision"], "idle");
    p.ok(&["todo", "add", "work"]);
    p.ok(&["goal", "pause", "--reason", "lunch"]);
    let (code, v) = turn(&p, &[], "touch ran");
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["decision"], "paused");
    assert!(!p.root().join("ran").exists(), "the command ran");
    assert_eq!(quota_used(&p), 0);
}

#[test]
fn a_lease_reassigned_mid_run_refuses_the_evidence_with_stale_fence() {
    let p = Project::new("turn-stale");
    let id = p.add("contested", &[]);
    // The owner gives the todo to bob while the turn runs (with the key named: a command never
    // inherits its name).
    let script = format!(
        r#"LOOPX_OWNER_KEY='{}' "$LX" todo reassign "$LOOPX_TODO_ID" --to bob >/dev/null"#,
        p.key.display()
    );
    let (code, v) = turn(&p, &["--complete-on-success"], &script);
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["ok"], false);
    assert_eq!(v["ended"], "refused");
    assert_eq!(v["error"]["code"], "stale_fence");
    assert!(
        evidence(&p, &id).is_empty(),
        "evidence written under a stale fence"
    );
    let t = &p.ok(&["todo", "show", &id])["todo"];
    assert_eq!(t["lease"]["holder"], "bob");
    assert_eq!(t["status"], "open");
    assert_eq!(quota_used(&p), 1, "the turn happened: its slot is spent");
}

#[test]
fn a_replayed_turn_id_runs_and_records_nothing_twice() {
    let p = Project::new("turn-replay");
    let id = p.add("once", &[]);
    p.ok(&["todo", "add", "other"]);
    let (code, _) = turn(&p, &["--turn", "job-7"], "echo x >> runs");
    assert_eq!(code, 0);
    let (code, v) = turn(&p, &["--turn", "job-7"], "echo x >> runs");
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["replayed"], true);
    let runs = std::fs::read_to_string(p.root().join("runs")).unwrap();
    assert_eq!(runs.lines().count(), 1, "the command ran twice");
    assert_eq!(evidence(&p, &id).len(), 1);
    assert_eq!(quota_used(&p), 1);
}

#[test]
fn bad_input_to_turn_is_refused_before_anything_is_claimed() {
    let p = Project::new("turn-bad");
    p.ok(&["todo", "add", "work"]);
    let (code, v) = turn(&p, &["--turn", "has space"], "true");
    assert_eq!((code, v["error"]["code"].as_str()), (2, Some("usage")));
    let (code, v) = turn(&p, &["--timeout", "0s"], "true");
    assert_eq!((code, v["error"]["code"].as_str()), (2, Some("usage")));
    let r = p.run(&["--json", "turn", "--", "/no/such/program"]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    let r = p.run(&["turn"]);
    assert_eq!(r.code, 2);
    let held = p.ok(&["todo", "list"]).to_string();
    assert!(!held.contains("holder"), "a refused turn claimed: {held}");
    assert_eq!(quota_used(&p), 0);
}

fn leased(p: &Project) -> bool {
    p.ok(&["todo", "list"]).to_string().contains("\"holder\"")
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

#[test]
fn heartbeat_stops_when_the_goal_is_paused() {
    let p = Project::new("beat-pause");
    p.ok(&["todo", "add", "one"]);
    p.ok(&["todo", "add", "two"]);
    // The first turn pauses the goal, as the owner (a command never inherits the key's name).
    let pause = format!(
        r#"LOOPX_OWNER_KEY='{}' "$LX" goal pause --reason enough >/dev/null"#,
        p.key.display()
    );
    let mut c = spawn(
        &p,
        &[
            "heartbeat",
            "--complete-on-success",
            "--",
            "sh",
            "-c",
            &pause,
        ],
    );
    assert_eq!(wait_exit(&mut c), 0);
    let out = std::io::read_to_string(c.stdout.take().unwrap()).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].contains("done"), "{out}");
    assert!(lines[1].contains("the goal is paused"), "{out}");
    assert!(!leased(&p));
}

#[test]
fn heartbeat_runs_at_most_max_turns() {
    let p = Project::new("beat-max");
    for t in ["a", "b", "c"] {
        p.ok(&["todo", "add", t]);
    }
    let r = p.run(&[
        "heartbeat",
        "--max-turns",
        "2",
        "--complete-on-success",
        "--",
        "true",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("2 turns ran"), "{}", r.stdout);
    assert_eq!(
        p.ok(&["todo", "list"])["todos"].as_array().unwrap().len(),
        1
    );
    assert_eq!(quota_used(&p), 2);
}

fn ctrl_c_releases(sig: i32, tag: &str) {
    let p = Project::new(tag);
    let id = p.add("long", &[]);
    let mut c = spawn(
        &p,
        &[
            "heartbeat",
            "--",
            "sh",
            "-c",
            "echo $$ > pid; sleep 60 & wait",
        ],
    );
    until("the turn to start", || {
        p.root().join("pid").is_file() && leased(&p)
    });
    let pid: i32 = std::fs::read_to_string(p.root().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(c.id() as i32, sig);
    assert_eq!(wait_exit(&mut c), 0, "heartbeat exits cleanly");
    until("the command to go", || gone(pid));
    assert!(!leased(&p), "the lease is still held");
    let ev = evidence(&p, &id);
    assert_eq!(ev.len(), 1, "the interrupted turn is recorded: {ev:?}");
    let out = std::io::read_to_string(c.stdout.take().unwrap()).unwrap();
    assert!(out.contains("interrupted; no lease is held"), "{out}");
}

#[test]
fn heartbeat_on_sigint_stops_the_command_and_releases_its_lease() {
    ctrl_c_releases(SIGINT, "beat-int");
}

#[test]
fn heartbeat_on_sigterm_stops_the_command_and_releases_its_lease() {
    ctrl_c_releases(SIGTERM, "beat-term");
}

#[test]
fn turn_passes_sigterm_to_the_command_first() {
    let p = Project::new("turn-term");
    p.ok(&["todo", "add", "graceful"]);
    let script = "trap 'echo cleaned > cleaned; exit 5' TERM; echo $$ > pid; sleep 60 & wait";
    let mut c = spawn(&p, &["--json", "turn", "--", "sh", "-c", script]);
    until("the turn to start", || p.root().join("pid").is_file());
    signal(c.id() as i32, SIGTERM);
    assert_eq!(wait_exit(&mut c), 5, "the command's own exit code");
    assert!(Path::new(&p.root().join("cleaned")).is_file());
    assert!(!leased(&p));
}

#[test]
fn a_command_that_closes_its_own_todo_keeps_the_turns_evidence() {
    let p = Project::new("turn-closed");
    let id = p.add("self-closing", &[]);
    let (code, v) = turn(
        &p,
        &[],
        r#""$LX" todo update --status done --evidence "did it" >/dev/null"#,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ended"], "closed");
    let ev = evidence(&p, &id);
    assert_eq!(ev.last().unwrap()["kind"], "command", "{ev:?}");
    assert_eq!(quota_used(&p), 1);
}

/// Starts `loopx turn -- sh -c SCRIPT` as `agent` in the background; waits until it runs.
fn running_turn(p: &Project, agent: &str, turn_id: &str, script: &str) -> Child {
    let c = spawn(
        p,
        &[
            "--agent", agent, "--json", "turn", "--turn", turn_id, "--", "sh", "-c", script,
        ],
    );
    until("the turn to start", || {
        p.root().join(format!("{turn_id}.pid")).is_file()
    });
    c
}

#[test]
fn one_turn_id_and_one_runner_per_agent_never_run_twice_at_once() {
    let p = Project::new("turn-twice");
    p.add("one", &[]);
    p.add("two", &[]);
    let wait_go = "echo $$ > $LOOPX_TURN.pid; while [ ! -f go ]; do sleep 0.05; done";
    let mut first = running_turn(&p, "a1", "job-1", wait_go);
    // The same turn id, even from another agent: refused while it runs.
    let (code, v) = turn(&p, &["--turn", "job-1"], "touch ran-again");
    assert_eq!(code, 4, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("running already")
    );
    // The same agent with a second runner: its held todo is not run twice.
    let mut c = p.cmd(&[
        "--agent",
        "a1",
        "--json",
        "turn",
        "--",
        "touch",
        "ran-again",
    ]);
    let r = run_cmd(&mut c);
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert!(!p.root().join("ran-again").exists());
    std::fs::write(p.root().join("go"), "").unwrap();
    assert_eq!(wait_exit(&mut first), 0);
    assert_eq!(quota_used(&p), 1);
}

#[test]
fn a_runner_killed_outright_takes_its_command_with_it() {
    let p = Project::new("turn-kill9");
    p.add("work", &[]);
    let mut c = running_turn(&p, "a1", "job-9", "echo $$ > $LOOPX_TURN.pid; sleep 60");
    let pid: i32 = std::fs::read_to_string(p.root().join("job-9.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(c.id() as i32, 9);
    wait_exit(&mut c);
    until("the orphaned command to be killed", || gone(pid));
}

#[test]
fn heartbeat_backs_off_after_failed_turns() {
    let p = Project::new("beat-backoff");
    p.add("broken", &[]);
    let r = p.run(&["heartbeat", "--max-turns", "3", "--", "false"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0].contains("exited 1") && lines[0].ends_with("next turn in 1s"),
        "{}",
        r.stdout
    );
    assert!(lines[1].ends_with("next turn in 2s"), "{}", r.stdout);
    assert_eq!(quota_used(&p), 3);
}

#[test]
fn a_turn_past_the_slot_limit_says_so_and_is_recorded() {
    let p = Project::new("turn-over");
    p.add("a", &[]);
    p.ok(&["quota", "set", "--slots", "1"]);
    // Another spend lands while the turn runs: the turn's own slot goes past the limit.
    let (code, v) = turn(
        &p,
        &[],
        r#""$LX" --agent other quota spend-slot >/dev/null"#,
    );
    assert_eq!(code, 0, "the command's exit code: {v}");
    assert_eq!(v["over_limit"], serde_json::json!(["slots"]), "{v}");
    assert_eq!(quota_used(&p), 2, "the turn happened: its slot is recorded");
    // Now the window is spent: should-run says not now, and nothing runs.
    let (code, v) = turn(&p, &[], "touch ran");
    assert_eq!(
        (code, v["reason"].as_str()),
        (3, Some("quota_spent")),
        "{v}"
    );
    assert!(!p.root().join("ran").exists());
}
