//! The PostgreSQL store: the same snapshots and transactions as the file store, for agents on
//! many machines, with the owner's authority enforced by the database's own roles.

mod as_store;
mod claim;
mod commit;
mod doctor;
mod fast;
pub mod follow;
mod goal;
pub mod history;
mod kept;
mod load;
mod poll;
pub mod port;
mod redact;
pub mod roles;
pub mod schema;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::kernel::{Code, Error, Result, Snapshot};
use crate::store::Env;

pub use load::Cached;
pub use redact::redact;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a statement may run before the database cancels it.
const STATEMENT_TIMEOUT_MS: u32 = 15_000;

/// A project kept in a PostgreSQL database (`postgres://...`).
pub struct PgStore {
    url: String,
    env: Env,
    conn: Mutex<Conn>,
}

/// The connection and the copy of the project read through it.
pub(crate) struct Conn {
    pub(crate) client: Option<postgres::Client>,
    pub(crate) cache: Cached,
    /// Statements prepared on this connection, by their text.
    stmts: std::collections::HashMap<&'static str, postgres::Statement>,
    /// Whether `NAMED` was run on this connection.
    named: bool,
    /// The database's schema version, read when connecting.
    pub(crate) version: i64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("url", &redact(&self.url))
            .finish()
    }
}

/// A database error as loopx reports it: refused privileges are the owner's authority (exit 7),
/// a lost or refused connection is I/O (exit 1), a conflict is retried by `mutate`.
pub fn db_error(e: postgres::Error) -> Error {
    use postgres::error::SqlState;
    let Some(db) = e.as_db_error() else {
        let closed = e.is_closed();
        return Error::new(
            Code::Io,
            format!(
                "the database {}: {e}",
                if closed {
                    "connection was lost"
                } else {
                    "did not answer"
                }
            ),
        )
        .hint("check that the server is up and reachable, then run the command again");
    };
    let code = db.code();
    if *code == SqlState::INSUFFICIENT_PRIVILEGE {
        return Error::new(
            Code::Denied,
            format!("the database refused: {}", db.message()),
        )
        .hint("this is the owner's to do: connect as the owner's role, with the owner's key");
    }
    if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::UNIQUE_VIOLATION
    {
        return conflict(db.message());
    }
    if *code == SqlState::LOCK_NOT_AVAILABLE {
        return Error::new(
            Code::Busy,
            "another agent held what this change needs for too long",
        )
        .hint("try again");
    }
    if code.code().starts_with("57P") {
        // The server shut down, crashed or is starting: the connection is gone.
        return Error::new(
            Code::Io,
            format!("the database connection was lost: {}", db.message()),
        )
        .hint("check that the server is up and reachable, then run the command again");
    }
    if *code == SqlState::QUERY_CANCELED {
        return Error::new(
            Code::Busy,
            "the database took too long and cancelled the statement",
        )
        .hint("try again; if it persists, check the server's load");
    }
    if *code == SqlState::UNDEFINED_TABLE || *code == SqlState::INVALID_SCHEMA_NAME {
        return Error::new(Code::NotInitialized, "the database has no loopx schema")
            .hint("create it with `loopx store migrate` (as the database's owner)");
    }
    Error::new(Code::Io, format!("the database said: {}", db.message()))
}

/// What went wrong, down to its first cause ("connection refused", "password authentication
/// failed for user ..."), not only "db error".
fn cause(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut text = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        text = format!("{text}: {s}");
        src = s.source();
    }
    text
}

/// An optimistic conflict: another transaction changed what this one read; `mutate` retries.
pub(crate) fn conflict(what: &str) -> Error {
    Error::new(
        Code::Conflict,
        format!("another agent changed the project at the same time ({what})"),
    )
    .details(serde_json::json!({ "retry": true }))
    .hint("run the command again")
}

impl PgStore {
    /// A store on the database at `url`; nothing is sent until it is first used.
    pub fn new(url: &str, env: Env) -> Result<PgStore> {
        check_url(url)?;
        Ok(PgStore {
            url: url.to_string(),
            env,
            conn: Mutex::new(Conn {
                client: None,
                cache: Cached::default(),
                stmts: Default::default(),
                named: false,
                version: 0,
            }),
        })
    }

    /// The URL, with its password hidden.
    pub fn shown_url(&self) -> String {
        redact(&self.url)
    }

