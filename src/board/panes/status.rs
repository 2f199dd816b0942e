//! The status bar (project, live or polling, last reload, owner authority, messages), key hints, banner.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Scene;
use super::{clock, trunc, wrap_words};
use crate::board::theme::Role;
use crate::kernel::Ts;
use crate::text::escape as esc;

/// How the board learns of changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Following {
    /// Events as they happen (file events, or a database's notifications).
    Events,
    /// Polling, and why.
    Polling(String),
    /// The database's connection dropped: reconnecting, and why.
    Reconnecting(String),
}

/// A message in the status bar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The text.
    pub text: String,
    /// True for an error.
    pub error: bool,
    /// When it was set (it fades after a while).
    pub at: Ts,
}

/// Draws the status bar: the last action's result first (on two rows when it needs them), then
/// what is broken, owner authority, live or polling, the load time and the project; the last
/// ones are cut first.
pub fn status(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    let base = t.status();
    let w = area.width as usize;
    let mut first: Vec<Span> = Vec::new();
    let mut second: Option<Line> = None;
    if let Some(m) = sc.message {
        let style = if m.error {
            base.fg(t.color_of(Role::Error))
                .add_modifier(Modifier::BOLD)
        } else {
            base.fg(t.color_of(Role::Ok))
        };
        let mark = if m.error { "✗" } else { "✓" };
        let mut rows = wrap_words(&format!("{mark} {}", esc(&m.text)), w.saturating_sub(1));
        rows[0].insert(0, ' ');
        if area.height >= 2 && rows.len() > 1 {
            let rest = rows[1..].join(" ");
            second = Some(Line::from(Span::styled(
                format!("{:<w$}", trunc(&rest, w)),
                style,
            )));
        }
        first.push(Span::styled(rows[0].clone(), style));
    }
    let parts = segments(sc);
    let last = parts.len().saturating_sub(1);
    for (n, (text, bold)) in parts.into_iter().enumerate() {
        let used: usize = first.iter().map(|s| s.content.chars().count()).sum();
        let sep = if used == 0 { " " } else { " │ " };
        let room = w.saturating_sub(used + sep.chars().count());
        if room < 6 {
            break;
        }
        let style = if bold {
            base.add_modifier(Modifier::BOLD)
        } else {
            base
        };
        first.push(Span::styled(sep, base));
        // The project is a path: its last segments say which one it is.
        let shown = if n == last && !sc.project.contains("://") {
            left_trunc(&text, room)
        } else {
            trunc(&text, room)
        };
        first.push(Span::styled(shown, style));
    }
    let used: usize = first.iter().map(|s| s.content.chars().count()).sum();
    first.push(Span::styled(" ".repeat(w.saturating_sub(used)), base));
    let mut lines = vec![Line::from(first)];
    lines.extend(second);
    f.render_widget(Paragraph::new(lines).style(base), area);
}

/// Cuts a path to `w` characters from the left, keeping its last segments whole where they fit
/// (`…/projects/wx`), else its last characters, after `…`.
pub fn left_trunc(path: &str, w: usize) -> String {
    let n = path.chars().count();
    if n <= w {
        return path.to_string();
    }
    if w == 0 {
        return String::new();
    }
    let chars: Vec<char> = path.chars().collect();
    let keep = w - 1;
    let tail: String = chars[n - keep..].iter().collect();
    match tail.find('/') {
        Some(i) if i + 1 < tail.len() => format!("…{}", &tail[i..]),
        _ => format!("…{tail}"),
    }
}

/// The status bar's parts after the message, most important first, each with whether it is bold.
fn segments(sc: &Scene) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let broken = sc.broken();
    if let Some(b) = broken.label() {
        out.push((b, true));
    }
    if sc.readonly {
        out.push(("READ-ONLY".into(), true));
    } else {
        out.push((esc(&sc.owner.note).into_owned(), false));
    }
    match sc.following {
        Following::Events if broken.label().is_none() => out.push(("● live".into(), false)),
        Following::Events => {}
        Following::Polling(why) => out.push((format!("◌ polling ({})", esc(why)), false)),
        Following::Reconnecting(_) => out.push(("◌ reconnecting".into(), true)),
    }
    out.push((
        sc.last_reload
            .map(|r| format!("loaded {}", clock(r)))
            .unwrap_or_else(|| "not loaded".into()),
        false,
    ));
    out.push((esc(sc.project).into_owned(), true));
    out
}

/// Draws the key hints (or the filter being typed).
pub fn hints(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    let mut spans = Vec::new();
    if sc.filtering {
        spans.push(Span::styled(
            " / ",
            t.fg(Role::Key).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(format!("{}▏", esc(sc.filter)), t.fg(Role::Fg)));
        spans.push(Span::styled("  Enter keep · Esc clear", t.dim()));
    } else {
        spans = hint_spans(sc, area.width as usize);
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The hints that fit in `w` columns, whole hints only. When some do not fit, the bar ends with
/// `? more` (the help lists them all), so `?` always shows; where `?` is not a key (a dialog), `…`.
fn hint_spans(sc: &Scene, w: usize) -> Vec<Span<'static>> {
    let t = sc.theme;
    let len = |k: &str, h: &str| k.chars().count() + h.chars().count() + 3;
    let total: usize = sc.hints.iter().map(|(k, h, _)| len(k, h)).sum();
    let help = sc.hints.iter().any(|(k, _, _)| k == "?");
    let cut = total > w;
    let room = match (cut, help) {
        (false, _) => w,
        (true, true) => w.saturating_sub(len("?", "more")),
        (true, false) => w.saturating_sub(2),
    };
    let mut spans = Vec::new();
    let mut used = 0;
    for (k, h, enabled) in sc.hints.iter() {
        if cut && help && k == "?" {
            continue;
        }
        let n = len(k, h);
        if used + n > room {
            break;
        }
        used += n;
        // A disabled owner action stays listed, crossed out: plain without color too.
        let (key, text) = if *enabled {
            (t.fg(Role::Key).add_modifier(Modifier::BOLD), t.dim())
        } else {
            let off = t.dim().add_modifier(Modifier::CROSSED_OUT);
            (off, off)
        };
        spans.push(Span::styled(format!(" {k}"), key));
        spans.push(Span::styled(format!(" {h} "), text));
    }
    if cut && help {
        spans.push(Span::styled(
            " ?",
            t.fg(Role::Key).add_modifier(Modifier::BOLD),
        ));
        spans.push(Span::styled(" more ", t.dim()));
    } else if cut {
        spans.push(Span::styled(" …", t.dim()));
    }
    spans
}

/// Draws the banner: failed loads, quarantined files, where files disagree with the owner's seal.
pub fn banner(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    let w = area.width as usize;
    let lines: Vec<Line> = crate::board::alerts::fit(sc.banner(), area.height as usize)
        .iter()
        .map(|l| {
            let text = format!(" ⚠ {}", esc(l));
            Line::from(Span::styled(format!("{:<w$}", trunc(&text, w)), t.banner()))
        })
        .collect();
    f.render_widget(Paragraph::new(lines), area);
}
