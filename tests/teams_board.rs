//! Teams, part D (issue 9) on the board: the detail view's body, links and hand-off, and the
//! agents overlay.

use loopx::board::app::{App, AppEvent, Mode};
use loopx::board::data::Delta;
use loopx::board::draw;
use loopx::board::theme::Theme;
use loopx::kernel::{Action, Config, Event, Snapshot, Todo, Ts};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const NOW: Ts = Ts(1_795_000_000_000);

fn todo(id: &str, extra: &str) -> Todo {
    toml::from_str(&format!(
        "id = \"{id}\"\ntitle = \"title of {id}\"\nstatus = \"open\"\ncreated_by = \"ann\"\n\
         created_at = \"{c}\"\nupdated_at = \"{c}\"\n{extra}",
        c = Ts(NOW.0 - 60_000)
    ))
    .unwrap()
}

fn event(seq: u64, actor: &str, mins_ago: i64) -> Event {
    Event {
        seq,
        at: Ts(NOW.0 - mins_ago * 60_000),
        actor: actor.into(),
        action: Action::TodoAdd,
        target: "t-aaaaaa".into(),
        data: serde_json::json!({}),
        prev: "0".repeat(64),
        tx: None,
        files: None,
        sig: None,
    }
}

fn text(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
    t.draw(|f| draw::frame(f, &app.scene())).unwrap();
    let buf = t.backend().buffer();
    let mut s = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            s.push_str(buf[(x, y)].symbol());
        }
        s.push('\n');
    }
    s
}

fn press(app: &mut App, c: KeyCode) {
    app.on_key(KeyEvent::new(c, KeyModifiers::NONE));
}

#[test]
fn the_detail_view_shows_body_and_links_and_w_shows_the_roster() {
    let mut snap = Snapshot::new(Config::new("g-aaaaaa", "Board goal", NOW));
    let lease = format!(
        "[lease]\nholder = \"bob\"\nfence = 2\nacquired_at = \"{}\"\nexpires_at = \"{}\"\nhandoff_from = \"ann\"\n",
        Ts(NOW.0 - 60_000),
        Ts(NOW.0 + 600_000)
    );
    let body = "body = \"First line of the body\\nSecond \\u001b[31m line\"\n\
                links = [\"https://example.com/issues/9\"]\n";
    let t = todo("t-aaaaaa", &format!("{body}{lease}"));
    snap.todos.insert(t.id.clone(), t);
    let mut app = App::new("~/p", Theme::dark(), true, NOW);
    app.size = (120, 40);
    app.on_event(AppEvent::Loaded(Delta {
        full: Some(snap),
        journal: Some(vec![event(1, "ann", 5), event(2, "owner", 1)]),
        at: NOW,
        ..Delta::default()
    }));
    // The todos pane, the Claimed column, the detail view.
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Right);
    press(&mut app, KeyCode::Enter);
    assert!(matches!(app.mode, Mode::Detail(_)), "{:?}", app.mode);
    let s = text(&app);
    assert!(s.contains("First line of the body"), "{s}");
    assert!(s.contains("\\x1b[31m line"), "{s}");
    assert!(s.contains("https://example.com/issues/9"), "{s}");
    assert!(s.contains("handed by  ann"), "{s}");

    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('w'));
    assert!(matches!(app.mode, Mode::Agents(_)), "{:?}", app.mode);
    let s = text(&app);
    let bob = s.lines().find(|l| l.contains("bob")).expect("bob listed");
    assert!(bob.contains("working") && bob.contains("t-aaaaaa"), "{bob}");
    let ann = s.lines().find(|l| l.contains(" ann ")).expect("ann listed");
    assert!(ann.contains("idle"), "{ann}");
    assert!(
        !s.lines().any(|l| l.contains("idle") && l.contains("owner")),
        "{s}"
    );
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.mode, Mode::Normal);
}
