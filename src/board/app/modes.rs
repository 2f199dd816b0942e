//! What a key's intent does in each mode: the board's own keys, the filter and the detail view
//! here; a dialog's keys go to the dialog, and its reply is carried out here.

use super::*;

impl App {
    /// Runs an intent in the current mode.
    pub(super) fn dispatch(&mut self, intent: Intent) -> Vec<Effect> {
        let mut mode = std::mem::replace(&mut self.mode, Mode::Normal);
        let reply = match &mut mode {
            Mode::Normal => return self.normal(intent),
            Mode::Filter => {
                self.mode = mode;
                return self.in_filter(intent);
            }
            Mode::Detail(d) => {
                let d = *d;
                self.mode = mode;
                return self.in_detail(intent, d);
            }
            Mode::Help(o) => closes(o.on_intent(intent)),
            Mode::Agents(o) => closes(o.on_intent(intent)),
            Mode::Input(o) => {
                let mut drafts = std::mem::take(&mut self.drafts);
                let r = o.on_intent(intent, &self.on_screen(), &mut drafts);
                self.drafts = drafts;
                r
            }
            Mode::Picker(o) => o.on_intent(intent, &self.on_screen()),
            Mode::Confirm(o) => o.on_intent(intent, &self.on_screen()),
            Mode::Errors(o) => o.on_intent(intent, self.file_problems().len()),
            Mode::Chart(o) => {
                let sel = self.selected_todo();
                o.on_intent(intent, &self.metrics, sel.as_deref())
            }
            Mode::Pair(o) => o.on_intent(intent),
        };
        self.reply(mode, reply)
    }

    /// Carries out a dialog's reply; `mode` is the dialog as its key left it.
    fn reply(&mut self, mode: Mode, reply: Reply) -> Vec<Effect> {
        match reply {
            Reply::Stay => self.mode = mode,
            Reply::Say(text, error) => {
                self.mode = mode;
                self.say(text, error);
            }
            Reply::Close => {}
            Reply::CloseSaying(text) => self.say(text, false),
            Reply::Confirm(act, scroll) => self.mode = Mode::Confirm(Confirm { act, scroll }),
            Reply::Ask(purpose, text, back) => {
                let text = text.or_else(|| self.drafts.get(&purpose));
                self.mode = Mode::Input(TextInput::new(purpose, text.unwrap_or_default(), back));
            }
            Reply::Perform(a) => {
                self.say(format!("working: {}", a.describe()), false);
                self.drafts.drop_for(&a);
                self.decided(&a);
                self.decisions.performing = Some(a.clone());
                return vec![Effect::Perform(a)];
            }
            Reply::Edit(n) => {
                self.mode = mode;
                return self.edit_problem(n);
            }
            Reply::Pair(ask) => {
                self.mode = mode;
                return vec![Effect::Pair(ask)];
            }
        }
        Vec::new()
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
    fn in_detail(&mut self, intent: Intent, mut d: Detail) -> Vec<Effect> {
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
                    self.mode = Mode::Detail(d);
                }
                fx
            }
            Intent::Copy => self.copy_id(),
            Intent::NextGate => {
                self.next_gate();
                self.mode = Mode::Detail(Detail { scroll: 0 });
                Vec::new()
            }
            _ => {
                if d.on_intent(intent) {
                    self.mode = Mode::Detail(d);
                } else {
                    self.mode = Mode::Normal;
                }
                Vec::new()
            }
        }
    }
}

/// An overlay's reply: it stays while its keys scroll it.
fn closes(stays: bool) -> Reply {
    if stays { Reply::Stay } else { Reply::Close }
}
