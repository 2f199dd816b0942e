//! The CLI has the board's powers and safety (issue 11, item 9): an options gate needs
//! `--option`, the owner releases any lease, `--json` usage errors name the argument (on the
//! command line and through the MCP server), spend past the limit says so, and counts agree
//! with their nouns. Every case runs the real binary.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::{Project, assert_same_files, bin};
use serde_json::{Value, json};

#[test]
fn approving_an_options_gate_needs_an_option() {
    let p = Project::new("opt-gate");
    let gid = p.gate(
        "Which cache?",
        &["--option", "sqlite", "--option", "plain files"],
    );
    let before = p.files();
    let v = p.fails(&["gate", "approve", &gid], "usage");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("sqlite") && msg.contains("plain files") && msg.contains("--option"),
        "the refusal names the options: {v}"
    );
    assert_eq!(
        v["error"]["details"]["options"],
        json!(["sqlite", "plain files"])
    );
    let hint = v["error"]["hint"].as_str().unwrap_or_default();
    assert!(
        hint.contains(&format!("gate approve {gid} --option 'sqlite'")),
        "{v}"
    );
    assert_same_files(&before, &p.files(), "a refused approval");

    // For people: exit 2, the options on stderr.
    let r = p.run(&["gate", "approve", &gid]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("one of: sqlite, plain files"), "{r:?}");

    let v = p.ok(&["gate", "approve", &gid, "--option", "plain files"]);
    assert_eq!(v["gate"]["status"], "approved");
    assert_eq!(v["gate"]["option"], "plain files");
}

#[test]
fn a_gate_without_options_is_approved_without_one() {
    let p = Project::new("plain-gate");
    let gid = p.gate("Go ahead?", &[]);
    let v = p.ok(&["gate", "approve", &gid]);
    assert_eq!(v["gate"]["status"], "approved");
    assert!(v["gate"].get("option").is_none_or(Value::is_null), "{v}");
}

#[test]
fn the_owner_releases_another_agents_lease() {
    let p = Project::new("owner-release");
    let id = p.add("long job", &[]);
    let claimed = p.ok_as("agent-a", &["todo", "claim", &id]);
    let fence = claimed["todo"]["fence"]
        .as_u64()
        .expect("fence")
        .to_string();

    // Without the owner's key: exit 7, the lease stays.
    let (code, v) = p.no_key(&["todo", "release", &id, "--owner"]);
    assert_eq!(code, 7, "{v}");
    common::assert_err(&v, "denied");
    assert_eq!(p.show(&id)["lease"]["holder"], "agent-a");

    let v = p.ok(&["todo", "release", &id, "--owner"]);
    assert_eq!(v["released_from"], "agent-a", "{v}");
    assert!(v["todo"].get("lease").is_none_or(Value::is_null), "{v}");
    assert!(p.show(&id).get("lease").is_none_or(Value::is_null));
    let last = p.journal().last().cloned().expect("a journal line");
    assert_eq!(last["action"], "todo.release", "{last}");
    assert_eq!(last["actor"], "owner", "{last}");
    assert_eq!(last["data"]["holder"], "agent-a", "{last}");

    // agent-a's next write is refused; the todo is free for another agent.
    p.fails_as(
        "agent-a",
        &["todo", "update", &id, "--fence", &fence, "--evidence", "x"],
        "lease_conflict",
    );
    p.ok_as("agent-b", &["todo", "claim", &id]);

    let r = p.run(&["todo", "release", &id, "--owner"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains(&format!("{id} released from agent-b by the owner")),
        "{r:?}"
    );
}

#[test]
fn an_owner_release_is_refused_plainly() {
    let p = Project::new("owner-release-bad");
    let id = p.add("idle", &[]);
    let before = p.files();
    let v = p.fails(&["todo", "release", &id, "--owner"], "lease_conflict");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("has no lease")),
        "{v}"
    );
    let v = p.fails(&["todo", "release", "--owner"], "usage");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("needs the todo's id")),
        "{v}"
    );
    p.fails(&["todo", "release", "t-zzzzzz", "--owner"], "not_found");
    assert_same_files(&before, &p.files(), "refused owner releases");
}

#[test]
fn an_owner_release_of_a_finished_or_broken_todo_says_so() {
    let p = Project::new("owner-release-gone");
    let done = p.add("finished", &[]);
    p.ok_as("agent-a", &["todo", "claim", &done]);
    p.ok_as(
        "agent-a",
        &[
            "todo",
            "update",
            &done,
            "--status",
            "done",
            "--evidence",
            "ok",
        ],
    );
    let v = p.fails(&["todo", "release", &done, "--owner"], "invalid_state");
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("done") && m.contains("archived"), "{v}");

    let broken = p.add("broken", &[]);
    let file = p.lx(&format!("todos/{broken}.toml"));
    std::fs::write(&file, "title = \"unterminated\n").unwrap();
    let v = p.fails(&["todo", "release", &broken, "--owner"], "invalid_state");
    let m = v["error"]["message"].as_str().unwrap_or_default();
    assert!(m.contains("cannot be read"), "{v}");
}

