//! The board at 80x24 keeps what the operator needs: the selected gate whole (question, every
//! option, what it blocks, who asked, age), whole ids in Activity and on claimed cards, quota
//! words never cut, the project's last segments, a `? more` marker for hidden keys, the agents
//! overlay wrapped, and dialogs that hint only the keys they take. Snapshots in `snapshots/`.

mod common;

use std::path::Path;

use loopx::board::app::{App, AppEvent, Mode, Pane};
use loopx::board::data::Delta;
use loopx::board::theme::Theme;
use loopx::flows::owner::Owner;
use loopx::kernel::{Config, Gate, Snapshot, Todo, Ts};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use common::frames::{screen, text};

const NOW: &str = "2026-12-02T09:00:00.000Z";

fn now() -> Ts {
    NOW.parse().unwrap()
}

fn ts(mins: i64) -> String {
    Ts(now().0 + mins * 60_000).to_string()
}

fn config() -> Config {
    toml::from_str(&format!(
        "schema_version = 1\n[goal]\nid = \"g\"\nobjective = \"Ship v1 of wx\"\nstatus = \"active\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n",
        ts(-600)
    ))
    .unwrap()
}

fn todo(id: &str, title: &str, extra: &str) -> Todo {
    toml::from_str(&format!(
        "id = \"{id}\"\ntitle = \"{title}\"\nstatus = \"open\"\ncreated_by = \"owner\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n{extra}",
        ts(-300)
    ))
    .unwrap()
}

fn lease(holder: &str, mins_left: i64) -> String {
    format!(
        "fence = 2\n[lease]\nholder = \"{holder}\"\nfence = 2\nacquired_at = \"{}\"\nexpires_at = \"{}\"\n",
        ts(-5),
        ts(mins_left)
    )
}

fn gate(id: &str, mins: i64, body: &str) -> Gate {
    let mut g: Gate = toml::from_str(&format!(
        "id = \"{id}\"\nopened_by = \"agent-b\"\nopened_at = \"{}\"\nstatus = \"pending\"\n{body}",
        ts(mins)
    ))
    .unwrap();
    g.signed = true;
    g
}

/// Two pending gates whose text is longer than a row, ready and claimed todos.
fn project() -> Snapshot {
    let mut s = Snapshot::new(config());
    let todos = [
        todo("t-psywt6", "Render a 5-day table", ""),
        todo("t-mxndo2", "Set up CI on three platforms", ""),
        todo("t-gxd7i4", "Handle API rate limits", &lease("agent-a", 12)),
        todo("t-ybdtpc", "Cache responses on disk", &lease("agent-c", 3)),
    ];
    s.todos = todos.into_iter().map(|t| (t.id.clone(), t)).collect();
    for g in [
        gate(
            "g-nhzm3k",
            -7,
            "question = \"Use SQLite or plain files for the response cache, given that the CLI must also run from a read-only home directory?\"\noptions = [\"sqlite\", \"files\", \"no cache for v1\"]\nblocks = [\"t-ybdtpc\", \"t-psywt6\"]\n",
        ),
        gate(
            "g-ht74vj",
            -1,
            "question = \"Publish 0.1.0 to crates.io now, or wait until CI is green on all three platforms?\"\noptions = [\"yes\", \"wait for CI\"]\nblocks = [\"t-mxndo2\"]\n",
        ),
    ] {
        s.gates.insert(g.id.clone(), g);
    }
    s
}

fn journal() -> Vec<loopx::kernel::Event> {
    let rows = [
        (
            -9,
            "agent-a",
            "todo.claim",
            "t-gxd7i4",
            serde_json::json!({}),
        ),
        (
            -8,
            "agent-c",
            "todo.claim",
            "t-ybdtpc",
            serde_json::json!({}),
        ),
        (
            -7,
            "agent-b",
            "gate.open",
            "g-nhzm3k",
            serde_json::json!({"question": "Use SQLite or plain files?"}),
        ),
        (-2, "agent-a", "quota.spend", "quota", serde_json::json!({})),
        (
            -1,
            "agent-c",
            "todo.renew",
            "t-ybdtpc",
            serde_json::json!({}),
        ),
    ];
    common::journal_events(&rows, ts)
}

fn board() -> App {
    board_of(project())
}

fn board_of(snap: Snapshot) -> App {
    let mut app = App::new(
        "/home/operator/work/clients/acme/weather-cli",
        Theme::dark(),
        false,
        now(),
    );
    app.size = (80, 24);
    app.owner = Owner {
        actor: "owner".into(),
        verified: true,
        note: "owner ✓ SHA256:0123456789abcdef".into(),
    };
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(snap),
        journal: Some(journal()),
        done: Some(Vec::new()),
        at: now(),
        ..Delta::default()
    }));
    app
}

