//! The agents overlay: the roster computed from the board's snapshot and journal tail, and the
//! agents the reassign picker offers from it.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Clear;

use super::frame::{centered, scrolled_by};
use crate::board::keymap::{Intent, Scope};
use crate::board::panes::text::ago;
use crate::board::panes::{Overlay, Scene, mid_trunc, scrolled, wrap_words};
use crate::board::theme::Role;
use crate::kernel::roster::{self, AgentState, Seen};
use crate::kernel::{Event, Snapshot, Ts};
use crate::text::escape as esc;

/// An agent the reassign picker knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The agent id.
    pub id: String,
    /// Its state for people (`working · 1 lease`, `idle · seen 3m ago`, `stale since 5m`).
    pub note: String,
    /// Working or idle: listed without Tab.
    pub live: bool,
}

/// The agents' roster overlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roster {
    /// Lines scrolled.
    pub scroll: u16,
}

impl Roster {
    /// A key that scrolls, or `false` when it closes the overlay.
    pub fn on_intent(&mut self, intent: Intent) -> bool {
        scrolled_by(intent, self.scroll)
            .map(|s| self.scroll = s)
            .is_some()
    }
}

/// The latest time of each actor in these journal events, and the lapsed leases they record.
pub fn seen(journal: &[Event]) -> Seen {
    let mut s = Seen::default();
    for e in journal {
        s.add(&e.actor, e.at, e.action.as_str(), &e.data);
    }
    s
}

/// The agents a todo may be reassigned to: from the roster, working then idle (newest first),
/// then stale ones, then configured or declared agents never seen; never the holder, never a
/// reserved name.
pub fn candidates(
    snap: &Snapshot,
    journal: &[Event],
    now: Ts,
    holder: Option<&str>,
) -> Vec<Candidate> {
    let rows = roster::roster(snap, &seen(journal), now);
    let mut out: Vec<Candidate> = Vec::new();
    for state in [AgentState::Working, AgentState::Idle, AgentState::Stale] {
        for r in rows.iter().filter(|r| r.state == state) {
            let note = match state {
                AgentState::Working => {
                    let n = r.leases.len();
                    format!("working · {n} lease{}", if n == 1 { "" } else { "s" })
                }
                AgentState::Idle => r.last_seen.map_or("idle".into(), |s| {
                    format!("idle · seen {} ago", ago(now.since(s).0))
                }),
                AgentState::Stale => r.stale_since.map_or("stale".into(), |s| {
                    format!("stale · lease lapsed {} ago", ago(now.since(s).0))
                }),
            };
            out.push(Candidate {
                id: r.agent.clone(),
                note,
                live: state != AgentState::Stale,
            });
        }
    }
    let mut never: Vec<String> = snap.config.agents.keys().cloned().collect();
    never.extend(snap.agents.keys().cloned());
    never.sort();
    never.dedup();
    for id in never {
        if !out.iter().any(|c| c.id == id) {
            out.push(Candidate {
                id,
                note: "never seen".into(),
                live: false,
            });
        }
    }
    out.retain(|c| Some(c.id.as_str()) != holder && crate::kernel::id::check_agent(&c.id).is_ok());
    out
}

impl Overlay for Roster {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Overlay, Scope::Always]
    }

    /// Draws the roster: state, agent, last seen, leases, turns in the window.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let scroll = self.scroll;
        let t = sc.theme;
        let r = centered(area, 96, area.height.saturating_sub(4).max(6));
        f.render_widget(Clear, r);
        let mut lines = Vec::new();
        match sc.snap {
            None => lines.push(Line::raw("no state loaded")),
            Some(snap) => {
                let rows = roster::roster(snap, &seen(sc.journal), sc.now);
                if rows.is_empty() {
                    lines.push(Line::styled("no agents seen yet", t.dim()));
                }
                let w = usize::from(r.width.saturating_sub(2));
                let width = |f: &dyn Fn(&roster::AgentRow) -> usize, cap: usize| {
                    rows.iter().map(f).max().unwrap_or(0).min(cap) + 1
                };
                let name_w = width(&|r| esc(&r.agent).chars().count(), 22);
                let lease_w = width(&|r| r.leases.join(",").chars().count().max(1), 20);
                for row in &rows {
                    lines.extend(agent_lines(row, sc, (name_w, lease_w), w));
                }
            }
        }
        lines.push(Line::raw(""));
        let note = "From the journal lines the board holds and the leases; `loopx agents` reads the whole journal.";
        for part in wrap_words(note, usize::from(r.width.saturating_sub(2))) {
            lines.push(Line::styled(part, t.dim()));
        }
        scrolled(
            f,
            r,
            ("Agents · ↑↓ scroll · Esc closes", lines),
            scroll,
            sc.theme,
        );
    }
}

/// One agent's row: state, agent, last seen, then leases and turns, which go to a second row,
/// indented, when the overlay is too narrow for one.
fn agent_lines(
    row: &roster::AgentRow,
    sc: &Scene,
    (name_w, lease_w): (usize, usize),
    w: usize,
) -> Vec<Line<'static>> {
    let t = sc.theme;
    let role = match row.state {
        AgentState::Working => Role::Claimed,
        AgentState::Stale => Role::Warn,
        AgentState::Idle => Role::Dim,
    };
    let seen = row.last_seen.map_or_else(
        || "never".to_string(),
        |s| format!("{} ago", ago(sc.now.since(s).0)),
    );
    let leases = if row.leases.is_empty() {
        "-".to_string()
    } else {
        row.leases.join(",")
    };
    let head = vec![
        Span::styled(
            format!("{:<8}", row.state.as_str()),
            t.fg(role).add_modifier(Modifier::BOLD),
        ),
        Span::styled(
            format!("{:<name_w$}", mid_trunc(&esc(&row.agent), name_w - 1)),
            t.fg(Role::Fg),
        ),
        Span::styled(format!("seen {seen:<10} "), t.dim()),
    ];
    let tail = format!("leases {:<lease_w$}turns {}", esc(&leases), row.turns);
    let used: usize = head.iter().map(|s| s.content.chars().count()).sum();
    if used + tail.chars().count() <= w {
        let mut spans = head;
        spans.push(Span::styled(tail, t.fg(Role::Fg)));
        return vec![Line::from(spans)];
    }
    let mut out = vec![Line::from(head)];
    for part in wrap_words(&tail, w.saturating_sub(8)) {
        out.push(Line::styled(format!("{:8}{part}", ""), t.fg(Role::Fg)));
    }
    out
}
