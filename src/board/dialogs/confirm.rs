//! The confirm dialog: exactly what an owner act will do, the gate's question, its action
//! (scrolled) and the reason, and as whom; `y` performs it, `r` edits the reason, anything else
//! cancels.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::Line;

use super::frame::{frame_box, gate_of, inner_w, keys_line, question_lines, styled, wrap};
use super::reply::Reply;
use crate::board::keymap::{Intent, Scope};
use crate::board::panes::keys::{InputFor, OnScreen};
use crate::board::panes::{Overlay, Scene, trunc};
use crate::board::theme::Role;
use crate::flows::owner::OwnerAct;
use crate::text::escape as esc;

/// Asking before an owner act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    /// The act asked about.
    pub act: OwnerAct,
    /// The lines of the gate's action scrolled.
    pub scroll: usize,
}

impl Confirm {
    /// Asks before `act`, the gate's action (if any) at its top.
    pub fn new(act: OwnerAct) -> Confirm {
        Confirm { act, scroll: 0 }
    }

    /// Its key hints: a confirm without a gate (reassign, release, pause, add) takes no reason.
    pub fn fit_hints(&self, hints: &mut Vec<(String, &'static str, bool)>) {
        if self.act.gate().is_none() {
            hints.retain(|(_, h, _)| *h != "reason");
        }
    }

    /// A key: yes, the reason, the action scrolled, or no.
    pub fn on_intent(&mut self, intent: Intent, on: &OnScreen) -> Reply {
        match intent {
            Intent::Confirm => Reply::Perform(self.act.clone()),
            Intent::EditReason => self.edit_reason(),
            Intent::Down => {
                let n = action_len(&self.act, on);
                self.scroll = (self.scroll + 1).min(n.saturating_sub(1));
                Reply::Stay
            }
            Intent::Up => {
                self.scroll = self.scroll.saturating_sub(1);
                Reply::Stay
            }
            _ => Reply::cancelled(),
        }
    }

    /// `r`: type or change the reason of a gate decision.
    fn edit_reason(&self) -> Reply {
        match self.act.clone() {
            OwnerAct::Approve {
                gate,
                option,
                reason,
                ..
            } => Reply::Ask(
                InputFor::ApproveReason { gate, option },
                reason,
                self.scroll,
            ),
            OwnerAct::Reject { gate, reason } => {
                Reply::Ask(InputFor::RejectReason(gate), Some(reason), self.scroll)
            }
            _ => Reply::Say("this action takes no reason".into(), true),
        }
    }
}

/// The lines of the action the gate of `a` holds (0 when none).
fn action_len(a: &OwnerAct, on: &OnScreen) -> usize {
    let g = a.gate().and_then(|g| on.snap?.gates.get(g));
    g.and_then(|g| g.action.as_ref())
        .map_or(0, |x| x.shown().lines().count())
}

impl Overlay for Confirm {
    fn scopes(&self) -> Vec<Scope> {
        vec![Scope::Confirm, Scope::Always]
    }

    /// Exactly what will happen, the gate's question and the reason, and as whom.
    fn draw(&self, f: &mut Frame, area: Rect, sc: &Scene) {
        let (t, a) = (sc.theme, &self.act);
        let w = inner_w(area);
        let mut body: Vec<Line> = styled(
            wrap(&esc(&a.describe()), w, 3),
            t.fg(Role::Fg).add_modifier(Modifier::BOLD),
        )
        .collect();
        let mut keys = vec![("y", "yes, do it"), ("n", "no")];
        if let Some(g) = a.gate() {
            body.extend(question_lines(sc, g, w, 3));
            if matches!(a, OwnerAct::Approve { .. }) {
                body.extend(action_lines(sc, g, w, self.scroll));
            }
            let reason = match (a, a.reason()) {
                (_, Some(r)) => format!("reason: {}", esc(r)),
                (OwnerAct::Approve { .. }, None) => "reason: none (optional: r adds one)".into(),
                _ => "reason: none".into(),
            };
            body.extend(styled(wrap(&reason, w, 3), t.fg(Role::Fg)));
            keys.push(("r", "reason"));
        }
        let who = if sc.owner.verified {
            "signed with the owner's key"
        } else {
            "owner authority unverified: the store refuses this without the owner's key"
        };
        body.extend(styled(wrap(who, w, 2), t.dim()));
        body.push(Line::raw(""));
        frame_box(f, area, sc, "Confirm".into(), body, keys_line(&keys, t));
    }
}

/// The most lines of a gate's action the confirm dialog shows at once (↑/↓ scroll it).
pub const ACTION_LINES: usize = 8;

/// The action a gate holds, as the owner approves it: kind, digest and the text, scrolled.
fn action_lines(sc: &Scene, id: &str, w: usize, scroll: usize) -> Vec<Line<'static>> {
    let Some(a) = gate_of(sc, id).and_then(|g| g.action.as_ref()) else {
        return Vec::new();
    };
    let t = sc.theme;
    let short: String = a.sha256.chars().take(16).collect();
    let head = format!("action ({}), sha256 {short}…", a.kind.as_str());
    let mut out = vec![Line::styled(trunc(&head, w), t.fg(Role::Warn))];
    let all: Vec<String> = a.shown().lines().map(str::to_string).collect();
    let from = scroll.min(all.len().saturating_sub(1));
    for l in all.iter().skip(from).take(ACTION_LINES) {
        out.push(Line::styled(trunc(&format!("│ {l}"), w), t.fg(Role::Fg)));
    }
    if all.len() > ACTION_LINES {
        let shown = format!(
            "lines {}-{} of {} (↑/↓ scroll)",
            from + 1,
            (from + ACTION_LINES).min(all.len()),
            all.len()
        );
        out.push(Line::styled(shown, t.dim()));
    }
    if a.unusual() > 0 {
        let n = match a.unusual() {
            1 => "1 character outside printable ASCII".to_string(),
            n => format!("{n} characters outside printable ASCII"),
        };
        out.push(Line::styled(trunc(&n, w), t.fg(Role::Warn)));
    }
    if !a.intact() {
        let bad = "the action no longer matches its sha256: approving is refused";
        out.push(Line::styled(trunc(bad, w), t.fg(Role::Error)));
    }
    out
}
