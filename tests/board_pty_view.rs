//! The board's layout in a real terminal (tmux, 80x24): `a` on a gate without the owner's key
//! shows the refusal first in the status bar, readable in full. Skips when tmux is absent.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

mod common;
use common::tmux::{BIN, Tmux, owned_project, tmux_available};

/// Runs loopx where the owner's key is, asserting it succeeds.
fn loopx(dir: &Path, key: &Path, args: &[&str]) -> Output {
    let out = common::tmux::loopx(dir, key, args);
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
    // The project has an owner; the board below runs where the owner's key is not.
    let (dir, key) = owned_project("view", "Triage at 80 columns");
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

#[test]
fn the_selected_gate_reads_whole_and_hidden_keys_are_marked_at_80x24() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let (dir, key) = owned_project("view80", "Ship v1 of wx");
    let out = loopx(&dir, &key, &["--json", "todo", "add", "Cache responses"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let todo = v["todo"]["id"].as_str().unwrap().to_string();
    let question = "Use SQLite or plain files for the response cache, given that the CLI must also run from a read-only home?";
    loopx(
        &dir,
        &key,
        &[
            "--agent",
            "agent-b",
            "gate",
            "open",
            question,
            "--option",
            "sqlite",
            "--option",
            "files",
            "--option",
            "no cache for v1",
            "--blocks",
            &todo,
        ],
    );
    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' '{BIN}' board --dir '{}'; sleep 5",
        key.display(),
        dir.display()
    );
    let t = Tmux::start("view80", &cmd, 80, 24);
    t.wait_for("agent-b", Duration::from_secs(20)).unwrap();
    let screen = t.screen();
    // The gate's rows, joined: the question, every option and what it blocks, whole.
    let gate: String = screen
        .lines()
        .skip_while(|l| !l.contains("Gates"))
        .skip(1)
        .take_while(|l| !l.starts_with('┗'))
        .map(|l| l.trim_matches(|c| c == '┃' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(gate.contains(question), "{screen}");
    let tail = format!("[sqlite|files|no cache for v1] → blocks {todo}");
    assert!(gate.contains(&tail), "{screen}");
    // The hint bar says more keys exist.
    let hints = screen.lines().rfind(|l| !l.trim().is_empty()).unwrap();
    assert!(hints.trim_end().ends_with("? more"), "{screen}");
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}
