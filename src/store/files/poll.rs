//! The lock one `monitor poll` holds while it runs checks, so two polls never run the same
//! check at once: a `flock` on the files, an advisory lock on a database.

pub use crate::store::PollLock;
use std::time::Duration;

use crate::kernel::{Code, Error, Result};
use crate::store::FileStore;

/// A held poll lock on the files: the open file whose drop releases it (never read).
#[allow(dead_code)]
enum Guard {
    Dir(std::fs::File),
    File(crate::store::lock::Guard),
}

impl PollLock for Guard {
    fn held(&mut self) -> bool {
        // A flock lasts as long as its open file.
        true
    }
}

/// The poll lock: a flock on the `.loopx` directory itself, or `None` when another poll holds
/// it. Not a file in `cache/`, which may be deleted at any time, and with it the lock a running
/// poll holds (a second poll would then lock a new file and run the same checks). Where a
/// directory cannot be locked (flock emulated on a network file system), `cache/monitor.lock`.
pub(crate) fn files(store: &FileStore) -> Result<Option<Box<dyn PollLock>>> {
    let dir = store.dir();
    let f = std::fs::File::open(dir).map_err(|e| Error::io(dir, &e))?;
    let held: Option<Guard> = match f.try_lock() {
        Ok(()) => Some(Guard::Dir(f)),
        Err(std::fs::TryLockError::WouldBlock) => None,
        Err(std::fs::TryLockError::Error(_)) => cache_lock(store)?.map(Guard::File),
    };
    Ok(held.map(|g| Box::new(g) as Box<dyn PollLock>))
}

/// The poll lock in `.loopx/cache/monitor.lock`, or `None` when another poll holds it.
fn cache_lock(store: &FileStore) -> Result<Option<crate::store::lock::Guard>> {
    let dir = store.path("cache");
    // The cache directory is made when first needed; a link or a file there is refused.
    let _ = std::fs::create_dir(&dir);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(Error::new(
            Code::InvalidState,
            ".loopx/cache is not a directory".to_string(),
        )
        .hint("run `loopx doctor`"));
    }
    match crate::store::lock::acquire(&dir.join("monitor.lock"), true, Duration::ZERO) {
        Ok(g) => Ok(Some(g)),
        Err(e) if e.code.is_busy() => Ok(None),
        Err(e) => Err(e),
    }
}
