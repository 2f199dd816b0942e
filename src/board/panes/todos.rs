//! The todo board: Ready, Claimed (holder, fence, live countdown, expired in red), Waiting, Blocked,
//! Done; an overdue monitor is marked `⚠ OVERDUE`, a todo the breaker parked `⏸ PARKED`.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Pane;
use super::Scene;
use super::keys::{OnScreen, Outcome};
use super::objective::column_role;
use super::{block, gutter, mid_trunc, priority_style, row_style, title, trunc, wrap_words};
use crate::board::derive::sort::SortBy;
use crate::board::derive::{Card, Column, Columns, Why};
use crate::board::keymap::{Intent, Scope};
use crate::board::layout::{card_lines, offset, todo_columns};
use crate::board::theme::Role;
use crate::flows::owner::OwnerAct;
use crate::text::escape as esc;

/// The todos pane's state: the focused column and the selected card per column, kept on its todo
/// across loads.
#[derive(Debug, Clone)]
pub struct TodosPane {
    /// The focused column.
    pub col: Column,
    /// The selected row per column.
    pub sel: [usize; 5],
    ids: [Option<String>; 5],
}

impl Default for TodosPane {
    fn default() -> TodosPane {
        TodosPane {
            col: Column::Ready,
            sel: [0; 5],
            ids: Default::default(),
        }
    }
}

impl TodosPane {
    /// Follows new columns, keeping each selection on the same todo while it is listed.
    pub fn set(&mut self, columns: &Columns) {
        for c in 0..5 {
            let cards = &columns.cols[c];
            if let Some(id) = &self.ids[c]
                && let Some(i) = cards.iter().position(|k| k.id == *id)
            {
                self.sel[c] = i;
            }
            self.sel[c] = self.sel[c].min(cards.len().saturating_sub(1));
            self.ids[c] = cards.get(self.sel[c]).map(|k| k.id.clone());
        }
    }

    /// Selects row `row` of the focused column, when it has one.
    pub fn select(&mut self, row: usize, columns: &Columns) {
        let c = self.col.index();
        if row < columns.cols[c].len() {
            self.sel[c] = row;
            self.ids[c] = columns.cols[c].get(row).map(|k| k.id.clone());
        }
    }

    /// Moves the focused column's selection by `by` rows.
    pub fn step(&mut self, by: i64, columns: &Columns) {
        let c = self.col.index();
        self.sel[c] = super::step(self.sel[c], by, columns.cols[c].len());
        self.ids[c] = columns.cols[c].get(self.sel[c]).map(|k| k.id.clone());
    }

    /// Focuses the column left (`-1`) or right (`1`) of this one.
    pub fn shift(&mut self, by: i64) {
        let i = self.col.index() as i64 + by;
        self.col = Column::ALL[i.clamp(0, 4) as usize];
    }

    /// The selected card of the focused column.
    pub fn selected<'a>(&self, columns: &'a Columns) -> Option<&'a Card> {
        let c = self.col.index();
        columns.cols[c].get(self.sel[c])
    }

    /// The scope of this pane's own keys.
    pub const SCOPE: Scope = Scope::Todos;

    /// Reacts to the keys this pane owns: moving the selection and the column, reassigning and
    /// releasing the selected todo's lease (the sort is the board's: it orders every column).
    pub fn handle(&mut self, intent: Intent, on: &OnScreen) -> Outcome {
        if let Some(by) = super::moves(intent) {
            self.step(by, on.columns);
            return Outcome::Moved;
        }
        match intent {
            Intent::Left | Intent::Right => {
                self.shift(if intent == Intent::Left { -1 } else { 1 });
                Outcome::Moved
            }
            Intent::Reassign => self.reassign(on),
            Intent::Release => self.release(on),
            _ => Outcome::Ignored,
        }
    }

    /// The reassign picker for the selected todo: only an open agent todo takes a lease.
    fn reassign(&self, on: &OnScreen) -> Outcome {
        let Some(id) = self.selected(on.columns).map(|c| c.id.clone()) else {
            return Outcome::error("no todo selected");
        };
        let Some(snap) = on.snap else {
            return Outcome::Done;
        };
        let Some(t) = snap.todos.get(&id) else {
            return Outcome::error(format!("{id} is not in the working set"));
        };
        if t.role != crate::kernel::Role::Agent || t.status != crate::kernel::Status::Open {
            return Outcome::error(format!(
                "{id} is not an open agent todo; only those take a lease"
            ));
        }
        let holder = t.lease.as_ref().map(|l| l.holder.clone());
        Outcome::PickAgent(id, holder)
    }

    /// Asks before releasing the selected todo's lease.
    fn release(&self, on: &OnScreen) -> Outcome {
        let Some(id) = self.selected(on.columns).map(|c| c.id.clone()) else {
            return Outcome::error("no todo selected");
        };
        let lease = on
            .snap
            .and_then(|s| s.todos.get(&id))
            .and_then(|t| t.lease.clone());
        match lease {
            Some(l) => Outcome::Confirm(OwnerAct::Release {
                todo: id,
                holder: l.holder,
            }),
            None => Outcome::error(format!("{id} has no lease to release")),
        }
    }
}

