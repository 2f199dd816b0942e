//! SIGKILL injection: four concurrent loops run agent and owner commands and kill each child at
//! a random moment. Afterwards every acknowledged change is there, nothing on disk is
//! unjournaled (every state file is exactly what the last commit line naming it says), no todo
//! was finished twice, and doctor is healthy (after at most `doctor --fix`) with no tamper alarm.
//!
//! The seed is printed; `LOOPX_CRASH_SEED=N` replays a run's choices (not its timing).

mod txcheck;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use txcheck::{Rng, Tmp, cmd, journal, ok, run, wait_timeout};

const WORKERS: usize = 4;
const MIN_KILLS: usize = 300;
/// Kills to aim for (a margin over the minimum), and the time budget of the loops.
const TARGET_KILLS: usize = 400;
const BUDGET: Duration = Duration::from_secs(25);

/// A command that exited 0 before it could be killed, with what it printed.
#[derive(Debug, Clone)]
struct Ack {
    worker: usize,
    what: Op,
    arg: String,
    out: Value,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Claim,
    Update,
    Done,
    Spend,
    GateOpen,
    GateApprove,
    Pause,
    Resume,
    QuotaSet,
}

/// What the loops share: acknowledged commands, gate ids seen, and the counts.
#[derive(Default)]
struct Shared {
    acks: Mutex<Vec<Ack>>,
    gates: Mutex<Vec<String>>,
    kills: AtomicUsize,
    runs: AtomicUsize,
    /// (command, exit code) of every command that ended by itself, counted.
    exits: Mutex<BTreeMap<String, usize>>,
}

fn seed() -> u64 {
    std::env::var("LOOPX_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_c0de_1234_5678)
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged_and_writes_nothing_unjournaled() {
    let seed = seed();
    println!("crash test seed: {seed} (LOOPX_CRASH_SEED={seed} to replay the choices)");
    let tmp = Tmp::new("crash");
    let root = tmp.0.join("project");
    std::fs::create_dir_all(&root).unwrap();
    let key = tmp.0.join("owner.key");
    ok(
        &root,
        &key,
        &["--agent", "lead", "start-goal", "--goal-text", "crash"],
    );
    ok(&root, &key, &["owner", "init"]);
    ok(&root, &key, &["quota", "set", "--slots", "100000"]);
    for i in 0..8 {
        ok(
            &root,
            &key,
            &["--agent", "lead", "todo", "add", &format!("seed {i}")],
        );
    }

    let shared = Arc::new(Shared::default());
    let start = Instant::now();
    let handles: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (root, key, shared) = (root.clone(), key.clone(), shared.clone());
            let mut rng = Rng(seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(w as u64 + 1)) | 1);
            std::thread::spawn(move || worker(w, &root, &key, &shared, &mut rng, start))
        })
        .collect();
    for h in handles {
        h.join().expect("a worker failed");
    }
    let kills = shared.kills.load(Ordering::SeqCst);
    let runs = shared.runs.load(Ordering::SeqCst);
    let acks = shared.acks.lock().unwrap().clone();
    println!(
        "{runs} commands, {kills} killed, {} acknowledged, in {:?}",
        acks.len(),
        start.elapsed()
    );
    println!("exits: {:?}", shared.exits.lock().unwrap());
    assert!(kills >= MIN_KILLS, "only {kills} kills in the time budget");

    let lx = root.join(".loopx");
    // Any later command first finishes an interrupted commit; status is the cheapest one.
    let st = run(&root, &key, &["status", "--json"]);
    assert_eq!(st.code, 0, "status after the kills: {st:?}");

    let bad = txcheck::files_match_journal(&lx);
    assert!(
        bad.is_empty(),
        "state files that are not what the journal says:\n{}",
        bad.join("\n")
    );
    let repairs: Vec<String> = journal(&lx)
        .iter()
        .filter(|e| e["action"] == "journal.repair")
        .map(|e| e["data"].to_string())
        .collect();
    println!("{} recoveries: {repairs:?}", repairs.len());
    check_acks(&lx, &acks);
    check_done_once(&lx);
    check_doctor(&root, &key);
    // And the project still works.
    ok(
        &root,
        &key,
        &["--agent", "after", "todo", "add", "after the storm"],
    );
    assert!(txcheck::files_match_journal(&lx).is_empty());
}

