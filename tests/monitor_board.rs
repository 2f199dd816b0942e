//! The board marks an overdue monitor in the todos pane (insta snapshot, fixed clock and data).

use std::path::Path;

use loopx::board::app::{App, AppEvent};
use loopx::board::data::Delta;
use loopx::board::panes;
use loopx::board::theme::Theme;
use loopx::kernel::{Snapshot, Todo, Ts};
use ratatui::Terminal;
use ratatui::backend::TestBackend;

const NOW: &str = "2026-11-30T12:00:00.000Z";

fn now() -> Ts {
    NOW.parse().unwrap()
}

fn at(mins_from_now: i64) -> String {
    Ts(now().0 + mins_from_now * 60_000).to_string()
}

fn todo(id: &str, title: &str, extra: &str, created: i64) -> Todo {
    toml::from_str(&format!(
        "id = \"{id}\"\ntitle = \"{title}\"\nstatus = \"open\"\ncreated_by = \"owner\"\n\
         created_at = \"{0}\"\nupdated_at = \"{0}\"\n{extra}",
        at(created)
    ))
    .unwrap()
}

fn snapshot() -> Snapshot {
    let config: loopx::kernel::Config = toml::from_str(&format!(
        "[goal]\nid = \"goal-1\"\nobjective = \"Keep the PR green\"\nstatus = \"active\"\n\
         created_at = \"{0}\"\nupdated_at = \"{0}\"\n",
        at(-600)
    ))
    .unwrap();
    let mut s = Snapshot::new(config);
    let todos = [
        // Due 3 hours ago, every hour: overdue by 3h.
        todo(
            "t-mmmmm1",
            "Watch PR 12 reviews",
            &format!("every = \"1h\"\nnext_due_at = \"{}\"", at(-180)),
            -300,
        ),
        // Due 30 minutes ago, every hour: due, not overdue.
        todo(
            "t-mmmmm2",
            "Check the nightly build",
            &format!("every = \"1h\"\nnext_due_at = \"{}\"", at(-30)),
            -300,
        ),
        todo("t-aaaaa1", "Write the changelog", "", -200),
    ];
    for t in todos {
        s.todos.insert(t.id.clone(), t);
    }
    s
}

#[test]
fn an_overdue_monitor_is_marked_in_the_todos_pane() {
    let mut app = App::new("~/src/wx", Theme::dark(), false, now());
    app.size = (110, 10);
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(snapshot()),
        journal: Some(Vec::new()),
        done: Some(Vec::new()),
        at: now(),
        ..Delta::default()
    }));
    let vm = app.scene();
    let mut term = Terminal::new(TestBackend::new(110, 10)).unwrap();
    term.draw(|f| {
        let a = f.area();
        panes::todos::draw(f, a, &vm)
    })
    .unwrap();
    let shown = format!("{}", term.backend());
    assert_eq!(shown.matches("OVERDUE").count(), 1, "{shown}");
    assert!(shown.contains("OVERDUE 3h"), "{shown}");
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.bind(|| insta::assert_snapshot!("pane_todos_overdue", term.backend()));
}

#[test]
fn the_breakers_parked_and_backed_off_todos_are_marked() {
    let mut s = snapshot();
    let gate: loopx::kernel::Gate = toml::from_str(&format!(
        "id = \"g-bbbbb1\"\nquestion = \"t-ppppp1 made no progress in 3 turns: retry, rewrite or drop?\"\n\
         options = [\"retry\", \"rewrite\", \"drop\"]\nblocks = [\"t-ppppp1\"]\nopened_by = \"agent-a\"\n\
         opened_at = \"{}\"\nstatus = \"pending\"\n",
        at(-5)
    ))
    .unwrap();
    s.gates.insert(gate.id.clone(), gate);
    let parked = todo(
        "t-ppppp1",
        "Fix the flaky test",
        "[stall]\nturns = 3\nfailures = 3\nparked = \"g-bbbbb1\"",
        -100,
    );
    let backed = todo(
        "t-ppppp2",
        "Bump the parser",
        &format!("[stall]\nturns = 0\nfailures = 2\nretry_at = \"{}\"", at(2)),
        -90,
    );
    s.todos.insert(parked.id.clone(), parked);
    s.todos.insert(backed.id.clone(), backed);
    let mut app = App::new("~/src/wx", Theme::dark(), false, now());
    app.size = (110, 14);
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(s),
        journal: Some(Vec::new()),
        done: Some(Vec::new()),
        at: now(),
        ..Delta::default()
    }));
    let vm = app.scene();
    let mut term = Terminal::new(TestBackend::new(110, 14)).unwrap();
    term.draw(|f| {
        let a = f.area();
        panes::todos::draw(f, a, &vm)
    })
    .unwrap();
    let shown = format!("{}", term.backend());
    assert_eq!(shown.matches("⏸ PARKED").count(), 1, "{shown}");
    assert_eq!(shown.matches("backed off").count(), 1, "{shown}");
    let mut st = insta::Settings::clone_current();
    st.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    st.set_prepend_module_to_snapshot(false);
    st.set_omit_expression(true);
    st.bind(|| insta::assert_snapshot!("pane_todos_breaker", term.backend()));
}
