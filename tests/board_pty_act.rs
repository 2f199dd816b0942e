//! The board's actions in a real terminal (tmux, 80x24): three gates approved with three keys each,
//! a lease reassigned to a typed agent id, a broken todo file fixed through the `$EDITOR` key, and
//! an id copied to tmux's clipboard by OSC 52. Skips with a message when tmux is absent.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::tmux::{BIN, Tmux, assert_healthy, loopx, owned_project, skip_without_tmux};

fn json(dir: &Path, key: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = loopx(dir, key, &all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A board on `dir` at 80x24 with the owner's key and `env` set, in its own tmux server.
fn board(tag: &str, dir: &Path, key: &Path, env: &str) -> Tmux {
    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' {env} '{}' board --dir '{}'; sleep 5",
        key.display(),
        BIN,
        dir.display()
    );
    Tmux::start(&format!("act-{tag}"), &cmd, 80, 24)
}

/// Waits until `pred` holds of the file's text.
fn wait_file(path: &Path, t: &Tmux, pred: impl Fn(&str) -> bool) {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if pred(&text) {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{} never changed as expected:\n{text}\n{}",
            path.display(),
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn approved(text: &str) -> bool {
    text.contains("status = \"approved\"") && text.contains("decided_by = \"owner\"")
}

fn gate_file(dir: &Path, id: &str) -> std::path::PathBuf {
    dir.join(".loopx").join("gates").join(format!("{id}.toml"))
}

const WAIT: Duration = Duration::from_secs(10);

#[test]
fn three_gates_approved_with_three_keys_each() {
    if skip_without_tmux() {
        return;
    }
    let (dir, key) = owned_project("act-triage", "Triage three gates");
    let mut ids = Vec::new();
    for q in ["Gate one?", "Gate two?", "Gate three?"] {
        let v = json(&dir, &key, &["--agent", "agent-x", "gate", "open", q]);
        ids.push(v["gate"]["id"].as_str().unwrap().to_string());
        std::thread::sleep(Duration::from_millis(5));
    }
    let t = board("triage", &dir, &key, "");
    t.wait_for("3 pending", WAIT).unwrap();
    t.keys(&["Tab"]);

    // One: jump to the next pending gate from the Todos pane, approve, confirm.
    t.keys(&["N", "a"]);
    t.wait_for("“Gate one?”", WAIT).unwrap();
    t.keys(&["y"]);
    wait_file(&gate_file(&dir, &ids[0]), &t, approved);
    t.wait_gone("Confirm", WAIT).unwrap();

    // Two: the cursor moved on by itself; decide from the detail view.
    t.keys(&["Enter"]);
    t.wait_for("a approve", WAIT).unwrap();
    t.keys(&["a"]);
    t.wait_for("“Gate two?”", WAIT).unwrap();
    t.keys(&["y"]);
    wait_file(&gate_file(&dir, &ids[1]), &t, approved);
    t.wait_gone("Confirm", WAIT).unwrap();

    // Three: the only one left.
    t.keys(&["N", "a"]);
    t.wait_for("“Gate three?”", WAIT).unwrap();
    t.keys(&["y"]);
    wait_file(&gate_file(&dir, &ids[2]), &t, approved);
    t.wait_gone(" pending", WAIT).unwrap();
    assert_healthy(&dir, &key);
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reassign_to_a_typed_agent_id() {
    if skip_without_tmux() {
        return;
    }
    let (dir, key) = owned_project("act-reassign", "Reassign by hand");
    let v = json(&dir, &key, &["todo", "add", "Move me"]);
    let id = v["todo"]["id"].as_str().unwrap().to_string();
    json(&dir, &key, &["--agent", "agent-x", "todo", "claim", &id]);
    let t = board("reassign", &dir, &key, "");
    t.wait_for("agent-x", WAIT).unwrap();
    t.keys(&["Tab", "l", "r"]);
    t.wait_for(&format!("Reassign {id} to"), WAIT).unwrap();
    t.keys(&["agent-typed"]);
    t.wait_for("typed id, not seen yet", WAIT).unwrap();
    t.keys(&["Enter"]);
    t.wait_for("Confirm", WAIT).unwrap();
    t.keys(&["y"]);
    let file = dir.join(".loopx").join("todos").join(format!("{id}.toml"));
    wait_file(&file, &t, |text| text.contains("holder = \"agent-typed\""));
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_file_is_fixed_through_the_editor_key() {
    if skip_without_tmux() {
        return;
    }
    let (dir, key) = owned_project("act-edit", "Fix a file in the editor");
    let v = json(&dir, &key, &["todo", "add", "Fix me"]);
    let id = v["todo"]["id"].as_str().unwrap().to_string();
    let file = dir.join(".loopx").join("todos").join(format!("{id}.toml"));
    let good = std::fs::read_to_string(&file).unwrap();
    // The "editor" puts the good text back, as an operator would.
    let saved = dir.join("good.toml");
    std::fs::write(&saved, &good).unwrap();
    let script = dir.join("fix-editor.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"$1\" > '{}'\ncp '{}' \"$1\"\n",
            dir.join("edited").display(),
            saved.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        &file,
        good.replacen("title = ", "title = \"unterminated\ntitle = ", 1),
    )
    .unwrap();

    let t = board(
        "edit",
        &dir,
        &key,
        &format!("EDITOR='{}'", script.display()),
    );
    t.wait_for("quarantined", WAIT).unwrap();
    t.keys(&["e"]);
    t.wait_for("File errors (1)", WAIT).unwrap();
    t.wait_for(&format!("{id}.toml line 3"), WAIT).unwrap();
    t.keys(&["E"]);
    t.wait_gone("quarantined", WAIT).unwrap();
    t.wait_for("Fix me", WAIT).unwrap();
    let edited = std::fs::read_to_string(dir.join("edited")).unwrap();
    assert_eq!(edited.trim(), file.display().to_string());
    assert_eq!(std::fs::read_to_string(&file).unwrap(), good);
    // The board took the terminal back: keys work.
    t.keys(&["?"]);
    t.wait_for("Help", WAIT).unwrap();
    t.keys(&["Escape", "q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn y_copies_an_id_to_the_clipboard() {
    if skip_without_tmux() {
        return;
    }
    let (dir, key) = owned_project("act-copy", "Copy an id");
    let v = json(
        &dir,
        &key,
        &["--agent", "agent-x", "gate", "open", "Copy me?"],
    );
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let t = board("copy", &dir, &key, "");
    t.run(&["set-option", "-g", "set-clipboard", "on"]);
    t.wait_for("Copy me?", WAIT).unwrap();
    t.keys(&["y"]);
    t.wait_for("✓ copied", WAIT).unwrap();
    let start = Instant::now();
    loop {
        let out = t.run(&["show-buffer"]);
        if String::from_utf8_lossy(&out.stdout).trim() == id {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "tmux's buffer: {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}
