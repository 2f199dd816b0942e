//! A PostgreSQL server for the tests: the one `LOOPX_TEST_PG` names, or one throwaway server per
//! test binary (scripts/pg-throwaway), stopped when the binary ends however it ends.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The script that starts, stops, watches and sweeps throwaway servers.
pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/pg-throwaway");

/// The most databases one test binary makes (names taken by earlier runs count).
const MAX_DBS: usize = 10_000;

/// A running server the tests may use.
pub struct Server {
    /// Its superuser URL, `postgres://user@host:port/db`.
    pub url: String,
    /// The throwaway server's directory; None for the server `LOOPX_TEST_PG` names.
    pub dir: Option<PathBuf>,
    /// The throwaway server's watcher: its stdin closes when this process ends, and it then stops
    /// the server (never waited for: it outlives this process).
    _watch: Option<Child>,
}

static SERVER: OnceLock<Option<Server>> = OnceLock::new();
static NEXT_DB: AtomicUsize = AtomicUsize::new(0);

/// The server for this test binary: `LOOPX_TEST_PG`, else a throwaway one; None when no
/// PostgreSQL is installed (the caller skips, saying so), but with `CI` set that panics.
pub fn server() -> Option<&'static Server> {
    SERVER
        .get_or_init(|| {
            let found = from_env().or_else(throwaway);
            if found.is_none() && in_ci() {
                panic!(
                    "CI is set but there is no PostgreSQL: install postgresql-15 or set \
                     LOOPX_TEST_PG=postgres://..."
                );
            }
            found
        })
        .as_ref()
}

/// [`server`], printing "skipping: no PostgreSQL" when there is none.
pub fn server_or_skip() -> Option<&'static Server> {
    let found = server();
    if found.is_none() {
        eprintln!("skipping: no PostgreSQL (install postgresql-15 or set LOOPX_TEST_PG)");
    }
    found
}

/// A new, empty database `loopx_t_<pid>_<n>` on `server`; its URL.
pub fn fresh_db(server: &Server) -> String {
    for _ in 0..MAX_DBS {
        let name = format!(
            "loopx_t_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::SeqCst)
        );
        let (code, _, err) = psql(&server.url, &format!("CREATE DATABASE {name}"));
        if code == 0 {
            return with_db(&server.url, &name);
        }
        assert!(
            err.contains("already exists"),
            "CREATE DATABASE {name} failed ({code}): {err}"
        );
    }
    panic!("no free database name after {MAX_DBS} tries");
}

