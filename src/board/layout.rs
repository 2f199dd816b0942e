//! Where each pane goes for a terminal size: one function used by drawing and by mouse clicks.

use ratatui::layout::{Constraint, Layout, Position, Rect};

use crate::board::derive::{Column, Columns, Why};

/// A pane that can take focus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pane {
    /// Gates awaiting the owner, and decided ones.
    Gates,
    /// The todo board.
    Todos,
    /// The selected todo's evidence.
    Evidence,
    /// The journal's activity feed.
    Activity,
}

impl Pane {
    /// Focus order.
    pub const ALL: [Pane; 4] = [Pane::Gates, Pane::Todos, Pane::Evidence, Pane::Activity];

    /// The pane's title.
    pub fn title(self) -> &'static str {
        match self {
            Pane::Gates => "Gates",
            Pane::Todos => "Todos",
            Pane::Evidence => "Evidence",
            Pane::Activity => "Activity",
        }
    }
}

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
    /// What the todo columns need.
    pub todos: TodoNeeds,
    /// Rows of the status bar: 2 when the message does not fit in one.
    pub status: u16,
    /// Rows the selected gate takes, wrapped whole at the gates pane's inner width (1: none).
    pub gate_rows: u16,
}

/// What the todo columns need from the layout: how many cards each holds, how wide each would
/// like to be, and the focused column (shown even when empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TodoNeeds {
    /// Cards per column.
    pub counts: [usize; 5],
    /// The width each column would like (its longest title or holder among its first cards).
    pub wants: [u16; 5],
    /// The width each column needs (its longest lease holder in full), given first where the
    /// pane has room for every column's need.
    pub needs: [u16; 5],
    /// The focused column's index.
    pub col: usize,
}

/// How many cards of a column are measured for its width (the rest scroll).
const WANT_SCAN: usize = 64;
/// The most width a column asks for.
const WANT_MAX: u16 = 64;
/// Below this inner width the Done column folds into the pane's title unless focused.
pub const DONE_FOLD_WIDTH: u16 = 100;

