//! Hooks: firing the owner's sealed hook commands for committed events, detached, and the hidden
//! `hook run` supervisor that runs one bounded in time and output and journals a failure.

use std::ffi::OsString;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::kernel::alert::{self, Alert};
use crate::kernel::authority::event_signed;
use crate::kernel::ops::{self, HookFailure};
use crate::kernel::{Error, Event, Result, Snapshot, Ts};
use crate::runtime::process::{self, Echo, Limits, Spec};
use crate::store::{FileStore, Store, StoreExt};

/// The variable that sets how long a hook may run, in seconds (hidden: for tests and slow hooks).
pub const TIMEOUT_VAR: &str = "LOOPX_HOOK_TIMEOUT";
/// How long a hook may run unless `LOOPX_HOOK_TIMEOUT` says otherwise.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);
/// The shortest and longest `LOOPX_HOOK_TIMEOUT`, in seconds.
pub const TIMEOUT_RANGE_S: (f64, f64) = (0.1, 3600.0);
/// How long after SIGTERM a hook's group gets SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);
/// The most bytes of event JSON the supervisor reads from its stdin.
pub const PAYLOAD_MAX: u64 = 2 * alert::DATA_MAX as u64 + 8_192;

/// The variable a hook's command runs with: the event's name. A commit made where it is set (by
/// a hook's command) fires no hooks, so a hook that causes its own event cannot loop.
pub const EVENT_VAR: &str = alert::EVENT_VAR;

/// Where a hook's supervisor runs and how it finds the project: the directory it and the hook
/// run in, and the database's URL for a project kept in one (given to the supervisor in its
/// environment as `LOOPX_STORE`, never in its arguments, where `ps` would show a password).
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The project root, or the work directory of a project in a database.
    pub dir: &'a Path,
    /// The database's URL; `None` for the files under `dir`.
    pub url: Option<&'a str>,
}

/// The commit observer: for each committed line that is an event with a sealed hook, starts a
/// detached `loopx hook run EVENT` with the event's JSON on its stdin. Never fails the commit.
pub fn fire(store: &FileStore, snap: &Snapshot, events: &[Event]) {
    let dir = store.root();
    if store.env().by_hook.is_some() {
        return;
    }
    let place = Place { dir, url: None };
    for a in to_fire(snap, events, place.dir) {
        // The change is committed whatever happens here; a supervisor that cannot start is
        // journaled as the hook's failure (best effort: that commit fires nothing).
        match start(place, &a) {
            Ok(mut child) => {
                // Reaped by a thread: a long-lived face such as the board leaves no zombie; a
                // command that exits leaves it to init.
                std::thread::spawn(move || {
                    let _ = child.wait();
                });
            }
            Err(e) => not_started(store, store.env().now, &a, &e),
        }
    }
}

/// The alerts of committed `events` whose hook the owner's seal holds, each with its JSON (with
/// the directory the hook runs in as `root`).
pub fn to_fire(snap: &Snapshot, events: &[Event], dir: &Path) -> Vec<Alert> {
    alert::alerts(&snap.config.goal.id, events)
        .into_iter()
        .filter(|a| alert::sealed_hook(snap, a.event).is_some())
        .map(|a| Alert {
            payload: with_root(a.payload, dir),
            ..a
        })
        .collect()
}

/// Journals `hook.fail` for a supervisor that could not start (best effort).
pub fn not_started(store: &dyn Store, now: Ts, a: &Alert, e: &std::io::Error) {
    let failure = HookFailure {
        event: a.event.to_string(),
        seq: a.payload["seq"].as_u64(),
        exit: None,
        timed_out: false,
        error: Some(format!("cannot start `loopx hook run`: {e}")),
        tail: String::new(),
    };
    let _ = store.mutate(|_| Ok((ops::hook_fail(now, &failure), ())));
}

/// The payload with the directory the hook runs in.
fn with_root(mut payload: Value, dir: &Path) -> Value {
    payload["root"] = Value::String(dir.display().to_string());
    payload
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A file holding `bytes`, already unlinked, read from its start: the supervisor's stdin. A
/// file, not a pipe, so writing it never waits on a reader.
fn payload_file(bytes: &[u8]) -> std::io::Result<std::fs::File> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        ".loopx-hook-{}-{n}-{nanos:08x}",
        std::process::id()
    ));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    let _ = std::fs::remove_file(&path);
    f.write_all(bytes)?;
    f.rewind()?;
    Ok(f)
}

/// Starts `loopx hook run EVENT` for alert `a` in a process group of its own, its JSON on
/// stdin and its output to /dev/null; the caller reaps it.
pub fn start(place: Place<'_>, a: &Alert) -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    let stdin = payload_file(a.payload.to_string().as_bytes())?;
    let mut cmd = Command::new(exe);
    match place.url {
        // The URL may hold a password: in the environment, where `ps` does not show it.
        Some(url) => cmd.env("LOOPX_STORE", url).env_remove("LOOPX_DIR"),
        None => cmd.arg("--dir").arg(place.dir),
    };
    cmd.args(["hook", "run", a.event])
        .current_dir(place.dir)
        // The supervisor signs nothing: it needs no owner key, and neither does the hook.
        .env_remove("LOOPX_OWNER_KEY")
        .process_group(0)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// `LOOPX_HOOK_TIMEOUT` in seconds (fractions allowed); unset or empty: 10 s.
pub fn timeout_from(v: Option<&str>) -> Result<Duration> {
    let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(TIMEOUT_DEFAULT);
    };
    let (lo, hi) = TIMEOUT_RANGE_S;
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && (lo..=hi).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(Error::usage(format!(
            "{TIMEOUT_VAR} must be seconds from {lo} to {hi}, not `{v}`"
        ))),
    }
}

