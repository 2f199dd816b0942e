//! Safe text: stored text holding ESC, BEL, a newline or a bidi override never reaches the
//! terminal raw from human output, never adds structure to STATE.md, and stays exact in `--json`.

mod common;

use std::process::Stdio;

use common::Project;
use loopx::board::app::{App, AppEvent};
use loopx::board::data::Delta;
use loopx::board::draw;
use loopx::board::theme::Theme;
use loopx::store::{FileStore, Reads, Store};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// An OSC that would set the terminal's title, a newline with a heading, and a bidi override.
const TITLE: &str = "evil \x1b]0;pwned\x07 title\n# Heading \u{202e}gnp.exe";
/// A question that would paint the screen red.
const QUESTION: &str = "ship it? \x1b[31mred\x1b[0m\x07";
/// An evidence summary that would clear the screen.
const SUMMARY: &str = "tests pass\x1b[2J\x1b[H\u{2028}fake line";
/// A reason with a C1 control (CSI) and a paragraph separator.
const REASON: &str = "waits\u{9b}31m on \u{2029}the owner";

/// Every control character of C0 but newline and tab, DEL, C1, bidi controls and separators.
fn bad_char(c: char) -> bool {
    c != '\n' && c != '\t' && loopx::text::is_unsafe(c)
}

/// Runs loopx and returns the raw stdout and stderr bytes.
fn raw(p: &Project, args: &[&str]) -> (i32, Vec<u8>, Vec<u8>) {
    let out = p
        .cmd(args)
        .stdin(Stdio::null())
        .output()
        .expect("run loopx");
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(code, 101, "loopx panicked: {args:?}");
    (code, out.stdout, out.stderr)
}

#[track_caller]
fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8(bytes.to_vec())
        .unwrap_or_else(|_| panic!("{what}: output is not UTF-8: {bytes:?}"));
    if let Some(c) = text.chars().find(|c| bad_char(*c)) {
        panic!("{what}: a raw {c:?} reached the terminal:\n{text}");
    }
    for line in text.lines() {
        assert!(
            !line.trim_start().starts_with("# Heading"),
            "{what}: a title's newline started a line:\n{text}"
        );
    }
}

/// A project with the nasty texts in a claimed todo, a blocked todo, a gate and evidence.
fn nasty() -> (Project, String, String) {
    let p = Project::new("safetext");
    let a = p.ok(&["todo", "add", TITLE, "--priority", "P0"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = p.ok(&["todo", "add", TITLE, "--priority", "P3"])["todo"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    p.ok_as("agent-a", &["todo", "claim", &a]);
    p.ok_as("agent-a", &["todo", "update", &a, "--evidence", SUMMARY]);
    p.ok_as("agent-b", &["todo", "claim", &b]);
    p.ok_as(
        "agent-b",
        &[
            "todo", "update", &b, "--status", "blocked", "--reason", REASON,
        ],
    );
    p.ok_as("agent-a", &["gate", "open", QUESTION, "--option", QUESTION]);
    // A file name any agent can choose: doctor names it in a warning.
    std::fs::write(p.lx("evidence/t-\x1b]0;x\x07.jsonl"), b"").unwrap();
    (p, a, b)
}

#[test]
fn human_output_never_carries_a_control_character() {
    let (p, a, b) = nasty();
    let commands: Vec<Vec<&str>> = vec![
        vec!["status"],
        vec!["--agent", "agent-a", "status"],
        vec!["todo", "list"],
        vec!["todo", "list", "--status", "blocked"],
        vec!["todo", "show", &a],
        vec!["todo", "show", &b],
        vec!["gate", "list"],
        vec!["--agent", "agent-a", "quota", "should-run"],
        vec!["--agent", "agent-c", "quota", "should-run"],
        vec!["--agent", "agent-a", "refresh-state"],
        vec!["log", "--limit", "50"],
        vec!["doctor"],
        vec!["goal", "show"],
        vec!["todo", "show", "t-\x1b]0;x\x07"],
    ];
    for args in &commands {
        let (_, out, err) = raw(&p, args);
        assert_clean(&format!("{args:?} stdout"), &out);
        assert_clean(&format!("{args:?} stderr"), &err);
    }
    let (_, out, _) = raw(&p, &["todo", "show", &a]);
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("evil \\x1b]0;pwned\\x07 title\\n# Heading \\u{202e}gnp.exe"),
        "the title is shown escaped: {out}"
    );
    assert!(
        out.contains("tests pass\\x1b[2J"),
        "evidence escaped: {out}"
    );
    let (_, out, _) = raw(&p, &["gate", "list"]);
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("ship it? \\x1b[31mred")
    );
    let (_, out, _) = raw(&p, &["todo", "show", &b]);
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("waits\\u{9b}31m on \\u{2029}the owner")
    );
}

