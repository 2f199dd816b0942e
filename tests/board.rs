//! The board without a terminal: key handling, app state, loads, and insta snapshots of every pane
//! and of whole screens (fixed clock, fixed data).

use std::path::Path;

mod common;

use loopx::board::app::{
    App, AppEvent, Confirm, Effect, Help, InputFor, Mode, Pane, PickFor, Picker, TextInput,
};
use loopx::board::data::{Delta, DoneItem};
use loopx::board::derive::Column;
use loopx::board::draw::{self, Scene};
use loopx::board::keymap::{self, Intent, KEYMAP, Scope};
use loopx::board::panes;
use loopx::board::theme::{Role, Theme, role_name};
use loopx::flows::owner::{Owner, OwnerAct};
use loopx::kernel::{
    Code, Event, Evidence, Gate, Priority, Problem, QuotaFile, Snapshot, Todo, Ts,
};
use loopx::store::live::Target;
use loopx::store::watch::classify;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use ratatui::layout::Rect;

// ---------------------------------------------------------------- fixture

const NOW: &str = "2026-11-30T12:00:00.000Z";

fn now() -> Ts {
    NOW.parse().unwrap()
}

fn at(mins_from_now: i64) -> String {
    Ts(now().0 + mins_from_now * 60_000).to_string()
}

fn todo(toml_body: &str) -> Todo {
    toml::from_str(toml_body).unwrap()
}

fn gate(toml_body: &str, proven: bool) -> Gate {
    let mut g: Gate = toml::from_str(toml_body).unwrap();
    g.signed = proven;
    g
}

/// Which variant of the fixture.
#[derive(Clone, Copy, PartialEq)]
enum Variant {
    /// Live leases, no pending gate.
    Normal,
    /// Two pending gates (one with options) and a decided one with an unproven decision.
    Gates,
    /// A lease that expired two minutes ago.
    Expired,
}

fn snapshot(v: Variant) -> Snapshot {
    let config: loopx::kernel::Config = toml::from_str(&format!(
        r#"
schema_version = 1
[goal]
id = "goal-1"
objective = "Ship v1 of wx, a weather CLI: fast, cached, documented"
success_criteria = ["wx today answers in under 300 ms", "works offline from cache"]
status = "active"
created_at = "{}"
updated_at = "{}"
[quota]
slots = 60
window = "1h"
[agents.agent-a]
[agents.agent-b]
[agents.agent-c]
"#,
        at(-180),
        at(-180)
    ))
    .unwrap();
    let mut todos = vec![
        todo(&format!(
            r#"id = "t-aaaaa1"
title = "Parse the forecast API response"
priority = "P1"
status = "open"
created_by = "owner"
created_at = "{0}"
updated_at = "{0}""#,
            at(-170)
        )),
        todo(&format!(
            r#"id = "t-aaaaa2"
title = "Add --units metric|imperial"
status = "open"
created_by = "owner"
created_at = "{0}"
updated_at = "{0}""#,
            at(-160)
        )),
        todo(&format!(
            r#"id = "t-bbbbb1"
title = "Handle API rate limits with backoff"
priority = "P0"
status = "open"
created_by = "owner"
created_at = "{0}"
updated_at = "{0}"
fence = 3
[lease]
holder = "agent-a"
fence = 3
acquired_at = "{1}"
expires_at = "{2}""#,
            at(-150),
            at(-20),
            Ts(now().0 + 12 * 60_000 + 34_000)
        )),
        todo(&format!(
            r#"id = "t-bbbbb2"
title = "Render a 5-day table"
priority = "P1"
status = "open"
created_by = "owner"
created_at = "{0}"
updated_at = "{0}"
fence = 1
[lease]
holder = "agent-b"
fence = 1
acquired_at = "{1}"
expires_at = "{2}""#,
            at(-140),
            at(-30),
            if v == Variant::Expired {
                at(-2)
            } else {
                at(25)
            }
        )),
        todo(&format!(
            r#"id = "t-ccccc1"
title = "Cache responses on disk for 10 minutes"
status = "open"
created_by = "owner"
created_at = "{0}"
updated_at = "{0}""#,
            at(-130)
        )),
        todo(&format!(
            r#"id = "t-ccccc2"
title = "Package a static binary"
status = "open"
depends_on = ["t-aaaaa1"]
created_by = "owner"
created_at = "{0}"
updated_at = "{0}""#,
            at(-120)
        )),
        todo(&format!(
            r#"id = "t-ccccc3"
title = "Pick the app icon"
role = "user"
priority = "P3"
status = "open"
created_by = "owner"
created_at = "{0}"
updated_at = "{0}""#,
            at(-110)
        )),
        todo(&format!(
            r#"id = "t-ddddd1"
title = "Drop Windows support for v1"
status = "blocked"
reason = "owner: keep Windows"
created_by = "agent-c"
created_at = "{0}"
updated_at = "{0}""#,
            at(-100)
        )),
    ];
    let mut gates = vec![gate(
        &format!(
            r#"id = "g-done01"
question = "Publish the docs site?"
opened_by = "agent-a"
opened_at = "{0}"
status = "approved"
decided_by = "owner"
decided_at = "{1}""#,
            at(-90),
            at(-60)
        ),
        true,
    )];
    if v == Variant::Gates {
        gates.push(gate(
            &format!(
                r#"id = "g-gate01"
question = "Use SQLite or plain files for the cache?"
options = ["sqlite", "files"]
blocks = ["t-ccccc1"]
opened_by = "agent-b"
opened_at = "{0}"
status = "pending""#,
                at(-7)
            ),
            true,
        ));
        gates.push(gate(
            &format!(
                r#"id = "g-gate02"
question = "May I add the reqwest dependency (+2.1 MB)?"
opened_by = "agent-a"
opened_at = "{0}"
status = "pending""#,
                at(-3)
            ),
            true,
        ));
        gates.push(gate(
            &format!(
                r#"id = "g-fake01"
question = "Delete the old cache format?"
opened_by = "agent-c"
opened_at = "{0}"
status = "approved"
decided_by = "owner"
decided_at = "{1}""#,
                at(-2),
                at(-1)
            ),
            false,
        ));
    }
    let mut quota = QuotaFile::default();
    for k in 0..24 {
        quota.spends.push(
            toml::from_str::<loopx::kernel::Spend>(&format!(
                "at = \"{}\"\nagent = \"agent-{}\"\nslots = {}",
                Ts(now().0 - 3_500_000 + k * 140_000 + (k * k % 7) * 9_000),
                ["a", "b", "c"][k as usize % 3],
                1 + (k % 3) as u32
            ))
            .unwrap(),
        );
    }
    todos.sort_by(|a, b| a.id.cmp(&b.id));
    Snapshot {
        config,
        todos: todos.into_iter().map(|t| (t.id.clone(), t)).collect(),
        gates: gates.into_iter().map(|g| (g.id.clone(), g)).collect(),
        quota,
        archived: Default::default(),
        quarantined: Default::default(),
        owner_notes: Vec::new(),
        seal: None,
        unsealed: false,
        agents: Default::default(),
        reserve_budget: Default::default(),
    }
}