/// Draws the todos pane: the columns with cards (and the focused one) side by side; the others
/// fold into the title with their counts.
pub fn draw(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    let focused = sc.focus == Pane::Todos;
    let cols = todo_columns(area, &sc.layout.todos);
    let mut head = vec![title("Todos", t)];
    let folded: Vec<String> = Column::ALL
        .iter()
        .zip(&cols)
        .filter(|(_, r)| r.width == 0)
        .map(|(c, _)| {
            let n = sc.columns.cols[c.index()].len();
            format!("{} {} {n}", c.symbol(), c.title())
        })
        .collect();
    if !folded.is_empty() {
        head.push(Span::styled(format!("· {} ", folded.join(" · ")), t.dim()));
    }
    if !sc.filter.is_empty() {
        head.push(Span::styled(
            format!(" filter: {} ", esc(sc.filter)),
            t.fg(Role::Accent).add_modifier(Modifier::BOLD),
        ));
    }
    if sc.sort != SortBy::Pick {
        head.push(Span::styled(format!(" sort: {} ", sc.sort.name()), t.dim()));
    }
    f.render_widget(block(Line::from(head), focused, t), area);
    let per = card_lines(&cols, &sc.layout.todos);
    for (ci, r) in cols.into_iter().enumerate() {
        if r.width > 0 {
            column(f, r, sc, Column::ALL[ci], (focused, per));
        }
    }
}

/// Draws one column: a heading, then `per` lines a card; `↑ N` in the heading and `↓ N more`
/// on the last line mark the cards scrolled out.
pub fn column(f: &mut Frame, r: Rect, sc: &Scene, col: Column, focus: (bool, usize)) {
    let (pane_focused, per) = focus;
    let t = sc.theme;
    let ci = col.index();
    let cards = &sc.columns.cols[ci];
    let focused = pane_focused && sc.todos.col == col;
    let w = r.width.saturating_sub(1) as usize;
    let head_style = if focused {
        t.fg(column_role(col))
            .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    } else {
        t.fg(column_role(col)).add_modifier(Modifier::BOLD)
    };
    let visible = (r.height.saturating_sub(1) as usize) / per;
    let sel = sc.todos.sel[ci];
    let off = offset(sel, visible);
    let mut head = format!("{} {} {}", col.symbol(), col.title(), cards.len());
    if off > 0 {
        head.push_str(&format!(" ↑{off}"));
    }
    let mut lines = vec![Line::from(Span::styled(trunc(&head, w), head_style))];
    for (n, c) in cards.iter().enumerate().skip(off).take(visible) {
        let selected = n == sel && sc.todos.col == col;
        lines.extend(card(c, sc, w, (selected, focused), per));
    }
    if cards.is_empty() {
        lines.push(Line::from(Span::styled(trunc("  (none)", w), t.dim())));
    } else if off + visible < cards.len() {
        let more = cards.len() - off - visible;
        if let Some(last) = lines.last_mut()
            && visible > 0
        {
            *last = Line::from(Span::styled(
                trunc(&format!("  ↓ {more} more"), w),
                t.fg(Role::Accent).add_modifier(Modifier::BOLD),
            ));
        }
    }
    f.render_widget(Paragraph::new(lines), r);
}

