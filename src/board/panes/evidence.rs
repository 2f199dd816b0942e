//! The evidence pane: the selected todo's evidence, newest first.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Pane;
use super::Scene;
use super::keys::{OnScreen, Outcome};
use super::{block, mid_trunc, scroll_marks, title, trunc};
use crate::board::keymap::Intent;
use crate::board::layout::inner;
use crate::board::theme::Role;
use crate::kernel::{Evidence, EvidenceKind, Problem};
use crate::text::escape as esc;

/// The evidence pane's state: the todo whose evidence is shown, its entries, and the scroll.
#[derive(Debug, Clone, Default)]
pub struct EvidencePane {
    /// The todo and its entries, newest first.
    pub shown: Option<(String, Result<Vec<Evidence>, Problem>)>,
    /// Rows scrolled.
    pub scroll: usize,
}

impl EvidencePane {
    /// True when the evidence shown is not this todo's.
    pub fn stale(&self, id: &str) -> bool {
        self.shown.as_ref().is_none_or(|(e, _)| e != id)
    }

    /// Scrolls by `by` rows.
    pub fn step(&mut self, by: i64) {
        let n = self
            .shown
            .as_ref()
            .and_then(|(_, r)| r.as_ref().ok())
            .map_or(0, Vec::len);
        self.scroll = super::step(self.scroll, by, n);
    }

    /// Reacts to the keys this pane owns: scrolling.
    pub fn handle(&mut self, intent: Intent, _on: &OnScreen) -> Outcome {
        match super::moves(intent) {
            Some(by) => {
                self.step(by);
                Outcome::Done
            }
            None => Outcome::Ignored,
        }
    }
}

/// A one-line summary of an entry (kind, summary, details), control characters escaped.
pub fn entry_text(e: &Evidence) -> String {
    let kind = match e.kind {
        EvidenceKind::Note => "note",
        EvidenceKind::Command => "cmd",
        EvidenceKind::Artifact => "file",
        EvidenceKind::Metric => "metric",
        EvidenceKind::Git => "git",
        EvidenceKind::Auto => "auto",
        EvidenceKind::Check if e.exit_code == Some(0) && !e.timed_out => "✓ check",
        EvidenceKind::Check => "✗ check",
    };
    let mut s = format!("{kind:<6} {}", e.summary);
    if let Some(c) = e.exit_code {
        s.push_str(&format!(" (exit {c})"));
    }
    // A metric's summary is usually `name=value` already: the value shows once.
    if let (Some(n), Some(v)) = (&e.name, &e.value)
        && !e.summary.starts_with(&format!("{n}="))
    {
        s.push_str(&format!(" {n}={v}"));
    }
    esc(&s).into_owned()
}

/// The evidence rows shown: when, who and what, scrolled, `h` rows of `w` cells.
fn entry_lines(list: &[Evidence], sc: &Scene, h: usize, w: usize) -> Vec<Line<'static>> {
    let t = sc.theme;
    if list.is_empty() {
        return vec![Line::from(Span::styled(" no evidence yet", t.dim()))];
    }
    list.iter()
        .skip(sc.evidence.scroll)
        .take(h)
        .map(|e| {
            let head = format!("{:>3} {:<8} ", sc.ago(e.at), mid_trunc(&esc(&e.agent), 8));
            let rest = trunc(&entry_text(e), w.saturating_sub(head.chars().count()));
            Line::from(vec![
                Span::styled(head, t.dim()),
                Span::styled(rest, t.fg(Role::Fg)),
            ])
        })
        .collect()
}

/// Draws the evidence pane.
pub fn draw(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    let focused = sc.focus == Pane::Evidence;
    let name = match sc.selected_card() {
        Some(c) => format!("Evidence · {}", esc(&c.id)),
        None => "Evidence".into(),
    };
    let i = inner(area);
    let w = i.width as usize;
    let shown = sc.evidence.shown.as_ref().map(|(id, r)| (id.as_str(), r));
    let total = match (sc.selected_card(), shown) {
        (Some(c), Some((id, Ok(list)))) if id == c.id => list.len(),
        _ => 0,
    };
    let b = scroll_marks(
        block(title(name, t), focused, t),
        total,
        sc.evidence.scroll.min(total),
        i.height as usize,
        t,
    );
    f.render_widget(b, area);
    let lines: Vec<Line> = match (sc.selected_card(), shown) {
        (None, _) => vec![Line::from(Span::styled(
            trunc(
                if w >= 34 {
                    " select a todo to see its evidence"
                } else {
                    " select a todo"
                },
                w,
            ),
            t.dim(),
        ))],
        (Some(c), Some((id, Ok(list)))) if id == c.id => {
            entry_lines(list, sc, i.height as usize, w)
        }
        (Some(c), Some((id, Err(p)))) if id == c.id => {
            vec![Line::from(Span::styled(
                trunc(&esc(&format!("{}: {}", p.at(), p.message)), w),
                t.fg(Role::Error),
            ))]
        }
        (Some(_), _) => vec![Line::from(Span::styled(" reading…", t.dim()))],
    };
    f.render_widget(Paragraph::new(lines), i);
}