    /// The clock and limits of this command.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// A new connection, with loopx's timeouts set.
    pub fn connect(url: &str) -> Result<postgres::Client> {
        let mut cfg: postgres::Config = url
            .parse()
            .map_err(|e| Error::usage(format!("{} is not a PostgreSQL URL: {e}", redact(url))))?;
        cfg.connect_timeout(CONNECT_TIMEOUT);
        // A server that goes away without closing the connection is noticed in seconds.
        cfg.keepalives(true);
        cfg.keepalives_idle(Duration::from_secs(5));
        cfg.tcp_user_timeout(Duration::from_secs(20));
        cfg.application_name("loopx");
        cfg.options(&format!(
            "-c statement_timeout={STATEMENT_TIMEOUT_MS} -c lock_timeout=10000"
        ));
        cfg.connect(postgres::NoTls).map_err(|e| {
            Error::new(
                Code::Io,
                format!(
                    "cannot connect to the database at {}: {}",
                    redact(url),
                    cause(&e)
                ),
            )
            .hint("check the URL (--store, LOOPX_STORE or [store] url) and that the server is up")
        })
    }

    /// The URL a follower of its own is opened on ([`PgStore::follower`]); it may hold a
    /// password: never show it.
    pub fn follower_url(&self) -> &str {
        &self.url
    }

    /// The project's owner public key, as the database holds it now (`None`: it has none).
    pub fn owner_pub(&self) -> Result<Option<crate::kernel::authority::OwnerPub>> {
        let now = self.env.now;
        self.with(|c| {
            let snap = c.fresh(now)?;
            c.cache.give_back(snap, &[]);
            c.cache.owner_pub()
        })
    }

    /// The connection (made or made again when lost) and the cache, locked for this thread.
    pub(crate) fn conn(&self) -> Result<MutexGuard<'_, Conn>> {
        let mut g = self
            .conn
            .lock()
            .map_err(|_| Error::new(Code::Internal, "the database connection was poisoned"))?;
        if g.client.as_ref().is_none_or(|c| c.is_closed()) {
            let mut c = Self::connect(&self.url)?;
            g.version = check_schema(&mut c)?;
            g.client = Some(c);
            g.stmts.clear();
            g.named = false;
        }
        Ok(g)
    }

    /// Runs `f` (a read) on the connection; a lost connection is dropped, so the next call
    /// reconnects, and `f` runs once more on a new one: a server that restarted while the
    /// connection sat idle is found closed only when used.
    pub(crate) fn with<T>(&self, mut f: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        let mut again = true;
        loop {
            let mut g = self.conn()?;
            let r = f(&mut g);
            if g.client.as_ref().is_some_and(|c| c.is_closed()) {
                g.client = None;
                if r.is_err() && std::mem::take(&mut again) {
                    continue;
                }
            }
            return r;
        }
    }

    /// The JSON texts of a query's first column, parsed; a row that does not parse is skipped.
    fn parsed<T: serde::de::DeserializeOwned>(
        &self,
        sql: &str,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<T>> {
        let rows = self.with(|c| c.client()?.query(sql, params).map_err(db_error))?;
        Ok(rows
            .iter()
            .filter_map(|r| serde_json::from_str(&r.get::<_, String>(0)).ok())
            .collect())
    }

    /// The one number a query answers (a count, a `seq`); negative counts as 0.
    fn count(&self, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> Result<u64> {
        let r = self.with(|c| c.client()?.query_one(sql, params).map_err(db_error))?;
        Ok(u64::try_from(r.get::<_, i64>(0)).unwrap_or(0))
    }

    /// The journal's lines after line `after`, as `journal.jsonl` would hold them, and the
    /// last line's `seq`.
    pub fn journal_bytes(&self, after: u64) -> Result<(Vec<u8>, u64)> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = self.with(|c| {
            c.client()?
                .query(
                    "SELECT seq, line FROM loopx.journal WHERE seq > $1 ORDER BY seq",
                    &[&after],
                )
                .map_err(db_error)
        })?;
        let mut out = Vec::new();
        let mut end = 0;
        for r in rows {
            end = u64::try_from(r.get::<_, i64>(0)).unwrap_or(0);
            out.extend_from_slice(r.get::<_, &str>(1).as_bytes());
            out.push(b'\n');
        }
        Ok((out, end))
    }

    /// The database's schema version (0 when it has none), for `store migrate` and `doctor`.
    pub fn schema_version(&self) -> Result<i64> {
        schema::current_version(&mut Self::connect(&self.url)?)
    }

    /// Creates or upgrades the schema and the two roles (needs a role that may create them).
    pub fn migrate(&self, roles: &roles::Roles) -> Result<schema::Migrated> {
        let history = history::schema(roles);
        let m = schema::migrate(&mut Self::connect(&self.url)?, roles, &history)?;
        if let Ok(mut g) = self.conn.lock() {
            g.client = None;
            g.cache = Cached::default();
        }
        Ok(m)
    }
}

