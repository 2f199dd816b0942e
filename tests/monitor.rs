//! Monitors and watchers through the real binary: checks proposed, approved, revoked, polled;
//! due monitors first; overdue monitors in status, should-run, doctor and the journal.

mod common;

use std::process::Stdio;

use common::*;
use loopx::kernel::{Dur, Ts};
use serde_json::Value;

/// A project with a recurring todo (every hour) whose check is `cmd`, proposed by agent-a.
fn watcher(tag: &str, cmd: &str) -> (Project, String) {
    let p = Project::new(tag);
    let id = p.add("watch the PR", &["--every", "1h"]);
    let (code, v) = propose(&p, "agent-a", &id, &[cmd]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["check"]["approved"], false);
    (p, id)
}

/// `monitor propose ID -- WORDS...` as `agent`, with `--json` before the `--`.
fn propose(p: &Project, agent: &str, id: &str, words: &[&str]) -> (i32, Value) {
    let mut a = vec!["--json", "--agent", agent, "monitor", "propose", id, "--"];
    a.extend_from_slice(words);
    let r = p.run(&a);
    let v = parse_json(&r, "monitor propose");
    (r.code, v)
}

fn approve(p: &Project, id: &str) -> Value {
    p.ok(&["monitor", "approve", id])
}

fn poll(p: &Project) -> Value {
    p.ok_as("poller", &["monitor", "poll"])
}

fn actions(p: &Project, action: &str) -> usize {
    p.journal().iter().filter(|e| e["action"] == action).count()
}

fn skipped_reason(v: &Value, id: &str) -> Option<String> {
    v["skipped"]
        .as_array()?
        .iter()
        .find(|s| s["id"] == id)
        .and_then(|s| s["reason"].as_str().map(str::to_string))
}

fn result_of(v: &Value, id: &str) -> Option<String> {
    v["ran"]
        .as_array()?
        .iter()
        .find(|s| s["id"] == id)
        .and_then(|s| s["result"].as_str().map(str::to_string))
}

/// Makes a monitor due again as if an agent had done it since its last run: `next_due_at` one
/// millisecond after the check's last run (a hand edit of the todo file).
/// The check results recorded as evidence (kind `command`; an agent's update adds its own).
fn results(p: &Project, id: &str) -> usize {
    p.evidence(id)
        .iter()
        .filter(|e| e["kind"] == "command")
        .count()
}

