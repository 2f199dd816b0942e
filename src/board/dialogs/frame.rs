//! What the dialogs share: a centered box with its keys row, text wrapped and styled, the
//! gate's question, and the keys that scroll an overlay.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use crate::board::keymap::Intent;
use crate::board::panes::{Scene, block, title};
use crate::board::theme::{Role, Theme};
use crate::kernel::Gate;
use crate::text::escape as esc;

/// The widest a dialog grows.
const DIALOG_W: u16 = 64;

/// A centered rectangle of at most `w` x `h`.
pub fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let [r] = Layout::horizontal([Constraint::Length(w.min(area.width))])
        .flex(Flex::Center)
        .areas(area);
    let [r] = Layout::vertical([Constraint::Length(h.min(area.height))])
        .flex(Flex::Center)
        .areas(r);
    r
}

/// An overlay's scroll after a key: `None` when the key closes it.
pub fn scrolled_by(intent: Intent, scroll: u16) -> Option<u16> {
    match intent {
        Intent::Down => Some(scroll.saturating_add(1)),
        Intent::Up => Some(scroll.saturating_sub(1)),
        Intent::PageDown => Some(scroll.saturating_add(10)),
        Intent::PageUp => Some(scroll.saturating_sub(10)),
        _ => None,
    }
}

/// Cuts `text` into lines of at most `w` characters at spaces (a longer word is cut too), at most
/// `max` lines, the last ending with `…` when text is left over.
pub fn wrap(text: &str, w: usize, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let used = cur.chars().count();
            let gap = usize::from(used > 0);
            if used + gap + word.len() <= w {
                if gap == 1 {
                    cur.push(' ');
                }
                cur.extend(word.iter());
                break;
            }
            if used > 0 {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            let rest = word.split_off(w.max(1).min(word.len()));
            out.push(word.iter().collect());
            word = rest;
        }
    }
    if !cur.is_empty() || out.is_empty() {
        out.push(cur);
    }
    if out.len() > max {
        out.truncate(max);
        if let Some(last) = out.last_mut() {
            let keep: String = last.chars().take(w.saturating_sub(1)).collect();
            *last = format!("{keep}…");
        }
    }
    out
}

/// A dialog's frame: a centered box `w` wide fitting `body` lines and one row of keys pinned at
/// the bottom (long content is cut, the keys row always shows).
pub fn frame_box(
    f: &mut Frame,
    area: Rect,
    sc: &Scene,
    name: String,
    body: Vec<Line<'static>>,
    keys: Line<'static>,
) {
    let t = sc.theme;
    let h = (body.len() as u16).saturating_add(3);
    let r = centered(area, DIALOG_W, h);
    f.render_widget(Clear, r);
    let b = block(title(name, t), true, t).style(t.base());
    let inner = b.inner(r);
    f.render_widget(b, r);
    let [top, bottom] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
    f.render_widget(Paragraph::new(body).style(t.base()), top);
    f.render_widget(Paragraph::new(keys).style(t.base()), bottom);
}

/// The width of a dialog's text on this screen.
pub fn inner_w(area: Rect) -> usize {
    usize::from(DIALOG_W.min(area.width).saturating_sub(2))
}

fn key_span(k: &str, t: &Theme) -> Span<'static> {
    Span::styled(
        format!(" {k} "),
        t.fg(Role::Key)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED),
    )
}

/// Keys for a dialog's bottom row: (key, what) pairs.
pub fn keys_line(pairs: &[(&str, &str)], t: &Theme) -> Line<'static> {
    let mut spans = Vec::new();
    for (i, (k, what)) in pairs.iter().enumerate() {
        if i > 0 {
            spans.push(Span::raw("  "));
        }
        spans.push(key_span(k, t));
        spans.push(Span::styled(format!(" {what}"), t.fg(Role::Fg)));
    }
    Line::from(spans)
}

/// Lines of one style.
pub fn styled(lines: Vec<String>, style: Style) -> impl Iterator<Item = Line<'static>> {
    lines.into_iter().map(move |l| Line::styled(l, style))
}

/// The gate of this id on screen.
pub fn gate_of<'a>(sc: &Scene<'a>, id: &str) -> Option<&'a Gate> {
    sc.snap.and_then(|s| s.gates.get(id))
}

/// The gate's question and who asked, as dialog lines.
pub fn question_lines(sc: &Scene, id: &str, w: usize, max: usize) -> Vec<Line<'static>> {
    let Some(g) = gate_of(sc, id) else {
        return Vec::new();
    };
    let text = format!("“{}” asked by {}", esc(&g.question), esc(&g.opened_by));
    styled(wrap(&text, w, max), sc.theme.fg(Role::Accent)).collect()
}

/// A line indented by two cells.
pub fn indent(l: Line<'static>) -> Line<'static> {
    let mut spans = vec![Span::raw("  ")];
    spans.extend(l.spans);
    Line::from(spans).style(l.style)
}
