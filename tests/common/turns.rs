//! Helpers for the tests of `loopx turn` and `heartbeat`: running a turn, reading what it left,
//! waiting for processes and signalling them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Project, bin, parse_json, run_cmd};

/// Runs `loopx --json turn ARGS -- sh -c SCRIPT` (the shell sees `$LX`, the loopx binary).
pub fn turn(p: &Project, args: &[&str], script: &str) -> (i32, Value) {
    let mut a = vec!["--json", "turn"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--", "sh", "-c", script]);
    let mut c = p.cmd(&a);
    c.env("LX", bin());
    let r = run_cmd(&mut c);
    let v = parse_json(&r, "turn");
    (r.code, v)
}

/// A todo's evidence lines.
pub fn evidence(p: &Project, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(p.lx(&format!("evidence/{id}.jsonl"))).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Slots spent in the window.
pub fn quota_used(p: &Project) -> u64 {
    p.ok(&["quota", "show"])["quota"]["used"].as_u64().unwrap()
}

/// Waits (bounded) until `f` holds.
#[track_caller]
pub fn until(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < end, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True when the process is gone, or a zombie waiting to be reaped.
pub fn gone(pid: i32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty()
        || stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
}

/// Starts loopx with `args` in the background (`$LX` set, output piped).
pub fn spawn(p: &Project, args: &[&str]) -> Child {
    let mut c: Command = p.cmd(args);
    c.env("LX", bin())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().unwrap()
}

/// Waits (at most a minute) for a background loopx; its exit code.
pub fn wait_exit(child: &mut Child) -> i32 {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().unwrap_or(-1);
        }
        assert!(Instant::now() < end, "loopx did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Sends `sig` to `pid`.
pub fn signal(pid: i32, sig: i32) {
    // SAFETY: kill has no memory effects.
    unsafe {
        libc_kill(pid, sig);
    }
}
