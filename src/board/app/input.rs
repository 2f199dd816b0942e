//! Text inputs: a line with a cursor that scrolls sideways, drafts kept per gate when a dialog is
//! dismissed, and what Enter does with a reason or a title.

use super::*;
pub use crate::board::panes::dialog::{max_chars, window};

/// The most drafts kept (one per gate and purpose); past it the oldest key goes.
const DRAFTS_MAX: usize = 64;

fn draft_key(purpose: &InputFor) -> String {
    match purpose {
        InputFor::RejectReason(g) => format!("reject:{g}"),
        InputFor::ApproveReason { gate, .. } => format!("approve:{gate}"),
        InputFor::TodoTitle => "todo".into(),
    }
}

fn byte_at(text: &str, i: usize) -> usize {
    text.char_indices().nth(i).map_or(text.len(), |(b, _)| b)
}

impl App {
    /// Opens a text input, with the draft left for this purpose (if any).
    pub(super) fn open_input(&mut self, purpose: InputFor) {
        let text = self
            .drafts
            .get(&draft_key(&purpose))
            .cloned()
            .unwrap_or_default();
        self.open_input_with(purpose, text);
    }

    pub(super) fn open_input_with(&mut self, purpose: InputFor, text: String) {
        let cursor = text.chars().count();
        self.mode = Mode::Input {
            purpose,
            text,
            cursor,
            note: None,
        };
    }

    fn keep_draft(&mut self, purpose: &InputFor, text: &str) {
        let key = draft_key(purpose);
        if text.trim().is_empty() {
            self.drafts.remove(&key);
            return;
        }
        self.drafts.insert(key, text.to_string());
        while self.drafts.len() > DRAFTS_MAX {
            self.drafts.pop_first();
        }
    }

    /// Forgets the drafts of a performed action.
    pub(super) fn drop_drafts(&mut self, a: &OwnerAct) {
        let key = match a {
            OwnerAct::Reject { gate, .. } => format!("reject:{gate}"),
            OwnerAct::Approve { gate, .. } => format!("approve:{gate}"),
            OwnerAct::AddTodo { .. } => "todo".into(),
            _ => return,
        };
        self.drafts.remove(&key);
    }

    /// The open input's parts: purpose, text, cursor and note.
    fn input_parts(&mut self) -> Option<(&InputFor, &mut String, &mut usize, &mut Option<String>)> {
        match &mut self.mode {
            Mode::Input {
                purpose,
                text,
                cursor,
                note,
            } => Some((purpose, text, cursor, note)),
            _ => None,
        }
    }

    /// A typed character goes in at the cursor (control characters never do).
    pub(super) fn input_char(&mut self, c: char) {
        let Some((purpose, text, cursor, note)) = self.input_parts() else {
            return;
        };
        if crate::text::is_unsafe(c) {
            return;
        }
        let max = max_chars(purpose);
        if text.chars().count() >= max {
            *note = Some(format!("at most {max} characters"));
            return;
        }
        let at = byte_at(text, *cursor);
        text.insert(at, c);
        *cursor += 1;
        *note = None;
    }

    /// Pasted text: into the text input at its cursor (line breaks and tabs become spaces, other
    /// control characters go), into the reassign picker or the filter; elsewhere it is ignored,
    /// so no pasted character ever acts as a key.
    pub(super) fn on_paste(&mut self, pasted: &str) {
        let clean: String = pasted
            .chars()
            .map(|c| {
                if matches!(c, '\n' | '\r' | '\t') {
                    ' '
                } else {
                    c
                }
            })
            .filter(|c| !crate::text::is_unsafe(*c))
            .collect();
        match &mut self.mode {
            Mode::Input { .. } => self.paste_input(&clean),
            Mode::Picker {
                agents: Some(_), ..
            } => {
                clean.trim().chars().for_each(|c| self.picker_char(c));
            }
            Mode::Filter => {
                let room = FILTER_MAX.saturating_sub(self.filter.chars().count());
                self.filter.extend(clean.trim().chars().take(room));
                self.derive();
            }
            _ => self.say("paste ignored: paste into a text input (c, x, r)", false),
        }
    }

