//! What a key's action does in each mode: the board, overlays, the filter, inputs, pickers, the
//! confirm dialog and the file errors.

use super::*;

impl App {
    /// Runs an action in the current mode.
    pub(super) fn dispatch(&mut self, intent: Intent) -> Vec<Effect> {
        match self.mode.clone() {
            Mode::Normal => self.normal(intent),
            Mode::Help { scroll } => {
                self.mode =
                    overlay(intent, scroll).map_or(Mode::Normal, |s| Mode::Help { scroll: s });
                Vec::new()
            }
            Mode::Detail { scroll } => self.in_detail(intent, scroll),
            Mode::Agents { scroll } => {
                self.mode =
                    overlay(intent, scroll).map_or(Mode::Normal, |s| Mode::Agents { scroll: s });
                Vec::new()
            }
            Mode::Filter => self.in_filter(intent),
            Mode::Input { .. } => self.input_action(intent),
            Mode::Picker { .. } => self.picked(intent),
            Mode::Confirm(a) => self.in_confirm(intent, a),
            Mode::Errors { sel } => self.errors_key(intent, sel),
            Mode::Chart(c) => self.in_chart(intent, c),
        }
    }

    fn in_filter(&mut self, intent: Intent) -> Vec<Effect> {
        match intent {
            Intent::Erase => {
                self.filter.pop();
                self.derive();
                return Vec::new();
            }
            Intent::Left | Intent::Right | Intent::Top | Intent::Bottom | Intent::EraseForward => {
                return Vec::new();
            }
            Intent::Cancel => {
                self.filter.clear();
                self.derive();
            }
            _ => {}
        }
        self.mode = Mode::Normal;
        self.selection_changed()
    }

    /// The detail view acts on what it shows: a gate's decision, a todo's lease.
    fn in_detail(&mut self, intent: Intent, scroll: u16) -> Vec<Effect> {
        let on_gate = self.focus == Pane::Gates;
        match intent {
            Intent::Approve | Intent::Reject if !on_gate => {
                self.say(
                    "approve and reject act on a gate: open one from the Gates pane",
                    true,
                );
                Vec::new()
            }
            Intent::Reassign | Intent::Release if on_gate => {
                self.say(
                    "reassign and release act on a todo: open one from the Todos pane",
                    true,
                );
                Vec::new()
            }
            Intent::Approve | Intent::Reject | Intent::Reassign | Intent::Release => {
                self.mode = Mode::Normal;
                let pane = if on_gate { Pane::Gates } else { Pane::Todos };
                let fx = self.route(pane, intent).unwrap_or_default();
                if self.mode == Mode::Normal {
                    // Refused: the detail stays open with the reason in the status bar.
                    self.mode = Mode::Detail { scroll };
                }
                fx
            }
            Intent::Copy => self.copy_id(),
            Intent::NextGate => {
                self.next_gate();
                self.mode = Mode::Detail { scroll: 0 };
                Vec::new()
            }
            _ => {
                self.mode =
                    overlay(intent, scroll).map_or(Mode::Normal, |s| Mode::Detail { scroll: s });
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

    fn in_confirm(&mut self, intent: Intent, a: OwnerAct) -> Vec<Effect> {
        match intent {
            Intent::Confirm => {
                self.mode = Mode::Normal;
                self.say(format!("working: {}", a.describe()), false);
                self.drop_drafts(&a);
                self.decided(&a);
                self.decisions.performing = Some(a.clone());
                vec![Effect::Perform(a)]
            }
            Intent::EditReason => {
                self.edit_reason(a);
                Vec::new()
            }
            Intent::Down | Intent::Up => {
                let n = self.action_len(&a);
                self.action_scroll = match intent {
                    Intent::Down => (self.action_scroll + 1).min(n.saturating_sub(1)),
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

fn overlay(intent: Intent, scroll: u16) -> Option<u16> {
    match intent {
        Intent::Down => Some(scroll.saturating_add(1)),
        Intent::Up => Some(scroll.saturating_sub(1)),
        Intent::PageDown => Some(scroll.saturating_add(10)),
        Intent::PageUp => Some(scroll.saturating_sub(10)),
        _ => None,
    }
}
