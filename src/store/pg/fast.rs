//! An agent's commit on the database in one round trip: `loopx.commit` takes the locks, checks
//! what the change was decided on, writes every row and the journal lines (which the database
//! chains), and the COMMIT follows in the same message.

use serde_json::Value;

use super::commit::{DURABLE, PgTx, in_wait, internal, json, outcome_unknown, wait_refused};
use crate::kernel::ops::{Change, Write};
use crate::kernel::{Event, Result};
use crate::store::pg::db_error;

/// A change's rows as `loopx.commit` takes them: each write as `{k, id, b}`, the todos it
/// writes (sorted, each once), and whether it spends.
#[derive(Default)]
pub(super) struct Rows {
    rows: Vec<Value>,
    ids: Vec<String>,
    spends: bool,
}

impl Rows {
    fn push(&mut self, k: &str, id: &str, b: Value) {
        if matches!(k, "todo" | "todo+" | "archive")
            && let Err(at) = self.ids.binary_search_by(|x| x.as_str().cmp(id))
        {
            self.ids.insert(at, id.to_string());
        }
        self.spends |= k == "spend";
        self.rows
            .push(serde_json::json!({"k": k, "id": id, "b": b}));
    }

    /// Adds an owner's document, by name.
    pub(super) fn doc(&mut self, name: &str, text: &str) {
        self.push("doc", name, Value::String(text.to_string()));
    }
}

