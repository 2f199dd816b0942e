//! Proven work through the real binary: a todo with an owner-approved check is done only when
//! that check passes at HEAD; a failing, hanging, edited or unapproved check never completes it.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;
use serde_json::Value;

fn head(dir: &Path) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "HEAD"])
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A project in a git work tree with one commit, and a todo `agent-a` holds.
fn project(tag: &str) -> (Project, String) {
    let p = Project::new(tag);
    git(p.root(), &["init", "-q"]);
    std::fs::write(p.root().join(".gitignore"), ".loopx/\n").unwrap();
    git(p.root(), &["add", ".gitignore"]);
    git(p.root(), &["commit", "-q", "-m", "first"]);
    let id = p.add("make it", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    (p, id)
}

/// `todo check propose ID -- TEXT` as agent-a, then the owner approves it.
fn checked(p: &Project, id: &str, text: &str) {
    let r = p.run(&[
        "--json", "--agent", "agent-a", "todo", "check", "propose", id, "--", text,
    ]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    p.ok(&["todo", "check", "approve", id]);
}

/// Writes `name` in the work tree and commits it: the tree a check then reads is clean.
fn commit_file(p: &Project, name: &str) {
    std::fs::write(p.root().join(name), "ok").unwrap();
    git(p.root(), &["add", name]);
    git(p.root(), &["commit", "-q", "-m", name]);
}

fn done(p: &Project, id: &str, extra: &[&str]) -> (i32, Value) {
    let mut a = vec!["todo", "update", id, "--status", "done"];
    a.extend_from_slice(extra);
    p.json_as("agent-a", &a)
}

/// Removes the `[check]` table from a todo file, as an agent's hand edit would.
fn drop_check(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut keep = true;
    let cut: Vec<&str> = text
        .lines()
        .filter(|l| {
            if l.starts_with('[') {
                keep = *l != "[check]";
            }
            keep
        })
        .collect();
    std::fs::write(path, cut.join("\n") + "\n").unwrap();
}

fn checks(p: &Project, id: &str) -> Vec<Value> {
    p.evidence(id)
        .into_iter()
        .filter(|e| e["kind"] == "check")
        .collect()
}

#[test]
fn a_failing_check_keeps_the_todo_claimed_and_a_passing_one_completes_it() {
    let (p, id) = project("proof-basic");
    checked(&p, &id, "test -f built.txt");
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 9, "{v}");
    assert_err(&v, "check_failed");
    let t = p.show(&id);
    assert_eq!(t["status"], "open", "{t}");
    assert_eq!(t["lease"]["holder"], "agent-a", "{t}");
    let c = checks(&p, &id);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["exit_code"], 1);
    assert_eq!(c[0]["commit"], head(p.root()).as_str());
    assert_eq!(c[0]["sha256"].as_str().map(str::len), Some(64));

    commit_file(&p, "built.txt");
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["todo"]["status"], "done");
    let t = p.show(&id);
    assert_eq!(t["proof"]["tier"], "checked", "{t}");
    assert_eq!(t["proof"]["commit"], head(p.root()).as_str());
    assert_eq!(t["proof"]["stale"], false);
    // HEAD moves on: the result no longer speaks for the code.
    git(p.root(), &["commit", "-q", "--allow-empty", "-m", "later"]);
    let t = p.show(&id);
    assert_eq!(t["proof"]["stale"], true, "{t}");
    let r = p.run(&["todo", "show", &id]);
    assert!(r.stdout.contains("stale"), "{}", r.stdout);
    // status and STATE.md say it too.
    let s = p.ok(&["status"]);
    assert_eq!(s["done_lately"][0]["tier"], "checked", "{s}");
    assert_eq!(s["done_lately"][0]["stale"], true, "{s}");
    p.ok_as("agent-a", &["refresh-state"]);
    let md = std::fs::read_to_string(p.lx("STATE.md")).unwrap();
    assert!(
        md.contains(&format!("- {id} ✓ checked at")) && md.contains("stale"),
        "{md}"
    );
}

#[test]
fn a_todo_without_a_check_is_self_reported_and_check_evidence_is_loopx_s_own() {
    let (p, id) = project("proof-self");
    let (code, v) = p.json_as(
        "agent-a",
        &["todo", "update", &id, "--evidence", "ok", "--kind", "check"],
    );
    assert_eq!(code, 2, "{v}");
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(p.show(&id)["proof"]["tier"], "self-reported");
}

