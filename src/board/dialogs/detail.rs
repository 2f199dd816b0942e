//! The detail view of the selected gate or todo: every field, a todo's lease and evidence; the
//! keys that act on what it shows are the panes' own.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use super::frame::{centered, scrolled_by};
use crate::board::derive::{Column, place, tampered};
use crate::board::keymap::{Intent, Scope};
use crate::board::panes::text::countdown;
use crate::board::panes::{Overlay, Pane, Scene, block, title};
use crate::board::theme::{Role, Theme};
use crate::text::escape as esc;

/// The detail view of the selection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Detail {
    /// Lines scrolled.
    pub scroll: u16,
}

impl Detail {
    /// A key that scrolls, or `false` when it closes the view.
    pub fn on_intent(&mut self, intent: Intent) -> bool {
        scrolled_by(intent, self.scroll)
            .map(|s| self.scroll = s)
            .is_some()
    }
}

impl Overlay for Detail {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Detail, Scope::Overlay, Scope::Always]
    }

    /// The detail view of the selected gate or todo.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let scroll = self.scroll;
        let t = sc.theme;
        let r = centered(
            area,
            area.width.saturating_sub(8).max(20),
            area.height.saturating_sub(4).max(6),
        );
        f.render_widget(Clear, r);
        let mut lines = Vec::new();
        let mut name = "Details".to_string();
        if sc.focus == Pane::Gates {
            if let Some(g) = sc.gates.get(sc.gate_pane.sel) {
                name = format!("Gate {}", esc(&g.id));
                gate_lines(&mut lines, g, sc);
            }
        } else if let (Some(card), Some(snap)) = (sc.selected_card(), sc.snap) {
            name = format!("Todo {}", esc(&card.id));
            todo_lines(&mut lines, card, snap, sc);
        }
        let keys = if sc.focus == Pane::Gates {
            "a approve · x reject · N next"
        } else {
            "r reassign · u release"
        };
        let name = format!("{name} · {keys} · y copy · Esc closes");
        let b = block(title(name, t), true, t);
        f.render_widget(
            Paragraph::new(lines)
                .block(b)
                .style(t.base())
                .wrap(Wrap { trim: false })
                .scroll((scroll, 0)),
            r,
        );
    }
}

/// A detail row: the key dimmed, then the value. Every value shown here may come from a file:
/// escaped once, here.
fn kv_line(t: &Theme, k: &str, v: String) -> Line<'static> {
    Line::from(vec![
        Span::styled(format!("{k:>12}  "), t.dim()),
        Span::styled(esc(&v).into_owned(), t.fg(Role::Fg)),
    ])
}

/// The detail of a gate.
fn gate_lines(lines: &mut Vec<Line<'static>>, g: &crate::kernel::Gate, sc: &Scene) {
    let t = sc.theme;
    let kv = |k: &str, v: String| kv_line(t, k, v);
    lines.push(Line::from(Span::styled(
        esc(&g.question).into_owned(),
        t.fg(Role::Fg).add_modifier(Modifier::BOLD),
    )));
    lines.push(Line::raw(""));
    let mut status = g.status.as_str().to_string();
    if tampered(g) {
        status.push_str(" (UNPROVEN: counts as pending)");
    }
    lines.push(kv("status", status));
    if !g.options.is_empty() {
        lines.push(kv("options", g.options.join(" | ")));
    }
    lines.push(kv("effect", crate::board::panes::gates::blocks_text(g)));
    lines.push(kv(
        "asked by",
        format!(
            "{} {} ({})",
            g.opened_by,
            since(sc, g.opened_at),
            g.opened_at
        ),
    ));
    if let Some(by) = &g.decided_by {
        let at = g.decided_at.map(|d| d.to_string()).unwrap_or_default();
        lines.push(kv("decided by", format!("{by} at {at}")));
    }
    if let Some(o) = &g.option {
        lines.push(kv("option", o.clone()));
    }
    if let Some(rs) = &g.reason {
        lines.push(kv("reason", rs.clone()));
    }
}