fn make_due(p: &Project, id: &str) {
    let t = p.show(id);
    let last: Ts = t["check"]["last_run_at"].as_str().unwrap().parse().unwrap();
    let due = last.add(Dur(1)).to_string();
    let path = p.lx(&format!("todos/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("next_due_at") {
                format!("next_due_at = \"{due}\"\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(&path, text).unwrap();
}

fn set_command(p: &Project, id: &str, from: &str, to: &str) {
    let path = p.lx(&format!("todos/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

fn exists(p: &Project, name: &str) -> bool {
    p.root().join(name).exists()
}

#[test]
fn a_watcher_wakes_an_agent_only_when_its_result_changes() {
    let (p, id) = watcher("mon-change", "cat state.txt");
    approve(&p, &id);
    std::fs::write(p.root().join("state.txt"), "open\n").unwrap();

    // The first result counts as a change: evidence, and the todo is ready for an agent now.
    let v = poll(&p);
    assert_eq!(result_of(&v, &id).as_deref(), Some("changed"), "{v}");
    let ev = p.evidence(&id);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["kind"], "command");
    assert_eq!(ev[0]["command"], "cat state.txt");
    assert_eq!(ev[0]["exit_code"], 0);
    assert!(ev[0]["output"].as_str().unwrap().contains("open"));
    let (code, sr) = p.json_as("agent-a", &["quota", "should-run"]);
    assert_eq!((code, &sr["decision"]), (0, &Value::from("run")));
    assert_eq!(sr["todo"]["id"], id.as_str());
    assert_eq!(actions(&p, "monitor.change"), 1);

    // Until an agent has done it, the next poll leaves it.
    let v = poll(&p);
    assert!(
        skipped_reason(&v, &id)
            .unwrap()
            .contains("waiting for an agent"),
        "{v}"
    );

    // The agent does it; due again, the same result costs no turn.
    p.ok_as("agent-a", &["todo", "claim", &id]);
    p.ok_as("agent-a", &["todo", "update", &id, "--status", "done"]);
    make_due(&p, &id);
    let v = poll(&p);
    assert_eq!(result_of(&v, &id).as_deref(), Some("unchanged"), "{v}");
    assert_eq!(results(&p, &id), 1, "no evidence for the same result");
    assert_eq!(actions(&p, "monitor.check"), 1);
    let (code, sr) = p.json_as("agent-a", &["quota", "should-run"]);
    assert_eq!(code, 3, "nothing to run after an unchanged result: {sr}");
    let t = p.show(&id);
    let next: Ts = t["next_due_at"].as_str().unwrap().parse().unwrap();
    let ran: Ts = t["check"]["last_run_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(next, ran.add(Dur::from_hours(1)));

    // The file changes: the next run wakes the agent again.
    std::fs::write(p.root().join("state.txt"), "merged\n").unwrap();
    make_due(&p, &id);
    let v = poll(&p);
    assert_eq!(result_of(&v, &id).as_deref(), Some("changed"), "{v}");
    assert_eq!(results(&p, &id), 2);
    assert_eq!(actions(&p, "monitor.change"), 2);
    let sr = p.ok_as("agent-a", &["quota", "should-run"]);
    assert_eq!(sr["todo"]["id"], id.as_str());
    // Nothing due now: one load, no journal line.
    let lines = p.journal().len();
    let v = poll(&p);
    assert!(v["ran"].as_array().unwrap().is_empty());
    assert_eq!(p.journal().len(), lines);
    p.ok(&["doctor"]);
}

#[test]
fn an_unapproved_check_never_runs() {
    let (p, id) = watcher("mon-unapproved", "touch ran.txt");
    for _ in 0..2 {
        let v = poll(&p);
        let why = skipped_reason(&v, &id).unwrap_or_default();
        assert!(why.contains("unapproved"), "{v}");
        assert!(v["ran"].as_array().unwrap().is_empty());
    }
    let r = p.run(&["monitor", "poll"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("unapproved"), "{r:?}");
    assert!(!exists(&p, "ran.txt"), "an unapproved check ran");
    let list = p.ok(&["monitor", "list"]);
    assert_eq!(list["monitors"][0]["check"]["approved"], false);
    assert_eq!(list["monitors"][0]["check"]["approval"], "not_approved");
    assert_eq!(
        actions(&p, "monitor.check") + actions(&p, "monitor.change"),
        0
    );
}

#[test]
fn an_edited_command_does_not_run_until_approved_again() {
    let (p, id) = watcher("mon-edited", "touch a.txt");
    approve(&p, &id);
    // A hand edit after approval.
    set_command(&p, &id, "touch a.txt", "touch b.txt");
    let v = poll(&p);
    assert!(skipped_reason(&v, &id).unwrap().contains("changed"), "{v}");
    assert!(!exists(&p, "a.txt") && !exists(&p, "b.txt"));
    let list = p.ok(&["monitor", "list"]);
    assert_eq!(list["monitors"][0]["check"]["approval"], "changed");
    // A new proposal is unapproved too.
    assert_eq!(propose(&p, "agent-b", &id, &["touch", "c.txt"]).0, 0);
    let v = poll(&p);
    assert!(skipped_reason(&v, &id).is_some(), "{v}");
    assert!(!exists(&p, "c.txt"));
    // The owner approves the text it read (its sha256), and then it runs.
    let sha = list_sha(&p, &id);
    p.fails(
        &["monitor", "approve", &id, "--sha", "0123456789abcdef"],
        "lease_conflict",
    );
    p.ok(&["monitor", "approve", &id, "--sha", &sha[..16]]);
    let v = poll(&p);
    assert_eq!(result_of(&v, &id).as_deref(), Some("changed"), "{v}");
    assert!(exists(&p, "c.txt"));
}

fn list_sha(p: &Project, id: &str) -> String {
    let list = p.ok(&["monitor", "list"]);
    let m = list["monitors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap()
        .clone();
    m["check"]["sha256"].as_str().unwrap().to_string()
}

#[test]
fn a_revoked_check_stops_even_with_an_old_seal_put_back() {
    let (p, id) = watcher("mon-revoke", "touch ran.txt");
    approve(&p, &id);
    let old_seal = std::fs::read(p.lx("owner.seal")).unwrap();
    assert!(String::from_utf8_lossy(&old_seal).contains(&format!("check {id} ")));
    let v = p.ok(&["monitor", "revoke", &id]);
    assert_eq!(v["check"]["approved"], false);
    assert!(
        !std::fs::read_to_string(p.lx("owner.seal"))
            .unwrap()
            .contains(&format!("check {id}"))
    );
    p.fails(&["monitor", "revoke", &id], "not_found");
    let v = poll(&p);
    assert!(
        skipped_reason(&v, &id).unwrap().contains("unapproved"),
        "{v}"
    );
    assert!(!exists(&p, "ran.txt"));
    // The text was never changed: putting the old seal back is what could make it run.
    std::fs::write(p.lx("owner.seal"), &old_seal).unwrap();
    let v = poll(&p);
    assert!(skipped_reason(&v, &id).is_some(), "{v}");
    assert!(
        !exists(&p, "ran.txt"),
        "a revoked check ran from an old seal"
    );
}

#[test]
fn approval_needs_the_owner_key() {
    let (p, id) = watcher("mon-key", "touch ran.txt");
    let before = p.files();
    let (code, v) = p.no_key(&["monitor", "approve", &id]);
    assert_eq!(code, 7, "{v}");
    assert_err(&v, "denied");
    assert_same_files(&before, &p.files(), "a refused approval");
    approve(&p, &id);
    let (code, _) = p.no_key(&["monitor", "revoke", &id]);
    assert_eq!(code, 7);
    // Polling needs no key.
    let (code, v) = p.no_key(&["monitor", "poll"]);
    assert_eq!(code, 0, "{v}");
    assert!(exists(&p, "ran.txt"));
}

#[test]
fn usage_errors() {
    let p = Project::new("mon-usage");
    let plain = p.add("not recurring", &[]);
    let (code, v) = propose(&p, "a", &plain, &["true"]);
    assert_eq!(code, 2);
    assert_err(&v, "usage");
    let (code, v) = propose(&p, "a", "t-zzzzzz", &["true"]);
    assert_eq!(code, 5);
    assert_err(&v, "not_found");
    let id = p.add("recurring", &["--every", "1h"]);
    let long = "x".repeat(2049);
    let (code, v) = propose(&p, "a", &id, &[&long]);
    assert_eq!(code, 2);
    assert_err(&v, "usage");
    p.fails(&["monitor", "approve", &id], "not_found");
    p.fails(&["monitor", "poll", "--timeout", "0s"], "usage");
    p.fails(&["monitor", "poll", "--timeout", "2h"], "usage");
    let (code, _) = p.json(&["monitor", "propose", &id]);
    assert_eq!(code, 2, "a proposal needs a command");
}

#[test]
fn a_due_monitor_comes_before_ordinary_work_of_its_priority_only() {
    let p = Project::new("mon-order");
    let older = p.add("ordinary, older", &[]);
    let mon = p.add("monitor", &["--every", "1h"]);
    let sr = p.ok_as("agent-a", &["quota", "should-run"]);
    assert_eq!(sr["todo"]["id"], mon.as_str());
    let list = p.ok_as("agent-a", &["todo", "list", "--ready"]);
    assert_eq!(list["todos"][0]["id"], mon.as_str());
    assert_eq!(list["todos"][1]["id"], older.as_str());
    let high = p.add("higher priority", &["--priority", "P1"]);
    let v = p.ok_as("agent-a", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], high.as_str());
    let v = p.ok_as("agent-b", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], mon.as_str());
}

#[test]
fn overdue_monitors_show_everywhere_and_are_journaled_once() {
    let p = Project::new("mon-overdue");
    // Made in 2020, every hour, never done: long overdue.
    p.write_todo("t-oooooo", "every = \"1h\"\n");
    p.add("not a monitor", &[]);
    let st = p.ok(&["status"]);
    assert_eq!(st["overdue"][0]["id"], "t-oooooo", "{st}");
    assert!(st["overdue"][0]["late_s"].as_i64().unwrap() > 3600);
    let r = p.run(&["status"]);
    assert!(r.stdout.contains("overdue monitors: 1"), "{r:?}");
    let (_, sr) = p.json_as("agent-a", &["quota", "should-run"]);
    assert_eq!(sr["overdue"], serde_json::json!(["t-oooooo"]));
    let (code, d) = p.json(&["doctor"]);
    assert_eq!(code, 0, "an overdue monitor is a warning: {d}");
    let text = d.to_string();
    assert!(text.contains("t-oooooo") && text.contains("overdue"), "{d}");
    // The first poll journals it; later polls do not.
    let v = poll(&p);
    assert_eq!(v["overdue_noted"], serde_json::json!(["t-oooooo"]));
    poll(&p);
    poll(&p);
    assert_eq!(actions(&p, "monitor.overdue"), 1);
    // Done: a new due time, no longer overdue.
    p.ok_as("agent-a", &["todo", "claim", "t-oooooo"]);
    p.ok_as(
        "agent-a",
        &["todo", "update", "t-oooooo", "--status", "done"],
    );
    let st = p.ok(&["status"]);
    assert_eq!(st["overdue"], serde_json::json!([]));
    let (_, sr) = p.json_as("agent-a", &["quota", "should-run"]);
    assert!(sr.get("overdue").is_none(), "{sr}");
}

/// The state of a process (`R`, `S`, `Z`...), or `None` when it is gone.
fn proc_state(pid: &str) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(") ")?.1;
    after.chars().next()
}

#[test]
fn a_check_that_times_out_is_stopped_and_recorded() {
    let (p, id) = watcher("mon-timeout", "sleep 60 & echo $! > pid.txt; wait");
    approve(&p, &id);
    let v = p.ok_as("poller", &["monitor", "poll", "--timeout", "1s"]);
    assert_eq!(result_of(&v, &id).as_deref(), Some("timed_out"), "{v}");
    let pid = std::fs::read_to_string(p.root().join("pid.txt")).unwrap();
    let pid = pid.trim();
    assert!(
        matches!(proc_state(pid), None | Some('Z')),
        "the check's child {pid} still runs"
    );
    let t = p.show(&id);
    assert_eq!(t["check"]["last_exit"], 143, "{t}");
    assert!(t["check"].get("last_hash").is_none(), "{t}");
    assert!(p.evidence(&id).is_empty());
    assert_eq!(actions(&p, "monitor.check"), 1);
}

#[test]
fn a_check_with_lots_of_output_is_bounded() {
    let (p, id) = watcher(
        "mon-output",
        "head -c 3000000 /dev/zero | tr '\\0' a; echo; echo end",
    );
    approve(&p, &id);
    let v = poll(&p);
    assert_eq!(result_of(&v, &id).as_deref(), Some("changed"), "{v}");
    let ran = &v["ran"][0];
    assert_eq!(ran["stdout_truncated"], true);
    let ev = std::fs::metadata(p.lx(&format!("evidence/{id}.jsonl"))).unwrap();
    assert!(ev.len() < 8_000, "evidence of {} bytes", ev.len());
    let todo = std::fs::metadata(p.lx(&format!("todos/{id}.toml"))).unwrap();
    assert!(todo.len() < 4_000);
    let j = std::fs::metadata(p.lx("journal.jsonl")).unwrap();
    assert!(j.len() < 20_000);
}

#[test]
fn a_failing_check_is_recorded_and_does_not_stop_the_others() {
    let p = Project::new("mon-fail");
    let bad = p.add("bad", &["--every", "1h"]);
    let good = p.add("good", &["--every", "1h"]);
    assert_eq!(propose(&p, "a", &bad, &["echo broken; exit 3"]).0, 0);
    assert_eq!(propose(&p, "a", &good, &["echo fine"]).0, 0);
    approve(&p, &bad);
    approve(&p, &good);
    let v = poll(&p);
    assert_eq!(result_of(&v, &bad).as_deref(), Some("changed"), "{v}");
    assert_eq!(result_of(&v, &good).as_deref(), Some("changed"), "{v}");
    assert_eq!(p.show(&bad)["check"]["last_exit"], 3);
    assert_eq!(p.evidence(&bad)[0]["exit_code"], 3);
}

#[test]
fn two_polls_at_once_run_a_check_once() {
    let (p, id) = watcher("mon-race", "echo x >> runs.txt; sleep 1; echo done");
    approve(&p, &id);
    let spawn = || {
        p.cmd(&["--agent", "poller", "monitor", "poll", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for c in [a, b] {
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }
    let runs = std::fs::read_to_string(p.root().join("runs.txt")).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "the check ran {} times",
        runs.lines().count()
    );
    assert_eq!(actions(&p, "monitor.change"), 1);
    p.ok(&["doctor"]);
}

#[test]
fn an_approval_survives_other_owner_changes_and_goes_with_its_todo() {
    let (p, id) = watcher("mon-carry", "echo hi");
    let other = p.add("another watcher", &["--every", "1h"]);
    assert_eq!(propose(&p, "agent-a", &other, &["echo other"]).0, 0);
    approve(&p, &id);
    approve(&p, &other);
    let line = |id: &str| format!("check {id} ");
    // Unrelated owner changes keep both approvals.
    p.ok(&["goal", "pause"]);
    p.ok(&["goal", "resume"]);
    p.ok(&["quota", "set", "--slots", "7"]);
    p.ok(&["owner", "seal"]);
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(
        seal.contains(&line(&id)) && seal.contains(&line(&other)),
        "{seal}"
    );
    // Revoking one keeps the other.
    p.ok(&["monitor", "revoke", &other]);
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(
        seal.contains(&line(&id)) && !seal.contains(&line(&other)),
        "{seal}"
    );
    // A cancelled todo leaves the working set, and its approval goes at the next owner change.
    p.ok_as("agent-a", &["todo", "claim", &id]);
    p.ok_as("agent-a", &["todo", "update", &id, "--status", "cancelled"]);
    p.ok(&["owner", "seal"]);
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(!seal.contains(&line(&id)), "{seal}");
    let v = poll(&p);
    assert!(v["ran"].as_array().unwrap().is_empty(), "{v}");
    p.ok(&["doctor"]);
}

#[test]
fn the_owners_poll_runs_nothing_with_the_whole_store_put_back_from_before_a_revoke() {
    let (p, id) = watcher("mon-rollback", "touch ran.txt");
    approve(&p, &id);
    let old = p.root().join("old-loopx");
    let cp = |from: &std::path::Path, to: &std::path::Path| {
        let s = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(s.success());
    };
    let lx = p.root().join(".loopx");
    cp(&lx, &old);
    p.ok(&["monitor", "revoke", &id]);
    // The agent puts all of `.loopx/` back as it was before the revoke: seal, journal and
    // files agree, so only the mark beside the owner's key knows.
    std::fs::remove_dir_all(&lx).unwrap();
    cp(&old, &lx);
    let (code, v) = p.json(&["monitor", "poll"]);
    assert_eq!(code, 7, "{v}");
    assert!(v.to_string().contains("the last line you signed"), "{v}");
    assert!(
        !exists(&p, "ran.txt"),
        "a revoked check ran in the owner's poll"
    );
}
