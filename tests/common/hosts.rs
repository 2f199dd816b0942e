//! The real agent hosts, Claude Code and Codex CLI, run headless in a project against the tests'
//! scripted model on 127.0.0.1 (`tests/hosts/model.py`). `.ci/run` installs pinned versions
//! from npm and names their directory in `LOOPX_HOSTS_BIN`; without it the host tests skip.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

/// The variable that names the directory holding the `claude` and `codex` executables.
pub const VAR: &str = "LOOPX_HOSTS_BIN";

/// The longest a host may take for one scripted session (a run takes a few seconds).
const HOST_LIMIT: Duration = Duration::from_secs(90);

/// A proxy nobody listens on: whatever a host would send beyond 127.0.0.1 goes nowhere.
const DEAD_PROXY: &str = "http://127.0.0.1:9";

/// The directory of the host CLIs, or None (after saying why the test skips).
pub fn clis(test: &str) -> Option<PathBuf> {
    match std::env::var_os(VAR) {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            for cli in ["claude", "codex"] {
                assert!(
                    dir.join(cli).exists(),
                    "{VAR}={} has no `{cli}`: .ci/run installs it",
                    dir.display()
                );
            }
            Some(dir)
        }
        None => {
            eprintln!(
                "{test}: skipped: {VAR} is unset (.ci/run installs Claude Code and Codex CLI \
                 from npm and sets it)"
            );
            None
        }
    }
}

/// The scripted model: a Python process serving one script on a port of its own; stopped on
/// drop.
pub struct Model {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// Where it logs the requests and the tools it was sent.
    pub log: PathBuf,
}

impl Model {
    /// Starts the model on `script` (the steps of `tests/hosts/model.py`), logging into `log`.
    pub fn start(script: &Value, log: &Path) -> Model {
        std::fs::create_dir_all(log).expect("the model's log dir");
        let file = log.join("script.json");
        std::fs::write(&file, script.to_string()).expect("write the script");
        let py = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/hosts/model.py");
        let mut child = Command::new("python3")
            .arg(py)
            .arg(&file)
            .arg(log)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3 tests/hosts/model.py");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its stdout"))
            .read_line(&mut line)
            .expect("read the model's port");
        let port = line.trim().parse().unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("the model printed no port: {line:?}")
        });
        Model {
            child,
            port,
            log: log.to_path_buf(),
        }
    }

    /// The tools the host sent the model, by the name the host gave them, with their schemas.
    pub fn tools(&self) -> Map<String, Value> {
        let text = std::fs::read_to_string(self.log.join("tools.json"))
            .expect("the host sent the model no tools");
        serde_json::from_str(&text).expect("tools.json is JSON")
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A host command with nothing from the caller's environment but PATH: its home is `home`,
/// loopx's variables are unset, and any traffic beyond 127.0.0.1 goes to a dead proxy.
fn host_cmd(cli: PathBuf, project: &Path, home: &Path) -> Command {
    let mut c = Command::new(cli);
    c.current_dir(project)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("HTTPS_PROXY", DEAD_PROXY)
        .env("HTTP_PROXY", DEAD_PROXY)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null());
    c
}

/// `claude -p PROMPT` in `project` (set up with `loopx setup claude`), on the model, with
/// `home` as its home: the project is trusted there, as a user's first interactive run does.
pub fn claude(dir: &Path, project: &Path, home: &Path, model: &Model, prompt: &str) -> Output {
    trust_claude(home, project);
    let mut c = host_cmd(dir.join("claude"), project, home);
    c.args(["-p", prompt, "--output-format", "stream-json", "--verbose"])
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", model.port),
        )
        .env("ANTHROPIC_API_KEY", "scripted")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    run(c, "claude -p")
}

/// `claude mcp list` in `project`: how Claude Code sees its servers.
pub fn claude_mcp_list(dir: &Path, project: &Path, home: &Path) -> String {
    trust_claude(home, project);
    let mut c = host_cmd(dir.join("claude"), project, home);
    c.args(["mcp", "list"]);
    let out = run(c, "claude mcp list");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Marks `project` trusted in `home/.claude.json` (the first run's trust dialog): Claude Code
/// applies a project's permissions and enabled servers only in a trusted folder.
fn trust_claude(home: &Path, project: &Path) {
    let mut projects = Map::new();
    projects.insert(
        project.display().to_string(),
        serde_json::json!({"hasTrustDialogAccepted": true}),
    );
    let state = serde_json::json!({"projects": projects});
    std::fs::write(home.join(".claude.json"), state.to_string()).expect("write .claude.json");
}

/// `codex exec PROMPT` in `project` (a git repository set up with `loopx setup codex`), on the
/// model: `$CODEX_HOME/config.toml` names the model as the provider and trusts the project.
pub fn codex(dir: &Path, project: &Path, home: &Path, model: &Model, prompt: &str) -> Output {
    let codex_home = home.join("codex");
    std::fs::create_dir_all(&codex_home).expect("CODEX_HOME");
    let config = format!(
        "model = \"scripted\"\nmodel_provider = \"scripted\"\n\n\
         [model_providers.scripted]\nname = \"scripted\"\n\
         base_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n\
         env_key = \"SCRIPTED_API_KEY\"\n\n[projects.{}]\ntrust_level = \"trusted\"\n",
        model.port,
        Value::from(project.display().to_string())
    );
    std::fs::write(codex_home.join("config.toml"), config).expect("write config.toml");
    let mut c = host_cmd(dir.join("codex"), project, home);
    c.args(["exec", prompt])
        .env("CODEX_HOME", &codex_home)
        .env("SCRIPTED_API_KEY", "scripted");
    run(c, "codex exec")
}

/// Runs `c` to its end, killed after the limit; asserts it succeeded.
fn run(mut c: Command, what: &str) -> Output {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    let pid = child.id();
    let start = Instant::now();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let mut killed = false;
    while !waiter.is_finished() {
        if start.elapsed() > HOST_LIMIT && !killed {
            killed = Command::new("kill").arg(pid.to_string()).status().is_ok();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = waiter
        .join()
        .expect("the waiter")
        .expect("wait for the host");
    assert!(
        out.status.success(),
        "{what} failed ({}) after {:?}:\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        start.elapsed(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}