fn journal() -> Vec<Event> {
    let rows = [
        (
            -30,
            "agent-b",
            "todo.claim",
            "t-bbbbb2",
            serde_json::json!({"fence": 1}),
        ),
        (
            -20,
            "agent-a",
            "todo.claim",
            "t-bbbbb1",
            serde_json::json!({"fence": 3}),
        ),
        (
            -7,
            "agent-b",
            "gate.open",
            "g-gate01",
            serde_json::json!({"question": "Use SQLite or plain files for the cache?"}),
        ),
        (
            -6,
            "agent-a",
            "todo.update",
            "t-bbbbb1",
            serde_json::json!({"evidence": 1}),
        ),
        (
            -5,
            "agent-a",
            "todo.done",
            "t-eeeee1",
            serde_json::json!({"reason": "done and tested"}),
        ),
        (
            -4,
            "agent-c",
            "quota.spend",
            "quota",
            serde_json::json!({"slots": 1}),
        ),
        (
            -3,
            "agent-a",
            "gate.open",
            "g-gate02",
            serde_json::json!({"question": "May I add the reqwest dependency (+2.1 MB)?"}),
        ),
        (
            -2,
            "agent-a",
            "todo.update",
            "t-bbbbb1",
            serde_json::json!({"evidence": 1}),
        ),
        (
            -1,
            "owner",
            "todo.reassign",
            "t-aaaaa2",
            serde_json::json!({"to": "agent-c"}),
        ),
    ];
    common::journal_events(&rows, at)
}

fn evidence() -> Vec<Evidence> {
    let rows = [
        (-2, "note", "backoff doubles up to 60 s; tests pass (12/12)"),
        (-6, "command", "cargo test -p wx-client"),
        (-15, "note", "found 429 responses in the API docs"),
    ];
    rows.iter()
        .map(|(m, kind, s)| {
            serde_json::from_value(serde_json::json!({
                "at": at(*m), "agent": "agent-a", "fence": 3, "kind": kind, "summary": s
            }))
            .unwrap()
        })
        .collect()
}

fn done() -> Vec<DoneItem> {
    vec![DoneItem {
        id: "t-eeeee1".into(),
        title: "Write the README quick start".into(),
        status: loopx::kernel::Status::Done,
        at: Ts(now().0 - 5 * 60_000),
        by: "agent-a".into(),
        check: Some((
            loopx::kernel::proof::Tier::Checked {
                commit: Some("0a1b2c3d4e5f60718293a4b5c6d7e8f901234567".into()),
            },
            false,
        )),
    }]
}

fn app_with(v: Variant, theme: Theme) -> App {
    app_of(snapshot(v), theme)
}

/// The board over `snap`, with the fixture's journal, done list and evidence.
fn app_of(snap: Snapshot, theme: Theme) -> App {
    let mut app = App::new("~/src/wx", theme, false, now());
    app.size = (120, 40);
    app.owner = owner_here();
    let fx = app.on_event(AppEvent::Loaded(Delta {
        full: Some(snap),
        journal: Some(journal()),
        done: Some(done()),
        at: now(),
        ..Delta::default()
    }));
    for f in fx {
        if let Effect::LoadEvidence(id) = f {
            let list = if id == "t-bbbbb1" {
                evidence()
            } else {
                Vec::new()
            };
            app.on_event(AppEvent::Evidence(id, Ok(list)));
        }
    }
    app
}

