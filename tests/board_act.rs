//! The board's actions and keys without a terminal (issue 11): gate triage, reasons and drafts,
//! the scrolling input, acting from the detail view, the reassign picker, copy, sort, times, and
//! the file errors; snapshots of the changed dialogs at 80x24 and 120x40.

use std::path::Path;

mod common;

use loopx::board::app::{
    App, AppEvent, Confirm, Effect, FileErrors, InputFor, Mode, Pane, PickFor, Picker, SortBy,
    TextInput,
};
use loopx::board::data::Delta;
use loopx::board::derive::Column;
use loopx::board::dialogs::input::window;
use loopx::board::draw;
use loopx::board::theme::Theme;
use loopx::flows::owner::{Owner, OwnerAct};
use loopx::kernel::{Code, Event, Gate, Problem, Snapshot, Todo, Ts};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

// ---------------------------------------------------------------- fixture

fn now() -> Ts {
    "2026-11-30T12:00:00.000Z".parse().unwrap()
}

fn at(mins: i64) -> String {
    Ts(now().0 + mins * 60_000).to_string()
}

fn todo(id: &str, title: &str, prio: &str, created: i64, lease: Option<(&str, i64)>) -> Todo {
    let mut text = format!(
        "id = \"{id}\"\ntitle = \"{title}\"\npriority = \"{prio}\"\nstatus = \"open\"\n\
         created_by = \"owner\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n",
        at(created)
    );
    if let Some((holder, mins)) = lease {
        text.push_str(&format!(
            "fence = 2\n[lease]\nholder = \"{holder}\"\nfence = 2\nacquired_at = \"{}\"\n\
             expires_at = \"{}\"\n",
            at(-20),
            at(mins)
        ));
    }
    toml::from_str(&text).unwrap()
}

fn gate(id: &str, question: &str, opened: i64, extra: &str) -> Gate {
    let mut g: Gate = toml::from_str(&format!(
        "id = \"{id}\"\nquestion = \"{question}\"\nopened_by = \"agent-b\"\nopened_at = \"{}\"\n{extra}",
        at(opened)
    ))
    .unwrap();
    g.signed = true;
    g
}

/// Three pending gates (the first with options), a decided one; two claimed todos; agents that
/// are working (agent-a, agent-z), idle (agent-b), stale (agent-old) and never seen (agent-never).
fn snapshot() -> Snapshot {
    let config: loopx::kernel::Config = toml::from_str(&format!(
        "schema_version = 1\n[goal]\nid = \"goal-1\"\nobjective = \"Ship wx\"\nstatus = \"active\"\n\
         created_at = \"{0}\"\nupdated_at = \"{0}\"\n[agents.agent-a]\n[agents.agent-b]\n\
         [agents.agent-never]\n",
        at(-300)
    ))
    .unwrap();
    let mut s = Snapshot::new(config);
    for t in [
        todo("t-aaaaa1", "Parse the forecast", "P1", -100, None),
        todo(
            "t-aaaaa2",
            "Handle rate limits",
            "P1",
            -90,
            Some(("agent-a", 10)),
        ),
        todo("t-aaaaa3", "Fix the crash", "P0", -50, None),
        todo(
            "t-aaaaa5",
            "Render the table",
            "P2",
            -80,
            Some(("agent-z", 5)),
        ),
    ] {
        s.todos.insert(t.id.clone(), t);
    }
    for g in [
        gate(
            "g-gate01",
            "Use SQLite or plain files for the cache?",
            -9,
            "options = [\"sqlite\", \"files\"]\nstatus = \"pending\"",
        ),
        gate("g-gate02", "May I add reqwest?", -6, "status = \"pending\""),
        gate("g-gate03", "Ship on Friday?", -3, "status = \"pending\""),
        gate(
            "g-done01",
            "Publish the docs?",
            -90,
            &format!(
                "status = \"approved\"\ndecided_by = \"owner\"\ndecided_at = \"{}\"",
                at(-60)
            ),
        ),
    ] {
        s.gates.insert(g.id.clone(), g);
    }
    s
}

