//! The demo's simulated agents: threads that drive the real `loopx` binary turn by turn, as an
//! agent does (should-run, claim or work, evidence, one slot spent).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

use super::Rng;
use crate::store::FileStore;

const NOTES: &[&str] = &[
    "unit tests pass (42/42)",
    "ran cargo clippy: clean",
    "benchmarked parse: 1.2 ms per response",
    "wrote 3 new tests for edge cases",
    "refactored the client behind a trait",
    "checked against the live API: ok",
];

/// Questions an agent may ask, with the options it offers.
pub const QUESTIONS: &[(&str, &[&str])] = &[
    (
        "Use SQLite or plain files for the cache?",
        &["sqlite", "files"],
    ),
    ("May I add the reqwest dependency (+2.1 MB)?", &[]),
    ("Publish 0.1.0 to crates.io now?", &["yes", "wait for CI"]),
    ("Drop Windows support for v1?", &[]),
];

/// The longest an agent sleeps on a "not now" before asking again, so that the operator's
/// decisions (an approval, a resume) show in a few seconds.
const RETRY_MAX_S: u64 = 5;

/// Runs `loopx` as an agent on the demo project; returns the parsed JSON answer.
fn loopx(exe: &Path, root: &Path, agent: &str, args: &[&str]) -> Option<Value> {
    let out = std::process::Command::new(exe)
        .arg("--dir")
        .arg(root)
        .args(["--agent", agent, "--json"])
        .args(args)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        // Agents never hold the owner's key, in the demo too.
        .env_remove("LOOPX_OWNER_KEY")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// Sleeps `ms` in steps; false when asked to stop meanwhile.
fn nap(stop: &AtomicBool, ms: u64) -> bool {
    for _ in 0..(ms / 100).max(1) {
        if stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    !stop.load(Ordering::SeqCst)
}

/// One simulated agent.
struct Sim {
    exe: PathBuf,
    root: PathBuf,
    name: String,
    rng: Rng,
    /// The todo it holds and its fence.
    held: Option<(String, u64)>,
    /// How many gates it opened (two at most).
    asked: usize,
}

/// How a turn went.
enum Turn {
    /// Done: spend its slot.
    Spent,
    /// It claimed and died (the crashing agent): no slot, no more turns.
    Crashed,
}

impl Sim {
    fn run(&self, args: &[&str]) -> Option<Value> {
        loopx(&self.exe, &self.root, &self.name, args)
    }

    /// One turn's work: claim when it holds nothing, else evidence on its lease.
    fn work(&mut self, crash_after_claim: bool) -> Turn {
        match self.held.clone() {
            None => self.claim(crash_after_claim),
            Some((id, fence)) => {
                self.progress(&id, fence);
                Turn::Spent
            }
        }
    }

    fn claim(&mut self, crash_after_claim: bool) -> Turn {
        let ttl = if crash_after_claim { "25s" } else { "2m" };
        let ans = self.run(&["todo", "claim", "--ttl", ttl]);
        let todo = ans.filter(|a| a["ok"] == true).map(|a| a["todo"].clone());
        match todo {
            Some(t) => {
                let id = t["id"].as_str().unwrap_or_default().to_string();
                let fence = t["fence"].as_u64().unwrap_or(0);
                self.held = Some((id, fence));
                if crash_after_claim {
                    return Turn::Crashed;
                }
            }
            None if self.rng.below(3) == 0 => {
                let note = NOTES[self.rng.below(NOTES.len() as u64) as usize];
                let title = format!("Follow-up: {note}");
                self.run(&["todo", "add", &title, "--priority", "P3"]);
            }
            None => {}
        }
        Turn::Spent
    }

    /// Evidence on the held todo; sometimes done, sometimes a question for the owner.
    fn progress(&mut self, id: &str, fence: u64) {
        let roll = self.rng.below(100);
        let note = NOTES[self.rng.below(NOTES.len() as u64) as usize];
        let f = fence.to_string();
        let mut args = vec!["todo", "update", id, "--fence", &f, "--evidence", note];
        if roll < 30 {
            args.extend(["--status", "done", "--reason", "done and tested"]);
        }
        let ok = self.run(&args).is_some_and(|a| a["ok"] == true);
        if !ok || roll < 30 {
            // Finished, or released, reassigned or expired under us: claim next turn.
            self.held = None;
            return;
        }
        self.run(&["todo", "renew", id, "--ttl", "2m"]);
        if roll > 90 && self.asked < 2 {
            self.asked += 1;
            let pick = 1 + self.rng.below(QUESTIONS.len() as u64 - 1) as usize;
            let (q, opts) = QUESTIONS[pick];
            let mut args = vec!["gate", "open", q];
            for o in opts {
                args.extend(["--option", o]);
            }
            self.run(&args);
        }
    }
}

/// One simulated agent's turns until `stop`: should-run first (on "not now", it sleeps what the
/// answer says, at most a few seconds), then the turn's work, then one slot spent. The agents'
/// turns never overlap (`turns`), so none runs on a slot another is about to spend. With
/// `crash_after_claim` it dies holding a lease.
pub fn agent_loop(
    exe: PathBuf,
    root: PathBuf,
    name: String,
    stop: Arc<AtomicBool>,
    turns: Arc<Mutex<()>>,
    crash_after_claim: bool,
) {
    let mut sim = Sim {
        exe,
        root,
        name,
        rng: Rng::new(),
        held: None,
        asked: 0,
    };
    let mut pause = 1200 + sim.rng.below(2500);
    while nap(&stop, pause) {
        pause = 1200 + sim.rng.below(2500);
        // A poisoned lock only means another agent's thread died: the turns still take turns.
        let _turn = turns.lock().unwrap_or_else(|e| e.into_inner());
        let Some(answer) = sim.run(&["quota", "should-run"]) else {
            continue;
        };
        if answer["should_run"] != true {
            let retry = answer["retry_after_s"].as_u64().unwrap_or(RETRY_MAX_S);
            pause = retry.clamp(1, RETRY_MAX_S) * 1000 + sim.rng.below(800);
            continue;
        }
        if let Turn::Crashed = sim.work(crash_after_claim) {
            return;
        }
        let tokens = (500 + sim.rng.below(5000)).to_string();
        sim.run(&["quota", "spend-slot", "--tokens", &tokens]);
    }
}

/// The running demo agents; dropping them stops them and waits for them.
#[derive(Debug)]
pub struct Agents {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Agents {
    /// Starts three agents on the store; the third dies holding a lease.
    pub fn start(store: &FileStore) -> Agents {
        let stop = Arc::new(AtomicBool::new(false));
        let turns = Arc::new(Mutex::new(()));
        let mut handles = Vec::new();
        let Ok(exe) = std::env::current_exe() else {
            return Agents { stop, handles };
        };
        for (i, name) in ["agent-a", "agent-b", "agent-c"].iter().enumerate() {
            let (e, r, n, st, tu) = (
                exe.clone(),
                store.root().to_path_buf(),
                name.to_string(),
                stop.clone(),
                turns.clone(),
            );
            if let Ok(h) = std::thread::Builder::new()
                .name(format!("demo-{name}"))
                .spawn(move || agent_loop(e, r, n, st, tu, i == 2))
            {
                handles.push(h);
            }
        }
        Agents { stop, handles }
    }
}

impl Drop for Agents {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