#[test]
fn an_unapproved_edited_or_removed_check_never_runs_and_blocks_the_done() {
    let (p, id) = project("proof-edit");
    let r = p.run(&[
        "--json",
        "--agent",
        "agent-a",
        "todo",
        "check",
        "propose",
        &id,
        "--",
        "touch ran1",
    ]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    // Not approved yet: refused, nothing run, nothing written.
    let before = p.evidence(&id).len();
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 7, "{v}");
    assert!(!p.root().join("ran1").exists());
    assert_eq!(p.evidence(&id).len(), before);
    // Approved, then edited by hand: the new text is not the owner's.
    p.ok(&["todo", "check", "approve", &id]);
    let path = p.lx(&format!("todos/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("touch ran1", "touch ran2")).unwrap();
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 7, "{v}");
    assert!(
        v.to_string().contains("not the text the owner approved"),
        "{v}"
    );
    assert!(!p.root().join("ran2").exists());
    // Removed by hand: still refused.
    drop_check(&path);
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 7, "{v}");
    assert!(v.to_string().contains("gone"), "{v}");
    // The owner revokes: the todo is done as self-reported.
    p.ok(&["todo", "check", "revoke", &id]);
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_hanging_flooding_or_forking_check_is_bounded() {
    let (p, id) = project("proof-bounds");
    checked(&p, &id, "sleep 60");
    for bad in ["0s", "25h"] {
        let (code, v) = done(&p, &id, &["--check-timeout", bad]);
        assert_eq!(code, 2, "{bad}: {v}");
    }
    let (code, v) = done(&p, &id, &["--check-timeout", "1s"]);
    assert_eq!(code, 9, "{v}");
    let c = checks(&p, &id);
    assert_eq!(c[0]["timed_out"], true, "{c:?}");

    let (p, id) = project("proof-flood");
    checked(&p, &id, "yes | head -c 5000000; exit 1");
    let (code, _) = done(&p, &id, &[]);
    assert_eq!(code, 9);
    let out = checks(&p, &id)[0]["output"].as_str().unwrap_or("").len();
    assert!(out <= 2_100, "{out} bytes of output kept");

    // A check that leaves a daemon behind passes, and the daemon is stopped.
    let (p, id) = project("proof-fork");
    checked(&p, &id, "sleep 300 & echo $! > bg.pid; true");
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
    let pid = std::fs::read_to_string(p.root().join("bg.pid")).unwrap();
    let alive = Path::new(&format!("/proc/{}", pid.trim())).exists();
    let zombie = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
        .map(|s| s.contains(") Z"))
        .unwrap_or(true);
    assert!(
        !alive || zombie,
        "the check's background process {pid} still runs"
    );
}

#[test]
fn the_evidence_names_the_head_the_check_ran_at_when_head_moves() {
    let (p, id) = project("proof-move");
    checked(
        &p,
        &id,
        "git -c user.name=t -c user.email=t@x commit -q --allow-empty -m moved",
    );
    let before = head(p.root());
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
    let c = checks(&p, &id);
    assert_eq!(c[0]["commit"], before.as_str(), "{c:?}");
    assert!(
        c[0]["summary"].as_str().unwrap().contains("HEAD moved"),
        "{c:?}"
    );
    assert_eq!(p.show(&id)["proof"]["stale"], true);
}

#[test]
fn the_owner_s_default_check_proves_every_todo_without_one() {
    let (p, id) = project("proof-default");
    let r = p.run(&[
        "--json", "todo", "check", "default", "--", "test", "-f", "ok.txt",
    ]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    // Without the key, nobody sets it.
    let mut c = p.cmd(&["--json", "todo", "check", "default", "--clear"]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("none"));
    assert_eq!(run_cmd(&mut c).code, 7);
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 9, "{v}");
    commit_file(&p, "ok.txt");
    // Edited by hand: refused, not run.
    let cfg = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("test -f ok.txt", "true")).unwrap();
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 7, "{v}");
    std::fs::write(&cfg, text).unwrap();
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(p.show(&id)["proof"]["tier"], "checked");
    p.ok(&["todo", "check", "default", "--clear"]);
}

