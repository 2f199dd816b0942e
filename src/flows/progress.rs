//! The breaker's measure of a turn: git now against the turn's base, and the evidence written
//! since it began.

use std::path::Path;

use crate::kernel::ops;
use crate::kernel::{Todo, Ts, breaker};
use crate::runtime::git;
use crate::store::Store;

/// How many of a todo's last evidence entries the breaker reads.
const PROGRESS_SCAN: usize = 200;

/// The breaker's facts about a turn on `todo` that began at `base` (git then) and `since`:
/// git now in `dir` (the work tree the base was taken of), and the evidence written since the
/// turn began (earlier turns of a kept lease do not count again). Unreadable evidence measures
/// nothing.
pub fn measure(
    store: &dyn Store,
    dir: &Path,
    todo: &Todo,
    (base, since): (Option<crate::kernel::Base>, Ts),
    failed: bool,
) -> ops::Progress {
    let after = git::base(dir);
    let progressed = store
        .evidence_tail(&todo.id, PROGRESS_SCAN)
        .ok()
        .map(|tail| {
            let (new, earlier) = tail.into_iter().partition(|e| e.at >= since);
            let part = |b: &Option<crate::kernel::Base>| {
                (
                    b.as_ref().and_then(|b| b.head.clone()),
                    b.as_ref().and_then(|b| b.tree.clone()),
                )
            };
            let ((h0, t0), (h1, t1)) = (part(&base), part(&after));
            breaker::progressed(&breaker::Facts {
                head: (h0, h1),
                tree: (t0, t1),
                new,
                earlier,
            })
        });
    ops::Progress {
        progressed,
        failed,
        gate: store.fresh_id(crate::kernel::id::Kind::Gate).ok(),
    }
}
