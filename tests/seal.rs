//! The owner's seal on the hot path: every owner fact an agent tampers with by hand is caught by
//! should-run and claim (not only by doctor), and the answer names the file that disagrees.

mod common;

use common::Project;
use loopx::store::journal::sha256_hex;
use serde_json::Value;

/// Rewrites the journal without the lines `drop` picks, renumbered and chained again: what an
/// agent that can write `.loopx/` can do, since the chain itself has no key.
fn rewrite_journal(p: &Project, drop: impl Fn(&Value) -> bool) {
    let path = p.lx("journal.jsonl");
    let text = std::fs::read_to_string(&path).expect("journal");
    let mut out = String::new();
    let mut prev = "0".repeat(64);
    let mut seq = 0;
    for line in text.lines() {
        let mut v: Value = serde_json::from_str(line).expect("line");
        if drop(&v) {
            continue;
        }
        seq += 1;
        v["seq"] = seq.into();
        v["prev"] = prev.clone().into();
        let l = serde_json::to_string(&v).expect("json");
        prev = sha256_hex(l.as_bytes());
        out.push_str(&l);
        out.push('\n');
    }
    std::fs::write(&path, out).expect("write journal");
}

/// Lets the todo files settle and loads twice, so the cache is written; then rewrites its rows
/// through `f` (a forgery), as one who can write `.loopx/cache/` could.
fn forge_cache(p: &Project, f: impl FnMut(&mut loopx::kernel::Todo)) {
    std::thread::sleep(std::time::Duration::from_millis(60));
    for _ in 0..2 {
        p.no_key(&["status"]);
    }
    assert!(
        loopx::store::cache::forge_rows(&p.lx("cache/todos.bin"), f),
        "the cache was written"
    );
}

/// Replaces `from` with `to` in a state file.
fn edit(p: &Project, rel: &str, from: &str, to: &str) {
    let path = p.lx(rel);
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(text.contains(from), "{rel} has no `{from}`:\n{text}");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("write");
}

/// The agent's should-run (no key), asserting its decision and that a note names `what`.
#[track_caller]
fn should_run_says(p: &Project, decision: &str, what: &str) -> Value {
    let (_, v) = p.no_key(&["--agent", "a1", "quota", "should-run"]);
    assert_eq!(v["decision"], decision, "{v}");
    let notes = v["owner_notes"].to_string();
    assert!(notes.contains(what), "no note naming `{what}`: {v}");
    v
}

#[test]
fn unpausing_by_hand_is_caught_even_with_the_journal_rewritten() {
    let p = Project::new("seal-pause");
    let t = p.add("work", &[]);
    p.ok(&["goal", "pause"]);
    edit(
        &p,
        "loopx.toml",
        "status = \"paused\"",
        "status = \"active\"",
    );
    rewrite_journal(&p, |v| v["action"] == "goal.pause");
    should_run_says(&p, "paused", "loopx.toml");
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"].to_string().contains("loopx.toml"),
        "{v}"
    );
    let (_, v) = p.no_key(&["status"]);
    assert_eq!(v["owner_notes"].as_array().map(Vec::len), Some(1), "{v}");
    // The owner resumes: the seal follows, and the note is gone.
    p.ok(&["goal", "resume"]);
    let (code, v) = p.no_key(&["--agent", "a1", "quota", "should-run"]);
    assert_eq!((code, &v["decision"]), (0, &Value::from("run")), "{v}");
    assert!(v.get("owner_notes").is_none(), "{v}");
}

#[test]
fn raising_the_quota_by_hand_changes_nothing() {
    let p = Project::new("seal-quota");
    p.add("work", &[]);
    p.ok(&["quota", "set", "--slots", "1"]);
    edit(&p, "loopx.toml", "slots = 1", "slots = 1000");
    p.no_key(&["--agent", "a1", "quota", "spend-slot"]);
    let v = should_run_says(&p, "throttled", "[quota]");
    assert_eq!(v["quota"]["limit"], 1, "{v}");
}

#[test]
fn a_sealed_gate_edited_or_deleted_blocks_every_todo() {
    let p = Project::new("seal-gates");
    let t = p.add("work", &[]);
    let other = p.add("other", &[]);
    let g = p.gate("may I?", &["--blocks", &t]);
    p.ok(&["owner", "seal"]);
    // Removing the todo from `blocks` unblocks nothing: the gate now blocks every todo.
    edit(&p, &format!("gates/{g}.toml"), &format!("\"{t}\""), "");
    should_run_says(&p, "ask", &g);
    let (code, _) = p.no_key(&["--agent", "a1", "todo", "claim", &other]);
    assert_eq!(code, 3);
    // Deleting the gate and its gate.open line: the same.
    std::fs::remove_file(p.lx(&format!("gates/{g}.toml"))).expect("rm");
    rewrite_journal(&p, |v| v["action"] == "gate.open");
    should_run_says(&p, "ask", &g);
    let (code, _) = p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    assert_eq!(code, 3);
}

