//! Hand edits that would undo a limit the journal proves: spends deleted or moved in
//! `quota.toml`, a lease's holder edited or its `[lease]` removed, a `user` todo turned into an
//! agent one, a pending gate's `blocks` cut. Each is caught on the hot path (should-run, claim,
//! update), named in `owner_notes`, and reported by doctor at the file; honest work is not.

mod common;

use common::Project;
use serde_json::Value;

/// Replaces `from` with `to` in a state file.
#[track_caller]
fn edit(p: &Project, rel: &str, from: &str, to: &str) {
    let path = p.lx(rel);
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.contains(from), "{rel} has no `{from}`:\n{text}");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
}

/// Cuts a todo file's `[lease]` table, as an editor would.
fn cut_lease(p: &Project, id: &str) {
    let rel = format!("todos/{id}.toml");
    let text = std::fs::read_to_string(p.lx(&rel)).expect("read");
    let at = text.find("[lease]").expect("a [lease] table");
    std::fs::write(p.lx(&rel), &text[..at]).expect("write");
}

/// doctor (the owner's) is unhealthy (exit 6) with an error at `.loopx/FILE` naming `what`.
#[track_caller]
fn doctor_names(p: &Project, file: &str, what: &str) {
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    let hit = v["findings"].as_array().into_iter().flatten().any(|f| {
        f["severity"] == "error"
            && f["file"] == format!(".loopx/{file}").as_str()
            && f["message"].as_str().unwrap_or("").contains(what)
    });
    assert!(hit, "no error at .loopx/{file} naming `{what}`: {v}");
}

#[track_caller]
fn notes_name(v: &Value, what: &str) {
    let notes = format!("{} {}", v["owner_notes"], v["error"]);
    assert!(notes.contains(what), "nothing names `{what}`: {v}");
}

fn should_run(p: &Project) -> Value {
    p.no_key(&["--agent", "a1", "quota", "should-run"]).1
}

#[test]
fn spends_deleted_or_moved_by_hand_still_count() {
    let p = Project::new("limits-spend");
    p.add("work", &[]);
    p.ok(&["quota", "set", "--slots", "1"]);
    p.no_key(&["--agent", "a1", "quota", "spend-slot"]);
    assert_eq!(should_run(&p)["decision"], "throttled");
    // Deleted after the last seal: the journal's `quota.spend` line counts.
    let kept = std::fs::read_to_string(p.lx("quota.toml")).expect("quota.toml");
    std::fs::write(p.lx("quota.toml"), "schema_version = 1\n").expect("write");
    let v = should_run(&p);
    assert_eq!(v["decision"], "throttled", "{v}");
    notes_name(&v, "quota.toml");
    doctor_names(&p, "quota.toml", "spend");
    // Moved out of the window after the owner sealed it: the seal's `spend` line counts.
    std::fs::write(p.lx("quota.toml"), &kept).expect("write");
    p.ok(&["owner", "seal"]);
    let year = kept.split("at = \"").nth(1).expect("a spend")[..4].to_string();
    let last = (year.parse::<u32>().expect("year") - 1).to_string();
    edit(
        &p,
        "quota.toml",
        &format!("at = \"{year}"),
        &format!("at = \"{last}"),
    );
    let v = should_run(&p);
    assert_eq!(v["decision"], "throttled", "{v}");
    notes_name(&v, "quota.toml");
}

#[test]
fn a_lease_edited_or_removed_by_hand_stays_its_holders() {
    let p = Project::new("limits-lease");
    let t = p.add("work", &[]);
    let rel = format!("todos/{t}.toml");
    p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    // Before and after the owner seals the lease, a hand-edited holder holds nothing.
    for sealed in [false, true] {
        if sealed {
            edit(&p, &rel, "holder = \"a2\"", "holder = \"a1\"");
            p.ok(&["owner", "seal"]);
        }
        edit(&p, &rel, "holder = \"a1\"", "holder = \"a2\"");
        let (code, v) = p.no_key(&["--agent", "a2", "todo", "update", &t, "--evidence", "mine"]);
        assert_eq!(code, 4, "sealed {sealed}: {v}");
        notes_name(&v, &rel);
        doctor_names(&p, &rel, "a1 holds fence");
    }
    // The holder's own update goes on, and says what it acted on.
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "update", &t, "--evidence", "ok"]);
    assert_eq!(code, 0, "{v}");
    notes_name(&v, &rel);
    // Cutting `[lease]` and claiming again: the lease is still a1's.
    cut_lease(&p, &t);
    let (code, v) = p.no_key(&["--agent", "a2", "todo", "claim", &t]);
    assert_eq!(code, 4, "{v}");
    notes_name(&v, "a1 holds fence");
}

