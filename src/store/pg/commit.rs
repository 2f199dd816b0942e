//! A transaction on the database: the snapshot read at its start (a claim's lock is in
//! `claim.rs`), and a commit that writes every row, the evidence, the spends and the journal
//! lines in one database transaction, ordered by the journal's lock.

use std::collections::HashMap;
use std::sync::MutexGuard;

use postgres::Row;
use postgres::types::ToSql;
use serde_json::Value;

use crate::kernel::authority::OwnerPub;
use crate::kernel::ops::{Change, Write};
use crate::kernel::seal::Mark;
use crate::kernel::{Code, Error, Event, Gate, Result, Snapshot, Ts};
use crate::store::Env;
use crate::store::Transaction;
use crate::store::core::{Before, chain, prepare};
use crate::store::pg::{Conn, PgStore, db_error};

/// A transaction whose commit waits until every commit before it is on disk.
///
/// PostgreSQL flushes the WAL at a commit only when the transaction has an xid and wrote WAL
/// before its commit record; otherwise it commits asynchronously, whatever
/// `synchronous_commit` says (so `SELECT txid_current()` alone waits for nothing). A
/// transactional logical message does both: it takes an xid and writes a WAL record, at every
/// `wal_level`, and every role may call it. Its commit record comes after those of the commits
/// before it, so the flush that it waits for covers them.
pub(super) const DURABLE: &str = "BEGIN; SELECT pg_logical_emit_message(true, 'loopx', ''); COMMIT";

/// Whether a database error is the disk wait's (of [`DURABLE`], after the change's COMMIT).
pub(super) fn in_wait(e: &postgres::error::DbError) -> bool {
    e.message().contains("pg_logical_emit_message")
}

/// One change in the making on the database.
pub(crate) struct PgTx<'a> {
    pub(super) conn: MutexGuard<'a, Conn>,
    pub(super) snap: Snapshot,
    /// The journal line the snapshot is current to.
    pub(super) base: u64,
    /// Rows read again under a lock during the transaction: their `seq` now.
    pub(super) fresh: HashMap<String, u64>,
    /// Todos changed in `snap` by this transaction (set back when it goes to the cache).
    pub(super) touched: Vec<String>,
    pub(super) open: bool,
    /// The time the snapshot was read at.
    pub(super) now: Ts,
    /// Where the owner's key is, for an owner change.
    pub(super) env: &'a Env,
}

impl<'a> PgTx<'a> {
    /// Reads the snapshot; the database transaction itself starts with the first statement
    /// that needs it (a claim's lock, the commit), in the same round trip.
    pub(crate) fn begin(store: &'a PgStore) -> Result<PgTx<'a>> {
        let mut conn = store.conn()?;
        let snap = match conn.fresh(store.env().now) {
            Ok(s) => s,
            // A connection the server closed while it sat idle (a restart): once more on a new one.
            Err(_)
                if conn
                    .client
                    .as_ref()
                    .is_some_and(postgres::Client::is_closed) =>
            {
                conn.client = None;
                drop(conn);
                conn = store.conn()?;
                conn.fresh(store.env().now)?
            }
            Err(e) => return Err(e),
        };
        let base = conn.cache.head;
        let now = store.env().now;
        Ok(PgTx {
            now,
            env: store.env(),
            conn,
            snap,
            base,
            fresh: HashMap::new(),
            touched: Vec::new(),
            open: false,
        })
    }

    /// `BEGIN; ` when the database transaction has not started yet (and it is marked started:
    /// the text goes first in the next message), else nothing.
    pub(super) fn begin_text(&mut self) -> &'static str {
        if std::mem::replace(&mut self.open, true) {
            ""
        } else {
            "BEGIN; "
        }
    }

    /// Starts the database transaction now, unless it has started.
    fn ensure_open(&mut self) -> Result<()> {
        if !self.open {
            self.client()?.batch_execute("BEGIN").map_err(db_error)?;
            self.open = true;
        }
        Ok(())
    }

    pub(super) fn client(&mut self) -> Result<&mut postgres::Client> {
        self.conn.client()
    }

    fn q_opt(&mut self, sql: &'static str, p: &[&(dyn ToSql + Sync)]) -> Result<Option<Row>> {
        self.ensure_open()?;
        let (c, st) = self.conn.prep(sql)?;
        c.query_opt(&st, p).map_err(db_error)
    }

    fn q_all(&mut self, sql: &'static str, p: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>> {
        self.ensure_open()?;
        let (c, st) = self.conn.prep(sql)?;
        c.query(&st, p).map_err(db_error)
    }

    fn q_one(&mut self, sql: &'static str, p: &[&(dyn ToSql + Sync)]) -> Result<Row> {
        self.ensure_open()?;
        let (c, st) = self.conn.prep(sql)?;
        c.query_one(&st, p).map_err(db_error)
    }

