//! Committing a change: its files planned and staged, the journal line that commits them, the
//! files put in place; and finishing a commit a crash interrupted.

use std::collections::BTreeMap;

use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::id;
use crate::kernel::ops::{Change, Write};
use crate::kernel::seal::Mark;
use crate::kernel::{Code, Error, Event, Gate, GateStatus, Result, Snapshot};
use crate::store::cache::Refresh;
use crate::store::core::{Before, prepare};
use crate::store::fs::FileStore;
use crate::store::{Transaction, journal, lock, owner, parse, recover, tx};

impl FileStore {
    /// Commits a change as one transaction (the caller holds the exclusive lock): its files are
    /// staged, its journal lines appended (the commit point), then the files put in place.
    ///
    /// An owner change is signed with the owner's key, and refused (exit 7, nothing written) without it.
    /// The caller tells the commit observer (`committed_unloaded`) once it released the lock: a
    /// hook that cannot start is journaled through the lock.
    pub fn apply_change(&self, change: Change) -> Result<Vec<Event>> {
        self.apply_change_on(None, change, None)
    }

    /// Commits a change decided on `before` (the caller holds the exclusive lock): prepared
    /// (an owner change signed and sealed), its files staged, its journal lines appended.
    pub(crate) fn apply_change_on(
        &self,
        before: Option<&Snapshot>,
        change: Change,
        tail: Option<journal::Tail>,
    ) -> Result<Vec<Event>> {
        if change.events.is_empty() && change.writes.is_empty() {
            return Ok(Vec::new());
        }
        let mut b = FileBefore {
            store: self,
            snap: before,
            loaded: None,
        };
        let p = prepare(change, &mut b, &self.env().key)?;
        let mut ops = Vec::new();
        for w in &p.writes {
            self.plan(w, &mut ops)?;
        }
        for (name, text) in p.docs {
            ops.push(tx::Op::put(name, text.into_bytes()));
        }
        let events = self.commit_ops(ops, p.events, p.signer.as_ref(), tail)?;
        if let (Some(k), Some(last)) = (&p.signer, events.last())
            && let Ok(line) = serde_json::to_vec(last)
            && let Ok(cfg) = self.read_config()
        {
            owner::remember_last(k, &cfg.goal.id, last.seq, &journal::sha256_hex(&line));
        }
        Ok(events)
    }

    /// Turns one kernel write into file operations, with their bytes ready.
    pub(super) fn plan(&self, w: &Write, ops: &mut Vec<tx::Op>) -> Result<()> {
        match w {
            Write::Todo(t) => ops.push(tx::Op::put(
                format!("todos/{}.toml", t.id),
                parse::encode(&t)?.into_bytes(),
            )),
            Write::Archive(t) => {
                ops.push(tx::Op::put(
                    format!("archive/{}.toml", t.id),
                    parse::encode(&t)?.into_bytes(),
                ));
                ops.push(tx::Op::remove(format!("todos/{}.toml", t.id)));
            }
            Write::Gate(g) => ops.push(tx::Op::put(
                format!("gates/{}.toml", g.id),
                parse::encode(&g)?.into_bytes(),
            )),
            Write::Config(c) => ops.push(tx::Op::put("loopx.toml", self.config_text(c)?)),
            Write::Quota(q) => ops.push(tx::Op::put("quota.toml", parse::encode(&q)?.into_bytes())),
            Write::Evidence(id, e) => {
                id::check_not_path(id)?;
                let mut line =
                    serde_json::to_vec(e).map_err(|e| Error::new(Code::Internal, e.to_string()))?;
                line.push(b'\n');
                ops.push(tx::Op::append(format!("evidence/{id}.jsonl"), line));
            }
            Write::Agent(a) => {
                id::check_agent(&a.id)?;
                ops.push(tx::Op::put(
                    format!("agents/{}.toml", a.id),
                    parse::encode(&a)?.into_bytes(),
                ));
            }
        }
        Ok(())
    }

    /// Stages `ops`, appends the journal lines that commit them, then puts the files in place.
    pub(super) fn commit_ops(
        &self,
        ops: Vec<tx::Op>,
        events: Vec<crate::kernel::EventDraft>,
        signer: Option<&owner::OwnerKey>,
        tail: Option<journal::Tail>,
    ) -> Result<Vec<Event>> {
        let jp = self.journal_path();
        let tail = match tail {
            Some(t) => t,
            None => journal::Tail::read(&jp)?,
        };
        let n = tail.next_seq();
        let files = tx::stage(self.dir(), n, &tx::coalesce(ops))?;
        let events = journal::append_after(&jp, &tail, events, signer, Some(files.clone()))?;
        tx::apply(self.dir(), n, &files)?;
        Ok(events)
    }

    /// Finishes or undoes a commit a crash interrupted (the caller holds the exclusive lock).
    pub(super) fn recover(&self) -> Result<()> {
        self.recover_noted().map(|_| ())
    }