#[test]
fn an_approved_gate_with_its_question_rewritten_counts_as_pending() {
    let p = Project::new("seal-question");
    let t = p.add("work", &[]);
    let g = p.gate("deploy to staging?", &["--blocks", &t]);
    p.ok(&["gate", "approve", &g]);
    let (code, _) = p.no_key(&["--agent", "a1", "quota", "should-run"]);
    assert_eq!(code, 0);
    edit(
        &p,
        &format!("gates/{g}.toml"),
        "deploy to staging?",
        "deploy to production?",
    );
    should_run_says(&p, "ask", &g);
    let (code, _) = p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    assert_eq!(code, 3);
}

#[test]
fn a_user_todo_stays_the_owners_in_its_file_and_in_the_cache() {
    let p = Project::new("seal-user");
    let u = p.add("sign the contract", &["--role", "user"]);
    p.add("work", &[]);
    p.ok(&["owner", "seal"]);
    edit(
        &p,
        &format!("todos/{u}.toml"),
        "role = \"user\"",
        "role = \"agent\"",
    );
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "claim", &u]);
    assert_eq!(code, 3, "{v}");
    let v = should_run_says(&p, "run", &u);
    assert_ne!(v["todo"]["id"], u.as_str(), "{v}");
    // A forged cache row says the same: the seal wins.
    edit(
        &p,
        &format!("todos/{u}.toml"),
        "role = \"agent\"",
        "role = \"user\"",
    );
    for i in 0..8 {
        p.add(&format!("more {i}"), &[]);
    }
    let mut forged = 0;
    forge_cache(&p, |t| {
        if t.role == loopx::kernel::Role::User {
            t.role = loopx::kernel::Role::Agent;
            forged += 1;
        }
    });
    assert_eq!(forged, 1, "the user todo was cached");
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "claim", &u]);
    assert_eq!(code, 3, "{v}");
}

#[test]
fn a_lease_holder_changed_by_hand_after_a_reassign_is_refused() {
    let p = Project::new("seal-lease");
    let t = p.add("work", &[]);
    p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    p.ok(&["todo", "reassign", &t, "--to", "a2"]);
    edit(
        &p,
        &format!("todos/{t}.toml"),
        "holder = \"a2\"",
        "holder = \"a3\"",
    );
    let (code, v) = p.no_key(&[
        "--agent",
        "a3",
        "todo",
        "update",
        &t,
        "--evidence",
        "mine now",
    ]);
    assert_eq!(code, 4, "{v}");
    assert!(v["error"]["message"].to_string().contains("a2"), "{v}");
    let (code, v) = p.no_key(&["--agent", "a2", "todo", "update", &t, "--evidence", "mine"]);
    assert_eq!(code, 0, "{v}");
    assert!(v["owner_notes"].to_string().contains("a2"), "{v}");
}

#[test]
fn cutting_sealed_history_is_seen_by_agents_and_doctor() {
    let p = Project::new("seal-cut");
    for i in 0..3 {
        p.add(&format!("work {i}"), &[]);
    }
    p.ok(&["owner", "seal"]);
    let path = p.lx("journal.jsonl");
    let text = std::fs::read_to_string(&path).expect("journal");
    let keep: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, keep).expect("cut");
    should_run_says(&p, "run", "journal.jsonl");
    let (code, v) = p.no_key(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    assert!(v["findings"].to_string().contains("sealed"), "{v}");
}

#[test]
fn no_valid_seal_pauses_until_the_owner_seals() {
    let p = Project::new("seal-missing");
    p.add("work", &[]);
    std::fs::remove_file(p.lx("owner.seal")).expect("rm");
    should_run_says(&p, "paused", "owner.seal");
    // The owner's commands refuse to build on files nobody vouches for, until the owner adopts them.
    let (code, v) = p.json(&["goal", "resume"]);
    assert_eq!(code, 6, "{v}");
    assert!(v["error"]["hint"].to_string().contains("--adopt"), "{v}");
    let (code, v) = p.json(&["owner", "seal"]);
    assert_eq!(code, 6, "{v}");
    p.ok(&["owner", "seal", "--adopt"]);
    let (code, _) = p.no_key(&["--agent", "a1", "quota", "should-run"]);
    assert_eq!(code, 0);
    // A seal edited by an agent is no seal.
    edit(&p, "owner.seal", "goal ", "goal  ");
    should_run_says(&p, "paused", "owner.seal");
}

