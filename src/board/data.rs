//! Reading the project for the board, only through the store: a full load (on files, the
//! tolerant one, and a per-file reload), the journal's tail, evidence, and archived titles for
//! the Done column.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::board::metrics;
use crate::kernel::{Action, Event, Evidence, Problem, Snapshot, Status, Ts};
use crate::store::live::{Loaded, Target, Watched};

/// How many journal events the board keeps for the activity feed and the Done column.
pub const JOURNAL_TAIL: usize = 400;
/// How many evidence entries of the selected todo the board reads.
pub const EVIDENCE_TAIL: usize = 200;
/// How many recently done todos the Done column shows at most.
pub const DONE_MAX: usize = 50;
/// The journal as the board names it in a problem.
pub const JOURNAL_FILE: &str = ".loopx/journal.jsonl";

/// A todo that left the working set recently (done or cancelled).
#[derive(Debug, Clone, PartialEq)]
pub struct DoneItem {
    /// Its id.
    pub id: String,
    /// Its title (or the id when the archive file is gone).
    pub title: String,
    /// Done or cancelled.
    pub status: Status,
    /// When.
    pub at: Ts,
    /// Who.
    pub by: String,
    /// How a done was checked (`None` for a cancel), and whether HEAD moved past its check.
    pub check: Option<(crate::kernel::proof::Tier, bool)>,
}

/// What a load found: applied to the board's state by [`crate::board::app::App`], without I/O.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// The new state, checked against the owner's seal (its quarantined files and owner notes
    /// included); `None` when nothing in it changed or the load failed.
    pub full: Option<Snapshot>,
    /// A load that failed (a malformed `loopx.toml`, `quota.toml` or journal): the last good
    /// state stays on screen with it.
    pub problems: Vec<Problem>,
    /// The journal's tail, newest last, when it changed.
    pub journal: Option<Vec<Event>>,
    /// The recently done todos, newest first, when the journal changed.
    pub done: Option<Vec<DoneItem>>,
    /// Todos whose evidence changed.
    pub evidence_changed: Vec<String>,
    /// Metric evidence read: the goal's, or the changed todos'.
    pub metrics: Option<crate::board::metrics::MetricsDelta>,
    /// When the load happened.
    pub at: Ts,
}

/// Reads the store for the board; keeps the files' values of the last load (the base of the next
/// per-file reload) and a cache of archived titles for the Done column.
pub struct Loader {
    store: Box<dyn Watched>,
    /// The last good load's files' values, before the owner's seal; `None` after a failed load
    /// (the next change loads everything again). Always `None` on a database.
    raw: Option<Snapshot>,
    archive_cache: HashMap<String, Option<(String, Status)>>,
    /// The newest journal line read (a database's evidence changes are found after it).
    journal_seq: Option<u64>,
    /// The goal's metric evidence was read once (a database then reads only the changed todos').
    metrics_read: bool,
}

impl Loader {
    /// A loader over a store (the files or a database).
    pub fn new(store: Box<dyn Watched>) -> Loader {
        Loader {
            store,
            raw: None,
            archive_cache: HashMap::new(),
            journal_seq: None,
            metrics_read: false,
        }
    }

    /// The store read.
    pub fn store(&self) -> &dyn Watched {
        self.store.as_ref()
    }

    /// Reads everything (on files, through the store's tolerant load); a load that fails is a
    /// problem and the last good state stays.
    pub fn full(&mut self, now: Ts) -> Delta {
        let mut d = Delta {
            at: now,
            ..Delta::default()
        };
        let seen = self.journal_seq;
        let r = self.store.load_live();
        self.take(r, &mut d);
        self.journal_into(&mut d);
        // The goal's metrics once; after that (a rescan, a poll, a database's every change) only
        // those of the todos whose evidence changed or that new journal lines name.
        if self.metrics_read {
            let mut ids = d.evidence_changed.clone();
            let new = d.journal.iter().flatten();
            for e in new.filter(|e| seen.is_some_and(|s| e.seq > s)) {
                if !e.target.is_empty() && !ids.contains(&e.target) {
                    ids.push(e.target.clone());
                }
            }
            if !ids.is_empty() {
                d.metrics = Some(metrics::read(self.store(), Some(&ids)));
            }
        } else {
            d.metrics = Some(metrics::read(self.store(), None));
            self.metrics_read = true;
        }
        d
    }

    /// Reads the metric evidence of the todos whose evidence changed, if any.
    fn metrics_of_changed(&self, d: &mut Delta) {
        if !d.evidence_changed.is_empty() {
            d.metrics = Some(metrics::read(self.store(), Some(&d.evidence_changed)));
        }
    }