    fn q_exec(&mut self, sql: &'static str, p: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        self.ensure_open()?;
        let (c, st) = self.conn.prep(sql)?;
        c.execute(&st, p).map_err(db_error)
    }

    /// The `seq` the snapshot's copy of todo `id` has (0: not in the project).
    pub(super) fn todo_seq(&self, id: &str) -> u64 {
        self.fresh
            .get(id)
            .copied()
            .unwrap_or_else(|| self.conn.cache.todos.get(id).map_or(0, |r| r.seq))
    }

    /// The journal's last line, with the journal's lock taken until the end of the transaction.
    pub(super) fn journal_head(&mut self) -> Result<Option<(u64, String)>> {
        let row = self.q_opt("SELECT seq, line FROM loopx.journal_head()", &[])?;
        Ok(row.map(|r| (u64::try_from(r.get::<_, i64>(0)).unwrap_or(0), r.get(1))))
    }

    /// The seal's mark of the journal's last line: its `seq`, its byte offset as a
    /// `journal.jsonl` of the same lines would have it, and its hash.
    pub(super) fn mark(&mut self, last: Option<&(u64, String)>) -> Result<Option<Mark>> {
        let Some((seq, line)) = last else {
            return Ok(None);
        };
        let s = i64::try_from(*seq).unwrap_or(i64::MAX);
        let r = self.q_one(
            "SELECT coalesce(sum(octet_length(line) + 1), 0)::bigint FROM loopx.journal \
                 WHERE seq < $1",
            &[&s],
        )?;
        Ok(Some(Mark {
            seq: *seq,
            offset: u64::try_from(r.get::<_, i64>(0)).unwrap_or(0),
            hash: chain::sha256_hex(line.as_bytes()),
        }))
    }

    /// Commits an owner's change: the locks (the todos it writes, by id, then the journal's, so
    /// two commits never wait on each other), the change prepared on what they hold, its rows
    /// through `loopx.commit` (which checks what the change was decided on) and its signed lines.
    fn commit_owner(&mut self, change: Change) -> Result<Vec<Event>> {
        let mut ids: Vec<&str> = change
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::Todo(t) | Write::Archive(t) => Some(t.id.as_str()),
                _ => None,
            })
            .collect();
        ids.sort_unstable();
        self.q_all(
            "SELECT id FROM loopx.todos WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            &[&ids],
        )?;
        let last = self.journal_head()?;
        let key = self.env.key.clone();
        let p = prepare(
            change,
            &mut PgBefore {
                tx: self,
                last: last.as_ref(),
            },
            &key,
        )?;
        let mut rows = self.rows(&p.writes)?;
        for (name, text) in &p.docs {
            rows.doc(name, text);
        }
        self.call_commit(&rows, &[])?;
        let (events, lines) = chain::build_lines(
            last.as_ref().map(|(_, l)| l.as_bytes()),
            p.events,
            p.signer.as_ref(),
            Some(Vec::new()),
        )?;
        self.insert_lines(&events, &lines)?;
        Ok(events)
    }

    /// Writes an owner document (`owner.seal`, `owner.pub`) at journal position `seq`.
    pub(super) fn put_doc(&mut self, name: &str, body: &str, seq: i64) -> Result<()> {
        self.q_exec(
            "INSERT INTO loopx.docs (name, body, seq) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET body = $2, seq = $3",
            &[&name, &body, &seq],
        )?;
        Ok(())
    }

    /// Inserts the journal lines in one statement (the database checks their chain).
    pub(super) fn insert_lines(&mut self, events: &[Event], lines: &[u8]) -> Result<()> {
        let seqs: Vec<i64> = events
            .iter()
            .map(|e| i64::try_from(e.seq).unwrap_or(i64::MAX))
            .collect();
        let texts: Vec<String> = lines
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        self.q_exec(
            "INSERT INTO loopx.journal (seq, line) SELECT * FROM unnest($1::bigint[], $2::text[])",
            &[&seqs, &texts],
        )?;
        Ok(())
    }

    /// Commits what the transaction wrote, then waits until it is on disk.
    ///
    /// The commit releases the journal's lock at once, without waiting for the disk; the second
    /// transaction waits for the disk instead (its commit is flushed after this one's, with
    /// other clients' at the same time), so the change is durable before loopx says so, and
    /// commits are not queued behind each other's flushes.
    pub(super) fn finish(&mut self) -> Result<()> {
        self.open = false;
        let r = self
            .client()?
            .batch_execute("SET LOCAL synchronous_commit = off; COMMIT");
        match r {
            Ok(()) => self.durable(),
            Err(e) => Err(self.lost(e)),
        }
    }

    /// Waits until every commit before now is on disk. It follows a COMMIT: when it fails, the
    /// change is in, but not known to be on disk.
    pub(super) fn durable(&mut self) -> Result<()> {
        let r = self
            .conn
            .client
            .as_mut()
            .map_or(Ok(()), |c| c.batch_execute(DURABLE));
        r.map_err(|e| {
            self.conn.client = None;
            e.as_db_error().map_or_else(outcome_unknown, wait_refused)
        })
    }

    /// The error for a failed commit: the connection is dropped; when it was lost, the outcome
    /// is unknown.
    fn lost(&mut self, e: postgres::Error) -> Error {
        let lost = e.is_closed() || e.as_db_error().is_none();
        self.conn.client = None;
        if lost { outcome_unknown() } else { db_error(e) }
    }

    /// Ends the transaction with nothing written.
    pub(super) fn abandon(&mut self) {
        self.rollback();
    }

    fn rollback(&mut self) {
        if self.open {
            self.open = false;
            if let Some(c) = self.conn.client.as_mut()
                && c.batch_execute("ROLLBACK").is_err()
            {
                self.conn.client = None;
            }
        }
    }
}