#[test]
fn the_owner_adopts_a_hand_edit_with_seal_adopt() {
    let p = Project::new("seal-adopt");
    p.add("work", &[]);
    edit(&p, "loopx.toml", "slots = 100", "slots = 7");
    let (_, v) = p.no_key(&["quota", "should-run"]);
    assert_eq!(v["quota"]["limit"], 100, "{v}");
    let v = p.ok(&["owner", "seal"]);
    assert_eq!(
        v["seal"]["differences"].as_array().map(Vec::len),
        Some(1),
        "{v}"
    );
    let (_, v) = p.no_key(&["quota", "should-run"]);
    assert_eq!(
        v["quota"]["limit"], 100,
        "the plain seal keeps the sealed value: {v}"
    );
    p.ok(&["owner", "seal", "--adopt"]);
    let (_, v) = p.no_key(&["quota", "should-run"]);
    assert_eq!(v["quota"]["limit"], 7, "{v}");
    assert!(v.get("owner_notes").is_none(), "{v}");
    // Without the key, sealing is refused and writes nothing.
    let (code, _) = p.no_key(&["owner", "seal", "--adopt"]);
    assert_eq!(code, 7);
}

#[test]
fn an_older_seal_put_back_with_history_cut_is_seen_by_the_owners_doctor() {
    let p = Project::new("seal-replay");
    p.add("work", &[]);
    let old_seal = std::fs::read(p.lx("owner.seal")).expect("seal");
    let journal = std::fs::read_to_string(p.lx("journal.jsonl")).expect("journal");
    let kept = journal.lines().count();
    p.ok(&["goal", "pause"]);
    // The agent puts back the seal from before the pause, cuts the journal back to it, and
    // unpauses loopx.toml: a replay the hot path cannot see.
    std::fs::write(p.lx("owner.seal"), old_seal).expect("replay");
    let text = std::fs::read_to_string(p.lx("journal.jsonl")).expect("journal");
    let cut: String = text.lines().take(kept).map(|l| format!("{l}\n")).collect();
    std::fs::write(p.lx("journal.jsonl"), cut).expect("cut");
    edit(
        &p,
        "loopx.toml",
        "status = \"paused\"",
        "status = \"active\"",
    );
    let (code, v) = p.no_key(&["doctor"]);
    assert_eq!(code, 0, "without the key, doctor cannot know: {v}");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    assert!(
        v["findings"]
            .to_string()
            .contains("the last line you signed"),
        "{v}"
    );
}

#[test]
fn a_forged_approval_is_never_sealed_by_the_owners_next_seal() {
    let p = Project::new("seal-launder");
    let t = p.add("work", &[]);
    let g = p.gate("may I?", &["--blocks", &t]);
    edit(
        &p,
        &format!("gates/{g}.toml"),
        "status = \"pending\"",
        "status = \"approved\"",
    );
    p.ok(&["owner", "seal"]);
    p.ok(&["goal", "pause"]);
    p.ok(&["goal", "resume"]);
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    assert_eq!(code, 3, "{v}");
    let (_, v) = p.no_key(&["--agent", "a1", "quota", "should-run"]);
    assert_eq!(v["decision"], "ask", "{v}");
}

#[test]
fn an_agent_adding_a_todo_to_a_sealed_gate_is_no_tampering() {
    let p = Project::new("seal-blocks");
    let t = p.add("work", &[]);
    let g = p.gate("may I?", &["--blocks", &t]);
    p.ok(&["owner", "seal"]);
    let other = p.add("more work", &["--blocked-by-gate", &g]);
    let free = p.add("free work", &[]);
    let (code, v) = p.no_key(&["--agent", "a1", "quota", "should-run"]);
    assert_eq!(
        (code, &v["todo"]["id"]),
        (0, &Value::from(free.as_str())),
        "{v}"
    );
    assert!(v.get("owner_notes").is_none(), "{v}");
    let (code, _) = p.no_key(&["--agent", "a1", "todo", "claim", &other]);
    assert_eq!(code, 3);
}

#[test]
fn a_rejection_holds_for_a_todo_deferred_while_the_gate_was_pending() {
    let p = Project::new("seal-dodge");
    let t = p.add("work", &[]);
    p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    let g = p.gate("may I?", &["--blocks", &t]);
    let (code, v) = p.no_key(&[
        "--agent", "a1", "todo", "update", &t, "--status", "deferred",
    ]);
    assert_eq!(code, 0, "{v}");
    p.ok(&["gate", "reject", &g, "--reason", "no"]);
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "reopen", &t]);
    assert_eq!(code, 7, "{v}");
    // Edited back to open by hand: the seal keeps it blocked.
    edit(
        &p,
        &format!("todos/{t}.toml"),
        "status = \"blocked\"",
        "status = \"open\"",
    );
    let (code, v) = p.no_key(&["--agent", "a1", "todo", "claim", &t]);
    assert_eq!(code, 3, "{v}");
    assert!(
        v["error"]["message"].to_string().contains("stays blocked"),
        "{v}"
    );
}