/// Runs `sql` through psql on `url` (stops at the first error): (exit code, stdout, stderr).
pub fn psql(url: &str, sql: &str) -> (i32, String, String) {
    let bin = if Path::new("/usr/bin/psql").exists() {
        "/usr/bin/psql"
    } else {
        "psql"
    };
    let mut child = Command::new(bin)
        .args([
            "-v",
            "ON_ERROR_STOP=1",
            "-X",
            "-q",
            "-A",
            "-t",
            "-f",
            "-",
            "-d",
            url,
        ])
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("psql runs (install postgresql-client)");
    let mut stdin = child.stdin.take().expect("psql's stdin");
    let sql = sql.to_owned();
    let writer = std::thread::spawn(move || stdin.write_all(sql.as_bytes()));
    let out = child.wait_with_output().expect("psql ends");
    // psql may stop reading at an error; a broken pipe then is no failure of ours.
    let _ = writer.join();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// SQL appending the next journal line (chained to the last) by `actor`, doing `action` on
/// `target` (no quotes in any of them).
pub fn next_line(actor: &str, action: &str, target: &str) -> String {
    format!(
        "INSERT INTO loopx.journal (seq, line) SELECT seq + 1, json_build_object('seq', seq + 1, \
         'at', '2026-01-01T00:00:00.000Z', 'actor', '{actor}', 'action', '{action}', \
         'target', '{target}', 'data', '{{}}'::json, 'prev', \
         encode(sha256(convert_to(line, 'UTF8')), 'hex'))::text \
         FROM loopx.journal ORDER BY seq DESC LIMIT 1"
    )
}

/// `url` with its database replaced by `db` (the query string kept).
pub fn with_db(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let host_at = base.find("://").map_or(0, |i| i + 3);
    let path_at = base[host_at..]
        .find('/')
        .map_or(base.len(), |i| host_at + i);
    format!("{}/{db}{query}", &base[..path_at])
}

/// `url` logging in as `user` with `password` (plain words: no URL escapes are made).
pub fn with_user(url: &str, user: &str, password: &str) -> String {
    let host_at = url.find("://").map_or(0, |i| i + 3);
    let end = url[host_at..]
        .find(['/', '?'])
        .map_or(url.len(), |i| host_at + i);
    let auth = &url[host_at..end];
    let host = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    format!("{}{user}:{password}@{host}{}", &url[..host_at], &url[end..])
}

/// True when `CI` is set (to anything but empty, `0` or `false`).
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// The server `LOOPX_TEST_PG` names, checked to answer.
fn from_env() -> Option<Server> {
    let url = std::env::var("LOOPX_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())?;
    assert!(
        url.starts_with("postgres://") || url.starts_with("postgresql://"),
        "LOOPX_TEST_PG must be a postgres:// URL, not {url:?}"
    );
    let (code, _, err) = psql(&url, "select 1");
    assert_eq!(code, 0, "LOOPX_TEST_PG={url} does not answer: {err}");
    Some(Server {
        url,
        dir: None,
        _watch: None,
    })
}

/// Runs the script with `args`; its output.
fn script(args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(SCRIPT)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs scripts/pg-throwaway")
}

/// A throwaway server of this process, watched so that it stops when the process ends; None when
/// the PostgreSQL server binaries are missing.
fn throwaway() -> Option<Server> {
    if !script(&["bindir"]).status.success() {
        return None;
    }
    let parent = servers_dir();
    let parent_s = parent.to_str().expect("a UTF-8 temp dir");
    // Servers left by test processes that were killed along with their watchers.
    let swept = script(&["sweep", parent_s]);
    if !swept.status.success() {
        eprintln!("pg: sweep: {}", String::from_utf8_lossy(&swept.stderr));
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Some(serve(
        parent.join(format!("{}-{nanos:08x}", std::process::id())),
    ))
}

/// A throwaway server for one test alone, which it may stop and start again
/// ([`Server::halt`], [`Server::resume`]); stopped and removed when dropped. None (after saying
/// so) when the PostgreSQL server binaries are missing, even with `LOOPX_TEST_PG` set: a server
/// the tests did not start is never stopped.
pub fn private_or_skip(tag: &str) -> Option<Server> {
    if !script(&["bindir"]).status.success() {
        assert!(
            !in_ci(),
            "CI is set but there are no PostgreSQL server binaries"
        );
        eprintln!(
            "skipping: no PostgreSQL server binaries to start a private server (postgresql-15)"
        );
        return None;
    }
    let dir = servers_dir().join(format!("{}-{tag}", std::process::id()));
    Some(serve(dir))
}

/// Starts a server in `dir` and a watcher that stops it once this process ends, or once the
/// returned value is dropped (its stdin closes).
fn serve(dir: PathBuf) -> Server {
    let dir_s = dir.to_str().expect("a UTF-8 temp dir");
    // One process starts the server, prints its URL and then watches this one: it has its own
    // process group (a Ctrl-C of the tests must not kill it) and keeps no output of ours open.
    let mut serve = Command::new("bash")
        .args([SCRIPT, "serve", &std::process::id().to_string(), dir_s])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("bash runs scripts/pg-throwaway serve");
    let mut url = String::new();
    let stdout = serve.stdout.take().expect("serve's stdout");
    let read = BufReader::new(stdout).take(4096).read_line(&mut url);
    let url = url.trim().to_owned();
    if read.is_err() || url.is_empty() {
        let mut err = String::new();
        let stderr = serve.stderr.take().expect("serve's stderr");
        let _ = stderr.take(65536).read_to_string(&mut err);
        let _ = serve.wait();
        panic!("scripts/pg-throwaway serve {dir_s} failed: {err}");
    }
    Server {
        url,
        dir: Some(dir),
        _watch: Some(serve),
    }
}

impl Server {
    /// Stops this throwaway server, keeping its data: its clients' connections drop.
    pub fn halt(&self) {
        self.own("halt");
    }

    /// Starts this throwaway server again, on the same port (its URL holds).
    pub fn resume(&self) {
        self.own("start");
    }

    /// Stops this throwaway server at once, as a crash would (`pg_ctl stop -m immediate`: no
    /// shutdown checkpoint, WAL not yet written is lost), keeping its data.
    pub fn crash(&self) {
        self.own("crash");
    }

    /// Kills this throwaway server's postmaster (`kill -9`) and waits for its other processes
    /// to die, keeping its data.
    pub fn kill(&self) {
        self.own("kill");
    }

    /// Runs the script's `cmd` on this throwaway server's directory.
    fn own(&self, cmd: &str) {
        let dir = self.dir.as_ref().expect("a throwaway server of the tests");
        let out = script(&[cmd, dir.to_str().expect("a UTF-8 temp dir")]);
        assert!(
            out.status.success(),
            "pg-throwaway {cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// This user's directory of throwaway servers in the temp dir, made if missing; refuses one that
/// is a symlink or someone else's.
fn servers_dir() -> PathBuf {
    let uid = unsafe { libc::geteuid() };
    let parent = std::env::temp_dir().join(format!("loopx-pg-{uid}"));
    match std::fs::create_dir(&parent) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!("cannot make {}: {e}", parent.display()),
    }
    let meta = std::fs::symlink_metadata(&parent).expect("stat the servers dir");
    assert!(
        meta.is_dir() && meta.uid() == uid,
        "{} is not a directory of ours; remove it",
        parent.display()
    );
    // The postgres user (when we are root) must reach the servers' directories in it.
    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o755))
        .expect("chmod the servers dir");
    parent
}

/// A project on a database: its URL, the owner's key, a working directory without a project
/// for its commands, and the ids of its todo ("Claim me") and gate ("Ship it?").
pub struct DbProject {
    /// The database's URL.
    pub url: String,
    /// The owner's key file.
    pub key: PathBuf,
    /// Where its commands run.
    pub cwd: PathBuf,
    /// The todo's id.
    pub todo: String,
    /// The gate's id.
    pub gate: String,
}

impl DbProject {
    /// `loopx --store URL ARGS` from `cwd`, with the owner's key.
    pub fn lx(&self, args: &[&str]) -> std::process::Output {
        self.cmd(args).output().expect("loopx runs")
    }

    /// The command `lx` runs, to spawn it.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(super::bin());
        c.arg("--store")
            .arg(&self.url)
            .args(args)
            .current_dir(&self.cwd)
            .env("LOOPX_OWNER_KEY", &self.key)
            .env_remove("LOOPX_DIR")
            .env_remove("LOOPX_AGENT")
            .env_remove("LOOPX_STORE");
        c
    }
}

/// The JSON answer of a command that must succeed (`null` when it printed none).
pub fn ok(out: std::process::Output, what: &str) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// A file project with a todo and a gate, moved into the fresh database at `url` (migrated
/// and imported as its superuser).
pub fn project_in(tag: &str, url: &str) -> DbProject {
    use super::tmux::{loopx, owned_project, temp_dir};
    let (dir, key) = owned_project(tag, "Ship over the database");
    let v = ok(
        loopx(&dir, &key, &["--json", "todo", "add", "Claim me"]),
        "todo add",
    );
    let todo = v["todo"]["id"].as_str().expect("a todo id").to_string();
    let args = ["--json", "--agent", "agent-x", "gate", "open", "Ship it?"];
    let v = ok(loopx(&dir, &key, &args), "gate open");
    let gate = v["gate"]["id"].as_str().expect("a gate id").to_string();
    let p = DbProject {
        url: url.to_string(),
        key,
        cwd: temp_dir(&format!("{tag}-cwd")),
        todo,
        gate,
    };
    ok(p.lx(&["store", "migrate"]), "store migrate");
    let from = dir.to_str().expect("a UTF-8 temp dir");
    ok(p.lx(&["store", "import", "--from", from]), "store import");
    p
}