/// A lease's note: the holder in full where it fits (cut in the middle where not), then the time
/// left (or `EXPIRED` and how long ago), then the fence, dropped from the end as room runs out.
pub fn lease_note(holder: &str, fence: u64, (expired, when): (bool, &str), w: usize) -> String {
    let holder = esc(holder);
    let time = if expired {
        format!("EXPIRED {when}")
    } else {
        format!("⏱{when}")
    };
    let mark = if expired { "! " } else { "" };
    let tries = [
        format!("{mark}{holder} {time} #{fence}"),
        format!("{mark}{holder} {time}"),
        format!("{mark}{holder}{}", if expired { " EXPIRED" } else { "" }),
        format!("{mark}{holder}"),
    ];
    match tries.into_iter().find(|s| s.chars().count() <= w) {
        Some(s) => s,
        None => format!("{mark}{}", mid_trunc(&holder, w.saturating_sub(mark.len()))),
    }
}

/// A live lease's reservation as a card shows it: its first glob, and how many more.
fn reserved(sc: &Scene, id: &str) -> Option<(String, usize)> {
    let l = sc.snap?.todos.get(id)?.live_lease(sc.now)?;
    let first = esc(l.paths.first()?);
    let text = match l.paths.len() - 1 {
        0 => first.into_owned(),
        n => format!("{first} +{n}"),
    };
    Some((text, l.paths.len()))
}

/// A lease's note with its reservation after it, where room allows: the holder and time come
/// first, then the globs (cut in the middle, never under 6 characters), else `▦N` (N globs),
/// then the fence.
pub fn with_paths(
    note: String,
    holder: &str,
    (expired, when): (bool, &str),
    (paths, n): &(String, usize),
    w: usize,
) -> String {
    let full = format!("{note} · {paths}");
    if full.chars().count() <= w {
        return full;
    }
    let short = lease_note(holder, 0, (expired, when), usize::MAX);
    let short = short.rsplit_once(" #").map_or(short.as_str(), |(a, _)| a);
    let room = w.saturating_sub(short.chars().count() + 3);
    if room >= 6 {
        return format!("{short} · {}", mid_trunc(paths, room));
    }
    let mark = format!("{short} ▦{n}");
    if mark.chars().count() <= w {
        mark
    } else {
        note
    }
}

/// A title in at most `rows` lines of `w` characters, the last cut with `…` when it goes on.
pub fn title_rows(title: &str, w: usize, rows: usize) -> Vec<String> {
    let mut out = wrap_words(title, w.max(1));
    if out.len() > rows {
        let rest = out[rows - 1..].join(" ");
        out.truncate(rows - 1);
        out.push(trunc(&rest, w));
    }
    out
}

/// A card's lines: the title (one line, or two when `lines` is 3), then its note.
fn card<'a>(
    c: &Card,
    sc: &Scene,
    w: usize,
    (selected, focused): (bool, bool),
    lines: usize,
) -> Vec<Line<'a>> {
    let t = sc.theme;
    let expired = c.expired(sc.now);
    let prio = if matches!(c.why, Why::Finished(..)) {
        match &c.why {
            Why::Finished(crate::kernel::Status::Cancelled, ..) => "✗".to_string(),
            _ => "✓".to_string(),
        }
    } else {
        c.priority.to_string()
    };
    let pad = prio.chars().count() + 2;
    let rows = title_rows(&esc(&c.title), w.saturating_sub(pad), lines - 1);
    let first = format!("{}{} {}", gutter(selected), prio, rows[0]);
    let first = format!("{first:<w$}");
    let base = if expired {
        t.fg(Role::Error).add_modifier(Modifier::BOLD)
    } else {
        t.fg(Role::Fg)
    };
    let mut out = vec![if selected && focused {
        Line::from(Span::styled(first, row_style(t, true, true, base)))
    } else {
        let p_len = 1 + prio.chars().count();
        let (g, rest) = split_at_char(&first, p_len);
        Line::from(vec![
            Span::styled(
                g,
                priority_style(t, c.priority).patch(if selected {
                    t.fg(Role::Accent)
                } else {
                    t.dim()
                }),
            ),
            Span::styled(rest, row_style(t, selected, false, base)),
        ])
    }];
    for r in (1..lines - 1).map(|i| rows.get(i).map_or("", |r| r.as_str())) {
        let text = format!("{:pad$}{r:<rw$}", "", rw = w.saturating_sub(pad));
        out.push(Line::from(Span::styled(
            text,
            row_style(t, selected, focused, base),
        )));
    }
    let (note, note_style) = note(c, sc, w);
    out.push(Line::from(Span::styled(
        trunc(&format!("  {note}"), w),
        note_style,
    )));
    out
}

