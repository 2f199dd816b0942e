//! Property test of the journal-first commit protocol: a crash after any write step of a
//! change leaves the state equal to before the change or after it.
//!
//! For a random small history and a random last change, the change is committed twice: once by
//! the real store (`FileStore::apply_change`), once step by step with the store's public pieces
//! (`tx::stage` one file at a time, `journal::append`, `tx::apply_one` one file at a time),
//! which must give the same bytes. The directory is snapshotted after every step, and also in
//! the middle of each write (a half-written staged file, a torn journal append, a journal with
//! only the first lines of a transaction, a half-done append to a log). Each snapshot is
//! restored into a fresh directory, the real binary runs on it (its load finishes or undoes the
//! interrupted commit), and the state must be the before-state or the after-state, every state
//! file must be what the journal says, and doctor must be healthy (after at most `--fix`).

mod txcheck;

use std::collections::BTreeMap;
use std::path::Path;

use loopx::kernel::id::{self, Kind};
use loopx::kernel::ops::{self, Change, NewTodo, Update};
use loopx::kernel::{
    Dur, Event, Evidence, EvidenceKind, Priority, Role, Snapshot, Status, Ts, TxOp,
};
use loopx::store::{FileStore, Reads, Store, StoreExt, journal, tx};
use proptest::prelude::*;
use txcheck::{Tmp, ok, run, state_files};

/// One change of the generated history.
#[derive(Debug, Clone)]
enum Step {
    Add {
        dep: bool,
    },
    Claim {
        agent: u8,
    },
    Evidence {
        agent: u8,
    },
    Done {
        agent: u8,
        evidence: bool,
    },
    Release {
        agent: u8,
    },
    Gate {
        block: bool,
        global: bool,
    },
    Spend {
        turn: u8,
    },
    /// Every lease has expired an hour later: one line and one file per lease.
    Expire,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<bool>().prop_map(|dep| Step::Add { dep }),
        (0..2u8).prop_map(|agent| Step::Claim { agent }),
        (0..2u8).prop_map(|agent| Step::Evidence { agent }),
        (0..2u8, any::<bool>()).prop_map(|(agent, evidence)| Step::Done { agent, evidence }),
        (0..2u8).prop_map(|agent| Step::Release { agent }),
        (any::<bool>(), any::<bool>()).prop_map(|(block, global)| Step::Gate { block, global }),
        (0..4u8).prop_map(|turn| Step::Spend { turn }),
        Just(Step::Expire),
    ]
}

fn agent(n: u8) -> String {
    format!("agent-{n}")
}

/// A fresh id (deterministic: the n-th of the case).
fn fresh(kind: Kind, n: &mut u8) -> String {
    *n += 1;
    id::new_id(kind, [*n, *n / 32, 3, 4, 5, 6])
}

/// A held todo and its holder: the agent's own if it holds one, else anyone's.
fn held(snap: &Snapshot, a: &str) -> Option<(String, String)> {
    let leased = || {
        snap.todos
            .values()
            .filter_map(|t| t.lease.as_ref().map(|l| (t, l)))
    };
    leased()
        .find(|(_, l)| l.holder == a)
        .or_else(|| leased().next())
        .map(|(t, l)| (l.holder.clone(), t.id.clone()))
}

