//! Helpers for the integration tests: a fresh project per test, running the real binary, and
//! checking the contract's JSON shape and exit codes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub mod backend;
pub mod frames;
pub mod hosts;
pub mod pg;
pub mod tmux;
pub mod turns;
pub mod venv;
pub mod web;
pub mod worktrees;

/// Journal events for board tests: rows of (minutes from now, actor, action, target, data),
/// timed by `at`, numbered from 1.
pub fn journal_events(
    rows: &[(i64, &str, &str, &str, Value)],
    at: impl Fn(i64) -> String,
) -> Vec<loopx::kernel::Event> {
    rows.iter()
        .enumerate()
        .map(|(i, (m, actor, action, target, data))| {
            serde_json::from_value(serde_json::json!({
                "seq": i + 1, "at": at(*m), "actor": actor, "action": action, "target": target,
                "data": data, "prev": "0".repeat(64)
            }))
            .expect("a journal event")
        })
        .collect()
}

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_loopx")
}

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A fresh, empty directory under the system temp dir; removed on drop.
pub struct TempDir {
    pub path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!(
            "loopx-test-{tag}-{}-{n}-{nanos:08x}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).expect("create temp dir");
        // Canonical, so that paths printed by loopx compare equal.
        let path = path.canonicalize().expect("canonical temp dir");
        TempDir { path }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// What a run of the binary gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The exit code the contract gives each error code.
pub fn exit_of(code: &str) -> i32 {
    match code {
        "io" | "internal" => 1,
        "usage" => 2,
        "nothing_ready" | "not_ready" => 3,
        "lease_conflict" | "stale_fence" | "already_decided" | "goal_exists" | "key_exists"
        | "already_used" | "changed" => 4,
        "not_initialized" | "not_found" | "ambiguous_id" => 5,
        "invalid_state" | "schema_too_new" => 6,
        "denied" => 7,
        "busy" => 8,
        "check_failed" => 9,
        other => panic!("`{other}` is not an error code of the contract"),
    }
}

/// Runs a prepared command; asserts it did not panic (exit 101) and was not killed.
pub fn run_cmd(cmd: &mut Command) -> Run {
    let out = cmd.stdin(Stdio::null()).output().expect("run loopx");
    let code = out.status.code().unwrap_or(-1);
    let r = Run {
        code,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_ne!(code, 101, "loopx panicked: {cmd:?}\n{r:?}");
    assert_ne!(code, -1, "loopx was killed: {cmd:?}\n{r:?}");
    assert!(
        !r.stderr.contains("panicked at"),
        "loopx panicked: {cmd:?}\n{r:?}"
    );
    r
}

/// Parses `--json` output: exactly one JSON object on stdout, with `ok` and the contract's shape.
pub fn parse_json(r: &Run, what: &str) -> Value {
    let text = r.stdout.trim_end_matches('\n');
    assert!(!text.is_empty(), "{what}: no JSON on stdout: {r:?}");
    assert!(
        !text.contains('\n'),
        "{what}: more than one line on stdout: {r:?}"
    );
    let v: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {r:?}"));
    assert!(v.is_object(), "{what}: not a JSON object: {v}");
    let ok = v["ok"]
        .as_bool()
        .unwrap_or_else(|| panic!("{what}: no boolean `ok`: {v}"));
    if ok {
        assert!(v.get("error").is_none(), "{what}: ok with an error: {v}");
    }
    if let Some(err) = v.get("error") {
        assert!(!ok, "{what}: an error with ok true: {v}");
        let code = err["code"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: error without a code: {v}"));
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: error without a message: {v}"
        );
        assert!(
            err.get("hint").is_some(),
            "{what}: error without a hint key: {v}"
        );
        assert_eq!(
            r.code,
            exit_of(code),
            "{what}: exit code does not match error code {code}: {r:?}"
        );
        assert!(
            !r.stderr.is_empty(),
            "{what}: an error with nothing for people on stderr: {r:?}"
        );
    }
    v
}

/// Asserts a JSON answer is the failure `code`.
#[track_caller]
pub fn assert_err(v: &Value, code: &str) {
    assert_eq!(v["ok"], Value::Bool(false), "expected error {code}: {v}");
    assert_eq!(
        v["error"]["code"].as_str(),
        Some(code),
        "expected error {code}: {v}"
    );
}

/// A project directory (with or without `.loopx/` yet), and a home of its own for the owner key.
pub struct Project {
    pub tmp: TempDir,
    pub home: TempDir,
    /// The owner's secret key file (`LOOPX_OWNER_KEY`), outside the project.
    pub key: PathBuf,
}

impl Project {
    /// An empty directory: no `.loopx/`, no owner key yet.
    pub fn empty(tag: &str) -> Project {
        let home = TempDir::new(&format!("{tag}-home"));
        let key = home.path.join("owner.key");
        Project {
            tmp: TempDir::new(tag),
            home,
            key,
        }
    }

    /// A project with a goal, and an owner key made with `owner init` (every command then runs
    /// where the owner's key is; `no_key` runs without it).
    pub fn new(tag: &str) -> Project {
        let p = Project::empty(tag);
        let v = p.ok(&["start-goal", "--goal-text", "Test objective"]);
        assert_eq!(v["goal"]["status"], "active");
        p.ok(&["owner", "init"]);
        assert!(p.key.is_file(), "owner init made no key");
        p
    }

    /// The project root.
    pub fn root(&self) -> &Path {
        &self.tmp.path
    }

    /// A path inside `.loopx/`.
    pub fn lx(&self, rel: &str) -> PathBuf {
        self.tmp.path.join(".loopx").join(rel)
    }

    /// A command in the project root, with the loopx environment cleared.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(bin());
        c.args(args)
            .current_dir(self.root())
            .env_remove("LOOPX_DIR")
            .env_remove("LOOPX_AGENT")
            .env_remove("LOOPX_LOCK_TIMEOUT")
            .env_remove("LOOPX_STORE")
            .env_remove("XDG_CONFIG_HOME")
            .env("HOME", &self.home.path)
            .env("LOOPX_OWNER_KEY", &self.key);
        c
    }

    /// Runs with `--json` where the owner's key is not (an agent's machine).
    pub fn no_key(&self, args: &[&str]) -> (i32, Value) {
        let mut a = args.to_vec();
        a.push("--json");
        let mut c = self.cmd(&a);
        c.env("LOOPX_OWNER_KEY", self.home.path.join("no-such-key"));
        let r = run_cmd(&mut c);
        let v = parse_json(&r, &args.join(" "));
        (r.code, v)
    }

    /// Runs loopx with these arguments (text mode).
    pub fn run(&self, args: &[&str]) -> Run {
        run_cmd(&mut self.cmd(args))
    }

    /// Runs loopx as `agent`.
    pub fn run_as(&self, agent: &str, args: &[&str]) -> Run {
        let mut a = vec!["--agent", agent];
        a.extend_from_slice(args);
        self.run(&a)
    }

    /// Runs with `--json`; returns the exit code and the one JSON object.
    pub fn json(&self, args: &[&str]) -> (i32, Value) {
        let mut a = args.to_vec();
        a.push("--json");
        let r = self.run(&a);
        let v = parse_json(&r, &args.join(" "));
        (r.code, v)
    }

    /// Runs with `--json` as `agent`.
    pub fn json_as(&self, agent: &str, args: &[&str]) -> (i32, Value) {
        let mut a = vec!["--agent", agent];
        a.extend_from_slice(args);
        self.json(&a)
    }

    /// Runs with `--json`, asserting exit 0 and ok.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> Value {
        let (code, v) = self.json(args);
        assert_eq!(code, 0, "loopx {args:?} failed: {v}");
        assert_eq!(v["ok"], true, "loopx {args:?}: {v}");
        v
    }

    /// Like `ok`, as `agent`.
    #[track_caller]
    pub fn ok_as(&self, agent: &str, args: &[&str]) -> Value {
        let (code, v) = self.json_as(agent, args);
        assert_eq!(code, 0, "loopx --agent {agent} {args:?} failed: {v}");
        assert_eq!(v["ok"], true, "loopx {args:?}: {v}");
        v
    }

    /// Runs with `--json`, asserting the failure `code` and its exit code.
    #[track_caller]
    pub fn fails(&self, args: &[&str], code: &str) -> Value {
        let (exit, v) = self.json(args);
        assert_err(&v, code);
        assert_eq!(exit, exit_of(code), "loopx {args:?}: {v}");
        v
    }

    /// Like `fails`, as `agent`.
    #[track_caller]
    pub fn fails_as(&self, agent: &str, args: &[&str], code: &str) -> Value {
        let mut a = vec!["--agent", agent];
        a.extend_from_slice(args);
        self.fails(&a, code)
    }

    /// Adds a todo; returns its id.
    #[track_caller]
    pub fn add(&self, title: &str, extra: &[&str]) -> String {
        let mut a = vec!["todo", "add", title];
        a.extend_from_slice(extra);
        let v = self.ok(&a);
        let id = v["todo"]["id"].as_str().expect("todo id").to_string();
        assert!(is_id(&id, "t-"), "bad todo id {id}");
        id
    }

    /// Opens a gate; returns its id.
    #[track_caller]
    pub fn gate(&self, question: &str, extra: &[&str]) -> String {
        let mut a = vec!["gate", "open", question];
        a.extend_from_slice(extra);
        let v = self.ok(&a);
        let id = v["gate"]["id"].as_str().expect("gate id").to_string();
        assert!(is_id(&id, "g-"), "bad gate id {id}");
        id
    }

    /// The todo as `todo show --json` gives it.
    #[track_caller]
    pub fn show(&self, id: &str) -> Value {
        self.ok(&["todo", "show", id])["todo"].clone()
    }

    /// Writes a hand-made todo file `todos/ID.toml` (open, agent, P2, old enough).
    pub fn write_todo(&self, id: &str, extra: &str) {
        let text = format!(
            "schema_version = 1\nid = \"{id}\"\ntitle = \"hand-made {id}\"\nrole = \"agent\"\npriority = \"P2\"\n\
             status = \"open\"\ncreated_by = \"test\"\ncreated_at = \"2020-01-01T00:00:00.000Z\"\n\
             updated_at = \"2020-01-01T00:00:00.000Z\"\nfence = 0\n{extra}"
        );
        std::fs::write(self.lx(&format!("todos/{id}.toml")), text).expect("write todo");
    }

    /// Every file under `.loopx/` but `cache/`, with its bytes.
    pub fn files(&self) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        collect(
            &self.root().join(".loopx"),
            &self.root().join(".loopx"),
            &mut out,
        );
        out
    }