/// A leased card's note: the holder, the time left or over, the fence and the paths reserved;
/// the todo's id first where the holder and the time still fit after it.
fn lease_line(
    c: &Card,
    (holder, fence, expires_at): (&str, u64, crate::kernel::Ts),
    sc: &Scene,
    w: usize,
) -> String {
    let left = expires_at.since(sc.now).0;
    let when = if left <= 0 {
        sc.over(expires_at)
    } else {
        sc.left(expires_at)
    };
    let id = esc(&c.id);
    let lease = |w: usize| {
        let note = lease_note(holder, fence, (left <= 0, &when), w);
        match reserved(sc, &c.id) {
            Some(r) => with_paths(note, holder, (left <= 0, &when), &r, w),
            None => note,
        }
    };
    let w = w.saturating_sub(2);
    let after = lease(w.saturating_sub(id.chars().count() + 1));
    let whole = lease_note(holder, fence, (left <= 0, &when), usize::MAX);
    let timed = whole.rsplit_once(" #").map_or(whole.as_str(), |(a, _)| a);
    if after.starts_with(timed) {
        format!("{id} {after}")
    } else {
        lease(w)
    }
}

/// A card's note line and its style: the lease or why, marked when overdue, parked or backed off.
fn note(c: &Card, sc: &Scene, w: usize) -> (String, Style) {
    let t = sc.theme;
    let expired = c.expired(sc.now);
    let note = match &c.why {
        Why::None => esc(&c.id).into_owned(),
        Why::Lease {
            holder,
            fence,
            expires_at,
        } => lease_line(c, (holder, *fence, *expires_at), sc, w),
        other => esc(&sc.why(other)).into_owned(),
    };
    // An overdue monitor is marked before its note, in the warning color.
    let late = sc
        .snap
        .and_then(|s| s.todos.get(&c.id))
        .and_then(|t| crate::kernel::monitor::overdue(t, sc.now))
        .filter(|_| !matches!(c.why, Why::Finished(..)));
    let note = match late {
        Some(l) => format!("⚠ OVERDUE {} {note}", crate::board::panes::text::ago(l.0)),
        None => note,
    };
    // The breaker: a parked todo waits on the owner's gate; a failing one backs off.
    let held = sc.snap.and_then(|s| Some((s, s.todos.get(&c.id)?)));
    let parked = held.is_some_and(|(s, t)| crate::kernel::breaker::parked(s, t).is_some());
    let backed = held.is_some_and(|(_, t)| crate::kernel::breaker::backed_off(t, sc.now).is_some());
    let note = match (parked, backed) {
        (true, _) => format!("⏸ PARKED {note}"),
        (false, true) => format!("backed off · {note}"),
        _ => note,
    };
    let note_style = if expired {
        t.fg(Role::Error).add_modifier(Modifier::BOLD)
    } else if late.is_some() || parked {
        t.fg(Role::Warn).add_modifier(Modifier::BOLD)
    } else {
        match &c.why {
            Why::Lease { expires_at, .. } if expires_at.since(sc.now).0 < 60_000 => {
                t.fg(Role::Warn)
            }
            Why::Lease { .. } => t.fg(Role::Claimed),
            Why::Gate(_) => t.fg(Role::GatePending),
            _ => t.dim(),
        }
    };
    (note, note_style)
}

fn split_at_char(s: &str, n: usize) -> (String, String) {
    let i = s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    (s[..i].to_string(), s[i..].to_string())
}
