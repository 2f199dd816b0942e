//! Following a database's commits: a connection that `LISTEN`s on channel `loopx`, waiting on it,
//! reading the journal after a cursor a page at a time, and the backoff between reconnects; and
//! the database for a face that stays open: named by its URL (no password), loaded in full, and
//! heard through a thread with a connection of its own that says "changed" on each commit; when
//! the connection drops it says "reconnecting", tries again with a backoff (1 s doubling to
//! 10 s), and once back asks for one full reload (it missed events).

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use crate::kernel::{Code, Error, Event, Result, Snapshot, Ts};
use crate::store::Store;
use crate::store::follow::{
    Feed, Followed, FollowedJournal, Follower, Loaded, Signal, Sink, Target,
};
use crate::store::pg::{PgStore, db_error};

/// The first wait before connecting again.
pub const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// The longest wait before connecting again.
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// The advisory lock `hook serve` holds on its database (a session lock, gone with the session).
const SERVE_LOCK: i64 = 0x6c6f_6f70_7868_6b73;
/// How long a check that a quiet connection is alive may take.
const PROBE: Duration = Duration::from_secs(5);

/// The wait before the next try after `failed` failed tries in a row: 1 s, 2 s, 4 s, 8 s, 10 s...
pub fn backoff(failed: u32) -> Duration {
    BACKOFF_MIN
        .saturating_mul(1 << failed.saturating_sub(1).min(8))
        .min(BACKOFF_MAX)
}

/// Waits up to `wait` for commits' notifications on a follower: how many came
/// (those that came together count once each). An error when the connection failed.
pub fn notified(c: &mut postgres::Client, wait: Duration) -> Result<usize> {
    let mut n = c.notifications();
    let first = n.timeout_iter(wait).next().map_err(db_error)?;
    if first.is_none() {
        return Ok(0);
    }
    // Fold what arrived with it into the same wake.
    Ok(1 + n.iter().count().map_err(db_error)?)
}

/// Checks that a quiet follower is still there (a cut cable says nothing).
pub fn alive(c: &mut postgres::Client) -> Result<()> {
    if c.is_closed() {
        return Err(Error::new(Code::Io, "the database closed the connection"));
    }
    c.is_valid(PROBE).map_err(db_error)
}

impl Follower for postgres::Client {
    fn notified(&mut self, wait: Duration) -> Result<usize> {
        notified(self, wait)
    }

    fn alive(&mut self) -> Result<()> {
        alive(self)
    }
}

impl FollowedJournal for PgStore {
    fn follower_alone(&self) -> Result<Box<dyn Follower>> {
        Ok(Box::new(PgStore::follower_alone(&self.url)?))
    }

    fn journal_page(&self, after: u64, limit: usize) -> Result<(Vec<Event>, u64)> {
        PgStore::journal_page(self, after, limit)
    }

    fn url(&self) -> &str {
        &self.url
    }
}

impl PgStore {
    /// A follower: a new connection that `LISTEN`s for commits; each commit notifies channel
    /// `loopx` with the journal's last `seq` (the trigger `journal_notify`), delivered when it
    /// commits.
    pub fn follower(url: &str) -> Result<postgres::Client> {
        let mut c = Self::connect(url)?;
        c.batch_execute("LISTEN loopx").map_err(db_error)?;
        Ok(c)
    }