#[test]
fn a_lease_the_owner_reassigned_cannot_be_taken_back_by_hand() {
    let p = Project::new("limits-reassign");
    let t = p.add("work", &[]);
    p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    p.ok(&["todo", "reassign", &t, "--to", "a2"]);
    cut_lease(&p, &t);
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    assert_eq!(code, 4, "{v}");
    notes_name(&v, "a2 holds fence");
    let (code, v) = p.no_key(&["--agent", "a2", "todo", "update", &t, "--evidence", "mine"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn a_user_todo_added_after_the_seal_stays_the_owners() {
    let p = Project::new("limits-user");
    p.ok(&["owner", "seal"]);
    let (_, v) = p.no_key(&["--agent", "a1", "todo", "add", "sign it", "--role", "user"]);
    let u = v["todo"]["id"].as_str().expect("id").to_string();
    let rel = format!("todos/{u}.toml");
    edit(&p, &rel, "role = \"user\"", "role = \"agent\"");
    let (code, v) = p.no_key(&["--agent", "a3", "todo", "claim", &u]);
    assert_eq!(code, 3, "{v}");
    notes_name(&v, &rel);
    let (code, v) = p.no_key(&["--agent", "a3", "todo", "update", &u, "--status", "done"]);
    assert_ne!(code, 0, "{v}");
    doctor_names(&p, &rel, "user todo");
}

#[test]
fn a_pending_gate_opened_after_the_seal_keeps_its_blocks() {
    let p = Project::new("limits-gate");
    p.ok(&["owner", "seal"]);
    let t = p.add("gated", &[]);
    let (_, v) = p.no_key(&["--agent", "a1", "gate", "open", "may I?", "--blocks", &t]);
    let g = v["gate"]["id"].as_str().expect("gate id").to_string();
    let rel = format!("gates/{g}.toml");
    edit(&p, &rel, &format!("\"{t}\""), "");
    let (code, v) = p.no_key(&["--agent", "a4", "todo", "claim", &t]);
    assert_eq!(code, 3, "{v}");
    notes_name(&v, &rel);
    doctor_names(&p, &rel, &t);
}

#[test]
fn honest_leases_spends_and_gates_raise_no_note() {
    let p = Project::new("limits-honest");
    let (a, b, c) = (p.add("a", &[]), p.add("b", &[]), p.add("c", &[]));
    p.ok(&["quota", "set", "--slots", "50"]);
    let agent = |who: &str, args: &[&str]| {
        let mut all = vec!["--agent", who];
        all.extend_from_slice(args);
        let (code, v) = p.no_key(&all);
        assert_eq!(code, 0, "{args:?}: {v}");
        let n = v["owner_notes"].as_array().map_or(0, Vec::len);
        assert_eq!(n, 0, "{args:?}: {v}");
    };
    agent("a1", &["quota", "spend-slot"]);
    agent("a1", &["todo", "claim", &a]);
    agent("a1", &["todo", "renew", &a]);
    agent("a1", &["todo", "handoff", &a, "--to", "a2"]);
    agent("a2", &["todo", "update", &a, "--evidence", "taken over"]);
    agent("a2", &["todo", "release", &a]);
    agent("a3", &["todo", "claim", &a]);
    p.ok(&["owner", "seal"]);
    agent(
        "a3",
        &["todo", "update", &a, "--status", "done", "--evidence", "ok"],
    );
    agent("a1", &["todo", "claim", &b]);
    p.ok(&["todo", "reassign", &b, "--to", "a4"]);
    agent("a4", &["todo", "update", &b, "--evidence", "mine now"]);
    agent("a1", &["gate", "open", "may I?", "--blocks", &c]);
    agent("a2", &["quota", "spend-slot"]);
    let v = should_run(&p);
    assert_eq!(v["owner_notes"].as_array().map_or(0, Vec::len), 0, "{v}");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}