impl Conn {
    /// The open client.
    pub(crate) fn client(&mut self) -> Result<&mut postgres::Client> {
        self.client
            .as_mut()
            .ok_or_else(|| Error::new(Code::Io, "the database connection was lost"))
    }

    /// Prepares the claim's and the commit's calls by name (`NAMED`) unless done on this
    /// connection: the one-message transactions `EXECUTE` them, planned once per connection.
    pub(crate) fn named(&mut self) -> Result<()> {
        if !self.named {
            self.client()?
                .batch_execute(claim::NAMED)
                .map_err(db_error)?;
            self.named = true;
        }
        Ok(())
    }

    /// The client, and `sql` prepared on it once per connection.
    pub(crate) fn prep(
        &mut self,
        sql: &'static str,
    ) -> Result<(&mut postgres::Client, postgres::Statement)> {
        let c = self
            .client
            .as_mut()
            .ok_or_else(|| Error::new(Code::Io, "the database connection was lost"))?;
        let st = match self.stmts.get(sql) {
            Some(st) => st.clone(),
            None => {
                let st = c.prepare(sql).map_err(db_error)?;
                self.stmts.insert(sql, st.clone());
                st
            }
        };
        Ok((c, st))
    }

    /// The cache brought up to date, and its snapshot lent (give it back to the cache).
    pub(crate) fn fresh(&mut self, now: crate::kernel::Ts) -> Result<Snapshot> {
        let since = i64::try_from(self.cache.head).unwrap_or(i64::MAX);
        let (c, st) = self.prep(load::CHANGES)?;
        let row = c.query_one(&st, &[&since, &i64::MAX]).map_err(db_error)?;
        let applied = self.cache.apply(&row, now).inspect_err(|_| {
            // Half applied, the copy would skip the rest for good: read it all next time.
            self.cache = Cached::default();
        })?;
        if !applied {
            // The database was replaced under us: read it all again.
            self.cache = Cached::default();
            let (c, st) = self.prep(load::CHANGES)?;
            let row = c.query_one(&st, &[&0i64, &i64::MAX]).map_err(db_error)?;
            self.cache.apply(&row, now)?;
        }
        self.cache.lend()
    }

    /// The cache brought up to date, and a copy of its snapshot.
    pub(crate) fn fresh_copy(&mut self, now: crate::kernel::Ts) -> Result<Snapshot> {
        let snap = self.fresh(now)?;
        let copy = snap.clone();
        self.cache.give_back(snap, &[]);
        Ok(copy)
    }
}

/// Refuses a database without loopx's schema, or with a newer one.
fn check_schema(c: &mut postgres::Client) -> Result<i64> {
    let v = schema::current_version(c)?;
    if v == 0 {
        return Err(
            Error::new(Code::NotInitialized, "the database has no loopx schema")
                .hint("create it with `loopx store migrate` (as the database's owner)"),
        );
    }
    if v > schema::VERSION {
        return Err(Error::new(
            Code::SchemaTooNew,
            format!(
                "the database has loopx schema {v}; this loopx knows {}",
                schema::VERSION
            ),
        )
        .hint("upgrade loopx"));
    }
    Ok(v)
}

/// A URL loopx will use: `postgres://` or `postgresql://`, at most 2 KiB, no control characters.
pub fn check_url(url: &str) -> Result<()> {
    if url.len() > 2048 || url.chars().any(char::is_control) {
        return Err(Error::usage(
            "the store URL must be at most 2 KiB, without control characters",
        ));
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(Error::usage(format!(
            "{} is not a store URL: loopx knows postgres://USER@HOST:PORT/DB",
            redact(url)
        )));
    }
    Ok(())
}
