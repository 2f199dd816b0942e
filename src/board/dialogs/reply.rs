//! What a dialog's key asks of the board: stay, close, open the next dialog, or act (an owner
//! act, a step of pairing a phone).

use crate::board::panes::keys::InputFor;
use crate::flows::device::Started;
use crate::flows::owner::OwnerAct;

/// What a dialog's key asks of the board.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The dialog stays (changed or not).
    Stay,
    /// The dialog stays; this goes in the status bar (true for an error).
    Say(String, bool),
    /// Back to the board.
    Close,
    /// Back to the board, with this (not an error) in the status bar.
    CloseSaying(String),
    /// Ask before this owner act, its gate's action scrolled by this many lines.
    Confirm(OwnerAct, usize),
    /// A text input for this, with this text (`None`: the draft left for it), and the confirm's
    /// scroll to come back to.
    Ask(InputFor, Option<String>, usize),
    /// Perform this owner act.
    Perform(OwnerAct),
    /// Open the file of this file error (by its row) in `$EDITOR`.
    Edit(usize),
    /// The dialog stays; the board's loop runs this step of pairing a phone.
    Pair(PairAsk),
}

/// A step of pairing a phone, run by the board's loop through the device flows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairAsk {
    /// Start a pairing: a one-time URL for the announced `loopx web`.
    Start,
    /// Where the pairing stands: has the phone sent its key?
    Poll(Started),
    /// The owner's answer: yes enrolls the phone's key (signed), no ends the pairing.
    Answer(Started, bool),
}

impl Reply {
    /// Back to the board, saying nothing changed.
    pub fn cancelled() -> Reply {
        Reply::CloseSaying("cancelled: nothing changed".into())
    }
}