impl PgTx<'_> {
    /// Each write as the row it becomes: the one place a write is turned into a row.
    pub(super) fn rows(&self, writes: &[Write]) -> Result<Rows> {
        let mut out = Rows::default();
        for w in writes {
            let (k, id, b) = match w {
                Write::Todo(t) if self.todo_seq(&t.id) > 0 => ("todo", t.id.as_str(), json(t)?),
                Write::Todo(t) => ("todo+", t.id.as_str(), json(t)?),
                Write::Archive(t) => ("archive", t.id.as_str(), json(t)?),
                Write::Gate(g) if self.snap.gates.contains_key(&g.id) => {
                    ("gate", g.id.as_str(), json(g)?)
                }
                Write::Gate(g) => ("gate+", g.id.as_str(), json(g)?),
                Write::Agent(a) if self.snap.agents.contains_key(&a.id) => {
                    ("agent", a.id.as_str(), json(a)?)
                }
                Write::Agent(a) => ("agent+", a.id.as_str(), json(a)?),
                Write::Evidence(id, e) => ("evidence", id.as_str(), json(e)?),
                Write::Config(c) => ("config", "", json(c)?),
                Write::Quota(q) => {
                    for v in self.new_spends(q)? {
                        out.push("spend", "", v);
                    }
                    if let Some(rest) = self.quota_rest(q)? {
                        out.doc("quota.toml", &rest);
                    }
                    continue;
                }
            };
            out.push(k, id, b);
        }
        Ok(out)
    }

    /// The call of `loopx.commit` for these rows and journal line fragments: it takes the
    /// locks, checks what the change was decided on, and writes the rows (and lines, if any).
    fn commit_sql(&mut self, rows: &Rows, frags: &[String]) -> Result<String> {
        let seqs: Vec<String> = rows
            .ids
            .iter()
            .map(|id| {
                i64::try_from(self.todo_seq(id))
                    .unwrap_or(i64::MAX)
                    .to_string()
            })
            .collect();
        let body = serde_json::to_string(&rows.rows).map_err(internal)?;
        // Values are written as dollar-quoted literals under a random tag.
        let texts: Vec<&String> = rows.ids.iter().chain(frags).chain([&body]).collect();
        let q = Quoter::new(&texts)?;
        // Schema 1 has no `lx_lock` to prepare beside it: the call is planned each time.
        let call = if self.conn.version >= 2 {
            self.conn.named()?;
            "EXECUTE lx_commit"
        } else {
            "SELECT seq, line FROM loopx.commit"
        };
        Ok(format!(
            "{}{call}({}, {}, ARRAY[{}]::bigint[], {}, {}::jsonb, {})",
            self.begin_text(),
            self.base,
            q.array(&rows.ids, "text"),
            seqs.join(","),
            rows.spends,
            q.lit(&body),
            q.array(frags, "text"),
        ))
    }

    /// Writes the rows through `loopx.commit`, with no journal line (an owner's change, whose
    /// signed lines follow), in the transaction.
    pub(super) fn call_commit(&mut self, rows: &Rows, frags: &[String]) -> Result<()> {
        let sql = self.commit_sql(rows, frags)?;
        self.client()?.simple_query(&sql).map_err(db_error)?;
        Ok(())
    }

    /// Commits an agent's change in one call of `loopx.commit`: the locks, the checks, every
    /// row and the journal lines, which the database chains; each line is checked to be the
    /// very bytes loopx writes for its event.
    pub(super) fn commit_agent(&mut self, change: Change) -> Result<Vec<Event>> {
        let rows = self.rows(&change.writes)?;
        let frags = change
            .events
            .iter()
            .map(fragment)
            .collect::<Result<Vec<String>>>()?;
        // The BEGIN (unless a claim's lock started the transaction), the call, the COMMIT and
        // the wait for the disk go in one round trip: the journal's lock is released at the
        // COMMIT, before the disk wait (see `PgTx::durable`).
        let sql = format!(
            "{}; SET LOCAL synchronous_commit = off; COMMIT; {DURABLE}",
            self.commit_sql(&rows, &frags)?
        );
        let msgs = match self.client()?.simple_query(&sql) {
            Ok(m) => m,
            // Refused by loopx.commit or a trigger: nothing was committed. An error of the disk
            // wait (say, a role that may not call its function) comes after the COMMIT.
            Err(e)
                if e.as_db_error()
                    .is_some_and(|d| !lost_class(d.code()) && !in_wait(d)) =>
            {
                return Err(db_error(e));
            }
            Err(e) => {
                self.open = false;
                self.conn.client = None;
                return Err(e
                    .as_db_error()
                    .filter(|d| in_wait(d))
                    .map_or_else(outcome_unknown, wait_refused));
            }
        };
        self.open = false;
        lines_of(msgs)
    }

    /// The spends of `q` the snapshot does not have, as JSON.
    pub(super) fn new_spends(&self, q: &crate::kernel::QuotaFile) -> Result<Vec<Value>> {
        let have: Vec<Value> = self
            .snap
            .quota
            .spends
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .collect();
        let mut out = Vec::new();
        for s in &q.spends {
            let v = serde_json::to_value(s).map_err(internal)?;
            if !have.contains(&v) {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// `quota.toml` without its spends, when it differs from the snapshot's (the owner's).
    pub(super) fn quota_rest(&self, q: &crate::kernel::QuotaFile) -> Result<Option<String>> {
        let rest = |f: &crate::kernel::QuotaFile| {
            let mut f = f.clone();
            f.spends.clear();
            serde_json::to_string(&f).map_err(internal)
        };
        let (new, old) = (rest(q)?, rest(&self.snap.quota)?);
        Ok((new != old).then_some(new))
    }
}

/// The events of the first statement's rows (the lines `loopx.commit` wrote), each checked to
/// be the very bytes loopx writes for it.
fn lines_of(msgs: Vec<postgres::SimpleQueryMessage>) -> Result<Vec<Event>> {
    let mut events = Vec::new();
    // The disk wait's row comes later.
    let mut begun = false;
    for m in msgs {
        match m {
            postgres::SimpleQueryMessage::CommandComplete(_) if begun => break,
            postgres::SimpleQueryMessage::RowDescription(_) => begun = true,
            _ => {}
        }
        if let postgres::SimpleQueryMessage::Row(r) = m {
            let line = r.get(1).unwrap_or_default();
            let ev: Event = serde_json::from_str(line).map_err(internal)?;
            if serde_json::to_string(&ev).map_err(internal)? != line {
                return Err(internal(format!(
                    "the database wrote a journal line loopx would not: {line}"
                )));
            }
            events.push(ev);
        }
    }
    Ok(events)
}

/// An event's line without `seq`, `prev`, `tx` and `files` (the database adds them): the
/// fields between `{"seq":N,` and `,"prev":...`, as loopx writes them.
pub(super) fn fragment(d: &crate::kernel::EventDraft) -> Result<String> {
    let ev = Event {
        seq: 0,
        at: d.at,
        actor: d.actor.clone(),
        action: d.action.clone(),
        target: d.target.clone(),
        data: d.data.clone(),
        prev: String::new(),
        tx: None,
        files: None,
        sig: None,
    };
    let text = serde_json::to_string(&ev).map_err(internal)?;
    text.strip_prefix("{\"seq\":0,")
        .and_then(|t| t.strip_suffix(",\"prev\":\"\"}"))
        .map(str::to_string)
        .ok_or_else(|| internal("an event's line has an unexpected shape"))
}

/// Whether an error of this class means the connection or the server went away (the message's
/// COMMIT may have run): shutdown, crash, connection failures.
fn lost_class(code: &postgres::error::SqlState) -> bool {
    let c = code.code();
    c.starts_with("57P") || c.starts_with("08") || c.starts_with("XX")
}

/// Writes values as SQL literals, dollar-quoted under a tag none of them contains.
pub(super) struct Quoter {
    tag: String,
}

impl Quoter {
    /// A tag none of `texts` contains.
    pub(super) fn new<S: AsRef<str>>(texts: &[S]) -> Result<Quoter> {
        for _ in 0..16 {
            let mut r = [0u8; 6];
            getrandom::fill(&mut r).map_err(internal)?;
            let tag = format!(
                "$lx{}$",
                r.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
            if texts.iter().all(|t| !t.as_ref().contains(&tag)) {
                return Ok(Quoter { tag });
            }
        }
        Err(internal("no quoting tag fits"))
    }

    /// `t` as a literal.
    pub(super) fn lit(&self, t: &str) -> String {
        format!("{}{t}{}", self.tag, self.tag)
    }

    /// `items` as an array literal of type `ty`.
    pub(super) fn array(&self, items: &[String], ty: &str) -> String {
        let inner: Vec<String> = items.iter().map(|t| self.lit(t)).collect();
        format!("ARRAY[{}]::{ty}[]", inner.join(","))
    }
}
