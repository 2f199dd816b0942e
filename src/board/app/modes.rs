//! What a key's action does in each mode: the board, overlays, the filter, inputs, pickers, the
//! confirm dialog and the file errors.

use super::*;

impl App {
    /// Runs an action in the current mode.
    pub(super) fn dispatch(&mut self, action: Action) -> Vec<Effect> {
        match self.mode.clone() {
            Mode::Normal => self.normal(action),
            Mode::Help { scroll } => {
                self.mode =
                    overlay(action, scroll).map_or(Mode::Normal, |s| Mode::Help { scroll: s });
                Vec::new()
            }
            Mode::Detail { scroll } => self.in_detail(action, scroll),
            Mode::Agents { scroll } => {
                self.mode =
                    overlay(action, scroll).map_or(Mode::Normal, |s| Mode::Agents { scroll: s });
                Vec::new()
            }
            Mode::Filter => self.in_filter(action),
            Mode::Input { .. } => self.input_action(action),
            Mode::Picker { .. } => self.picked(action),
            Mode::Confirm(a) => self.in_confirm(action, a),
            Mode::Errors { sel } => self.errors_key(action, sel),
            Mode::Chart(c) => self.in_chart(action, c),
        }
    }

    fn in_filter(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Erase => {
                self.filter.pop();
                self.derive();
                return Vec::new();
            }
            Action::Left | Action::Right | Action::Top | Action::Bottom | Action::EraseForward => {
                return Vec::new();
            }
            Action::Cancel => {
                self.filter.clear();
                self.derive();
            }
            _ => {}
        }
        self.mode = Mode::Normal;
        self.selection_changed()
    }

    /// The detail view acts on what it shows: a gate's decision, a todo's lease.
    fn in_detail(&mut self, action: Action, scroll: u16) -> Vec<Effect> {
        let on_gate = self.focus == Pane::Gates;
        match action {
            Action::Approve | Action::Reject if !on_gate => {
                self.say(
                    "approve and reject act on a gate: open one from the Gates pane",
                    true,
                );
                Vec::new()
            }
            Action::Reassign | Action::Release if on_gate => {
                self.say(
                    "reassign and release act on a todo: open one from the Todos pane",
                    true,
                );
                Vec::new()
            }
            Action::Approve | Action::Reject | Action::Reassign | Action::Release => {
                self.mode = Mode::Normal;
                let pane = if on_gate { Pane::Gates } else { Pane::Todos };
                let fx = self.route(pane, action).unwrap_or_default();
                if self.mode == Mode::Normal {
                    // Refused: the detail stays open with the reason in the status bar.
                    self.mode = Mode::Detail { scroll };
                }
                fx
            }
            Action::Copy => self.copy_id(),
            Action::NextGate => {
                self.next_gate();
                self.mode = Mode::Detail { scroll: 0 };
                Vec::new()
            }
            _ => {
                self.mode =
                    overlay(action, scroll).map_or(Mode::Normal, |s| Mode::Detail { scroll: s });
                Vec::new()
            }
        }
    }

    /// The lines of the action the gate of `a` holds (0 when none).
    fn action_len(&self, a: &OwnerAct) -> usize {
        let g = a.gate().and_then(|g| self.snap.as_ref()?.gates.get(g));
        g.and_then(|g| g.action.as_ref())
            .map_or(0, |x| x.shown().lines().count())
    }

    fn in_confirm(&mut self, action: Action, a: OwnerAct) -> Vec<Effect> {
        match action {
            Action::Confirm => {
                self.mode = Mode::Normal;
                self.say(format!("working: {}", a.describe()), false);
                self.drop_drafts(&a);
                self.decided(&a);
                self.decisions.performing = Some(a.clone());
                vec![Effect::Perform(a)]
            }
            Action::EditReason => {
                self.edit_reason(a);
                Vec::new()
            }
            Action::Down | Action::Up => {
                let n = self.action_len(&a);
                self.action_scroll = match action {
                    Action::Down => (self.action_scroll + 1).min(n.saturating_sub(1)),
                    _ => self.action_scroll.saturating_sub(1),
                };
                self.mode = Mode::Confirm(a);
                Vec::new()
            }
            _ => {
                self.mode = Mode::Normal;
                self.say("cancelled: nothing changed", false);
                Vec::new()
            }
        }
    }
}

fn overlay(action: Action, scroll: u16) -> Option<u16> {
    match action {
        Action::Down => Some(scroll.saturating_add(1)),
        Action::Up => Some(scroll.saturating_sub(1)),
        Action::PageDown => Some(scroll.saturating_add(10)),
        Action::PageUp => Some(scroll.saturating_sub(10)),
        _ => None,
    }
}