#[test]
fn json_keeps_the_exact_values() {
    let (p, a, b) = nasty();
    let v = p.ok(&["todo", "show", &a]);
    assert_eq!(v["todo"]["title"], TITLE);
    assert_eq!(v["todo"]["evidence"][0]["summary"], SUMMARY);
    let v = p.ok(&["todo", "show", &b]);
    assert_eq!(v["todo"]["reason"], REASON);
    let v = p.ok(&["gate", "list"]);
    assert_eq!(v["gates"][0]["question"], QUESTION);
    assert_eq!(v["gates"][0]["options"][0], QUESTION);
    let v = p.ok(&["todo", "list"]);
    let titles: Vec<_> = v["todos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["title"])
        .collect();
    assert!(titles.iter().all(|t| *t == TITLE), "{titles:?}");
    // One JSON line on stdout: serde_json escaped every control character.
    let (_, out, _) = raw(&p, &["status", "--json"]);
    assert!(!out[..out.len() - 1].iter().any(|b| *b < 0x20 || *b == 0x7f));
}

#[test]
fn state_md_gets_no_structure_from_stored_text() {
    let (p, _, _) = nasty();
    // The objective and a success criterion begin their lines in STATE.md.
    let cfg = std::fs::read_to_string(p.lx("loopx.toml")).unwrap();
    let cfg = cfg.replace(
        "objective = \"Test objective\"",
        "objective = \"# Not a heading\\n# Nor this\\u001b]0;x\\u0007\"\nsuccess_criteria = [\"# nope\", \"    code\", \"```\"]",
    );
    std::fs::write(p.lx("loopx.toml"), cfg).unwrap();
    let (code, out, err) = raw(&p, &["--agent", "agent-a", "refresh-state"]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    assert_clean("refresh-state", &out);
    let md = std::fs::read(p.lx("STATE.md")).unwrap();
    assert_clean("STATE.md", &md);
    let md = String::from_utf8(md).unwrap();
    let headings = [
        "# loopx state",
        "## Objective",
        "## Your leases",
        "## Ready",
        "## Questions for the owner",
        "## Recent evidence",
        "## Quota",
        "## Next",
    ];
    for line in md.lines() {
        if line.starts_with('#') {
            assert!(
                headings.iter().any(|h| line.starts_with(h)),
                "a heading from stored text: {line:?}\n{md}"
            );
        }
        assert!(
            !line.starts_with("```") && !line.starts_with("    code"),
            "{md}"
        );
        assert!(
            !line.starts_with("- #") && !line.starts_with("- ```"),
            "{md}"
        );
    }
    assert!(
        md.contains("\\# Not a heading\\n# Nor this\\x1b]0;x\\x07"),
        "{md}"
    );
    assert!(
        md.contains("evil \\x1b]0;pwned\\x07 title\\n# Heading"),
        "{md}"
    );
}

#[test]
fn the_board_shows_stored_text_escaped() {
    let (p, a, _) = nasty();
    let store = FileStore::at(p.root());
    let snap = store.load().unwrap();
    let journal = store.journal_tail(50).unwrap();
    let now = loopx::kernel::Ts::now();
    let mut app = App::new("proj\x1b]0;x\x07", Theme::dark(), false, now);
    app.size = (160, 50);
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(snap),
        journal: Some(journal),
        at: now,
        ..Delta::default()
    }));
    let evidence = store.evidence_tail(&a, 10).unwrap();
    app.on_event(AppEvent::Evidence(a.clone(), Ok(evidence)));
    let mut t = Terminal::new(TestBackend::new(160, 50)).unwrap();
    t.draw(|f| draw::frame(f, &app.scene())).unwrap();
    let buf = t.backend().buffer().clone();
    let mut screen = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let sym = buf[(x, y)].symbol();
            assert!(!sym.chars().any(bad_char), "cell {x},{y} holds {sym:?}");
            screen.push_str(sym);
        }
        screen.push('\n');
    }
    assert!(
        screen.contains("evil \\x1b]0;pwned"),
        "todos pane:\n{screen}"
    );
    assert!(
        screen.contains("ship it? \\x1b[31mred"),
        "gates pane:\n{screen}"
    );
    assert!(
        screen.contains("proj\\x1b]0;x\\x07"),
        "status bar:\n{screen}"
    );
}

/// The escape is the same for every text: none of its output is ever unsafe.
#[test]
fn escape_output_is_always_safe() {
    let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
    assert!(
        !loopx::text::escape(&all)
            .chars()
            .any(loopx::text::is_unsafe)
    );
}
