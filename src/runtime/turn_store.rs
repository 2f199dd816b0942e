//! A turn's writes around its command: the lease renewed while it runs, the state read for its
//! check, and its end recorded or its lease released, tried again while the store is busy.

use std::sync::mpsc;
use std::time::Duration;

use crate::kernel::ops::{self, Ended, TurnEnd};
use crate::kernel::{Code, Dur, Error, Result, Todo, Ts};
use crate::runtime::process;
use crate::runtime::turn::TurnOptions;
use crate::store::{Store, StoreExt};

/// The store's state, tried again while it is busy, as [`record_end`] does.
pub(crate) fn load_retrying(
    store: &(dyn Store + Sync),
    signals: usize,
) -> Result<crate::kernel::Snapshot> {
    let until = std::time::Instant::now() + END_RETRY;
    loop {
        match store.load() {
            Err(e)
                if e.code.is_busy()
                    && std::time::Instant::now() < until
                    && process::signal_count() == signals =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            r => return r,
        }
    }
}

/// Renews the lease until told to stop, or until it is lost (then the end's record says so).
pub(crate) fn renew_until(
    store: &(dyn Store + Sync),
    opts: &TurnOptions,
    todo: &Todo,
    (ttl, turn): (Dur, &str),
    every: Duration,
    stop: &mpsc::Receiver<()>,
) {
    while stop.recv_timeout(every) == Err(mpsc::RecvTimeoutError::Timeout) {
        let r = store.mutate(|snap| {
            let this = (todo.id.as_str(), todo.fence, turn);
            Ok((
                ops::renew_turn(snap, &opts.agent, Ts::now(), ttl, this)?,
                (),
            ))
        });
        // A lost lease is final; a busy lock or a passing I/O error is tried again.
        if let Err(e) = r
            && matches!(
                e.code,
                Code::StaleFence | Code::LeaseConflict | Code::NotFound
            )
        {
            return;
        }
    }
}

/// How long the end of a turn is tried again while the store is busy.
const END_RETRY: Duration = Duration::from_secs(300);

/// Records the end of a turn (and the limits its spend went past), trying again while the store
/// is busy (for [`END_RETRY`]): the command ran, and its record is what frees the lease. A
/// signal after the command ended (the count was `signals` then) stops it.
pub(crate) fn record_end(
    store: &(dyn Store + Sync),
    agent: &str,
    end: TurnEnd,
    signals: usize,
) -> Result<(Ended, Vec<String>)> {
    let until = std::time::Instant::now() + END_RETRY;
    let id = end.todo.clone();
    loop {
        let r = store.mutate(|snap| {
            let (c, ended) = ops::end_turn(snap, agent, Ts::now(), end.clone())?;
            let over = ops::spend_over_limit(&c);
            Ok((c, (ended, over)))
        });
        match r {
            Err(e)
                if e.code.is_busy()
                    && std::time::Instant::now() < until
                    && process::signal_count() == signals =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Err(Error {
                    message: format!(
                        "the turn ran, but its record was not written: {}",
                        e.message
                    ),
                    hint: Some(format!(
                        "its lease on {id} lapses at its expiry; `loopx todo release {id}` frees it now"
                    )),
                    ..e
                });
            }
            r => return r,
        }
    }
}

/// Gives the turn's lease back (the command did not run).
pub(crate) fn release(store: &(dyn Store + Sync), agent: &str, id: &str) -> Result<()> {
    store.mutate(|snap| {
        let (c, _) = ops::release(snap, agent, Ts::now(), id)?;
        Ok((c, ()))
    })
}