/// What `hook run` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Ran {
    /// The hook exited 0.
    Ok,
    /// No sealed hook for the event (none set, hand-edited, or the project has no seal).
    NotSealed,
    /// The JSON names no journal line of this event (a hand run with made-up JSON): the hook
    /// does not run.
    NotInJournal,
    /// It failed, and `hook.fail` was journaled.
    Failed(HookFailure),
}

/// Reads the event JSON (bounded) from `r`.
pub fn read_payload(r: impl Read) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = r.take(PAYLOAD_MAX).read_to_end(&mut buf);
    buf
}

/// The hidden `hook run EVENT`: runs the event's hook if the owner's seal holds its text as it
/// is, through `sh -c` in `dir` (the project root, or the work directory of a project in a
/// database), bounded by `timeout`; journals `hook.fail` when it exits non-zero, times out or
/// cannot start. The hook's stdin is the event's JSON rebuilt from the journal line whose `seq`
/// the given JSON names (that line must be this event), so a hand-run `hook run` cannot feed a
/// hook made-up data. `now` dates the failure when the clock cannot be read after the run.
pub fn supervise(
    store: &dyn Store,
    dir: &Path,
    event: &str,
    payload: &[u8],
    timeout: Duration,
    now: Ts,
) -> Result<Ran> {
    let snap = store.load()?;
    let Some(text) = alert::sealed_hook(&snap, event) else {
        return Ok(Ran::NotSealed);
    };
    let Some(line) = journal_line(store, event, payload)? else {
        return Ok(Ran::NotInJournal);
    };
    let json = with_root(alert::payload(event, &snap.config.goal.id, &line), dir);
    let Some(failure) = run_hook(text, event, &json, dir, timeout, line.seq) else {
        return Ok(Ran::Ok);
    };
    let at = Ts::checked_now().unwrap_or(now);
    store.mutate(|_| Ok((ops::hook_fail(at, &failure), ())))?;
    Ok(Ran::Failed(failure))
}

/// The journal line of `event` whose `seq` the JSON names (on files, among the journal's last
/// lines). An owner action's line must carry the owner's signature: an agent can append a line
/// with the chain right, but not sign one, so it cannot make the owner's `goal.completed` hook run.
fn journal_line(store: &dyn Store, event: &str, payload: &[u8]) -> Result<Option<Event>> {
    let Some(seq) = serde_json::from_slice::<Value>(payload)
        .ok()
        .and_then(|v| v["seq"].as_u64())
    else {
        return Ok(None);
    };
    let key = store.owner_pub()?;
    let Some(line) = store
        .journal_line(seq)?
        .filter(|l| alert::event_of(l) == Some(event))
    else {
        return Ok(None);
    };
    if !line.action.is_owner() || event_signed(&line, key.as_ref()) {
        return Ok(Some(line));
    }
    // A gate decided on a device the owner's seal enrolls.
    let cfg = store.load()?.config;
    let keys = cfg.devices.into_iter().map(|(n, p)| (n, p.key)).collect();
    Ok(crate::kernel::device::line_signed(&line, &keys, &cfg.goal.id).then_some(line))
}

/// Runs a hook's text with `sh -c`; how it failed, or `None` when it exited 0 in time.
fn run_hook(
    text: &str,
    event: &str,
    json: &Value,
    root: &Path,
    timeout: Duration,
    seq: u64,
) -> Option<HookFailure> {
    let spec = Spec {
        argv: vec!["sh".into(), "-c".into(), text.into()],
        env: vec![(OsString::from(EVENT_VAR), OsString::from(event))],
        cwd: Some(root.to_path_buf()),
        // One JSON line, ended: `cat >> events.jsonl` keeps a valid log.
        stdin: Some(format!("{json}\n").into_bytes()),
        echo: Echo::None,
        forward: false,
        end_group: false,
    };
    let limits = Limits {
        timeout,
        grace: GRACE,
        tail_lines: 20,
        tail_bytes: ops::FAIL_TAIL_MAX,
        keep_bytes: 0,
    };
    let mut failure = HookFailure {
        event: event.to_string(),
        seq: Some(seq),
        exit: None,
        timed_out: false,
        error: None,
        tail: String::new(),
    };
    match process::run(&spec, &limits) {
        Ok(f) if f.exit.success() && !f.timed_out => return None,
        Ok(f) => {
            failure.exit = Some(f.exit.code());
            failure.timed_out = f.timed_out;
            failure.tail = f.tail;
        }
        Err(e) => failure.error = Some(e.message),
    }
    Some(failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_is_bounded() {
        assert_eq!(timeout_from(None).ok(), Some(TIMEOUT_DEFAULT));
        assert_eq!(timeout_from(Some(" ")).ok(), Some(TIMEOUT_DEFAULT));
        assert_eq!(
            timeout_from(Some("0.5")).ok(),
            Some(Duration::from_millis(500))
        );
        for bad in ["0", "0.01", "3601", "NaN", "inf", "ten", "-1"] {
            assert!(timeout_from(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_payload_file_reads_back_and_is_gone_from_the_directory() {
        let mut f = payload_file(b"{\"event\":\"x\"}").unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).unwrap();
        assert_eq!(s, "{\"event\":\"x\"}");
    }

    #[test]
    fn the_payload_read_is_bounded() {
        let big = vec![b'x'; PAYLOAD_MAX as usize + 10];
        assert_eq!(read_payload(&big[..]).len(), PAYLOAD_MAX as usize);
    }
}
