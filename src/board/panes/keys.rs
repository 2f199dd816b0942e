//! What a pane's keys read and what they ask of the board: what is on screen, the outcome, and
//! the purposes of the text inputs a pane asks for.

use std::collections::BTreeSet;

use crate::board::derive::Columns;
use crate::flows::owner::OwnerAct;
use crate::kernel::{Event, GateStatus, Snapshot, Ts};

/// What a text input is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputFor {
    /// The reason to reject this gate.
    RejectReason(String),
    /// The reason (optional) to approve this gate, with the option chosen.
    ApproveReason {
        /// The gate.
        gate: String,
        /// The option chosen.
        option: Option<String>,
    },
    /// The title of a new todo.
    TodoTitle,
}

/// What a key reads besides its pane or dialog: the state on screen and the clock.
#[derive(Debug, Clone, Copy)]
pub struct OnScreen<'a> {
    /// The last good state, if any.
    pub snap: Option<&'a Snapshot>,
    /// The todo columns.
    pub columns: &'a Columns,
    /// The journal's tail, newest last.
    pub journal: &'a [Event],
    /// The clock.
    pub now: Ts,
    /// Gates decided on this board whose decision the loads do not show yet.
    pub deciding: &'a BTreeSet<String>,
}

impl OnScreen<'_> {
    /// The sha256 of the action gate `id` holds in the snapshot on screen.
    pub fn action_sha(&self, id: &str) -> Option<String> {
        let g = self.snap?.gates.get(id)?;
        g.action.as_ref().map(|a| a.sha256.clone())
    }

    /// True for a gate the owner can still decide: pending, and not just decided on this board.
    pub fn actionable(&self, id: &str) -> bool {
        !self.deciding.contains(id)
            && self
                .snap
                .and_then(|s| s.gates.get(id))
                .is_some_and(|g| g.effective_status() == GateStatus::Pending)
    }
}

/// What a pane's key asks of the board.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Not this pane's key.
    Ignored,
    /// Done: nothing more to do.
    Done,
    /// The todo selection moved (its evidence may need reading).
    Moved,
    /// Pick one of this gate's options to approve it with.
    PickOption(String, Vec<String>),
    /// Pick an agent to reassign this todo to (its holder now, if any, is left out).
    PickAgent(String, Option<String>),
    /// Ask before this owner action.
    Confirm(OwnerAct),
    /// Open a text input for this, with its draft.
    Ask(InputFor),
    /// Say this in the status bar (true for an error).
    Say(String, bool),
}

impl Outcome {
    /// An error for the status bar.
    pub fn error(text: impl Into<String>) -> Outcome {
        Outcome::Say(text.into(), true)
    }
}
