//! Checks shared by the crash, commit-protocol, hostile-file and full-disk tests: running the
//! binary with a timeout, the state files of `.loopx/` as bytes, and the strongest invariant of
//! journal-first commits: every state file on disk is exactly what the last journal commit line
//! naming it says.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The binary under test. `LOOPX_TEST_BIN` overrides it (useful when several worktrees share
/// one target directory and `debug/loopx` may be another branch's build).
pub fn bin() -> PathBuf {
    std::env::var_os("LOOPX_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_loopx")))
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct Tmp(pub PathBuf);

impl Tmp {
    pub fn new(tag: &str) -> Tmp {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("loopx-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        Tmp(p.canonicalize().expect("canonical temp dir"))
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A loopx command on the project `root`, with the loopx environment cleared.
pub fn cmd(root: &Path, key: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.arg("--dir")
        .arg(root)
        .args(args)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", root)
        .env("LOOPX_LOCK_TIMEOUT", "30")
        .env("LOOPX_OWNER_KEY", key)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// What a finished run gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The one JSON object on stdout (Null if none).
    pub fn json(&self) -> Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or(Value::Null)
    }
}

/// Waits for a child at most `limit`; kills it and returns None if it is still running.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        if let Ok(Some(s)) = child.try_wait() {
            return Some(s);
        }
        if start.elapsed() >= limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Runs a command to the end within `limit` (panics naming it if it hangs), and checks it did
/// not panic.
#[track_caller]
pub fn run_limited(mut c: Command, limit: Duration) -> Run {
    let what = format!("{c:?}");
    let mut child = c.spawn().expect("spawn loopx");
    // Read the pipes on threads so a chatty child cannot block on a full pipe.
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let t1 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut so, &mut s);
        s
    });
    let t2 = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut se, &mut s);
        s
    });
    let status = wait_timeout(&mut child, limit);
    let stdout = t1.join().unwrap_or_default();
    let stderr = t2.join().unwrap_or_default();
    let Some(status) = status else {
        panic!("hung for more than {limit:?} (killed): {what}\nstdout: {stdout}\nstderr: {stderr}");
    };
    let r = Run {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
    };
    assert!(
        r.code != 101 && !r.stderr.contains("panicked"),
        "loopx panicked: {what}\n{r:?}"
    );
    assert_ne!(r.code, -1, "loopx died of a signal: {what}\n{r:?}");
    r
}

/// Runs with a 20 s limit.
#[track_caller]
pub fn run(root: &Path, key: &Path, args: &[&str]) -> Run {
    run_limited(cmd(root, key, args), Duration::from_secs(20))
}

/// Runs with `--json`, asserting exit 0.
#[track_caller]
pub fn ok(root: &Path, key: &Path, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    let r = run(root, key, &a);
    assert_eq!(r.code, 0, "loopx {args:?} failed: {r:?}");
    r.json()
}

/// SHA-256 hex, as the journal writes it.
pub fn sha(bytes: &[u8]) -> String {
    loopx::store::journal::sha256_hex(bytes)
}

/// True for a name loopx writes as a temp or staged file.
pub fn is_temp(name: &str) -> bool {
    loopx::store::atomic::is_temp_name(name)
}

/// Every state file under `.loopx/` (not the lock, the cache, STATE.md, history or temp
/// files), by path relative to `.loopx/`, with its bytes.
pub fn state_files(lx: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for sub in ["", "todos", "archive", "gates", "evidence"] {
        let Ok(rd) = std::fs::read_dir(lx.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let ft = e.file_type().expect("file type");
            if ft.is_dir()
                || is_temp(&name)
                || name == "lock"
                || name == "STATE.md"
                || name == "journal.jsonl"
            {
                continue;
            }
            let rel = if sub.is_empty() {
                name
            } else {
                format!("{sub}/{name}")
            };
            out.insert(rel, std::fs::read(e.path()).unwrap_or_default());
        }
    }
    out
}

/// Every temp or staged file left under `.loopx/`.
pub fn temp_files(lx: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for sub in ["", "todos", "archive", "gates", "evidence"] {
        let Ok(rd) = std::fs::read_dir(lx.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if is_temp(&name) {
                out.push(format!("{sub}/{name}"));
            }
        }
    }
    out
}

