//! doctor through the real binary: each broken relation, written by hand, is an error (exit 6)
//! naming its file; owner lines must be signed; `--fix` never follows a link; and a healthy
//! project under concurrent writes never reports an error.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Project;
use serde_json::Value;

/// A project with the owner key and one todo; returns it and the todo's id.
fn with_todo(tag: &str) -> (Project, String) {
    let p = Project::new(tag);
    let id = p.ok(&["todo", "add", "a todo"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    (p, id)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// Replaces the first line starting with `key =` (after `after`, if given) in a file.
fn set_key(path: &Path, after: Option<&str>, key: &str, value: &str) {
    let text = read(path);
    let mut seen = after.is_none();
    let mut done = false;
    let mut out = String::new();
    for line in text.lines() {
        if after.is_some_and(|a| line.trim() == a) {
            seen = true;
        }
        if seen && !done && line.trim_start().starts_with(&format!("{key} =")) {
            out.push_str(&format!("{key} = {value}\n"));
            done = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(done, "no {key} in {}:\n{text}", path.display());
    std::fs::write(path, out).unwrap();
}

/// Inserts a top-level line right after the `id = ...` line of a state file.
fn add_top_key(path: &Path, line: &str) {
    let text = read(path);
    let out = text.replacen("\nid = ", &format!("\n{line}\nid = "), 1);
    std::fs::write(path, out).unwrap();
}

/// Runs doctor; asserts exit 6 and an error naming `file` whose message contains `what`.
#[track_caller]
fn assert_error(p: &Project, file: &str, what: &str) -> Value {
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "doctor should fail: {v}");
    assert_eq!(v["ok"], false, "{v}");
    let found = v["findings"].as_array().unwrap().iter().find(|f| {
        f["severity"] == "error"
            && f["file"].as_str().is_some_and(|f| f.ends_with(file))
            && f["message"].as_str().is_some_and(|m| m.contains(what))
    });
    let f = found.unwrap_or_else(|| panic!("no error at {file} saying `{what}`: {v}"));
    let text = p.run(&["doctor"]);
    assert_eq!(text.code, 6);
    assert!(text.stdout.contains(file), "{text:?}");
    f.clone()
}

#[test]
fn a_healthy_project_is_healthy() {
    let (p, id) = with_todo("doc-healthy");
    p.ok_as("agent-a", &["todo", "claim", &id]);
    p.ok(&["quota", "spend-slot", "--cost-usd", "0.25"]);
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ok"], true);
}

#[test]
fn a_lease_that_expires_before_it_was_acquired() {
    let (p, id) = with_todo("doc-lease-order");
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let f = p.lx(&format!("todos/{id}.toml"));
    set_key(
        &f,
        Some("[lease]"),
        "expires_at",
        "\"2001-01-01T00:00:00Z\"",
    );
    let e = assert_error(&p, &format!("todos/{id}.toml"), "before it was acquired");
    assert!(e["line"].as_u64().is_some(), "a line is named: {e}");
}

#[test]
fn a_lease_without_a_holder() {
    let (p, id) = with_todo("doc-lease-holder");
    p.ok_as("agent-a", &["todo", "claim", &id]);
    let f = p.lx(&format!("todos/{id}.toml"));
    set_key(&f, Some("[lease]"), "holder", "\"  \"");
    let e = assert_error(&p, &format!("todos/{id}.toml"), "no holder");
    assert!(e["line"].as_u64().is_some(), "{e}");
}

#[test]
fn a_finished_todo_in_todos() {
    let (p, id) = with_todo("doc-done-open");
    set_key(
        &p.lx(&format!("todos/{id}.toml")),
        None,
        "status",
        "\"done\"",
    );
    assert_error(&p, &format!("todos/{id}.toml"), "status done in todos/");
    set_key(
        &p.lx(&format!("todos/{id}.toml")),
        None,
        "status",
        "\"cancelled\"",
    );
    assert_error(
        &p,
        &format!("todos/{id}.toml"),
        "status cancelled in todos/",
    );
}

#[test]
fn an_open_todo_in_archive() {
    let (p, id) = with_todo("doc-open-archived");
    p.ok_as("agent-a", &["todo", "claim", &id]);
    p.ok_as("agent-a", &["todo", "update", &id, "--status", "done"]);
    let f = p.lx(&format!("archive/{id}.toml"));
    for status in ["open", "blocked", "deferred"] {
        set_key(&f, None, "status", &format!("\"{status}\""));
        assert_error(
            &p,
            &format!("archive/{id}.toml"),
            &format!("status {status} in archive/"),
        );
    }
}

#[test]
fn a_dependency_cycle_is_named() {
    let (p, a) = with_todo("doc-cycle");
    let b = p.ok(&["todo", "add", "b", "--depends-on", &a])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = p.ok(&["todo", "add", "c", "--depends-on", &b])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    add_top_key(
        &p.lx(&format!("todos/{a}.toml")),
        &format!("depends_on = [\"{c}\"]"),
    );
    let mut ids = [a.clone(), b.clone(), c.clone()];
    ids.sort();
    let e = assert_error(&p, &format!("todos/{}.toml", ids[0]), "a dependency cycle");
    let msg = e["message"].as_str().unwrap();
    for id in [&a, &b, &c] {
        assert!(msg.contains(id.as_str()), "the cycle names {id}: {msg}");
    }
}

#[test]
fn a_todo_that_depends_on_itself() {
    let (p, a) = with_todo("doc-self-cycle");
    add_top_key(
        &p.lx(&format!("todos/{a}.toml")),
        &format!("depends_on = [\"{a}\"]"),
    );
    let e = assert_error(&p, &format!("todos/{a}.toml"), "a dependency cycle");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{a} -> {a}"))
    );
}

#[test]
fn a_spend_cost_that_is_not_a_finite_amount() {
    for bad in ["nan", "inf", "-inf", "-0.5"] {
        let p = Project::new("doc-cost");
        p.ok(&["quota", "spend-slot", "--cost-usd", "1.5"]);
        set_key(&p.lx("quota.toml"), Some("[[spend]]"), "cost_usd", bad);
        let e = assert_error(&p, "quota.toml", "cost_usd");
        assert!(e["line"].as_u64().is_some(), "{e}");
    }
}

#[test]
fn a_spend_dated_in_the_future() {
    let p = Project::new("doc-future");
    p.ok(&["quota", "spend-slot"]);
    p.ok(&["quota", "spend-slot"]);
    let soon = loopx::kernel::Ts(loopx::kernel::Ts::now().0 + 60_000);
    set_key(
        &p.lx("quota.toml"),
        Some("[[spend]]"),
        "at",
        &format!("\"{soon}\""),
    );
    // Moved by hand, the spend is named as an edit (the journal's spend still counts), but a
    // minute ahead is within the clock skew allowed.
    let (_, v) = p.json(&["doctor"]);
    assert!(
        !v.to_string().contains("in the future"),
        "a minute ahead is within the clock skew allowed: {v}"
    );
    let later = loopx::kernel::Ts(loopx::kernel::Ts::now().0 + 3_600_000);
    set_key(
        &p.lx("quota.toml"),
        Some("[[spend]]"),
        "at",
        &format!("\"{later}\""),
    );
    assert_error(&p, "quota.toml", "in the future");
}

#[test]
fn zero_or_negative_durations() {
    let cases = [
        ("[quota]", "window", "\"0s\"", "window"),
        ("[quota]", "window", "\"-PT1H\"", "window"),
        ("[lease]", "ttl", "\"0s\"", "ttl"),
        ("[lease]", "ttl", "\"PT-1S\"", "ttl"),
        ("[quota]", "min_interval", "\"-PT1S\"", "min_interval"),
        ("[quota]", "min_interval", "\"2d\"", "must be 0s to 24h"),
    ];
    for (table, key, value, what) in cases {
        let p = Project::new("doc-durations");
        set_key(&p.lx("loopx.toml"), Some(table), key, value);
        let out = p.run(&["doctor"]).stdout;
        if let Some(said) = ["out of range", "is not a duration", "must be"]
            .into_iter()
            .find(|s| out.contains(s))
        {
            // The duration's own parse or bound refuses it when the file is read, with its line.
            let e = assert_error(&p, "loopx.toml", said);
            assert!(e["line"].as_u64().is_some(), "{key}={value}: {e}");
            continue;
        }
        let e = assert_error(&p, "loopx.toml", what);
        assert!(e["line"].as_u64().is_some(), "{key}={value}: {e}");
    }
}

#[test]
fn a_recurring_todo_with_a_zero_period() {
    let p = Project::new("doc-every");
    let id = p.ok(&["todo", "add", "check", "--every", "1h"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    set_key(&p.lx(&format!("todos/{id}.toml")), None, "every", "\"0s\"");
    assert_error(
        &p,
        &format!("todos/{id}.toml"),
        "`every` must be 1s to 366d, not 0s",
    );
}

/// Appends a journal line, chained, attributed to `actor`, without a signature.
fn append_unsigned(p: &Project, actor: &str, action: &str, target: &str) {
    use sha2::{Digest, Sha256};
    let path = p.lx("journal.jsonl");
    let text = read(&path);
    let last = text.lines().last().unwrap();
    let seq = serde_json::from_str::<Value>(last).unwrap()["seq"]
        .as_u64()
        .unwrap();
    let prev: String = Sha256::digest(last.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let line = serde_json::json!({"seq": seq + 1, "at": loopx::kernel::Ts::now(), "actor": actor,
        "action": action, "target": target, "data": {}, "prev": prev});
    std::fs::write(&path, format!("{text}{line}\n")).unwrap();
}

#[test]
fn every_line_attributed_to_the_owner_must_be_signed() {
    let (p, id) = with_todo("doc-owner-lines");
    let (code, v) = p.json(&["log", "--verify"]);
    assert_eq!(code, 0, "{v}");
    for action in ["todo.add", "todo.update", "gate.open", "goal.start"] {
        append_unsigned(&p, "owner", action, &id);
        let (code, v) = p.json(&["log", "--verify"]);
        assert_eq!(code, 0, "the chain itself is intact: {v}");
        let e = assert_error(&p, "journal.jsonl", "without a valid owner signature");
        assert!(e["line"].as_u64().is_some(), "{e}");
    }
    // An agent's unsigned line is fine.
    let p = Project::new("doc-agent-lines");
    append_unsigned(&p, "agent-a", "todo.add", "t-abcdef");
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

#[test]
fn fix_never_follows_a_link() {
    let (p, _) = with_todo("doc-fix-links");
    let outside = p.home.path.join("precious");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("data.txt");
    std::fs::write(&target, b"keep me\nno newline at the end").unwrap();
    let temp_link = p.lx("todos/.t-x.toml.tmp-1-deadbeef");
    std::os::unix::fs::symlink(&target, &temp_link).unwrap();
    let log_link = p.lx("evidence/t-linked.jsonl");
    std::os::unix::fs::symlink(&target, &log_link).unwrap();
    std::fs::write(outside.join(".x.tmp-1-cafe"), b"not ours").unwrap();
    let gates = p.lx("gates");
    std::fs::remove_dir(&gates).unwrap();
    std::os::unix::fs::symlink(&outside, &gates).unwrap();

    let r = p.run(&["doctor", "--fix"]);
    assert_ne!(r.code, 0, "a symlinked gates/ is an error: {r:?}");
    assert_eq!(
        read(&target),
        "keep me\nno newline at the end",
        "the link's target is untouched"
    );
    assert!(
        outside.join(".x.tmp-1-cafe").exists(),
        "nothing removed through gates/"
    );
    assert!(
        std::fs::symlink_metadata(&temp_link).is_err(),
        "the temp link itself is removed"
    );
    assert!(r.stdout.contains("gates"), "{r:?}");
    assert!(
        r.stdout.contains("t-linked.jsonl"),
        "the linked log is named: {r:?}"
    );
}

#[test]
fn fix_repairs_a_torn_tail_and_temp_files() {
    let (p, _) = with_todo("doc-fix");
    let j = p.lx("journal.jsonl");
    let mut text = read(&j);
    text.push_str("{\"seq\": 99, \"torn");
    std::fs::write(&j, text).unwrap();
    std::fs::write(p.lx("todos/.t-y.toml.tmp-1-00000000"), b"x").unwrap();
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 6, "{v}");
    let (code, v) = p.json(&["doctor", "--fix"]);
    assert_eq!(code, 0, "{v}");
    let fixed = v["fixed"].to_string();
    assert!(fixed.contains("torn") && fixed.contains("temp file"), "{v}");
}

#[test]
fn a_healthy_project_under_concurrent_writes_never_reports_an_error() {
    let p = Project::new("doc-concurrent");
    let start = Instant::now();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let agent = format!("writer-{w}");
            let root = p.root().to_path_buf();
            let key = p.key.clone();
            let home = p.home.path.clone();
            std::thread::spawn(move || {
                let run = |args: &[&str]| {
                    std::process::Command::new(common::bin())
                        .args(["--agent", &agent, "--json"])
                        .args(args)
                        .current_dir(&root)
                        .env_remove("LOOPX_DIR")
                        .env_remove("LOOPX_AGENT")
                        .env("LOOPX_LOCK_TIMEOUT", "60")
                        .env("HOME", &home)
                        .env("LOOPX_OWNER_KEY", &key)
                        .output()
                        .unwrap()
                };
                for i in 0..12 {
                    let out = run(&["todo", "add", &format!("w{i}")]);
                    assert!(out.status.success(), "{out:?}");
                    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                    let id = v["todo"]["id"].as_str().unwrap().to_string();
                    let out = run(&["todo", "claim", &id]);
                    if !out.status.success() {
                        continue;
                    }
                    let out = run(&["todo", "update", &id, "--status", "done"]);
                    assert!(out.status.success(), "{out:?}");
                }
            })
        })
        .collect();
    let mut runs = 0;
    while runs < 20 {
        let mut c = p.cmd(&["doctor", "--json"]);
        c.env("LOOPX_LOCK_TIMEOUT", "60");
        let r = common::run_cmd(&mut c);
        let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
        assert_eq!(r.code, 0, "doctor run {runs} reported an error: {v}");
        runs += 1;
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "too slow: {runs} runs"
        );
    }
    for w in writers {
        w.join().unwrap();
    }
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}
