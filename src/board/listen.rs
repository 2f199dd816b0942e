//! Live on a database: a thread with a connection of its own that `LISTEN`s for commits and tells
//! the board "changed"; when the connection drops it says "reconnecting", tries again with a
//! backoff (1 s doubling to 10 s), and once back asks for one full reload (it missed events).

use std::thread::JoinHandle;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use crate::board::watcher::Signal;
use crate::kernel::{Code, Error, Result};
use crate::store::pg::{PgStore, db_error};

/// The first wait before connecting again.
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// The longest wait before connecting again.
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// How long the thread waits for a notification before it checks the connection is alive.
const IDLE: Duration = Duration::from_secs(5);
/// How long that check may take.
const PROBE: Duration = Duration::from_secs(5);

/// The wait before the next try after `failed` failed tries in a row: 1 s, 2 s, 4 s, 8 s, 10 s...
pub fn backoff(failed: u32) -> Duration {
    BACKOFF_MIN
        .saturating_mul(1 << failed.saturating_sub(1).min(8))
        .min(BACKOFF_MAX)
}

/// Starts the listening thread on `url`; it sends each signal through `send`, and ends when
/// `send` says the board is gone (returns false).
pub fn spawn<F>(url: String, send: F) -> Result<JoinHandle<()>>
where
    F: Fn(Signal) -> bool + Send + 'static,
{
    std::thread::Builder::new()
        .name("board-listen".into())
        .spawn(move || listen(&url, &send))
        .map_err(|e| Error::new(Code::Io, format!("cannot start the listening thread: {e}")))
}

/// Connects, listens until the connection fails, and again, until the board is gone.
fn listen(url: &str, send: &dyn Fn(Signal) -> bool) {
    let mut failed = 0u32;
    loop {
        let why = match PgStore::listen(url) {
            Ok(mut c) => {
                if failed > 0 && !send(Signal::Reconnected) {
                    return;
                }
                failed = 0;
                match serve(&mut c, send) {
                    Some(why) => why,
                    None => return,
                }
            }
            Err(e) => e.message,
        };
        failed = failed.saturating_add(1);
        if !send(Signal::Reconnecting(why)) {
            return;
        }
        // The first try after a drop is at once: a connection a proxy cut may come back.
        if failed > 1 {
            std::thread::sleep(backoff(failed - 1));
        }
    }
}

/// Waits for notifications on `c`, one "changed" per burst, until the connection fails (why)
/// or the board is gone (`None`).
fn serve(c: &mut postgres::Client, send: &dyn Fn(Signal) -> bool) -> Option<String> {
    loop {
        let mut got = 0usize;
        let waited = {
            let mut n = c.notifications();
            let first = n.timeout_iter(IDLE).next();
            // Fold what arrived with it into the same "changed".
            let rest = first
                .as_ref()
                .is_ok_and(Option::is_some)
                .then(|| n.iter().count());
            got += usize::from(first.as_ref().is_ok_and(Option::is_some));
            got += rest.and_then(|r| r.ok()).unwrap_or(0);
            first
        };
        if let Err(e) = waited {
            return Some(db_error(e).message);
        }
        if got > 0 {
            if !send(Signal::Changed(Vec::new())) {
                return None;
            }
            continue;
        }
        if c.is_closed() {
            return Some("the database closed the connection".into());
        }
        // Quiet for a while: make sure the server is still there (a cut cable says nothing).
        if let Err(e) = c.is_valid(PROBE) {
            return Some(db_error(e).message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_one_second_to_ten() {
        let secs: Vec<u64> = (1..7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff(u32::MAX), BACKOFF_MAX);
        assert_eq!(backoff(0), BACKOFF_MIN);
    }
}
