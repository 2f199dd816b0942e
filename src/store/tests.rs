//! `StoreExt` on a fake in-memory store: retries on a conflict, claims reserved first.

use std::cell::{Cell, RefCell};
use std::path::Path;

use serde_json::json;

use super::*;
use crate::kernel::{Code, Config, Error};

/// A store whose commits fail with `code` a number of times, then succeed.
struct Fake {
    conflicts: Cell<u32>,
    code: Code,
    begun: Cell<u32>,
    committed: Cell<u32>,
    reserved: RefCell<Vec<String>>,
    env: crate::store::Env,
}

impl Fake {
    fn failing(times: u32, code: Code) -> Fake {
        Fake {
            conflicts: Cell::new(times),
            code,
            begun: Cell::new(0),
            committed: Cell::new(0),
            reserved: RefCell::new(Vec::new()),
            env: crate::store::Env::default(),
        }
    }
}

struct FakeTx<'a> {
    store: &'a Fake,
    snap: Snapshot,
}

impl Transaction for FakeTx<'_> {
    fn snapshot(&self) -> &Snapshot {
        &self.snap
    }

    fn reserve_claim(&mut self, agent: &str, _now: Ts) -> Result<()> {
        self.store.reserved.borrow_mut().push(agent.to_string());
        Ok(())
    }

    fn commit(self: Box<Self>, _change: Change) -> Result<Vec<Event>> {
        let left = self.store.conflicts.get();
        if left > 0 {
            self.store.conflicts.set(left - 1);
            // What a database answers, retry or not, in its details too: only the code counts.
            return Err(Error::new(self.store.code, "serialization failure")
                .details(json!({"retry": true})));
        }
        self.store.committed.set(self.store.committed.get() + 1);
        Ok(Vec::new())
    }
}

impl Store for Fake {
    fn env(&self) -> &crate::store::Env {
        &self.env
    }

    fn load(&self) -> Result<Snapshot> {
        Ok(Snapshot::new(Config::new("g-fake", "Test", Ts(0))))
    }

    fn begin(&self) -> Result<Box<dyn Transaction + '_>> {
        self.begun.set(self.begun.get() + 1);
        Ok(Box::new(FakeTx {
            store: self,
            snap: self.load()?,
        }))
    }

    fn fresh_id(&self, _kind: Kind) -> Result<String> {
        Ok("t-aaaaaa".into())
    }
}

impl Reads for Fake {
    fn resolve_todo(&self, _snap: &Snapshot, input: &str) -> Result<String> {
        Ok(input.into())
    }

    fn resolve_gate(&self, _snap: &Snapshot, input: &str) -> Result<String> {
        Ok(input.into())
    }

    fn archived_todo(&self, _id: &str) -> Result<Option<crate::kernel::Todo>> {
        Ok(None)
    }

    fn archived_ids(&self) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    fn archived_count(&self) -> Result<usize> {
        Ok(0)
    }

    fn evidence_tail(&self, _id: &str, _n: usize) -> Result<Vec<Evidence>> {
        Ok(Vec::new())
    }

    fn evidence_all(
        &self,
        _only: Option<&str>,
        _keep: evidence::Keep<'_>,
    ) -> Result<Vec<(String, Evidence)>> {
        Ok(Vec::new())
    }

    fn journal_tail(&self, _n: usize) -> Result<Vec<Event>> {
        Ok(Vec::new())
    }

    fn journal_seen(&self) -> Result<Seen> {
        Ok(Seen::default())
    }

    fn journal_end(&self) -> Result<u64> {
        Ok(0)
    }

    fn journal_after(&self, pos: u64) -> Result<(Vec<Event>, u64)> {
        Ok((Vec::new(), pos))
    }

    fn journal_line(&self, _seq: u64) -> Result<Option<Event>> {
        Ok(None)
    }

    fn owner_pub(&self) -> Result<Option<crate::kernel::authority::OwnerPub>> {
        Ok(None)
    }

    fn local_root(&self) -> Option<&Path> {
        None
    }
}

/// Runs `mutate` (or `mutate_claim` for `claim`) on the store as `dyn Store`; how often `f` ran.
fn run(store: &dyn Store, claim: Claim<'_>) -> (Result<u32>, u32) {
    let mut calls = 0;
    let r = store.mutate_with(claim, |_snap| {
        calls += 1;
        Ok((Change::default(), calls))
    });
    (r, calls)
}

#[test]
fn a_conflict_worth_retrying_is_retried_on_a_fresh_snapshot() {
    let store = Fake::failing(5, Code::Conflict);
    let (r, calls) = run(&store, None);
    assert_eq!(r.unwrap(), 6, "the value of the try that committed");
    assert_eq!((calls, store.begun.get(), store.committed.get()), (6, 6, 1));
}

#[test]
fn retrying_stops_after_sixteen_tries_with_the_conflict() {
    let store = Fake::failing(100, Code::Conflict);
    let (r, calls) = run(&store, None);
    let e = r.unwrap_err();
    assert!(
        !worth_retry(&e),
        "the last conflict is returned as busy: {e:?}"
    );
    assert_eq!(e.code, Code::Busy);
    assert_eq!((calls, store.committed.get()), (COMMIT_TRIES, 0));
    assert_eq!(store.conflicts.get(), 100 - COMMIT_TRIES);
}

#[test]
fn other_commit_errors_are_not_retried() {
    for code in [Code::Busy, Code::LeaseConflict, Code::Io] {
        let store = Fake::failing(1, code);
        let (r, calls) = run(&store, None);
        assert_eq!(r.map_err(|e| e.code).unwrap_err(), code);
        assert_eq!((calls, store.begun.get()), (1, 1), "{code:?}");
    }
    let store = Fake::failing(3, Code::Conflict);
    let r: Result<()> = store.mutate(|_| Err(Error::usage("no")));
    assert_eq!(r.unwrap_err().code, Code::Usage);
    assert_eq!((store.begun.get(), store.conflicts.get()), (1, 3));
}

#[test]
fn an_unnamed_claim_reserves_its_todo_on_every_try() {
    let store = Fake::failing(2, Code::Conflict);
    let (r, _) = run(&store, Some(("agent-1", Ts(5))));
    assert!(r.is_ok());
    assert_eq!(*store.reserved.borrow(), ["agent-1"; 3]);
    let store = Fake::failing(0, Code::Conflict);
    let v = store.mutate_claim("a2", Ts(5), |_| Ok((Change::default(), 7)));
    assert_eq!(v.unwrap(), 7);
    assert_eq!(*store.reserved.borrow(), ["a2"]);
    let (_, _) = run(&store, None);
    assert_eq!(store.reserved.borrow().len(), 1, "mutate reserves nothing");
    let (v, notes) = store
        .mutate_noted_with(Some(("a3", Ts(5))), |_| Ok((Change::default(), 1)))
        .unwrap();
    assert_eq!((v, notes.len()), (1, 0));
    assert_eq!(
        store.reserved.borrow().last().map(String::as_str),
        Some("a3")
    );
}
