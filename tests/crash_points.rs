//! An owner command stopped (SIGKILL) at every point of its commit, one point a run
//! (`LOOPX_CRASH_AT`, debug builds): after each stop doctor raises no tamper alarm and no error,
//! agents see no stale seal, and every acknowledged change is still there.

mod common;

use std::os::unix::process::ExitStatusExt;

use common::Project;
use serde_json::Value;

/// The most crash points one command may reach before it must have finished.
const MAX_POINTS: u64 = 40;

/// Runs `args` with the owner's key, stopped at crash point `at`; true when it was killed there.
fn run_stopped(p: &Project, args: &[&str], at: u64) -> bool {
    let out = p
        .cmd(args)
        .env("LOOPX_CRASH_AT", at.to_string())
        .output()
        .expect("run loopx");
    match out.status.signal() {
        Some(libc::SIGKILL) => true,
        Some(s) => panic!("{args:?} died of signal {s}"),
        None => {
            assert!(out.status.success(), "{args:?} at {at}: {out:?}");
            false
        }
    }
}

/// doctor (with the owner's key, as the owner runs it) finds nothing but what a crash leaves and
/// `--fix` repairs (a torn last line, temp files), and no tamper alarm; healthy after `--fix`.
#[track_caller]
fn doctor_is_calm(p: &Project, what: &str) {
    let (_, v) = p.json(&["doctor"]);
    let alarms: Vec<&Value> = v["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["severity"] == "error" && f["fixable"] != true)
        .collect();
    assert!(alarms.is_empty(), "{what}: doctor found errors: {v}");
    let (code, v) = p.json(&["doctor", "--fix"]);
    assert_eq!(code, 0, "{what}: {v}");
}

/// The agent's view (no key) of a copy of the state as the stop left it: no note of a stale,
/// edited or missing seal.
#[track_caller]
fn agents_see_no_alarm(p: &Project, what: &str) -> Value {
    let copy = common::TempDir::new("crash-points-copy");
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(p.lx(""))
        .arg(copy.path.join(".loopx"))
        .status()
        .expect("cp");
    assert!(st.success());
    let dir = copy.path.to_string_lossy().into_owned();
    let (_, v) = p.no_key(&["--dir", &dir, "--agent", "a1", "status"]);
    let notes = v["owner_notes"].as_array().map_or(0, Vec::len);
    assert_eq!(notes, 0, "{what}: {v}");
    v
}

/// Stops `args` at each point of its commit in turn, until a run finishes; `before` makes the
/// command's change possible again, `done` says whether its change is in the state.
fn each_point(p: &Project, args: &[&str], before: &[&str], done: impl Fn(&Project) -> bool) {
    for at in 1..=MAX_POINTS {
        p.ok(before);
        assert!(!done(p), "{args:?}: `{before:?}` undid it");
        let killed = run_stopped(p, args, at);
        let what = format!("{args:?} stopped at point {at}");
        agents_see_no_alarm(p, &what);
        doctor_is_calm(p, &what);
        if !killed {
            assert!(done(p), "{args:?} finished but its change is not there");
            assert!(at > 3, "{args:?} reached only {} crash points", at - 1);
            return;
        }
    }
    panic!("{args:?} never finished within {MAX_POINTS} crash points");
}

fn goal_status(p: &Project) -> String {
    let (_, v) = p.no_key(&["status"]);
    v["goal"]["status"].as_str().unwrap_or_default().to_string()
}

fn slots(p: &Project) -> i64 {
    let (_, v) = p.no_key(&["--agent", "a1", "quota", "should-run"]);
    v["quota"]["limit"].as_i64().unwrap_or(-1)
}

#[test]
fn an_owner_command_stopped_at_any_point_raises_no_false_alarm() {
    let p = Project::new("crash-points");
    p.add("work", &[]);
    each_point(&p, &["goal", "pause"], &["goal", "resume"], |p| {
        goal_status(p) == "paused"
    });
    p.ok(&["goal", "resume"]);
    each_point(
        &p,
        &["quota", "set", "--slots", "7"],
        &["quota", "set", "--slots", "3"],
        |p| slots(p) == 7,
    );
    // What was acknowledged before the stops is all there.
    assert_eq!(goal_status(&p), "active");
    let (code, v) = p.no_key(&["log", "--verify"]);
    assert_eq!(code, 0, "{v}");
}
