//! The board on real projects, through the store: a malformed todo file shows with its file and
//! line while the rest stays, a per-file reload equals a full load, and a board that holds the
//! owner's key seals new journal lines at most once a minute (a board without it never does).
//!
//! The owner's key is found through `LOOPX_OWNER_KEY`, which this process sets once, before any
//! test reads it, to a key every project here that should hold it is initialised with.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{Project, TempDir};
use loopx::board::app::{App, AppEvent};
use loopx::board::data::Loader;
use loopx::board::draw;
use loopx::board::sealer::Sealer;
use loopx::board::theme::Theme;
use loopx::flows::owner::Owner;
use loopx::kernel::{Dur, Snapshot, Ts};
use loopx::store::FileStore;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The key this process holds as the owner's.
fn shared_key() -> &'static Path {
    static KEY: OnceLock<(TempDir, PathBuf)> = OnceLock::new();
    &KEY.get_or_init(|| {
        let home = TempDir::new("board-store-key");
        let key = home.path.join("owner.key");
        loopx::store::owner::create(&key).expect("create the owner key");
        (home, key)
    })
    .1
}

/// The project's store, with the owner key this process holds.
fn keyed(p: &Project) -> FileStore {
    FileStore::at(p.root()).with_env(loopx::store::Env {
        key: loopx::store::owner::KeyAt::at(shared_key()),
        ..Default::default()
    })
}

/// A project whose owner key is the one this process holds.
fn project_with_key(tag: &str) -> Project {
    let mut p = Project::empty(tag);
    p.key = shared_key().to_path_buf();
    p.ok(&["start-goal", "--goal-text", "Board through the store"]);
    p.ok(&["owner", "init"]);
    p
}

/// A board on a project, loaded once.
fn board(p: &Project, now: Ts) -> (Loader, App) {
    let store = keyed(p);
    let mut loader = Loader::new(Box::new(store.clone()));
    let mut app = App::new("test", Theme::dark(), false, now);
    app.size = (120, 40);
    app.owner = Owner::detect(&store);
    app.on_event(AppEvent::Loaded(loader.full(now)));
    (loader, app)
}

/// The files under `.loopx/` whose bytes differ between two listings (as file events report).
fn changed(p: &Project, before: &BTreeMap<String, Vec<u8>>) -> Vec<PathBuf> {
    let after = p.files();
    let mut out: Vec<PathBuf> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(v))
        .map(|(k, _)| p.lx(k))
        .collect();
    out.extend(
        before
            .keys()
            .filter(|k| !after.contains_key(*k))
            .map(|k| p.lx(k)),
    );
    out
}

/// A snapshot as text, maps in a fixed order.
fn shape(s: &Snapshot) -> String {
    let archived: BTreeMap<_, _> = s.archived.iter().collect();
    format!(
        "{:?}",
        (
            &s.config,
            &s.todos,
            &s.gates,
            &s.quota,
            archived,
            &s.quarantined,
            &s.owner_notes,
            &s.seal
        )
    )
}

fn screen(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 40)).expect("terminal");
    t.draw(|f| draw::frame(f, &app.scene())).expect("draw");
    t.backend().to_string()
}

#[test]
fn a_malformed_todo_shows_with_file_and_line_while_the_others_stay() {
    let p = project_with_key("quarantine");
    let good = p.add("Still here", &[]);
    let bad = p.add("Soon broken", &[]);
    let now = Ts::now();
    let (mut loader, mut app) = board(&p, now);
    let path = p.lx(&format!("todos/{bad}.toml"));
    let text = std::fs::read_to_string(&path).expect("todo file");
    std::fs::write(
        &path,
        format!("schema_version = 1\nid = \"{bad}\"\ntitle = \"oops\n{text}"),
    )
    .expect("break it");

    app.on_event(AppEvent::Loaded(
        loader.changed(std::slice::from_ref(&path), now),
    ));
    let snap = app.snap.as_ref().expect("a state");
    assert!(snap.todos.contains_key(&good), "the other todo stays");
    assert!(!snap.todos.contains_key(&bad), "the bad one is not offered");
    assert_eq!(
        snap.quarantined[&bad].line,
        Some(3),
        "{:?}",
        snap.quarantined
    );
    let s = screen(&app);
    let want = format!("{bad} QUARANTINED, the other todos still run: .loopx/todos/{bad}.toml:3");
    assert!(s.contains(&want), "{s}");
    assert!(s.contains("Still here"), "{s}");

    // A full load (start, Ctrl-R) says the same.
    let d = loader.full(now);
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    app.on_event(AppEvent::Loaded(d));
    assert!(screen(&app).contains(&want));

    // Fixed by hand: back on the board, the banner gone.
    std::fs::write(&path, text).expect("fix it");
    app.on_event(AppEvent::Loaded(loader.changed(&[path], now)));
    let snap = app.snap.as_ref().expect("a state");
    assert!(snap.todos.contains_key(&bad) && snap.quarantined.is_empty());
    assert_eq!(app.layout_input().banner, 0);
}

