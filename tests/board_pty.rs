//! End to end in a real terminal (tmux): the board shows a gate another process opens, keys approve it,
//! and the gate file on disk says approved; `start-goal --guided` asks its questions. Skips with a
//! message when tmux is absent.

use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::tmux::{BIN, Tmux, loopx, owned_project, temp_dir, tmux_available};

#[test]
fn approve_a_gate_opened_by_another_process() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let (dir, key) = owned_project("approve", "Prove the board end to end");

    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' '{}' board --dir '{}'; sleep 5",
        key.display(),
        BIN,
        dir.display()
    );
    let t = Tmux::start("test", &cmd, 120, 40);
    t.wait_for(
        "no gates: nothing waits on the owner",
        Duration::from_secs(20),
    )
    .unwrap();
    t.wait_for("owner ✓", Duration::from_secs(5)).unwrap();

    let out = loopx(
        &dir,
        &key,
        &[
            "--agent",
            "agent-x",
            "--json",
            "gate",
            "open",
            "Ship the pty test?",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let shown_after = t
        .wait_for("Ship the pty test?", Duration::from_secs(10))
        .unwrap();
    eprintln!("the gate showed {shown_after:?} after `gate open` returned");

    // The gates pane has focus and the pending gate is first: approve, then confirm.
    t.keys(&["a"]);
    t.wait_for("Confirm", Duration::from_secs(5)).unwrap();
    t.keys(&["y"]);
    let file = dir.join(".loopx").join("gates").join(format!("{id}.toml"));
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("status = \"approved\"") {
            assert!(text.contains("decided_by = \"owner\""), "{text}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not approved on disk:\n{text}\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t.wait_for(&format!("approved {id}"), Duration::from_secs(5))
        .unwrap();
    // The decision is signed: doctor is healthy and the board does not mark it unproven.
    let out = loopx(&dir, &key, &["doctor"]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!t.screen().contains("UNPROVEN"));

    t.keys(&["q"]);
    t.wait_for("", Duration::from_secs(1)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn readonly_board_refuses_and_a_bad_file_shows_a_banner() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let dir = temp_dir("readonly");
    let key = dir.join("owner.key");
    let out = Command::new(BIN)
        .args(["start-goal", "--goal-text", "Readonly board", "--project"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = loopx(&dir, &key, &["--json", "gate", "open", "Keep me pending?"]);
    assert!(out.status.success());
    let out = loopx(
        &dir,
        &key,
        &["--json", "todo", "add", "A todo that will break"],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tid = v["todo"]["id"]
        .as_str()
        .or(v["id"].as_str())
        .unwrap_or_default()
        .to_string();

    let cmd = format!(
        "'{}' board --readonly --poll --dir '{}'; sleep 5",
        BIN,
        dir.display()
    );
    let t = Tmux::start("test-ro", &cmd, 100, 30);
    t.wait_for("Keep me pending?", Duration::from_secs(20))
        .unwrap();
    t.wait_for("READ-ONLY", Duration::from_secs(2)).unwrap();
    t.wait_for("polling", Duration::from_secs(2)).unwrap();
    t.keys(&["a"]);
    t.wait_for("read-only", Duration::from_secs(5)).unwrap();

    if !tid.is_empty() {
        let f = dir.join(".loopx").join("todos").join(format!("{tid}.toml"));
        let good = std::fs::read_to_string(&f).unwrap();
        std::fs::write(
            &f,
            good.replacen("title = ", "title = \"unterminated\ntitle = ", 1),
        )
        .unwrap();
        // The store quarantines it: named with file and line, off the columns.
        t.wait_for(
            &format!("{tid} QUARANTINED, the other todos still run: .loopx/todos/{tid}.toml:3"),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(!t.screen().contains("A todo that wi"), "{}", t.screen());
        std::fs::write(&f, good).unwrap();
        t.wait_for("A todo that wi", Duration::from_secs(10))
            .unwrap();
        let start = Instant::now();
        while t.screen().contains(&format!("{tid} QUARANTINED")) {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the banner stayed:\n{}",
                t.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_board_with_the_key_seals_lines_another_process_adds() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let (dir, key) = owned_project("seal", "Seal from the board");
    let seal = dir.join(".loopx").join("owner.seal");
    let sealed = std::fs::read_to_string(&seal).unwrap();

    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' '{}' board --seal-every 300 --dir '{}'; sleep 5",
        key.display(),
        BIN,
        dir.display()
    );
    let t = Tmux::start("seal", &cmd, 120, 40);
    t.wait_for("owner ✓", Duration::from_secs(20)).unwrap();
    let out = loopx(
        &dir,
        &key,
        &["--agent", "agent-x", "todo", "add", "Sealed by the board"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let start = Instant::now();
    while std::fs::read_to_string(&seal).unwrap_or_default() == sealed {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "owner.seal did not change:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let journal = std::fs::read_to_string(dir.join(".loopx").join("journal.jsonl")).unwrap();
    assert!(journal.contains("\"action\":\"owner.seal\""), "{journal}");
    let out = loopx(&dir, &key, &["doctor"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn start_goal_guided_asks_on_a_terminal() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let dir = temp_dir("guided");
    let cmd = format!(
        "'{}' start-goal --guided --project '{}' --goal-text 'Run a multi-day benchmark suite'; sleep 5",
        BIN,
        dir.display()
    );
    let t = Tmux::start("guided", &cmd, 100, 30);
    t.wait_for("Success criteria", Duration::from_secs(10))
        .unwrap();
    t.keys(&["p95 latency for three days", "Enter"]);
    t.keys(&["Enter"]);
    t.wait_for("Turns per", Duration::from_secs(5)).unwrap();
    t.keys(&["50", "Enter"]);
    t.wait_for("First todos", Duration::from_secs(5)).unwrap();
    t.keys(&["P1 write the harness", "Enter"]);
    t.keys(&["Enter"]);
    t.wait_for("started goal-", Duration::from_secs(5)).unwrap();

    let cfg = std::fs::read_to_string(dir.join(".loopx/loopx.toml")).unwrap();
    assert!(cfg.contains("p95 latency for three days"), "{cfg}");
    assert!(cfg.contains("slots = 50"), "{cfg}");
    let todos: Vec<String> = std::fs::read_dir(dir.join(".loopx/todos"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    assert_eq!(todos.len(), 1, "{todos:?}");
    assert!(
        todos[0].contains("title = \"write the harness\"")
            && todos[0].contains("priority = \"P1\""),
        "a leading P1 is the priority: {todos:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_window_title_counts_pending_gates() {
    if !tmux_available() {
        eprintln!("skipped: tmux is not installed (apt-get install tmux)");
        return;
    }
    let (dir, key) = owned_project("title", "Title the window");
    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' '{}' board --dir '{}'; sleep 5",
        key.display(),
        BIN,
        dir.display()
    );
    let t = Tmux::start("test-title", &cmd, 120, 40);
    let title = || {
        String::from_utf8_lossy(
            &t.run(&["display-message", "-p", "-t", &t.session, "#{pane_title}"])
                .stdout,
        )
        .trim()
        .to_string()
    };
    let wait_title = |want: &str| {
        let start = Instant::now();
        while title() != want {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the title is `{}`, not `{want}`",
                title()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    t.wait_for(
        "no gates: nothing waits on the owner",
        Duration::from_secs(20),
    )
    .unwrap();
    wait_title("loopx");
    for (i, q) in ["First?", "Second?"].iter().enumerate() {
        let out = loopx(&dir, &key, &["--agent", "agent-x", "gate", "open", q]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        wait_title(&if i == 0 {
            "loopx · 1 gate".to_string()
        } else {
            "loopx · 2 gates".to_string()
        });
    }
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&dir);
}
