//! Where the board learns that something changed: file events (or polling) on `.loopx/`, or a
//! database's notifications on a connection of their own.

use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant, SystemTime};

use crate::board::app::Live;
use crate::board::listen;
use crate::board::source::Source;
use crate::board::watcher::{self, Poller, Signal, Watch};
use crate::kernel::Result;

/// How long the journal may grow without a file event before the board polls instead.
const SILENT: Duration = Duration::from_millis(1500);

/// The feed of changes of the board's store.
#[derive(Debug)]
pub enum Feed {
    /// File events on `.loopx/`, or polling.
    Files(Box<FileFeed>),
    /// A database: its listening thread sends into the board's channel by itself.
    Db,
}

/// File events on `.loopx/`, with polling when they fail or do not arrive.
#[derive(Debug)]
pub struct FileFeed {
    dir: PathBuf,
    poller: Option<Poller>,
    watch: Option<Watch>,
    journal_seen: Option<(u64, Option<SystemTime>)>,
    unseen_since: Option<Instant>,
    last_event: Instant,
}

impl Feed {
    /// Starts the feed of `source`, its signals sent as `wrap(signal)` into `tx`; with the
    /// live state to show when it is not plain watching.
    pub fn start<T: Send + 'static>(
        source: &Source,
        poll: bool,
        tx: Sender<T>,
        wrap: fn(Signal) -> T,
    ) -> Result<(Feed, Option<Live>)> {
        match source {
            Source::Db(db) => {
                listen::spawn(db.listen_url().to_string(), move |s| {
                    tx.send(wrap(s)).is_ok()
                })?;
                Ok((Feed::Db, None))
            }
            Source::Files(f) => {
                let (feed, live) = FileFeed::start(f.dir(), poll, tx, wrap);
                Ok((Feed::Files(Box::new(feed)), live))
            }
        }
    }

    /// After the live state changed: polls when file events failed; true when everything
    /// should be read again.
    pub fn fallback(&mut self, live: &Live) -> bool {
        match self {
            Feed::Files(f) if matches!(live, Live::Polling(_)) && f.poller.is_none() => {
                f.poller = Some(Poller::new(&f.dir));
                f.watch = None;
                true
            }
            _ => false,
        }
    }

    /// On the board's tick: the files a poll found changed, and the live state to show when
    /// file events stopped arriving.
    pub fn tick(&mut self) -> (Vec<PathBuf>, Option<Live>) {
        match self {
            Feed::Files(f) => f.tick(),
            Feed::Db => (Vec::new(), None),
        }
    }

    /// Changes arrived and were read.
    pub fn saw_changes(&mut self) {
        if let Feed::Files(f) = self {
            f.last_event = Instant::now();
            f.journal_seen = watcher::journal_stamp(&f.dir);
            f.unseen_since = None;
        }
    }
}

impl FileFeed {
    fn start<T: Send + 'static>(
        dir: &Path,
        poll: bool,
        tx: Sender<T>,
        wrap: fn(Signal) -> T,
    ) -> (FileFeed, Option<Live>) {
        let mut f = FileFeed {
            dir: dir.to_path_buf(),
            poller: None,
            watch: None,
            journal_seen: watcher::journal_stamp(dir),
            unseen_since: None,
            last_event: Instant::now(),
        };
        let live = if poll {
            Some(Live::Polling("--poll".into()))
        } else if let Some(fs) = crate::store::lock::network_fs(dir) {
            Some(Live::Polling(format!("{fs}: no events there")))
        } else {
            match watcher::watch_channel(dir, tx, wrap) {
                Ok(w) => {
                    f.watch = Some(w);
                    None
                }
                Err(e) => Some(Live::Polling(format!("watch failed: {e}"))),
            }
        };
        if live.is_some() {
            f.poller = Some(Poller::new(dir));
        }
        (f, live)
    }

    fn tick(&mut self) -> (Vec<PathBuf>, Option<Live>) {
        if let Some(p) = self.poller.as_mut() {
            return (p.scan(), None);
        }
        // No events while the journal grows: events do not arrive here, so poll.
        let stamp = watcher::journal_stamp(&self.dir);
        if stamp == self.journal_seen {
            return (Vec::new(), None);
        }
        match self.unseen_since {
            None => self.unseen_since = Some(Instant::now()),
            Some(t) if self.last_event < t && t.elapsed() >= SILENT => {
                return (
                    Vec::new(),
                    Some(Live::Polling("no file events arrive".into())),
                );
            }
            Some(_) => {}
        }
        (Vec::new(), None)
    }
}