fn journal() -> Vec<Event> {
    let reclaim = serde_json::json!({"fence": 2, "reclaimed_from":
        {"holder": "agent-old", "fence": 1, "expired_at": at(-40)}});
    let rows = [
        (
            -60,
            "agent-old",
            "todo.claim",
            "t-old001",
            serde_json::json!({"fence": 1}),
        ),
        (-30, "agent-b", "todo.claim", "t-old001", reclaim),
        (
            -20,
            "agent-a",
            "todo.claim",
            "t-aaaaa2",
            serde_json::json!({"fence": 2}),
        ),
        (
            -15,
            "agent-z",
            "todo.claim",
            "t-aaaaa5",
            serde_json::json!({"fence": 2}),
        ),
        (
            -10,
            "agent-b",
            "todo.done",
            "t-old001",
            serde_json::json!({}),
        ),
        (-5, "owner", "goal.resume", "goal", serde_json::json!({})),
    ];
    common::journal_events(&rows, at)
}

fn load(app: &mut App, s: Snapshot) {
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        journal: Some(journal()),
        at: now(),
        ..Delta::default()
    }));
}

fn board() -> App {
    let mut app = App::new("~/src/wx", Theme::dark(), false, now());
    app.size = (120, 40);
    app.owner = Owner {
        actor: "owner".into(),
        verified: true,
        note: "owner ✓ SHA256:0123456789abcdef".into(),
    };
    load(&mut app, snapshot());
    app
}

/// The same state with g-gate01's decision loaded (as the next load after an approval).
fn approved(id: &str) -> Snapshot {
    let mut s = snapshot();
    let g = s.gates.get_mut(id).unwrap();
    g.status = loopx::kernel::GateStatus::Approved;
    g.decided_by = Some("owner".into());
    g.decided_at = Some(now());
    s
}

fn quarantined() -> App {
    let mut a = board();
    let mut s = snapshot();
    s.todos.remove("t-aaaaa1");
    s.quarantined.insert(
        "t-aaaaa1".into(),
        Problem {
            file: ".loopx/todos/t-aaaaa1.toml".into(),
            line: Some(4),
            message: "invalid string: expected `\"`, found newline".into(),
            code: Code::InvalidState,
            hint: Some("fix the file, or `loopx doctor`".into()),
        },
    );
    load(&mut a, s);
    a
}

fn press(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ch(app: &mut App, c: char) -> Vec<Effect> {
    press(app, KeyCode::Char(c))
}

fn typ(app: &mut App, text: &str) {
    for c in text.chars() {
        ch(app, c);
    }
}

fn text_of(app: &App, w: u16, h: u16) -> String {
    let mut a = app.clone();
    a.size = (w, h);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw::frame(f, &a.scene())).unwrap();
    t.backend().to_string()
}

fn snap_both(name: &str, app: &App) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.bind(|| {
        insta::assert_snapshot!(format!("act_{name}_80x24"), text_of(app, 80, 24));
        insta::assert_snapshot!(format!("act_{name}_120x40"), text_of(app, 120, 40));
    });
}

