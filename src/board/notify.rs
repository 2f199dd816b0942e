//! Getting the operator's attention: the terminal bell when a new pending gate arrives, and the
//! window title with the pending count (`loopx · 2 gates`).

use std::collections::BTreeSet;

use crate::kernel::{GateStatus, Snapshot};

/// What the board last told the terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attention {
    /// The pending gates of the last load (`None` before the first).
    seen: Option<BTreeSet<String>>,
    /// The title last set.
    title: Option<String>,
}

/// What to tell the terminal after a load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ring {
    /// Ring the bell: a gate is pending that was not at the last load.
    pub bell: bool,
    /// The window title, when it changed.
    pub title: Option<String>,
}

/// The window title for `pending` gates.
pub fn title(pending: usize) -> String {
    match pending {
        0 => "loopx".to_string(),
        1 => "loopx · 1 gate".to_string(),
        n => format!("loopx · {n} gates"),
    }
}

impl Attention {
    /// Takes a new state: the bell for a gate pending now that was not before (never on the
    /// first load: those gates were there when the board opened), and the title if it changed.
    pub fn update(&mut self, snap: &Snapshot) -> Ring {
        let pending: BTreeSet<String> = snap
            .gates
            .values()
            .filter(|g| g.effective_status() == GateStatus::Pending)
            .map(|g| g.id.clone())
            .collect();
        let bell = self
            .seen
            .as_ref()
            .is_some_and(|seen| pending.iter().any(|id| !seen.contains(id)));
        let t = title(pending.len());
        let changed = self.title.as_deref() != Some(t.as_str());
        self.title = Some(t.clone());
        self.seen = Some(pending);
        Ring {
            bell,
            title: changed.then_some(t),
        }
    }
}
