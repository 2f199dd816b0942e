//! The agents overlay: the roster computed from the board's snapshot and journal tail.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Clear;

use super::ViewModel;
use super::overlay::centered;
use crate::board::panes::text::ago;
use crate::board::theme::Role;
use crate::kernel::Event;
use crate::kernel::roster::{self, AgentState, Seen};
use crate::text::escape as esc;

/// The latest time of each actor in these journal events, and the lapsed leases they record.
pub fn seen(journal: &[Event]) -> Seen {
    let mut s = Seen::default();
    for e in journal {
        s.add(&e.actor, e.at, e.action.as_str(), &e.data);
    }
    s
}

/// Draws the roster: state, agent, last seen, leases, turns in the window.
pub fn render(f: &mut Frame, area: Rect, vm: &ViewModel, scroll: u16) {
    let t = vm.theme;
    let r = centered(area, 96, area.height.saturating_sub(4).max(6));
    f.render_widget(Clear, r);
    let mut lines = Vec::new();
    match vm.snap {
        None => lines.push(Line::raw("no state loaded")),
        Some(snap) => {
            let rows = roster::roster(snap, &seen(vm.journal), vm.now);
            if rows.is_empty() {
                lines.push(Line::styled("no agents seen yet", t.dim()));
            }
            for row in &rows {
                let role = match row.state {
                    AgentState::Working => Role::Claimed,
                    AgentState::Stale => Role::Warn,
                    AgentState::Idle => Role::Dim,
                };
                let seen = row.last_seen.map_or_else(
                    || "never".to_string(),
                    |s| format!("{} ago", ago(vm.now.since(s).0)),
                );
                let leases = if row.leases.is_empty() {
                    "-".to_string()
                } else {
                    row.leases.join(",")
                };
                lines.push(Line::from(vec![
                    Span::styled(
                        format!("{:<8}", row.state.as_str()),
                        t.fg(role).add_modifier(Modifier::BOLD),
                    ),
                    Span::styled(format!("{:<22}", esc(&row.agent)), t.fg(Role::Fg)),
                    Span::styled(format!("seen {seen:<10} "), t.dim()),
                    Span::styled(
                        format!("leases {:<20} turns {}", esc(&leases), row.turns),
                        t.fg(Role::Fg),
                    ),
                ]));
            }
        }
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "From the journal lines the board holds and the leases; `loopx agents` reads the whole journal.",
        t.dim(),
    ));
    super::scrolled(
        f,
        r,
        ("Agents · ↑↓ scroll · Esc closes", lines),
        scroll,
        vm.theme,
    );
}