fn message(app: &App) -> String {
    app.message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------- gate triage

#[test]
fn next_gate_jumps_from_any_pane_and_wraps() {
    let mut a = board();
    press(&mut a, KeyCode::Tab);
    press(&mut a, KeyCode::Tab);
    assert_eq!(a.focus, Pane::Evidence);
    ch(&mut a, 'N');
    assert_eq!(a.focus, Pane::Gates);
    assert_eq!(
        a.selected_gate().as_deref(),
        Some("g-gate01"),
        "the selected pending gate first"
    );
    ch(&mut a, 'N');
    assert_eq!(a.selected_gate().as_deref(), Some("g-gate02"));
    ch(&mut a, 'N');
    ch(&mut a, 'N');
    assert_eq!(
        a.selected_gate().as_deref(),
        Some("g-gate01"),
        "wraps past the decided gate"
    );
    assert!(message(&a).contains("3 waiting"), "{}", message(&a));
}

#[test]
fn after_a_decision_the_cursor_moves_to_the_next_pending_gate() {
    let mut a = board();
    ch(&mut a, 'j');
    assert_eq!(a.selected_gate().as_deref(), Some("g-gate02"));
    ch(&mut a, 'a');
    let fx = ch(&mut a, 'y');
    assert!(
        matches!(&fx[..], [Effect::Perform(OwnerAct::Approve { gate, .. })] if gate == "g-gate02")
    );
    assert_eq!(
        a.selected_gate().as_deref(),
        Some("g-gate03"),
        "the cursor moved on at once"
    );
    a.on_event(AppEvent::ActDone(Ok("approved g-gate02".into())));
    // Before the load shows the decision, the decided gate is skipped and refused.
    ch(&mut a, 'N');
    assert_eq!(a.selected_gate().as_deref(), Some("g-gate01"));
    ch(&mut a, 'N');
    assert_eq!(
        a.selected_gate().as_deref(),
        Some("g-gate03"),
        "g-gate02 is skipped"
    );
    ch(&mut a, 'k');
    assert_eq!(a.selected_gate().as_deref(), Some("g-gate02"));
    ch(&mut a, 'a');
    assert_eq!(a.mode, Mode::Normal);
    assert!(message(&a).contains("decided already"), "{}", message(&a));
    // The load that shows it: the selection stays on the same gate, now among the decided.
    ch(&mut a, 'N');
    load(&mut a, approved("g-gate02"));
    assert_eq!(a.selected_gate().as_deref(), Some("g-gate03"));
    assert_eq!(
        a.gates.ids[..2],
        ["g-gate01".to_string(), "g-gate03".to_string()]
    );
}

#[test]
fn the_last_pending_gate_decided_leaves_nothing_to_jump_to() {
    let mut a = board();
    for _ in 0..3 {
        ch(&mut a, 'N');
        let id = a.selected_gate().unwrap();
        ch(&mut a, 'a');
        if matches!(a.mode, Mode::Picker(_)) {
            press(&mut a, KeyCode::Enter);
        }
        let fx = ch(&mut a, 'y');
        assert!(matches!(&fx[..], [Effect::Perform(act)] if act.gate() == Some(id.as_str())));
        a.on_event(AppEvent::ActDone(Ok(format!("approved {id}"))));
    }
    ch(&mut a, 'N');
    assert!(message(&a).contains("no pending gate"), "{}", message(&a));
}

#[test]
fn a_failed_decision_makes_the_gate_pending_again() {
    let mut a = board();
    ch(&mut a, 'j');
    ch(&mut a, 'a');
    ch(&mut a, 'y');
    a.on_event(AppEvent::ActDone(Err(
        "gate g-gate02 was approved by owner at …".into(),
    )));
    assert!(
        a.actionable("g-gate02"),
        "refused by the store: pending again here"
    );
    assert!(a.message.as_ref().is_some_and(|m| m.error));
}

#[test]
fn the_confirm_dialog_shows_the_question_and_the_option() {
    let mut a = board();
    ch(&mut a, 'a');
    press(&mut a, KeyCode::Down);
    press(&mut a, KeyCode::Enter);
    let text = text_of(&a, 80, 24);
    assert!(
        text.contains("“Use SQLite or plain files for the cache?”"),
        "{text}"
    );
    assert!(text.contains("with option \"files\""), "{text}");
    assert!(text.contains(" y  yes, do it"), "{text}");
    snap_both("confirm_option", &a);
}

// ---------------------------------------------------------------- reasons, drafts, the input

#[test]
fn approve_takes_an_optional_reason_from_the_confirm_dialog() {
    let mut a = board();
    ch(&mut a, 'j');
    ch(&mut a, 'a');
    ch(&mut a, 'r');
    assert!(matches!(
        &a.mode,
        Mode::Input(TextInput { purpose: InputFor::ApproveReason { gate, option: None }, .. }) if gate == "g-gate02"
    ));
    snap_both("approve_reason", &a);
    typ(&mut a, "fine, it is small");
    press(&mut a, KeyCode::Enter);
    let want = OwnerAct::Approve {
        gate: "g-gate02".into(),
        option: None,
        reason: Some("fine, it is small".into()),
        sha: None,
    };
    assert_eq!(a.mode, Mode::Confirm(Confirm::new(want.clone())));
    assert!(text_of(&a, 80, 24).contains("reason: fine, it is small"));
    assert_eq!(ch(&mut a, 'y'), vec![Effect::Perform(want)]);
    // Empty: no reason.
    ch(&mut a, 'k');
    ch(&mut a, 'k');
    ch(&mut a, 'N');
    ch(&mut a, 'a');
    ch(&mut a, 'r');
    press(&mut a, KeyCode::Enter);
    assert!(matches!(
        &a.mode,
        Mode::Confirm(Confirm {
            act: OwnerAct::Approve { reason: None, .. },
            ..
        })
    ));
}

#[test]
fn an_empty_rejection_says_why_in_the_dialog() {
    let mut a = board();
    ch(&mut a, 'x');
    typ(&mut a, "   ");
    press(&mut a, KeyCode::Enter);
    assert!(
        matches!(&a.mode, Mode::Input(TextInput { note: Some(n), .. }) if n.contains("reason is required"))
    );
    assert!(a.message.as_ref().is_some_and(|m| m.error));
    let text = text_of(&a, 80, 24);
    assert!(
        text.contains("✗ a reason is required: the agents read it (Esc cancels)"),
        "{text}"
    );
    snap_both("reject_empty", &a);
    ch(&mut a, 'n');
    assert!(
        matches!(&a.mode, Mode::Input(TextInput { note: None, .. })),
        "typing clears it"
    );
}

#[test]
fn a_dismissed_reason_comes_back_for_the_same_gate_only() {
    let mut a = board();
    ch(&mut a, 'x');
    typ(&mut a, "not now");
    press(&mut a, KeyCode::Esc);
    assert_eq!(a.mode, Mode::Normal);
    assert!(message(&a).contains("kept for next time"));
    ch(&mut a, 'j');
    ch(&mut a, 'x');
    assert!(
        matches!(&a.mode, Mode::Input(TextInput { text, .. }) if text.is_empty()),
        "another gate"
    );
    press(&mut a, KeyCode::Esc);
    ch(&mut a, 'k');
    ch(&mut a, 'x');
    assert!(matches!(&a.mode, Mode::Input(TextInput { text, cursor: 7, .. }) if text == "not now"));
    // `n` at the confirm keeps it too; doing it forgets it.
    press(&mut a, KeyCode::Enter);
    ch(&mut a, 'n');
    ch(&mut a, 'x');
    assert!(matches!(&a.mode, Mode::Input(TextInput { text, .. }) if text == "not now"));
    press(&mut a, KeyCode::Enter);
    ch(&mut a, 'r');
    assert!(
        matches!(&a.mode, Mode::Input(TextInput { purpose: InputFor::RejectReason(_), text, .. }) if text == "not now")
    );
    press(&mut a, KeyCode::Enter);
    assert!(matches!(
        ch(&mut a, 'y')[..],
        [Effect::Perform(OwnerAct::Reject { .. })]
    ));
    assert!(a.drafts.is_empty());
}

#[test]
fn the_cursor_moves_and_edits_in_the_middle() {
    let mut a = board();
    ch(&mut a, 'x');
    typ(&mut a, "use sqlx");
    press(&mut a, KeyCode::Left);
    press(&mut a, KeyCode::Left);
    press(&mut a, KeyCode::Backspace);
    ch(&mut a, 'Q');
    press(&mut a, KeyCode::Home);
    press(&mut a, KeyCode::Delete);
    ch(&mut a, 'U');
    press(&mut a, KeyCode::End);
    ch(&mut a, '!');
    assert!(
        matches!(&a.mode, Mode::Input(TextInput { text, cursor: 9, .. }) if text == "Use sQlx!"),
        "{:?}",
        a.mode
    );
}

#[test]
fn the_window_keeps_the_cursor_visible() {
    assert_eq!(window("short", 5, 10), ("short".into(), 5));
    let long: String = ('a'..='z').cycle().take(500).collect();
    let (shown, col) = window(&long, 500, 20);
    assert_eq!(
        shown.chars().count(),
        18,
        "the cursor cell follows the text"
    );
    assert!(shown.starts_with('…'));
    assert_eq!(col, 18);
    let (shown, col) = window(&long, 0, 20);
    assert!(shown.ends_with('…') && col == 0);
    let (shown, col) = window(&long, 250, 20);
    assert!(shown.starts_with('…') && shown.ends_with('…') && (1..19).contains(&col));
    assert_eq!(shown.chars().nth(col), long.chars().nth(250));
}

#[test]
fn a_long_reason_scrolls_and_never_pushes_the_keys_out() {
    let mut a = board();
    ch(&mut a, 'x');
    let reason: String = "because it is too costly for now; "
        .repeat(15)
        .chars()
        .take(500)
        .collect();
    typ(&mut a, &reason);
    let text = text_of(&a, 80, 24);
    assert!(text.contains("500/4000 characters"), "{text}");
    assert!(text.contains(" Enter  next"), "{text}");
    snap_both("reject_long_reason", &a);
    press(&mut a, KeyCode::Enter);
    let text = text_of(&a, 80, 24);
    assert!(
        text.contains(" y  yes, do it"),
        "the keys stay in the box:\n{text}"
    );
    assert!(text.contains("reason: because it is too costly"), "{text}");
    snap_both("confirm_long_reason", &a);
}

// ---------------------------------------------------------------- the detail view

#[test]
fn gates_are_decided_from_the_detail_view() {
    let mut a = board();
    ch(&mut a, 'j');
    press(&mut a, KeyCode::Enter);
    assert!(matches!(a.mode, Mode::Detail(_)));
    ch(&mut a, 'N');
    assert!(matches!(a.mode, Mode::Detail(_)), "N keeps the detail open");
    assert_eq!(a.selected_gate().as_deref(), Some("g-gate03"));
    ch(&mut a, 'a');
    assert!(
        matches!(&a.mode, Mode::Confirm(Confirm { act: OwnerAct::Approve { gate, .. }, .. }) if gate == "g-gate03")
    );
    ch(&mut a, 'n');
    press(&mut a, KeyCode::Enter);
    ch(&mut a, 'x');
    assert!(
        matches!(&a.mode, Mode::Input(TextInput { purpose: InputFor::RejectReason(g), .. }) if g == "g-gate03")
    );
    // A todo's detail refuses gate keys, and reassigns.
    press(&mut a, KeyCode::Esc);
    press(&mut a, KeyCode::Tab);
    press(&mut a, KeyCode::Right);
    press(&mut a, KeyCode::Enter);
    ch(&mut a, 'a');
    assert!(matches!(a.mode, Mode::Detail(_)));
    assert!(message(&a).contains("act on a gate"), "{}", message(&a));
    ch(&mut a, 'r');
    assert!(matches!(
        &a.mode,
        Mode::Picker(Picker {
            purpose: PickFor::Agent(_),
            ..
        })
    ));
}

// ---------------------------------------------------------------- reassign

fn on_claimed(a: &mut App) {
    press(a, KeyCode::Tab);
    press(a, KeyCode::Right);
    assert_eq!(a.todos.col, Column::Claimed);
}

#[test]
fn the_reassign_picker_lists_live_agents_first_and_hides_stale_ones() {
    let mut a = board();
    on_claimed(&mut a);
    assert_eq!(
        a.selected_todo().as_deref(),
        Some("t-aaaaa5"),
        "agent-z's lease ends first"
    );
    ch(&mut a, 'r');
    let Mode::Picker(Picker {
        choices,
        agents: Some(p),
        ..
    }) = &a.mode
    else {
        panic!("{:?}", a.mode)
    };
    assert_eq!(
        choices,
        &["agent-a", "agent-b"],
        "working, then idle; never owner"
    );
    assert_eq!(p.hidden(), 2);
    snap_both("reassign_picker", &a);
    press(&mut a, KeyCode::Tab);
    let Mode::Picker(Picker { choices, .. }) = &a.mode else {
        panic!()
    };
    assert_eq!(choices, &["agent-a", "agent-b", "agent-old", "agent-never"]);
    let text = text_of(&a, 80, 24);
    assert!(text.contains("stale · lease lapsed 40m ago"), "{text}");
    assert!(text.contains("never seen"), "{text}");
}

#[test]
fn the_reassign_picker_takes_a_typed_id_checked_as_agent_is() {
    let mut a = board();
    on_claimed(&mut a);
    ch(&mut a, 'r');
    typ(&mut a, "old");
    let Mode::Picker(Picker { choices, .. }) = &a.mode else {
        panic!()
    };
    assert_eq!(
        choices,
        &["agent-old", "old"],
        "typed text finds stale agents too"
    );
    for _ in 0..3 {
        press(&mut a, KeyCode::Backspace);
    }
    typ(&mut a, "owner");
    press(&mut a, KeyCode::Enter);
    assert!(
        matches!(a.mode, Mode::Picker(_)),
        "a reserved name is refused"
    );
    assert!(message(&a).contains("reserved"), "{}", message(&a));
    for _ in 0..5 {
        press(&mut a, KeyCode::Backspace);
    }
    typ(&mut a, "agent-new");
    snap_both("reassign_typed", &a);
    press(&mut a, KeyCode::Enter);
    assert_eq!(
        a.mode,
        Mode::Confirm(Confirm::new(OwnerAct::Reassign {
            todo: "t-aaaaa5".into(),
            to: "agent-new".into()
        }))
    );
}

// ---------------------------------------------------------------- copy, sort, times

#[test]
fn y_copies_the_selected_id() {
    let mut a = board();
    assert_eq!(ch(&mut a, 'y'), vec![Effect::Copy("g-gate01".into())]);
    assert!(message(&a).contains("copied g-gate01"));
    on_claimed(&mut a);
    assert_eq!(ch(&mut a, 'y'), vec![Effect::Copy("t-aaaaa5".into())]);
    press(&mut a, KeyCode::Enter);
    assert_eq!(
        ch(&mut a, 'y'),
        vec![Effect::Copy("t-aaaaa5".into())],
        "from the detail too"
    );
    press(&mut a, KeyCode::Esc);
    press(&mut a, KeyCode::Tab);
    press(&mut a, KeyCode::Tab);
    assert!(ch(&mut a, 'y').is_empty());
    assert!(a.message.as_ref().is_some_and(|m| m.error));
}

#[test]
fn osc52_is_base64_and_wrapped_for_tmux() {
    use loopx::board::term::{base64, osc52};
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"t-aaaaa1"), "dC1hYWFhYTE=");
    assert_eq!(osc52("foo", false), b"\x1b]52;c;Zm9v\x07");
    let both = osc52("foo", true);
    assert!(both.ends_with(b"\x1bPtmux;\x1b\x1b]52;c;Zm9v\x07\x1b\\"));
}