#[test]
fn json_usage_errors_name_the_missing_argument() {
    let p = Project::new("usage-json");
    let v = p.fails(&["todo", "add"], "usage");
    assert_eq!(
        v["error"]["message"],
        "the following required arguments were not provided: <TITLE>"
    );
    assert!(
        v["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("loopx todo add") && h.contains("<TITLE>")),
        "{v}"
    );
    let v = p.fails(&["todo", "reassign", "t-abcdef"], "usage");
    assert_eq!(
        v["error"]["message"],
        "the following required arguments were not provided: --to <AGENT>"
    );
    let v = p.fails(&["todo", "add", "x", "--bogus"], "usage");
    assert_eq!(v["error"]["message"], "unexpected argument '--bogus' found");
}

#[test]
fn json_usage_error_for_a_bare_command_group_is_one_object() {
    let p = Project::new("usage-sub");
    for group in ["todo", "gate", "owner"] {
        // `--json` first: nothing follows the group, so clap would print its help instead.
        let r = common::run_cmd(&mut p.cmd(&["--json", group]));
        assert_eq!(r.code, 2, "{r:?}");
        let v = common::parse_json(&r, group);
        common::assert_err(&v, "usage");
        let msg = v["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("requires a subcommand"), "{v}");
        assert!(
            v["error"]["hint"]
                .as_str()
                .is_some_and(|h| h.contains(&format!("loopx {group}"))),
            "{v}"
        );
    }
}

#[test]
fn spend_past_the_limit_exits_3_and_names_it() {
    let p = Project::new("spend-over");
    p.ok(&["quota", "set", "--slots", "1"]);
    p.ok(&["quota", "spend-slot"]);
    let (code, v) = p.json(&["quota", "spend-slot"]);
    assert_eq!(code, 3, "{v}");
    assert_eq!(v["over_limit"], json!(["slots"]), "{v}");
    assert_eq!(v["recorded"], true, "{v}");
    let r = p.run(&["quota", "spend-slot"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stdout.contains("over the limit: slots"), "{r:?}");
}

#[test]
fn counts_and_names_read_plainly() {
    let p = Project::new("wording");
    let r = p.run_as("nobody", &["todo", "release"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.stderr.contains("agent `nobody` holds no lease"), "{r:?}");
    p.ok(&["agent", "fix", "solo", "--slots", "1"]);
    let r = p.run(&["agent", "show", "solo"]);
    assert!(r.stdout.contains("at most 1 slot per window"), "{r:?}");
    p.add("one", &["--requires", "gpu"]);
    let v = p.fails(&["todo", "claim"], "nothing_ready");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("of 1 open todo,"), "{v}");
}

/// One JSON-RPC exchange with `loopx mcp` on stdio: the answers to `requests`, by id.
fn mcp(p: &Project, requests: &[Value]) -> Vec<Value> {
    let mut child = Command::new(bin())
        .args(["--agent", "agent-a", "mcp"])
        .current_dir(p.root())
        .env_remove("LOOPX_DIR")
        .env("HOME", &p.home.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start loopx mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut send = |v: Value| writeln!(stdin, "{v}").expect("write to loopx mcp");
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "cli-powers", "version": "0"}}}),
    );
    let hello: Value =
        serde_json::from_str(&lines.next().expect("an answer").expect("a line")).expect("JSON");
    assert_eq!(hello["id"], 0, "{hello}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut out = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        let mut r = r.clone();
        r["jsonrpc"] = json!("2.0");
        r["id"] = json!(i + 1);
        send(r);
        let line = lines.next().expect("an answer").expect("a line");
        out.push(serde_json::from_str(&line).expect("JSON"));
    }
    drop(stdin);
    let _ = child.wait();
    out
}

#[test]
fn the_mcp_server_names_the_missing_argument_and_offers_no_owner_release() {
    let p = Project::new("usage-mcp");
    let answers = mcp(
        &p,
        &[
            json!({"method": "tools/call", "params": {"name": "todo_add", "arguments": {}}}),
            json!({"method": "tools/list", "params": {}}),
        ],
    );
    let result = &answers[0]["result"];
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().expect("text content");
    let v: Value = serde_json::from_str(text).expect("the CLI's JSON answer");
    assert_eq!(
        v["error"]["message"],
        "the following required arguments were not provided: <TITLE>"
    );
    let tools = answers[1]["result"]["tools"].as_array().expect("tools");
    let release = tools
        .iter()
        .find(|t| t["name"] == "todo_release")
        .expect("todo_release");
    let props = &release["inputSchema"]["properties"];
    assert!(props.get("id").is_some(), "{release}");
    assert!(
        props.get("owner").is_none(),
        "an owner act offered: {release}"
    );
}
