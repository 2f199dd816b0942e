//! The real hosts, headless: Claude Code (`claude -p`) and Codex CLI (`codex exec`), each in a
//! project wired by `loopx setup`, driven by the tests' scripted model on 127.0.0.1, claim a
//! todo, record evidence and end the turn through `loopx mcp`. Also what the server tells any
//! client about the agent it acts as. The hosts' logs (requests, the tool schemas each received)
//! stay in the target dir's `tmp/hosts/`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::hosts::{self, Model};
use common::{Project, bin, git};
use serde_json::{Value, json};

/// What the scripted model is asked; it answers with its script whatever the prompt says.
const PROMPT: &str = "Run one loopx turn: turn_start, record your evidence, then turn_end.";

/// `loopx mcp`'s initialize instructions and tool schemas (by name), as a client without
/// `LOOPX_AGENT` (None) or with it sees them.
fn server_info(p: &Project, agent: Option<&str>) -> (String, serde_json::Map<String, Value>) {
    let mut c = Command::new(bin());
    c.arg("mcp")
        .current_dir(p.root())
        .env_remove("LOOPX_AGENT")
        .env_remove("LOOPX_DIR")
        .env("HOME", &p.home.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if let Some(a) = agent {
        c.env("LOOPX_AGENT", a);
    }
    let mut child = c.spawn().expect("start loopx mcp");
    let mut stdin = child.stdin.take().unwrap();
    for msg in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "hosts-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        writeln!(stdin, "{msg}").unwrap();
    }
    let (mut instructions, mut tools) = (None, serde_json::Map::new());
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).expect("a JSON-RPC line");
        if v["id"] == 1 {
            instructions = v["result"]["instructions"].as_str().map(String::from);
        }
        if v["id"] == 2 {
            for t in v["result"]["tools"].as_array().expect("tools") {
                tools.insert(t["name"].as_str().unwrap().into(), t["inputSchema"].clone());
            }
            break;
        }
    }
    drop(stdin);
    child.wait().unwrap();
    (instructions.expect("initialize gave instructions"), tools)
}

#[test]
fn the_server_says_which_agent_it_acts_as() {
    let p = Project::new("hosts-instructions");
    let (text, _) = server_info(&p, None);
    assert!(text.contains("acts as agent `local`"), "{text}");
    assert!(text.contains("LOOPX_AGENT"), "{text}");
    let (text, _) = server_info(&p, Some("reviewer"));
    assert!(text.contains("acts as agent `reviewer`"), "{text}");
}

/// A project with one todo, a git repository (Codex runs in one), wired for `host`; and what
/// setup said to do next.
fn project(tag: &str, host: &str) -> (Project, String, String) {
    let p = Project::new(tag);
    git(p.root(), &["init", "-q"]);
    let todo = p.add("Write the forecast parser", &[]);
    let next = p.ok(&["setup", host, "--bin", bin()])["next"].clone();
    (p, todo, next.as_str().unwrap().into())
}

/// A fresh log dir for `name` under the target dir, kept after the test.
fn log_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("hosts")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// One turn as the prompt tells it: turn_start, evidence on the todo it gave, turn_end done.
fn turn_script(evidence: &str, summary: &str) -> Value {
    json!([
        {"tool": "turn_start", "args": {}},
        {"tool": "todo_update",
         "args": {"id": "$todo", "fence": "$fence", "evidence": [evidence]}},
        {"tool": "turn_end", "args": {"turn": "$turn", "todo": "$todo", "fence": "$fence",
                                      "done": true, "summary": summary}},
        {"text": "Done: the turn is recorded."}
    ])
}

