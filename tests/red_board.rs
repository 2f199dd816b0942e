//! Red-team cases for issue 11's board: pasted text never acts as keys (bracketed paste), in a
//! real terminal and on the App; hostile text in the new inputs and the editor key.

mod common;

use std::path::Path;
use std::time::Duration;

use common::tmux::{BIN, Tmux, loopx, owned_project, skip_without_tmux};
use loopx::board::app::{App, AppEvent, InputFor, Mode, TextInput};
use loopx::board::data::Delta;
use loopx::board::theme::Theme;
use loopx::flows::owner::Owner;
use loopx::kernel::{Gate, Snapshot, Ts};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const WAIT: Duration = Duration::from_secs(10);

fn now() -> Ts {
    "2026-11-30T12:00:00.000Z".parse().unwrap()
}

/// A board with the owner's key and one pending gate, `g-gate01`.
fn board() -> App {
    let config: loopx::kernel::Config = toml::from_str(&format!(
        "schema_version = 1\n[goal]\nid = \"goal-1\"\nobjective = \"Red\"\nstatus = \"active\"\n\
         created_at = \"{0}\"\nupdated_at = \"{0}\"\n",
        now()
    ))
    .unwrap();
    let mut s = Snapshot::new(config);
    let mut g: Gate = toml::from_str(&format!(
        "id = \"g-gate01\"\nquestion = \"Ship?\"\nopened_by = \"agent-b\"\nopened_at = \"{}\"\n\
         status = \"pending\"",
        now()
    ))
    .unwrap();
    g.signed = true;
    s.gates.insert(g.id.clone(), g);
    let t: loopx::kernel::Todo = toml::from_str(&format!(
        "id = \"t-aaaaa1\"\ntitle = \"Held\"\npriority = \"P1\"\nstatus = \"open\"\n\
         created_by = \"owner\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\nfence = 2\n\
         [lease]\nholder = \"agent-a\"\nfence = 2\nacquired_at = \"{0}\"\n\
         expires_at = \"2026-11-30T13:00:00.000Z\"\n",
        now()
    ))
    .unwrap();
    s.todos.insert(t.id.clone(), t);
    let mut app = App::new("~/src/red", Theme::dark(), false, now());
    app.size = (80, 24);
    app.owner = Owner {
        actor: "owner".into(),
        verified: true,
        note: "owner ✓".into(),
    };
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        journal: Some(Vec::new()),
        at: now(),
        ..Delta::default()
    }));
    app
}

fn ch(app: &mut App, c: char) {
    app.on_key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE));
}

fn input_text(app: &App) -> String {
    match &app.mode {
        Mode::Input(TextInput { text, .. }) => text.clone(),
        m => panic!("not in an input: {m:?}"),
    }
}

// ---------------------------------------------------------------- paste

#[test]
fn a_pasted_newline_never_submits_the_reason_nor_confirms() {
    let mut a = board();
    ch(&mut a, 'N');
    ch(&mut a, 'x');
    assert!(matches!(
        a.mode,
        Mode::Input(TextInput {
            purpose: InputFor::RejectReason(_),
            ..
        })
    ));
    let fx = a.on_event(AppEvent::Paste("too risky\r\n\ry\x1b[31m".into()));
    assert!(fx.is_empty(), "a paste performs nothing: {fx:?}");
    assert_eq!(input_text(&a), "too risky   y[31m");
}

#[test]
fn a_huge_paste_is_cut_at_the_field_limit_and_says_so() {
    let mut a = board();
    ch(&mut a, 'N');
    ch(&mut a, 'x');
    a.on_event(AppEvent::Paste("é".repeat(100_000)));
    assert_eq!(
        input_text(&a).chars().count(),
        loopx::kernel::limits::TEXT_MAX
    );
    let Mode::Input(TextInput { note, cursor, .. }) = &a.mode else {
        unreachable!()
    };
    assert_eq!(*cursor, loopx::kernel::limits::TEXT_MAX);
    assert!(note.as_deref().unwrap_or("").contains("cut"), "{note:?}");
}

#[test]
fn a_paste_on_the_board_is_not_keys() {
    let mut a = board();
    let fx = a.on_event(AppEvent::Paste("Nay".into()));
    assert!(fx.is_empty());
    assert_eq!(a.mode, Mode::Normal, "no key of the paste acted");
}

/// A board on `dir` at 80x24 with the owner's key, in its own tmux server.
fn pty_board(tag: &str, dir: &Path, key: &Path) -> Tmux {
    let cmd = format!(
        "env LOOPX_OWNER_KEY='{}' '{}' board --dir '{}'; sleep 5",
        key.display(),
        BIN,
        dir.display()
    );
    Tmux::start(&format!("red-{tag}"), &cmd, 80, 24)
}

