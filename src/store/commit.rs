//! Committing a change: its files planned and staged, the journal line that commits them, the
//! files put in place; and finishing a commit a crash interrupted.

use std::collections::BTreeMap;

use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::id;
use crate::kernel::ops::{Change, Write};
use crate::kernel::{Code, Error, Event, Gate, GateStatus, Result, Snapshot};
use crate::store::cache::Refresh;
use crate::store::fs::FileStore;
use crate::store::{Transaction, journal, lock, owner, parse, tx};

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

    /// Commits a change decided on `before` (the caller holds the exclusive lock); an owner
    /// change also writes the owner's seal of the state it leaves.
    pub(crate) fn apply_change_on(
        &self,
        before: Option<&Snapshot>,
        change: Change,
        tail: Option<journal::Tail>,
    ) -> Result<Vec<Event>> {
        if change.events.is_empty() {
            if change.writes.is_empty() {
                return Ok(Vec::new());
            }
            return Err(Error::new(
                Code::Internal,
                "a change with files but no journal line",
            ));
        }
        let signer = if change.owner {
            Some(owner::signer_for(
                &self.env().key,
                self.owner_pub()?.as_ref(),
            )?)
        } else {
            None
        };
        let head = match &signer {
            Some(_) => journal::head(&self.journal_path())?,
            None => String::new(),
        };
        let mut ops = Vec::new();
        let (writes, decided) = match &signer {
            Some(k) => crate::store::sealing::sign_decisions(change.writes, k, &head),
            None => (change.writes, Vec::new()),
        };
        let change = Change { writes, ..change };
        for w in &change.writes {
            self.plan(w, &mut ops)?;
        }
        if let Some(k) = &signer {
            if !decided.is_empty() {
                ops.push(self.proofs_op(k, decided)?);
            }
            let loaded;
            let before = match before {
                Some(b) => b,
                None => {
                    loaded = self.load_unlocked()?;
                    &loaded
                }
            };
            if before.seal.is_none() && !change.adopt_files {
                return Err(Error::new(
                    Code::InvalidState,
                    "owner.seal is missing or not valid, so loopx cannot tell your facts from hand edits",
                )
                .hint("check the files with `loopx doctor`, then adopt them with `loopx owner seal --adopt`"));
            }
            ops.push(self.seal_op(k, before, &change)?);
        }
        let events = self.commit_ops(ops, change.events, signer.as_ref(), tail)?;
        if let (Some(k), Some(last)) = (&signer, events.last())
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
        let did = tx::recover(self.dir())?;
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
        let t = tx::tail(self.dir())?;
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
        let t = tx::tail(self.dir())?;
        Ok(t.pending || t.torn_tx.is_some())
    }

    /// The decision hashes in `owner.proofs`, if `key` signed it (else none).
    pub(super) fn read_proofs(&self, key: &OwnerPub) -> std::collections::BTreeSet<String> {
        parse::read_bytes(&self.path("owner.proofs"))
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|t| authority::parse_proofs(&t, key))
            .unwrap_or_default()
    }

    /// `owner.proofs` with these decisions added, signed again. A missing or invalid file is
    /// rebuilt from every gate whose own signature verifies.
    pub(super) fn proofs_op(&self, key: &owner::OwnerKey, new: Vec<String>) -> Result<tx::Op> {
        let public = key.public();
        let mut hashes = self.read_proofs(&public);
        if hashes.is_empty() {
            let gates: BTreeMap<String, Gate> = self.read_dir_toml("gates")?;
            hashes.extend(
                gates
                    .values()
                    .filter(|g| {
                        g.status != GateStatus::Pending && authority::gate_proven(g, Some(&public))
                    })
                    .filter_map(authority::decision_hash),
            );
        }
        hashes.extend(new);
        let sig = key.sign(&authority::proofs_message(&hashes));
        Ok(tx::Op::put(
            "owner.proofs",
            authority::proofs_text(&hashes, &sig).into_bytes(),
        ))
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
        store.refresh_cache(&snap, refresh);
        store.committed(&snap, &events);
        Ok(events)
    }
}
