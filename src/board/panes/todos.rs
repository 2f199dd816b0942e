//! The todo board: Ready, Claimed (holder, fence, live countdown, expired in red), Waiting, Blocked,
//! Done; an overdue monitor is marked `⚠ OVERDUE`.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::objective::column_role;
use super::{block, gutter, priority_style, row_style, title, trunc};
use crate::board::app::{Pane, SortBy};
use crate::board::derive::{Card, Column, Why};
use crate::board::layout::{CARD_LINES, offset, todo_columns};
use crate::board::theme::Role;
use crate::board::view::ViewModel;
use crate::text::escape as esc;

/// Draws the todos pane.
pub fn render(f: &mut Frame, area: Rect, vm: &ViewModel) {
    let t = vm.theme;
    let focused = vm.focus == Pane::Todos;
    let mut head = vec![title("Todos", t)];
    if !vm.filter.is_empty() {
        head.push(Span::styled(
            format!(" filter: {} ", esc(vm.filter)),
            t.fg(Role::Accent).add_modifier(Modifier::BOLD),
        ));
    }
    if vm.sort != SortBy::Pick {
        head.push(Span::styled(format!(" sort: {} ", vm.sort.name()), t.dim()));
    }
    f.render_widget(block(Line::from(head), focused, t), area);
    for (ci, r) in todo_columns(area).into_iter().enumerate() {
        column(f, r, vm, Column::ALL[ci], focused);
    }
}

/// Draws one column: a heading, then two lines per card.
pub fn column(f: &mut Frame, r: Rect, vm: &ViewModel, col: Column, pane_focused: bool) {
    let t = vm.theme;
    let ci = col.index();
    let cards = &vm.columns.cols[ci];
    let focused = pane_focused && vm.col == col;
    let w = r.width.saturating_sub(1) as usize;
    let head_style = if focused {
        t.fg(column_role(col))
            .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    } else {
        t.fg(column_role(col)).add_modifier(Modifier::BOLD)
    };
    let mut lines = vec![Line::from(Span::styled(
        trunc(
            &format!("{} {} {}", col.symbol(), col.title(), cards.len()),
            w,
        ),
        head_style,
    ))];
    let visible = (r.height.saturating_sub(1) as usize) / CARD_LINES;
    let sel = vm.col_sel[ci];
    let off = offset(sel, visible);
    for (n, c) in cards.iter().enumerate().skip(off).take(visible) {
        let selected = n == sel && vm.col == col;
        let (a, b) = card_lines(c, vm, w, selected, focused);
        lines.push(a);
        lines.push(b);
    }
    if cards.is_empty() {
        lines.push(Line::from(Span::styled(trunc("  (none)", w), t.dim())));
    } else if off + visible < cards.len() {
        let more = cards.len() - off - visible;
        if let Some(last) = lines.last_mut()
            && visible > 0
        {
            *last = Line::from(Span::styled(trunc(&format!("  ↓ {more} more"), w), t.dim()));
        }
    }
    f.render_widget(Paragraph::new(lines), r);
}

fn card_lines<'a>(
    c: &Card,
    vm: &ViewModel,
    w: usize,
    selected: bool,
    focused: bool,
) -> (Line<'a>, Line<'a>) {
    let t = vm.theme;
    let expired = c.expired(vm.now);
    let prio = if matches!(c.why, Why::Finished(..)) {
        match &c.why {
            Why::Finished(crate::kernel::Status::Cancelled, ..) => "✗".to_string(),
            _ => "✓".to_string(),
        }
    } else {
        c.priority.to_string()
    };
    let title_w = w.saturating_sub(prio.chars().count() + 2);
    let first = format!(
        "{}{} {}",
        gutter(selected),
        prio,
        trunc(&esc(&c.title), title_w)
    );
    let first = format!("{first:<w$}");
    let base = if expired {
        t.fg(Role::Error).add_modifier(Modifier::BOLD)
    } else {
        t.fg(Role::Fg)
    };
    let line1 = if selected && focused {
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
    };
    let note = match &c.why {
        Why::None => esc(&c.id).into_owned(),
        Why::Lease {
            holder,
            fence,
            expires_at,
        } if expired => format!(
            "! EXPIRED {} {} #{fence}",
            vm.over(*expires_at),
            esc(holder)
        ),
        Why::Lease {
            holder,
            fence,
            expires_at,
        } => {
            format!("⏱{} {} #{fence}", vm.left(*expires_at), esc(holder))
        }
        other => esc(&vm.why(other)).into_owned(),
    };
    // An overdue monitor (issue 8) is marked before its note, in the warning color.
    let late = vm
        .snap
        .and_then(|s| s.todos.get(&c.id))
        .and_then(|t| crate::kernel::monitor::overdue(t, vm.now))
        .filter(|_| !matches!(c.why, Why::Finished(..)));
    let note = match late {
        Some(l) => format!("⚠ OVERDUE {} {note}", crate::board::app::ago(l.0)),
        None => note,
    };
    let note_style = if expired {
        t.fg(Role::Error).add_modifier(Modifier::BOLD)
    } else if late.is_some() {
        t.fg(Role::Warn).add_modifier(Modifier::BOLD)
    } else {
        match &c.why {
            Why::Lease { expires_at, .. } if expires_at.since(vm.now).0 < 60_000 => {
                t.fg(Role::Warn)
            }
            Why::Lease { .. } => t.fg(Role::Claimed),
            Why::Gate(_) => t.fg(Role::GatePending),
            _ => t.dim(),
        }
    };
    let line2 = Line::from(Span::styled(trunc(&format!("  {note}"), w), note_style));
    (line1, line2)
}

fn split_at_char(s: &str, n: usize) -> (String, String) {
    let i = s.char_indices().nth(n).map_or(s.len(), |(i, _)| i);
    (s[..i].to_string(), s[i..].to_string())
}