pub(super) fn internal(e: impl std::fmt::Display) -> Error {
    Error::new(Code::Internal, e.to_string())
}

/// The error for a commit whose connection was lost after it was sent.
pub(super) fn outcome_unknown() -> Error {
    Error::new(
        Code::Io,
        "the database connection was lost while committing: the change may or may not be in",
    )
    .hint("check with `loopx status` before running the command again")
}

/// The error for a disk wait the database refused after the change's COMMIT.
pub(super) fn wait_refused(e: &postgres::error::DbError) -> Error {
    Error::new(
        Code::Io,
        format!(
            "the change was committed, but the database refused to wait until it is on disk: {}",
            e.message()
        ),
    )
    .hint(
        "let the login's role call pg_logical_emit_message(boolean, text, text) (every role \
         may by default), then check with `loopx status` before running the command again",
    )
}

/// A record as JSON.
pub(super) fn json<T: serde::Serialize>(v: &T) -> Result<Value> {
    serde_json::to_value(v).map_err(internal)
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        self.rollback();
        let empty = Snapshot::new(crate::kernel::Config::new("", "", Ts::default()));
        let snap = std::mem::replace(&mut self.snap, empty);
        self.conn.cache.give_back(snap, &self.touched);
    }
}

impl Transaction for PgTx<'_> {
    fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    fn reserve_claim(&mut self, agent: &str, now: Ts) -> Result<()> {
        self.reserve(agent, now)
    }

    fn commit(mut self: Box<Self>, change: Change) -> Result<Vec<Event>> {
        if change.events.is_empty() {
            self.rollback();
            return Ok(Vec::new());
        }
        let owner = change.owner;
        if let Err(e) = self.guard_reservations(&change, self.now) {
            self.rollback();
            return Err(e);
        }
        let done = if owner {
            self.commit_owner(change)
        } else {
            self.commit_agent(change)
        };
        let events = match done {
            Ok(e) => e,
            Err(e) => {
                self.rollback();
                return Err(e);
            }
        };
        if owner {
            self.finish()?;
        }
        Ok(events)
    }
}

/// What `prepare` reads on the database: the transaction's snapshot and cache, and the
/// journal's last line, read under its lock.
struct PgBefore<'t, 'a> {
    tx: &'t mut PgTx<'a>,
    last: Option<&'t (u64, String)>,
}

impl Before for PgBefore<'_, '_> {
    fn snapshot(&mut self) -> Result<&Snapshot> {
        Ok(&self.tx.snap)
    }

    fn owner_pub(&mut self) -> Result<Option<OwnerPub>> {
        self.tx.conn.cache.owner_pub()
    }

    fn head(&mut self) -> Result<String> {
        Ok(self.last.map_or_else(
            || chain::GENESIS.to_string(),
            |(_, l)| chain::sha256_hex(l.as_bytes()),
        ))
    }

    fn mark(&mut self) -> Result<Option<Mark>> {
        self.tx.mark(self.last)
    }

    fn raw(&mut self) -> Result<Snapshot> {
        self.tx.conn.cache.snapshot_raw()
    }

    fn proofs(&mut self) -> Result<Option<String>> {
        Ok(self
            .tx
            .conn
            .cache
            .docs
            .get("owner.proofs")
            .map(|(t, _)| t.clone()))
    }

    fn decided(&mut self) -> Result<Vec<Gate>> {
        Ok(self.tx.conn.cache.decided().cloned().collect())
    }

    fn unsealed(&mut self) -> Option<Error> {
        // A database with no seal yet is sealed by this change; a seal that does not verify refuses.
        self.tx.conn.cache.docs.contains_key("owner.seal").then(|| {
            Error::new(
                Code::InvalidState,
                "the owner's seal in the database is not valid, so loopx cannot tell your facts from hand edits",
            )
            .hint("check with `loopx doctor`; export the project, seal it there with `loopx owner seal --adopt`, and import it into a new database")
        })
    }
}
