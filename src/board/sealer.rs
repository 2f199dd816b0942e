//! The board's seal: a board that holds the owner's key seals new journal lines (hand edits of
//! `.loopx/` show against it), at most once a minute, on its tick, as one small owner
//! transaction (`ops::seal` through `StoreExt::mutate`), when the store asks for it
//! (`Watched::sealing`). A database needs none: it refuses agents the owner's rows.

use std::time::Duration;

use crate::board::app::{App, AppEvent};
use crate::flows::owner::Owner;
use crate::kernel::ops::{self, Change};
use crate::kernel::seal::BOARD_SEAL_EVERY;
use crate::kernel::{Dur, Event, Result, Snapshot, Ts};
use crate::store::{Store, StoreExt, Watched};

/// How long a seal waits for the lock before it tries again on a later tick.
const LOCK_WAIT: Duration = Duration::from_millis(200);

/// When the board last sealed, and what it last said about it.
#[derive(Debug, Clone)]
pub struct Sealer {
    every: Dur,
    last: Option<Ts>,
    checked: Option<Ts>,
    said: Option<String>,
}

impl Default for Sealer {
    fn default() -> Self {
        Sealer::new(BOARD_SEAL_EVERY)
    }
}

/// The newest journal line in a tail that no owner signed (an owner's line carries its own
/// signature over the chain), or 0.
pub fn unsealed_seq(journal: &[Event]) -> u64 {
    journal
        .iter()
        .rev()
        .find(|e| e.sig.is_none())
        .map_or(0, |e| e.seq)
}

/// The journal line the snapshot's seal covers, when the board may seal on top of it: the seal
/// is valid and no file disagrees with it or is quarantined (those wait for the owner, who may
/// `loopx owner seal --adopt` after looking).
pub fn sealed_seq(snap: &Snapshot) -> Option<u64> {
    let seal = snap.seal.as_ref()?;
    if !snap.owner_notes.is_empty() || !snap.quarantined.is_empty() {
        return None;
    }
    Some(seal.journal.as_ref().map_or(0, |m| m.seq))
}

impl Sealer {
    /// A sealer that seals at most once every `every`.
    pub fn new(every: Dur) -> Sealer {
        Sealer {
            every,
            last: None,
            checked: None,
            said: None,
        }
    }

    /// True when this board should seal now: it holds the key, is not read-only, and the
    /// journal has lines the seal does not cover, and it has not sealed within `every`.
    pub fn due(&self, app: &App, now: Ts) -> bool {
        if app.readonly || !app.owner.verified {
            return false;
        }
        let Some(sealed) = app.snap.as_ref().and_then(sealed_seq) else {
            return false;
        };
        crate::kernel::seal::board_seal_due(
            unsealed_seq(&app.journal),
            sealed,
            self.last,
            now,
            self.every,
        )
    }

    /// On a tick: seals when due. A failure is said once in the status bar; without the key the
    /// board looks for it again once every `every`. True when the screen changed.
    pub fn tick(&mut self, store: &dyn Watched, app: &mut App, now: Ts) -> bool {
        if app.readonly {
            return false;
        }
        let Some(sealing) = store.sealing(now, LOCK_WAIT) else {
            return false;
        };
        let store = sealing.as_ref();
        if !app.owner.verified {
            if self.checked.is_some_and(|t| now.since(t) < self.every) {
                return false;
            }
            self.checked = Some(now);
            let o = Owner::detect(store);
            if !o.verified {
                return false;
            }
            app.owner = o;
        }
        if !self.due(app, now) {
            return false;
        }
        match seal_now(store, unsealed_seq(&app.journal), now) {
            Ok(_) => {
                self.last = Some(now);
                self.said = None;
                false
            }
            // Another process holds the lock: try again on a later tick.
            Err(e) if e.code.is_busy() => false,
            Err(e) => {
                self.last = Some(now);
                app.owner = Owner::detect(store);
                let msg = format!("the board could not seal the journal: {}", e.message);
                if self.said.as_ref() == Some(&msg) {
                    return true;
                }
                self.said = Some(msg.clone());
                app.on_event(AppEvent::ActDone(Err(msg)));
                true
            }
        }
    }
}

/// Seals the journal as the owner if the fresh snapshot's seal still leaves `unsealed` out;
/// true when it did.
pub fn seal_now(store: &(dyn Store + Sync), unsealed: u64, now: Ts) -> Result<bool> {
    store.mutate(|s| match sealed_seq(s) {
        Some(sealed) if sealed < unsealed => {
            let (c, _) = ops::seal(s, ops::OWNER, now, false)?;
            Ok((c, true))
        }
        _ => Ok((Change::default(), false)),
    })
}
