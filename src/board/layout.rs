//! Where each pane goes for a terminal size: one function used by drawing and by mouse clicks.

use ratatui::layout::{Constraint, Layout, Position, Rect};

use crate::board::app::Pane;
use crate::board::derive::Column;

/// Below this width or height the board shows one pane at a time.
pub const MIN_WIDTH: u16 = 80;
/// See [`MIN_WIDTH`].
pub const MIN_HEIGHT: u16 = 20;

/// What the layout depends on besides the size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    /// Gates listed.
    pub gates: usize,
    /// Gates pending.
    pub pending: usize,
    /// Rows of the problem banner (0: none).
    pub banner: u16,
    /// The focused pane (the only one shown when narrow).
    pub focus: Pane,
}

/// The areas of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Areas {
    /// The objective header.
    pub header: Rect,
    /// The problem banner.
    pub banner: Option<Rect>,
    /// The focusable panes.
    pub panes: Vec<(Pane, Rect)>,
    /// The quota pane (absent when narrow).
    pub quota: Option<Rect>,
    /// The status bar.
    pub status: Rect,
    /// The key-hint bar.
    pub hints: Rect,
    /// One pane at a time.
    pub narrow: bool,
}

impl Areas {
    /// The area of a pane, if shown.
    pub fn pane(&self, p: Pane) -> Option<Rect> {
        self.panes.iter().find(|(q, _)| *q == p).map(|(_, r)| *r)
    }
}

/// Lays out a frame.
pub fn areas(area: Rect, input: &Input) -> Areas {
    let narrow = area.width < MIN_WIDTH || area.height < MIN_HEIGHT;
    let header_h = if narrow {
        1
    } else if area.height >= 32 {
        3
    } else {
        2
    };
    let banner_h = if narrow {
        input.banner.min(1)
    } else {
        input.banner
    };
    let [header, banner, body, status, hints] = Layout::vertical([
        Constraint::Length(header_h),
        Constraint::Length(banner_h),
        Constraint::Min(0),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let banner = (banner_h > 0).then_some(banner);
    if narrow {
        return Areas {
            header,
            banner,
            panes: vec![(input.focus, body)],
            quota: None,
            status,
            hints,
            narrow,
        };
    }
    let bottom_h: u16 = (body.height / 3).clamp(6, 14);
    let rest = body.height.saturating_sub(bottom_h);
    let need = 2 + input.gates.max(1) as u16;
    let gates_h = need.clamp(3, (rest * 2 / 5).max(3));
    let [gates, todos, bottom] = Layout::vertical([
        Constraint::Length(gates_h),
        Constraint::Min(4),
        Constraint::Length(bottom_h),
    ])
    .areas(body);
    let [evidence, activity, quota] = Layout::horizontal([
        Constraint::Percentage(37),
        Constraint::Percentage(38),
        Constraint::Percentage(25),
    ])
    .areas(bottom);
    Areas {
        header,
        banner,
        panes: vec![
            (Pane::Gates, gates),
            (Pane::Todos, todos),
            (Pane::Evidence, evidence),
            (Pane::Activity, activity),
        ],
        quota: Some(quota),
        status,
        hints,
        narrow,
    }
}

/// The inside of a bordered pane.
pub fn inner(r: Rect) -> Rect {
    Rect::new(
        r.x + 1,
        r.y + 1,
        r.width.saturating_sub(2),
        r.height.saturating_sub(2),
    )
}

/// The first row shown so that row `sel` is visible in `visible` rows.
pub fn offset(sel: usize, visible: usize) -> usize {
    if visible == 0 || sel < visible {
        0
    } else {
        sel + 1 - visible
    }
}

/// The five column areas inside the todos pane.
pub fn todo_columns(pane: Rect) -> [Rect; 5] {
    let i = inner(pane);
    Layout::horizontal([Constraint::Ratio(1, 5); 5]).areas(i)
}

/// Lines per card.
pub const CARD_LINES: usize = 2;

/// The column and card row under a click in the todos pane.
pub fn todo_hit(
    pane: Rect,
    pos: Position,
    sel: &[usize; 5],
    cur: Column,
) -> (Column, Option<usize>) {
    let cols = todo_columns(pane);
    let Some(ci) = cols
        .iter()
        .position(|c| pos.x >= c.x && pos.x < c.x + c.width.max(1))
    else {
        return (cur, None);
    };
    let c = cols[ci];
    if pos.y <= c.y {
        return (Column::ALL[ci], None);
    }
    let visible = (c.height.saturating_sub(1) as usize) / CARD_LINES;
    let row = (pos.y - c.y - 1) as usize / CARD_LINES;
    (Column::ALL[ci], Some(offset(sel[ci], visible) + row))
}

/// The gate row under a click in the gates pane.
pub fn gate_hit(pane: Rect, pos: Position, sel: usize) -> Option<usize> {
    let i = inner(pane);
    if !i.contains(pos) {
        return None;
    }
    Some(offset(sel, i.height as usize) + (pos.y - i.y) as usize)
}