/// The detail of a todo: its fields, then its evidence.
fn todo_lines(
    lines: &mut Vec<Line<'static>>,
    card: &crate::board::derive::Card,
    snap: &crate::kernel::Snapshot,
    sc: &Scene,
) {
    let t = sc.theme;
    let kv = |k: &str, v: String| kv_line(t, k, v);
    lines.push(Line::from(Span::styled(
        esc(&card.title).into_owned(),
        t.fg(Role::Fg).add_modifier(Modifier::BOLD),
    )));
    lines.push(Line::raw(""));
    if let Some(td) = snap.todos.get(&card.id) {
        let (col, why) = place(snap, td, sc.now);
        lines.push(kv("column", format!("{} {}", col.symbol(), col.title())));
        let w = sc.why(&why);
        if !w.is_empty() && col != Column::Ready {
            lines.push(kv("why", w));
        }
        lines.push(kv("status", td.status.as_str().to_string()));
        lines.push(kv("priority", td.priority.to_string()));
        lines.push(kv("role", format!("{:?}", td.role).to_lowercase()));
        if !td.depends_on.is_empty() {
            lines.push(kv("depends on", td.depends_on.join(", ")));
        }
        routing_lines(lines, td, sc.theme);
        lease_lines(lines, td, sc);
        if !td.paths.is_empty() && td.lease.as_ref().is_none_or(|l| l.paths != td.paths) {
            lines.push(kv("paths", td.paths.join(" ")));
        }
        if let Some(e) = td.every {
            lines.push(kv("every", e.to_string()));
        }
        if let Some(d) = td.next_due_at {
            lines.push(kv("due", d.to_string()));
        }
        if let Some(rs) = &td.reason {
            lines.push(kv("reason", rs.clone()));
        }
        lines.push(kv(
            "created",
            format!("by {} at {}", td.created_by, td.created_at),
        ));
        context_lines(lines, td, sc);
    } else {
        lines.push(kv("state", sc.why(&card.why)));
    }
    evidence_lines(lines, &card.id, sc);
}

/// The evidence read for this todo, if it is the one shown.
fn evidence_lines(lines: &mut Vec<Line<'static>>, id: &str, sc: &Scene) {
    let t = sc.theme;
    let Some((shown, Ok(ev))) = &sc.evidence.shown else {
        return;
    };
    if shown != id {
        return;
    }
    lines.push(Line::raw(""));
    lines.push(Line::from(Span::styled(
        format!("Evidence ({})", ev.len()),
        t.fg(Role::Accent),
    )));
    for e in ev {
        lines.push(Line::from(vec![
            Span::styled(format!("  {} {} ", e.at, esc(&e.agent)), t.dim()),
            Span::styled(crate::board::panes::evidence::entry_text(e), t.fg(Role::Fg)),
        ]));
    }
}

/// A todo's routing: who may take it.
fn routing_lines(lines: &mut Vec<Line<'static>>, td: &crate::kernel::Todo, t: &Theme) {
    if !td.requires.is_empty() {
        lines.push(kv_line(t, "requires", td.requires.join(", ")));
    }
    if let Some(r) = &td.reviews {
        lines.push(kv_line(t, "reviews", r.clone()));
    }
    if !td.exclude_agents.is_empty() {
        lines.push(kv_line(t, "excluded", td.exclude_agents.join(", ")));
    }
}

/// A todo's lease in the detail view, or its fence when none.
fn lease_lines(lines: &mut Vec<Line<'static>>, td: &crate::kernel::Todo, sc: &Scene) {
    let kv = |k: &str, v: String| kv_line(sc.theme, k, v);
    if let Some(l) = &td.lease {
        let left = l.expires_at.since(sc.now).0;
        let state = if left > 0 && sc.absolute {
            format!("until {}", crate::board::panes::text::hhmm(l.expires_at))
        } else if left > 0 {
            format!("{} left", countdown(left))
        } else {
            "EXPIRED".into()
        };
        lines.push(kv(
            "lease",
            format!(
                "{} fence {} until {} ({state})",
                l.holder, l.fence, l.expires_at
            ),
        ));
        if !l.paths.is_empty() {
            lines.push(kv("reserves", l.paths.join(" ")));
        }
    } else {
        lines.push(kv("fence", td.fence.to_string()));
    }
}

/// `3m ago`, or the clock time with absolute times on.
fn since(sc: &Scene, at: crate::kernel::Ts) -> String {
    if sc.absolute {
        format!("at {}", sc.ago(at))
    } else {
        format!("{} ago", sc.ago(at))
    }
}

/// A todo's hand-off, links and body in the detail view (escaped: they come from files).
fn context_lines(lines: &mut Vec<Line<'static>>, td: &crate::kernel::Todo, sc: &Scene) {
    let t = sc.theme;
    if let Some(f) = td.lease.as_ref().and_then(|l| l.handoff_from.as_deref()) {
        lines.push(Line::from(vec![
            Span::styled(format!("{:>12}  ", "handed by"), t.dim()),
            Span::styled(esc(f).into_owned(), t.fg(Role::Fg)),
        ]));
    }
    for l in &td.links {
        lines.push(Line::from(vec![
            Span::styled(format!("{:>12}  ", "link"), t.dim()),
            Span::styled(esc(l).into_owned(), t.fg(Role::Accent)),
        ]));
    }
    if let Some(b) = &td.body {
        lines.push(Line::raw(""));
        for l in b.lines() {
            lines.push(Line::styled(format!("  {}", esc(l)), t.fg(Role::Fg)));
        }
    }
}
