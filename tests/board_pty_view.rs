//! The board's layout in a real terminal (tmux, 80x24): `a` on a gate without the owner's key
//! shows the refusal first in the status bar, readable in full. Skips when tmux is absent.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

mod common;
use common::tmux::{Tmux, tmux_available};

const BIN: &str = env!("CARGO_BIN_EXE_loopx");

fn loopx(dir: &Path, key: &Path, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .arg("--dir")
        .arg(dir)
        .args(args)
        .env("LOOPX_OWNER_KEY", key)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .output()
        .expect("loopx runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_refusal_shows_first_at_80x24() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("loopx-pty-view-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new(BIN)
        .args([
            "start-goal",
            "--goal-text",
            "Triage at 80 columns",
            "--project",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The project has an owner; the board below runs where the owner's key is not.
    let key = dir.join("owner.key");
    loopx(&dir, &key, &["owner", "init"]);
    let out = loopx(
        &dir,
        &key,
        &[
            "--agent",
            "agent-x",
            "--json",
            "gate",
            "open",
            "May I ship it?",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["gate"]["id"].as_str().unwrap().to_string();

    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' '{BIN}' board --dir '{}'; sleep 5",
        dir.join("no-such.key").display(),
        dir.display()
    );
    let t = Tmux::start("view", &cmd, 80, 24);
    t.wait_for("May I ship it?", Duration::from_secs(20))
        .unwrap();
    t.keys(&["a"]);
    t.wait_for("only the owner can do this", Duration::from_secs(5))
        .unwrap();
    let screen = t.screen();
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    // The status bar is the row above the key hints: the refusal leads it, whole.
    let status = lines[lines.len() - 2];
    assert!(
        status
            .trim_start()
            .starts_with("✗ only the owner can do this; unverified (no matching owner key here)"),
        "{screen}"
    );
    let gate =
        std::fs::read_to_string(dir.join(".loopx/gates").join(format!("{id}.toml"))).unwrap();
    assert!(gate.contains("status = \"pending\""), "{gate}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}
