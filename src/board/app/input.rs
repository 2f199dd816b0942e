//! Text the board takes: a typed character, a paste, and a text input opened with its draft.

use super::*;

impl App {
    /// Opens a text input, with the draft left for this purpose (if any).
    pub(super) fn open_input(&mut self, purpose: InputFor) {
        let text = self.drafts.get(&purpose).unwrap_or_default();
        self.mode = Mode::Input(TextInput::new(purpose, text, 0));
    }

    /// A typed character: into the filter, a text input or the reassign picker.
    pub(super) fn on_text(&mut self, key: KeyEvent) {
        let KeyCode::Char(c) = key.code else { return };
        if key
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT)
        {
            return;
        }
        match &mut self.mode {
            Mode::Filter
                if !crate::text::is_unsafe(c) && self.filter.chars().count() < FILTER_MAX =>
            {
                self.filter.push(c);
                self.derive();
            }
            Mode::Input(i) => i.on_char(c),
            Mode::Picker(p) => p.on_char(c),
            _ => {}
        }
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
            Mode::Input(i) => i.on_paste(&clean),
            Mode::Picker(p) if p.agents.is_some() => {
                clean.trim().chars().for_each(|c| p.on_char(c));
            }
            Mode::Filter => {
                let room = FILTER_MAX.saturating_sub(self.filter.chars().count());
                self.filter.extend(clean.trim().chars().take(room));
                self.derive();
            }
            _ => self.say("paste ignored: paste into a text input (c, x, r)", false),
        }
    }
}
