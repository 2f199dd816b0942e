//! `hook serve`: fires the owner's sealed hooks for changes committed to a database, from one
//! machine. It follows commits, reads the journal after its cursor a page at a time and
//! starts the supervisor for each event with a sealed hook, as a commit on files does; when the
//! server goes away it connects again and catches up from its cursor, so no event is lost.

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use serde::Serialize;

use crate::kernel::alert::Alert;
use crate::kernel::{Code, Result, Ts};
use crate::runtime::hooks::{self, Place};
use crate::runtime::process;
use crate::store::follow::{FollowedJournal, Follower};
use crate::store::pg::follow::backoff;

/// The most supervisors running at once; the next event waits for one to end.
pub const RUNNING_MAX: usize = 8;
/// The most journal lines read at once.
pub const PAGE: usize = 64;
/// How long one wait for a notification lasts (a stop signal is seen within it).
const WAIT: Duration = Duration::from_secs(1);
/// After this many quiet waits, the connection is checked and the journal read anyway.
const QUIET_ROUNDS: u32 = 5;
/// How often a full set of supervisors is checked for one that ended.
const SLOT_POLL: Duration = Duration::from_millis(50);

/// What `hook serve` did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Served {
    /// Supervisors started.
    pub fired: u64,
    /// Supervisors that could not start (each journaled as `hook.fail`).
    pub not_started: u64,
    /// The journal line it would have read next.
    pub next: u64,
    /// How many times it connected again after losing the database.
    pub reconnects: u64,
}

/// Where `hook serve` says what it does, a line at a time (stderr).
pub type Say<'a> = &'a mut dyn FnMut(&str);

/// Serves until SIGINT or SIGTERM: from the journal's head, or from line `from`. Hooks run in
/// `dir`. Fails only at the start: when the database cannot be read, or another `hook serve`
/// serves it (exit 8).
pub fn serve(
    store: &dyn FollowedJournal,
    dir: &Path,
    from: Option<u64>,
    say: Say<'_>,
) -> Result<Served> {
    process::forward_signals();
    let cursor = match from {
        Some(seq) => seq.saturating_sub(1),
        None => store.journal_end()?,
    };
    let mut s = Server {
        store,
        dir,
        cursor,
        running: Vec::new(),
        served: Served::default(),
    };
    let mut failed = 0u32;
    let mut first = true;
    while !stopped() {
        let why = match store.follower_alone() {
            Ok(mut c) => {
                if first {
                    say(&format!(
                        "serving hooks for the journal's lines after line {}; stop with Ctrl-C",
                        s.cursor
                    ));
                } else {
                    s.served.reconnects += 1;
                    say(&format!(
                        "connected again; catching up after line {}",
                        s.cursor
                    ));
                }
                (first, failed) = (false, 0);
                match s.follow(c.as_mut(), say) {
                    Ok(()) => break,
                    Err(e) => e.message,
                }
            }
            // Another `hook serve` at the start: this one is not wanted. Not the owner's login:
            // never.
            Err(e) if e.code == Code::Denied || (first && e.code.is_busy()) => return Err(e),
            Err(e) => e.message,
        };
        failed = failed.saturating_add(1);
        say(&format!("the database: {why}; connecting again"));
        // The first try after a drop is at once: a connection a proxy cut may come back.
        if failed > 1 {
            pause(backoff(failed - 1));
        }
    }
    s.reap();
    s.served.next = s.cursor.saturating_add(1);
    Ok(s.served)
}

/// True once SIGINT or SIGTERM came.
fn stopped() -> bool {
    process::signalled().is_some()
}

/// Sleeps `d`, or less when a stop signal comes.
fn pause(d: Duration) {
    let slice = Duration::from_millis(100);
    let mut left = d;
    while !left.is_zero() && !stopped() {
        let step = left.min(slice);
        std::thread::sleep(step);
        left -= step;
    }
}

/// The serving state: the cursor (the last journal line handled) and the running supervisors.
struct Server<'a> {
    store: &'a dyn FollowedJournal,
    dir: &'a Path,
    cursor: u64,
    running: Vec<Child>,
    served: Served,
}

impl Server<'_> {
    /// Catches up, then waits for commits and catches up after each, until stopped (`Ok`) or
    /// the database fails (the error).
    fn follow(&mut self, c: &mut dyn Follower, say: Say<'_>) -> Result<()> {
        self.catch_up(say)?;
        let mut quiet = 0;
        while !stopped() {
            self.reap();
            if c.notified(WAIT)? > 0 {
                quiet = 0;
                self.catch_up(say)?;
                continue;
            }
            quiet += 1;
            if quiet >= QUIET_ROUNDS {
                // A notification lost with a cut connection is found here.
                quiet = 0;
                c.alive()?;
                self.catch_up(say)?;
            }
        }
        Ok(())
    }

    /// Fires the hooks of every line after the cursor, a page at a time, moving the cursor on.
    fn catch_up(&mut self, say: Say<'_>) -> Result<()> {
        loop {
            let (events, end) = self.store.journal_page(self.cursor, PAGE)?;
            if end == self.cursor {
                // A journal shorter than the cursor started again (a goal replaced): from its
                // first line.
                if self.cursor > 0 && self.store.journal_end()? < self.cursor {
                    say("the journal started again (a new goal): serving from its first line");
                    self.cursor = 0;
                    continue;
                }
                return Ok(());
            }
            let snap = self.store.load()?;
            for e in &events {
                for a in hooks::to_fire(&snap, std::slice::from_ref(e), self.dir) {
                    if !self.slot() {
                        return Ok(());
                    }
                    self.fire(&a, say);
                }
                self.cursor = self.cursor.max(e.seq);
            }
            self.cursor = self.cursor.max(end);
        }
    }

    /// Starts the supervisor of alert `a` (journals `hook.fail` when it cannot start).
    fn fire(&mut self, a: &Alert, say: Say<'_>) {
        let place = Place {
            dir: self.dir,
            url: Some(self.store.url()),
        };
        let seq = a.payload["seq"].as_u64().unwrap_or(0);
        match hooks::start(place, a) {
            Ok(child) => {
                self.running.push(child);
                self.served.fired += 1;
                say(&format!("line {seq}: {} fired its hook", a.event));
            }
            Err(e) => {
                self.served.not_started += 1;
                say(&format!(
                    "line {seq}: {}: cannot start its hook: {e}",
                    a.event
                ));
                let now = Ts::checked_now().unwrap_or(self.store.env().now);
                hooks::not_started(self.store, now, a, &e);
            }
        }
    }

    /// Waits until fewer than [`RUNNING_MAX`] supervisors run; false when stopped first.
    fn slot(&mut self) -> bool {
        loop {
            self.reap();
            if self.running.len() < RUNNING_MAX {
                return true;
            }
            if stopped() {
                return false;
            }
            std::thread::sleep(SLOT_POLL);
        }
    }

    /// Forgets the supervisors that ended (reaping them).
    fn reap(&mut self) {
        self.running
            .retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }
}
