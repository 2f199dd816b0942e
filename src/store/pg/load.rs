//! Reading the database: one query for what changed since a journal position, applied to a
//! copy kept in memory, so a claim reads a few rows rather than the whole project.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::limits::Limited;
use crate::kernel::seal::{self, Seal};
use crate::kernel::{
    Code, Config, Error, Gate, GateStatus, Problem, QuotaFile, Result, Snapshot, Spend, Status,
    Todo,
};

/// Everything changed after journal line `$1`, the journal's last line and the goal's id (a
/// replaced goal starts the journal again), in one snapshot. `$2` is `i64::MAX`: a range, not
/// an open `>`, so the plan kept for the prepared statement reads the `seq` indexes rather
/// than every row (the planner guesses a third of the rows match `seq > $1`).
pub(crate) const CHANGES: &str = "SELECT (SELECT coalesce(max(seq), 0) FROM loopx.journal), \
  (SELECT json_build_array(body, seq)::text FROM loopx.config WHERE id = 1 AND seq > $1 AND seq < $2), \
  (SELECT coalesce(json_agg(json_build_array(id, body, seq, archived)), '[]')::text \
     FROM loopx.todos WHERE seq > $1 AND seq < $2), \
  (SELECT coalesce(json_agg(json_build_array(id, body, seq)), '[]')::text \
     FROM loopx.gates WHERE seq > $1 AND seq < $2), \
  (SELECT coalesce(json_agg(json_build_array(id, body, seq)), '[]')::text \
     FROM loopx.agents WHERE seq > $1 AND seq < $2), \
  (SELECT coalesce(json_agg(json_build_array(body, seq) ORDER BY n), '[]')::text \
     FROM loopx.spends WHERE seq > $1 AND seq < $2), \
  (SELECT coalesce(json_agg(json_build_array(name, body, seq)), '[]')::text \
     FROM loopx.docs WHERE seq > $1 AND seq < $2), \
  (SELECT body->'goal'->>'id' FROM loopx.config WHERE id = 1)";

/// A record as the database holds it: its value (or why it cannot be read) and the journal
/// line of the transaction that last wrote it.
#[derive(Debug, Clone)]
pub struct Row<T> {
    /// The value, or the problem reading it.
    pub value: std::result::Result<T, Problem>,
    /// The `seq` of the transaction that wrote it.
    pub seq: u64,
}

/// The project as last read: every open todo, gate, agent, recent spend and owner document,
/// with the journal position it is current to.
#[derive(Debug, Clone, Default)]
pub struct Cached {
    /// The journal's last line when read.
    pub head: u64,
    /// The goal's id when read (a new id: the goal was replaced, read it all again).
    pub goal: Option<String>,
    /// The goal (None before `start-goal`).
    pub config: Option<Row<Config>>,
    /// Open todos.
    pub todos: BTreeMap<String, Row<Todo>>,
    /// Archived todos' status.
    pub archived: HashMap<String, Status>,
    /// Gates.
    pub gates: BTreeMap<String, Row<Gate>>,
    /// Agents' declarations.
    pub agents: BTreeMap<String, Row<crate::kernel::model::AgentInfo>>,
    /// Spends, oldest first, and the last transaction that added one.
    pub spends: Vec<Spend>,
    /// The `seq` of the last spend's transaction.
    pub spends_seq: u64,
    /// Spend rows that do not read as a spend (an agent's hand-made row), by `spends@SEQ`:
    /// shown as quarantined, never counted.
    pub bad_spends: BTreeMap<String, Problem>,
    /// `owner.pub`, `owner.seal`, `owner.proofs` and `quota.toml` (its keys but the spends).
    pub docs: BTreeMap<String, (String, u64)>,
    /// The snapshot derived from these rows, kept between transactions (`kept.rs`; lent and taken back here).
    pub(super) kept: super::kept::Kept,
}

