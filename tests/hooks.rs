//! Hooks (alerts) through the real binary: a sealed hook receives the event's JSON, a hanging
//! hook holds nothing up and is stopped and journaled, a hand-edited hook never runs, a failing
//! hook is journaled, and only the owner sets hooks.
//!
//! Hooks run detached, so a test waits for what a hook leaves with a bounded poll: it fails only
//! when the thing never comes, never on how fast it came.

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The journal's `hook.fail` lines.
fn hook_fails(p: &Project) -> Vec<Value> {
    p.journal()
        .into_iter()
        .filter(|l| l["action"] == "hook.fail")
        .collect()
}

/// Runs as an agent (no owner key) with `LOOPX_HOOK_TIMEOUT` set.
fn agent_with_timeout(p: &Project, secs: &str, args: &[&str]) -> Run {
    let mut c = p.cmd(args);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"))
        .env("LOOPX_HOOK_TIMEOUT", secs);
    run_cmd(&mut c)
}

/// `hook set EVENT -- COMMAND` with `--json` before the `--` (after it, it would be a word of
/// the command); as the owner, or without the key.
fn set_hook(p: &Project, key: bool, event: &str, command: &str) -> (i32, Value) {
    let mut c = p.cmd(&["--json", "hook", "set", event, "--", command]);
    if !key {
        c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"));
    }
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "hook set");
    (r.code, v)
}

/// `set_hook` as the owner, which must succeed.
#[track_caller]
fn hook_ok(p: &Project, event: &str, command: &str) -> Value {
    let (code, v) = set_hook(p, true, event, command);
    assert_eq!(code, 0, "{v}");
    v
}

#[test]
fn a_sealed_hook_receives_the_event_json() {
    let p = Project::new("hook-json");
    let out = p.root().join("got.json");
    let v = hook_ok(&p, "gate.opened", "cat > got.json");
    assert_eq!(v["hook"]["command"], "cat > got.json");
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    let sha = v["hook"]["sha256"].as_str().unwrap();
    assert!(seal.contains(&format!("hook gate.opened {sha}")), "{seal}");
    let list = p.ok(&["hook", "list"]);
    assert_eq!(list["hooks"][0]["sealed"], true, "{list}");

    // An agent opens a gate: its command returns, and the hook gets the line as JSON.
    let (code, g) = p.no_key(&["gate", "open", "Ship it?"]);
    assert_eq!(code, 0, "{g}");
    let gid = g["gate"]["id"].as_str().unwrap().to_string();
    let j = wait_for("the hook's file", || read_json(&out));
    assert_eq!(j["event"], "gate.opened");
    assert_eq!(j["action"], "gate.open");
    assert_eq!(j["target"], gid.as_str());
    assert_eq!(j["actor"], "local");
    assert_eq!(j["data"]["question"], "Ship it?");
    assert!(j["seq"].as_u64().is_some() && j["at"].is_string(), "{j}");
    assert_eq!(j["root"], p.root().display().to_string());
    assert!(j.get("sig").is_none());
    assert!(hook_fails(&p).is_empty());
    // One line, ended: appended by `cat >>`, events stay a JSON Lines log.
    let raw = std::fs::read_to_string(&out).unwrap();
    assert_eq!(raw.matches('\n').count(), 1, "{raw:?}");
    assert!(raw.ends_with('\n'), "{raw:?}");
}

#[test]
fn owner_events_and_a_spent_budget_fire_their_hooks() {
    let p = Project::new("hook-events");
    p.add("work", &[]);
    hook_ok(&p, "budget.spent", "cat > budget.json");
    hook_ok(&p, "goal.paused", "cat > paused.json");
    hook_ok(&p, "gate.decided", "cat > decided.json");
    p.ok(&["quota", "set", "--tokens", "10"]);
    let (code, _) = p.no_key(&["quota", "spend-slot", "--tokens", "11"]);
    assert_eq!(code, 3);
    let b = wait_for("budget.json", || read_json(&p.root().join("budget.json")));
    assert_eq!(b["event"], "budget.spent");
    assert_eq!(b["data"]["over_limit"], serde_json::json!(["tokens"]));
    let g = p.gate("Go?", &[]);
    p.ok(&["gate", "approve", &g]);
    let d = wait_for("decided.json", || read_json(&p.root().join("decided.json")));
    assert_eq!(
        (d["action"].as_str(), d["actor"].as_str()),
        (Some("gate.approve"), Some("owner"))
    );
    p.ok(&["goal", "pause", "--reason", "lunch"]);
    let g = wait_for("paused.json", || read_json(&p.root().join("paused.json")));
    assert_eq!(g["event"], "goal.paused");
}