    /// Reads only what these paths name, through the store's reload; a directory event, the
    /// owner's files, a failed load before, or no paths (a database's) fall back to a full load.
    pub fn changed(&mut self, paths: &[PathBuf], now: Ts) -> Delta {
        let targets: Vec<Target> = paths.iter().map(|p| self.store.target(p)).collect();
        if paths.is_empty() || self.raw.is_none() || targets.contains(&Target::Everything) {
            return self.full(now);
        }
        let mut d = Delta {
            at: now,
            ..Delta::default()
        };
        let mut state = Vec::new();
        for (t, p) in targets.iter().zip(paths) {
            match t {
                Target::Evidence(id) if !d.evidence_changed.contains(id) => {
                    d.evidence_changed.push(id.clone())
                }
                Target::Archive(id) => {
                    self.archive_cache.remove(id);
                    state.push(p.clone());
                }
                Target::Config | Target::Quota | Target::Todo(_) | Target::Gate(_) => {
                    state.push(p.clone())
                }
                Target::Journal => state.push(p.clone()),
                _ => {}
            }
        }
        if !state.is_empty()
            && let Some(raw) = self.raw.take()
        {
            let r = self.store.reload_live(raw, &state);
            self.take(r, &mut d);
        }
        if targets.contains(&Target::Journal) {
            self.journal_into(&mut d);
        }
        self.metrics_of_changed(&mut d);
        d
    }

    /// Keeps a load's result (the files' values, and the snapshot): the new state, or the
    /// problem (and a full load next time).
    fn take(&mut self, r: crate::kernel::Result<Loaded>, d: &mut Delta) {
        match r {
            Ok((raw, snap)) => {
                self.raw = raw;
                d.full = Some(snap);
            }
            Err(e) => {
                self.raw = None;
                d.problems.push(Problem::of(&e, &self.store.whole()));
            }
        }
    }

    /// The last evidence entries of a todo, newest first.
    pub fn evidence(&self, id: &str) -> Result<Vec<Evidence>, Problem> {
        let mut v = self
            .store
            .evidence_tail(id, EVIDENCE_TAIL)
            .map_err(|e| Problem::of(&e, &self.store.evidence_name(id)))?;
        v.reverse();
        Ok(v)
    }

    fn archived(&mut self, id: &str) -> Option<(String, Status)> {
        if let Some(c) = self.archive_cache.get(id) {
            return c.clone();
        }
        let v = self
            .store
            .archived_todo(id)
            .ok()
            .flatten()
            .map(|t| (t.title, t.status));
        self.archive_cache.insert(id.to_string(), v.clone());
        v
    }

    fn journal_into(&mut self, d: &mut Delta) {
        match self.store.journal_tail(JOURNAL_TAIL) {
            Ok(events) => {
                if self.store.evidence_by_journal() {
                    // No evidence events on a database: the todos its new lines name.
                    self.new_targets(&events, &mut d.evidence_changed);
                }
                self.journal_seq = events.last().map(|e| e.seq).or(self.journal_seq);
                d.done = Some(self.done_of(&events));
                d.journal = Some(events);
            }
            Err(e) => d.problems.push(Problem {
                // Named so that the next good read of the journal clears it.
                file: JOURNAL_FILE.into(),
                ..Problem::of(&e, JOURNAL_FILE)
            }),
        }
    }

    /// The targets of the events after the last journal line read (none on the first read).
    fn new_targets(&self, events: &[Event], out: &mut Vec<String>) {
        let Some(seen) = self.journal_seq else { return };
        for e in events.iter().filter(|e| e.seq > seen) {
            if !e.target.is_empty() && !out.contains(&e.target) {
                out.push(e.target.clone());
            }
        }
    }

    /// The recently done or cancelled todos in a journal tail, newest first.
    fn done_of(&mut self, events: &[Event]) -> Vec<DoneItem> {
        let mut done: Vec<DoneItem> = Vec::new();
        // The owner's done shows only where the owner's signature proves its line.
        let key = self.store.owner_pub().ok().flatten();
        for ev in events.iter().rev() {
            if done.len() >= DONE_MAX {
                break;
            }
            let status = match ev.action {
                Action::TodoDone => Status::Done,
                Action::TodoCancel => Status::Cancelled,
                _ => continue,
            };
            if done.iter().any(|x| x.id == ev.target) {
                continue;
            }
            let (title, status) = self
                .archived(&ev.target)
                .unwrap_or((ev.target.clone(), status));
            done.push(DoneItem {
                id: ev.target.clone(),
                title,
                status,
                at: ev.at,
                by: ev.actor.clone(),
                check: (status == Status::Done)
                    .then(|| (crate::kernel::proof::tier_of(ev, key.as_ref()), false)),
            });
        }
        self.mark_stale(&mut done);
        done
    }

    /// Marks the checked results HEAD moved past (read once; files only: a database has no
    /// work tree of its own).
    fn mark_stale(&self, done: &mut [DoneItem]) {
        use crate::kernel::proof::stale;
        let checked = |d: &DoneItem| d.check.as_ref().is_some_and(|(t, _)| t.commit().is_some());
        if !done.iter().any(checked) {
            return;
        }
        let head = crate::flows::stale::head(self.store.as_ref());
        for d in done.iter_mut() {
            if let Some((tier, s)) = d.check.as_mut() {
                *s = stale(tier, head.as_deref());
            }
        }
    }
}
