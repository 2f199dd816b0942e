//! The board's layout at 80x24 and 120x40 (issue 11): snapshots of a crowded board with long
//! titles and holders, empty columns, both kinds of broken file, and a refusal in the status bar;
//! checks of the hints, the pending count under a filter, scroll marks and metrics.

mod common;

use common::frames::{snap_both, text};
use loopx::board::app::{App, AppEvent, Help, Mode};
use loopx::board::data::Delta;
use loopx::board::panes;
use loopx::board::theme::Theme;
use loopx::flows::owner::Owner;
use loopx::kernel::{Code, Config, Evidence, Gate, Problem, Snapshot, Todo, Ts};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const NOW: &str = "2026-12-02T09:00:00.000Z";

fn now() -> Ts {
    NOW.parse().unwrap()
}

fn ts(mins: i64) -> String {
    Ts(now().0 + mins * 60_000).to_string()
}

fn config(status: &str) -> Config {
    toml::from_str(&format!(
        "schema_version = 1\n[goal]\nid = \"g\"\nobjective = \"Keep the loop running\"\nstatus = \"{status}\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n",
        ts(-600)
    ))
    .unwrap()
}

/// A todo: `n` numbers it; `extra` adds TOML lines (a lease, a status other than open).
fn todo(n: usize, title: &str, extra: &str) -> Todo {
    let open = if extra.contains("status =") {
        ""
    } else {
        "status = \"open\"\n"
    };
    toml::from_str(&format!(
        "id = \"t-{n:06}\"\ntitle = \"{title}\"\n{open}created_by = \"owner\"\ncreated_at = \"{0}\"\nupdated_at = \"{0}\"\n{extra}",
        ts(-300 + n as i64)
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

fn gate(id: &str, question: &str) -> Gate {
    let mut g: Gate = toml::from_str(&format!(
        "id = \"{id}\"\nquestion = \"{question}\"\nopened_by = \"claude-worker-alpha-7\"\nopened_at = \"{}\"\nstatus = \"pending\"\n",
        ts(-4)
    ))
    .unwrap();
    g.signed = true;
    g
}

/// A busy project: ready loop tasks whose titles differ only at the end, two holders whose names
/// differ only at the end, a blocked todo, two pending gates; Waiting empty unless `waiting`.
fn crowded(waiting: bool) -> Snapshot {
    let mut s = Snapshot::new(config("active"));
    let mut todos = Vec::new();
    for n in 1..=7 {
        let title =
            format!("Loop task {n}: re-run the flaky integration suite and file what fails");
        todos.push(todo(n, &title, ""));
    }
    todos.push(todo(
        11,
        "Port the cache layer to the new storage engine",
        &lease("claude-worker-alpha-7", 12),
    ));
    todos.push(todo(
        12,
        "Port the CLI flags to the new storage engine",
        &lease("claude-worker-alpha-8", 25),
    ));
    todos.push(todo(
        21,
        "Drop Windows support for v1",
        "status = \"blocked\"\nreason = \"owner: keep Windows\"\n",
    ));
    if waiting {
        todos.push(todo(
            31,
            "Package a static binary",
            "depends_on = [\"t-000011\"]\n",
        ));
    }
    s.todos = todos.into_iter().map(|t| (t.id.clone(), t)).collect();
    for g in [
        gate("g-000001", "May the suite run on the shared runner?"),
        gate("g-000002", "May I add the reqwest dependency?"),
    ] {
        s.gates.insert(g.id.clone(), g);
    }
    s
}

fn board(snap: Snapshot, owner: bool) -> App {
    let mut app = App::new(
        "/home/op/projects/loopx-service",
        Theme::dark(),
        false,
        now(),
    );
    app.owner = if owner {
        Owner {
            actor: "owner".into(),
            verified: true,
            note: "owner ✓ SHA256:0123456789abcdef".into(),
        }
    } else {
        Owner {
            note: "owner: unverified (no matching owner key here)".into(),
            ..Owner::unverified()
        }
    };
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(snap),
        journal: Some(Vec::new()),
        done: Some(Vec::new()),
        at: now(),
        ..Delta::default()
    }));
    app
}