/// The journal's complete lines, parsed (a torn tail is left out).
pub fn journal(lx: &Path) -> Vec<Value> {
    let bytes = std::fs::read(lx.join("journal.jsonl")).unwrap_or_default();
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    bytes[..end]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("journal line is JSON"))
        .collect()
}

/// One file operation of a journal commit line.
#[derive(Debug, Clone)]
pub struct Logged {
    pub seq: u64,
    pub op: String,
    pub sha: Option<String>,
    pub at: Option<u64>,
}

/// For every path a commit line names, its operations in journal order.
pub fn logged_files(journal: &[Value]) -> BTreeMap<String, Vec<Logged>> {
    let mut out: BTreeMap<String, Vec<Logged>> = BTreeMap::new();
    for ev in journal {
        let Some(files) = ev["files"].as_array() else {
            continue;
        };
        for f in files {
            out.entry(f["path"].as_str().expect("path").to_string())
                .or_default()
                .push(Logged {
                    seq: ev["seq"].as_u64().expect("seq"),
                    op: f["op"].as_str().expect("op").to_string(),
                    sha: f["sha256"].as_str().map(str::to_string),
                    at: f["at"].as_u64(),
                });
        }
    }
    out
}

/// The strongest check of journal-first commits: every state file on disk is exactly what the
/// journal's commit lines say (a put: the hash of the last put; a log: every append at its
/// offset with its hash, and nothing after), and every file the journal last put or appended
/// to exists. Returns every difference.
pub fn files_match_journal(lx: &Path) -> Vec<String> {
    let on_disk = state_files(lx);
    let logged = logged_files(&journal(lx));
    let mut bad = Vec::new();
    for (path, bytes) in &on_disk {
        if path == ".gitignore" && !logged.contains_key(path) {
            continue; // a person's own .gitignore, kept by start-goal
        }
        let Some(ops) = logged.get(path) else {
            bad.push(format!(
                "{path}: on disk, but no journal commit line names it"
            ));
            continue;
        };
        // From the last put or remove on.
        let from = ops.iter().rposition(|o| o.op != "append");
        let last = ops.last().expect("one op");
        match from.map(|i| &ops[i]) {
            Some(o) if o.op == "remove" && last.op == "remove" => bad.push(format!(
                "{path}: on disk, but journal line {} removed it",
                o.seq
            )),
            Some(o) if o.op == "put" && from == Some(ops.len() - 1) => {
                if o.sha.as_deref() != Some(&sha(bytes)) {
                    bad.push(format!(
                        "{path}: its content is not what journal line {} put there",
                        o.seq
                    ));
                }
            }
            _ => {
                // A log: appends since the last put or remove, each at its offset.
                let start = from.map_or(0, |i| i + 1);
                let apps = &ops[start..];
                let base = from.map_or(0, |i| {
                    if ops[i].op == "put" {
                        // A put then appends: the put's bytes come first.
                        apps.first().and_then(|a| a.at).unwrap_or(0) as usize
                    } else {
                        0
                    }
                });
                let mut pos = base;
                for (k, a) in apps.iter().enumerate() {
                    let at = a.at.unwrap_or(0) as usize;
                    if at != pos {
                        bad.push(format!(
                            "{path}: journal line {} appends at {at}, but the bytes before end at {pos}",
                            a.seq
                        ));
                        break;
                    }
                    let end = apps
                        .get(k + 1)
                        .and_then(|n| n.at)
                        .map_or(bytes.len(), |n| n as usize);
                    if end < at || end > bytes.len() {
                        bad.push(format!(
                            "{path}: is {} bytes, shorter than journal line {} says",
                            bytes.len(),
                            a.seq
                        ));
                        break;
                    }
                    if a.sha.as_deref() != Some(&sha(&bytes[at..end])) {
                        bad.push(format!(
                            "{path}: the bytes {at}..{end} are not what journal line {} appended",
                            a.seq
                        ));
                        break;
                    }
                    pos = end;
                }
            }
        }
    }
    for (path, ops) in &logged {
        let last = ops.last().expect("one op");
        if last.op != "remove" && !on_disk.contains_key(path) {
            bad.push(format!(
                "{path}: journal line {} {}s it, but it is not on disk",
                last.seq, last.op
            ));
        }
    }
    bad
}

/// A tiny xorshift64* generator: deterministic, no crates.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
