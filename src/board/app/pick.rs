//! Pickers: a gate's options, and the reassign picker (the roster's live agents first, stale ones
//! behind Tab, or a typed agent id checked as `--agent` is).

use super::*;
pub use crate::board::panes::agents::candidates;
use crate::kernel::limits::AGENT_MAX;

impl App {
    /// A character typed into the reassign picker.
    pub(super) fn picker_char(&mut self, c: char) {
        if let Mode::Picker {
            choices,
            sel,
            agents: Some(p),
            ..
        } = &mut self.mode
            && !crate::text::is_unsafe(c)
            && p.typed.chars().count() < AGENT_MAX
        {
            p.typed.push(c);
            *choices = p.rows();
            *sel = 0;
        }
    }

    pub(super) fn picked(&mut self, action: Action) -> Vec<Effect> {
        let Mode::Picker {
            purpose,
            choices,
            sel,
            agents,
        } = &mut self.mode
        else {
            return Vec::new();
        };
        let n = choices.len().max(1);
        match action {
            Action::Up => *sel = (*sel + n - 1) % n,
            Action::Down => *sel = (*sel + 1) % n,
            Action::ShowAll | Action::Erase => {
                if let Some(p) = agents {
                    if action == Action::ShowAll {
                        p.show_all = !p.show_all;
                    } else {
                        p.typed.pop();
                    }
                    *choices = p.rows();
                    *sel = 0;
                }
            }
            Action::Submit => {
                let Some(choice) = choices.get(*sel).cloned() else {
                    self.say("nothing to choose: type an agent id, or Esc", true);
                    return Vec::new();
                };
                if let PickFor::Agent(_) = purpose
                    && let Err(e) = crate::kernel::id::check_agent(&choice)
                {
                    self.say(e.message, true);
                    return Vec::new();
                }
                self.mode = Mode::Confirm(match purpose.clone() {
                    PickFor::Agent(todo) => OwnerAct::Reassign { todo, to: choice },
                    PickFor::GateOption(gate) => OwnerAct::Approve {
                        sha: {
                            self.action_scroll = 0;
                            self.action_sha(&gate)
                        },
                        gate,
                        option: Some(choice),
                        reason: None,
                    },
                });
            }
            _ => {
                self.mode = Mode::Normal;
                self.say("cancelled: nothing changed", false);
            }
        }
        Vec::new()
    }
}