/// The kernel change of a step on a snapshot; a step that does not apply adds a todo instead.
fn change(snap: &Snapshot, s: &Step, now: Ts, n: &mut u8) -> Change {
    let note = |a: &str, fence| Evidence::new(now, a, fence, EvidenceKind::Note, "a note".into());
    let tried: Option<Change> = match s {
        Step::Add { .. } => None,
        Step::Expire => Some(ops::expire_leases(snap, "doctor", Ts(now.0 + 3_600_000))),
        Step::Spend { turn } => ops::spend(
            snap,
            "agent-0",
            now,
            1,
            Some(format!("turn-{turn}")),
            None,
            None,
        )
        .ok()
        .map(|(c, _)| c),
        Step::Claim { agent: a } => ops::claim(snap, &agent(*a), now, Dur::from_mins(30), None)
            .ok()
            .map(|(c, _)| c),
        Step::Evidence { agent: a } | Step::Done { agent: a, .. } | Step::Release { agent: a } => {
            held(snap, &agent(*a)).and_then(|(a, id)| {
                let fence = snap.todos[&id].fence;
                let u = |status, evidence: bool| Update {
                    fence: Some(fence),
                    evidence: evidence
                        .then(|| note(&a, Some(fence)))
                        .into_iter()
                        .collect(),
                    status,
                    reason: None,
                };
                match s {
                    Step::Release { .. } => ops::release(snap, &a, now, &id),
                    Step::Evidence { .. } => ops::update(snap, &a, now, &id, u(None, true)),
                    Step::Done { evidence, .. } => {
                        ops::update(snap, &a, now, &id, u(Some(Status::Done), *evidence))
                    }
                    _ => unreachable!(),
                }
                .ok()
                .map(|(c, _)| c)
            })
        }
        Step::Gate { block, global } => {
            let blocks = snap
                .todos
                .keys()
                .take(usize::from(*block))
                .cloned()
                .collect();
            let gid = fresh(Kind::Gate, n);
            ops::open_gate(
                snap,
                "agent-0",
                now,
                gid,
                "may I?".into(),
                blocks,
                *global,
                vec![],
            )
            .ok()
            .map(|(c, _)| c)
        }
    };
    // A change with nothing to journal (a turn spent twice) is no transaction: claim instead,
    // or add when nothing is ready.
    let claim = || {
        ops::claim(snap, "agent-0", now, Dur::from_mins(30), None)
            .ok()
            .map(|(c, _)| c)
            .filter(|_| {
                matches!(
                    s,
                    Step::Evidence { .. } | Step::Done { .. } | Step::Release { .. }
                )
            })
    };
    tried
        .filter(|c| !c.events.is_empty())
        .or_else(claim)
        .unwrap_or_else(|| {
            let depends_on = match s {
                Step::Add { dep: true } => snap.todos.keys().take(1).cloned().collect(),
                _ => Vec::new(),
            };
            let new = NewTodo {
                id: fresh(Kind::Todo, n),
                title: format!("todo {n}"),
                role: Role::Agent,
                priority: Priority::P2,
                depends_on,
                every: None,
                blocked_by_gate: None,
                requires: Vec::new(),
                reviews: None,
                exclude_agents: Vec::new(),
                body: None,
                links: Vec::new(),
                paths: Vec::new(),
            };
            ops::add_todo(snap, "agent-0", now, new).expect("add").0
        })
}

/// Every file under `.loopx/` but the lock and the cache, with its bytes.
type Files = BTreeMap<String, Vec<u8>>;