/// Owner authority as the board shows it when the owner's key is here.
fn owner_here() -> Owner {
    Owner {
        actor: "owner".into(),
        verified: true,
        note: "owner ✓ SHA256:0123456789abcdef".into(),
    }
}

fn app(v: Variant) -> App {
    app_with(v, Theme::dark())
}

/// Focuses the todos pane on the Claimed column (the rate-limit todo, which has evidence).
fn on_claimed(app: &mut App) {
    press(app, KeyCode::Tab);
    for f in press(app, KeyCode::Right) {
        if let Effect::LoadEvidence(id) = f {
            let list = if id == "t-bbbbb1" {
                evidence()
            } else {
                Vec::new()
            };
            app.on_event(AppEvent::Evidence(id, Ok(list)));
        }
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn press(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.on_key(key(code))
}

fn typ(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

// ---------------------------------------------------------------- snapshots

fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s
}

fn screen(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut a = app.clone();
    a.size = (w, h);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw::frame(f, &a.scene())).unwrap();
    t
}

fn pane(w: u16, h: u16, draw: impl FnOnce(&mut ratatui::Frame, Rect)) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| {
        let a = f.area();
        draw(f, a)
    })
    .unwrap();
    t
}

macro_rules! snap {
    ($name:expr, $value:expr) => {
        settings().bind(|| insta::assert_snapshot!($name, $value.backend()))
    };
}

#[test]
fn screens_normal() {
    let a = app(Variant::Normal);
    snap!("screen_normal_80x24", screen(&a, 80, 24));
    snap!("screen_normal_120x40", screen(&a, 120, 40));
}

#[test]
fn screens_reservation() {
    // agent-a's lease reserves two globs; agent-b's reserves none.
    let mut s = snapshot(Variant::Normal);
    let t = s.todos.get_mut("t-bbbbb1").unwrap();
    t.lease.as_mut().unwrap().paths = vec!["src/api/**".into(), "tests/api.rs".into()];
    let mut a = app_of(s, Theme::dark());
    snap!("screen_reservation_120x40", screen(&a, 120, 40));
    on_claimed(&mut a);
    press(&mut a, KeyCode::Enter);
    snap!("screen_reservation_detail_120x40", screen(&a, 120, 40));
}

#[test]
fn screens_pending_gates() {
    let a = app(Variant::Gates);
    snap!("screen_gates_80x24", screen(&a, 80, 24));
    snap!("screen_gates_120x40", screen(&a, 120, 40));
}

#[test]
fn screens_expired_lease() {
    let mut a = app(Variant::Expired);
    on_claimed(&mut a);
    snap!("screen_expired_80x24", screen(&a, 80, 24));
    snap!("screen_expired_120x40", screen(&a, 120, 40));
}

fn problem(file: &str, line: usize, message: &str) -> Problem {
    Problem {
        file: file.into(),
        line: Some(line),
        message: message.into(),
        code: Code::InvalidState,
        hint: None,
    }
}

/// A board whose last load quarantined a malformed todo file (the store leaves it out of the
/// working set and names it) and found a file that disagrees with the owner's seal.
fn with_bad_file() -> App {
    let mut a = app(Variant::Normal);
    let mut s = snapshot(Variant::Normal);
    s.todos.remove("t-aaaaa1");
    s.quarantined.insert(
        "t-aaaaa1".into(),
        problem(
            ".loopx/todos/t-aaaaa1.toml",
            4,
            "invalid string: expected `\"`, found newline",
        ),
    );
    s.owner_notes.push(
        "loopx.toml says the goal is paused, the owner's seal says active: acting on the seal"
            .into(),
    );
    a.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        at: Ts(now().0 + 5_000),
        ..Delta::default()
    }));
    a
}

#[test]
fn screens_parse_error_banner() {
    let a = with_bad_file();
    // The quarantined todo leaves the board; the others stay.
    let snap = a.snap.as_ref().unwrap();
    assert!(!snap.todos.contains_key("t-aaaaa1"));
    assert!(snap.todos.contains_key("t-aaaaa2"));
    snap!("screen_banner_80x24", screen(&a, 80, 24));
    snap!("screen_banner_120x40", screen(&a, 120, 40));
    let text = screen(&a, 120, 40).backend().to_string();
    assert!(
        text.contains(
            "t-aaaaa1 QUARANTINED, the other todos still run: .loopx/todos/t-aaaaa1.toml:4: invalid"
        ),
        "{text}"
    );
    assert!(text.contains("owner's seal: loopx.toml says"), "{text}");
}

#[test]
fn screens_help_overlay() {
    let mut a = app(Variant::Normal);
    press(&mut a, KeyCode::Char('?'));
    assert_eq!(a.mode, Mode::Help(Help { scroll: 0 }));
    snap!("screen_help_80x24", screen(&a, 80, 24));
    snap!("screen_help_120x40", screen(&a, 120, 40));
}