    /// [`PgStore::follower`], holding the database's `hook serve` lock for as long as the
    /// connection lasts: exit 8 while another connection holds it.
    pub fn follower_alone(url: &str) -> Result<postgres::Client> {
        let mut c = Self::follower(url)?;
        // The hooks are the owner's commands: an agent's login neither runs them nor holds
        // the lock that would keep the owner's serve out (it is taken only after this).
        let owner: bool = c
            .query_one("SELECT loopx.is_owner()", &[])
            .map_err(db_error)?
            .get(0);
        if !owner {
            return Err(
                Error::new(Code::Denied, "`hook serve` runs the owner's hooks")
                    .hint("run it as the owner's login (a member of PREFIX_owner)"),
            );
        }
        let row = c
            .query_one("SELECT pg_try_advisory_lock($1)", &[&SERVE_LOCK])
            .map_err(db_error)?;
        if !row.get::<_, bool>(0) {
            let holder = c
                .query_opt(
                    "SELECT a.usename::text, a.pid FROM pg_locks l JOIN pg_stat_activity a \
                     ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted \
                     AND ((l.classid::bigint << 32) | l.objid::bigint) = $1 LIMIT 1",
                    &[&SERVE_LOCK],
                )
                .ok()
                .flatten()
                .map(|r| (r.get::<_, Option<String>>(0), r.get::<_, i32>(1)));
            let who = match holder {
                Some((name, pid)) => format!(
                    " (login {}, server process {pid}; if it is not yours, end it with \
                     `SELECT pg_terminate_backend({pid})`)",
                    name.unwrap_or_default()
                ),
                None => String::new(),
            };
            return Err(Error::new(
                Code::Busy,
                format!("another `loopx hook serve` serves this database{who}"),
            )
            .hint("run one per database (two would run each hook twice): stop the other first"));
        }
        Ok(c)
    }

    /// At most `limit` journal lines after line `after`, oldest first (a line that does not
    /// read is skipped), and the `seq` of the last line read (`after` when there is none).
    pub fn journal_page(&self, after: u64, limit: usize) -> Result<(Vec<Event>, u64)> {
        let from = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.with(|c| {
            c.client()?
                .query(
                    "SELECT seq, line FROM loopx.journal WHERE seq > $1 ORDER BY seq LIMIT $2",
                    &[&from, &limit],
                )
                .map_err(db_error)
        })?;
        let mut end = after;
        let mut events = Vec::with_capacity(rows.len());
        for r in rows {
            end = end.max(u64::try_from(r.get::<_, i64>(0)).unwrap_or(0));
            if let Ok(e) = serde_json::from_str(r.get::<_, &str>(1)) {
                events.push(e);
            }
        }
        Ok((events, end))
    }
}

/// How long the thread waits for a notification before it checks the connection is alive.
const IDLE: Duration = Duration::from_secs(5);

impl Followed for PgStore {
    fn name(&self) -> String {
        self.shown_url()
    }

    fn whole(&self) -> String {
        "database".into()
    }

    fn evidence_name(&self, id: &str) -> String {
        format!("database:evidence/{id}")
    }

    fn load_followed(&self) -> Result<Loaded> {
        self.load().map(|snap| (None, snap))
    }

    fn target(&self, _path: &Path) -> Target {
        Target::Everything
    }

    fn reload_followed(&self, _base: Snapshot, _changed: &[PathBuf]) -> Result<Loaded> {
        self.load_followed()
    }

    fn evidence_by_journal(&self) -> bool {
        true
    }

    fn follow(&self, _poll: bool, sink: Sink) -> Result<(Box<dyn Feed>, Option<String>)> {
        spawn(self.follower_url().to_string(), sink)?;
        Ok((Box::new(crate::store::follow::Silent), None))
    }

    fn sealing(&self, _now: Ts, _wait: Duration) -> Option<Box<dyn Store + Sync>> {
        None
    }
}

/// Starts the following thread on `url`; it sends each signal through `send`, and ends when
/// `send` says the face is gone (returns false).
fn spawn<F>(url: String, send: F) -> Result<JoinHandle<()>>
where
    F: Fn(Signal) -> bool + Send + 'static,
{
    std::thread::Builder::new()
        .name("board-listen".into())
        .spawn(move || follow(&url, &send))
        .map_err(|e| Error::new(Code::Io, format!("cannot start the listening thread: {e}")))
}

/// Connects, follows until the connection fails, and again, until the face is gone.
fn follow(url: &str, send: &dyn Fn(Signal) -> bool) {
    let mut failed = 0u32;
    loop {
        let why = match PgStore::follower(url) {
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
