//! `loopx mcp` driven by a client this project did not write: the official Python MCP SDK
//! (PyPI `mcp`), in a virtual environment that `.ci/run` makes (or this test, when run alone).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use common::{Project, bin, venv};
use serde_json::{Value, json};

/// The Python SDK's version the tests pin.
const MCP_VERSION: &str = "2.3.0";

/// A Python with the `mcp` package: `LOOPX_MCP_PYTHON`, else the venv `target/mcp-venv`.
fn python() -> &'static PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let pkg = format!("mcp=={MCP_VERSION}");
        venv::python_with("LOOPX_MCP_PYTHON", "mcp-venv", "mcp", &pkg)
    })
}

/// Runs the Python client with `script` as `agent`; one JSON value per step (the first is the
/// handshake).
fn client(p: &Project, agent: &str, key: Option<&PathBuf>, script: Value) -> Vec<Value> {
    let script_path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/client.py");
    let mut c = Command::new(python());
    c.arg(script_path)
        .arg(bin())
        .arg(p.root())
        .arg(script.to_string())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &p.home.path)
        .env("LOOPX_AGENT", agent);
    if let Some(k) = key {
        c.env("LOOPX_OWNER_KEY", k);
    }
    let out = c.output().expect("run the Python MCP client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("client line is JSON"))
        .collect();
    assert_eq!(lines[0], json!({"server": "loopx", "tools": true}));
    lines[1..].to_vec()
}

fn call(tool: &str, args: Value) -> Value {
    json!({"op": "call", "tool": tool, "args": args})
}

/// Asserts a call answered `ok` with exit 0; gives its answer.
#[track_caller]
fn ok(step: &Value) -> &Value {
    assert_eq!(step["is_error"], false, "{step}");
    assert_eq!(step["exit_code"], 0, "{step}");
    assert_eq!(
        step["text_matches"], true,
        "the text content is the same JSON: {step}"
    );
    &step["answer"]
}

/// Asserts a call was refused with `code` and the CLI's exit code for it.
#[track_caller]
fn refused(step: &Value, code: &str, exit: i32) {
    assert_eq!(step["is_error"], true, "{step}");
    assert_eq!(step["answer"]["ok"], false, "{step}");
    assert_eq!(step["answer"]["error"]["code"], code, "{step}");
    assert_eq!(step["exit_code"], exit, "{step}");
}