fn snapshot(lx: &Path) -> Files {
    fn walk(base: &Path, dir: &Path, out: &mut Files) {
        for e in std::fs::read_dir(dir).expect("read dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            if rel == "lock" || rel == "cache" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                walk(base, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let mut out = Files::new();
    walk(lx, lx, &mut out);
    out
}

fn restore(files: &Files, lx: &Path) {
    for sub in ["todos", "archive", "gates", "evidence"] {
        std::fs::create_dir_all(lx.join(sub)).unwrap();
    }
    for (rel, bytes) in files {
        std::fs::write(lx.join(rel), bytes).unwrap();
    }
}

/// The crash points of one commit, step by step; checks the step-wise commit gives the same
/// bytes as the real one (`after`).
fn crash_points(
    lx: &Path,
    change: Change,
    real_line: &Event,
    after: &Files,
) -> Vec<(String, Files)> {
    let manifest = real_line
        .files
        .clone()
        .expect("a commit line lists its files");
    let n = real_line.tx.expect("a commit line has tx");
    let mut points = vec![("before".to_string(), snapshot(lx))];
    let mut staged = Vec::new();
    for f in &manifest {
        let op = match f.op {
            TxOp::Put => tx::Op::put(&f.path, after[&f.path].clone()),
            TxOp::Remove => tx::Op::remove(&f.path),
            TxOp::Append => {
                tx::Op::append(&f.path, after[&f.path][f.at.unwrap() as usize..].to_vec())
            }
        };
        let mut one = tx::stage(lx, n, std::slice::from_ref(&op)).expect("stage");
        assert_eq!(one, vec![f.clone()], "staging gives the real manifest");
        staged.append(&mut one);
        let mut s = snapshot(lx);
        if op.bytes.len() > 1 {
            // A crash while the staged file was being written.
            let mut half = s.clone();
            half.insert(
                tx::staged_rel(&f.path, n),
                op.bytes[..op.bytes.len() / 2].to_vec(),
            );
            points.push((format!("half-staged {}", f.path), half));
        }
        points.push((format!("staged {}", f.path), std::mem::take(&mut s)));
    }
    // The append first cuts a torn last line, then writes the lines at once.
    let mut before_journal = std::fs::read(lx.join("journal.jsonl")).unwrap();
    let clean = before_journal
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    before_journal.truncate(clean);
    journal::append(&lx.join("journal.jsonl"), change.events, None, Some(staged)).expect("append");
    let committed = snapshot(lx);
    let appended = &committed["journal.jsonl"][before_journal.len()..];
    assert_eq!(
        committed["journal.jsonl"], after["journal.jsonl"],
        "the step-wise journal append gives the real commit's bytes"
    );
    // A torn append, and one cut after each complete line but the last.
    for cut in [appended.len() / 2]
        .into_iter()
        .chain(
            appended
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .filter(|c| *c < appended.len())
    {
        let mut s = committed.clone();
        let mut j = before_journal.clone();
        j.extend_from_slice(&appended[..cut]);
        s.insert("journal.jsonl".into(), j);
        points.push((format!("journal cut at {cut} of {}", appended.len()), s));
    }
    points.push(("journal appended".into(), committed));
    for f in &manifest {
        if f.op == TxOp::Append {
            // A crash in the middle of the append to the log.
            let mut s = snapshot(lx);
            let bytes = &after[&f.path][f.at.unwrap() as usize..];
            let mut log = s.get(&f.path).cloned().unwrap_or_default();
            log.extend_from_slice(&bytes[..bytes.len() / 2]);
            s.insert(f.path.clone(), log);
            points.push((format!("half-appended {}", f.path), s));
        }
        assert!(tx::apply_one(lx, n, f).expect("apply_one"));
        points.push((format!("applied {}", f.path), snapshot(lx)));
    }
    let done = snapshot(lx);
    for (k, v) in after {
        assert_eq!(
            done.get(k),
            Some(v),
            "the step-wise commit differs from the real one at {k}"
        );
    }
    points
}

/// The state a reader sees: the state files, and the journal without torn bytes or trailing
/// `journal.repair` lines.
fn seen(lx: &Path) -> (Files, Vec<serde_json::Value>) {
    let mut j = txcheck::journal(lx);
    while j.last().is_some_and(|e| e["action"] == "journal.repair") {
        j.pop();
    }
    (state_files(lx), j)
}

fn check_point(
    what: &str,
    files: &Files,
    before: &(Files, Vec<serde_json::Value>),
    after: &(Files, Vec<serde_json::Value>),
    via_doctor_fix: bool,
) {
    let t = Tmp::new("props-point");
    let lx = t.0.join(".loopx");
    restore(files, &lx);
    let key = t.0.join("no-key");
    if via_doctor_fix {
        let r = run(&t.0, &key, &["doctor", "--fix", "--json"]);
        assert!(r.code == 0 || r.code == 6, "{what}: doctor --fix: {r:?}");
    }
    let r = run(&t.0, &key, &["status", "--json"]);
    assert_eq!(r.code, 0, "{what}: status: {r:?}");
    let got = seen(&lx);
    let which = if got == *before {
        "before"
    } else if got == *after {
        "after"
    } else {
        let diff: Vec<_> = got
            .0
            .keys()
            .chain(after.0.keys())
            .filter(|k| got.0.get(*k) != after.0.get(*k) && got.0.get(*k) != before.0.get(*k))
            .collect();
        panic!(
            "{what}: the state is neither before nor after the change (files {diff:?}; journal {} lines, before {}, after {})",
            got.1.len(),
            before.1.len(),
            after.1.len()
        );
    };
    let bad = txcheck::files_match_journal(&lx);
    assert!(bad.is_empty(), "{what} ({which}): {bad:?}");
    let d = run(&t.0, &key, &["doctor", "--json"]);
    if d.code != 0 {
        let f = run(&t.0, &key, &["doctor", "--fix", "--json"]);
        let d2 = run(&t.0, &key, &["doctor", "--json"]);
        assert_eq!(
            d2.code, 0,
            "{what} ({which}): doctor unhealthy after --fix: {d:?}\n{f:?}\n{d2:?}"
        );
    }
    // And the project goes on: a new change commits over any leftovers.
    ok(&t.0, &key, &["--agent", "later", "todo", "add", "later"]);
    assert!(
        txcheck::files_match_journal(&lx).is_empty(),
        "{what} ({which}): after a later change"
    );
}

/// Builds the history, then crashes the last change at every point.
fn run_case(history: &[Step], last: &Step, torn: bool, via_doctor_fix: bool) {
    let base = Tmp::new("props");
    let key = base.0.join("no-key");
    ok(
        &base.0,
        &key,
        &["--agent", "lead", "start-goal", "--goal-text", "props"],
    );
    let store = FileStore::at(&base.0);
    let mut n = 0u8;
    let now = Ts::now();
    for s in history {
        store
            .mutate(|snap| Ok((change(snap, s, now, &mut n), ())))
            .expect("history step");
    }
    if torn {
        // A crash mid-append left a torn last line: the change's append cuts it, and journals
        // that in a line of its own, so the transaction has two lines.
        use std::io::Write as _;
        let mut j = std::fs::OpenOptions::new()
            .append(true)
            .open(store.journal_path())
            .unwrap();
        j.write_all(br#"{"seq":999,"at":"#).unwrap();
    }
    let snap = store.load().expect("load");
    let mut n2 = n;
    let c = change(&snap, last, now, &mut n2);
    let before_files = snapshot(store.dir());
    let before = seen(store.dir());

    // The real commit, in a copy.
    let real = Tmp::new("props-real");
    restore(&before_files, &real.0.join(".loopx"));
    let real_store = FileStore::at(&real.0);
    {
        let _g = real_store.lock(true).expect("lock");
        real_store.apply_change(c.clone()).expect("real commit");
    }
    let after_files = snapshot(real_store.dir());
    let after = seen(real_store.dir());
    let line = real_store
        .journal_tail(1)
        .expect("tail")
        .pop()
        .expect("a line");

    let points = crash_points(store.dir(), c, &line, &after_files);
    let names: Vec<&str> = points.iter().map(|(w, _)| w.as_str()).collect();
    println!(
        "{last:?} (torn: {torn}): {} crash points: {names:?}",
        points.len()
    );
    for (what, files) in &points {
        let what = format!("{history:?} then {last:?}, crashed at {what}");
        check_point(&what, files, &before, &after, via_doctor_fix);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x006c_6f6f_7078),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_crash_after_any_write_step_leaves_before_or_after(
        history in prop::collection::vec(step(), 1..7),
        last in step(),
        torn in prop::bool::weighted(0.25),
    ) {
        run_case(&history, &last, torn, false);
    }
}

/// The richest change (done with evidence, on a todo another depends on and a gate blocks),
/// crashed at every point, recovered by the next command.
#[test]
fn a_done_with_evidence_crashed_anywhere_recovers() {
    let history = [
        Step::Add { dep: false },
        Step::Add { dep: true },
        Step::Claim { agent: 0 },
        Step::Evidence { agent: 0 },
    ];
    run_case(
        &history,
        &Step::Done {
            agent: 0,
            evidence: true,
        },
        false,
        false,
    );
}

/// The same, where the first command after the crash is `doctor --fix`: it must finish the
/// interrupted commit, never delete the staged files of a committed one.
#[test]
fn doctor_fix_after_a_crash_keeps_the_committed_change() {
    let history = [Step::Add { dep: false }, Step::Claim { agent: 0 }];
    run_case(
        &history,
        &Step::Done {
            agent: 0,
            evidence: true,
        },
        false,
        true,
    );
}
