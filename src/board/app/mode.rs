//! The board's mode: the board itself, the filter being typed, or one dialog or overlay over it.

use crate::board::dialogs::chart::MetricChart;
use crate::board::dialogs::confirm::Confirm;
use crate::board::dialogs::detail::Detail;
use crate::board::dialogs::errors::FileErrors;
use crate::board::dialogs::help::Help;
use crate::board::dialogs::input::TextInput;
use crate::board::dialogs::pair::Pair;
use crate::board::dialogs::picker::Picker;
use crate::board::dialogs::roster::Roster;
use crate::board::keymap::Scope;
use crate::board::panes::Overlay;

/// The board's mode: the board itself, or a dialog or overlay over it.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    /// The board.
    Normal,
    /// The help overlay.
    Help(Help),
    /// The detail view of the selection.
    Detail(Detail),
    /// The agents' roster (teams).
    Agents(Roster),
    /// Typing the filter.
    Filter,
    /// A text input.
    Input(TextInput),
    /// A picker.
    Picker(Picker),
    /// Every file error in full, one selected (to open in `$EDITOR`).
    Errors(FileErrors),
    /// Asking before an owner action.
    Confirm(Confirm),
    /// The metric chart.
    Chart(MetricChart),
    /// Pairing a phone for `loopx web`.
    Pair(Pair),
}

impl Mode {
    /// The dialog or overlay drawn over the board, if any.
    pub fn overlay(&self) -> Option<&dyn Overlay> {
        Some(match self {
            Mode::Normal | Mode::Filter => return None,
            Mode::Help(o) => o,
            Mode::Detail(o) => o,
            Mode::Agents(o) => o,
            Mode::Input(o) => o,
            Mode::Picker(o) => o,
            Mode::Errors(o) => o,
            Mode::Confirm(o) => o,
            Mode::Chart(o) => o,
            Mode::Pair(o) => o,
        })
    }

    /// The keymap's scopes of a dialog's keys; `None` on the board itself.
    pub fn scopes(&self) -> Option<Vec<Scope>> {
        match self {
            Mode::Normal => None,
            Mode::Filter => Some(vec![Scope::Input, Scope::Always]),
            _ => self.overlay().map(|o| o.scopes()),
        }
    }
}
