//! Frames of the board for tests: a whole screen drawn with `TestBackend`, and insta snapshots
//! of it at 80x24 and 120x40 in `snapshots/`.

use std::path::Path;

use loopx::board::app::App;
use loopx::board::draw;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The board drawn at `w` x `h`.
pub fn screen(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut a = app.clone();
    a.size = (w, h);
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw::frame(f, &a.scene())).unwrap();
    t
}

/// The board drawn at `w` x `h`, as text.
pub fn text(app: &App, w: u16, h: u16) -> String {
    screen(app, w, h).backend().to_string()
}

/// Both sizes of a screen, as `NAME_80x24` and `NAME_120x40`.
pub fn snap_both(name: &str, app: &App) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    s.set_prepend_module_to_snapshot(false);
    s.set_omit_expression(true);
    s.bind(|| {
        for (w, h) in [(80, 24), (120, 40)] {
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(app, w, h).backend());
        }
    });
}
