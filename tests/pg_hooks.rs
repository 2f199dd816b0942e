//! Hooks on a database, through the real binary: the owner's login sets, lists and removes them
//! (an agent's login is refused by the database), `hook serve` fires them for what agents commit,
//! loses no event across a server restart, and a hook that causes its own event does not loop.
//!
//! Hooks run detached, so a test waits for what a hook leaves with a bounded poll: it fails only
//! when the thing never comes, never on how fast it came.

mod common;

use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::backend::{Backend, Lab, Who};
use common::pg::{self, DbProject, ok, project_in};
use common::turns::{signal, wait_exit};
use common::{Project, bin, parse_json, read_json, run_cmd, wait_for};
use serde_json::Value;

/// The longest wait for a line of `hook serve`.
const DEADLINE: Duration = Duration::from_secs(90);

/// A running `hook serve`: its stderr lines come through a channel; killed if the test fails.
struct Serving {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Serving {
    /// Starts `cmd` (a `hook serve`) and waits until it says it serves.
    fn start(mut cmd: Command) -> Serving {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("loopx hook serve starts");
        let err = child.stderr.take().expect("its stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    return;
                }
            }
        });
        let mut s = Serving {
            child,
            lines,
            seen: Vec::new(),
        };
        s.said("serving hooks");
        s
    }

    /// Waits for a line of its stderr holding `what`.
    #[track_caller]
    fn said(&mut self, what: &str) {
        let end = Instant::now() + DEADLINE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(what) => return self.seen.push(l),
                Ok(l) => self.seen.push(l),
                Err(_) => panic!("hook serve never said {what:?}; it said {:?}", self.seen),
            }
        }
    }

    /// Stops it with SIGTERM: its exit code and its one JSON answer.
    fn stop(mut self) -> (i32, Value) {
        signal(self.child.id() as i32, 15);
        let code = wait_exit(&mut self.child);
        let out = std::io::read_to_string(self.child.stdout.take().expect("its stdout"))
            .unwrap_or_default();
        let v = serde_json::from_str(&out).unwrap_or(Value::Null);
        (code, v)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `hook set EVENT -- COMMAND` by `who` (`--json` before the `--`).
fn set_hook(lab: &Lab, who: Who<'_>, event: &str, command: &str) -> (i32, Value) {
    lab.json(who, &["hook", "set", event, "--", command])
}

/// `set_hook` by the owner, which must succeed.
#[track_caller]
fn hook_ok(lab: &Lab, event: &str, command: &str) -> Value {
    let (code, v) = set_hook(lab, Who::Owner, event, command);
    assert_eq!(code, 0, "{v}");
    v
}

/// The journal's lines with action `action`.
fn lines_of(lab: &Lab, action: &str) -> Vec<Value> {
    lab.journal()
        .into_iter()
        .filter(|l| l["action"] == action)
        .collect()
}

/// A database lab with two agents; None when there is no server.
fn db_lab(tag: &str) -> Option<Lab> {
    Lab::new(Backend::Db, tag, 2, 1)
}

#[test]
fn the_owners_login_sets_lists_and_removes_hooks_and_an_agents_login_cannot() {
    let Some(lab) = db_lab("pgh-set") else {
        return;
    };
    let a1 = lab.agent(1).to_string();
    let v = hook_ok(&lab, "gate.opened", "true");
    assert_eq!(v["hook"]["sealed"], true, "{v}");
    let l = lab.ok(Who::Agent(&a1), &["hook", "list"]);
    assert_eq!(l["hooks"][0]["event"], "gate.opened", "{l}");
    assert_eq!(l["hooks"][0]["sealed"], true, "{l}");
    let set = lines_of(&lab, "hook.set");
    assert!(set[0]["sig"].is_string(), "hook.set is signed: {set:?}");

    // An agent's login is refused by the database itself, even with the owner's key at hand.
    for who in [Who::Agent(&a1), Who::AgentWithKey(&a1)] {
        let (code, v) = set_hook(&lab, who, "goal.paused", "true");
        assert_eq!(code, 7, "{v}");
        let (code, v) = lab.json(who, &["hook", "remove", "gate.opened"]);
        assert_eq!(code, 7, "{v}");
    }
    let (code, v) = lab.json(Who::AgentWithKey(&a1), &["hook", "remove", "gate.opened"]);
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("database refused")),
        "{code} {v}"
    );
    assert_eq!(lines_of(&lab, "hook.set").len(), 1);

    let v = lab.ok(Who::Owner, &["hook", "remove", "gate.opened"]);
    assert_eq!(v["removed"], "gate.opened", "{v}");
    let l = lab.ok(Who::Owner, &["hook", "list"]);
    assert_eq!(l["hooks"], serde_json::json!([]), "{l}");
    lab.fails(Who::Owner, &["hook", "remove", "gate.opened"], "not_found");
}

