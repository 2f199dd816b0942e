//! The files for a face that stays open: named by the project's root, reloaded by the files that
//! changed, heard through file events on `.loopx/` (or polling when events fail or stop).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::kernel::{Result, Snapshot, Ts};
use crate::store::live::{Feed, Loaded, Sink, Target, Watched};
use crate::store::parse::shown;
use crate::store::watch::{self, Poller, Watch};
use crate::store::{Env, FileStore};
use crate::store::{Store, lock};

/// How long the journal may grow without a file event before the feed polls instead.
const SILENT: Duration = Duration::from_millis(1500);

impl Watched for FileStore {
    fn name(&self) -> String {
        self.root().display().to_string()
    }

    fn whole(&self) -> String {
        shown(self.dir())
    }

    fn evidence_name(&self, id: &str) -> String {
        shown(&self.evidence_path(id))
    }

    fn load_live(&self) -> Result<Loaded> {
        self.load_view().map(|v| (Some(v.raw), v.snap))
    }

    fn target(&self, path: &Path) -> Target {
        watch::classify(self.dir(), path)
    }

    fn reload_live(&self, base: Snapshot, changed: &[PathBuf]) -> Result<Loaded> {
        self.reload(base, changed).map(|v| (Some(v.raw), v.snap))
    }

    fn evidence_by_journal(&self) -> bool {
        false
    }

    fn watch(&self, poll: bool, sink: Sink) -> Result<(Box<dyn Feed>, Option<String>)> {
        let (feed, why) = FileFeed::start(self.dir(), poll, sink);
        Ok((Box::new(feed), why))
    }

    fn sealing(&self, now: Ts, wait: Duration) -> Option<Box<dyn Store + Sync>> {
        let env = Env {
            now,
            lock_wait: wait,
            ..self.env().clone()
        };
        Some(Box::new(self.clone().with_env(env)))
    }
}

/// File events on `.loopx/`, with polling when they fail or do not arrive.
#[derive(Debug)]
struct FileFeed {
    dir: PathBuf,
    poller: Option<Poller>,
    watch: Option<Watch>,
    journal_seen: Option<(u64, Option<SystemTime>)>,
    unseen_since: Option<Instant>,
    last_event: Instant,
}

impl FileFeed {
    /// Watches `dir` (or polls it: asked to, on a network file system, or when watching
    /// fails, and then says why).
    fn start(dir: &Path, poll: bool, sink: Sink) -> (FileFeed, Option<String>) {
        let mut f = FileFeed {
            dir: dir.to_path_buf(),
            poller: None,
            watch: None,
            journal_seen: watch::journal_stamp(dir),
            unseen_since: None,
            last_event: Instant::now(),
        };
        let why = if poll {
            Some("--poll".into())
        } else if let Some(fs) = lock::network_fs(dir) {
            Some(format!("{fs}: no events there"))
        } else {
            match watch::watch(dir, move |s| {
                let _ = sink(s);
            }) {
                Ok(w) => {
                    f.watch = Some(w);
                    None
                }
                Err(e) => Some(format!("watch failed: {e}")),
            }
        };
        if why.is_some() {
            f.poller = Some(Poller::new(dir));
        }
        (f, why)
    }
}

impl Feed for FileFeed {
    fn tick(&mut self) -> (Vec<PathBuf>, Option<String>) {
        if let Some(p) = self.poller.as_mut() {
            return (p.scan(), None);
        }
        // No events while the journal grows: events do not arrive here, so poll.
        let stamp = watch::journal_stamp(&self.dir);
        if stamp == self.journal_seen {
            return (Vec::new(), None);
        }
        match self.unseen_since {
            None => self.unseen_since = Some(Instant::now()),
            Some(t) if self.last_event < t && t.elapsed() >= SILENT => {
                return (Vec::new(), Some("no file events arrive".into()));
            }
            Some(_) => {}
        }
        (Vec::new(), None)
    }

    fn poll_instead(&mut self) -> bool {
        if self.poller.is_some() {
            return false;
        }
        self.poller = Some(Poller::new(&self.dir));
        self.watch = None;
        true
    }

    fn saw_changes(&mut self) {
        self.last_event = Instant::now();
        self.journal_seen = watch::journal_stamp(&self.dir);
        self.unseen_since = None;
    }
}