#[test]
fn a_multi_line_paste_into_a_reason_rejects_nothing() {
    if skip_without_tmux() {
        return;
    }
    let (dir, key) = owned_project("red-paste", "Paste safely");
    let out = loopx(
        &dir,
        &key,
        &["--json", "--agent", "agent-x", "gate", "open", "Paste me?"],
    );
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let file = dir.join(".loopx").join("gates").join(format!("{id}.toml"));
    let t = pty_board("paste", &dir, &key);
    t.wait_for("Paste me?", WAIT).unwrap();
    t.keys(&["N", "x"]);
    t.wait_for("Reject", WAIT).unwrap();
    // A paste of two lines and a `y`: as keys, Enter submits and `y` confirms the rejection.
    t.run(&["set-buffer", "--", "nope\n\ny-pasted"]);
    t.run(&["paste-buffer", "-p", "-t", &t.session]);
    t.wait_for("y-pasted", WAIT).unwrap();
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("status = \"pending\""),
        "the paste decided the gate:\n{}",
        t.screen()
    );
    t.keys(&["Escape", "q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- tiny terminals

/// Draws `app` at every size from 1x1 to 24x8 and a few thin ones; a panic fails the test.
fn draws_everywhere(app: &App, what: &str) {
    use ratatui::{Terminal, backend::TestBackend};
    let mut sizes: Vec<(u16, u16)> = (1..=24)
        .flat_map(|w| (1..=8).map(move |h| (w, h)))
        .collect();
    sizes.extend([(80, 1), (80, 2), (1, 24), (2, 40), (200, 3), (3, 200)]);
    for (w, h) in sizes {
        let mut a = app.clone();
        a.on_event(AppEvent::Resize(w, h));
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            t.draw(|f| loopx::board::draw::frame(f, &a.scene()))
                .unwrap();
        }));
        assert!(r.is_ok(), "{what} panicked at {w}x{h}");
    }
}

#[test]
fn every_new_dialog_draws_on_tiny_terminals() {
    let mut a = board();
    draws_everywhere(&a, "the board");
    ch(&mut a, 'N');
    ch(&mut a, 'a');
    draws_everywhere(&a, "the confirm dialog");
    ch(&mut a, 'r');
    a.on_event(AppEvent::Paste("宽字符 ".repeat(300)));
    draws_everywhere(&a, "the reason input");
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    draws_everywhere(&a, "the confirm dialog with a long wide reason");
    ch(&mut a, 'n');
    ch(&mut a, 'x');
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    draws_everywhere(&a, "the empty reason note");
    a.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    for c in ['?', 'e', 'A'] {
        ch(&mut a, c);
        draws_everywhere(&a, &format!("the overlay of {c}"));
        a.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    }
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    draws_everywhere(&a, "the gate's detail");
    a.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    ch(&mut a, 'l');
    ch(&mut a, 'r');
    assert!(matches!(a.mode, Mode::Picker(_)), "{:?}", a.mode);
    a.on_event(AppEvent::Paste("agent-".repeat(20)));
    draws_everywhere(&a, "the reassign picker with a typed id");
    a.on_key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE));
    a.on_event(AppEvent::Loaded(Delta {
        problems: vec![loopx::kernel::Problem {
            file: ".loopx/quota.toml".into(),
            line: Some(1),
            message: "broken ".repeat(200),
            code: loopx::kernel::Code::InvalidState,
            hint: Some("fix it".into()),
        }],
        at: now(),
        ..Delta::default()
    }));
    draws_everywhere(&a, "the broken-file banner");
    ch(&mut a, 'e');
    assert!(matches!(a.mode, Mode::Errors(_)), "{:?}", a.mode);
    draws_everywhere(&a, "the file errors");
}

// ---------------------------------------------------------------- the demo killed outright

/// The demo directories under `tmp`.
fn demo_dirs(tmp: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(tmp)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("loopx-demo-")
        })
        .collect();
    v.sort();
    v
}

fn demo_in(tmp: &Path) -> std::process::Command {
    let mut c = std::process::Command::new(BIN);
    c.arg("demo")
        .env("TMPDIR", tmp)
        .env_remove("LOOPX_OWNER_KEY")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c
}

#[test]
fn a_demo_killed_outright_is_swept_by_the_next_demo_but_kept_ones_stay() {
    let tmp = std::env::temp_dir().join(format!("loopx-red-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    // A demo killed with SIGKILL once its owner key is written.
    let mut child = demo_in(&tmp).spawn().unwrap();
    let start = std::time::Instant::now();
    while !demo_dirs(&tmp)
        .first()
        .is_some_and(|d| d.join("owner.key").is_file())
    {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the demo never came up"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = demo_dirs(&tmp);
    assert_eq!(killed.len(), 1, "SIGKILL leaves the directory: {killed:?}");
    // A kept one of a gone process, and one of a live process (this test's), stay.
    let kept = tmp.join("loopx-demo-1999999-abcdef");
    std::fs::create_dir_all(kept.join(".loopx")).unwrap();
    std::fs::write(kept.join(".loopx-demo-kept"), "").unwrap();
    let live = tmp.join(format!("loopx-demo-{}-abcdef", std::process::id()));
    std::fs::create_dir_all(live.join(".loopx")).unwrap();

    let out = demo_in(&tmp).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let mut want = vec![kept, live];
    want.sort();
    assert_eq!(
        demo_dirs(&tmp),
        want,
        "the killed demo's directory is swept"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