#[test]
fn a_hanging_hook_holds_nothing_up_and_is_stopped_and_journaled() {
    let p = Project::new("hook-hang");
    hook_ok(&p, "gate.opened", "echo $$ > hook.pid; exec sleep 600");
    // The command that caused it returns (its answer is complete, with nothing left holding its
    // output), and the next command is not blocked by the hook.
    let r = agent_with_timeout(&p, "1", &["gate", "open", "Wait?", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = agent_with_timeout(&p, "1", &["todo", "add", "next", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let pid: i32 = wait_for("the hook's pid", || {
        std::fs::read_to_string(p.root().join("hook.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    // The timeout stops it, and the failure is journaled by loopx.
    let fail = wait_for("hook.fail", || hook_fails(&p).pop());
    assert_eq!(fail["actor"], "loopx");
    assert_eq!(fail["target"], "gate.opened");
    assert_eq!(fail["data"]["timed_out"], true, "{fail}");
    assert!(fail.get("sig").is_none());
    wait_for("the hung hook to be gone", || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    // hook.fail fires no hook, and doctor is content with the journal.
    let (code, d) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{d}");
}

#[test]
fn a_failing_hook_is_journaled_with_its_exit_and_output() {
    let p = Project::new("hook-fail");
    hook_ok(&p, "gate.opened", "echo boom; exit 4");
    let g = p.gate("Fail?", &[]);
    let fail = wait_for("hook.fail", || hook_fails(&p).pop());
    assert_eq!(fail["data"]["exit"], 4, "{fail}");
    assert_eq!(fail["data"]["timed_out"], false);
    assert!(
        fail["data"]["tail"].as_str().unwrap().contains("boom"),
        "{fail}"
    );
    let opened = p
        .journal()
        .into_iter()
        .find(|l| l["action"] == "gate.open" && l["target"] == g.as_str())
        .unwrap();
    assert_eq!(fail["data"]["seq"], opened["seq"]);
    assert_eq!(hook_fails(&p).len(), 1, "hook.fail fires nothing");
}

/// Runs the hidden supervisor by hand, with JSON naming journal line `seq` on stdin.
fn hook_run(p: &Project, event: &str, seq: u64) -> (i32, Value) {
    let mut c = p.cmd(&["hook", "run", event, "--json"]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let json = serde_json::json!({"event": event, "seq": seq, "data": {"forged": true}});
    stdin.write_all(json.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn a_hand_edited_hook_never_runs_until_the_owner_seals_it() {
    let p = Project::new("hook-hand");
    hook_ok(&p, "gate.opened", "touch sealed.txt");
    let path = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("touch sealed.txt"), "{text}");
    std::fs::write(&path, text.replace("touch sealed.txt", "touch forged.txt")).unwrap();

    // Every answer says so; the list marks it; the supervisor refuses to run it.
    p.no_key(&["gate", "open", "Forged?"]);
    let seq = p
        .journal()
        .into_iter()
        .rfind(|l| l["action"] == "gate.open")
        .and_then(|l| l["seq"].as_u64())
        .unwrap();
    let (_, s) = p.no_key(&["status"]);
    assert!(s["owner_notes"].to_string().contains("never runs"), "{s}");
    let (_, l) = p.no_key(&["hook", "list"]);
    assert_eq!(l["hooks"][0]["sealed"], false, "{l}");
    let (code, v) = hook_run(&p, "gate.opened", seq);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["hook"], "not_sealed");
    assert!(!p.root().join("forged.txt").exists());
    assert!(!p.root().join("sealed.txt").exists());

    // A hook added by hand for another event never runs either.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "[hooks]\n",
            "[hooks]\n\"goal.paused\" = \"touch added.txt\"\n",
        ),
    )
    .unwrap();
    assert_eq!(hook_run(&p, "goal.paused", seq).1["hook"], "not_sealed");

    // The owner adopts the edit: now it runs.
    p.ok(&["owner", "seal", "--adopt"]);
    // Made-up JSON (a line that is not this event) runs nothing.
    let (code, v) = hook_run(&p, "gate.opened", 1);
    assert_eq!(
        (code, v["hook"].as_str()),
        (3, Some("not_in_journal")),
        "{v}"
    );
    let (code, v) = hook_run(&p, "gate.opened", 1_000_000);
    assert_eq!(
        (code, v["hook"].as_str()),
        (3, Some("not_in_journal")),
        "{v}"
    );
    let (code, v) = hook_run(&p, "gate.opened", seq);
    assert_eq!((code, v["hook"].as_str()), (0, Some("ran")), "{v}");
    assert!(p.root().join("forged.txt").exists());
}

#[test]
fn only_the_owner_sets_hooks_and_names_are_checked() {
    let p = Project::new("hook-owner");
    let before = p.files();
    let (code, v) = set_hook(&p, false, "gate.opened", "true");
    assert_eq!(code, 7, "{v}");
    assert_eq!(before.get("loopx.toml"), p.files().get("loopx.toml"));
    let (code, v) = set_hook(&p, true, "gate.exploded", "true");
    assert_eq!(code, 2, "{v}");
    p.fails(&["hook", "remove", "gate.opened"], "not_found");
    hook_ok(&p, "lease.expired", "true");
    let (code, _) = p.no_key(&["hook", "remove", "lease.expired"]);
    assert_eq!(code, 7);
    let v = p.ok(&["hook", "remove", "lease.expired"]);
    assert_eq!(v["removed"], "lease.expired");
    let l = p.ok(&["hook", "list"]);
    assert_eq!(l["hooks"], serde_json::json!([]));
    assert!(l["events"].as_array().unwrap().len() >= 9);
    let journal = p.journal();
    let set = journal.iter().find(|l| l["action"] == "hook.set").unwrap();
    assert!(set["sig"].is_string(), "hook.set is signed: {set}");
    let long = "x".repeat(4001);
    assert_eq!(set_hook(&p, true, "gate.opened", &long).0, 2);
}

#[test]
fn an_expired_lease_cleared_or_reclaimed_fires_its_hook() {
    let p = Project::new("hook-lease");
    hook_ok(&p, "lease.reclaimed", "cat > reclaimed.json");
    hook_ok(&p, "lease.expired", "cat > expired.json");
    let a = p.add("first", &["--priority", "P0"]);
    let b = p.add("second", &["--priority", "P1"]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--ttl", "1s"]);
    p.ok_as("agent-a", &["todo", "claim", &b, "--ttl", "1s"]);
    // Let both leases lapse (a wait for the clock, not a measure of speed).
    std::thread::sleep(Duration::from_millis(1_100));
    p.ok_as("agent-b", &["todo", "claim", &a]);
    let r = wait_for("reclaimed.json", || {
        read_json(&p.root().join("reclaimed.json"))
    });
    assert_eq!(r["event"], "lease.reclaimed");
    assert_eq!(r["target"], a.as_str());
    assert_eq!(r["data"]["reclaimed_from"]["holder"], "agent-a");
    p.run(&["doctor", "--fix"]);
    let e = wait_for("expired.json", || read_json(&p.root().join("expired.json")));
    assert_eq!(e["event"], "lease.expired");
    assert_eq!(e["target"], b.as_str());
}

#[test]
fn a_hook_that_cannot_start_is_journaled_by_the_command_that_fired_it() {
    let p = Project::new("hook-nostart");
    hook_ok(&p, "gate.opened", "true");
    // No temporary directory for the event JSON: the supervisor cannot start.
    let mut c = p.cmd(&["gate", "open", "Start?", "--json"]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"))
        .env("TMPDIR", p.root().join("no-such-dir"));
    let r = run_cmd(&mut c);
    assert_eq!(r.code, 0, "the change stands: {r:?}");
    let fails = hook_fails(&p);
    assert_eq!(fails.len(), 1, "journaled before the command returned");
    assert_eq!(fails[0]["actor"], "loopx");
    assert!(
        fails[0]["data"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot start")),
        "{}",
        fails[0]
    );
}

#[test]
fn a_hook_that_causes_its_own_event_does_not_loop() {
    let p = Project::new("hook-loop");
    // Each run opens another gate: without the rule, every gate would fire the hook again.
    let bin = bin();
    hook_ok(
        &p,
        "gate.opened",
        &format!("echo run >> runs.txt; '{bin}' --agent hooky gate open again >/dev/null"),
    );
    p.gate("First?", &[]);
    wait_for("the hook's own gate", || {
        p.journal()
            .iter()
            .any(|l| l["action"] == "gate.open" && l["actor"] == "hooky")
            .then_some(())
    });
    // A commit inside a hook fires nothing: a later commit's hook still runs, once.
    p.gate("Second?", &[]);
    wait_for("two runs", || {
        let runs = std::fs::read_to_string(p.root().join("runs.txt")).ok()?;
        (runs.lines().count() >= 2).then_some(())
    });
    wait_for("the second hook's own gate", || {
        (p.journal()
            .iter()
            .filter(|l| l["action"] == "gate.open" && l["actor"] == "hooky")
            .count()
            == 2)
            .then_some(())
    });
    let runs = std::fs::read_to_string(p.root().join("runs.txt")).unwrap();
    assert_eq!(
        runs.lines().count(),
        2,
        "one run per gate opened outside a hook"
    );
}

#[test]
fn a_watched_result_that_changed_fires_its_hook() {
    let p = Project::new("hook-monitor");
    let id = p.add("watch the PR", &["--every", "1h"]);
    let r = p.run(&["--json", "monitor", "propose", &id, "--", "echo open"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    p.ok(&["monitor", "approve", &id]);
    hook_ok(&p, "monitor.changed", "cat > changed.json");
    let v = p.ok_as("poller", &["monitor", "poll"]);
    assert_eq!(v["ran"][0]["result"], "changed", "{v}");
    let got = wait_for("the monitor.changed hook", || {
        read_json(&p.root().join("changed.json"))
    });
    assert_eq!(got["event"], "monitor.changed", "{got}");
    assert_eq!(got["target"], id.as_str(), "{got}");
}
