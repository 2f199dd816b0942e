//! A transaction on the database: the snapshot read at its start (a claim's lock is in
//! `claim.rs`), and a commit that writes every row, the evidence, the spends and the journal
//! lines in one database transaction, ordered by the journal's lock.

use std::collections::HashMap;
use std::sync::MutexGuard;

use postgres::Row;
use postgres::types::{Json, ToSql};
use serde_json::Value;

use crate::kernel::ops::{Change, Write};
use crate::kernel::seal::Mark;
use crate::kernel::{Code, Error, Event, Result, Snapshot, Ts};
use crate::store::pg::{Conn, Env, PgStore, conflict, db_error};
use crate::store::{Transaction, journal, owner, sealing};

/// A transaction whose commit waits until every commit before it is on disk.
pub(super) const DURABLE: &str = "BEGIN; SELECT txid_current(); COMMIT";

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

    /// Refuses the commit when a row it writes, the goal, a gate or (for a spend) the quota
    /// changed after the snapshot: the change was decided on what is no longer there.
    fn check_current(&mut self, change: &Change) -> Result<()> {
        let mut todos: Vec<String> = Vec::new();
        let mut spends = false;
        for w in &change.writes {
            match w {
                Write::Todo(t) | Write::Archive(t) => todos.push(t.id.clone()),
                Write::Quota(_) => spends = true,
                _ => {}
            }
        }
        let base = i64::try_from(self.base).unwrap_or(i64::MAX);
        let r = self.q_one(
            "SELECT (SELECT coalesce(max(seq), 0) FROM loopx.config) > $1, \
                 (SELECT coalesce(max(seq), 0) FROM loopx.gates) > $1, \
                 (SELECT coalesce(max(seq), 0) FROM loopx.spends) > $1, \
                 (SELECT coalesce(max(seq), 0) FROM loopx.agents) > $1, \
                 (SELECT coalesce(json_agg(json_build_array(id, seq)), '[]')::text \
                    FROM loopx.todos WHERE id = ANY($2))",
            &[&base, &todos],
        )?;
        let (cfg, gates, spent, agents): (bool, bool, bool, bool) =
            (r.get(0), r.get(1), r.get(2), r.get(3));
        if cfg || gates || agents || (spends && spent) {
            return Err(conflict("the goal, a gate, an agent or the quota changed"));
        }
        let now: Vec<(String, i64)> =
            serde_json::from_str(&r.get::<_, String>(4)).unwrap_or_default();
        for id in &todos {
            let have = now
                .iter()
                .find(|(i, _)| i == id)
                .map_or(0, |(_, s)| u64::try_from(*s).unwrap_or(0));
            if have != self.todo_seq(id) {
                return Err(conflict(&format!("todo {id} changed")));
            }
        }
        Ok(())
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
            hash: journal::sha256_hex(line.as_bytes()),
        }))
    }

    /// Commits: the checks, the owner's signatures, every row and the journal lines.
    fn commit_change(&mut self, change: Change) -> Result<Vec<Event>> {
        if !change.owner {
            return self.commit_agent(change);
        }
        // Locks in one order, so two commits never wait on each other: the todos it writes
        // (by id), then the journal's lock, under which no other commit can land between the
        // check and the writes.
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
        if self.base > last.as_ref().map_or(0, |(s, _)| *s) {
            // Read before the goal was replaced (its journal starts again at 1).
            return Err(conflict("the goal was replaced"));
        }
        self.check_current(&change)?;
        let signer = if change.owner {
            Some(owner::signer_for(
                &self.env.key,
                self.conn.cache.owner_pub()?.as_ref(),
            )?)
        } else {
            None
        };
        let head = last.as_ref().map_or_else(
            || journal::GENESIS.to_string(),
            |(_, l)| journal::sha256_hex(l.as_bytes()),
        );
        let (writes, decided) = match &signer {
            Some(k) => sealing::sign_decisions(change.writes, k, &head),
            None => (change.writes, Vec::new()),
        };
        let change = Change { writes, ..change };
        let seq = last.as_ref().map_or(0, |(s, _)| *s) + 1;
        let seq_db = i64::try_from(seq).unwrap_or(i64::MAX);
        for w in &change.writes {
            self.write(w, seq_db)?;
        }
        if let Some(k) = &signer {
            self.owner_docs(k, &change, decided, last.as_ref(), seq_db)?;
        }
        let (events, lines) = journal::build_lines(
            last.as_ref().map(|(_, l)| l.as_bytes()),
            change.events,
            signer.as_ref(),
            Some(Vec::new()),
        )?;
        self.insert_lines(&events, &lines)?;
        Ok(events)
    }

    /// Writes one record as a row, at journal position `seq`.
    fn write(&mut self, w: &Write, seq: i64) -> Result<()> {
        let (sql, id, body): (&str, String, Value) = match w {
            Write::Todo(t) if self.todo_seq(&t.id) > 0 => (
                "UPDATE loopx.todos SET body = $2, seq = $3, archived = false WHERE id = $1",
                t.id.clone(),
                json(t)?,
            ),
            Write::Todo(t) => (
                "INSERT INTO loopx.todos (id, body, seq) VALUES ($1, $2, $3)",
                t.id.clone(),
                json(t)?,
            ),
            Write::Archive(t) => (
                "INSERT INTO loopx.todos (id, body, seq, archived) VALUES ($1, $2, $3, true) \
                 ON CONFLICT (id) DO UPDATE SET body = $2, seq = $3, archived = true",
                t.id.clone(),
                json(t)?,
            ),
            Write::Gate(g) if self.snap.gates.contains_key(&g.id) => (
                "UPDATE loopx.gates SET body = $2, seq = $3 WHERE id = $1",
                g.id.clone(),
                json(g)?,
            ),
            Write::Gate(g) => (
                "INSERT INTO loopx.gates (id, body, seq) VALUES ($1, $2, $3)",
                g.id.clone(),
                json(g)?,
            ),
            Write::Config(c) => {
                self.q_exec(
                    "INSERT INTO loopx.config (id, body, seq) VALUES (1, $1, $2) \
                         ON CONFLICT (id) DO UPDATE SET body = $1, seq = $2",
                    &[&Json(&json(c)?), &seq],
                )?;
                return Ok(());
            }
            Write::Agent(a) if self.snap.agents.contains_key(&a.id) => (
                "UPDATE loopx.agents SET body = $2, seq = $3 WHERE id = $1",
                a.id.clone(),
                json(a)?,
            ),
            Write::Agent(a) => (
                "INSERT INTO loopx.agents (id, body, seq) VALUES ($1, $2, $3)",
                a.id.clone(),
                json(a)?,
            ),
            Write::Evidence(id, e) => (
                "INSERT INTO loopx.evidence (todo, body, seq) VALUES ($1, $2, $3)",
                id.clone(),
                json(e)?,
            ),
            Write::Quota(q) => return self.write_quota(q, seq),
        };
        self.q_exec(sql, &[&id, &Json(&body), &seq])?;
        Ok(())
    }

    /// A quota write: the spends the snapshot does not have are added (old ones stay: the
    /// database keeps every spend); the other keys, when they changed, are the owner's.
    fn write_quota(&mut self, q: &crate::kernel::QuotaFile, seq: i64) -> Result<()> {
        for v in self.new_spends(q)? {
            self.q_exec(
                "INSERT INTO loopx.spends (body, seq) VALUES ($1, $2)",
                &[&Json(&v), &seq],
            )?;
        }
        if let Some(rest) = self.quota_rest(q)? {
            self.put_doc("quota.toml", &rest, seq)?;
        }
        Ok(())
    }

    /// Writes an owner document (`owner.seal`, `owner.proofs`, `owner.pub`, `quota.toml`).
    pub(super) fn put_doc(&mut self, name: &str, body: &str, seq: i64) -> Result<()> {
        self.q_exec(
            "INSERT INTO loopx.docs (name, body, seq) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET body = $2, seq = $3",
            &[&name, &body, &seq],
        )?;
        Ok(())
    }

    /// An owner change's proofs (when it decided gates) and the new seal.
    fn owner_docs(
        &mut self,
        k: &owner::OwnerKey,
        change: &Change,
        decided: Vec<String>,
        last: Option<&(u64, String)>,
        seq: i64,
    ) -> Result<()> {
        if !decided.is_empty() {
            let public = k.public();
            let mut hashes = self
                .conn
                .cache
                .docs
                .get("owner.proofs")
                .and_then(|(t, _)| crate::kernel::authority::parse_proofs(t, &public))
                .unwrap_or_default();
            if hashes.is_empty() {
                hashes.extend(
                    self.conn
                        .cache
                        .decided()
                        .filter(|g| crate::kernel::authority::gate_proven(g, Some(&public)))
                        .filter_map(crate::kernel::authority::decision_hash),
                );
            }
            hashes.extend(decided);
            let sig = k.sign(&crate::kernel::authority::proofs_message(&hashes));
            let text = crate::kernel::authority::proofs_text(&hashes, &sig);
            self.put_doc("owner.proofs", &text, seq)?;
        }
        if self.snap.seal.is_none()
            && !change.adopt_files
            && self.conn.cache.docs.contains_key("owner.seal")
        {
            return Err(Error::new(
                Code::InvalidState,
                "the owner's seal in the database is not valid, so loopx cannot tell your facts from hand edits",
            )
            .hint("check with `loopx doctor`; export the project, seal it there with `loopx owner seal --adopt`, and import it into a new database"));
        }
        let mark = self.mark(last)?;
        let raw = self.conn.cache.snapshot_raw();
        let text = sealing::seal_text(k, &self.snap, change, mark, || raw)?;
        self.put_doc("owner.seal", &text, seq)
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

    /// Waits until every commit before now is on disk.
    pub(super) fn durable(&mut self) -> Result<()> {
        let r = self
            .conn
            .client
            .as_mut()
            .map_or(Ok(()), |c| c.batch_execute(DURABLE));
        r.map_err(|e| self.lost(e))
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
            self.commit_change(change)
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
