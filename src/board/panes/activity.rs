//! The activity feed: the journal's latest events, newest at the bottom.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::Pane;
use super::Scene;
use super::keys::{OnScreen, Outcome};
use super::{block, clock, scroll_marks, title, trunc};
use crate::board::layout::inner;
use crate::board::theme::Role;
use crate::kernel::{Action, Event};
use crate::text::escape as esc;

/// The activity pane's state: rows scrolled back from the newest.
#[derive(Debug, Clone, Copy, Default)]
pub struct ActivityPane {
    /// Rows scrolled back.
    pub scroll: usize,
}

impl ActivityPane {
    /// Moves by `by` rows over `n` events; down goes toward the newest, lowering the scroll-back.
    pub fn step(&mut self, by: i64, n: usize) {
        let cur = n.saturating_sub(1).saturating_sub(self.scroll);
        let next = super::step(cur, by, n);
        self.scroll = n.saturating_sub(1).saturating_sub(next);
    }

    /// Reacts to the keys this pane owns: scrolling the journal.
    pub fn handle(&mut self, intent: crate::board::keymap::Intent, on: &OnScreen) -> Outcome {
        match super::moves(intent) {
            Some(by) => {
                self.step(by, on.journal.len());
                Outcome::Done
            }
            None => Outcome::Ignored,
        }
    }
}

/// The role that colors an action.
pub fn action_role(action: &Action) -> Role {
    match action {
        Action::GateOpen => Role::GatePending,
        Action::GateApprove | Action::TodoDone | Action::GoalResume => Role::Ok,
        Action::GateReject | Action::TodoBlock | Action::LeaseExpire | Action::TodoCancel => {
            Role::Error
        }
        Action::GoalPause | Action::TodoReassign | Action::TodoRelease => Role::Warn,
        Action::TodoClaim | Action::TodoRenew => Role::Claimed,
        _ => Role::Fg,
    }
}

/// One event as a line of text (without the time), control characters escaped.
pub fn event_text(e: &Event) -> String {
    let head = format!("{} {} {}", e.actor, e.action, e.target);
    esc(&format!("{head}{}", event_tail(e))).into_owned()
}

/// What follows an event's target: the question, the title, whom to, or the reason.
fn event_tail(e: &Event) -> String {
    let mut s = String::new();
    if let Some(q) = e.data.get("question").and_then(|v| v.as_str()) {
        s.push_str(&format!(" \"{q}\""));
    } else if let Some(ti) = e.data.get("title").and_then(|v| v.as_str()) {
        s.push_str(&format!(" \"{ti}\""));
    } else if let Some(to) = e.data.get("to").and_then(|v| v.as_str()) {
        s.push_str(&format!(" → {to}"));
    } else if let Some(r) = e.data.get("reason").and_then(|v| v.as_str()) {
        s.push_str(&format!(": {r}"));
    }
    s
}

/// The shortest head of an event: actor, the action's verb (`todo.claim` → `claim`), target.
fn short_head(e: &Event) -> String {
    esc(&format!("{} {} {}", e.actor, verb(e), e.target)).into_owned()
}

/// The action without its noun: `todo.claim` → `claim`.
fn verb(e: &Event) -> String {
    let action = e.action.to_string();
    action.rsplit('.').next().unwrap_or(&action).to_string()
}

/// True when every event's short head fits in `w` columns after a time `time_w` wide: then the
/// pane shows times, else none (the ids matter more).
pub fn times_fit(events: &[Event], time_w: usize, w: usize) -> bool {
    events
        .iter()
        .all(|e| short_head(e).chars().count() + time_w <= w)
}

/// An event fitted to `w` columns: the target (an id) is never cut; where the line does not hold
/// it, the action loses its noun (`todo.claim` → `claim`), then the actor is cut in the middle.
pub fn fit_event(e: &Event, w: usize) -> String {
    let full = event_text(e);
    let head = esc(&format!("{} {} {}", e.actor, e.action, e.target)).into_owned();
    let n = head.chars().count();
    if full.chars().count() <= w {
        return full;
    }
    if n <= w {
        // The id whole, then as much of the rest as fits.
        let rest: String = full.chars().skip(n).collect();
        return match w - n {
            0 | 1 => head,
            room => format!("{head}{}", trunc(&rest, room)),
        };
    }
    let short = short_head(e);
    if short.chars().count() <= w {
        return short;
    }
    let target = esc(&e.target).into_owned();
    let verb = verb(e);
    let room = w.saturating_sub(verb.chars().count() + target.chars().count() + 2);
    let actor = super::mid_trunc(&esc(&e.actor), room.max(1));
    trunc(&format!("{actor} {verb} {target}"), w)
}

/// Draws the activity pane.
pub fn draw(f: &mut Frame, area: Rect, sc: &Scene) {
    let t = sc.theme;
    let focused = sc.focus == Pane::Activity;
    let i = inner(area);
    let w = i.width as usize;
    let h = i.height as usize;
    let end = sc.journal.len().saturating_sub(sc.activity.scroll);
    let start = end.saturating_sub(h);
    // Older lines above, newer ones below (when scrolled back).
    let b = scroll_marks(
        block(title("Activity", t), focused, t),
        sc.journal.len(),
        start,
        end - start,
        t,
    );
    f.render_widget(b, area);
    // A narrow pane shows minutes, not seconds.
    let short = w < 40;
    let shown = &sc.journal[start..end];
    let time_w = if short { 6 } else { 9 };
    let with_time = times_fit(shown, time_w, w);
    let lines: Vec<Line> = if sc.journal.is_empty() {
        vec![Line::from(Span::styled(" no activity yet", t.dim()))]
    } else {
        shown
            .iter()
            .map(|e| {
                let time = clock(e.at);
                let time = if short {
                    time.get(..5).unwrap_or(&time)
                } else {
                    &time
                };
                let mut spans = Vec::new();
                let mut room = w;
                if with_time {
                    spans.push(Span::styled(format!("{time} "), t.dim()));
                    room = w.saturating_sub(time_w);
                }
                spans.push(Span::styled(
                    fit_event(e, room),
                    t.fg(action_role(&e.action)),
                ));
                Line::from(spans)
            })
            .collect()
    };
    f.render_widget(Paragraph::new(lines), i);
}