#[test]
fn a_malformed_config_keeps_the_last_good_state_with_the_error() {
    let p = project_with_key("badconfig");
    let id = p.add("Stays on screen", &[]);
    let now = Ts::now();
    let (mut loader, mut app) = board(&p, now);
    let cfg = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&cfg).expect("config");
    std::fs::write(&cfg, "schema_version = 1\n[goal\n").expect("break it");
    app.on_event(AppEvent::Loaded(
        loader.changed(std::slice::from_ref(&cfg), now),
    ));
    assert!(
        app.snap
            .as_ref()
            .expect("last good")
            .todos
            .contains_key(&id)
    );
    let s = screen(&app);
    assert!(
        s.contains("AGENTS REFUSED: .loopx/loopx.toml:2 does not load, so every command fails"),
        "{s}"
    );
    // Another file changing meanwhile does not hide the error.
    let todo = p.lx(&format!("todos/{id}.toml"));
    app.on_event(AppEvent::Loaded(loader.changed(&[todo], now)));
    assert!(screen(&app).contains("AGENTS REFUSED"));
    std::fs::write(&cfg, text).expect("fix it");
    app.on_event(AppEvent::Loaded(loader.changed(&[cfg], now)));
    assert!(app.problems.is_empty(), "{:?}", app.problems);
}

