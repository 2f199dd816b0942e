//! The file errors in full: file and line, what each stops, the message and the hint; one
//! selected, to open in `$EDITOR`.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::Line;
use ratatui::widgets::{Clear, Paragraph};

use super::frame::{centered, indent, styled, wrap};
use super::reply::Reply;
use crate::board::keymap::{Intent, Scope};
use crate::board::panes::{Overlay, Scene, block, gutter, row_style, title};
use crate::board::theme::Role;
use crate::kernel::Problem;
use crate::text::escape as esc;

/// Every file error in full, one selected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileErrors {
    /// The selected error.
    pub sel: usize,
}

impl FileErrors {
    /// A key, with `n` errors listed: move, edit the selected file, or close.
    pub fn on_intent(&mut self, intent: Intent, n: usize) -> Reply {
        let n = n.max(1);
        match intent {
            Intent::Down => self.sel = (self.sel + 1) % n,
            Intent::Up => self.sel = (self.sel + n - 1) % n,
            Intent::Edit => return Reply::Edit(self.sel),
            _ => return Reply::Close,
        }
        Reply::Stay
    }
}

/// What a file error stops, for people.
fn effect(sc: &Scene, p: &Problem) -> &'static str {
    let q = sc
        .snap
        .and_then(|s| s.quarantined.iter().find(|(_, q)| q.file == p.file));
    match q {
        Some((id, _)) if sc.snap.is_some_and(|s| s.gates.contains_key(id)) => {
            "unreadable gate: it counts as pending on every todo"
        }
        Some(_) => "quarantined: no agent can claim this todo",
        None => {
            "load failed: commands and agents that load the project are refused until it reads; the board shows the last good state"
        }
    }
}

impl Overlay for FileErrors {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Errors, Scope::Always]
    }

    /// Every file error in full: file and line, what it stops, the message, the hint.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let (t, sel) = (sc.theme, self.sel);
        let w = usize::from(area.width.min(96).saturating_sub(4));
        let mut lines: Vec<Line> = Vec::new();
        let mut sel_at = 0;
        let problems = sc.problems();
        for (i, p) in problems.iter().enumerate() {
            if i == sel {
                sel_at = lines.len();
            }
            let head = match p.line {
                Some(l) => format!("{} line {l}", esc(&p.file)),
                None => esc(&p.file).into_owned(),
            };
            lines.push(Line::styled(
                format!("{} {head}", gutter(i == sel)),
                row_style(
                    t,
                    i == sel,
                    true,
                    t.fg(Role::Error).add_modifier(Modifier::BOLD),
                ),
            ));
            lines.extend(styled(wrap(effect(sc, p), w, 3), t.fg(Role::Warn)).map(indent));
            lines.extend(styled(wrap(&esc(&p.message), w, 12), t.fg(Role::Fg)).map(indent));
            if let Some(h) = &p.hint {
                lines.extend(styled(wrap(&format!("hint: {}", esc(h)), w, 3), t.dim()).map(indent));
            }
            lines.push(Line::raw(""));
        }
        let h = (lines.len() as u16).saturating_add(2);
        let r = centered(area, 96, h.min(area.height.saturating_sub(2)).max(6));
        let inner_h = usize::from(r.height.saturating_sub(2));
        let scroll = (sel_at + 6).saturating_sub(inner_h).min(sel_at);
        f.render_widget(Clear, r);
        let name = format!(
            "File errors ({}) · ↑↓ choose · E edit in $EDITOR · Esc closes",
            problems.len()
        );
        let b = block(title(name, t), true, t);
        f.render_widget(
            Paragraph::new(lines)
                .block(b)
                .style(t.base())
                .scroll((scroll as u16, 0)),
            r,
        );
    }
}
