//! Long-running faces on a database server that restarts (a private throwaway server each):
//! the store reconnects on its next call, a heartbeat beats on across a restart and stops with
//! exit 1 and a plain message in an outage, and an MCP session's calls work across a restart
//! and answer exit 1 during an outage, then work again.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::pg::{self, DbProject, ok, project_in};
use common::turns::{until, wait_exit};
use loopx::kernel::id::Kind;
use loopx::kernel::{Ts, ops};
use loopx::store::pg::PgStore;
use loopx::store::{Store, StoreExt};
use serde_json::{Value, json};

/// How long an MCP answer may take (a connection attempt is bounded by 5 s).
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// The titles of the open todos, as `todo list --json` gives them.
fn open_titles(p: &DbProject) -> Vec<String> {
    let v = ok(p.lx(&["--json", "todo", "list"]), "todo list");
    v["todos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["title"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_store_reconnects_on_its_next_call_after_a_restart() {
    let Some(server) = pg::private_or_skip("lib") else {
        return;
    };
    let p = project_in("pg-lib", &pg::fresh_db(&server));
    let store = PgStore::new(&p.url, loopx::store::Env::default()).unwrap();
    let add = |title: &str| {
        let id = store.fresh_id(Kind::Todo)?;
        store.mutate(|s| {
            let new = ops::NewTodo::new(id.clone(), title);
            ops::add_todo(s, "agent-lib", Ts::now(), new)
        })
    };
    add("Before").expect("a change before the restart");
    server.halt();
    server.resume();
    // Its connection was closed by the restart: a read, then a change, each on a new one.
    let snap = store.load().expect("a read after the restart");
    assert_eq!(snap.todos.len(), 2);
    server.halt();
    server.resume();
    add("After").expect("a change after the restart");
    assert_eq!(store.load().unwrap().todos.len(), 3);
    // In an outage: an I/O error (exit 1) that says so, at once.
    server.halt();
    let e = store.load().unwrap_err();
    assert_eq!(e.code.exit_code(), 1, "{e:?}");
    assert!(e.message.contains("database"), "{e:?}");
}

/// Spawns `heartbeat` with a command that says it started (file `started`) and waits for the
/// file `go` in the working directory.
fn heartbeat(p: &DbProject, turns: &str) -> Child {
    let script = "touch started; while [ ! -f go ]; do sleep 0.05; done";
    p.cmd(&[
        "--agent",
        "agent-beat",
        "heartbeat",
        "--max-turns",
        turns,
        "--complete-on-success",
        "--",
        "sh",
        "-c",
        script,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("loopx heartbeat starts")
}

/// The rest of a child's output.
fn rest(pipe: Option<impl std::io::Read>) -> String {
    pipe.map(|r| std::io::read_to_string(r).unwrap_or_default())
        .unwrap_or_default()
}

#[test]
fn a_heartbeat_beats_across_a_restart_and_stops_with_exit_1_in_an_outage() {
    let Some(server) = pg::private_or_skip("beat") else {
        return;
    };
    let p = project_in("pg-beat", &pg::fresh_db(&server));
    ok(p.lx(&["--json", "todo", "add", "Second"]), "todo add");
    let (started, go) = (p.cwd.join("started"), p.cwd.join("go"));

    // Restarted while the first turn's command runs: both turns are recorded.
    let mut c = heartbeat(&p, "2");
    until("the first turn to start", || started.exists());
    server.halt();
    server.resume();
    std::fs::write(&go, "").unwrap();
    let code = wait_exit(&mut c);
    let (out, err) = (rest(c.stdout.take()), rest(c.stderr.take()));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 turns ran"), "{out}{err}");
    assert_eq!(open_titles(&p), Vec::<String>::new());

    // Down when the turn ends: exit 1, and a message that names the database and the lease.
    ok(p.lx(&["--json", "todo", "add", "Third"]), "todo add");
    std::fs::remove_file(&started).unwrap();
    std::fs::remove_file(&go).unwrap();
    let mut c = heartbeat(&p, "1");
    until("the turn to start", || started.exists());
    server.halt();
    std::fs::write(&go, "").unwrap();
    let code = wait_exit(&mut c);
    let err = rest(c.stderr.take());
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("its record was not written") && err.contains("database"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// An MCP session on stdio: requests written, answers read by a thread (so a hang fails).
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    next: u64,
}

impl Mcp {
    /// Starts `loopx mcp` on the project's database and does the handshake.
    fn start(p: &DbProject) -> Mcp {
        let mut child = p
            .cmd(&["--agent", "agent-m", "mcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("loopx mcp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let mut m = Mcp {
            child,
            stdin,
            lines,
            next: 0,
        };
        let init = json!({
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "pg-restart", "version": "0"}
        });
        let r = m.request("initialize", init);
        assert_eq!(r["result"]["serverInfo"]["name"], "loopx", "{r}");
        m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: Value) {
        writeln!(self.stdin, "{v}").expect("write to loopx mcp");
        self.stdin.flush().unwrap();
    }

    /// Sends a request; its response.
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(ANSWER_WAIT)
                .expect("loopx mcp answers");
            let v: Value = serde_json::from_str(&line).expect("a JSON line");
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// Calls `todo_list`: its exit code and answer.
    fn todo_list(&mut self) -> (i64, Value) {
        let r = self.request("tools/call", json!({"name": "todo_list", "arguments": {}}));
        let res = &r["result"];
        let code = res["_meta"]["exit_code"].as_i64().expect("an exit code");
        (code, res["structuredContent"].clone())
    }
}

#[test]
fn mcp_calls_work_across_a_restart_and_answer_exit_1_in_an_outage() {
    let Some(server) = pg::private_or_skip("mcp") else {
        return;
    };
    let p = project_in("pg-mcp", &pg::fresh_db(&server));
    let mut m = Mcp::start(&p);
    let listed = |(code, v): (i64, Value)| {
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["todos"][0]["title"], "Claim me", "{v}");
    };
    listed(m.todo_list());
    server.halt();
    server.resume();
    listed(m.todo_list());

    server.halt();
    let (code, v) = m.todo_list();
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["error"]["code"], "io", "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("database"), "{v}");
    server.resume();
    listed(m.todo_list());

    drop(m.stdin);
    assert_eq!(wait_exit(&mut m.child), 0, "loopx mcp ends with its client");
}
