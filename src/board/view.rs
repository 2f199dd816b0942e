//! The one draw entry: a whole frame, drawn purely from the view model.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::Block;

use crate::board::layout::{self, Areas};
pub use crate::board::panes::ViewModel;
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
pub fn draw(f: &mut Frame, vm: &ViewModel) {
    let area = f.area();
    f.render_widget(Block::new().style(vm.theme.base()), area);
    let areas = layout::areas(area, &vm.layout);
    draw_areas(f, vm, &areas);
    if let Some(o) = vm.overlay {
        o.draw(f, area, vm);
    }
}

fn draw_areas(f: &mut Frame, vm: &ViewModel, a: &Areas) {
    panes::objective::render(f, a.header, vm, a.narrow);
    if let Some(b) = a.banner {
        panes::status::banner(f, b, vm);
    }
    for (p, r) in &a.panes {
        render_pane(f, *p, *r, vm);
    }
    if let Some(q) = a.quota {
        panes::quota::render(f, q, vm);
    }
    panes::status::status(f, a.status, vm);
    panes::status::hints(f, a.hints, vm);
}

/// Draws one focusable pane.
pub fn render_pane(f: &mut Frame, p: Pane, r: Rect, vm: &ViewModel) {
    match p {
        Pane::Gates => panes::gates::render(f, r, vm),
        Pane::Todos => panes::todos::render(f, r, vm),
        Pane::Evidence => panes::evidence::render(f, r, vm),
        Pane::Activity => panes::activity::render(f, r, vm),
    }
}
