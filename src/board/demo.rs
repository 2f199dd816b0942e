//! `loopx demo`: a throwaway project with simulated agents (child `loopx` processes) and the board
//! on it, removed with its owner key on every way out.

mod agents;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::kernel::id::Kind;
use crate::kernel::ops::{self, NewTodo};
use crate::kernel::{
    Config, Dur, Error, Extra, Goal, GoalStatus, LeasePolicy, Priority, QuotaPolicy, Result, Role,
    SCHEMA_VERSION, Ts,
};
use crate::store::{FileStore, Store, StoreExt};
use agents::{Agents, QUESTIONS};

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

/// Creates the demo project in `root` with a goal, todos, a pending gate and a past hour of spend.
pub fn create(root: &Path, now: Ts) -> Result<FileStore> {
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, &e))?;
    let store = FileStore::at(root);
    store.create(&config(now), "demo")?;
    let ids = add_todos(&store, now)?;
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
            blocks.clone(),
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

/// The demo's agent todos, the seventh depending on the fourth; their ids in order.
fn add_todos(store: &FileStore, now: Ts) -> Result<Vec<String>> {
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
                    depends_on: depends_on.clone(),
                    ..NewTodo::new(id.clone(), title.to_string())
                },
            )
        })?;
        ids.push(id);
    }
    Ok(ids)
}

/// The demo's goal, quota, lease and three simulated agents.
fn config(now: Ts) -> Config {
    let mut agents = std::collections::BTreeMap::new();
    for a in ["agent-a", "agent-b", "agent-c"] {
        let mut t = crate::kernel::model::AgentPolicy::default();
        t.extra
            .insert("runtime".into(), toml::Value::String("simulated".into()));
        agents.insert(a.to_string(), t);
    }
    Config {
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
        // The agents pace themselves by should-run: a turn every few seconds between them.
        quota: QuotaPolicy {
            slots: 120,
            window: Dur::from_hours(1),
            min_interval: Dur::from_secs(4),
            ..QuotaPolicy::default()
        },
        lease: LeasePolicy {
            ttl: Dur::from_mins(5),
            ..LeasePolicy::default()
        },
        agents,
        hooks: Default::default(),
        done: Default::default(),
        breaker: Default::default(),
        devices: Default::default(),
        extra: Extra::new(),
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

/// A file in a demo directory kept with `--keep`: no later demo sweeps it.
const KEPT_MARK: &str = ".loopx-demo-kept";

/// The process id in a demo directory's name (`loopx-demo-PID-XXXXXX`).
fn demo_pid(name: &str) -> Option<libc::pid_t> {
    let (pid, tag) = name.strip_prefix("loopx-demo-")?.split_once('-')?;
    let hex = tag.len() == 6 && tag.bytes().all(|b| b.is_ascii_hexdigit());
    let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    (hex && digits).then(|| pid.parse().ok()).flatten()
}

/// Removes what demos killed outright (SIGKILL cannot be caught) left in `tmp`: directories named
/// for a process that is gone, owned by this user, not symlinks, and not kept. How many went.
pub fn sweep_stale(tmp: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(rd) = std::fs::read_dir(tmp) else {
        return 0;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let mut gone = 0;
    for e in rd.flatten().take(10_000) {
        let Some(pid) = e.file_name().to_str().and_then(demo_pid) else {
            continue;
        };
        let path = e.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        // SAFETY: signal 0 only checks that the process exists.
        let dead = pid > 0
            && unsafe { libc::kill(pid, 0) } == -1
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if ours && dead && !path.join(KEPT_MARK).exists() && std::fs::remove_dir_all(&path).is_ok()
        {
            gone += 1;
        }
    }
    gone
}

/// Set by SIGINT, SIGTERM or SIGHUP while the demo runs outside the board (which has its own).
static STOPPED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    STOPPED.store(true, Ordering::SeqCst);
}

/// From now on SIGINT, SIGTERM and SIGHUP (a closed terminal) stop the demo instead of the
/// process, so that it cleans up. The board puts its own handlers for SIGTERM and SIGHUP, which
/// end its loop the same way.
fn catch_stop_signals() {
    // SAFETY: a zeroed sigaction with a handler that only stores to an atomic, an empty mask and
    // SA_RESTART is valid and async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_stop as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// True once a stop signal arrived (to the demo, or to the board).
fn stopped() -> bool {
    STOPPED.load(Ordering::SeqCst) || crate::board::term::terminated()
}

/// The demo's directory (its `.loopx/` and its owner key): removed when dropped, so on a return,
/// an error and a panic alike, unless the operator keeps it.
#[derive(Debug)]
struct Scratch {
    root: PathBuf,
    keep: bool,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// Runs the demo: the board on a terminal; elsewhere a few seconds of agents and a summary.
pub fn run(keep: bool, theme: Option<String>) -> Result<String> {
    catch_stop_signals();
    let scratch = Scratch {
        root: temp_root(),
        keep,
    };
    let root = scratch.root.clone();
    if let Some(tmp) = root.parent() {
        sweep_stale(tmp);
    }
    let store = create(&root, Ts::now())?;
    if keep {
        let _ = std::fs::write(root.join(KEPT_MARK), "kept with `loopx demo --keep`\n");
    }
    // The demo's own owner key, beside (not inside) its .loopx/, so the operator can decide gates.
    // The board's store is handed the key's place; the agents' store and processes never are.
    let key_path = root.join("owner.key");
    let key = crate::store::owner::create(&key_path)?;
    store.install_owner(&key, None)?;
    let owners = store.clone().with_env(crate::store::Env {
        key: crate::store::owner::KeyAt::Path(key_path.as_path().into()),
        ..crate::store::Env::default()
    });
    let agents = Agents::start(&store);
    let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    let result = if stopped() {
        Ok(())
    } else if interactive {
        crate::board::run(
            Box::new(owners),
            crate::board::Options {
                readonly: false,
                poll: false,
                theme,
                seal_every: None,
            },
        )
    } else {
        for _ in 0..40 {
            if stopped() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    };
    drop(agents);
    let summary = summary(&store);
    let place = if keep {
        format!(
            "the demo project is kept in {} (open it with `loopx board --dir {}`)",
            root.display(),
            root.display()
        )
    } else {
        "the demo project was removed (keep it with `loopx demo --keep`)".to_string()
    };
    drop(scratch);
    result.map(|_| format!("{summary}\n{place}"))
}

/// One line on where the demo ended.
fn summary(store: &FileStore) -> String {
    use crate::text::count;
    match store.load() {
        Ok(s) => {
            let claimed = s.todos.values().filter(|t| t.lease.is_some()).count();
            let pending = s
                .gates
                .values()
                .filter(|g| g.effective_status() == crate::kernel::GateStatus::Pending)
                .count();
            format!(
                "demo: {}, {claimed} claimed, {} pending",
                count(s.todos.len(), "open todo", "open todos"),
                count(pending, "gate", "gates")
            )
        }
        Err(e) => format!("demo: {}", e.message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scratch_directory_goes_on_a_panic_unless_kept() {
        for keep in [false, true] {
            let root = temp_root();
            std::fs::create_dir_all(root.join(".loopx")).expect("a scratch dir");
            std::fs::write(root.join("owner.key"), "k").expect("a key file");
            let r = root.clone();
            let unwound = std::panic::catch_unwind(move || {
                let _scratch = Scratch { root: r, keep };
                panic!("the board failed");
            });
            assert!(unwound.is_err());
            assert_eq!(root.exists(), keep, "keep {keep}");
            let _ = std::fs::remove_dir_all(&root);
        }
    }
}