#[test]
fn s_cycles_the_sort_of_the_columns() {
    let mut a = board();
    let ids = |a: &App, c: Column| -> Vec<String> {
        a.columns.cols[c.index()]
            .iter()
            .map(|k| k.id.clone())
            .collect()
    };
    assert_eq!(
        ids(&a, Column::Ready),
        ["t-aaaaa3", "t-aaaaa1"],
        "pick order: P0 first"
    );
    assert_eq!(
        ids(&a, Column::Claimed),
        ["t-aaaaa5", "t-aaaaa2"],
        "soonest expiry first"
    );
    press(&mut a, KeyCode::Tab);
    ch(&mut a, 's');
    assert_eq!(a.sort, SortBy::Priority);
    assert_eq!(ids(&a, Column::Claimed), ["t-aaaaa2", "t-aaaaa5"]);
    ch(&mut a, 's');
    assert_eq!(a.sort, SortBy::Age);
    assert_eq!(
        ids(&a, Column::Ready),
        ["t-aaaaa1", "t-aaaaa3"],
        "oldest first"
    );
    assert!(text_of(&a, 120, 40).contains("sort: age"));
    ch(&mut a, 's');
    assert_eq!(a.sort, SortBy::Holder);
    assert_eq!(
        ids(&a, Column::Claimed),
        ["t-aaaaa2", "t-aaaaa5"],
        "agent-a before agent-z"
    );
    ch(&mut a, 's');
    assert_eq!(a.sort, SortBy::Pick);
    assert!(!text_of(&a, 120, 40).contains("sort:"));
}