fn worker(w: usize, root: &Path, key: &Path, shared: &Shared, rng: &mut Rng, start: Instant) {
    let agent = format!("agent-{w}");
    let mut held: Option<String> = None;
    let mut i = 0u64;
    let mut est_us: u64 = 30_000;
    while shared.kills.load(Ordering::SeqCst) < TARGET_KILLS && start.elapsed() < BUDGET {
        i += 1;
        let (op, arg, args) = pick(w, i, rng, &held, shared);
        let mut full: Vec<String> = vec!["--agent".into(), agent.clone(), "--json".into()];
        full.extend(args);
        let argv: Vec<&str> = full.iter().map(String::as_str).collect();
        let spawned = Instant::now();
        let mut child = cmd(root, key, &argv).spawn().expect("spawn loopx");
        // Kill at a random moment of the command's life: uniformly from at once to a little
        // after a command usually ends (learned from the ones that ended), so some finish.
        let delay = Duration::from_micros(rng.below(est_us * 8 / 5));
        let mut killed = false;
        let status = loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                let took = u64::try_from(spawned.elapsed().as_micros()).unwrap_or(u64::MAX);
                est_us = (est_us * 4 + took.min(500_000)) / 5;
                break st;
            }
            let left = delay.saturating_sub(spawned.elapsed());
            if left.is_zero() {
                let _ = child.kill();
                killed = true;
                est_us += est_us / 50;
                break wait_timeout(&mut child, Duration::from_secs(40))
                    .expect("a killed child hung");
            }
            std::thread::sleep(left.min(Duration::from_micros(200)));
        };
        shared.runs.fetch_add(1, Ordering::SeqCst);
        if killed && status.signal() == Some(libc::SIGKILL) {
            shared.kills.fetch_add(1, Ordering::SeqCst);
            if matches!(op, Op::Claim) {
                held = None; // it may or may not hold one now
            }
            continue;
        }
        let out = child.wait_with_output().expect("output");
        let code = status.code().unwrap_or(-1);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !stderr.contains("panicked") && code != 101,
            "{argv:?} panicked: {stderr}"
        );
        // A finished command gets a contract answer: never invalid state, I/O or busy.
        assert!(
            matches!(code, 0 | 2 | 3 | 4 | 5),
            "{argv:?} exited {code}:\n{stdout}\n{stderr}"
        );
        *shared
            .exits
            .lock()
            .unwrap()
            .entry(format!("{op:?} {code}"))
            .or_default() += 1;
        if code != 0 {
            continue;
        }
        let v: Value = serde_json::from_str(stdout.trim()).expect("one JSON answer");
        match op {
            Op::Claim => held = v["todo"]["id"].as_str().map(str::to_string),
            Op::Done => held = None,
            Op::GateOpen => shared
                .gates
                .lock()
                .unwrap()
                .extend(v["gate"]["id"].as_str().map(str::to_string)),
            _ => {}
        }
        shared.acks.lock().unwrap().push(Ack {
            worker: w,
            what: op,
            arg,
            out: v,
        });
    }
}

/// Chooses the next command: agent work most of the time, an owner command now and then.
fn pick(
    w: usize,
    i: u64,
    rng: &mut Rng,
    held: &Option<String>,
    shared: &Shared,
) -> (Op, String, Vec<String>) {
    let s = |x: &str| x.to_string();
    let tag = format!("w{w}-{i}");
    let id_args = |mut a: Vec<String>| {
        if let Some(h) = held {
            a.insert(2, h.clone());
        }
        a
    };
    // An agent holding a todo mostly works on it.
    let roll = match held {
        Some(_) if rng.below(2) == 0 => 7 + rng.below(5),
        _ => rng.below(20),
    };
    match roll {
        0..=3 => (Op::Add, tag.clone(), vec![s("todo"), s("add"), tag]),
        4..=6 => (Op::Claim, String::new(), vec![s("todo"), s("claim")]),
        7..=9 => (
            Op::Update,
            tag.clone(),
            id_args(vec![s("todo"), s("update"), s("--evidence"), tag]),
        ),
        10..=11 => (
            Op::Done,
            tag.clone(),
            id_args(vec![
                s("todo"),
                s("update"),
                s("--status"),
                s("done"),
                s("--evidence"),
                tag,
            ]),
        ),
        12..=13 => (
            Op::Spend,
            tag.clone(),
            vec![s("quota"), s("spend-slot"), s("--turn"), tag],
        ),
        14 => (
            Op::GateOpen,
            tag.clone(),
            vec![s("gate"), s("open"), format!("may {tag}?")],
        ),
        15 => {
            let gates = shared.gates.lock().unwrap();
            match gates.len() {
                0 => (Op::Resume, String::new(), vec![s("goal"), s("resume")]),
                n => {
                    let g = gates[rng.below(n as u64) as usize].clone();
                    (Op::GateApprove, g.clone(), vec![s("gate"), s("approve"), g])
                }
            }
        }
        16 => (Op::Pause, String::new(), vec![s("goal"), s("pause")]),
        17 | 18 => (Op::Resume, String::new(), vec![s("goal"), s("resume")]),
        _ => {
            let n = 1000 + rng.below(1000);
            (
                Op::QuotaSet,
                n.to_string(),
                vec![s("quota"), s("set"), s("--slots"), n.to_string()],
            )
        }
    }
}

/// Journal lines with this action and target.
fn lines<'a>(j: &'a [Value], action: &str, target: &str) -> Vec<&'a Value> {
    j.iter()
        .filter(|e| e["action"] == action && e["target"] == target)
        .collect()
}