/// Runs the hidden supervisor as `who`, with JSON naming journal line `seq` on stdin.
fn hook_run(lab: &Lab, who: Who<'_>, event: &str, seq: u64) -> (i32, Value) {
    let mut c = lab.cmd(who, &["hook", "run", event]);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("hook run starts");
    let json = serde_json::json!({"event": event, "seq": seq});
    let mut stdin = child.stdin.take().expect("its stdin");
    stdin.write_all(json.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().expect("hook run ends");
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn the_supervisor_runs_on_a_database_and_an_agents_login_may_journal_its_failure() {
    let Some(lab) = db_lab("pgh-run") else {
        return;
    };
    let a1 = lab.agent(1).to_string();
    hook_ok(&lab, "gate.opened", "pwd > where.txt; exit 4");
    let g = lab.ok(Who::Agent(&a1), &["gate", "open", "Fail?"]);
    let gid = g["gate"]["id"].as_str().expect("a gate id").to_string();
    let seq = lines_of(&lab, "gate.open")
        .into_iter()
        .find(|l| l["target"] == gid.as_str())
        .and_then(|l| l["seq"].as_u64())
        .expect("the gate's line");
    // Not that event's line: the hook does not run.
    let (code, v) = hook_run(&lab, Who::Agent(&a1), "gate.opened", 1);
    assert_eq!(
        (code, v["hook"].as_str()),
        (3, Some("not_in_journal")),
        "{v}"
    );
    assert!(!lab.p.root().join("where.txt").exists());
    // An agent's login runs it in its work directory, and journals the failure as loopx.
    let (code, v) = hook_run(&lab, Who::Agent(&a1), "gate.opened", seq);
    assert_eq!((code, v["hook"].as_str()), (1, Some("failed")), "{v}");
    let fails = lines_of(&lab, "hook.fail");
    assert_eq!(fails.len(), 1, "{fails:?}");
    assert_eq!(fails[0]["actor"], "loopx");
    assert_eq!(fails[0]["data"]["exit"], 4);
    assert_eq!(fails[0]["data"]["seq"], seq);
    let dir = std::fs::read_to_string(lab.p.root().join("where.txt")).expect("where.txt");
    let root = lab.p.root().canonicalize().unwrap();
    assert_eq!(Path::new(dir.trim()).canonicalize().unwrap(), root);
    // So does the owner's login.
    let (code, v) = hook_run(&lab, Who::OwnerNoKey, "gate.opened", seq);
    assert_eq!((code, v["hook"].as_str()), (1, Some("failed")), "{v}");
    assert_eq!(lines_of(&lab, "hook.fail").len(), 2);
}

#[test]
fn hook_serve_fires_a_hook_for_a_gate_an_agent_opened() {
    let Some(lab) = db_lab("pgh-serve") else {
        return;
    };
    let a1 = lab.agent(1).to_string();
    hook_ok(&lab, "gate.opened", "cat > got.json");
    hook_ok(&lab, "gate.decided", "echo boom; exit 3");
    // A gate opened before it starts is not its business.
    lab.ok(Who::Agent(&a1), &["gate", "open", "Before?"]);
    let serving = Serving::start(lab.cmd(Who::OwnerNoKey, &["hook", "serve"]));
    // One per database: a second would run each hook twice; it names the one serving.
    let busy = lab.fails(Who::OwnerNoKey, &["hook", "serve"], "busy");
    assert!(
        busy["message"]
            .as_str()
            .is_some_and(|m| m.contains("pg_terminate_backend")),
        "{busy}"
    );
    // The hooks are the owner's: an agent's login neither serves them nor takes the lock.
    lab.fails(Who::Agent(&a1), &["hook", "serve"], "denied");

    let g = lab.ok(Who::Agent(&a1), &["gate", "open", "Ship it?"]);
    let gid = g["gate"]["id"].as_str().expect("a gate id").to_string();
    let out = lab.p.root().join("got.json");
    let j = wait_for("the hook's file", || read_json(&out));
    assert_eq!(j["event"], "gate.opened", "{j}");
    assert_eq!(j["action"], "gate.open");
    assert_eq!(j["target"], gid.as_str());
    assert_eq!(j["actor"], a1.as_str());
    assert_eq!(j["data"]["question"], "Ship it?");
    assert_eq!(j["root"], lab.p.root().display().to_string());
    assert!(j.get("sig").is_none());

    // The owner decides it: that hook fails, and its failure is journaled.
    lab.ok(Who::Owner, &["gate", "approve", &gid]);
    let fail = wait_for("hook.fail", || lines_of(&lab, "hook.fail").pop());
    assert_eq!(fail["actor"], "loopx");
    assert_eq!(fail["target"], "gate.decided");
    assert_eq!(fail["data"]["exit"], 3, "{fail}");

    let (code, v) = serving.stop();
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["served"]["fired"], 2, "{v}");
    assert_eq!(v["served"]["not_started"], 0, "{v}");
}

#[test]
fn a_hook_that_causes_its_own_event_does_not_loop_on_a_database() {
    let Some(lab) = db_lab("pgh-loop") else {
        return;
    };
    let (a1, a2) = (lab.agent(1).to_string(), lab.agent(2).to_string());
    // Each run opens another gate (through LOOPX_STORE, which the hook inherits).
    let again = format!(
        "echo run >> runs.txt; '{}' --agent {a2} gate open again >/dev/null",
        bin()
    );
    hook_ok(&lab, "gate.opened", &again);
    hook_ok(&lab, "gate.decided", "touch decided.txt");
    let serving = Serving::start(lab.cmd(Who::OwnerNoKey, &["hook", "serve"]));
    let first = lab.ok(Who::Agent(&a1), &["gate", "open", "First?"]);
    let hooks_gates = |n: usize| {
        let got = lines_of(&lab, "gate.open")
            .into_iter()
            .filter(|l| l["actor"] == a2.as_str())
            .collect::<Vec<_>>();
        (got.len() >= n).then_some(got)
    };
    wait_for("the hook's own gate", || hooks_gates(1));
    lab.ok(Who::Agent(&a1), &["gate", "open", "Second?"]);
    let own = wait_for("the second hook's own gate", || hooks_gates(2));
    for l in &own {
        assert_eq!(l["data"]["by_hook"], "gate.opened", "{l}");
    }
    // A later line's hook has run: `hook serve` has passed the hook's own gates by then.
    let gid = first["gate"]["id"].as_str().expect("a gate id");
    lab.ok(Who::Owner, &["gate", "approve", gid]);
    let decided = lab.p.root().join("decided.txt");
    wait_for("the gate.decided hook", || decided.exists().then_some(()));
    let (code, v) = serving.stop();
    assert_eq!(code, 0, "{v}");
    assert_eq!(
        v["served"]["fired"], 3,
        "two gates opened outside a hook and one decision: {v}"
    );
    assert_eq!(hooks_gates(3), None, "no third gate");
    let runs = std::fs::read_to_string(lab.p.root().join("runs.txt")).unwrap();
    assert_eq!(
        runs.lines().count(),
        2,
        "one run per gate opened outside a hook"
    );
}

/// The files the restart test's hook made (one per run), parsed.
fn got_files(p: &DbProject) -> Vec<Value> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(&p.cwd).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("got.")
            && let Some(v) = read_json(&e.path())
        {
            out.push(v);
        }
    }
    out
}