#[test]
fn screens_confirm_dialog() {
    let mut a = app(Variant::Gates);
    press(&mut a, KeyCode::Char('a'));
    press(&mut a, KeyCode::Enter);
    assert!(matches!(
        a.mode,
        Mode::Confirm(Confirm {
            act: OwnerAct::Approve { .. },
            ..
        })
    ));
    snap!("screen_confirm_80x24", screen(&a, 80, 24));
    snap!("screen_confirm_120x40", screen(&a, 120, 40));
}

#[test]
fn screens_no_color() {
    // Under NO_COLOR no cell carries a color; state reads from symbols, bold and reversed text.
    let mut a = app_with(Variant::Gates, Theme::dark().without_color());
    on_claimed(&mut a);
    let t = screen(&a, 80, 24);
    for cell in t.backend().buffer().content() {
        assert_eq!(cell.fg, ratatui::style::Color::Reset);
        assert_eq!(cell.bg, ratatui::style::Color::Reset);
    }
    snap!("screen_no_color_80x24", t);
    let t = screen(&a, 120, 40);
    settings().bind(|| {
        insta::assert_debug_snapshot!("screen_no_color_120x40_styles", t.backend().buffer())
    });
}

#[test]
fn screens_narrow_fallback() {
    let a = app(Variant::Gates);
    snap!("screen_narrow_60x20", screen(&a, 60, 20));
}

#[test]
fn panes_each() {
    let mut a = app(Variant::Gates);
    let vm = a.scene();
    snap!(
        "pane_objective",
        pane(120, 3, |f, r| panes::objective::draw(f, r, &vm, false))
    );
    snap!(
        "pane_gates",
        pane(110, 7, |f, r| panes::gates::draw(f, r, &vm))
    );
    snap!(
        "pane_quota",
        pane(30, 8, |f, r| panes::quota::draw(f, r, &vm))
    );
    snap!(
        "pane_activity",
        pane(60, 11, |f, r| panes::activity::draw(f, r, &vm))
    );
    snap!(
        "pane_status",
        pane(120, 1, |f, r| panes::status::status(f, r, &vm))
    );
    snap!(
        "pane_hints",
        pane(120, 1, |f, r| panes::status::hints(f, r, &vm))
    );
    drop(vm);
    on_claimed(&mut a);
    let vm = a.scene();
    snap!(
        "pane_todos",
        pane(110, 14, |f, r| panes::todos::draw(f, r, &vm))
    );
    snap!(
        "pane_evidence",
        pane(60, 6, |f, r| panes::evidence::draw(f, r, &vm))
    );
}

#[test]
fn dialogs_each() {
    let mut a = app(Variant::Gates);
    press(&mut a, KeyCode::Char('x'));
    typ(&mut a, "keep it simple");
    snap!("dialog_reject_reason", screen(&a, 80, 24));
    let mut a = app(Variant::Gates);
    press(&mut a, KeyCode::Char('a'));
    snap!("dialog_option_picker", screen(&a, 80, 24));
    let mut a = app(Variant::Normal);
    on_claimed(&mut a);
    press(&mut a, KeyCode::Enter);
    snap!("dialog_todo_detail", screen(&a, 120, 40));
    let mut a = app(Variant::Gates);
    press(&mut a, KeyCode::Enter);
    snap!("dialog_gate_detail", screen(&a, 80, 24));
}

// ---------------------------------------------------------------- keys and state

#[test]
fn tab_cycles_focus_both_ways() {
    let mut a = app(Variant::Normal);
    assert_eq!(a.focus, Pane::Gates);
    for want in [Pane::Todos, Pane::Evidence, Pane::Activity, Pane::Gates] {
        press(&mut a, KeyCode::Tab);
        assert_eq!(a.focus, want);
    }
    press(&mut a, KeyCode::BackTab);
    assert_eq!(a.focus, Pane::Activity);
}

#[test]
fn only_presses_count() {
    let mut a = app(Variant::Normal);
    let mut k = key(KeyCode::Tab);
    k.kind = KeyEventKind::Release;
    a.on_key(k);
    assert_eq!(a.focus, Pane::Gates);
}

#[test]
fn approve_with_options_picks_then_confirms() {
    let mut a = app(Variant::Gates);
    assert_eq!(
        a.selected_gate().as_deref(),
        Some("g-gate01"),
        "pending gates come first, oldest first"
    );
    press(&mut a, KeyCode::Char('a'));
    assert!(
        matches!(&a.mode, Mode::Picker(Picker { purpose: PickFor::GateOption(g), .. }) if g == "g-gate01")
    );
    press(&mut a, KeyCode::Down);
    press(&mut a, KeyCode::Enter);
    let want = OwnerAct::Approve {
        gate: "g-gate01".into(),
        option: Some("files".into()),
        reason: None,
        sha: None,
    };
    assert_eq!(a.mode, Mode::Confirm(Confirm::new(want.clone())));
    assert_eq!(
        press(&mut a, KeyCode::Char('y')),
        vec![Effect::Perform(want)]
    );
    assert_eq!(a.mode, Mode::Normal);
    a.on_event(AppEvent::ActDone(Ok("approved g-gate01".into())));
    assert_eq!(a.message.as_ref().map(|m| m.error), Some(false));
}

