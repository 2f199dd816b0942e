//! What drawing and the layout read of the board's state fitted to the screen: the key hints
//! of the mode, and the rows the selected gate takes.

use super::*;

impl App {
    /// The key hints of the mode, fitted to the goal's state; a confirm without a gate (reassign,
    /// release, pause, add) takes no reason, so `r` is not hinted there.
    pub(super) fn hints(&self) -> Vec<(String, &'static str, bool)> {
        let mut hints = crate::board::draw::fit_state(
            keymap::hints(&self.scopes(), self.readonly, self.owner.verified),
            self.snap.as_ref().map(|s| s.config.goal.status),
        );
        match &self.mode {
            Mode::Confirm(c) => c.fit_hints(&mut hints),
            Mode::Pair(p) => p.fit_hints(&mut hints),
            _ => {}
        }
        hints
    }

    /// Rows the selected gate takes wrapped whole at inner width `w`, at most `max` (1: none).
    pub fn gate_rows(&self, w: u16, max: u16) -> usize {
        let Some(g) = self
            .gates
            .selected()
            .and_then(|id| self.snap.as_ref()?.gates.get(id))
        else {
            return 1;
        };
        let ago = |at: crate::kernel::Ts| {
            if self.absolute {
                crate::board::panes::text::hhmm(at)
            } else {
                crate::board::panes::text::ago(self.now.since(at).0)
            }
        };
        crate::board::panes::gates::selected_rows(g, &ago, usize::from(w), usize::from(max))
    }
}
