//! What loopx says of the commands it runs is true, through the real binary: the owner key's
//! name is nowhere a command can read it, a turn id is its agent's own, what a turn's command
//! leaves running is stopped, a lease that lapsed while its runner was stopped stays lost to a
//! newer reservation, and `run-approved` spends no approval on a run that cannot start.

mod common;

use std::time::{Duration, Instant};

use common::turns::*;
use common::*;
use serde_json::Value;

/// The file's text (empty when missing).
fn read(p: &Project, f: &str) -> String {
    std::fs::read_to_string(p.root().join(f)).unwrap_or_default()
}

/// A script that copies its parent's environment (from /proc) and its own into `ENV.parent`
/// and `ENV.own`, then tries an owner act with the key its parent names, its exit in `ENV.code`.
fn snoop(at: &std::path::Path, name: &str) -> String {
    let f = at.join(name).display().to_string();
    format!(
        "tr '\\0' '\\n' < /proc/$PPID/environ > {f}.parent; env > {f}.own; \
         k=$(sed -n 's/^LOOPX_OWNER_KEY=//p' {f}.parent); \
         LOOPX_OWNER_KEY=\"$k\" \"$LX\" goal pause --reason mine >/dev/null 2>&1; echo $? > {f}.code"
    )
}

/// The parent's and own environments `snoop` copied hold neither the variable nor the key's path.
#[track_caller]
fn no_key_named(p: &Project, name: &str) {
    let key = p.key.display().to_string();
    let parent = read(p, &format!("{name}.parent"));
    assert!(
        parent.contains("HOME="),
        "the parent's environment was not read: {parent}"
    );
    for (what, text) in [("parent", parent), ("own", read(p, &format!("{name}.own")))] {
        assert!(
            !text.contains("LOOPX_OWNER_KEY"),
            "{name}: the {what} environment names the key's variable"
        );
        assert!(
            !text.contains(&key),
            "{name}: the {what} environment holds the key's path"
        );
    }
    assert_eq!(
        read(p, &format!("{name}.code")).trim(),
        "7",
        "{name}: the command signed as the owner"
    );
}

#[test]
fn a_command_loopx_runs_finds_the_owner_key_nowhere() {
    let p = Project::new("truth-key");
    let id = p.add("work", &[]);
    // A turn's command, started where the owner's key is named.
    let (code, v) = turn(&p, &[], &snoop(p.root(), "turn"));
    assert_eq!(code, 0, "{v}");
    no_key_named(&p, "turn");
    // A done's check, run by a process that also signs owner acts.
    let check = format!("LX={} && {}", bin(), snoop(p.root(), "check"));
    let r = p.run_as("agent-a", &["todo", "check", "propose", &id, "--", &check]);
    assert_eq!(r.code, 0, "{r:?}");
    p.ok(&["todo", "check", "approve", &id]);
    p.ok(&["todo", "claim", &id]);
    p.ok(&[
        "todo",
        "update",
        &id,
        "--status",
        "done",
        "--evidence",
        "checked",
    ]);
    no_key_named(&p, "check");
    assert_eq!(p.ok(&["status"])["goal"]["status"], "active");
    // The owner's acts still find the key the variable named as loopx started.
    let v = p.ok(&["quota", "set", "--slots", "7"]);
    assert_eq!(v["quota"]["limit"], 7, "{v}");
    p.ok(&["goal", "pause", "--reason", "owner"]);
    assert_eq!(p.ok(&["status"])["goal"]["status"], "paused");
}

#[test]
fn another_agents_spend_under_a_turn_id_does_not_stop_this_agents_turn() {
    let p = Project::new("truth-turn-id");
    p.add("work", &[]);
    p.ok_as("agent-b", &["quota", "spend-slot", "--turn", "t-shared"]);
    let (code, v) = turn(&p, &["--turn", "t-shared"], "echo ran > ran");
    assert_eq!(code, 0, "{v}");
    assert_ne!(
        v["replayed"], true,
        "another agent's spend replayed this turn: {v}"
    );
    assert_eq!(
        read(&p, "ran").trim(),
        "ran",
        "the command did not run: {v}"
    );
    assert_eq!(quota_used(&p), 2, "each agent's turn spends its own slot");
    // The same agent's id again is a replay: it says so, runs nothing and spends nothing.
    let (code, v) = turn(&p, &["--turn", "t-shared"], "echo again >> ran");
    assert_eq!((code, &v["replayed"]), (0, &Value::Bool(true)), "{v}");
    assert_eq!(read(&p, "ran").trim(), "ran");
    assert_eq!(quota_used(&p), 2);
    // So is the agent's own spend under that id.
    p.ok(&["quota", "spend-slot", "--turn", "t-mine"]);
    let (code, v) = turn(&p, &["--turn", "t-mine"], "echo mine > mine");
    assert_eq!((code, &v["replayed"]), (0, &Value::Bool(true)), "{v}");
    assert!(read(&p, "mine").is_empty());
}