#[test]
fn approve_without_options_confirms_directly() {
    let mut a = app(Variant::Gates);
    press(&mut a, KeyCode::Char('j'));
    press(&mut a, KeyCode::Char('a'));
    assert_eq!(
        a.mode,
        Mode::Confirm(Confirm::new(OwnerAct::Approve {
            gate: "g-gate02".into(),
            option: None,
            reason: None,
            sha: None,
        }))
    );
    assert!(press(&mut a, KeyCode::Char('n')).is_empty());
    assert_eq!(a.mode, Mode::Normal);
}

#[test]
fn reject_asks_a_reason_and_needs_one() {
    let mut a = app(Variant::Gates);
    press(&mut a, KeyCode::Char('x'));
    assert!(matches!(
        &a.mode,
        Mode::Input(TextInput {
            purpose: InputFor::RejectReason(_),
            ..
        })
    ));
    press(&mut a, KeyCode::Enter);
    assert!(
        matches!(&a.mode, Mode::Input(_)),
        "an empty reason is refused"
    );
    typ(&mut a, "use sqlx");
    press(&mut a, KeyCode::Backspace);
    typ(&mut a, "x");
    press(&mut a, KeyCode::Enter);
    let want = OwnerAct::Reject {
        gate: "g-gate01".into(),
        reason: "use sqlx".into(),
    };
    assert_eq!(a.mode, Mode::Confirm(Confirm::new(want.clone())));
    assert_eq!(press(&mut a, KeyCode::Enter), vec![Effect::Perform(want)]);
}

#[test]
fn deciding_a_decided_gate_says_so() {
    let mut a = app(Variant::Normal);
    press(&mut a, KeyCode::Char('a'));
    assert_eq!(a.mode, Mode::Normal);
    assert!(
        a.message
            .as_ref()
            .is_some_and(|m| m.error && m.text.contains("approved already"))
    );
}

#[test]
fn action_errors_show_in_the_status_bar() {
    let mut a = app(Variant::Gates);
    a.on_event(AppEvent::ActDone(Err(
        "gate g-gate01 was approved by owner at ...".into(),
    )));
    let m = a.message.clone().unwrap();
    assert!(m.error && m.text.contains("already") || m.text.contains("approved by owner"));
}

#[test]
fn readonly_refuses_changes() {
    let mut a = app(Variant::Gates);
    a.readonly = true;
    for c in ['a', 'x', 'p', 'n'] {
        assert!(press(&mut a, KeyCode::Char(c)).is_empty());
        assert_eq!(a.mode, Mode::Normal);
    }
    assert!(
        a.message
            .as_ref()
            .is_some_and(|m| m.text.contains("read-only"))
    );
    let hints = keymap::hints(&a.scopes(), true, true);
    assert!(!hints.iter().any(|(_, h, _)| *h == "approve"));
}

#[test]
fn reassign_picks_a_known_agent_other_than_the_holder() {
    let mut a = app(Variant::Normal);
    on_claimed(&mut a);
    assert_eq!(a.todos.col, Column::Claimed);
    assert_eq!(
        a.selected_todo().as_deref(),
        Some("t-bbbbb1"),
        "soonest expiry first"
    );
    press(&mut a, KeyCode::Char('r'));
    let Mode::Picker(Picker { choices, .. }) = &a.mode else {
        panic!("{:?}", a.mode)
    };
    assert_eq!(choices, &vec!["agent-b".to_string(), "agent-c".to_string()]);
    press(&mut a, KeyCode::Up);
    press(&mut a, KeyCode::Enter);
    assert_eq!(
        a.mode,
        Mode::Confirm(Confirm::new(OwnerAct::Reassign {
            todo: "t-bbbbb1".into(),
            to: "agent-c".into()
        }))
    );
}

#[test]
fn release_names_the_holder() {
    let mut a = app(Variant::Normal);
    on_claimed(&mut a);
    press(&mut a, KeyCode::Char('u'));
    let Mode::Confirm(Confirm { act, .. }) = &a.mode else {
        panic!()
    };
    assert_eq!(
        act,
        &OwnerAct::Release {
            todo: "t-bbbbb1".into(),
            holder: "agent-a".into()
        }
    );
    assert!(act.describe().contains("agent-a") && act.describe().contains("t-bbbbb1"));
}

#[test]
fn pause_and_add_todo() {
    let mut a = app(Variant::Normal);
    press(&mut a, KeyCode::Char('p'));
    assert_eq!(a.mode, Mode::Confirm(Confirm::new(OwnerAct::Pause)));
    press(&mut a, KeyCode::Esc);
    press(&mut a, KeyCode::Char('n'));
    typ(&mut a, "P1 fix the flaky test");
    press(&mut a, KeyCode::Enter);
    assert_eq!(
        a.mode,
        Mode::Confirm(Confirm::new(OwnerAct::AddTodo {
            title: "fix the flaky test".into(),
            priority: Priority::P1
        }))
    );
}