/// Asserts `.loopx/` holds `agent`'s turn on `todo`: claimed under a turn id, the evidence and
/// summary recorded, done, and the turn's slot spent under the same id.
#[track_caller]
fn assert_turn(p: &Project, agent: &str, todo: &str, evidence: &str, summary: &str) {
    let t = p.show(todo);
    assert_eq!(t["status"], "done", "{t}");
    assert_eq!(t["status_by"], agent, "{t}");
    let events = p.ok(&["log"])["events"].as_array().unwrap().clone();
    let find = |action: &str| {
        events
            .iter()
            .find(|e| e["action"] == action && e["actor"] == agent)
            .unwrap_or_else(|| panic!("no {action} by {agent}: {events:?}"))
    };
    let turn = &find("todo.claim")["data"]["turn"];
    assert!(turn.as_str().is_some_and(|t| t.starts_with("u-")), "{turn}");
    assert_eq!(find("todo.claim")["target"], todo);
    assert_eq!(find("todo.done")["target"], todo);
    assert_eq!(
        &find("quota.spend")["data"]["turn"],
        turn,
        "one slot for the turn"
    );
    let entries = p.ok(&["evidence", "list", "--todo", todo])["entries"].clone();
    for text in [evidence, summary] {
        let by_agent = entries
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["summary"] == text && e["agent"] == agent);
        assert!(by_agent, "no evidence {text:?} by {agent}: {entries}");
    }
}

/// Writes the tools `host` received into the log and asserts each loopx tool is among them,
/// named `mcp__loopx__NAME`, with loopx's own arguments.
#[track_caller]
fn assert_tools(p: &Project, model: &Model, host: &str) {
    let got = model.tools();
    let path = model.log.join(format!("{host}-tools.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap()).unwrap();
    eprintln!("the tool schemas {host} received: {}", path.display());
    let (_, ours) = server_info(p, None);
    assert!(ours.len() >= 15, "{ours:?}");
    for (name, schema) in &ours {
        let theirs = got
            .get(&format!("mcp__loopx__{name}"))
            .unwrap_or_else(|| panic!("{host} did not send loopx's {name}: {:?}", got.keys()));
        let keys = |s: &Value| {
            let mut k: Vec<String> = s["properties"]
                .as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            k.sort();
            k
        };
        assert_eq!(keys(theirs), keys(schema), "{host}'s {name} arguments");
    }
}

#[test]
fn claude_code_runs_a_turn_through_loopx_mcp() {
    let Some(clis) = hosts::clis("claude_code_runs_a_turn_through_loopx_mcp") else {
        return;
    };
    let (p, todo, next) = project("hosts-claude", "claude");
    assert!(
        next.contains("`mcp__loopx` in `permissions.allow`"),
        "{next}"
    );
    // `setup claude` enabled the project's server: no approval is pending.
    let list = hosts::claude_mcp_list(&clis, p.root(), &p.home.path);
    let line = list.lines().find(|l| l.starts_with("loopx:")).unwrap_or("");
    assert!(line.contains("Connected"), "claude mcp list:\n{list}");

    let (evidence, summary) = ("parser written; 3 tests pass", "the parser is done");
    let model = Model::start(&turn_script(evidence, summary), &log_dir("claude"));
    // No --allowedTools: the project's permissions.allow lets headless Claude call the tools.
    let out = hosts::claude(&clis, p.root(), &p.home.path, &model, PROMPT);
    let stream = String::from_utf8_lossy(&out.stdout);
    assert!(
        stream.contains("\"permission_denials\":[]"),
        "Claude refused a tool:\n{stream}"
    );
    assert_turn(&p, "claude", &todo, evidence, summary);
    assert_tools(&p, &model, "claude");
}

#[test]
fn codex_runs_a_turn_through_loopx_mcp() {
    let Some(clis) = hosts::clis("codex_runs_a_turn_through_loopx_mcp") else {
        return;
    };
    let (p, todo, next) = project("hosts-codex", "codex");
    // What setup tells the user is what the test writes in $CODEX_HOME/config.toml.
    let entry = format!("[projects.\"{}\"]", p.root().display());
    assert!(
        next.contains(&entry) && next.contains("trust_level"),
        "{next}"
    );
    let (evidence, summary) = (
        "parser reviewed against the API's sample",
        "the parser is done",
    );
    let model = Model::start(&turn_script(evidence, summary), &log_dir("codex"));
    hosts::codex(&clis, p.root(), &p.home.path, &model, PROMPT);
    assert_turn(&p, "codex", &todo, evidence, summary);
    assert_tools(&p, &model, "codex");
}