#[test]
fn t_switches_to_clock_times() {
    let mut a = board();
    let text = text_of(&a, 120, 40);
    assert!(text.contains("agent-b  9m"), "{text}");
    assert!(text.contains("agent-z ⏱5:00"), "{text}");
    ch(&mut a, 't');
    assert!(a.absolute);
    let text = text_of(&a, 120, 40);
    assert!(text.contains("agent-b 11:51"), "{text}");
    assert!(text.contains("agent-z ⏱@12:05"), "{text}");
    ch(&mut a, 't');
    assert!(!a.absolute);
}

// ---------------------------------------------------------------- broken files

#[test]
fn e_shows_the_full_error_and_shift_e_edits_the_file() {
    let mut a = board();
    ch(&mut a, 'e');
    assert_eq!(a.mode, Mode::Normal);
    assert!(message(&a).contains("no file errors"));
    assert!(ch(&mut a, 'E').is_empty());
    let mut a = quarantined();
    ch(&mut a, 'e');
    assert_eq!(a.mode, Mode::Errors(FileErrors { sel: 0 }));
    let text = text_of(&a, 120, 40);
    assert!(text.contains(".loopx/todos/t-aaaaa1.toml line 4"), "{text}");
    assert!(
        text.contains("invalid string: expected `\"`, found newline"),
        "{text}"
    );
    assert!(
        text.contains("quarantined: no agent can claim this todo"),
        "{text}"
    );
    assert!(text.contains("hint: fix the file"), "{text}");
    snap_both("file_errors", &a);
    assert_eq!(
        ch(&mut a, 'E'),
        vec![Effect::Edit(".loopx/todos/t-aaaaa1.toml".into())]
    );
    assert_eq!(a.mode, Mode::Normal);
    assert_eq!(
        ch(&mut a, 'E'),
        vec![Effect::Edit(".loopx/todos/t-aaaaa1.toml".into())],
        "from the board: the first broken file"
    );
}

