//! The store a command works on: `--store URL` / `LOOPX_STORE`, else `[store] url` in the
//! discovered loopx.toml, else the files. The agent's commands go to the database chosen (not
//! built in yet: a clear I/O error); the file-only commands refuse a database (exit 2). Either
//! way nothing is written beside it.

mod common;

use common::{Project, assert_err, exit_of, parse_json, run_cmd};
use serde_json::Value;

// Port 1 on this machine: the connection is refused at once.
const URL: &str = "postgres://agent:secret@127.0.0.1:1/loopx";

/// Runs with `--json` and LOOPX_STORE set to `url` (or `--store url` with `flag`).
fn on_store(p: &Project, url: &str, flag: bool, args: &[&str]) -> (i32, Value) {
    // The flags first: after `--`, `turn` takes every word as its command's.
    let mut a = vec!["--json"];
    if flag {
        a.extend(["--store", url]);
    }
    a.extend_from_slice(args);
    let mut c = p.cmd(&a);
    if !flag {
        c.env("LOOPX_STORE", url);
    }
    let r = run_cmd(&mut c);
    assert!(
        !r.stdout.contains("secret") && !r.stderr.contains("secret"),
        "the URL's password is never echoed: {r:?}"
    );
    (r.code, parse_json(&r, &args.join(" ")))
}

#[track_caller]
fn refused(p: &Project, url: &str, flag: bool, args: &[&str], code: &str, says: &str) {
    let (exit, v) = on_store(p, url, flag, args);
    assert_err(&v, code);
    assert_eq!(exit, exit_of(code), "{args:?}: {v}");
    let msg = v["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(says), "{args:?}: {v}");
}

/// The agent's commands, each as an agent runs it.
const AGENT_COMMANDS: &[&[&str]] = &[
    &["status"],
    &["refresh-state"],
    &["quota", "should-run"],
    &["quota", "spend-slot"],
    &["quota", "show"],
    &["todo", "add", "Write it"],
    &["todo", "list"],
    &["todo", "claim"],
    &["todo", "renew"],
    &["todo", "update", "--evidence", "x"],
    &["todo", "release"],
    &["gate", "open", "Which data?"],
    &["gate", "list"],
    &["evidence", "list"],
    &["turn", "start"],
    &["turn", "end", "--turn", "t-1"],
    &["turn", "--", "true"],
    &["agents"],
    &["agent", "show"],
    &["log"],
    &["goal", "show"],
    &["mcp"],
    &["hook", "list"],
    &["hook", "serve"],
    &["monitor", "poll"],
];

#[test]
fn agent_commands_go_to_the_database_chosen_and_write_no_files() {
    let p = Project::new("store-url");
    let id = p.add("A todo", &[]);
    let before = p.files();
    for (i, args) in AGENT_COMMANDS.iter().enumerate() {
        let flag = i % 2 == 0;
        refused(&p, URL, flag, args, "io", "cannot connect to the database");
    }
    // setup on a database wires the work dir's pointer; a project on files there is refused.
    let setup = ["setup", "cron", "--every", "1h", "--", "true"];
    refused(&p, URL, false, &setup, "usage", "holds a project on files");
    assert_eq!(p.files(), before, "nothing was written beside the database");
    // Unset (or empty), the files are chosen as before.
    let (code, v) = on_store(&p, "", false, &["todo", "show", &id]);
    assert_eq!(
        (code, v["todo"]["id"].as_str()),
        (0, Some(id.as_str())),
        "{v}"
    );
}

#[test]
fn start_goal_makes_no_files_beside_a_database() {
    let p = Project::empty("store-start");
    refused(
        &p,
        URL,
        false,
        &["start-goal", "--goal-text", "Ship it"],
        "io",
        "cannot connect to the database",
    );
    assert!(!p.root().join(".loopx").exists());
}

#[test]
fn a_pointer_file_with_only_a_store_section_chooses_the_database() {
    let p = Project::empty("store-pointer");
    std::fs::create_dir_all(p.lx("")).unwrap();
    std::fs::write(p.lx("loopx.toml"), format!("[store]\nurl = \"{URL}\"\n")).unwrap();
    std::fs::create_dir_all(p.root().join("sub")).unwrap();
    let mut c = p.cmd(&["todo", "list", "--json"]);
    c.current_dir(p.root().join("sub"));
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "todo list under a pointer");
    assert_err(&v, "io");
    assert!(!r.stdout.contains("secret") && !r.stderr.contains("secret"));
    // The flag wins over the pointer; the owner's hooks are the database's too.
    refused(
        &p,
        "postgres://other@127.0.0.1:1/db",
        true,
        &["status"],
        "io",
        "cannot connect",
    );
    refused(&p, URL, false, &["hook", "list"], "io", "cannot connect");
    // A pointer whose URL is not one is invalid state, without the URL in the message.
    std::fs::write(
        p.lx("loopx.toml"),
        "[store]\nurl = \"postgres://secret@h\\u0007\"\n",
    )
    .unwrap();
    let v = p.fails(&["status"], "invalid_state");
    assert!(!v.to_string().contains("secret"), "{v}");
    std::fs::write(p.lx("loopx.toml"), "[store]\nhost = \"h\"\n").unwrap();
    p.fails(&["status"], "invalid_state");
}

#[test]
fn a_bad_store_url_is_a_usage_error() {
    let p = Project::new("store-bad");
    let long = format!("postgres://h/{}", "x".repeat(2100));
    for (url, flag) in [("postgres://secret@h\u{7}", false), (long.as_str(), true)] {
        refused(&p, url, flag, &["status"], "usage", "--store / LOOPX_STORE");
    }
}
