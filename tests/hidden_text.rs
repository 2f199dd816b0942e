//! A command text the owner approves is printable ASCII: a blank-looking, invisible or
//! look-alike character would show one command and run another. Each route (a proposed check,
//! a hook set, a check or a hook written by hand and adopted) through the real binary.

mod common;

use common::*;
use serde_json::Value;

/// One of each class that reads as a space, as nothing, or as another letter.
const HIDDEN: &[(&str, char)] = &[
    ("braille pattern blank", '\u{2800}'),
    ("combining grapheme joiner", '\u{34f}'),
    ("variation selector", '\u{fe0f}'),
    ("tag space", '\u{e0020}'),
    ("khmer inherent vowel", '\u{17b4}'),
    ("hangul filler", '\u{3164}'),
    ("hangul choseong filler", '\u{115f}'),
    ("halfwidth hangul filler", '\u{ffa0}'),
    ("no-break space", '\u{a0}'),
    ("em space", '\u{2003}'),
    ("zero-width space", '\u{200b}'),
    ("word joiner", '\u{2060}'),
    ("byte order mark", '\u{feff}'),
    ("soft hyphen", '\u{ad}'),
    ("combining acute", '\u{301}'),
    ("cyrillic a", '\u{430}'),
    ("fullwidth semicolon", '\u{ff1b}'),
    ("bidi override", '\u{202e}'),
    ("next line", '\u{85}'),
    ("tab", '\t'),
    ("newline", '\n'),
    ("escape", '\u{1b}'),
];

/// `echo ok<c>#;touch pwned`: read with `<c>` as a space, the rest is a comment.
fn payload(c: char) -> String {
    format!("echo ok{c}#;touch pwned")
}

/// `loopx --json --agent agent-a monitor propose ID -- TEXT`.
fn propose(p: &Project, id: &str, text: &str) -> (i32, Value) {
    let r = p.run(&[
        "--json", "--agent", "agent-a", "monitor", "propose", id, "--", text,
    ]);
    (r.code, parse_json(&r, "monitor propose"))
}

#[test]
fn a_proposed_check_or_a_hook_with_a_hidden_character_is_refused() {
    let p = Project::new("hidden-cli");
    let id = p.add("watch", &["--every", "1h"]);
    for (name, c) in HIDDEN {
        let (code, v) = propose(&p, &id, &payload(*c));
        assert_eq!(code, 2, "{name}: a check with it was taken: {v}");
        assert_err(&v, "usage");
        let hex = format!("U+{:04X}", *c as u32);
        assert!(v.to_string().contains(&hex), "{name}: not named: {v}");
        let r = p.run(&["--json", "hook", "set", "gate.opened", "--", &payload(*c)]);
        assert_eq!(r.code, 2, "{name}: a hook with it was set: {}", r.stdout);
    }
    // Plain ASCII passes, and non-ASCII text is written as printf escapes.
    let (code, v) = propose(&p, &id, "printf '\\342\\234\\223' | grep -q . && test -f x");
    assert_eq!(code, 0, "{v}");
    p.run_as("poller", &["monitor", "poll"]);
    assert!(!p.root().join("pwned").exists());
}

#[test]
fn a_check_edited_by_hand_to_hide_a_command_never_runs() {
    for (name, c) in HIDDEN {
        let p = Project::new("hidden-file");
        let id = p.add("watch", &["--every", "1h"]);
        let (code, v) = propose(&p, &id, "echo okXX#;touch pwned");
        assert_eq!(code, 0, "{v}");
        let path = p.lx(&format!("todos/{id}.toml"));
        let text = std::fs::read_to_string(&path).unwrap();
        // TOML's own escape, so that every character reaches the file, controls included.
        let esc = format!("\\U{:08X}", *c as u32);
        std::fs::write(&path, text.replace("XX", &esc)).unwrap();
        let (code, v) = p.json(&["monitor", "approve", &id]);
        assert_ne!(code, 0, "{name}: the owner approved it: {v}");
        p.run_as("poller", &["monitor", "poll"]);
        assert!(!p.root().join("pwned").exists(), "{name}: it ran");
        // What the owner reads never holds it raw (a newline or a tab is the output's own).
        let r = p.run(&["monitor", "list"]);
        let raw = r.stdout.contains(*c) || r.stderr.contains(*c);
        assert!(!raw || c.is_ascii_whitespace(), "{name}: shown raw: {r:?}");
    }
}

#[test]
fn a_hook_written_by_hand_with_a_hidden_character_is_not_adopted_and_never_runs() {
    for (name, c) in HIDDEN {
        let p = Project::new("hidden-hook");
        let cfg = p.lx("loopx.toml");
        let mut text = std::fs::read_to_string(&cfg).unwrap();
        let esc = format!("\\U{:08X}", *c as u32);
        text.push_str(&format!(
            "\n[hooks]\n\"gate.opened\" = \"echo ok{esc}#;touch pwned\"\n"
        ));
        std::fs::write(&cfg, text).unwrap();
        let (code, v) = p.json(&["owner", "seal", "--adopt"]);
        assert_eq!(code, 6, "{name}: adopted: {v}");
        let hex = format!("U+{:04X}", *c as u32);
        assert!(v.to_string().contains(&hex), "{name}: not named: {v}");
        p.run_as("agent-a", &["gate", "open", "ship?"]);
        // Hooks run detached: give one the time to start, had it been sealed.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!p.root().join("pwned").exists(), "{name}: it ran");
    }
}
