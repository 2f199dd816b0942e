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