/// The needs of these columns, with `col` focused.
pub fn todo_needs(columns: &Columns, col: Column) -> TodoNeeds {
    let mut n = TodoNeeds {
        col: col.index(),
        ..TodoNeeds::default()
    };
    for (i, cards) in columns.cols.iter().enumerate() {
        n.counts[i] = cards.len();
        let holder = cards
            .iter()
            .take(WANT_SCAN)
            .filter_map(|c| match &c.why {
                Why::Lease { holder, .. } => Some(holder.chars().count() + 5),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        n.needs[i] = holder.min(usize::from(WANT_MAX)) as u16;
        let widest = cards
            .iter()
            .take(WANT_SCAN)
            .map(|c| {
                // `›P1 title` and `  t-abc123 holder ⏱12:34 #3`, with a column gap.
                let title = c.title.chars().count() + 5;
                let note = match &c.why {
                    // `t-abc123 holder ⏱12:34 #3`.
                    Why::Lease { holder, .. } => c.id.chars().count() + holder.chars().count() + 15,
                    _ => c.id.chars().count() + 3,
                };
                title.max(note)
            })
            .max()
            .unwrap_or(0);
        n.wants[i] = (widest.min(usize::from(WANT_MAX)) as u16).max(12);
    }
    n
}

/// Rows the status bar needs for a message (with its mark) at this width: 1, or 2 when cut.
pub fn status_rows(message: Option<&str>, width: u16) -> u16 {
    let len = message.map_or(0, |m| m.chars().count() + 3);
    if len > usize::from(width) { 2 } else { 1 }
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
    /// The todo columns inside the todos pane (zero wide when folded or not shown).
    pub todo_cols: [Rect; 5],
    /// Lines per todo card (see [`card_lines`]).
    pub card_lines: usize,
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

impl Areas {
    /// The areas of a frame: the rows around the panes, the panes, the todo columns and their
    /// card lines, and the quota box (none when narrow).
    fn of(
        (header, banner, status, hints): (Rect, Option<Rect>, Rect, Rect),
        panes: Vec<(Pane, Rect)>,
        (todo_cols, card_lines): ([Rect; 5], usize),
        quota: Option<Rect>,
    ) -> Areas {
        Areas {
            header,
            banner,
            panes,
            card_lines,
            todo_cols,
            narrow: quota.is_none(),
            quota,
            status,
            hints,
        }
    }
}

/// Lays out a frame.
pub fn areas(area: Rect, input: &Input) -> Areas {
    let narrow = area.width < MIN_WIDTH || area.height < MIN_HEIGHT;
    let ([header, banner, body, status, hints], banner_h) = rows(area, input, narrow);
    let banner = (banner_h > 0).then_some(banner);
    if narrow {
        let todo_cols = if input.focus == Pane::Todos {
            todo_columns(body, &input.todos)
        } else {
            [Rect::default(); 5]
        };
        let card_lines = card_lines(&todo_cols, &input.todos);
        let panes = vec![(input.focus, body)];
        return Areas::of(
            (header, banner, status, hints),
            panes,
            (todo_cols, card_lines),
            None,
        );
    }
    let bottom_h: u16 = (body.height / 3).clamp(6, 14);
    let gates_h = gates_height(body.height.saturating_sub(bottom_h), input);
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
    let panes = vec![
        (Pane::Gates, gates),
        (Pane::Todos, todos),
        (Pane::Evidence, evidence),
        (Pane::Activity, activity),
    ];
    let cols = todo_columns(todos, &input.todos);
    let lines = card_lines(&cols, &input.todos);
    Areas::of(
        (header, banner, status, hints),
        panes,
        (cols, lines),
        Some(quota),
    )
}

/// The frame's rows (header, banner, body, status bar and key hints) and the banner's height
/// asked for.
fn rows(area: Rect, input: &Input, narrow: bool) -> ([Rect; 5], u16) {
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
    let rows = Layout::vertical([
        Constraint::Length(header_h),
        Constraint::Length(banner_h),
        Constraint::Min(0),
        Constraint::Length(input.status.clamp(1, 2)),
        Constraint::Length(1),
    ]);
    (rows.areas(area), banner_h)
}

/// The gates pane's height out of `rest` rows: the selected gate is shown whole, even when that
/// takes rows from the todos.
fn gates_height(rest: u16, input: &Input) -> u16 {
    let extra = input.gate_rows.max(1) - 1;
    let need = 2 + input.gates.max(1) as u16 + extra;
    let cap = (rest * 2 / 5)
        .max(3 + extra)
        .min(rest.saturating_sub(4))
        .max(3);
    need.clamp(3, cap)
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

/// True for the columns drawn as columns: those with cards, and the focused one; the Done column
/// folds into the title below [`DONE_FOLD_WIDTH`] unless focused.
pub fn shown_columns(width: u16, needs: &TodoNeeds) -> [bool; 5] {
    let done = Column::Done.index();
    std::array::from_fn(|i| {
        i == needs.col || (needs.counts[i] > 0 && (i != done || width >= DONE_FOLD_WIDTH))
    })
}

/// The five column areas inside the todos pane: folded ones are zero wide; the others share the
/// width so that each gets what it wants where it can, the rest evenly.
pub fn todo_columns(pane: Rect, needs: &TodoNeeds) -> [Rect; 5] {
    let i = inner(pane);
    let shown = shown_columns(i.width, needs);
    let widths = share(i.width, &shown, &needs.wants, &needs.needs);
    let mut x = i.x;
    std::array::from_fn(|c| {
        let r = Rect::new(x, i.y, widths[c], i.height);
        x += widths[c];
        r
    })
}

/// Splits `total` among the shown columns like water poured over steps: every column gets the
/// same width where it can, never less than it needs (when all needs fit) nor more than it
/// wants; spare width then goes evenly to all.
fn share(total: u16, shown: &[bool; 5], wants: &[u16; 5], needs: &[u16; 5]) -> [u16; 5] {
    let all: Vec<usize> = (0..5).filter(|i| shown[*i]).collect();
    let need_sum: u16 = all.iter().map(|c| needs[*c]).sum();
    let floor = |c: usize| if need_sum <= total { needs[c] } else { 0 };
    let at = |level: u16, c: usize| level.max(floor(c)).min(wants[c].max(floor(c)));
    let used = |level: u16| all.iter().map(|c| u32::from(at(level, *c))).sum::<u32>();
    // The highest level that fits.
    let (mut lo, mut hi) = (0u16, total);
    while lo < hi {
        let mid = hi - (hi - lo) / 2;
        if used(mid) <= u32::from(total) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut out = [0u16; 5];
    for c in &all {
        out[*c] = at(lo, *c);
    }
    let mut left = total - out.iter().sum::<u16>();
    // What the level leaves: one cell each to columns still short of what they want, then to all.
    for c in &all {
        if left > 0 && out[*c] < wants[*c] {
            out[*c] += 1;
            left -= 1;
        }
    }
    let n = all.len().max(1) as u16;
    for (k, c) in all.iter().enumerate() {
        out[*c] += left / n + u16::from((k as u16) < left % n);
    }
    out
}

/// Lines per card: a title line and a note line, or two title lines where a title is cut and
/// every shown column's cards still fit.
pub fn card_lines(cols: &[Rect; 5], needs: &TodoNeeds) -> usize {
    let shown = || (0..5).filter(|i| cols[*i].width > 0);
    let cut = shown().any(|i| needs.wants[i] > cols[i].width);
    let fits = shown().all(|i| needs.counts[i] * 3 < usize::from(cols[i].height));
    if cut && fits { 3 } else { 2 }
}

/// The column and card row under a click in the todos pane.
pub fn todo_hit(
    areas: &Areas,
    pos: Position,
    sel: &[usize; 5],
    cur: Column,
) -> (Column, Option<usize>) {
    let cols = &areas.todo_cols;
    let Some(ci) = cols
        .iter()
        .position(|c| c.width > 0 && pos.x >= c.x && pos.x < c.x + c.width)
    else {
        return (cur, None);
    };
    let c = cols[ci];
    if pos.y <= c.y {
        return (Column::ALL[ci], None);
    }
    let lines = areas.card_lines;
    let visible = (c.height.saturating_sub(1) as usize) / lines;
    let row = (pos.y - c.y - 1) as usize / lines;
    (Column::ALL[ci], Some(offset(sel[ci], visible) + row))
}

/// The first gate shown so that gate `sel`, taking `sel_rows` rows, is whole in `visible` rows.
pub fn gate_offset(sel: usize, sel_rows: usize, visible: usize) -> usize {
    offset(
        sel,
        visible.saturating_sub(sel_rows.saturating_sub(1)).max(1),
    )
}

/// The gate under a click in the gates pane, where the selected gate `sel` takes `sel_rows`.
pub fn gate_hit(pane: Rect, pos: Position, sel: usize, sel_rows: usize) -> Option<usize> {
    let i = inner(pane);
    if !i.contains(pos) {
        return None;
    }
    let off = gate_offset(sel, sel_rows, i.height as usize);
    let r = (pos.y - i.y) as usize;
    let before = sel.saturating_sub(off);
    Some(if r < before {
        off + r
    } else if r < before + sel_rows {
        sel
    } else {
        off + r + 1 - sel_rows.max(1)
    })
}
