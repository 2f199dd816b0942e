//! Following a database's commits: a connection that `LISTEN`s on channel `loopx`, waiting on it,
//! reading the journal after a cursor a page at a time, and the backoff between reconnects.

use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use crate::kernel::{Code, Error, Event, Result};
use crate::store::live::{Followed, Listener};
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

/// Waits up to `wait` for commits' notifications on a listening connection: how many came
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

/// Checks that a quiet listening connection is still there (a cut cable says nothing).
pub fn alive(c: &mut postgres::Client) -> Result<()> {
    if c.is_closed() {
        return Err(Error::new(Code::Io, "the database closed the connection"));
    }
    c.is_valid(PROBE).map_err(db_error)
}

impl Listener for postgres::Client {
    fn notified(&mut self, wait: Duration) -> Result<usize> {
        notified(self, wait)
    }

    fn alive(&mut self) -> Result<()> {
        alive(self)
    }
}

impl Followed for PgStore {
    fn listen_alone(&self) -> Result<Box<dyn Listener>> {
        Ok(Box::new(PgStore::listen_alone(&self.url)?))
    }

    fn journal_page(&self, after: u64, limit: usize) -> Result<(Vec<Event>, u64)> {
        PgStore::journal_page(self, after, limit)
    }

    fn url(&self) -> &str {
        &self.url
    }
}

impl PgStore {
    /// A new connection that listens for commits: each commit notifies channel `loopx` with the
    /// journal's last `seq` (the trigger `journal_notify`), delivered when it commits.
    pub fn listen(url: &str) -> Result<postgres::Client> {
        let mut c = Self::connect(url)?;
        c.batch_execute("LISTEN loopx").map_err(db_error)?;
        Ok(c)
    }

    /// [`PgStore::listen`], holding the database's `hook serve` lock for as long as the
    /// connection lasts: exit 8 while another connection holds it.
    pub fn listen_alone(url: &str) -> Result<postgres::Client> {
        let mut c = Self::listen(url)?;
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