#[test]
fn a_turn_that_succeeds_is_done_only_when_the_check_passes() {
    let (p, id) = project("proof-turn");
    checked(&p, &id, "test -f made.txt");
    p.ok_as("agent-a", &["todo", "release", &id]);
    let r = p.run_as(
        "agent-a",
        &["--json", "turn", "--complete-on-success", "--", "true"],
    );
    assert_eq!(r.code, 9, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains(r#""ended":"kept""#), "{}", r.stdout);
    // Still claimed, as a failed `todo update` leaves it, and no longer naming the turn.
    let t = p.show(&id);
    assert_ne!(t["status"], "done");
    assert_eq!(t["lease"]["holder"], "agent-a", "{t}");
    assert!(t["lease"].get("turn").is_none(), "{t}");
    let r = p.run_as(
        "agent-a",
        &[
            "--json",
            "turn",
            "--complete-on-success",
            "--",
            "touch",
            "made.txt",
        ],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(p.show(&id)["status"], "done");
}

#[test]
fn a_kill_while_the_check_runs_leaves_the_todo_claimed() {
    let (p, id) = project("proof-kill");
    checked(&p, &id, "touch started; sleep 30");
    let mut child = p
        .cmd(&[
            "--agent", "agent-a", "todo", "update", &id, "--status", "done",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..600 {
        if p.root().join("started").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let t = p.show(&id);
    assert_eq!(t["status"], "open", "{t}");
    assert_eq!(t["lease"]["holder"], "agent-a", "{t}");
    assert!(checks(&p, &id).is_empty());
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_turn_ended_done_by_its_host_is_done_only_when_the_check_passes() {
    let (p, id) = project("proof-turn-end");
    checked(&p, &id, "test -f made.txt");
    p.ok_as("agent-a", &["todo", "release", &id]);
    let v = p.ok_as("agent-a", &["turn", "start"]);
    let turn = v["turn"].as_str().unwrap().to_string();
    let (code, v) = p.json_as("agent-a", &["turn", "end", "--turn", &turn, "--done"]);
    assert_eq!(code, 9, "{v}");
    assert_eq!(v["error"]["details"]["evidence"]["exit_code"], 1, "{v}");
    assert_eq!(v["error"]["details"]["ended"], "kept", "{v}");
    assert_eq!(p.show(&id)["lease"]["holder"], "agent-a");
    assert_ne!(p.show(&id)["status"], "done");
    commit_file(&p, "made.txt");
    let v = p.ok_as("agent-a", &["turn", "start"]);
    let turn = v["turn"].as_str().unwrap().to_string();
    let v = p.ok_as("agent-a", &["turn", "end", "--turn", &turn, "--done"]);
    assert_eq!(v["ended"], "done", "{v}");
    assert_eq!(p.show(&id)["proof"]["tier"], "checked");
}

#[test]
fn a_seal_moved_aside_does_not_let_a_checked_todo_be_done_without_its_check() {
    let (p, id) = project("proof-seal");
    checked(&p, &id, "false");
    let seal = p.lx("owner.seal");
    let aside = p.root().join("seal.aside");
    std::fs::rename(&seal, &aside).unwrap();
    // Its check deleted too: with no seal, nothing says one was approved.
    let path = p.lx(&format!("todos/{id}.toml"));
    drop_check(&path);
    let (code, v) = p.no_key(&[
        "--agent", "agent-a", "todo", "update", &id, "--status", "done",
    ]);
    assert_eq!(code, 7, "{v}");
    std::fs::rename(&aside, &seal).unwrap();
    assert_ne!(p.show(&id)["status"], "done");
}

#[test]
fn only_the_holder_proposes_the_check_of_a_leased_todo() {
    let (p, id) = project("proven-grief");
    checked(&p, &id, "true");
    // agent-b cannot swap agent-a's approved check for one that blocks agent-a's done.
    let r = p.run(&[
        "--json", "--agent", "agent-b", "todo", "check", "propose", &id, "--", "false",
    ]);
    assert_eq!(r.code, 4, "{}", r.stdout);
    assert!(r.stdout.contains("only its holder"), "{}", r.stdout);
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_check_that_outlasts_the_lease_keeps_it() {
    let (p, id) = project("proven-long");
    p.ok_as("agent-a", &["todo", "claim", &id, "--ttl", "2s"]);
    checked(&p, &id, "sleep 3");
    // The check takes longer than the lease has left: the lease is renewed first, so no one
    // else may claim the todo meanwhile and the passing check completes it.
    let (code, v) = done(&p, &id, &["--check-timeout", "20s"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["todo"]["status"], "done", "{v}");
}

#[test]
fn a_check_on_a_dirty_tree_says_so_and_does_not_claim_the_commit() {
    let (p, id) = project("proof-dirty");
    std::fs::write(p.root().join("check.sh"), "exit 1\n").unwrap();
    git(p.root(), &["add", "check.sh"]);
    git(p.root(), &["commit", "-q", "-m", "the check"]);
    checked(&p, &id, "sh check.sh");
    // The approved script is edited in the work tree only: no commit holds what passed.
    std::fs::write(p.root().join("check.sh"), "exit 0\n").unwrap();
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
    let c = checks(&p, &id);
    assert_eq!(c[0]["files"], serde_json::json!(["check.sh"]), "{c:?}");
    let summary = c[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("dirty tree (1 uncommitted file: check.sh)"),
        "{summary}"
    );
    let t = p.show(&id);
    assert_eq!(t["proof"]["tier"], "checked-dirty", "{t}");
    assert_eq!(t["proof"]["commit"], head(p.root()).as_str(), "{t}");
    assert_eq!(t["proof"]["dirty"], serde_json::json!(["check.sh"]), "{t}");
    let r = p.run(&["todo", "show", &id]);
    assert!(
        r.stdout.contains("checked on a dirty tree at"),
        "{}",
        r.stdout
    );
    let s = p.ok(&["status"]);
    assert_eq!(s["done_lately"][0]["tier"], "checked-dirty", "{s}");
    assert_eq!(s["done_lately"][0]["dirty"][0], "check.sh", "{s}");
}

#[test]
fn a_worktree_s_check_reads_the_worktree_s_tree_not_the_main_one() {
    let (p, _) = project("proof-wt-dirty");
    let a = p.add("clean in its worktree", &[]);
    let b = p.add("dirty in its worktree", &[]);
    for id in [&a, &b] {
        p.ok_as("agent-a", &["todo", "claim", id, "--worktree"]);
        checked(&p, id, "test -f .gitignore");
    }
    // The main tree is dirty; a's worktree is clean, b's holds a file no commit has.
    std::fs::write(p.root().join("main-only.txt"), "x").unwrap();
    let b_tree = common::worktrees::tree(&p, &b);
    std::fs::write(b_tree.join("made.txt"), "x").unwrap();
    for id in [&a, &b] {
        let (code, v) = done(&p, id, &[]);
        assert_eq!(code, 0, "{v}");
    }
    let t = p.show(&a);
    assert_eq!(t["proof"]["tier"], "checked", "{t}");
    assert_eq!(t["proof"]["commit"], head(p.root()).as_str(), "{t}");
    let t = p.show(&b);
    assert_eq!(t["proof"]["tier"], "checked-dirty", "{t}");
    assert_eq!(t["proof"]["dirty"], serde_json::json!(["made.txt"]), "{t}");
}

/// Rewrites each journal line through `f`, chained again: what an agent that can write
/// `.loopx/` can do to the lines after the last seal.
fn forge_journal(p: &Project, f: impl Fn(&mut Value)) {
    let path = p.lx("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out = String::new();
    let mut prev = "0".repeat(64);
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        f(&mut v);
        v["prev"] = prev.clone().into();
        let l = serde_json::to_string(&v).unwrap();
        prev = loopx::store::journal::sha256_hex(l.as_bytes());
        out.push_str(&l);
        out.push('\n');
    }
    std::fs::write(&path, out).unwrap();
}

#[test]
fn owner_accepted_shows_only_where_the_owner_s_signature_proves_it() {
    let (p, id) = project("proof-forged-owner");
    // The owner's own done of a user todo is owner-accepted.
    let u = p.add("sign the contract", &["--role", "user"]);
    p.ok(&["todo", "update", &u, "--status", "done"]);
    assert_eq!(p.show(&u)["proof"]["tier"], "owner-accepted");
    // The agent's done, then its journal line and archived file say the owner did it.
    let (code, v) = done(&p, &id, &[]);
    assert_eq!(code, 0, "{v}");
    forge_journal(&p, |v| {
        if v["action"] == "todo.done" && v["target"] == id.as_str() {
            v["actor"] = "owner".into();
        }
    });
    let file = p.lx(&format!("archive/{id}.toml"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("status_by = \"agent-a\""), "{text}");
    std::fs::write(&file, text.replace("\"agent-a\"", "\"owner\"")).unwrap();

    let t = p.ok(&["todo", "show", &id]);
    assert_eq!(t["todo"]["proof"]["tier"], "self-reported", "{t}");
    let notes = t["owner_notes"].to_string();
    assert!(
        notes.contains(&id) && notes.contains("no owner signature"),
        "{t}"
    );
    let s = p.ok(&["status"]);
    let lately = s["done_lately"].as_array().unwrap();
    let row = lately.iter().find(|r| r["id"] == id.as_str()).unwrap();
    assert_eq!(row["tier"], "self-reported", "{s}");
    let row = lately.iter().find(|r| r["id"] == u.as_str()).unwrap();
    assert_eq!(row["tier"], "owner-accepted", "{s}");
    assert!(s["owner_notes"].to_string().contains(&id), "{s}");
    assert_eq!(p.show(&u)["proof"]["tier"], "owner-accepted");
}