    /// Finishes or undoes an interrupted commit (the caller holds the exclusive lock), journals
    /// it, and says what it did.
    pub(crate) fn recover_noted(&self) -> Result<Option<String>> {
        self.finish_retire()?;
        if !self.exists() {
            return Ok(None);
        }
        let did = recover::recover(self.dir())?;
        if let Some(what) = &did {
            self.commit_ops(
                Vec::new(),
                vec![crate::kernel::EventDraft {
                    at: self.env().now,
                    actor: "loopx".into(),
                    action: crate::kernel::Action::JournalRepair,
                    target: "journal.jsonl".into(),
                    data: serde_json::json!({ "recovered": what }),
                }],
                None,
                None,
            )?;
        }
        Ok(did)
    }

    /// Finishes an interrupted commit if there is one, and returns the journal's tail for the
    /// next commit (one read of it when there was nothing to finish).
    pub(super) fn recover_tail(&self) -> Result<Option<journal::Tail>> {
        if std::fs::symlink_metadata(self.path("retiring")).is_ok() || !self.exists() {
            self.recover()?;
            return Ok(None);
        }
        let t = recover::tail(self.dir())?;
        if t.pending || t.torn_tx.is_some() {
            self.recover()?;
            return Ok(None);
        }
        Ok(Some(t.journal))
    }

    /// True when the journal's last transaction is unfinished and a load must recover it first.
    pub(super) fn needs_recovery(&self) -> Result<bool> {
        if std::fs::symlink_metadata(self.path("retiring")).is_ok() {
            return Ok(true);
        }
        let t = recover::tail(self.dir())?;
        Ok(t.pending || t.torn_tx.is_some())
    }

    /// The decision hashes in `owner.proofs`, if `key` signed it (else none).
    pub(super) fn read_decisions(&self, key: &OwnerPub) -> std::collections::BTreeSet<String> {
        parse::read_bytes(&self.path("owner.proofs"))
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| authority::parse_decisions(&t, key))
            .unwrap_or_default()
    }
}

/// A transaction on the file store: the exclusive lock, and the snapshot loaded under it.
pub(super) struct FileTx<'a> {
    pub(super) store: &'a FileStore,
    pub(super) snap: Snapshot,
    pub(super) refresh: Option<Refresh>,
    pub(super) tail: Option<journal::Tail>,
    pub(super) _guard: lock::Guard,
}

impl Transaction for FileTx<'_> {
    fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    fn commit(self: Box<Self>, change: Change) -> Result<Vec<Event>> {
        let FileTx {
            store,
            snap,
            refresh,
            tail,
            _guard,
        } = *self;
        let events = store.apply_change_on(Some(&snap), change, tail)?;
        drop(_guard);
        store.refresh_cache(refresh);
        store.committed(&snap, &events);
        Ok(events)
    }
}

/// What `prepare` reads on the files: the snapshot the change was decided on (loaded under
/// the lock when the caller has none), and the files themselves.
struct FileBefore<'a> {
    store: &'a FileStore,
    snap: Option<&'a Snapshot>,
    loaded: Option<Snapshot>,
}

impl Before for FileBefore<'_> {
    fn snapshot(&mut self) -> Result<&Snapshot> {
        if let Some(s) = self.snap {
            return Ok(s);
        }
        if self.loaded.is_none() {
            self.loaded = Some(self.store.load_unlocked()?);
        }
        self.loaded
            .as_ref()
            .ok_or_else(|| Error::new(Code::Internal, "no snapshot"))
    }

    fn owner_pub(&mut self) -> Result<Option<OwnerPub>> {
        self.store.owner_pub()
    }

    fn head(&mut self) -> Result<String> {
        journal::head(&self.store.journal_path())
    }

    fn mark(&mut self) -> Result<Option<Mark>> {
        self.store.journal_mark()
    }

    fn raw(&mut self) -> Result<Snapshot> {
        self.store.load_raw()
    }

    fn proofs(&mut self) -> Result<Option<String>> {
        let p = self.store.path("owner.proofs");
        // An unreadable file is rebuilt from the gates' own signatures.
        Ok(parse::read_bytes(&p)
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok()))
    }

    fn decided(&mut self) -> Result<Vec<Gate>> {
        let gates: BTreeMap<String, Gate> = self.store.read_dir_toml("gates")?;
        Ok(gates
            .into_values()
            .filter(|g| g.status != GateStatus::Pending)
            .collect())
    }

    fn unsealed(&mut self) -> Option<Error> {
        Some(Error::new(
            Code::InvalidState,
            "owner.seal is missing or not valid, so loopx cannot tell your facts from hand edits",
        )
        .hint("check the files with `loopx doctor`, then adopt them with `loopx owner seal --adopt`"))
    }
}
