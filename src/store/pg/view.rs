//! The snapshot kept between transactions: lent to one without a copy, patched in place for the
//! todos that changed, and derived again from the rows when the owner's facts changed.

use std::collections::BTreeSet;

use super::load::Cached;
use crate::kernel::seal::Seal;
use crate::kernel::{Result, Snapshot};

/// The kept snapshot and what patching it in place may not touch.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// The snapshot, current to the cache's rows; None when lent or to be derived again.
    snap: Option<Snapshot>,
    /// The todos the owner's seal names (a change to one derives the snapshot again); None when
    /// every change must (a key without a valid seal: its notes read every todo).
    pinned: Option<BTreeSet<String>>,
    /// The journal head the snapshot was lent at.
    lent: Option<u64>,
}

impl View {
    /// Derive the snapshot again at the next lend.
    pub fn forget(&mut self) {
        self.snap = None;
    }
}

/// The todos whose facts the seal may change in a snapshot.
fn pinned(seal: &Seal) -> BTreeSet<String> {
    seal.users
        .iter()
        .chain(seal.blocked.keys())
        .chain(seal.leases.keys())
        .cloned()
        .collect()
}

impl Cached {
    /// The snapshot for a transaction, current to the rows; give it back with
    /// [`Cached::give_back`] so the next one need not derive it again.
    pub fn lend(&mut self) -> Result<Snapshot> {
        let mut snap = match self.view.snap.take() {
            Some(s) => s,
            None => {
                let s = self.snapshot()?;
                self.view.pinned = match &s.seal {
                    Some(seal) => Some(pinned(seal)),
                    None if self.owner_pub()?.is_some() => None,
                    None => Some(BTreeSet::new()),
                };
                s
            }
        };
        // Spends leave the window as time passes: the rows' list is pruned at each read.
        snap.quota.spends.clone_from(&self.spends);
        #[cfg(debug_assertions)]
        {
            let want = self.snapshot()?;
            debug_assert_eq!(
                format!("{snap:?}"),
                format!("{want:?}"),
                "the kept snapshot drifted"
            );
        }
        self.view.lent = Some(self.head);
        Ok(snap)
    }

    /// Takes back a lent snapshot; the todos the transaction changed in it (`touched`) are set
    /// back to the rows. Dropped when the rows moved meanwhile.
    pub fn give_back(&mut self, snap: Snapshot, touched: &[String]) {
        if self.view.lent.take() != Some(self.head) || self.config.is_none() {
            return;
        }
        self.view.snap = Some(snap);
        for id in touched {
            self.patch_view(id);
        }
    }

    /// Sets todo `id` in the kept snapshot to its row (or derives it all again when the seal
    /// names it).
    pub fn patch_view(&mut self, id: &str) {
        let free = matches!(&self.view.pinned, Some(p) if !p.contains(id));
        let Some(snap) = self.view.snap.as_mut().filter(|_| free) else {
            self.view.snap = None;
            return;
        };
        snap.todos.remove(id);
        snap.quarantined.remove(id);
        match self.todos.get(id).map(|r| &r.value) {
            Some(Ok(t)) => {
                snap.todos.insert(id.to_string(), t.clone());
            }
            Some(Err(p)) => {
                snap.quarantined.insert(id.to_string(), p.clone());
            }
            None => {}
        }
        match self.archived.get(id) {
            Some(s) => snap.archived.insert(id.to_string(), *s),
            None => snap.archived.remove(id),
        };
    }
}