#[test]
fn the_journal_is_never_opened_and_readonly_edits_nothing() {
    let mut a = board();
    a.on_event(AppEvent::Loaded(Delta {
        problems: vec![Problem {
            file: ".loopx/journal.jsonl".into(),
            line: Some(9),
            message: "broken chain".into(),
            code: Code::InvalidState,
            hint: None,
        }],
        at: now(),
        ..Delta::default()
    }));
    assert!(ch(&mut a, 'E').is_empty());
    assert!(message(&a).contains("append-only"), "{}", message(&a));
    let mut a = quarantined();
    a.readonly = true;
    assert!(ch(&mut a, 'E').is_empty());
    assert!(message(&a).contains("read-only"));
}

#[test]
fn only_regular_files_inside_loopx_are_editable() {
    use loopx::board::edit::editable;
    let root = std::env::temp_dir().join(format!("loopx-edit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(".loopx/todos")).unwrap();
    std::fs::write(root.join(".loopx/todos/t-aaaaa1.toml"), "x").unwrap();
    std::fs::write(root.join("secret"), "x").unwrap();
    std::os::unix::fs::symlink(root.join("secret"), root.join(".loopx/todos/t-link01.toml"))
        .unwrap();
    std::os::unix::fs::symlink(root.join(".loopx/todos"), root.join(".loopx/gates")).unwrap();
    assert_eq!(
        editable(&root, ".loopx/todos/t-aaaaa1.toml"),
        Ok(root.join(".loopx/todos/t-aaaaa1.toml"))
    );
    for bad in [
        ".loopx/todos/t-link01.toml",
        ".loopx/gates/t-aaaaa1.toml",
        ".loopx/../secret",
        "secret",
        "/etc/passwd",
        ".loopx/journal.jsonl",
        ".loopx/todos",
        ".loopx/todos/missing.toml",
    ] {
        assert!(editable(&root, bad).is_err(), "{bad} must not open");
    }
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn every_dialog_draws_at_any_size() {
    let mut a = quarantined();
    let opens: [&[KeyCode]; 6] = [
        &[KeyCode::Char('a')],
        &[KeyCode::Char('j'), KeyCode::Char('a')],
        &[KeyCode::Char('j'), KeyCode::Char('a'), KeyCode::Char('r')],
        &[KeyCode::Char('x'), KeyCode::Char('w'), KeyCode::Char('h')],
        &[KeyCode::Char('e')],
        &[
            KeyCode::Tab,
            KeyCode::Right,
            KeyCode::Char('r'),
            KeyCode::Char('q'),
        ],
    ];
    for keys in opens {
        for k in keys {
            press(&mut a, *k);
        }
        assert_ne!(a.mode, Mode::Normal, "{keys:?}");
        for (w, h) in [
            (1u16, 1u16),
            (10, 3),
            (20, 5),
            (40, 12),
            (79, 23),
            (300, 100),
        ] {
            text_of(&a, w, h);
        }
        for _ in 0..3 {
            press(&mut a, KeyCode::Esc);
        }
        a.mode = Mode::Normal;
        a.focus = Pane::Gates;
    }
}

#[test]
fn the_errors_overlay_closes_when_every_file_reads() {
    let mut a = quarantined();
    ch(&mut a, 'e');
    assert_eq!(a.mode, Mode::Errors(FileErrors { sel: 0 }));
    load(&mut a, snapshot());
    assert_eq!(a.mode, Mode::Normal);
}

// ---------------------------------------------------------------- action-bound gates

#[test]
fn the_confirm_dialog_shows_the_action_and_binds_its_digest() {
    use loopx::kernel::gate_action::GateAction;
    let mut a = board();
    let mut s = snapshot();
    let lines: Vec<String> = (1..=12).map(|i| format!("+line {i}")).collect();
    let text = format!("--- a/x\n{}\n\u{202e}hidden\n", lines.join("\n"));
    let action = GateAction::payload(text).unwrap();
    let sha = action.sha256.clone();
    s.gates.get_mut("g-gate02").unwrap().action = Some(action);
    load(&mut a, s);
    ch(&mut a, 'j');
    ch(&mut a, 'a');
    assert!(
        matches!(&a.mode, Mode::Confirm(Confirm { act: OwnerAct::Approve { sha: Some(x), .. }, .. }) if *x == sha),
        "{:?}",
        a.mode
    );
    let shown = text_of(&a, 80, 24);
    assert!(shown.contains(&format!("sha256 {}", &sha[..16])), "{shown}");
    assert!(
        shown.contains("│ --- a/x") && !shown.contains("+line 9"),
        "{shown}"
    );
    assert!(shown.contains("lines 1-8 of 14"), "{shown}");
    snap_both("confirm_action", &a);
    // Scrolling keeps the dialog open and shows the rest, the hidden character escaped.
    for _ in 0..6 {
        press(&mut a, KeyCode::Down);
    }
    assert!(matches!(a.mode, Mode::Confirm(_)));
    let shown = text_of(&a, 80, 24);
    assert!(
        shown.contains("+line 12") && shown.contains("\\u{202e}hidden"),
        "{shown}"
    );
    assert!(
        shown.contains("1 character outside printable ASCII"),
        "{shown}"
    );
    press(&mut a, KeyCode::Up);
    let fx = ch(&mut a, 'y');
    assert!(
        matches!(&fx[..], [Effect::Perform(OwnerAct::Approve { sha: Some(x), .. })] if *x == sha),
        "{fx:?}"
    );
}