#[test]
fn what_a_turns_command_leaves_running_ends_with_the_turn() {
    let p = Project::new("truth-group");
    p.add("work", &[]);
    let (code, v) = turn(&p, &[], "sleep 300 & echo $! > bg");
    assert_eq!(code, 0, "{v}");
    let pid: i32 = read(&p, "bg")
        .trim()
        .parse()
        .expect("the background child's pid");
    let end = Instant::now() + Duration::from_secs(10);
    while !gone(pid) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive = !gone(pid);
    if alive {
        signal(pid, 9);
    }
    assert!(
        !alive,
        "the turn's `sleep 300 &` still runs after the turn ended"
    );
}

/// The lease of todo `id`, as `todo show` gives it.
fn lease(p: &Project, id: &str) -> Value {
    p.show(id)["lease"].clone()
}

#[test]
fn a_lease_that_lapsed_while_its_runner_was_stopped_stays_lost_to_a_newer_reservation() {
    let p = Project::new("truth-lapse");
    let a = p.add("store work", &["--priority", "P0", "--paths", "src/**"]);
    let b = p.add("other store work", &["--priority", "P1"]);
    let mut child = spawn(
        &p,
        &[
            "--agent", "agent-a", "--json", "turn", "--ttl", "2s", "--", "sleep", "9",
        ],
    );
    let runner = child.id() as i32;
    until("agent-a's turn to claim", || {
        lease(&p, &a)["holder"] == "agent-a"
    });
    // The runner stops (SIGSTOP, a laptop asleep): its lease lapses.
    signal(runner, libc_sig::STOP);
    std::thread::sleep(Duration::from_millis(3500));
    // Another agent reserves what the lapsed lease reserved.
    p.ok_as("agent-b", &["todo", "claim", &b, "--paths", "src/store/**"]);
    let fence = lease(&p, &a)["fence"].clone();
    signal(runner, libc_sig::CONT);
    // Its renewals come back, and must not make the lease live again over agent-b's.
    std::thread::sleep(Duration::from_millis(2000));
    let l = lease(&p, &a);
    let live = l["expires_at"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|t| t > jiff::Timestamp::now());
    let code = wait_exit(&mut child);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(l["fence"], fence, "{l}");
    assert!(
        !live,
        "agent-a's lapsed lease came back over agent-b's reservation: {l}"
    );
    // The turn learns it lost the lease: its record is refused.
    assert_eq!(code, 4, "{text}");
    assert!(
        text.contains("lapsed") || text.contains("expired"),
        "{text}"
    );
}

/// Signal numbers.
mod libc_sig {
    pub const STOP: i32 = 19;
    pub const CONT: i32 = 18;
}

/// Opens a gate as agent-a with `ARGS` after `gate open Q`, and approves it; its id.
fn approved_gate(p: &Project, args: &[&str]) -> String {
    let mut a = vec!["--agent", "agent-a", "--json", "gate", "open", "Do it?"];
    a.extend_from_slice(args);
    let r = run_cmd(&mut p.cmd(&a));
    let v = parse_json(&r, "gate open");
    assert_eq!(r.code, 0, "{v}");
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let sha = v["gate"]["action"]["sha256"].as_str().unwrap().to_string();
    p.ok(&["gate", "approve", &id, "--sha", &sha]);
    id
}

#[test]
fn run_approved_spends_no_approval_on_a_run_that_cannot_start() {
    let p = Project::new("truth-approved");
    // A payload to a place no one may write (even root: /sys).
    std::fs::write(p.root().join("change.patch"), "+new\n").unwrap();
    let id = approved_gate(&p, &["--action-file", "change.patch"]);
    let out = "/sys/loopx-test-out.patch";
    assert!(
        std::fs::File::create(out).is_err(),
        "{out} can be written here"
    );
    let e = p.fails_as("agent-a", &["run-approved", &id, "--out", out], "usage");
    assert!(e["error"]["message"].as_str().unwrap().contains(out), "{e}");
    // Not spent: the next try hands it over.
    let v = p.ok_as("agent-a", &["run-approved", &id, "--out", "mine.patch"]);
    assert_eq!(v["bytes"], 5, "{v}");
    assert_eq!(read(&p, "mine.patch"), "+new\n");

    // A script whose interpreter is missing cannot start: refused before the use.
    let script = p.root().join("bad.sh");
    std::fs::write(&script, "#!/nonexistent/loopx-interp\necho ran > ran\n").unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    let id = approved_gate(&p, &["--action-cmd", "--", "./bad.sh"]);
    let e = p.fails_as("agent-a", &["run-approved", &id], "usage");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("interpreter"),
        "{e}"
    );
    let g = p.ok(&["gate", "show", &id]);
    assert!(g["gate"]["used"].is_null(), "the approval was spent: {g}");
    // Fixed, the same approval runs it.
    std::fs::write(&script, "#!/bin/sh\necho ran > ran\n").unwrap();
    let r = p.run_as("agent-a", &["run-approved", &id]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(read(&p, "ran").trim(), "ran");
    let g = p.ok(&["gate", "show", &id]);
    assert!(!g["gate"]["used"].is_null(), "{g}");
}