#[test]
fn hook_serve_loses_no_event_across_a_server_restart() {
    let Some(server) = pg::private_or_skip("hooks") else {
        return;
    };
    let p = project_in("pgh-restart", &pg::fresh_db(&server));
    let set = ["--json", "hook", "set", "gate.opened", "--"];
    // A file of its own per run, whole when it appears.
    let hook = "cat > .part.$$ && mv .part.$$ got.$$";
    ok(p.lx(&[&set[..], &[hook]].concat()), "hook set");
    let mut serving = Serving::start(p.cmd(&["--json", "hook", "serve"]));
    let open = |q: &str| {
        let v = ok(
            p.lx(&["--json", "--agent", "agent-x", "gate", "open", q]),
            q,
        );
        v["gate"]["id"].as_str().expect("a gate id").to_string()
    };
    let before = open("Before?");
    wait_for("the first hook", || {
        (got_files(&p).len() == 1).then_some(())
    });

    server.halt();
    serving.said("connecting again");
    server.resume();
    // Committed while it may still be away: it catches up from its cursor when back.
    let during = [open("During 1?"), open("During 2?")];
    let got = wait_for("three hooks", || {
        let g = got_files(&p);
        (g.len() >= 3).then_some(g)
    });
    let mut targets: Vec<String> = got
        .iter()
        .filter_map(|v| v["target"].as_str().map(str::to_string))
        .collect();
    targets.sort();
    let mut want = vec![before, during[0].clone(), during[1].clone()];
    want.sort();
    assert_eq!(targets, want);
    serving.said("connected again");
    let (code, v) = serving.stop();
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["served"]["fired"], 3, "{v}");
    assert!(v["served"]["reconnects"].as_u64() >= Some(1), "{v}");
}

#[test]
fn hook_serve_on_files_says_hooks_fire_on_commit() {
    let p = Project::new("pgh-files");
    let r = run_cmd(&mut p.cmd(&["--json", "hook", "serve"]));
    let v = parse_json(&r, "hook serve");
    assert_eq!(r.code, 2, "{v}");
    assert_eq!(v["error"]["code"], "usage", "{v}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("hooks fire when a change commits"), "{v}");
}