#[test]
fn a_real_client_adds_claims_updates_and_is_refused() {
    let p = Project::new("mcp-basic");
    let steps = client(
        &p,
        "mcp-agent",
        None,
        json!([
            {"op": "tools"},
            call("todo_add", json!({"title": "Write the report", "priority": "P1"})),
            call("todo_claim", json!({})),
            call("todo_update", json!({"fence": 99, "evidence": ["too late"]})),
            call("todo_update", json!({"evidence": ["draft written"], "status": "done"})),
            call("todo_claim", json!({})),
            call("todo_claim", json!({"nope": 1})),
            call("todo_claim", json!({"ttl": 5})),
            call("gate_approve", json!({"id": "g-1"})),
            call("gate_open", json!({"question": "Ship it?", "option": ["yes", "no"]})),
            {"op": "resources"},
            {"op": "read", "uri": "loopx://state"},
        ]),
    );
    let tools = steps[0].as_object().unwrap();
    let mut names: Vec<&str> = tools.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "gate_list",
            "gate_open",
            "gate_show",
            "quota_spend",
            "refresh_state",
            "run_approved",
            "should_run",
            "status",
            "todo_add",
            "todo_check_propose",
            "todo_claim",
            "todo_list",
            "todo_release",
            "todo_renew",
            "todo_show",
            "todo_update",
            "turn_end",
            "turn_start"
        ]
    );
    let update = &tools["todo_update"]["schema"];
    assert_eq!(update["properties"]["fence"]["type"], "integer");
    assert_eq!(update["properties"]["evidence"]["type"], "array");
    assert_eq!(tools["todo_add"]["schema"]["required"], json!(["title"]));
    assert!(
        tools["todo_add"]["schema"]["properties"]
            .get("body_file")
            .is_none()
    );
    let propose = &tools["todo_check_propose"]["schema"];
    assert_eq!(
        propose["properties"]["command"]["type"], "array",
        "{propose}"
    );
    assert_eq!(tools["status"]["read_only"], true);
    assert_eq!(tools["todo_claim"]["read_only"], false);

    let added = ok(&steps[1]);
    let id = added["todo"]["id"].as_str().unwrap().to_string();
    assert_eq!(added["todo"]["created_by"], "mcp-agent");
    let claimed = ok(&steps[2]);
    assert_eq!(claimed["todo"]["lease"]["holder"], "mcp-agent");
    refused(&steps[3], "stale_fence", 4);
    assert_eq!(ok(&steps[4])["todo"]["status"], "done");
    refused(&steps[5], "nothing_ready", 3);
    refused(&steps[6], "usage", 2);
    refused(&steps[7], "usage", 2);
    assert_eq!(steps[8]["protocol_error"], "MCPError", "{}", steps[8]);
    let gate = ok(&steps[9]);
    assert_eq!(gate["gate"]["options"], json!(["yes", "no"]));
    assert_eq!(steps[10], json!(["loopx://state"]));
    let state = steps[11].as_str().unwrap();
    assert!(
        state.contains("draft written") && state.contains("Ship it?"),
        "{state}"
    );

    // On disk, through the CLI: done and archived, with the evidence, and the gate pending.
    let done = p.ok(&["todo", "list", "--status", "done"]);
    assert_eq!(done["todos"][0]["id"], id.as_str());
    let ev = p.evidence(&id);
    assert!(
        ev.iter()
            .any(|e| e["summary"] == "draft written" && e["agent"] == "mcp-agent")
    );
    assert!(
        !ev.iter().any(|e| e["summary"] == "too late"),
        "refused evidence was written"
    );
    let gates = p.ok(&["gate", "list", "--pending"]);
    assert_eq!(gates["gates"][0]["question"], "Ship it?");
    assert!(p.lx("STATE.md").is_file());
    let (code, _) = p.json(&["doctor"]);
    assert_eq!(code, 0);
}

#[test]
fn answers_are_the_cli_answers() {
    let p = Project::new("mcp-same");
    let id = p.add("One", &[]);
    p.add("Two", &["--priority", "P0"]);
    p.gate("Which way?", &["--blocks", &id]);
    // An action gate opened through the tool is the one the CLI opens (the same answer).
    let open = call(
        "gate_open",
        json!({"question": "Push?", "action_cmd": true, "argv": ["git", "push", "-f"]}),
    );
    let opened = client(&p, "twin", None, json!([open]));
    let gate = &opened[0]["answer"]["gate"];
    assert_eq!(
        gate["action"]["argv"],
        json!(["git", "push", "-f"]),
        "{}",
        opened[0]
    );
    let gid = gate["id"].as_str().unwrap().to_string();
    let again = p.cmd(&[
        "--json",
        "--agent",
        "twin",
        "gate",
        "open",
        "Push?",
        "--action-cmd",
        "--",
        "git",
        "push",
        "-f",
    ]);
    let again = common::parse_json(&common::run_cmd(&mut { again }), "gate open");
    assert_eq!(
        again["gate"]["id"],
        gid.as_str(),
        "the same ask is the same gate"
    );
    let tools = [
        ("gate_show", json!({"id": gid}), vec!["gate", "show", &gid]),
        ("status", json!({}), vec!["status"]),
        ("should_run", json!({}), vec!["quota", "should-run"]),
        (
            "todo_list",
            json!({"ready": true}),
            vec!["todo", "list", "--ready"],
        ),
        ("todo_show", json!({"id": id}), vec!["todo", "show", &id]),
        ("gate_list", json!({}), vec!["gate", "list"]),
    ];
    let script: Vec<Value> = tools.iter().map(|(t, a, _)| call(t, a.clone())).collect();
    let steps = client(&p, "twin", None, json!(script));
    for ((tool, _, cli), step) in tools.iter().zip(&steps) {
        let (code, want) = p.json_as("twin", cli);
        assert_eq!(step["exit_code"], code, "{tool}");
        assert_eq!(
            step["answer"], want,
            "{tool}: the MCP answer differs from the CLI's"
        );
    }
}