/// The rows that read, by id; each that did not is quarantined under `name(id)`.
fn readable<T: Clone, C: FromIterator<(String, T)>>(
    rows: &BTreeMap<String, Row<T>>,
    name: impl Fn(&str) -> String,
    quarantined: &mut BTreeMap<String, Problem>,
) -> C {
    rows.iter()
        .filter_map(|(id, r)| match &r.value {
            Ok(v) => Some((id.clone(), v.clone())),
            Err(p) => {
                quarantined.insert(name(id), p.clone());
                None
            }
        })
        .collect()
}

fn bad(what: &str, e: impl std::fmt::Display) -> Error {
    Error::new(
        Code::InvalidState,
        format!("the database's {what} cannot be read: {e}"),
    )
    .hint("check the database with `loopx doctor`; run `loopx store migrate` if loopx was upgraded")
}

/// A row's value decoded and checked against its bounds; a row that fails is a problem that
/// names it (`database:todos/ID`).
fn decode<T: DeserializeOwned + Limited>(table: &str, id: &str, body: Value) -> Row<T> {
    let file = format!("database:{table}/{id}");
    let value = serde_json::from_value::<T>(body)
        .map_err(|e| Error::invalid(&file, None, e.to_string()))
        .and_then(|v| match v.check_limits() {
            Ok(()) => Ok(v),
            Err(b) => Err(Error::invalid(&file, None, b.message)),
        })
        .map_err(|e| Problem::of(&e, &file));
    Row { value, seq: 0 }
}

fn items(text: Option<String>, what: &str) -> Result<Vec<Vec<Value>>> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => serde_json::from_str(&t).map_err(|e| bad(what, e)),
    }
}

