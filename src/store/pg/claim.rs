//! A claim on the database: the todo the kernel would pick, locked with `SKIP LOCKED` among
//! the rows free now; the candidates other transactions hold count as leased in the snapshot.
//! Claims that reserve paths take one more lock, so two never reserve overlapping globs.

use super::commit::{PgTx, internal};
use super::db_error;
use super::fast::Quoter;
use crate::kernel::ops::{Change, Write};
use crate::kernel::{Lease, Result, Ts};

/// The advisory lock every commit that writes a lease with reserved paths takes ("lxrs").
const RESERVE_LOCK: i64 = 0x6c78_7273;

/// The most todos one claim tries to lock before it gives up on the rest.
const CLAIM_CANDIDATES: usize = 16;

/// The statements `Conn::named` prepares: a claim's lock and an agent's commit (schema 2).
/// The lock goes down `$1` in order, one row by id at a time, and stops at the first it locks:
/// a row with no live lease that no other transaction holds (rows locked and not taken would
/// hold up their holders' own releases). The nested loop over `unnest` keeps the array's order;
/// were it lost, a claim would take a lesser todo, never a held one. It runs with
/// `enable_seqscan` off (a scan of every row version of a small, busy table costs more than the
/// lookups), set back for the commit, whose plans it would cost as if no index would do.
pub(super) const NAMED: &str = "PREPARE lx_lock(text[], timestamptz) AS \
     SELECT t.id, t.body::text, t.seq, t.archived FROM unnest($1) AS c(id) \
     CROSS JOIN LATERAL (SELECT t.id, t.body, t.seq, t.archived FROM loopx.todos t \
       WHERE t.id = c.id AND NOT t.archived \
         AND (jsonb_typeof(t.body->'lease') IS DISTINCT FROM 'object' \
              OR (t.body->'lease'->>'expires_at')::timestamptz <= $2) \
       FOR UPDATE OF t SKIP LOCKED) t LIMIT 1; \
     PREPARE lx_commit(bigint, text[], bigint[], boolean, jsonb, text[]) AS \
     SELECT seq, line FROM loopx.commit($1, $2, $3, $4, $5, $6)";

/// A locked todo's row as the simple protocol gives it: id, body, seq, archived.
fn text_row(r: &postgres::SimpleQueryRow) -> Result<(String, String, u64, bool)> {
    let field = |i: usize| r.get(i).ok_or_else(|| internal("a todo row lacks a field"));
    let seq = field(2)?
        .parse::<u64>()
        .map_err(|_| internal("a todo row's seq is not a number"))?;
    Ok((
        field(0)?.to_string(),
        field(1)?.to_string(),
        seq,
        field(3)? == "t",
    ))
}