#[test]
fn owner_acts_are_refused_even_where_the_key_is() {
    let p = Project::new("mcp-owner");
    let user = p.add("Sign the contract", &["--role", "user"]);
    let steps = client(
        &p,
        "agent-x",
        Some(&p.key),
        json!([call("todo_update", json!({"id": user, "status": "done"}))]),
    );
    refused(&steps[0], "denied", 7);
    assert_eq!(p.show(&user)["status"], "open");
    // The owner, with the same key, can: the refusal was the server's, not the key's.
    p.ok(&["todo", "update", &user, "--status", "done"]);
}

#[test]
fn turn_start_and_end_record_one_turn_once() {
    let p = Project::new("mcp-turn");
    let id = p.add("Run the suite", &[]);
    let steps = client(
        &p,
        "runner",
        None,
        json!([
            call("turn_start", json!({"turn": "turn-1"})),
            call("turn_start", json!({"turn": "turn-1"})),
            call(
                "turn_end",
                json!({"turn": "turn-1", "done": true, "summary": "suite green"})
            ),
            call("turn_end", json!({"turn": "turn-1", "done": true})),
            call("turn_start", json!({"turn": "turn-1"})),
            call("turn_start", json!({"turn": "turn-2"})),
        ]),
    );
    let first = ok(&steps[0]);
    assert_eq!(first["todo"]["id"], id.as_str());
    assert_eq!(first["todo"]["lease"]["turn"], "turn-1");
    assert_eq!(ok(&steps[1])["resumed"], true);
    assert_eq!(ok(&steps[2])["ended"], "done");
    assert_eq!(ok(&steps[3])["replayed"], true);
    assert_eq!(ok(&steps[4])["replayed"], true);
    // Nothing left to do: should-run's answer, exit 3, not an error.
    let idle = &steps[5];
    assert_eq!(idle["exit_code"], 3);
    assert_eq!(idle["is_error"], false);
    assert_eq!(idle["answer"]["decision"], "idle");
    let quota = p.ok(&["quota", "show"]);
    assert_eq!(quota["quota"]["used"], 1, "{quota}");
    let ev = p.evidence(&id);
    assert!(
        ev.iter()
            .any(|e| e["summary"] == "suite green" && e["turn"] == "turn-1")
    );
}

/// Speaks the protocol by hand: the handshake and one call, then stdin closes at once.
#[test]
fn a_client_gone_mid_call_leaves_the_call_whole() {
    let p = Project::new("mcp-gone");
    for n in 0..3 {
        let mut child = p
            .cmd(&["--agent", "quitter", "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start loopx mcp");
        let title = format!("added by a client that left {n}");
        let lines = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "todo_add", "arguments": {"title": title}}}),
        ];
        let mut stdin = child.stdin.take().unwrap();
        for l in lines {
            writeln!(stdin, "{l}").unwrap();
        }
        drop(stdin);
        let status = child.wait().expect("loopx mcp exits when stdin closes");
        assert!(status.success(), "{status}");
        let listed = p.ok(&["todo", "list"]);
        let found = listed["todos"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["title"] == title.as_str())
            .count();
        assert_eq!(found, 1, "the call under way ends whole: {listed}");
    }
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");
}

/// A raw session's answers, one JSON value per line.
#[test]
fn a_raw_session_answers_initialize_and_lists_tools() {
    let p = Project::new("mcp-raw");
    let mut child = p
        .cmd(&["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    writeln!(stdin, "{init}").unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    )
    .unwrap();
    drop(stdin);
    let out = BufReader::new(child.stdout.take().unwrap());
    let answers: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).expect("each line is JSON-RPC"))
        .collect();
    child.wait().unwrap();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["result"]["serverInfo"]["name"], "loopx");
    assert_eq!(answers[1]["result"]["tools"].as_array().unwrap().len(), 18);
}

#[test]
fn mcp_outside_a_project_says_so_before_serving() {
    let p = Project::empty("mcp-none");
    let (code, v) = p.json(&["mcp"]);
    assert_eq!(code, 5);
    assert_eq!(v["error"]["code"], "not_initialized");
}