fn seq_of(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn id_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

impl Cached {
    /// Applies the answer of `CHANGES` since `self.head`; false when the database is behind
    /// this copy or holds another goal (it was replaced: read it all again).
    pub fn apply(&mut self, row: &postgres::Row, policy_now: crate::kernel::Ts) -> Result<bool> {
        let head = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        let goal: Option<String> = row.get(7);
        if head < self.head || (self.head > 0 && goal != self.goal) {
            return Ok(false);
        }
        self.goal = goal;
        if head == self.head && self.config.is_some() {
            return Ok(true);
        }
        self.head = head;
        if let Some(t) = row.get::<_, Option<String>>(1) {
            let v: Vec<Value> = serde_json::from_str(&t).map_err(|e| bad("goal", e))?;
            let mut r = decode::<Config>("config", "goal", v.first().cloned().unwrap_or_default());
            r.seq = v.get(1).map_or(0, seq_of);
            self.config = Some(r);
            self.kept.forget();
        }
        self.apply_todos(row)?;
        for v in items(row.get(3), "gates")? {
            let id = id_of(&v[0]);
            let mut r = decode::<Gate>("gates", &id, v[1].clone());
            r.seq = v.get(2).map_or(0, seq_of);
            self.gates.insert(id, r);
            self.kept.forget();
        }
        for v in items(row.get(4), "agents")? {
            let id = id_of(&v[0]);
            let mut r = decode("agents", &id, v[1].clone());
            r.seq = v.get(2).map_or(0, seq_of);
            self.agents.insert(id, r);
            self.kept.forget();
        }
        self.apply_spends(row)?;
        for v in items(row.get(6), "owner documents")? {
            let body = v
                .get(1)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            self.docs
                .insert(id_of(&v[0]), (body, v.get(2).map_or(0, seq_of)));
            self.kept.forget();
        }
        if let Some(Ok(cfg)) = self.config.as_ref().map(|r| &r.value) {
            let mut q = QuotaFile {
                spends: std::mem::take(&mut self.spends),
                ..QuotaFile::default()
            };
            crate::kernel::quota::prune(&mut q, &cfg.quota, policy_now);
            self.spends = q.spends;
        }
        Ok(true)
    }

    /// The todos of a `CHANGES` answer: changed ones replaced, archived ones moved out.
    fn apply_todos(&mut self, row: &postgres::Row) -> Result<()> {
        for v in items(row.get(2), "todos")? {
            let (id, seq) = (id_of(&v[0]), v.get(2).map_or(0, seq_of));
            if v.get(3).and_then(Value::as_bool) == Some(true) {
                self.todos.remove(&id);
                let st = v[1].get("status").cloned().unwrap_or_default();
                if let Ok(s) = serde_json::from_value::<Status>(st) {
                    self.archived.insert(id.clone(), s);
                }
                self.patch_kept(&id);
                continue;
            }
            let mut r = decode::<Todo>("todos", &id, v[1].clone());
            r.seq = seq;
            self.todos.insert(id.clone(), r);
            self.patch_kept(&id);
        }
        Ok(())
    }

    /// The spends of a `CHANGES` answer, added; a bad row is quarantined.
    fn apply_spends(&mut self, row: &postgres::Row) -> Result<()> {
        for v in items(row.get(5), "spends")? {
            let seq = v.get(1).map_or(0, seq_of);
            self.spends_seq = self.spends_seq.max(seq);
            match serde_json::from_value::<Spend>(v[0].clone()) {
                Ok(s) => self.spends.push(s),
                // One bad row must not stop every agent: it is quarantined, not counted.
                Err(e) => {
                    let file = format!("database:spends@{seq}");
                    let p = Problem::of(&Error::invalid(&file, None, e.to_string()), &file);
                    self.bad_spends.insert(format!("spends@{seq}"), p);
                    self.kept.forget();
                }
            }
        }
        Ok(())
    }

    /// The owner's public key, when the project has one.
    pub fn owner_pub(&self) -> Result<Option<OwnerPub>> {
        match self.docs.get("owner.pub") {
            None => Ok(None),
            Some((text, _)) => OwnerPub::parse(text.trim())
                .map(Some)
                .map_err(|e| bad("owner.pub", e)),
        }
    }

    /// The snapshot the kernel decides on: the rows, the owner's proofs and seal checked.
    pub fn snapshot(&self) -> Result<Snapshot> {
        let mut snap = self.snapshot_raw()?;
        let key = self.owner_pub()?;
        self.check_seal(&mut snap, key.as_ref());
        Ok(snap)
    }

    /// The snapshot as the rows say, without the owner's seal applied.
    pub fn snapshot_raw(&self) -> Result<Snapshot> {
        let config = self.config()?;
        let mut quarantined = BTreeMap::new();
        let todos = readable(&self.todos, |id| id.to_string(), &mut quarantined);
        let gates = self.gates(&mut quarantined, &config)?;
        let agents = readable(&self.agents, |id| format!("agents/{id}"), &mut quarantined);
        quarantined.extend(self.bad_spends.clone());
        let mut quota: QuotaFile = match self.docs.get("quota.toml") {
            Some((t, _)) => serde_json::from_str(t).map_err(|e| bad("quota", e))?,
            // A goal started in the database has no quota document yet.
            None => QuotaFile {
                schema_version: crate::kernel::SCHEMA_VERSION,
                ..QuotaFile::default()
            },
        };
        quota.spends = self.spends.clone();
        Ok(Snapshot {
            config,
            todos,
            gates,
            quota,
            archived: self.archived.clone(),
            quarantined,
            owner_notes: Vec::new(),
            seal: None,
            unsealed: false,
            agents,
            reserve_budget: Default::default(),
        })
    }

    /// The goal's config: refused when there is none yet, or it cannot be read.
    fn config(&self) -> Result<Config> {
        match &self.config {
            None => Err(
                Error::new(Code::NotInitialized, "the database has no goal yet")
                    .hint("start one with `loopx start-goal` (as the owner)"),
            ),
            Some(Row { value: Ok(c), .. }) => Ok(c.clone()),
            Some(Row { value: Err(p), .. }) => {
                Err(Error::invalid(&p.file, None, p.message.clone()))
            }
        }
    }

    /// Every gate, proven by the owner's proofs; one that cannot be read is quarantined and
    /// stands as a pending global gate.
    fn gates(
        &self,
        quarantined: &mut BTreeMap<String, Problem>,
        cfg: &Config,
    ) -> Result<BTreeMap<String, Gate>> {
        let key = self.owner_pub()?;
        let proofs = match (&key, self.docs.get("owner.proofs")) {
            (Some(k), Some((t, _))) => authority::parse_decisions(t, k).unwrap_or_default(),
            _ => Default::default(),
        };
        let mut gates = BTreeMap::new();
        for (id, r) in &self.gates {
            let g = match &r.value {
                Ok(g) => {
                    let mut g = g.clone();
                    g.signed = crate::store::core::decisions::gate_signed_by(
                        &g,
                        &proofs,
                        key.as_ref(),
                        cfg,
                    );
                    g
                }
                Err(p) => {
                    quarantined.insert(id.clone(), p.clone());
                    authority::unreadable_gate(id, p)
                }
            };
            gates.insert(id.clone(), g);
        }
        Ok(gates)
    }

    /// Checks the snapshot against the owner's seal, as the file store does: the database
    /// refuses agents the owner's rows, so a difference is the owner's own hand edit.
    fn check_seal(&self, snap: &mut Snapshot, key: Option<&OwnerPub>) {
        let Some(key) = key else { return };
        let Some((text, _)) = self.docs.get("owner.seal") else {
            snap.owner_notes = seal::unsealed(snap, "is missing");
            return;
        };
        match Seal::parse(text, key) {
            Ok(mut s) => {
                snap.owner_notes = seal::apply(snap, &mut s);
                snap.seal = Some(s);
            }
            Err(why) => snap.owner_notes = seal::unsealed(snap, &format!("is not valid: {why}")),
        }
    }

    /// The snapshot's gate count of decided gates (for the owner's proofs).
    pub fn decided(&self) -> impl Iterator<Item = &Gate> {
        self.gates
            .values()
            .filter_map(|r| r.value.as_ref().ok())
            .filter(|g| g.status != GateStatus::Pending)
    }
}

impl Cached {
    /// The snapshot for a transaction, current to the rows; give it back with
    /// [`Cached::give_back`] so the next one need not derive it again.
    pub fn lend(&mut self) -> Result<Snapshot> {
        let mut snap = match self.kept.snap.take() {
            Some(s) => s,
            None => {
                let s = self.snapshot()?;
                self.kept.pinned = match &s.seal {
                    Some(seal) => Some(super::kept::pinned(seal)),
                    None if self.owner_pub()?.is_some() => None,
                    None => Some(BTreeSet::new()),
                };
                s
            }
        };
        // Spends leave the window as time passes: the rows' list is pruned at each read.
        snap.quota.spends.clone_from(&self.spends);
        #[cfg(debug_assertions)]
        {
            let want = self.snapshot()?;
            debug_assert_eq!(
                format!("{snap:?}"),
                format!("{want:?}"),
                "the kept snapshot drifted"
            );
        }
        self.kept.lent = Some(self.head);
        Ok(snap)
    }

    /// Takes back a lent snapshot; the todos the transaction changed in it (`touched`) are set
    /// back to the rows. Dropped when the rows moved meanwhile.
    pub fn give_back(&mut self, snap: Snapshot, touched: &[String]) {
        if self.kept.lent.take() != Some(self.head) || self.config.is_none() {
            return;
        }
        self.kept.snap = Some(snap);
        for id in touched {
            self.patch_kept(id);
        }
    }

    /// Sets todo `id` in the kept snapshot to its row (or derives it all again when the seal
    /// names it).
    pub fn patch_kept(&mut self, id: &str) {
        let free = matches!(&self.kept.pinned, Some(p) if !p.contains(id));
        let Some(snap) = self.kept.snap.as_mut().filter(|_| free) else {
            self.kept.snap = None;
            return;
        };
        snap.quarantined.remove(id);
        // A todo that stays is replaced where it is (see `TodoMap`).
        match self.todos.get(id).map(|r| &r.value) {
            Some(Ok(t)) => {
                snap.todos.insert(id.to_string(), t.clone());
            }
            Some(Err(p)) => {
                snap.todos.remove(id);
                snap.quarantined.insert(id.to_string(), p.clone());
            }
            None => {
                snap.todos.remove(id);
            }
        }
        match self.archived.get(id) {
            Some(s) => snap.archived.insert(id.to_string(), *s),
            None => snap.archived.remove(id),
        };
    }
}
