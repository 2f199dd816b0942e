//! `loopx demo`: a throwaway project with simulated agents (child `loopx` processes) and the board on it.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::kernel::id::Kind;
use crate::kernel::ops::{self, NewTodo};
use crate::kernel::{
    Config, Dur, Error, Extra, Goal, GoalStatus, LeasePolicy, Priority, QuotaPolicy, Result, Role,
    SCHEMA_VERSION, Ts,
};
use crate::store::{FileStore, Store, StoreExt};

/// A tiny xorshift generator: the demo needs variety, not quality.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded from the OS.
    pub fn new() -> Rng {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        Rng(u64::from_le_bytes(b) | 1)
    }

    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

impl Default for Rng {
    fn default() -> Self {
        Rng::new()
    }
}

const TODOS: &[(&str, Priority)] = &[
    ("Parse the forecast API response", Priority::P1),
    ("Cache responses on disk for 10 minutes", Priority::P2),
    ("Add --units metric|imperial", Priority::P2),
    ("Render a 5-day table", Priority::P1),
    ("Handle API rate limits with backoff", Priority::P0),
    ("Write the README quick start", Priority::P3),
    ("Package a static binary", Priority::P2),
    ("Add shell completions", Priority::P3),
    ("Fuzz the response parser", Priority::P2),
    ("Set up CI on three platforms", Priority::P1),
    ("Colorize temperatures", Priority::P4),
    ("Record a demo GIF", Priority::P4),
];

const NOTES: &[&str] = &[
    "unit tests pass (42/42)",
    "ran cargo clippy: clean",
    "benchmarked parse: 1.2 ms per response",
    "wrote 3 new tests for edge cases",
    "refactored the client behind a trait",
    "checked against the live API: ok",
];

const QUESTIONS: &[(&str, &[&str])] = &[
    (
        "Use SQLite or plain files for the cache?",
        &["sqlite", "files"],
    ),
    ("May I add the reqwest dependency (+2.1 MB)?", &[]),
    ("Publish 0.1.0 to crates.io now?", &["yes", "wait for CI"]),
    ("Drop Windows support for v1?", &[]),
];

/// Creates the demo project in `root` with a goal, todos, a pending gate and a past hour of spend.
pub fn create(root: &Path, now: Ts) -> Result<FileStore> {
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, &e))?;
    let store = FileStore::at(root);
    let mut agents = std::collections::BTreeMap::new();
    for a in ["agent-a", "agent-b", "agent-c"] {
        let mut t = crate::kernel::model::AgentPolicy::default();
        t.extra
            .insert("runtime".into(), toml::Value::String("simulated".into()));
        agents.insert(a.to_string(), t);
    }
    let config = Config {
        schema_version: SCHEMA_VERSION,
        goal: Goal {
            id: "demo".into(),
            objective: "Ship v1 of `wx`, a weather CLI: fast, cached, documented".into(),
            success_criteria: vec![
                "wx today prints a forecast in under 300 ms".into(),
                "works offline from cache".into(),
                "README quick start".into(),
            ],
            status: GoalStatus::Active,
            created_at: now.sub(Dur::from_hours(3)),
            updated_at: now.sub(Dur::from_hours(3)),
            reason: None,
            extra: Extra::new(),
        },
        quota: QuotaPolicy {
            slots: 60,
            window: Dur::from_hours(1),
            ..QuotaPolicy::default()
        },
        lease: LeasePolicy {
            ttl: Dur::from_mins(5),
            ..LeasePolicy::default()
        },
        agents,
        hooks: Default::default(),
        extra: Extra::new(),
    };
    store.create(&config, "demo")?;
    let mut ids: Vec<String> = Vec::new();
    for (i, (title, p)) in TODOS.iter().enumerate() {
        let id = store.fresh_id(Kind::Todo)?;
        let depends_on: Vec<String> = if i == 6 {
            vec![ids[3].clone()]
        } else {
            Vec::new()
        };
        store.mutate(|s| {
            ops::add_todo(
                s,
                "demo",
                now.sub(Dur::from_mins(120 - i as i64)),
                NewTodo {
                    priority: *p,
                    depends_on,
                    ..NewTodo::new(id.clone(), title.to_string())
                },
            )
        })?;
        ids.push(id);
    }
    let uid = store.fresh_id(Kind::Todo)?;
    store.mutate(|s| {
        ops::add_todo(
            s,
            "demo",
            now.sub(Dur::from_mins(100)),
            NewTodo {
                role: Role::User,
                priority: Priority::P3,
                ..NewTodo::new(uid.clone(), "Owner: pick the app icon")
            },
        )
    })?;
    let gid = store.fresh_id(Kind::Gate)?;
    let blocks = vec![ids[1].clone()];
    store.mutate(|s| {
        ops::open_gate(
            s,
            "agent-b",
            now.sub(Dur::from_mins(7)),
            gid.clone(),
            QUESTIONS[0].0.into(),
            blocks,
            false,
            QUESTIONS[0].1.iter().map(|o| o.to_string()).collect(),
        )
    })?;
    let mut rng = Rng::new();
    for k in 0..30 {
        let at = now.sub(Dur::from_secs(3500 - k * 110 - rng.below(60) as i64));
        let agent = ["agent-a", "agent-b", "agent-c"][k as usize % 3];
        store.mutate(|s| ops::spend(s, agent, at, 1, None, Some(1000 + rng.below(9000)), None))?;
    }
    Ok(store)
}