#[test]
fn filter_narrows_and_esc_clears() {
    let mut a = app(Variant::Gates);
    let total: usize = a.columns.cols.iter().map(Vec::len).sum();
    press(&mut a, KeyCode::Char('/'));
    typ(&mut a, "cache");
    assert_eq!(a.filter, "cache");
    let shown: usize = a.columns.cols.iter().map(Vec::len).sum();
    assert_eq!(shown, 1);
    assert!(total > shown);
    assert_eq!(
        a.gates.ids,
        vec!["g-gate01".to_string(), "g-fake01".to_string()]
    );
    press(&mut a, KeyCode::Enter);
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(a.filter, "cache");
    press(&mut a, KeyCode::Esc);
    assert!(a.filter.is_empty());
}

#[test]
fn quit_keys() {
    let mut a = app(Variant::Normal);
    assert_eq!(press(&mut a, KeyCode::Char('q')), vec![Effect::Quit]);
    let mut a = app(Variant::Gates);
    press(&mut a, KeyCode::Char('x'));
    // In a text input q is text, but Ctrl-C still quits.
    press(&mut a, KeyCode::Char('q'));
    assert!(matches!(&a.mode, Mode::Input(TextInput { text, .. }) if text == "q"));
    let fx = a.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
    assert_eq!(fx, vec![Effect::Quit]);
    let fx = a.on_key(KeyEvent::new(KeyCode::Char('z'), KeyModifiers::CONTROL));
    assert_eq!(fx, vec![Effect::Suspend]);
}

#[test]
fn columns_sort_todos_by_state() {
    let a = app(Variant::Gates);
    let ids = |c: Column| {
        a.columns.cols[c.index()]
            .iter()
            .map(|k| k.id.as_str())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(Column::Ready), vec!["t-aaaaa1", "t-aaaaa2"]);
    assert_eq!(ids(Column::Claimed), vec!["t-bbbbb1", "t-bbbbb2"]);
    assert_eq!(
        ids(Column::Waiting),
        vec!["t-ccccc1", "t-ccccc2", "t-ccccc3"]
    );
    assert_eq!(ids(Column::Blocked), vec!["t-ddddd1"]);
    assert_eq!(ids(Column::Done), vec!["t-eeeee1"]);
    // Without the pending gate the cache todo is ready.
    let b = app(Variant::Normal);
    assert!(b.columns.cols[0].iter().any(|k| k.id == "t-ccccc1"));
}

#[test]
fn countdown_ticks_and_expires() {
    let mut a = app(Variant::Normal);
    on_claimed(&mut a);
    let card = a.selected_card().unwrap().clone();
    assert_eq!(
        loopx::board::app::why_text(&card.why, a.now),
        "agent-a #3 12:34"
    );
    a.on_event(AppEvent::Tick(Ts(now().0 + 13 * 60_000)));
    assert!(card.expired(a.now));
    assert_eq!(
        loopx::board::app::why_text(&card.why, a.now),
        "agent-a #3 EXPIRED 0:26"
    );
}

#[test]
fn failed_load_keeps_last_good_state_then_clears() {
    let mut a = app(Variant::Normal);
    // A malformed loopx.toml fails the whole load: the last good state stays, with the error.
    a.on_event(AppEvent::Loaded(Delta {
        problems: vec![problem(".loopx/loopx.toml", 3, "expected `=`")],
        at: now(),
        ..Delta::default()
    }));
    assert_eq!(a.problems.len(), 1);
    assert_eq!(
        a.snap.as_ref().unwrap().todos["t-aaaaa1"].title,
        "Parse the forecast API response"
    );
    let text = screen(&a, 120, 40).backend().to_string();
    assert!(
        text.contains(
            "AGENTS REFUSED: .loopx/loopx.toml:3 does not load, so every command fails until it is fixed: expected `=`"
        ),
        "{text}"
    );
    // The next good load replaces the state and clears the banner.
    let mut s = snapshot(Variant::Normal);
    s.todos.get_mut("t-aaaaa1").unwrap().title = "Parse the forecast (fixed)".into();
    a.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        at: now(),
        ..Delta::default()
    }));
    assert!(a.problems.is_empty());
    assert_eq!(
        a.snap.as_ref().unwrap().todos["t-aaaaa1"].title,
        "Parse the forecast (fixed)"
    );
    assert!(a.layout_input().banner == 0);
}

#[test]
fn a_new_state_replaces_the_old() {
    let mut a = app(Variant::Normal);
    let mut s = snapshot(Variant::Normal);
    s.todos.remove("t-aaaaa1");
    let fx = a.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        at: now(),
        ..Delta::default()
    }));
    assert!(fx.is_empty() || fx.iter().all(|f| matches!(f, Effect::LoadEvidence(_))));
    assert!(!a.snap.as_ref().unwrap().todos.contains_key("t-aaaaa1"));
    assert!(!a.columns.cols[0].iter().any(|k| k.id == "t-aaaaa1"));
}

#[test]
fn banner_rows_fit_and_count_the_rest() {
    let mut a = with_bad_file();
    assert_eq!(a.layout_input().banner, 2);
    let mut s = a.snap.clone().unwrap();
    for n in 0..3 {
        s.owner_notes.push(format!("note {n}"));
    }
    a.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        at: now(),
        ..Delta::default()
    }));
    assert_eq!(a.layout_input().banner, 3);
    let text = screen(&a, 120, 40).backend().to_string();
    assert!(
        text.contains("(+3 more; `loopx doctor` lists them)"),
        "{text}"
    );
    // One row when narrow.
    let narrow = screen(&a, 60, 20).backend().to_string();
    assert!(narrow.contains("(+5 more"), "{narrow}");
}

