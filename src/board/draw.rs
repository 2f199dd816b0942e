//! The one draw entry: a whole frame, drawn purely from its scene.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::Block;

use crate::board::layout::{self, Areas};
pub use crate::board::panes::Scene;
use crate::board::panes::{self, Pane};
use crate::kernel::GoalStatus;

/// The hints that fit the goal's state: `p pause` while active, `p resume` while paused, neither
/// once complete (or before a goal is loaded).
pub fn fit_state(
    hints: Vec<(String, &'static str, bool)>,
    goal: Option<GoalStatus>,
) -> Vec<(String, &'static str, bool)> {
    hints
        .into_iter()
        .filter_map(|(k, h, on)| match (h, goal) {
            ("pause", Some(GoalStatus::Active)) => Some((k, h, on)),
            ("pause", Some(GoalStatus::Paused)) => Some((k, "resume", on)),
            ("pause", _) => None,
            _ => Some((k, h, on)),
        })
        .collect()
}

/// Draws one whole frame.
pub fn frame(f: &mut Frame, sc: &Scene) {
    let area = f.area();
    f.render_widget(Block::new().style(sc.theme.base()), area);
    let areas = layout::areas(area, &sc.layout);
    draw_areas(f, sc, &areas);
    if let Some(o) = sc.overlay {
        o.draw(f, area, sc);
    }
}

fn draw_areas(f: &mut Frame, sc: &Scene, a: &Areas) {
    panes::objective::draw(f, a.header, sc, a.narrow);
    if let Some(b) = a.banner {
        panes::status::banner(f, b, sc);
    }
    for (p, r) in &a.panes {
        pane(f, *p, *r, sc);
    }
    if let Some(q) = a.quota {
        panes::quota::draw(f, q, sc);
    }
    panes::status::status(f, a.status, sc);
    panes::status::hints(f, a.hints, sc);
}

/// Draws one focusable pane.
pub fn pane(f: &mut Frame, p: Pane, r: Rect, sc: &Scene) {
    match p {
        Pane::Gates => panes::gates::draw(f, r, sc),
        Pane::Todos => panes::todos::draw(f, r, sc),
        Pane::Evidence => panes::evidence::draw(f, r, sc),
        Pane::Activity => panes::activity::draw(f, r, sc),
    }
}
