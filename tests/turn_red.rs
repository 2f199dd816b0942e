//! `loopx turn` under attack: a runner killed outright, a busy store at the end, turns that run
//! at once against one quota, hostile todo files and programs that cannot run.

mod common;

use std::process::{Child, Stdio};
use std::time::Duration;

use common::turns::*;
use common::*;
use serde_json::Value;

/// Kills these processes when dropped, so a failed test leaves none running.
struct Reap(Vec<i32>);

impl Drop for Reap {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if pid > 1 {
                signal(pid, 9);
            }
        }
    }
}

fn pids(p: &Project, file: &str) -> Vec<i32> {
    std::fs::read_to_string(p.root().join(file))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Starts loopx with `ARGS` (piped output), waiting at most 1 s for the lock each time.
fn spawn_waiting_1s(p: &Project, args: &[&str]) -> Child {
    let mut c = p.cmd(args);
    c.env("LOOPX_LOCK_TIMEOUT", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Holds the project's lock (as another loopx process would) until dropped.
fn hold_lock(p: &Project) -> std::fs::File {
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p.lx("lock"))
        .unwrap();
    lock.lock().unwrap();
    lock
}

/// Waits for a `loopx --json turn` started with piped output; its run and its JSON answer.
fn finish(child: Child) -> (Run, Value) {
    let out = child.wait_with_output().unwrap();
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    let v = parse_json(&r, "turn");
    (r, v)
}

#[test]
fn a_runner_killed_outright_takes_the_commands_children_with_it() {
    let p = Project::new("red-kill9-tree");
    p.add("work", &[]);
    // The shell's children, in the command's group, outlive the shell unless loopx sees to it.
    let script = "sleep 300 & a=$!; sleep 301 & echo $a $! > kids; echo $$ > ready; wait";
    let mut c = spawn(&p, &["--json", "turn", "--", "sh", "-c", script]);
    until("the command to start", || p.root().join("ready").is_file());
    let mut all = pids(&p, "kids");
    all.extend(pids(&p, "ready"));
    let _reap = Reap(all.clone());
    assert_eq!(all.len(), 3, "{all:?}");
    signal(c.id() as i32, 9);
    wait_exit(&mut c);
    for pid in all {
        until(
            &format!("process {pid} of the command to be killed"),
            || gone(pid),
        );
    }
}

#[test]
fn a_busy_store_at_the_end_of_a_turn_still_records_it() {
    let p = Project::new("red-busy-end");
    let id = p.add("work", &[]);
    p.add("more", &[]);
    // When the command ends, another process holds the lock longer than loopx waits for it.
    let script = "touch started; while [ ! -f go ]; do sleep 0.05; done";
    let child = spawn_waiting_1s(
        &p,
        &[
            "--json",
            "turn",
            "--complete-on-success",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    until("the command to start", || {
        p.root().join("started").is_file()
    });
    let lock = hold_lock(&p);
    std::fs::write(p.root().join("go"), "").unwrap();
    // Held for longer than LOOPX_LOCK_TIMEOUT: loopx's first try at its record is busy.
    std::thread::sleep(Duration::from_millis(2500));
    lock.unlock().unwrap();
    let (r, v) = finish(child);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(v["ended"], "done", "{v}");
    assert_eq!(p.show(&id)["status"], "done");
    assert_eq!(quota_used(&p), 1, "the turn's slot is spent");
    // Nothing is left held: the agent's next turn runs.
    let (code, v) = turn(&p, &[], "true");
    assert_eq!(code, 0, "{v}");
}

#[test]
fn turns_running_at_once_never_spend_more_than_the_quota() {
    let p = Project::new("red-quota-race");
    p.add("one", &[]);
    p.add("two", &[]);
    p.ok(&["quota", "set", "--slots", "1"]);
    let first = spawn(
        &p,
        &[
            "--agent",
            "a1",
            "--json",
            "turn",
            "--",
            "sh",
            "-c",
            "touch started; while [ ! -f go ]; do sleep 0.05; done",
        ],
    );
    until("the first turn to start", || {
        p.root().join("started").is_file()
    });
    // One slot, and one turn already running on it: a second agent's turn must not start.
    let mut c = p.cmd(&["--agent", "a2", "--json", "turn", "--", "touch", "ran"]);
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "turn");
    std::fs::write(p.root().join("go"), "").unwrap();
    let out = first.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(r.code, 3, "{v}");
    assert_eq!(v["should_run"], false, "{v}");
    assert!(!p.root().join("ran").exists(), "a turn past the quota ran");
    assert_eq!(quota_used(&p), 1);
}

#[test]
fn a_title_with_a_nul_does_not_stop_every_turn() {
    let p = Project::new("red-nul-title");
    let id = p.add("placeholder", &[]);
    // A hand edit (allowed): the title holds a NUL, which no environment variable can.
    let path = p.lx(&format!("todos/{id}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("title = \"placeholder\"", "title = \"a\\u0000b\"");
    std::fs::write(&path, text).unwrap();
    let (code, v) = turn(&p, &[], r#"printf %s "$LOOPX_TODO_TITLE" > title"#);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ended"], "released");
    let title = std::fs::read_to_string(p.root().join("title")).unwrap();
    assert!(title.starts_with('a') && title.ends_with('b'), "{title:?}");
}

#[test]
fn a_todo_file_broken_or_removed_mid_turn_is_named_with_what_to_do() {
    let p = Project::new("red-broken-mid");
    let id = p.add("work", &[]);
    let (code, v) = turn(
        &p,
        &[],
        r#"echo "garbage = [" >> "$LOOPX_DIR/.loopx/todos/$LOOPX_TODO_ID.toml""#,
    );
    assert_eq!(code, 4, "{v}");
    assert_eq!(v["ended"], "refused");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&format!("todos/{id}.toml")), "{v}");
    assert!(!msg.contains("was closed"), "the todo was not closed: {v}");
    assert!(v["error"]["hint"].is_string(), "no hint: {v}");

    let id = p.add("other", &[]);
    let (code, v) = turn(
        &p,
        &[],
        r#"rm "$LOOPX_DIR/.loopx/todos/$LOOPX_TODO_ID.toml""#,
    );
    assert_eq!(code, 4, "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains(&id), "{v}");
    assert!(v["error"]["hint"].is_string(), "no hint: {v}");
}

#[test]
fn a_program_that_is_not_executable_is_refused_before_anything_is_claimed() {
    let p = Project::new("red-noexec");
    p.add("work", &[]);
    std::fs::write(p.root().join("job.sh"), "echo hi\n").unwrap();
    let before = p.journal().len();
    let json = |prog: &str| {
        let r = run_cmd(&mut p.cmd(&["--json", "turn", "--", prog]));
        (r.code, parse_json(&r, "turn"))
    };
    let (code, v) = json("./job.sh");
    assert_eq!(code, 2, "{v}");
    assert_eq!(v["error"]["code"], "usage");
    assert!(
        v["error"]["hint"].as_str().unwrap().contains("chmod"),
        "{v}"
    );
    assert_eq!(
        p.journal().len(),
        before,
        "a refused turn wrote to the journal"
    );
    // A directory is no program either.
    std::fs::create_dir(p.root().join("dir")).unwrap();
    let (code, _) = json("./dir");
    assert_eq!(code, 2);
}

#[test]
fn a_turn_stopped_by_a_signal_leaves_nothing_of_its_command_running() {
    let p = Project::new("red-int-tree");
    p.add("long", &[]);
    // A background job of a shell script ignores SIGINT: it outlives the shell unless killed.
    let script = "sleep 300 & echo $! > kid; echo $$ > pid; wait";
    let mut c = spawn(&p, &["heartbeat", "--", "sh", "-c", script]);
    until("the turn to start", || {
        p.root().join("pid").is_file() && p.root().join("kid").is_file()
    });
    let kid = pids(&p, "kid");
    let _reap = Reap(kid.clone());
    signal(c.id() as i32, 2);
    assert_eq!(wait_exit(&mut c), 0);
    until("the command's background job to be killed", || gone(kid[0]));
}

#[test]
fn a_command_that_blocks_or_releases_its_own_todo_keeps_the_turns_evidence() {
    let p = Project::new("red-self-block");
    let id = p.add("needs a key", &[]);
    let (code, v) = turn(
        &p,
        &["--complete-on-success"],
        r#""$LX" todo update --status blocked --reason "no key" >/dev/null"#,
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ended"], "closed");
    let t = p.show(&id);
    assert_eq!(t["status"], "blocked", "{t}");
    let ev = p.evidence(&id);
    assert_eq!(ev.last().unwrap()["kind"], "command", "{ev:?}");

    // A script written for the manual protocol releases its lease at its end.
    let id = p.add("manual protocol", &[]);
    let (code, v) = turn(&p, &[], r#""$LX" todo release "$LOOPX_TODO_ID" >/dev/null"#);
    assert_eq!(code, 0, "{v}");
    assert_eq!(p.evidence(&id).len(), 1);
    assert_eq!(quota_used(&p), 2);
}

#[test]
fn a_signal_before_the_command_starts_runs_nothing_and_holds_nothing() {
    let p = Project::new("red-early-term");
    p.add("work", &[]);
    // loopx waits for the lock at its start; SIGTERM comes while it waits.
    let lock = hold_lock(&p);
    let c = spawn(&p, &["--json", "turn", "--", "touch", "ran"]);
    until("loopx to wait for the lock", || {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", c.id()));
        tasks.into_iter().flatten().flatten().any(|t| {
            std::fs::read_to_string(t.path().join("wchan")).is_ok_and(|w| w.contains("lock"))
        })
    });
    signal(c.id() as i32, 15);
    std::thread::sleep(Duration::from_millis(200));
    lock.unlock().unwrap();
    let (r, v) = finish(c);
    assert_eq!(r.code, 128 + 15, "{r:?}");
    assert_eq!(v["ok"], false);
    assert!(!p.root().join("ran").exists(), "the command ran");
    assert!(
        !p.ok(&["todo", "list"]).to_string().contains("\"holder\""),
        "a lease is held"
    );
    assert_eq!(quota_used(&p), 0);
}

#[test]
fn heartbeat_every_0s_never_waits_0s_for_a_not_now() {
    // `--every 0s` asks for no pause between turns; with nothing to do, it must not spin.
    let p = Project::new("red-every-0");
    let mut c = spawn(&p, &["--json", "heartbeat", "--every", "0s", "--", "true"]);
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    signal(c.id() as i32, 2);
    assert_eq!(wait_exit(&mut c), 0);
    let v: Value = serde_json::from_str(&first).unwrap();
    assert_eq!(v["wait"]["decision"], "idle", "{v}");
    assert_ne!(
        v["sleep"], "0s",
        "a not-now answer with no retry time made a busy loop: {v}"
    );
}

#[test]
fn a_todo_made_the_owners_mid_turn_still_spends_the_slot_and_frees_the_lease() {
    let p = Project::new("red-role-user");
    let id = p.add("work", &[]);
    // The owner takes the todo over by hand while an agent (without the owner's key) runs it.
    let script =
        r#"sed -i 's/^role = .*/role = "user"/' "$LOOPX_DIR/.loopx/todos/$LOOPX_TODO_ID.toml""#;
    let mut c = p.cmd(&[
        "--json",
        "turn",
        "--complete-on-success",
        "--",
        "sh",
        "-c",
        script,
    ]);
    c.env("LOOPX_OWNER_KEY", p.home.path.join("no-such-key"));
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "turn");
    assert_eq!(v["ended"], "refused", "{v}");
    assert_eq!(v["error"]["code"], "denied", "{v}");
    assert_eq!(quota_used(&p), 1, "the turn happened: its slot is spent");
    let t = p.show(&id);
    assert!(t.get("lease").is_none_or(Value::is_null), "{t}");
    assert_eq!(t["status"], "open");
}

/// Runs `loopx --json CMD --ttl 1h -- ...`, keeps the store busy when the command ends, sends
/// SIGINT while loopx tries to record the turn: loopx must stop, exit 8 and name the lease.
fn busy_end_then_ctrl_c(tag: &str, cmd: &str) {
    let p = Project::new(tag);
    let id = p.add("work", &[]);
    let script = "echo $$ > pid; while [ ! -f go ]; do sleep 0.05; done";
    let mut child = spawn_waiting_1s(
        &p,
        &["--json", cmd, "--ttl", "1h", "--", "sh", "-c", script],
    );
    until("the command to start", || p.root().join("pid").is_file());
    let pid = pids(&p, "pid")[0];
    let lock = hold_lock(&p);
    std::fs::write(p.root().join("go"), "").unwrap();
    until("the command to end", || gone(pid));
    signal(child.id() as i32, 2);
    let code = wait_exit(&mut child);
    lock.unlock().unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let last = stdout.lines().last().unwrap_or("").to_string();
    let r = Run {
        code,
        stdout: last,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    let v = parse_json(&r, cmd);
    assert_eq!(r.code, 8, "{r:?}");
    let hint = v["error"]["hint"].as_str().unwrap();
    assert!(hint.contains(&format!("loopx todo release {id}")), "{v}");
}

#[test]
fn a_signal_stops_the_retries_of_a_busy_end_and_says_what_is_left_held() {
    busy_end_then_ctrl_c("red-busy-int", "turn");
}

#[test]
fn heartbeat_stopped_while_its_record_waits_never_says_no_lease_is_held() {
    busy_end_then_ctrl_c("red-beat-busy-int", "heartbeat");
}

#[test]
fn a_command_that_spends_its_own_turn_still_gets_its_turn_recorded() {
    let p = Project::new("red-self-spend");
    let a = p.add("a", &[]);
    let b = p.add("b", &[]);
    // A script for the manual protocol records its own spend, with the turn's id.
    let script = r#""$LX" quota spend-slot --turn "$LOOPX_TURN" >/dev/null"#;
    let mut c = p.cmd(&[
        "--json",
        "heartbeat",
        "--max-turns",
        "2",
        "--",
        "sh",
        "-c",
        script,
    ]);
    c.env("LX", bin());
    let r = run_cmd(&mut c);
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{r:?}");
    for turn in &lines[..2] {
        assert_eq!(
            turn["ok"], true,
            "a turn's line as `turn --json` gives it: {turn}"
        );
        assert_eq!(turn["ended"], "released", "{turn}");
    }
    assert_eq!(lines[2]["stopped"], "max_turns");
    assert_eq!(p.evidence(&a).len() + p.evidence(&b).len(), 2);
    assert_eq!(quota_used(&p), 2, "each turn counted once");
}

#[test]
fn a_turn_id_whose_runner_died_says_how_to_free_it() {
    let p = Project::new("red-dead-id");
    let id = p.add("work", &[]);
    let mut c = spawn(
        &p,
        &[
            "--agent",
            "a1",
            "--json",
            "turn",
            "--turn",
            "job-9",
            "--",
            "sh",
            "-c",
            "echo $$ > pid; sleep 300",
        ],
    );
    until("the command to start", || p.root().join("pid").is_file());
    signal(c.id() as i32, 9);
    wait_exit(&mut c);
    // The caller retries the same turn id: refused while the dead runner's lease lasts...
    let (code, v) = turn(&p, &["--turn", "job-9"], "true");
    assert_eq!(code, 4, "{v}");
    let hint = v["error"]["hint"].as_str().unwrap();
    let free = format!("loopx --agent a1 todo release {id}");
    assert!(hint.contains(&free), "{v}");
    // ...and the hint works.
    p.ok_as("a1", &["todo", "release", &id]);
    let (code, v) = turn(&p, &["--turn", "job-9"], "true");
    assert_eq!(code, 0, "{v}");
}

#[test]
fn the_turns_line_never_runs_on_from_output_with_no_newline() {
    let p = Project::new("red-no-newline");
    p.add("work", &[]);
    let r = p.run(&["turn", "--", "printf", "no newline"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("no newline\nturn "), "{r:?}");
}

#[test]
fn a_lease_that_lapsed_while_the_store_was_busy_still_takes_the_evidence() {
    // --ttl 1s, and the store stays busy longer than that: no renewal gets through, and no one
    // else claims the todo. The fence did not move: the turn's evidence lands.
    let p = Project::new("red-lapsed");
    let id = p.add("work", &[]);
    let script = "touch started; while [ ! -f go ]; do sleep 0.05; done";
    let child = spawn_waiting_1s(
        &p,
        &[
            "--json",
            "turn",
            "--ttl",
            "1s",
            "--complete-on-success",
            "--",
            "sh",
            "-c",
            script,
        ],
    );
    until("the command to start", || {
        p.root().join("started").is_file()
    });
    let lock = hold_lock(&p);
    std::thread::sleep(Duration::from_millis(2500));
    std::fs::write(p.root().join("go"), "").unwrap();
    lock.unlock().unwrap();
    let (r, v) = finish(child);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(v["ended"], "done", "{v}");
    assert_eq!(p.show(&id)["status"], "done");
}

#[test]
fn a_running_turns_lease_that_lapsed_is_renewed_again_once_the_store_frees() {
    let p = Project::new("red-revive");
    p.add("work", &[]);
    let script = "touch started; while [ ! -f go ]; do sleep 0.05; done";
    let child = spawn_waiting_1s(
        &p,
        &["--json", "turn", "--ttl", "1s", "--", "sh", "-c", script],
    );
    until("the command to start", || {
        p.root().join("started").is_file()
    });
    let lock = hold_lock(&p);
    // No renewal gets through for longer than the lease lasts: it lapses...
    std::thread::sleep(Duration::from_millis(2500));
    lock.unlock().unwrap();
    let list = || p.run(&["todo", "list"]).stdout;
    // ...and the runner holds it again as soon as it can write, for the rest of the run.
    until("the lease to be live again", || list().contains("left]"));
    std::fs::write(p.root().join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_command_that_stops_its_groups_watch_does_not_hang_the_runner() {
    let p = Project::new("red-stop-watch");
    p.add("work", &[]);
    // Hostile: stop every other process of its own group (the watch among them), then exit.
    let script = "ps -eo pid=,pgid=,comm= | awk -v g=$$ '$2 == g && $1 != g {print $1}' > stopped; \
                  kill -STOP $(cat stopped); exit 0";
    let mut c = spawn(&p, &["--json", "turn", "--", "sh", "-c", script]);
    assert_eq!(wait_exit(&mut c), 0);
    assert!(
        !pids(&p, "stopped").is_empty(),
        "the watch was not in the command's group"
    );
}

#[test]
fn every_bad_flag_of_turn_and_heartbeat_says_what_to_do() {
    let p = Project::new("red-hints");
    p.add("work", &[]);
    let bad: [&[&str]; 6] = [
        &["turn", "--timeout", "8d"],
        &["turn", "--grace", "2h"],
        &["turn", "--ttl", "8d"],
        &["turn", "--turn", "has space"],
        &["heartbeat", "--every", "2d"],
        &["heartbeat", "--ttl", "0s"],
    ];
    for args in bad {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--", "true"]);
        let r = run_cmd(&mut p.cmd(&a));
        let v = parse_json(&r, &args.join(" "));
        assert_eq!(r.code, 2, "{args:?}: {v}");
        assert!(v["error"]["hint"].is_string(), "{args:?}: no hint: {v}");
    }
}

#[test]
fn a_turns_command_never_gets_the_owners_key_from_the_runners_environment() {
    // The owner runs heartbeat in a shell that names the key (docs/security.md: name it with
    // LOOPX_OWNER_KEY only in the owner's shell); the agent's command must not sign as owner.
    let p = Project::new("red-no-key");
    p.add("work", &[]);
    let script = r#"echo "${LOOPX_OWNER_KEY-unset}" > key; "$LX" goal pause --reason mine >/dev/null 2>&1; echo $? > code"#;
    let (code, v) = turn(&p, &[], script);
    assert_eq!(code, 0, "{v}");
    let read = |f: &str| std::fs::read_to_string(p.root().join(f)).unwrap();
    assert_eq!(read("key").trim(), "unset");
    assert_eq!(
        read("code").trim(),
        "7",
        "the agent's command signed an owner change"
    );
    assert_eq!(p.ok(&["status"])["goal"]["status"], "active");
}
