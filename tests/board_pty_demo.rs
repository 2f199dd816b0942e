//! `loopx demo` in a real terminal (tmux): however it ends (the window closed, SIGTERM, Ctrl-C,
//! `q`), its temp project and its owner key are gone; off a terminal, SIGINT too. The tmux cases
//! skip with a message when tmux is absent.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use common::tmux::{Tmux, tmux_available};

const BIN: &str = env!("CARGO_BIN_EXE_loopx");

/// Waits until `done` holds, up to `timeout`; whether it did.
fn wait_until(timeout: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// The demo projects under `tmp`: `loopx-demo-PID-XXXXXX`.
fn demos(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("loopx-demo-"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The demo's process id, from its directory's name.
fn pid_of(demo: &Path) -> i32 {
    let name = demo.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.trim_start_matches("loopx-demo-")
        .split('-')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {name}"))
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// How a run of the demo is ended.
#[derive(Debug, Clone, Copy)]
enum End {
    /// The terminal closes: tmux kills the window (SIGHUP).
    CloseWindow,
    /// SIGTERM to the demo's process.
    Term,
    /// Ctrl-C typed on the board.
    CtrlC,
    /// `q` typed on the board.
    Quit,
}

/// Starts the demo in its own temp directory, ends it the way given, and checks nothing is left.
fn demo_ends_clean(end: End) {
    let tag = format!("{end:?}").to_lowercase();
    let tmp = std::env::temp_dir().join(format!("loopx-pty-demo-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let cmd = format!("env TMPDIR='{}' '{BIN}' demo", tmp.display());
    let t = Tmux::start(&format!("demo-{tag}"), &cmd, 100, 30);
    // A window that stays, so that the server outlives the demo's.
    let out = t.run(&["display-message", "-p", "-t", &t.session, "#{window_id}"]);
    let window = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(window.starts_with('@'), "tmux: {out:?}");
    let out = t.run(&["new-window", "-d", "-t", &t.session, "sleep 600"]);
    assert!(out.status.success(), "tmux: {out:?}");

    // The demo is up: its project, its owner key, and the board on screen.
    let mut demo = PathBuf::new();
    let up = wait_until(Duration::from_secs(30), || {
        demo = demos(&tmp).into_iter().next().unwrap_or_default();
        demo.join("owner.key").is_file()
            && demo.join(".loopx/loopx.toml").is_file()
            && t.screen().contains("Gates")
    });
    assert!(
        up,
        "the demo did not come up; under {}: {:?}; the screen:\n{}",
        tmp.display(),
        demos(&tmp),
        t.screen()
    );
    let pid = pid_of(&demo);
    assert!(alive(pid), "the demo's process {pid} is not running");

    match end {
        End::CloseWindow => {
            t.run(&["kill-window", "-t", &window]);
        }
        End::Term => {
            // SAFETY: a signal to the demo process this test started.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0, "kill {pid}");
        }
        End::CtrlC => {
            t.keys(&["C-c"]);
        }
        End::Quit => {
            t.keys(&["q"]);
        }
    }
    let gone = wait_until(Duration::from_secs(30), || !alive(pid));
    assert!(gone, "{end:?}: the demo ({pid}) is still running");
    let left = demos(&tmp);
    assert!(
        left.is_empty(),
        "{end:?}: the demo left {left:?} behind (owner key: {})",
        left.iter().any(|d| d.join("owner.key").exists())
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn closing_the_terminal_during_the_demo_leaves_nothing_behind() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    demo_ends_clean(End::CloseWindow);
}

#[test]
fn every_other_way_out_of_the_demo_leaves_nothing_behind() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    for end in [End::Term, End::CtrlC, End::Quit] {
        demo_ends_clean(end);
    }
}

#[test]
fn the_demo_off_a_terminal_stops_on_sigint_and_cleans_up() {
    let tmp = std::env::temp_dir().join(format!("loopx-pty-demo-pipe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let child = std::process::Command::new(BIN)
        .arg("demo")
        .env("TMPDIR", &tmp)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start loopx demo");
    let pid = child.id() as i32;
    let up = wait_until(Duration::from_secs(30), || {
        demos(&tmp)
            .first()
            .is_some_and(|d| d.join("owner.key").is_file())
    });
    assert!(up, "the demo did not come up under {}", tmp.display());
    // SAFETY: a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    let out = child.wait_with_output().expect("the demo ends");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("the demo project was removed"), "{stdout}");
    // Counts agree with their nouns ("1 gate pending", "2 gates pending").
    let line = stdout.lines().next().unwrap_or("");
    let pending = line.rsplit(", ").next().unwrap_or("");
    assert!(
        pending == "1 gate pending"
            || (pending.ends_with(" gates pending") && !pending.starts_with("1 ")),
        "{line}"
    );
    assert!(demos(&tmp).is_empty(), "left: {:?}", demos(&tmp));
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `loopx ARGS --json` on the demo's project as an agent (no owner key), its answer.
fn agent_json(demo: &Path, args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(BIN)
        .arg("--dir")
        .arg(demo)
        .args(["--agent", "tester", "--json"])
        .args(args)
        .env_remove("LOOPX_OWNER_KEY")
        .env_remove("LOOPX_AGENT")
        .env_remove("LOOPX_DIR")
        .output()
        .expect("run loopx");
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// The demo's journal lines of `action` on `target`.
fn lines_of(demo: &Path, action: &str, target: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(demo.join(".loopx/journal.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["action"] == action && v["target"] == target)
        .collect()
}

#[test]
fn the_demo_s_owner_approves_rejects_and_reassigns_signed() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let wait = Duration::from_secs(15);
    let tmp = std::env::temp_dir().join(format!("loopx-pty-demo-owner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let cmd = format!("env TMPDIR='{}' '{BIN}' demo --keep", tmp.display());
    let t = Tmux::start("demo-owner", &cmd, 100, 30);
    t.wait_for("Gates", Duration::from_secs(30)).unwrap();
    let demo = demos(&tmp).into_iter().next().expect("the demo's project");
    // From the first frame the owner's powers are there.
    t.wait_for("owner ✓", wait).unwrap();

    // Approve the demo's own question (the selected gate), with its first option.
    let first = t.screen();
    let asked = first
        .lines()
        .find(|l| l.contains("› ? g-"))
        .and_then(|l| l.split_whitespace().find(|w| w.starts_with("g-")))
        .expect("a selected pending gate")
        .to_string();
    t.keys(&["a"]);
    t.wait_for(&format!("Approve {asked}"), wait).unwrap();
    t.keys(&["Enter"]);
    t.wait_for("Confirm", wait).unwrap();
    t.keys(&["y"]);
    t.wait_for(&format!("approved {asked}"), wait).unwrap();

    // Reject a question an agent asks now, with a reason.
    let g = agent_json(
        &demo,
        &[
            "gate",
            "open",
            "Ship on Friday?",
            "--option",
            "friday",
            "--option",
            "monday",
        ],
    );
    let gate = g["gate"]["id"].as_str().unwrap().to_string();
    // Pending gates sort first: up to the top of the pane selects it.
    t.wait_for(&format!("? {gate}"), wait).unwrap();
    t.keys(&["k", "k", "k"]);
    t.wait_for(&format!("› ? {gate}"), wait).unwrap();
    t.keys(&["x"]);
    t.wait_for(&format!("Reject {gate}"), wait).unwrap();
    t.run(&[
        "send-keys",
        "-t",
        &t.session,
        "-l",
        "not before the release notes",
    ]);
    t.keys(&["Enter"]);
    t.wait_for("Confirm", wait).unwrap();
    t.keys(&["y"]);
    t.wait_for(&format!("rejected {gate}"), wait).unwrap();

    // Reassign an agent's lease to another agent.
    let v = agent_json(&demo, &["todo", "add", "Tester work", "--priority", "P4"]);
    let todo = v["todo"]["id"].as_str().unwrap().to_string();
    agent_json(&demo, &["todo", "claim", &todo, "--ttl", "1h"]);
    t.keys(&["Tab", "/"]);
    t.run(&["send-keys", "-t", &t.session, "-l", "Tester work"]);
    t.keys(&["Enter"]);
    t.wait_for("tester ⏱", wait).unwrap();
    t.keys(&["l", "r"]);
    t.wait_for(&format!("Reassign {todo} to"), wait).unwrap();
    t.run(&["send-keys", "-t", &t.session, "-l", "agent-z"]);
    t.keys(&["Enter"]);
    t.wait_for("Confirm", wait).unwrap();
    t.keys(&["y"]);
    let reassigned = wait_until(wait, || !lines_of(&demo, "todo.reassign", &todo).is_empty());
    assert!(reassigned, "no reassign line; the screen:\n{}", t.screen());
    t.keys(&["q"]);
    let pid = pid_of(&demo);
    assert!(
        wait_until(Duration::from_secs(30), || !alive(pid)),
        "the demo still runs"
    );

    // The journal holds each act as the owner's, signed.
    for (action, target) in [
        ("gate.approve", asked.as_str()),
        ("gate.reject", gate.as_str()),
        ("todo.reassign", todo.as_str()),
    ] {
        let l = lines_of(&demo, action, target);
        assert_eq!(l.len(), 1, "{action} {target}: {l:?}");
        assert_eq!(l[0]["actor"], "owner", "{l:?}");
        assert!(l[0]["sig"].as_str().is_some_and(|s| !s.is_empty()), "{l:?}");
    }
    let reject = &lines_of(&demo, "gate.reject", &gate)[0];
    assert_eq!(reject["data"]["reason"], "not before the release notes");
    let moved = &lines_of(&demo, "todo.reassign", &todo)[0];
    assert_eq!(moved["data"]["to"], "agent-z");
    let _ = std::fs::remove_dir_all(&tmp);
}
