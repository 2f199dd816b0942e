//! An approval names its purpose, through the real binary: a done's check never runs as a
//! watcher, a watcher's never proves a done, and an old seal's purpose-less line approves
//! nothing until the owner approves again.

mod common;

use common::*;
use serde_json::Value;

/// Proposes `text` as `id`'s check (`group`: `monitor` or `todo check`) as agent-a; its SHA-256.
fn propose(p: &Project, group: &str, id: &str, text: &str) -> String {
    let mut a = vec!["--json", "--agent", "agent-a"];
    a.extend(group.split(' '));
    a.extend(["propose", id, "--", text]);
    let r = p.run(&a);
    let v = parse_json(&r, "propose");
    assert_eq!(r.code, 0, "{v}");
    v["check"]["sha256"].as_str().unwrap().to_string()
}

/// Gives todo `id` a cadence by hand (an agent's edit of its file).
fn add_every(p: &Project, id: &str) {
    let path = p.lx(&format!("todos/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replacen('\n', "\nevery = \"1s\"\n", 1)).unwrap();
}

/// Takes the cadence off todo `id` by hand.
fn drop_every(p: &Project, id: &str) {
    let path = p.lx(&format!("todos/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("every")).collect();
    std::fs::write(&path, kept.join("\n") + "\n").unwrap();
}

/// Rewrites `owner.seal` through `edit` and signs it again with the owner's key: a seal as an
/// older loopx, which wrote `check ID SHA` lines without a purpose, made it.
fn resign_seal(p: &Project, edit: impl Fn(&str) -> String) {
    use loopx::store::core::owner::{KeyAt, load};
    let path = p.lx("owner.seal");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (header, rest) = lines.split_first().unwrap();
    let body: String = rest
        .iter()
        .filter(|l| !l.starts_with("sig "))
        .map(|l| edit(l) + "\n")
        .collect();
    let key = load(&KeyAt::at(&p.key)).unwrap().unwrap();
    let sig = key.sign(&body);
    std::fs::write(&path, format!("{header}\n{body}sig {sig}\n")).unwrap();
}

fn poll(p: &Project) -> Value {
    p.ok_as("poller", &["monitor", "poll"])
}

fn skipped(v: &Value, id: &str) -> String {
    let s = v["skipped"].as_array().unwrap().iter();
    let s = s.into_iter().find(|s| s["id"] == id);
    s.and_then(|s| s["reason"].as_str())
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_done_check_approval_never_runs_as_a_watcher() {
    let p = Project::new("purpose-done");
    let id = p.add("make it", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    std::fs::write(p.root().join("check.sh"), "true\n").unwrap();
    let sha = propose(&p, "todo check", &id, "sh check.sh");
    p.ok(&["todo", "check", "approve", &id, "--sha", &sha[..16]]);
    // The seal and the signed journal line say what the owner approved it for.
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(seal.contains(&format!("check {id} {sha} done\n")), "{seal}");
    let j = p.journal();
    let line = j.iter().rfind(|e| e["action"] == "check.approve").unwrap();
    assert_eq!(line["data"]["purpose"], "done", "{line}");
    assert!(line["sig"].is_string(), "{line}");

    // The agent makes it a watcher, lets it go, and rewrites the script the text runs.
    add_every(&p, &id);
    p.ok_as("agent-a", &["todo", "release", &id]);
    std::fs::write(p.root().join("check.sh"), "touch pwned\n").unwrap();
    let v = poll(&p);
    assert!(
        !p.root().join("pwned").exists(),
        "the owner's poll ran it: {v}"
    );
    assert!(skipped(&v, &id).contains("other purpose"), "{v}");
    let m = p.ok(&["monitor", "list"]);
    assert_eq!(
        m["monitors"][0]["check"]["approval"], "other_purpose",
        "{m}"
    );
}

#[test]
fn a_watcher_approval_never_proves_a_done() {
    let p = Project::new("purpose-watch");
    let id = p.add("watch it", &["--every", "1h"]);
    propose(&p, "monitor", &id, "true");
    p.ok(&["monitor", "approve", &id]);
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(seal.contains(" watch\n"), "{seal}");
    // Without its cadence, the watcher's approved text would be the check that proves it done.
    drop_every(&p, &id);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let v = p.fails_as(
        "agent-a",
        &["todo", "update", &id, "--status", "done"],
        "denied",
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("watcher"),
        "{v}"
    );
    assert_eq!(p.show(&id)["status"], "open");
}

#[test]
fn each_approve_command_approves_only_its_own_purpose() {
    let p = Project::new("purpose-cmd");
    let done = p.add("make it", &[]);
    p.ok_as("agent-a", &["todo", "claim", &done]);
    propose(&p, "todo check", &done, "true");
    let w = p.add("watch it", &["--every", "1h"]);
    propose(&p, "monitor", &w, "true");
    let v = p.fails(&["monitor", "approve", &done], "usage");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("todo check approve"),
        "{v}"
    );
    let v = p.fails(&["todo", "check", "approve", &w], "usage");
    assert!(
        v["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("monitor approve"),
        "{v}"
    );
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(!seal.contains("\ncheck "), "nothing approved: {seal}");
}

#[test]
fn an_old_seal_s_purpose_less_line_approves_nothing_until_approved_again() {
    let p = Project::new("purpose-old");
    let w = p.add("watch it", &["--every", "1h"]);
    propose(&p, "monitor", &w, "touch ran");
    p.ok(&["monitor", "approve", &w]);
    let r = p.run(&["todo", "check", "default", "--", "test", "-f", "ok.txt"]);
    assert_eq!(r.code, 0, "{r:?}");
    resign_seal(&p, |l| {
        let l = l.strip_suffix(" watch").unwrap_or(l);
        l.strip_suffix(" done").unwrap_or(l).to_string()
    });
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(
        !seal.contains(" watch\n") && !seal.contains(" done\n"),
        "{seal}"
    );
    // The old seal still holds: the project loads, the goal is not paused.
    let s = p.ok(&["status"]);
    assert_eq!(s["goal"]["status"], "active", "{s}");
    let v = poll(&p);
    assert!(!p.root().join("ran").exists(), "{v}");
    assert!(skipped(&v, &w).contains("before approvals named"), "{v}");
    // The default check only ever proved a done: its old line still does.
    let t = p.add("make it", &[]);
    p.ok_as("agent-a", &["todo", "claim", &t]);
    std::fs::write(p.root().join("ok.txt"), "").unwrap();
    p.ok_as("agent-a", &["todo", "update", &t, "--status", "done"]);
    // The owner approves again: the line names its purpose, and the watcher runs.
    p.ok(&["monitor", "approve", &w]);
    let v = poll(&p);
    assert!(p.root().join("ran").exists(), "{v}");
    let seal = std::fs::read_to_string(p.lx("owner.seal")).unwrap();
    assert!(
        seal.contains(" watch\n") && seal.contains("check * "),
        "{seal}"
    );
}
