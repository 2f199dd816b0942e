//! One project as the web face serves it: its store on a thread of its own (store calls block),
//! and a counter of changes heard through the store's follow feed, with a poll beside it.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use crate::kernel::{Code, Error, Result};
use crate::store::follow::{Followed, Signal};

/// How a project's store is opened, on its own thread.
pub type Opener = Box<dyn FnOnce() -> Result<Box<dyn Followed>> + Send>;

/// A call on the project's store.
type Job = Box<dyn FnOnce(&dyn Followed) + Send>;

/// How often the thread looks at the journal's end when nothing was heard.
const POLL: Duration = Duration::from_millis(1000);

/// A project served: its name, its store's thread, and its changes.
pub struct Project {
    /// Its name in URLs and on the page.
    pub name: String,
    jobs: mpsc::Sender<Job>,
    changes: watch::Receiver<u64>,
}

impl Project {
    /// Opens the store on a new thread and starts following it.
    pub fn start(name: String, open: Opener) -> Result<Project> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let (bump, changes) = watch::channel(0u64);
        let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
        let who = name.clone();
        std::thread::Builder::new()
            .name(format!("web-{name}"))
            .spawn(move || match open() {
                Ok(store) => {
                    let _ = ready_tx.send(Ok(()));
                    work(store.as_ref(), rx, Arc::new(bump));
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            })
            .map_err(|e| Error::new(Code::Io, format!("cannot start a thread: {e}")))?;
        ready_rx
            .recv()
            .map_err(|_| Error::new(Code::Internal, format!("project {who} did not open")))??;
        Ok(Project {
            name,
            jobs,
            changes,
        })
    }

    /// Runs `f` on the store's thread and waits for its answer.
    pub async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&dyn Followed) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |s| {
            let _ = tx.send(f(s));
        });
        let gone = || Error::new(Code::Internal, "the project's thread stopped");
        self.jobs.send(job).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    /// The changes heard: the value grows with each.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }
}

/// The store's thread: runs calls, and tells of changes (the follow feed's signals, its
/// polling tick, and the journal's end looked at every [`POLL`]).
fn work(store: &dyn Followed, jobs: mpsc::Receiver<Job>, bump: Arc<watch::Sender<u64>>) {
    let heard = bump.clone();
    let sink = Box::new(move |s: Signal| {
        if !matches!(s, Signal::Failed(_) | Signal::Reconnecting(_)) {
            heard.send_modify(|n| *n += 1);
        }
        !heard.is_closed()
    });
    let mut feed = store.follow(false, sink).ok().map(|(f, _)| f);
    let mut end = store.journal_end().ok();
    let mut looked = Instant::now();
    loop {
        match jobs.recv_timeout(Duration::from_millis(250)) {
            Ok(job) => job(store),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        if let Some(f) = feed.as_mut() {
            let (paths, _why) = f.tick();
            if !paths.is_empty() {
                bump.send_modify(|n| *n += 1);
                f.saw_changes();
            }
        }
        if looked.elapsed() >= POLL {
            looked = Instant::now();
            let now = store.journal_end().ok();
            if now != end {
                end = now;
                bump.send_modify(|n| *n += 1);
            }
        }
    }
}
