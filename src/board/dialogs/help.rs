//! The help overlay: every key, generated from the keymap.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Clear;

use super::frame::{centered, scrolled_by};
use crate::board::keymap::{self, Intent, Scope};
use crate::board::panes::{Overlay, Scene, scrolled};
use crate::board::theme::Role;

/// The help overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Help {
    /// Lines scrolled.
    pub scroll: u16,
}

impl Help {
    /// A key: scroll, or `false` when it closes the overlay.
    pub fn on_intent(&mut self, intent: Intent) -> bool {
        scrolled_by(intent, self.scroll)
            .map(|s| self.scroll = s)
            .is_some()
    }
}

impl Overlay for Help {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Overlay, Scope::Always]
    }

    /// The help overlay, generated from the keymap.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let scroll = self.scroll;
        let t = sc.theme;
        let r = centered(area, 64, area.height.saturating_sub(2));
        f.render_widget(Clear, r);
        let mut lines = Vec::new();
        for (keys, text) in keymap::help_lines(sc.readonly) {
            match keys {
                None => {
                    if !lines.is_empty() {
                        lines.push(Line::raw(""));
                    }
                    lines.push(Line::from(Span::styled(
                        text,
                        t.fg(Role::Accent).add_modifier(Modifier::BOLD),
                    )));
                }
                Some(k) => lines.push(Line::from(vec![
                    Span::styled(
                        format!("  {k:<18}"),
                        t.fg(Role::Key).add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(text, t.fg(Role::Fg)),
                ])),
            }
        }
        lines.push(Line::raw(""));
        lines.push(Line::from(Span::styled(
            "New todo titles may start with a priority: \"P1 fix the build\".",
            t.dim(),
        )));
        scrolled(f, r, ("Help · ↑↓ scroll · Esc closes", lines), scroll, t);
    }
}
