//! `loopx turn` under attack: a runner killed outright, a busy store at the end, turns that run
//! at once against one quota, hostile todo files and programs that cannot run.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

/// Runs `loopx --json turn ARGS -- sh -c SCRIPT` (the shell sees `$LX`, the loopx binary).
fn turn(p: &Project, args: &[&str], script: &str) -> (i32, Value) {
    let mut a = vec!["--json", "turn"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--", "sh", "-c", script]);
    let mut c = p.cmd(&a);
    c.env("LX", bin());
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "turn");
    (r.code, v)
}

fn quota_used(p: &Project) -> u64 {
    p.ok(&["quota", "show"])["quota"]["used"].as_u64().unwrap()
}

/// Waits (bounded) until `f` holds.
fn until(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn gone(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty()
        || stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory effects.
    unsafe {
        libc_kill(pid, sig);
    }
}

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

fn spawn(p: &Project, args: &[&str]) -> Child {
    let mut c: Command = p.cmd(args);
    c.env("LX", bin())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

fn wait_exit(child: &mut Child) -> i32 {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        assert!(Instant::now() < end, "loopx did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pids(p: &Project, file: &str) -> Vec<i32> {
    std::fs::read_to_string(p.root().join(file))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect()
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
fn a_command_that_ends_normally_leaves_its_background_children_alone() {
    // The watch on the runner is disarmed when the turn ends: only a dead runner kills.
    let p = Project::new("red-bg-kept");
    p.add("work", &[]);
    let (code, v) = turn(&p, &[], "sleep 300 & echo $! > kid");
    assert_eq!(code, 0, "{v}");
    let kid = pids(&p, "kid");
    let _reap = Reap(kid.clone());
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !gone(kid[0]),
        "a background child of a finished turn was killed"
    );
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
