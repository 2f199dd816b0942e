//! Gate triage: the next pending gate from anywhere, and the cursor moving on after a decision
//! (gates decided here count as decided until the load that shows it arrives).

use super::*;

/// Gate decisions asked of the store: decided for this board until a load shows them.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    /// Gates decided on this board whose decision the loads do not show yet.
    pub(super) deciding: BTreeSet<String>,
    /// The owner action being performed (its result is the next `ActDone`).
    pub(super) performing: Option<OwnerAct>,
}

impl App {
    /// True for a gate the owner can still decide: pending, and not just decided on this board.
    pub fn actionable(&self, id: &str) -> bool {
        self.on_screen().actionable(id)
    }

    /// What the panes' keys read.
    pub(super) fn on_screen(&self) -> OnScreen<'_> {
        OnScreen {
            snap: self.snap.as_ref(),
            columns: &self.columns,
            journal: &self.journal,
            now: self.now,
            deciding: &self.decisions.deciding,
        }
    }

    /// The first actionable gate from row `from` on (wrapping), if any.
    fn actionable_from(&self, from: usize) -> Option<usize> {
        let n = self.gates.ids.len();
        (0..n)
            .map(|k| (from + k) % n)
            .find(|&i| self.actionable(&self.gates.ids[i]))
    }

    fn select_gate(&mut self, i: usize) {
        self.gates.select(i);
        self.focus = Pane::Gates;
    }

    /// The key: the next pending gate after the selected one (wrapping), or the selected one when
    /// the gates pane has no pending gate selected yet.
    pub(super) fn next_gate(&mut self) {
        let on_pending = self.focus == Pane::Gates
            && self.gates.selected().is_some_and(|id| self.actionable(id));
        let from = if on_pending {
            self.gates.sel + 1
        } else {
            self.gates.sel
        };
        let left = self
            .gates
            .ids
            .iter()
            .filter(|id| self.actionable(id))
            .count();
        match self.actionable_from(from) {
            Some(i) => {
                self.select_gate(i);
                let id = &self.gates.ids[i];
                let msg = if left == 1 {
                    format!("{id}: the only pending gate")
                } else {
                    format!("{id}: pending gate, {left} waiting")
                };
                self.say(msg, false);
            }
            None => self.say("no pending gate: nothing waits on the owner", false),
        }
    }

    /// After a decision is asked of the store: the gate counts as decided, and the cursor moves
    /// to the next pending gate (if any).
    pub(super) fn decided(&mut self, a: &OwnerAct) {
        let (OwnerAct::Approve { gate, .. } | OwnerAct::Reject { gate, .. }) = a else {
            return;
        };
        self.decisions.deciding.insert(gate.clone());
        let at = self
            .gates
            .ids
            .iter()
            .position(|g| g == gate)
            .unwrap_or(self.gates.sel);
        if let Some(i) = self.actionable_from(at + 1) {
            self.gates.select(i);
        }
    }

    /// An action failed: its gate is pending again for this board.
    pub(super) fn undecided(&mut self) {
        if let Some(OwnerAct::Approve { gate, .. } | OwnerAct::Reject { gate, .. }) =
            self.decisions.performing.take()
        {
            self.decisions.deciding.remove(&gate);
        }
    }

    /// Forgets the gates the last load shows decided (or gone).
    pub(super) fn settle_decisions(&mut self) {
        let Some(snap) = &self.snap else { return };
        self.decisions.deciding.retain(|id| {
            snap.gates
                .get(id)
                .is_some_and(|g| g.effective_status() == GateStatus::Pending)
        });
    }
}