#[test]
fn mouse_click_focuses_and_selects() {
    let mut a = app(Variant::Normal);
    a.size = (120, 40);
    let areas = loopx::board::layout::areas(Rect::new(0, 0, 120, 40), &a.layout_input());
    let c = areas.todo_cols[1];
    // The second card of Claimed: header line, then `card_lines` lines a card.
    let row = c.y + 1 + areas.card_lines as u16;
    a.on_event(AppEvent::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: c.x + 2,
        row,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(a.focus, Pane::Todos);
    assert_eq!(a.todos.col, Column::Claimed);
    assert_eq!(a.selected_todo().as_deref(), Some("t-bbbbb2"));
    a.on_event(AppEvent::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollUp,
        column: c.x + 2,
        row,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(a.selected_todo().as_deref(), Some("t-bbbbb1"));
}

#[test]
fn help_is_generated_from_the_keymap() {
    let lines = keymap::help_lines(false);
    for b in KEYMAP {
        let label = keymap::label(&b.keys[0]);
        assert!(
            lines.iter().any(
                |(k, h)| k.as_deref().is_some_and(|k| k.contains(&label)) && h.contains(b.help)
            ),
            "{label} missing from help"
        );
    }
    // Every action the board handles has a key.
    for act in [
        Intent::Approve,
        Intent::Reject,
        Intent::Reassign,
        Intent::Release,
        Intent::TogglePause,
    ] {
        assert!(KEYMAP.iter().any(|b| b.intent == act && b.changes));
    }
    assert!(
        keymap::lookup(&[Scope::Gates], &key(KeyCode::Char('a')), false) == Some(Intent::Approve)
    );
}

#[test]
fn themes_name_every_role() {
    for (name, text) in loopx::board::theme::BUILTIN {
        let t = Theme::from_toml(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&t.name, name);
        for r in Role::ALL {
            assert!(
                text.contains(&format!("\n{} ", role_name(*r))),
                "{name} lacks {}",
                role_name(*r)
            );
        }
    }
    let err = Theme::from_toml("[colors]\nfg = \"red\"\n").unwrap_err();
    assert!(err.contains("border_focus"), "{err}");
    assert!(
        Theme::from_toml("[colors]\nfg = \"nope\"\n")
            .unwrap_err()
            .contains("not a color")
    );
    assert!(Theme::load("no-such-theme").is_err());
    let plain = Theme::dark().without_color();
    assert!(
        plain
            .selected()
            .add_modifier
            .contains(ratatui::style::Modifier::REVERSED)
    );
}

#[test]
fn watcher_ignores_access_events_and_temp_files() {
    use loopx::store::watch::relevant;
    use notify::event::{AccessKind, CreateKind, EventKind, ModifyKind};
    let dir = Path::new("/p/.loopx");
    let todo = dir.join("todos/t-aaaaa1.toml");
    let tmp = dir.join("todos/.t-aaaaa1.toml.tmp-123-abcd");
    assert!(
        relevant(
            dir,
            &EventKind::Access(AccessKind::Any),
            std::slice::from_ref(&todo)
        )
        .is_empty()
    );
    assert!(
        relevant(
            dir,
            &EventKind::Create(CreateKind::File),
            std::slice::from_ref(&tmp)
        )
        .is_empty()
    );
    assert!(
        relevant(
            dir,
            &EventKind::Modify(ModifyKind::Any),
            &[dir.join("lock")]
        )
        .is_empty()
    );
    assert_eq!(
        relevant(
            dir,
            &EventKind::Modify(ModifyKind::Any),
            std::slice::from_ref(&todo)
        ),
        vec![todo.clone()]
    );
    assert_eq!(classify(dir, &todo), Target::Todo("t-aaaaa1".into()));
    assert_eq!(
        classify(dir, &dir.join("evidence/t-x.jsonl")),
        Target::Evidence("t-x".into())
    );
    assert_eq!(classify(dir, &dir.join("journal.jsonl")), Target::Journal);
    assert_eq!(classify(dir, &dir.join("STATE.md")), Target::Ignore);
    assert_eq!(classify(dir, &dir.join("todos")), Target::Everything);
}

#[test]
fn poller_sees_changes() {
    let d = std::env::temp_dir().join(format!("loopx-board-poll-{}", std::process::id()));
    let dir = d.join(".loopx");
    std::fs::create_dir_all(dir.join("todos")).unwrap();
    std::fs::write(dir.join("journal.jsonl"), "").unwrap();
    let mut p = loopx::store::watch::Poller::new(&dir);
    assert!(p.scan().is_empty());
    std::fs::write(dir.join("todos/t-aaaaa1.toml"), "x").unwrap();
    std::fs::write(dir.join("todos/.t-aaaaa1.toml.tmp-1-2"), "x").unwrap();
    assert_eq!(p.scan(), vec![dir.join("todos/t-aaaaa1.toml")]);
    std::fs::remove_file(dir.join("todos/t-aaaaa1.toml")).unwrap();
    assert_eq!(p.scan(), vec![dir.join("todos/t-aaaaa1.toml")]);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn view_model_is_a_pure_function_of_state() {
    let a = app(Variant::Gates);
    let vm: Scene = a.scene();
    assert_eq!(vm.gates.len(), 4);
    assert_eq!(vm.now, now());
    let one = screen(&a, 100, 30);
    let two = screen(&a, 100, 30);
    assert_eq!(one.backend().buffer(), two.backend().buffer());
}

#[test]
fn any_terminal_size_draws() {
    let mut a = app(Variant::Gates);
    for (w, h) in [
        (1u16, 1u16),
        (10, 3),
        (20, 5),
        (40, 12),
        (79, 23),
        (80, 19),
        (300, 100),
    ] {
        screen(&a, w, h);
        press(&mut a, KeyCode::Char('?'));
        screen(&a, w, h);
        press(&mut a, KeyCode::Esc);
        press(&mut a, KeyCode::Char('x'));
        screen(&a, w, h);
        press(&mut a, KeyCode::Esc);
    }
}

#[test]
fn without_owner_authority_owner_actions_are_disabled_with_the_reason() {
    let mut a = app(Variant::Gates);
    a.owner = Owner::unverified();
    let hints = keymap::hints(&a.scopes(), false, a.owner.verified);
    let approve = hints
        .iter()
        .find(|(_, h, _)| *h == "approve")
        .expect("approve is listed");
    assert!(!approve.2, "approve is shown disabled");
    assert!(hints.iter().any(|(_, h, on)| *h == "quit" && *on));
    let fx = press(&mut a, KeyCode::Char('a'));
    assert!(fx.is_empty());
    assert_eq!(a.mode, Mode::Normal, "no confirm dialog without the key");
    let m = a.message.as_ref().expect("a message says why");
    assert!(m.error && m.text.contains("only the owner"), "{}", m.text);
    // Adding a todo is an owner action too: the board writes it as `owner`, so it is signed.
    press(&mut a, KeyCode::Char('n'));
    assert_eq!(a.mode, Mode::Normal, "no title prompt without the key");
}

#[test]
fn a_new_pending_gate_rings_the_bell_and_the_title_counts_them() {
    let mut a = App::new("~/src/wx", Theme::dark(), false, now());
    let load = |a: &mut App, v: Variant| {
        a.on_event(AppEvent::Loaded(Delta {
            full: Some(snapshot(v)),
            at: now(),
            ..Delta::default()
        }))
        .into_iter()
        .filter(|f| matches!(f, Effect::Bell | Effect::Title(_)))
        .collect::<Vec<_>>()
    };
    // The first load sets the title and never rings: those gates were there already.
    assert_eq!(
        load(&mut a, Variant::Normal),
        [Effect::Title("loopx".into())]
    );
    let pending = snapshot(Variant::Gates)
        .gates
        .values()
        .filter(|g| g.effective_status() == loopx::kernel::GateStatus::Pending)
        .count();
    assert!(pending >= 2);
    assert_eq!(
        load(&mut a, Variant::Gates),
        [
            Effect::Bell,
            Effect::Title(format!("loopx · {pending} gates"))
        ]
    );
    // The same gates again: nothing new, nothing said.
    assert!(load(&mut a, Variant::Gates).is_empty());
    // Gates decided: the title follows, no bell.
    assert_eq!(
        load(&mut a, Variant::Normal),
        [Effect::Title("loopx".into())]
    );
    assert_eq!(loopx::board::notify::title(1), "loopx · 1 gate");
}

#[test]
fn the_quota_view_names_a_spent_token_budget() {
    let mut s = snapshot(Variant::Gates);
    let q = loopx::board::derive::quota_now(&s, now(), 20);
    assert!(!q.throttled && q.spent.is_none());
    s.config.quota.tokens = Some(10);
    for sp in &mut s.quota.spends {
        sp.tokens = Some(1);
    }
    let q = loopx::board::derive::quota_now(&s, now(), 20);
    assert!(q.throttled);
    assert_eq!(q.spent, Some("tokens"));
}

/// The screen's text, row by row.
fn text_of(t: &Terminal<TestBackend>) -> String {
    let b = t.backend().buffer();
    let w = b.area.width as usize;
    let cells: Vec<&str> = b.content().iter().map(|c| c.symbol()).collect();
    cells
        .chunks(w)
        .map(|r| r.concat())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_todos_detail_shows_who_may_take_it() {
    let mut a = app(Variant::Normal);
    if let Some(t) = a.snap.as_mut().and_then(|s| s.todos.get_mut("t-bbbbb1")) {
        t.requires = vec!["code.rust".into()];
        t.reviews = Some("t-aaaaa1".into());
        t.exclude_agents = vec!["agent-z".into()];
    }
    on_claimed(&mut a);
    press(&mut a, KeyCode::Enter);
    let text = text_of(&screen(&a, 120, 40));
    assert!(text.contains("requires  code.rust"), "{text}");
    assert!(text.contains("reviews  t-aaaaa1"), "{text}");
    assert!(text.contains("excluded  agent-z"), "{text}");
}