fn press(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

/// A snapshot at 80x24 named `NAME_80x24`.
fn snap(name: &str, app: &App) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.bind(|| {
        insta::assert_snapshot!(format!("{name}_80x24"), screen(app, 80, 24).backend());
    });
}

/// The rows of the screen, without the quotes `TestBackend` puts around them.
fn rows(t: &str) -> Vec<String> {
    t.lines().map(|l| l.trim_matches('"').to_string()).collect()
}

/// The hint bar: the last row.
fn hint_bar(t: &str) -> String {
    rows(t).last().cloned().unwrap_or_default()
}

#[test]
fn the_selected_gate_reads_whole_at_80x24() {
    let a = board();
    snap("small_gates_long", &a);
    let t = text(&a, 80, 24);
    // The selected gate's rows, joined: every word of it is there.
    let gates: String = rows(&t)
        .iter()
        .skip_while(|r| !r.contains("┏ Gates"))
        .skip(1)
        .take_while(|r| !r.starts_with('┗'))
        .map(|r| r.trim_matches('┃').trim().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    for want in [
        "g-nhzm3k",
        "agent-b",
        "7m",
        "read-only home directory?",
        "[sqlite|files|no cache for v1]",
        "→ blocks t-ybdtpc,t-psywt6",
    ] {
        assert!(gates.contains(want), "{want:?} not in the gates pane:\n{t}");
    }
    // The other gate is below the fold, and the border says so.
    assert!(t.contains("↓ 1 more ┛"), "{t}");
    // Moving down wraps the other one instead; the first stays one row, cut with `…`.
    let mut a = a;
    press(&mut a, KeyCode::Down);
    let t = text(&a, 80, 24);
    snap("small_gates_second", &a);
    assert!(t.contains("[yes|wait for CI] → blocks t-mxndo2"), "{t}");
    let first = rows(&t)
        .into_iter()
        .find(|r| r.contains("g-nhzm3k"))
        .unwrap();
    assert!(first.trim_end_matches('┃').ends_with('…'), "{t}");
}

#[test]
fn the_hint_bar_marks_hidden_keys_and_keeps_the_help() {
    let mut a = board();
    let t = text(&a, 80, 24);
    let bar = hint_bar(&t);
    assert!(bar.contains("? more"), "{bar}");
    assert!(!bar.contains('…'), "{bar}");
    for p in [Pane::Todos, Pane::Evidence, Pane::Activity] {
        press(&mut a, KeyCode::Tab);
        assert_eq!(a.focus, p);
        // Cut, the bar ends with `? more`; else every hint shows, `? help` among them.
        let bar = hint_bar(&text(&a, 80, 24));
        let fits = bar.contains("? help") && !bar.contains("more");
        assert!(bar.trim_end().ends_with("? more") || fits, "{p:?}: {bar}");
        assert!(!bar.contains('…'), "{bar}");
    }
    // Where every key fits, no marker, and `? help` as before.
    let bar = hint_bar(&text(&board(), 160, 40));
    assert!(bar.contains("? help") && !bar.contains("more"), "{bar}");
}

#[test]
fn activity_claimed_cards_quota_and_project_keep_their_words() {
    let a = board();
    let t = text(&a, 80, 24);
    // Whole ids in Activity: the action is shortened, not the id.
    assert!(t.contains("claim t-ybdtpc"), "{t}");
    assert!(t.contains("renew t-ybdtpc"), "{t}");
    // A claimed card shows its todo id with its holder.
    assert!(t.contains("t-gxd7i4 agent-a"), "{t}");
    // The quota's text is whole words.
    let quota: Vec<String> = rows(&t)
        .iter()
        .skip_while(|r| !r.contains("┌ Quota"))
        .skip(1)
        .take_while(|r| !r.starts_with('└'))
        .filter_map(|r| r.rsplit('│').nth(1).map(str::to_string))
        .collect();
    assert!(quota[1].contains("no spend yet"), "{quota:?}");
    assert!(quota.iter().all(|q| !q.contains('…')), "{quota:?}");
    // The project is cut from the left: its last segment whole.
    let status = &rows(&t)[22];
    assert!(status.ends_with("│ …/acme/weather-cli"), "{status}");
}

#[test]
fn help_at_80x24() {
    let mut a = board();
    press(&mut a, KeyCode::Char('?'));
    snap("small_help", &a);
}

#[test]
fn the_agents_overlay_wraps_at_80x24() {
    let mut a = board();
    press(&mut a, KeyCode::Char('w'));
    assert!(matches!(a.mode, Mode::Agents(_)));
    snap("small_agents", &a);
    let t = text(&a, 80, 24);
    for want in ["turns 0", "leases t-gxd7i4", "the whole journal."] {
        assert!(t.contains(want), "{want:?}:\n{t}");
    }
}

#[test]
fn each_dialog_at_80x24_hints_the_keys_it_takes() {
    // Approve: the option picker, then the confirm, which takes a reason.
    let mut a = board();
    press(&mut a, KeyCode::Char('a'));
    snap("small_option_picker", &a);
    assert!(hint_bar(&text(&a, 80, 24)).contains("Enter choose"));
    press(&mut a, KeyCode::Enter);
    snap("small_approve_confirm", &a);
    let t = text(&a, 80, 24);
    assert!(hint_bar(&t).contains("r reason"), "{t}");
    // Reject: the reason.
    let mut a = board();
    press(&mut a, KeyCode::Char('x'));
    snap("small_reject_reason", &a);
    let t = text(&a, 80, 24);
    assert!(hint_bar(&t).contains("Enter next"), "{t}");
    assert!(t.contains("Enter  next"), "{t}");
    // Reassign a claimed card: the picker, then a confirm that takes no reason.
    let mut a = board();
    press(&mut a, KeyCode::Tab);
    press(&mut a, KeyCode::Right);
    press(&mut a, KeyCode::Char('r'));
    snap("small_reassign_picker", &a);
    for c in "agent-b".chars() {
        press(&mut a, KeyCode::Char(c));
    }
    press(&mut a, KeyCode::Enter);
    assert!(matches!(a.mode, Mode::Confirm(_)), "{:?}", a.mode);
    snap("small_reassign_confirm", &a);
    let t = text(&a, 80, 24);
    let bar = hint_bar(&t);
    assert!(bar.contains("y yes") && bar.contains("n no"), "{bar}");
    assert!(!bar.contains("reason"), "{bar}");
    assert!(!t.contains("r  reason"), "{t}");
    // Pause and add: a confirm and a title.
    let mut a = board();
    press(&mut a, KeyCode::Char('p'));
    snap("small_pause_confirm", &a);
    assert!(!hint_bar(&text(&a, 80, 24)).contains("reason"));
    let mut a = board();
    press(&mut a, KeyCode::Char('n'));
    snap("small_add_todo", &a);
    // The details of the selected gate.
    let mut a = board();
    press(&mut a, KeyCode::Enter);
    snap("small_gate_detail", &a);
}

#[test]
fn a_click_lands_on_the_gate_drawn_there_when_one_is_wrapped() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let click = |a: &mut App, row: u16| {
        a.on_event(AppEvent::Mouse(MouseEvent {
            kind: MouseEventKind::Down(MouseButton::Left),
            column: 10,
            row,
            modifiers: KeyModifiers::NONE,
        }));
    };
    // A third gate, opened last, below the fold.
    let mut s = project();
    let g = gate("g-zzzzz1", 0, "question = \"Ship it?\"\n");
    s.gates.insert(g.id.clone(), g);
    // The second gate selected: the first on row 3, the second wrapped over rows 4 and 5.
    let mut a = board_of(s);
    press(&mut a, KeyCode::Down);
    click(&mut a, 5);
    assert_eq!(a.selected_gate().as_deref(), Some("g-ht74vj"));
    click(&mut a, 3);
    assert_eq!(a.selected_gate().as_deref(), Some("g-nhzm3k"));
    // Now the first is wrapped over rows 3 to 5: each of them is still the first.
    click(&mut a, 5);
    assert_eq!(a.selected_gate().as_deref(), Some("g-nhzm3k"));
}

#[test]
fn a_long_gate_on_tiny_screens_draws_without_panic() {
    let mut s = project();
    let long = "why ".repeat(900) + &"x".repeat(300);
    let g = gate("g-zzzzz2", 0, &format!("question = \"{long}\"\n"));
    s.gates.insert(g.id.clone(), g);
    let mut a = board_of(s);
    press(&mut a, KeyCode::End);
    for (w, h) in [(1, 1), (5, 3), (20, 6), (80, 20), (80, 24), (200, 60)] {
        let t = text(&a, w, h);
        assert!(!t.is_empty());
    }
    // At 80x24 the cut gate ends with `…` (Enter shows it all).
    let t = text(&a, 80, 24);
    let last = rows(&t)
        .into_iter()
        .take_while(|r| !r.starts_with('┗'))
        .last()
        .unwrap();
    assert!(last.trim_end_matches('┃').trim_end().ends_with('…'), "{t}");
}