    /// The lines of the journal.
    pub fn journal(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.lx("journal.jsonl")).expect("read journal");
        text.lines()
            .map(|l| serde_json::from_str(l).expect("journal line is JSON"))
            .collect()
    }

    /// The evidence lines of a todo.
    pub fn evidence(&self, id: &str) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.lx(&format!("evidence/{id}.jsonl"))).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).expect("evidence line is JSON"))
            .collect()
    }
}

fn collect(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            // `cache/` is not state: any load may rewrite it (docs/state-format.md).
            if p != base.join("cache") {
                collect(base, &p, out);
            }
        } else {
            let rel = p.strip_prefix(base).unwrap_or(&p).display().to_string();
            out.insert(rel, std::fs::read(&p).unwrap_or_default());
        }
    }
}

/// True for `t-` / `g-` and six lowercase base32 characters.
pub fn is_id(s: &str, prefix: &str) -> bool {
    s.len() == 8
        && s.starts_with(prefix)
        && s[2..]
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b))
}

/// Asserts two file sets are the same, naming what changed.
#[track_caller]
pub fn assert_same_files(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    what: &str,
) {
    let names_before: Vec<&String> = before.keys().collect();
    let names_after: Vec<&String> = after.keys().collect();
    assert_eq!(
        names_before, names_after,
        "{what}: files were added or removed"
    );
    for (k, v) in before {
        assert!(after[k] == *v, "{what}: {k} changed");
    }
}

/// Asks loopx for completions as the bash script does: `COMPLETE=bash loopx -- WORDS...`.
pub fn complete_bash(p: &Project, words: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = p.cmd(&[]);
    c.env("COMPLETE", "bash")
        .env("_CLAP_COMPLETE_INDEX", (words.len() - 1).to_string())
        .env("_CLAP_IFS", "\n")
        .arg("--")
        .args(words);
    for (k, v) in env {
        c.env(k, v);
    }
    run_cmd(&mut c)
}

/// Waits (at most 90 s) until `f` gives a value: for what a detached process leaves, so a test
/// fails only when the thing never comes, never on how fast it came.
#[track_caller]
pub fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "waited too long for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The JSON object a process wrote to `path`, once it is all there.
pub fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Runs git in `dir` with a throwaway identity, asserting it succeeds.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