/// Runs `loopx` as an agent on the demo project; returns the parsed JSON answer.
fn loopx(exe: &Path, root: &Path, agent: &str, args: &[&str]) -> Option<serde_json::Value> {
    let out = std::process::Command::new(exe)
        .arg("--dir")
        .arg(root)
        .args(["--agent", agent, "--json"])
        .args(args)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// One simulated agent, driving the real `loopx` binary as an agent would: claims, works, writes
/// evidence, asks questions, spends quota, finishes. With `crash_after_claim` it dies holding a lease.
pub fn agent_loop(
    exe: PathBuf,
    root: PathBuf,
    name: String,
    stop: Arc<AtomicBool>,
    crash_after_claim: bool,
) {
    let mut rng = Rng::new();
    let mut held: Option<(String, u64)> = None;
    let mut asked = 0usize;
    let run = |args: &[&str]| loopx(&exe, &root, &name, args);
    while !stop.load(Ordering::SeqCst) {
        let pause = 1200 + rng.below(2500);
        for _ in 0..(pause / 100) {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let tokens = (500 + rng.below(5000)).to_string();
        run(&["quota", "spend-slot", "--tokens", &tokens]);
        match held.clone() {
            None => {
                let ttl = if crash_after_claim { "25s" } else { "2m" };
                let ans = run(&["todo", "claim", "--ttl", ttl]);
                let todo = ans
                    .as_ref()
                    .filter(|a| a["ok"] == true)
                    .map(|a| a["todo"].clone());
                match todo {
                    Some(t) => {
                        let id = t["id"].as_str().unwrap_or_default().to_string();
                        let fence = t["lease"]["fence"]
                            .as_u64()
                            .or(t["fence"].as_u64())
                            .unwrap_or(0);
                        held = Some((id, fence));
                        if crash_after_claim {
                            return;
                        }
                    }
                    None if rng.below(3) == 0 => {
                        let title = format!(
                            "Follow-up: {}",
                            NOTES[rng.below(NOTES.len() as u64) as usize]
                        );
                        run(&["todo", "add", &title, "--priority", "P3"]);
                    }
                    None => {}
                }
            }
            Some((id, fence)) => {
                let roll = rng.below(100);
                let note = NOTES[rng.below(NOTES.len() as u64) as usize];
                let f = fence.to_string();
                let mut args = vec![
                    "todo",
                    "update",
                    id.as_str(),
                    "--fence",
                    &f,
                    "--evidence",
                    note,
                ];
                if roll < 30 {
                    args.extend(["--status", "done", "--reason", "done and tested"]);
                }
                let ok = run(&args).is_some_and(|a| a["ok"] == true);
                if !ok || roll < 30 {
                    // Finished, or released, reassigned or expired under us: claim again.
                    held = None;
                    continue;
                }
                run(&["todo", "renew", id.as_str(), "--ttl", "2m"]);
                if roll > 90 && asked < 2 {
                    asked += 1;
                    let (q, opts) = QUESTIONS[1 + rng.below(QUESTIONS.len() as u64 - 1) as usize];
                    let mut args = vec!["gate", "open", q];
                    for o in opts {
                        args.extend(["--option", o]);
                    }
                    run(&args);
                }
            }
        }
    }
}

/// The running demo agents.
#[derive(Debug)]
pub struct Agents {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

impl Agents {
    /// Starts three agents on the store; the third dies holding a lease.
    pub fn start(store: &FileStore) -> Agents {
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::new();
        let Ok(exe) = std::env::current_exe() else {
            return Agents { stop, handles };
        };
        for (i, name) in ["agent-a", "agent-b", "agent-c"].iter().enumerate() {
            let (e, r, n, st) = (
                exe.clone(),
                store.root().to_path_buf(),
                name.to_string(),
                stop.clone(),
            );
            if let Ok(h) = std::thread::Builder::new()
                .name(format!("demo-{name}"))
                .spawn(move || agent_loop(e, r, n, st, i == 2))
            {
                handles.push(h);
            }
        }
        Agents { stop, handles }
    }

    /// Stops the agents and waits for them.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// A fresh directory for a demo under the temp directory.
pub fn temp_root() -> PathBuf {
    let mut rng = Rng::new();
    std::env::temp_dir().join(format!(
        "loopx-demo-{}-{:06x}",
        std::process::id(),
        rng.below(1 << 24)
    ))
}

/// Runs the demo: the board on a terminal; elsewhere a few seconds of agents and a summary.
pub fn run(keep: bool, theme: Option<String>) -> Result<String> {
    let root = temp_root();
    let store = create(&root, Ts::now())?;
    // The demo's own owner key, beside (not inside) its .loopx/, so the operator can decide gates.
    let key_path = root.join("owner.key");
    // SAFETY: set before the demo starts any thread; this process owns its environment.
    unsafe { std::env::set_var("LOOPX_OWNER_KEY", &key_path) };
    let key = crate::store::owner::create(&key_path)?;
    store.install_owner(&key, None)?;
    let agents = Agents::start(&store);
    let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let result = if interactive {
        crate::board::run(
            store.clone(),
            crate::board::Options {
                readonly: false,
                poll: false,
                theme,
                seal_every: None,
            },
        )
    } else {
        std::thread::sleep(Duration::from_secs(4));
        Ok(())
    };
    agents.stop();
    let summary = match store.load() {
        Ok(s) => {
            let claimed = s.todos.values().filter(|t| t.lease.is_some()).count();
            let pending = s
                .gates
                .values()
                .filter(|g| g.effective_status() == crate::kernel::GateStatus::Pending)
                .count();
            format!(
                "demo: {} open todos, {claimed} claimed, {pending} gates pending",
                s.todos.len()
            )
        }
        Err(e) => format!("demo: {}", e.message),
    };
    let place = if keep {
        format!(
            "the demo project is kept in {} (open it with `loopx board --dir {}`)",
            root.display(),
            root.display()
        )
    } else {
        let _ = std::fs::remove_dir_all(&root);
        "the demo project was removed (keep it with `loopx demo --keep`)".to_string()
    };
    result.map(|_| format!("{summary}\n{place}"))
}
