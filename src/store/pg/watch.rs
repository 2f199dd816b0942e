//! A database for a face that stays open: named by its URL (no password), loaded in full, and
//! heard through a thread with a connection of its own that `LISTEN`s for commits and says
//! "changed"; when the connection drops it says "reconnecting", tries again with a backoff (1 s
//! doubling to 10 s), and once back asks for one full reload (it missed events).

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::kernel::{Code, Error, Result, Snapshot, Ts};
use crate::store::Store;
use crate::store::live::{Feed, Loaded, Signal, Sink, Target, Watched};
use crate::store::pg::PgStore;
use crate::store::pg::listen::{alive, backoff, notified};

/// How long the thread waits for a notification before it checks the connection is alive.
const IDLE: Duration = Duration::from_secs(5);

impl Watched for PgStore {
    fn name(&self) -> String {
        self.shown_url()
    }

    fn whole(&self) -> String {
        "database".into()
    }

    fn evidence_name(&self, id: &str) -> String {
        format!("database:evidence/{id}")
    }

    fn load_live(&self) -> Result<Loaded> {
        self.load().map(|snap| (None, snap))
    }

    fn target(&self, _path: &Path) -> Target {
        Target::Everything
    }

    fn reload_live(&self, _base: Snapshot, _changed: &[PathBuf]) -> Result<Loaded> {
        self.load_live()
    }

    fn evidence_by_journal(&self) -> bool {
        true
    }

    fn watch(&self, _poll: bool, sink: Sink) -> Result<(Box<dyn Feed>, Option<String>)> {
        spawn(self.listen_url().to_string(), sink)?;
        Ok((Box::new(crate::store::live::Silent), None))
    }

    fn sealing(&self, _now: Ts, _wait: Duration) -> Option<Box<dyn Store + Sync>> {
        None
    }
}

/// Starts the listening thread on `url`; it sends each signal through `send`, and ends when
/// `send` says the face is gone (returns false).
fn spawn<F>(url: String, send: F) -> Result<JoinHandle<()>>
where
    F: Fn(Signal) -> bool + Send + 'static,
{
    std::thread::Builder::new()
        .name("board-listen".into())
        .spawn(move || listen(&url, &send))
        .map_err(|e| Error::new(Code::Io, format!("cannot start the listening thread: {e}")))
}

/// Connects, listens until the connection fails, and again, until the face is gone.
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
/// or the face is gone (`None`).
fn serve(c: &mut postgres::Client, send: &dyn Fn(Signal) -> bool) -> Option<String> {
    loop {
        let quiet = match notified(c, IDLE) {
            Ok(got) => got == 0,
            Err(e) => return Some(e.message),
        };
        if !quiet {
            if !send(Signal::Changed(Vec::new())) {
                return None;
            }
            continue;
        }
        // Quiet for a while: make sure the server is still there.
        if let Err(e) = alive(c) {
            return Some(e.message);
        }
    }
}