#[test]
fn a_decision_the_seal_does_not_hold_counts_as_pending() {
    let p = Project::new("seal-replayed");
    let t = p.add("work", &[]);
    let g = p.gate("deploy?", &["--blocks", &t]);
    p.ok(&["gate", "approve", &g]);
    let approved = std::fs::read_to_string(p.lx(&format!("gates/{g}.toml"))).expect("gate");
    // Another gate of the same goal gets the approved file's decision and signature copied in,
    // as from history/: the seal never held that decision.
    let t2 = p.add("other", &[]);
    let g2 = p.gate("drop the tables?", &["--blocks", &t2]);
    let forged = approved
        .replace(&g, &g2)
        .replace("deploy?", "drop the tables?");
    std::fs::write(
        p.lx(&format!("gates/{g2}.toml")),
        forged.replace(&format!("\"{t}\""), &format!("\"{t2}\"")),
    )
    .expect("forge");
    let (code, _) = p.no_key(&["--agent", "a1", "todo", "claim", &t2]);
    assert_eq!(code, 3);
}

#[test]
fn an_older_seal_put_back_is_seen_on_the_hot_path() {
    let p = Project::new("seal-older");
    p.add("work", &[]);
    let old_seal = std::fs::read(p.lx("owner.seal")).expect("seal");
    p.ok(&["goal", "pause"]);
    std::fs::write(p.lx("owner.seal"), old_seal).expect("replay");
    edit(
        &p,
        "loopx.toml",
        "status = \"paused\"",
        "status = \"active\"",
    );
    should_run_says(&p, "paused", "older than the owner's action");
    let (code, v) = p.no_key(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    assert!(
        v["findings"]
            .to_string()
            .contains("older than the owner's action"),
        "{v}"
    );
}

#[test]
fn deleting_owner_pub_alone_switches_nothing_off() {
    let p = Project::new("seal-nopub");
    p.add("work", &[]);
    p.ok(&["goal", "pause"]);
    std::fs::remove_file(p.lx("owner.pub")).expect("rm");
    edit(
        &p,
        "loopx.toml",
        "status = \"paused\"",
        "status = \"active\"",
    );
    should_run_says(&p, "paused", "owner.pub is gone");
}

#[test]
fn a_planted_torn_line_never_cuts_history() {
    let p = Project::new("seal-torn");
    p.add("work", &[]);
    let path = p.lx("journal.jsonl");
    let text = std::fs::read_to_string(&path).expect("journal");
    let n = text.lines().count();
    let last: Value = serde_json::from_str(text.lines().last().expect("line")).expect("json");
    let fake = serde_json::json!({"seq": n + 1, "at": last["at"], "actor": "a1", "action": "todo.add",
        "target": "t-zzzzzz", "data": {}, "prev": sha256_hex(text.lines().last().unwrap().as_bytes()), "tx": 1});
    std::fs::write(&path, format!("{text}{fake}\n")).expect("plant");
    p.no_key(&["status"]);
    p.ok(&["goal", "pause"]);
    let after = std::fs::read_to_string(&path).expect("journal");
    assert!(after.lines().count() > n, "history was cut:\n{after}");
    assert!(after.starts_with(&text), "history was changed");
}

#[test]
fn a_forged_cache_row_is_named_by_doctor_and_fixed() {
    let p = Project::new("seal-cacherow");
    let t = p.add("work", &["--priority", "P3"]);
    for i in 0..12 {
        p.add(&format!("more {i}"), &[]);
    }
    let mut forged = 0;
    forge_cache(&p, |t| {
        if t.priority == loopx::kernel::Priority::P3 {
            t.priority = loopx::kernel::Priority::P0;
            forged += 1;
        }
    });
    assert_eq!(forged, 1, "the P3 todo was cached");
    let (code, v) = p.no_key(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    assert!(v["findings"].to_string().contains(&t), "{v}");
    p.no_key(&["doctor", "--fix"]);
    let (code, v) = p.no_key(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn an_owner_adopted_quota_edit_is_healthy_and_a_later_one_is_not() {
    let p = Project::new("seal-adopt-doctor");
    p.ok(&["quota", "set", "--slots", "20"]);
    edit(&p, "loopx.toml", "slots = 20", "slots = 30");
    assert_eq!(p.json(&["doctor"]).0, 6);
    p.ok(&["owner", "seal", "--adopt"]);
    p.ok(&["doctor"]);
    edit(&p, "loopx.toml", "slots = 30", "slots = 31");
    assert_eq!(p.json(&["doctor"]).0, 6);
}
