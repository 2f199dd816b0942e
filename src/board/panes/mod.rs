//! One file per pane, plus the shared helpers for borders, selection and truncation.

pub mod activity;
pub mod evidence;
pub mod gates;
pub mod headline;
pub mod keys;
pub mod objective;
pub mod quota;
mod scene;
pub mod status;
pub mod text;
pub mod todos;

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders};

pub use crate::board::layout::Pane;
use crate::board::theme::{Role, Theme};
pub use scene::{Overlay, Scene};

/// `cur` moved by `by` rows within `len` rows (0 when there are none).
pub fn step(cur: usize, by: i64, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    (cur as i64).saturating_add(by).clamp(0, len as i64 - 1) as usize
}

/// The rows a movement key moves the selection by, if it is one.
pub fn moves(intent: crate::board::keymap::Intent) -> Option<i64> {
    use crate::board::keymap::Intent;
    match intent {
        Intent::Up => Some(-1),
        Intent::Down => Some(1),
        Intent::PageUp => Some(-10),
        Intent::PageDown => Some(10),
        Intent::Top => Some(i64::MIN / 2),
        Intent::Bottom => Some(i64::MAX / 2),
        _ => None,
    }
}

/// A bordered pane with a title; the focused one is bold with a thick border.
pub fn block<'a>(title: impl Into<Line<'a>>, focused: bool, theme: &Theme) -> Block<'a> {
    Block::new()
        .borders(Borders::ALL)
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(theme.border(focused))
        .title(title)
}

/// A pane title: bold, in the title color.
pub fn title<'a>(text: impl Into<String>, theme: &Theme) -> Span<'a> {
    Span::styled(
        format!(" {} ", text.into()),
        theme.fg(Role::Title).add_modifier(Modifier::BOLD),
    )
}

/// Cuts `s` to `w` characters, ending with `…` when cut.
pub fn trunc(s: &str, w: usize) -> String {
    if w == 0 {
        return String::new();
    }
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    let mut out: String = s.chars().take(w - 1).collect();
    out.push('…');
    out
}

/// A row's style: the selection when selected in the focused pane, else `base`.
pub fn row_style(theme: &Theme, selected: bool, focused: bool, base: Style) -> Style {
    if selected && focused {
        theme.selected()
    } else if selected {
        base.add_modifier(Modifier::BOLD)
    } else {
        base
    }
}

/// The gutter mark of a selected row: `›`, or a space.
pub fn gutter(selected: bool) -> &'static str {
    if selected { "›" } else { " " }
}

/// The style of a priority label.
pub fn priority_style(theme: &Theme, p: crate::kernel::Priority) -> Style {
    use crate::kernel::Priority;
    match p {
        Priority::P0 => theme.fg(Role::P0).add_modifier(Modifier::BOLD),
        Priority::P1 => theme.fg(Role::P1).add_modifier(Modifier::BOLD),
        _ => theme.dim(),
    }
}

/// A `HH:MM:SS` UTC clock time.
pub fn clock(t: crate::kernel::Ts) -> String {
    let s = t.to_string();
    s.get(11..19).unwrap_or("--:--:--").to_string()
}

/// Cuts `s` to `w` characters in the middle, keeping its start and its end (`agent-…-b`), so
/// that names differing only at the end stay apart.
pub fn mid_trunc(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        return s.to_string();
    }
    if w < 5 {
        return trunc(s, w);
    }
    let tail = (w - 1) / 2;
    let head = w - 1 - tail;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// An overlay of `lines` scrolled by `scroll` rows, titled, with scroll marks on its border.
pub fn scrolled(
    f: &mut ratatui::Frame,
    r: ratatui::layout::Rect,
    (name, lines): (&str, Vec<Line<'_>>),
    scroll: u16,
    t: &Theme,
) {
    let b = scroll_marks(
        block(title(name, t), true, t),
        lines.len(),
        usize::from(scroll),
        usize::from(r.height.saturating_sub(2)),
        t,
    );
    f.render_widget(
        ratatui::widgets::Paragraph::new(lines)
            .block(b)
            .style(t.base())
            .scroll((scroll, 0)),
        r,
    );
}

/// A pane's scroll marks on its border: `↑ N` at the top right for rows above, `↓ N more` at the
/// bottom right for rows below; `total` rows, `first` the first shown, `visible` shown at once.
pub fn scroll_marks<'a>(
    b: Block<'a>,
    total: usize,
    first: usize,
    visible: usize,
    theme: &Theme,
) -> Block<'a> {
    let style = theme.fg(Role::Accent).add_modifier(Modifier::BOLD);
    let first = first.min(total);
    let below = total.saturating_sub(first + visible);
    let mut b = b;
    if first > 0 {
        b = b.title_top(Line::from(Span::styled(format!(" ↑ {first} "), style)).right_aligned());
    }
    if below > 0 {
        b = b.title_bottom(
            Line::from(Span::styled(format!(" ↓ {below} more "), style)).right_aligned(),
        );
    }
    b
}

/// `text` in lines of at most `w` characters, broken at spaces where it can.
pub fn wrap_words(text: &str, w: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let (c, n) = (cur.chars().count(), word.chars().count());
        if c > 0 && c + 1 + n > w {
            out.push(std::mem::take(&mut cur));
        } else if c > 0 {
            cur.push(' ');
        }
        let mut rest: Vec<char> = word.chars().collect();
        while w > 0 && rest.len() > w {
            out.push(rest.drain(..w).collect());
        }
        cur.extend(rest);
    }
    out.push(cur);
    out
}