fn evidence_texts(lx: &Path, id: &str) -> Vec<String> {
    std::fs::read_to_string(lx.join(format!("evidence/{id}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["summary"].as_str().map(str::to_string))
        .collect()
}

fn check_acks(lx: &Path, acks: &[Ack]) {
    let j = journal(lx);
    let quota = std::fs::read_to_string(lx.join("quota.toml")).unwrap();
    let file = |sub: &str, id: &str| -> PathBuf { lx.join(sub).join(format!("{id}.toml")) };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for a in acks {
        *counts.entry(format!("{:?}", a.what)).or_default() += 1;
        let todo_id = a.out["todo"]["id"].as_str().unwrap_or("").to_string();
        let fail = |why: &str| {
            panic!(
                "acknowledged {:?} by worker {} lost: {why}\n{a:?}",
                a.what, a.worker
            )
        };
        match a.what {
            Op::Add => {
                if !file("todos", &todo_id).is_file() && !file("archive", &todo_id).is_file() {
                    fail("its todo is in neither todos/ nor archive/");
                }
            }
            Op::Claim => {
                let fence = &a.out["todo"]["lease"]["fence"];
                if !lines(&j, "todo.claim", &todo_id)
                    .iter()
                    .any(|e| e["data"]["fence"] == *fence)
                {
                    fail("no todo.claim line with its fence");
                }
            }
            Op::Update => {
                if !evidence_texts(lx, &todo_id).contains(&a.arg) {
                    fail("its evidence line is missing");
                }
            }
            Op::Done => {
                let archived =
                    std::fs::read_to_string(file("archive", &todo_id)).unwrap_or_default();
                if !archived.contains("status = \"done\"") {
                    fail("the todo is not archived as done");
                }
                if file("todos", &todo_id).exists() {
                    fail("the finished todo is still in todos/");
                }
                if !evidence_texts(lx, &todo_id).contains(&a.arg) {
                    fail("its evidence line is missing");
                }
            }
            Op::Spend => {
                let in_journal = j
                    .iter()
                    .any(|e| e["action"] == "quota.spend" && e["data"]["turn"] == a.arg.as_str());
                if !in_journal && !quota.contains(&a.arg) {
                    fail("the turn is in neither quota.toml nor the journal");
                }
            }
            Op::GateOpen => {
                let id = a.out["gate"]["id"].as_str().unwrap_or("");
                if !file("gates", id).is_file() || lines(&j, "gate.open", id).is_empty() {
                    fail("the gate file or its gate.open line is missing");
                }
            }
            Op::GateApprove => {
                let g = std::fs::read_to_string(file("gates", &a.arg)).unwrap_or_default();
                if !g.contains("status = \"approved\"")
                    || lines(&j, "gate.approve", &a.arg).is_empty()
                {
                    fail("the gate is not approved, or its line is missing");
                }
            }
            Op::Pause | Op::Resume => {
                let action = if a.what == Op::Pause {
                    "goal.pause"
                } else {
                    "goal.resume"
                };
                let at = &a.out["goal"]["updated_at"];
                if !j.iter().any(|e| e["action"] == action && e["at"] == *at) {
                    fail("its journal line is missing");
                }
            }
            Op::QuotaSet => {
                let n: u64 = a.arg.parse().unwrap();
                if !j
                    .iter()
                    .any(|e| e["action"] == "quota.set" && e["data"]["slots"] == n)
                {
                    fail("its quota.set line is missing");
                }
            }
        }
    }
    println!("acknowledged: {counts:?}");
}

/// No todo finished twice: at most one `todo.done` line per todo (none is recurring here).
fn check_done_once(lx: &Path) {
    let mut seen = BTreeSet::new();
    for e in journal(lx) {
        if e["action"] == "todo.done" {
            let t = e["target"].as_str().unwrap().to_string();
            assert!(seen.insert(t.clone()), "{t} was finished twice: {e}");
        }
    }
}

/// doctor is healthy after at most `doctor --fix`, and never raises a tamper alarm.
fn check_doctor(root: &Path, key: &Path) {
    let alarm = |v: &Value| {
        v["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|f| {
                let m = f["message"].as_str().unwrap_or("");
                m.contains("signature") || m.contains("by hand") || m.contains("tampered")
            })
            .cloned()
    };
    let first = run(root, key, &["doctor", "--json"]);
    let v = first.json();
    assert!(alarm(&v).is_none(), "a false tamper alarm: {v}");
    if first.code != 0 {
        let fixed = run(root, key, &["doctor", "--fix", "--json"]);
        println!("doctor --fix: {}", fixed.stdout.trim());
    }
    let last = run(root, key, &["doctor", "--json"]);
    let v = last.json();
    assert_eq!(last.code, 0, "doctor unhealthy after --fix: {v}");
    assert!(alarm(&v).is_none(), "a false tamper alarm: {v}");
}
