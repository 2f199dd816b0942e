//! The snapshot kept between transactions (lent, patched and derived again by `load::Cached`).

use std::collections::BTreeSet;

use crate::kernel::Snapshot;

/// The kept snapshot and what patching it in place may not touch.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The snapshot, current to the cache's rows; None when lent or to be derived again.
    pub(super) snap: Option<Snapshot>,
    /// The todos the owner's seal names (a change to one derives the snapshot again); None when
    /// every change must (a key without a valid seal: its notes read every todo).
    pub(super) pinned: Option<BTreeSet<String>>,
    /// The journal head the snapshot was lent at.
    pub(super) lent: Option<u64>,
}

impl View {
    /// Derive the snapshot again at the next lend.
    pub fn forget(&mut self) {
        self.snap = None;
    }
}