#[test]
fn a_reload_by_file_equals_a_full_load() {
    let p = project_with_key("reload");
    let now = Ts::now();
    let (mut loader, _app) = board(&p, now);
    let store = keyed(&p);
    let a = p.add("First", &[]);
    let steps: Vec<Vec<String>> = vec![
        vec!["todo", "add", "Second", "--depends-on", &a],
        vec!["--agent", "agent-a", "todo", "claim", &a],
        vec![
            "--agent",
            "agent-a",
            "todo",
            "update",
            &a,
            "--status",
            "done",
            "--evidence",
            "ok",
        ],
        vec!["--agent", "agent-a", "gate", "open", "Ship it?"],
        vec!["goal", "pause"],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect();
    let mut before = p.files();
    loader.changed(&changed(&p, &BTreeMap::new()), now);
    for step in steps {
        let args: Vec<&str> = step.iter().map(String::as_str).collect();
        p.ok(&args);
        let paths = changed(&p, &before);
        before = p.files();
        let d = loader.changed(&paths, now);
        let full = store.load_view().expect("full load").snap;
        let got = d.full.unwrap_or_else(|| panic!("no state after {args:?}"));
        assert_eq!(shape(&got), shape(&full), "after {args:?}");
    }
    // A hand edit of the goal's status: the seal wins, and the note says so.
    let cfg = p.lx("loopx.toml");
    let text = std::fs::read_to_string(&cfg).expect("config");
    std::fs::write(
        &cfg,
        text.replace("status = \"paused\"", "status = \"active\""),
    )
    .expect("edit");
    let d = loader.changed(&[cfg], now);
    let got = d.full.expect("a state");
    assert_eq!(got.config.goal.status, loopx::kernel::GoalStatus::Paused);
    assert!(!got.owner_notes.is_empty());
}

/// The bytes of `owner.seal`.
fn seal_of(p: &Project) -> String {
    std::fs::read_to_string(p.lx("owner.seal")).unwrap_or_default()
}

/// Picks up what changed since `before`, as file events would.
fn refresh(p: &Project, loader: &mut Loader, app: &mut App, before: &BTreeMap<String, Vec<u8>>) {
    let paths = changed(p, before);
    let now = app.now;
    app.on_event(AppEvent::Loaded(loader.changed(&paths, now)));
}

#[test]
fn a_board_with_the_key_seals_new_lines_at_most_once_a_minute() {
    let p = project_with_key("seals");
    let t0 = Ts::now();
    let (mut loader, mut app) = board(&p, t0);
    assert!(app.owner.verified, "{}", app.owner.note);
    let store = keyed(&p);
    let mut sealer = Sealer::new(Dur(60_000));
    let tick = |s: &mut Sealer, app: &mut App, at: i64| {
        let now = Ts(t0.0 + at);
        app.on_event(AppEvent::Tick(now));
        s.tick(&store, app, now);
    };

    // Nothing new since `owner init` sealed: nothing to do.
    let sealed = seal_of(&p);
    tick(&mut sealer, &mut app, 0);
    assert_eq!(seal_of(&p), sealed);

    // An agent adds a todo from another process: the next tick seals it.
    let before = p.files();
    p.ok_as("agent-a", &["todo", "add", "From an agent"]);
    refresh(&p, &mut loader, &mut app, &before);
    tick(&mut sealer, &mut app, 1_000);
    assert_ne!(seal_of(&p), sealed, "the board sealed the new line");
    let last = p.journal().last().cloned().expect("a line");
    assert_eq!(last["action"], "owner.seal");
    assert!(last["sig"].is_string(), "{last}");
    let sealed = seal_of(&p);

    // Another line 10 s later waits for the minute to pass.
    let before = p.files();
    p.ok_as("agent-a", &["todo", "add", "Another"]);
    refresh(&p, &mut loader, &mut app, &before);
    tick(&mut sealer, &mut app, 11_000);
    assert_eq!(seal_of(&p), sealed, "at most once a minute");
    tick(&mut sealer, &mut app, 61_000);
    assert_ne!(seal_of(&p), sealed, "sealed once the minute passed");
    let sealed = seal_of(&p);

    // Its own seal line is signed: no new line, no seal.
    let before = p.files();
    refresh(&p, &mut loader, &mut app, &before);
    tick(&mut sealer, &mut app, 200_000);
    assert_eq!(seal_of(&p), sealed);
    assert!(
        app.message.as_ref().is_none_or(|m| !m.error),
        "{:?}",
        app.message
    );
    let (code, v) = p.json(&["doctor"]);
    assert_eq!(code, 0, "{v}");

    // Read-only: never.
    let before = p.files();
    p.ok_as("agent-a", &["todo", "add", "Third"]);
    refresh(&p, &mut loader, &mut app, &before);
    app.readonly = true;
    tick(&mut sealer, &mut app, 400_000);
    assert_eq!(seal_of(&p), sealed);
}

#[test]
fn a_board_without_the_key_never_writes_the_seal() {
    // This project's owner key is its own, not the one this process holds.
    let p = Project::new("noseal");
    let t0 = Ts::now();
    let (mut loader, mut app) = board(&p, t0);
    assert!(!app.owner.verified, "{}", app.owner.note);
    let store = keyed(&p);
    let sealed = seal_of(&p);
    assert!(!sealed.is_empty());
    let mut sealer = Sealer::new(Dur(1_000));
    for k in 0..5 {
        let before = p.files();
        p.ok_as("agent-a", &["todo", "add", &format!("Agent todo {k}")]);
        refresh(&p, &mut loader, &mut app, &before);
        let now = Ts(t0.0 + (k + 1) * 120_000);
        app.on_event(AppEvent::Tick(now));
        sealer.tick(&store, &mut app, now);
        assert!(!app.owner.verified);
    }
    assert_eq!(seal_of(&p), sealed, "owner.seal unchanged");
    assert!(
        !p.journal().iter().any(|l| l["action"] == "owner.seal"),
        "no seal line"
    );
}