    fn paste_input(&mut self, clean: &str) {
        let Some((purpose, text, cursor, note)) = self.input_parts() else {
            return;
        };
        let max = max_chars(purpose);
        let room = max.saturating_sub(text.chars().count());
        let part: String = clean.chars().take(room).collect();
        let at = byte_at(text, *cursor);
        text.insert_str(at, &part);
        *cursor += part.chars().count();
        *note = (part.len() < clean.len())
            .then(|| format!("at most {max} characters: the paste was cut"));
    }

    /// A key of the text input: move, erase, submit or cancel.
    pub(super) fn input_action(&mut self, intent: Intent) -> Vec<Effect> {
        let Some((purpose, text, cursor, note)) = self.input_parts() else {
            return Vec::new();
        };
        let n = text.chars().count();
        match intent {
            Intent::Left => *cursor = cursor.saturating_sub(1),
            Intent::Right => *cursor = (*cursor + 1).min(n),
            Intent::Top => *cursor = 0,
            Intent::Bottom => *cursor = n,
            Intent::Erase if *cursor > 0 => {
                let at = byte_at(text, *cursor - 1);
                text.remove(at);
                *cursor -= 1;
                *note = None;
            }
            Intent::EraseForward if *cursor < n => {
                let at = byte_at(text, *cursor);
                text.remove(at);
                *note = None;
            }
            Intent::Erase | Intent::EraseForward => {}
            Intent::Submit => {
                let (p, t) = (purpose.clone(), text.clone());
                self.submit_input(p, t);
            }
            _ => {
                let (p, t) = (purpose.clone(), text.clone());
                self.keep_draft(&p, &t);
                self.mode = Mode::Normal;
                let kept = if t.trim().is_empty() {
                    ""
                } else {
                    " (the text is kept for next time)"
                };
                self.say(format!("cancelled: nothing changed{kept}"), false);
            }
        }
        Vec::new()
    }

    fn submit_input(&mut self, purpose: InputFor, raw: String) {
        self.keep_draft(&purpose, &raw);
        let text = raw.trim().to_string();
        let next = match purpose.clone() {
            InputFor::ApproveReason { gate, option } => OwnerAct::Approve {
                sha: self.action_sha(&gate),
                gate,
                option,
                reason: Some(text.clone()).filter(|t| !t.is_empty()),
            },
            _ if text.is_empty() => return self.refuse_empty(&purpose),
            InputFor::RejectReason(gate) => OwnerAct::Reject { gate, reason: text },
            InputFor::TodoTitle => {
                let (priority, title) = split_priority(&text);
                OwnerAct::AddTodo { title, priority }
            }
        };
        self.mode = Mode::Confirm(next);
    }

    fn refuse_empty(&mut self, purpose: &InputFor) {
        let msg = match purpose {
            InputFor::TodoTitle => "a title is required (Esc cancels)",
            _ => "a reason is required: the agents read it (Esc cancels)",
        };
        if let Mode::Input { note, .. } = &mut self.mode {
            *note = Some(msg.to_string());
        }
        self.say(msg, true);
    }

    /// `r` in the confirm dialog: type or change the reason of a gate decision.
    pub(super) fn edit_reason(&mut self, a: OwnerAct) {
        match a {
            OwnerAct::Approve {
                gate,
                option,
                reason,
                ..
            } => {
                let purpose = InputFor::ApproveReason { gate, option };
                match reason {
                    Some(r) => self.open_input_with(purpose, r),
                    None => self.open_input(purpose),
                }
            }
            OwnerAct::Reject { gate, reason } => {
                self.open_input_with(InputFor::RejectReason(gate), reason)
            }
            other => {
                self.say("this action takes no reason", true);
                self.mode = Mode::Confirm(other);
            }
        }
    }
}
