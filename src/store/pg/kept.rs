//! The snapshot kept between transactions (lent to one without a copy, patched in place for the
//! todos that changed, and derived again from the rows when the owner's facts changed), and
//! what patching it in place may not touch. `Cached` lends it (`load.rs`).

use std::collections::BTreeSet;

use crate::kernel::Snapshot;
use crate::kernel::seal::Seal;

/// The kept snapshot and what patching it in place may not touch.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    /// The snapshot, current to the cache's rows; None when lent or to be derived again.
    pub(super) snap: Option<Snapshot>,
    /// The todos the owner's seal names (a change to one derives the snapshot again); None when
    /// every change must (a key without a valid seal: its notes read every todo).
    pub(super) pinned: Option<BTreeSet<String>>,
    /// The journal head the snapshot was lent at.
    pub(super) lent: Option<u64>,
}

impl Kept {
    /// Derive the snapshot again at the next lend.
    pub fn forget(&mut self) {
        self.snap = None;
    }
}

/// The todos whose facts the seal may change in a snapshot.
pub(super) fn pinned(seal: &Seal) -> BTreeSet<String> {
    seal.users
        .iter()
        .chain(seal.blocked.keys())
        .chain(seal.leases.keys())
        .cloned()
        .collect()
}