impl PgTx<'_> {
    /// The query that locks the first of `ids` free at `now`, skipping rows others hold, with
    /// the transaction's BEGIN.
    fn lock_sql(&mut self, ids: &[String], now: Ts) -> Result<String> {
        let at = now.to_string();
        let q = Quoter::new(ids)?;
        let list = q.array(ids, "text");
        let named = self.conn.version >= 2;
        if named {
            self.conn.named()?;
        }
        let sql = if named {
            format!(
                "{}SET LOCAL enable_seqscan = off; EXECUTE lx_lock({list}, {}); \
                 SET LOCAL enable_seqscan TO DEFAULT",
                self.begin_text(),
                q.lit(&at),
            )
        } else {
            // Schema 1 (before `store migrate`): the same query, planned each time.
            format!(
                "{}SELECT id, body::text, seq, archived FROM loopx.todos WHERE id = ANY({list}) \
                 AND NOT archived AND (jsonb_typeof(body->'lease') IS DISTINCT FROM 'object' \
                 OR (body->'lease'->>'expires_at')::timestamptz <= {}::timestamptz) \
                 ORDER BY array_position({list}, id) LIMIT 1 FOR UPDATE SKIP LOCKED",
                self.begin_text(),
                q.lit(&at),
            )
        };
        Ok(sql)
    }

    /// Locks the first candidate no other transaction holds; the ones before it are held
    /// elsewhere and count as leased in this snapshot (all of them when none was free). True
    /// when it locked one the snapshot already had as it is.
    fn lock_first(&mut self, ids: &[String], now: Ts) -> Result<bool> {
        // Only rows free as the database has them now (no live lease) are locked: a row locked
        // and then not taken would hold up its holder's own release. One round trip with the
        // transaction's BEGIN, so values are quoted literals.
        let sql = self.lock_sql(ids, now)?;
        let msgs = self.client()?.simple_query(&sql).map_err(db_error)?;
        let row = msgs.iter().find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => Some(r),
            _ => None,
        });
        let row = match row {
            Some(r) => Some(text_row(r)?),
            None => None,
        };
        let got: Option<String> = row.as_ref().map(|r| r.0.clone());
        for id in ids.iter().take_while(|i| Some(*i) != got.as_ref()) {
            if let Some(t) = self.snap.todos.get_mut(id) {
                t.lease = Some(Box::new(held_elsewhere(t.fence, now)));
                self.touched.push(id.clone());
            }
        }
        let Some((id, body, seq, archived)) = row else {
            return Ok(false);
        };
        let current = seq == self.todo_seq(&id);
        if !current {
            self.touched.push(id.clone());
            // Changed since the snapshot: decide on the row as it is now.
            match serde_json::from_str(&body) {
                Ok(t) if !archived => {
                    self.snap.todos.insert(id.clone(), t);
                }
                _ => {
                    self.snap.todos.remove(&id);
                }
            }
        }
        // Locked by this transaction and current from here on.
        self.fresh.insert(id, seq);
        Ok(current)
    }

    /// Before an unnamed claim: locks the todo the kernel would give `agent`.
    pub(super) fn reserve(&mut self, agent: &str, now: Ts) -> Result<()> {
        for _ in 0..CLAIM_CANDIDATES {
            let ranked: Vec<String> =
                crate::kernel::readiness::ready_first(&self.snap, agent, now, CLAIM_CANDIDATES)
                    .into_iter()
                    .map(|t| t.id.clone())
                    .collect();
            let Some(first) = ranked.first().cloned() else {
                return Ok(());
            };
            if self.fresh.contains_key(&first) {
                // Locked by us and current: the kernel's choice is ours.
                return Ok(());
            }
            // The ones before the todo it locks count as held. Locked as the snapshot had it,
            // that todo now ranks first: no other moved. Read again, or none free among these:
            // rank again (further down).
            if self.lock_first(&ranked, now)? {
                return Ok(());
            }
        }
        Ok(())
    }
}

impl PgTx<'_> {
    /// Before a commit that writes a live lease with reserved paths: takes the reservations'
    /// lock (held to the end of the transaction), then refuses, to be tried again on a fresh
    /// snapshot, when another todo's reserved lease changed after the snapshot. Two claims of
    /// different todos with overlapping globs lock different rows: this is what orders them.
    pub(super) fn guard_reservations(&mut self, change: &Change, now: Ts) -> Result<()> {
        let ours: Vec<&str> = change
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::Todo(t) if t.live_lease(now).is_some_and(|l| !l.paths.is_empty()) => {
                    Some(t.id.as_str())
                }
                _ => None,
            })
            .collect();
        if ours.is_empty() {
            return Ok(());
        }
        let mut sql = format!(
            "{}SELECT pg_advisory_xact_lock({RESERVE_LOCK}); ",
            self.begin_text()
        );
        // A statement of its own: its snapshot is taken once the lock is held.
        sql.push_str(&format!(
            "SELECT id FROM loopx.todos WHERE seq > {} AND NOT archived \
             AND jsonb_typeof(body->'lease'->'paths') = 'array'",
            self.base
        ));
        let msgs = self.client()?.simple_query(&sql).map_err(db_error)?;
        for m in &msgs {
            if let postgres::SimpleQueryMessage::Row(r) = m
                && let Some(id) = r.get(0).filter(|_| r.len() == 1)
                && r.columns().first().is_some_and(|c| c.name() == "id")
                && !ours.contains(&id)
                && !self.fresh.contains_key(id)
            {
                return Err(super::conflict(&format!("the reservation of {id} changed")));
            }
        }
        Ok(())
    }
}

/// The lease a snapshot shows on a todo another transaction is claiming right now.
fn held_elsewhere(fence: u64, now: Ts) -> Lease {
    Lease::new(
        "(another claim)".into(),
        fence,
        now,
        now.add(crate::kernel::Dur::from_mins(1)),
    )
}