fn press(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

fn problem(file: &str, message: &str) -> Problem {
    Problem {
        file: file.into(),
        line: Some(3),
        message: message.into(),
        code: Code::InvalidState,
        hint: None,
    }
}

#[test]
fn a_crowded_board_keeps_titles_and_holders_apart() {
    let a = board(crowded(true), true);
    snap_both("view_crowded", &a);
    let t = text(&a, 80, 24);
    // Full holder names: the two agents stay apart at 80 columns.
    assert!(t.contains("claude-worker-alpha-7"), "{t}");
    assert!(t.contains("claude-worker-alpha-8"), "{t}");
    // Seven ready todos do not fit: the column says how many more.
    assert!(t.contains("↓ 4 more"), "{t}");
    // The Done column (empty) folds into the pane's title.
    assert!(t.contains("Todos · ✓ Done 0"), "{t}");
}

#[test]
fn empty_columns_fold_and_the_others_widen() {
    let a = board(crowded(false), true);
    snap_both("view_empty_columns", &a);
    let t = text(&a, 80, 24);
    assert!(t.contains("Todos · … Waiting 0 · ✓ Done 0"), "{t}");
    let heads = t.lines().find(|l| l.contains("○ Ready 7")).unwrap();
    assert!(!heads.contains("Waiting"), "{t}");
    // Three columns share 78 cells: a title reads past its first words (with four it is
    // `Loop task 1:…`).
    assert!(t.contains("Loop task 1: re-run"), "{t}");
}

#[test]
fn a_file_that_refuses_agents_is_loud() {
    let mut a = board(crowded(true), true);
    a.on_event(AppEvent::Loaded(Delta {
        problems: vec![problem(".loopx/loopx.toml", "expected `=`")],
        at: now(),
        ..Delta::default()
    }));
    snap_both("view_broken_refused", &a);
    let t = text(&a, 80, 24);
    assert!(
        t.contains("⚠ AGENTS REFUSED: .loopx/loopx.toml:3 does not load"),
        "{t}"
    );
    // The status bar says so in place of `● live`, and the header's goal state too.
    assert!(t.contains("⚠ agents refused"), "{t}");
    assert!(!t.contains("● live"), "{t}");
    assert!(t.contains("⚠ REFUSED"), "{t}");
}

#[test]
fn an_unreadable_gate_refuses_agents_too() {
    let mut s = crowded(true);
    s.quarantined.insert(
        "g-000002".into(),
        problem(".loopx/gates/g-000002.toml", "invalid string"),
    );
    let t = text(&board(s, true), 80, 24);
    assert!(
        t.contains("⚠ AGENTS REFUSED: gate g-000002 is unreadable"),
        "{t}"
    );
    assert!(t.contains("⚠ agents refused"), "{t}");
}

#[test]
fn a_quarantined_todo_names_itself_and_the_rest_runs() {
    let mut s = crowded(true);
    s.todos.remove("t-000003");
    s.quarantined.insert(
        "t-000003".into(),
        problem(".loopx/todos/t-000003.toml", "invalid string"),
    );
    let a = board(s, true);
    snap_both("view_broken_quarantined", &a);
    let t = text(&a, 80, 24);
    assert!(
        t.contains("⚠ t-000003 QUARANTINED, the other todos still run: .loopx/todos/t-000003"),
        "{t}"
    );
    let wide = text(&a, 120, 40);
    assert!(
        wide.contains(
            "QUARANTINED, the other todos still run: .loopx/todos/t-000003.toml:3: invalid string"
        ),
        "{wide}"
    );
    assert!(t.contains("⚠ t-000003 quarantined"), "{t}");
    assert!(!t.contains("● live"), "{t}");
    assert!(t.contains("▶ active"), "{t}");
}

#[test]
fn a_refusal_reads_first_in_the_status_bar() {
    let mut a = board(crowded(true), false);
    press(&mut a, KeyCode::Char('a'));
    snap_both("view_refusal", &a);
    let t = text(&a, 80, 24);
    let status = t.lines().rev().nth(1).unwrap();
    assert!(
        status.contains("✗ only the owner can do this; unverified (no matching owner key here)"),
        "{t}"
    );
}

#[test]
fn a_long_refusal_takes_two_rows() {
    let mut a = board(crowded(true), true);
    a.on_event(AppEvent::ActDone(Err(
        "the store refused: .loopx/loopx.toml:3 does not load (expected `=`); fix the file, then try again".into(),
    )));
    let t = text(&a, 80, 24);
    let rows: Vec<&str> = t.lines().collect();
    let (one, two) = (rows[rows.len() - 3], rows[rows.len() - 2]);
    assert!(one.contains("✗ the store refused:"), "{t}");
    assert!(two.contains("then try again"), "{t}");
}

#[test]
fn hints_fit_the_goal_state_and_tab_shows_once() {
    let a = board(crowded(true), true);
    let t = text(&a, 120, 40);
    assert!(t.contains("p pause"), "{t}");
    assert!(!t.contains("p resume"), "{t}");
    let mut s = crowded(true);
    s.config = config("paused");
    let a = board(s, true);
    let t = text(&a, 120, 40);
    assert!(t.contains("p resume"), "{t}");
    assert!(!t.contains("p pause"), "{t}");
    // One pane at a time (narrow): Tab is hinted once.
    let t = text(&a, 70, 20);
    assert_eq!(t.matches("Tab").count(), 1, "{t}");
}

#[test]
fn the_filter_applies_to_the_pending_gate_count() {
    let mut a = board(crowded(true), true);
    let t = text(&a, 120, 40);
    assert!(t.contains("? 2 gates pending"), "{t}");
    press(&mut a, KeyCode::Char('/'));
    for c in "reqwest".chars() {
        press(&mut a, KeyCode::Char(c));
    }
    let t = text(&a, 120, 40);
    assert!(t.contains("? 1 gate pending"), "{t}");
    assert!(t.contains(" 1 pending "), "{t}");
}

#[test]
fn the_help_says_keys_are_below_the_fold() {
    let mut a = board(crowded(true), true);
    press(&mut a, KeyCode::Char('?'));
    assert_eq!(a.mode, Mode::Help(Help { scroll: 0 }));
    let t = text(&a, 80, 24);
    assert!(t.contains(" more ┛"), "{t}");
    // Scrolled to the end, nothing is below.
    for _ in 0..300 {
        press(&mut a, KeyCode::Down);
    }
    let t = text(&a, 80, 24);
    assert!(!t.contains(" more ┛"), "{t}");
    assert!(t.contains("↑ "), "{t}");
}

#[test]
fn a_metric_shows_once() {
    let e: Evidence = serde_json::from_value(serde_json::json!({
        "at": NOW, "agent": "a", "fence": 1, "kind": "metric", "summary": "p50_ms=127",
        "name": "p50_ms", "value": 127.0
    }))
    .unwrap();
    assert_eq!(panes::evidence::entry_text(&e), "metric p50_ms=127");
    let e: Evidence = serde_json::from_value(serde_json::json!({
        "at": NOW, "agent": "a", "fence": 1, "kind": "metric", "summary": "latency",
        "name": "p50_ms", "value": 127.0
    }))
    .unwrap();
    assert_eq!(
        panes::evidence::entry_text(&e),
        "metric latency p50_ms=127.0"
    );
}

#[test]
fn a_reservation_fits_after_the_holder_and_time_or_is_counted() {
    use panes::todos::{lease_note, with_paths};
    let note = |w| lease_note("agent-a", 3, (false, "12:34"), w);
    let r = ("src/store/** +1".to_string(), 2);
    let at = |w| with_paths(note(w), "agent-a", (false, "12:34"), &r, w);
    assert_eq!(at(60), "agent-a ⏱12:34 #3 · src/store/** +1");
    // The fence goes first, then the globs are cut in the middle.
    assert_eq!(at(32), "agent-a ⏱12:34 · src/store/** +1");
    let cut = at(25);
    assert!(
        cut.starts_with("agent-a ⏱12:34 · s") && cut.contains('…'),
        "{cut}"
    );
    assert_eq!(cut.chars().count(), 25, "{cut}");
    // No room for six characters of globs: their count.
    assert_eq!(at(21), "agent-a ⏱12:34 ▦2");
    assert_eq!(at(14), "agent-a ⏱12:34");
}

#[test]
fn holders_and_titles_cut_where_they_differ_least() {
    use panes::todos::{lease_note, title_rows};
    assert_eq!(
        lease_note("agent-a", 3, (false, "12:34"), 40),
        "agent-a ⏱12:34 #3"
    );
    assert_eq!(
        lease_note("agent-a", 3, (false, "12:34"), 14),
        "agent-a ⏱12:34"
    );
    assert_eq!(
        lease_note("agent-b", 3, (true, "2:00"), 17),
        "! agent-b EXPIRED"
    );
    // Too long even alone: cut in the middle, so the end that tells agents apart stays.
    assert_eq!(
        lease_note("claude-worker-alpha-7", 3, (false, "12:34"), 11),
        "claud…pha-7"
    );
    assert_eq!(
        title_rows("Loop task 1: re-run the flaky suite", 14, 2),
        vec!["Loop task 1:", "re-run the fl…"]
    );
}
