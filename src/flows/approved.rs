//! A gate's approved action, used once: the gate's state, the program and the output file
//! checked first, the use committed, then the command run or the payload handed over.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::kernel::gate_action::{ActionKind, GateAction};
use crate::kernel::{Action, Code, Error, Result, Ts, ops};
use crate::runtime::process::{self, Echo, Finished, Limits, Spec};
use crate::runtime::program;
use crate::store::{Store, StoreExt};

/// What `run-approved` asks.
#[derive(Debug, Clone)]
pub struct RunOpts {
    /// The gate's id or a unique prefix.
    pub gate: String,
    /// A payload's bytes go to this new file.
    pub out: Option<PathBuf>,
    /// When the command is stopped, and its grace between SIGTERM and SIGKILL.
    pub limits: (Duration, Duration),
    /// Where the command's output is copied.
    pub echo: Echo,
}

/// What became of a gate's approved action, now used.
#[derive(Debug)]
pub enum Used {
    /// The command ran.
    Ran(Finished),
    /// The payload was written to this file.
    Wrote(PathBuf),
    /// The payload is the caller's to hand over.
    Payload,
}

/// Uses the approved action of gate `o.gate` once, in the project at `root`: what would fail
/// once it runs is refused before the use spends the approval; the use is committed before
/// anything runs (a crash after it spends the approval, never runs it twice). The gate's id,
/// its action, and what became of it.
pub fn run(
    store: &dyn Store,
    root: &Path,
    (agent, now): (&str, Ts),
    o: &RunOpts,
) -> Result<(String, GateAction, Used)> {
    let (id, act, used) = runnable(store, &o.gate)?;
    let mut file = match act.kind {
        ActionKind::Cmd => {
            startable(root, &act)?;
            None
        }
        ActionKind::Payload => o.out.as_deref().map(NewFile::create).transpose()?,
    };
    let g = match store.mutate(|snap| ops::use_gate(snap, agent, now, &id, None, used)) {
        Ok(g) => g,
        Err(e) => {
            if let Some(f) = file.take() {
                f.remove();
            }
            return Err(e);
        }
    };
    let Some(action) = g.action.clone() else {
        return Err(Error::new(Code::Internal, "a used gate without an action"));
    };
    let done = match (action.kind, file) {
        (ActionKind::Cmd, _) => Used::Ran(run_cmd(root, &g.id, &action, o)?),
        (ActionKind::Payload, Some(f)) => {
            Used::Wrote(f.write(action.text.as_deref().unwrap_or("").as_bytes())?)
        }
        (ActionKind::Payload, None) => Used::Payload,
    };
    Ok((g.id, action, done))
}

/// Refuses a command that cannot start: its program (found, runnable, its `#!` interpreter
/// too) and the work tree it runs in.
fn startable(root: &Path, act: &GateAction) -> Result<()> {
    if let Some(prog) = act.argv.first() {
        program::check(root, &std::ffi::OsString::from(prog))?;
    }
    if !std::fs::metadata(root).is_ok_and(|m| m.is_dir()) {
        return Err(Error::new(
            Code::Io,
            format!("the work tree {} is not a directory", root.display()),
        )
        .hint("run it where the project is"));
    }
    Ok(())
}

/// Runs the approved command in `root`, bounded, SIGINT and SIGTERM passed on.
fn run_cmd(root: &Path, id: &str, action: &GateAction, o: &RunOpts) -> Result<Finished> {
    let spec = Spec {
        argv: action.argv.iter().map(Into::into).collect(),
        env: vec![
            ("LOOPX_GATE".into(), id.into()),
            ("LOOPX_DIR".into(), root.to_path_buf().into_os_string()),
        ],
        cwd: Some(root.to_path_buf()),
        echo: o.echo,
        forward: true,
        end_group: true,
        ..Spec::default()
    };
    let limits = Limits {
        timeout: o.limits.0,
        grace: o.limits.1,
        ..Limits::default()
    };
    process::forward_signals();
    process::run(&spec, &limits).map_err(|e| {
        e.hint(format!(
            "the approval of {id} is used; open a new gate for a command that runs here"
        ))
    })
}

/// True when the journal records a use of gate `id` (the file may have lost its `used`).
pub fn journal_used(store: &dyn Store, id: &str) -> Result<bool> {
    let mut pos = 0;
    loop {
        let (events, next) = store.journal_after(pos)?;
        if events
            .iter()
            .any(|e| e.action == Action::GateUse && e.target == id)
        {
            return Ok(true);
        }
        if events.is_empty() || next <= pos {
            return Ok(false);
        }
        pos = next;
    }
}

/// The gate's approved command, checked now (the turn checks it again as it claims).
pub fn approved_argv(store: &dyn Store, input: &str) -> Result<(String, Vec<String>, bool)> {
    let (id, a, used) = runnable(store, input)?;
    if a.kind != ActionKind::Cmd {
        return Err(Error::usage(format!(
            "gate {id} holds a payload, not a command: a turn cannot run it"
        ))
        .hint(format!(
            "hand it over with `loopx run-approved {id} --out FILE`"
        )));
    }
    Ok((id, a.argv, used))
}

/// Gate `input`'s approved action when it may be used now: the gate's id, the action, and
/// whether the journal holds a use of it already.
fn runnable(store: &dyn Store, input: &str) -> Result<(String, GateAction, bool)> {
    let snap = store.load()?;
    let id = store.resolve_gate(&snap, input)?;
    let used = journal_used(store, &id)?;
    let g = snap
        .gates
        .get(&id)
        .ok_or_else(|| Error::new(Code::NotFound, format!("no gate {id}")))?;
    let a = crate::kernel::gate_action::runnable(g, used)?.clone();
    Ok((id, a, used))
}

/// `--out`'s new file, made before the approval is spent: never through a link or over an
/// existing file.
struct NewFile {
    path: PathBuf,
    file: std::fs::File,
}

impl NewFile {
    /// Makes the file (mode 0600); a usage error when it cannot be made there.
    fn create(p: &Path) -> Result<NewFile> {
        use std::os::unix::fs::OpenOptionsExt;
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(p);
        let file = made.map_err(|e| {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory => {
                    "its directory does not exist".to_string()
                }
                _ => format!("cannot make it: {e}"),
            };
            Error::usage(format!("--out {}: {why}", p.display()))
                .hint("give a new file in a directory you can write; the approval is not spent")
        })?;
        Ok(NewFile {
            path: p.to_path_buf(),
            file,
        })
    }

    /// Writes `bytes` and syncs them; the file's path.
    fn write(mut self, bytes: &[u8]) -> Result<PathBuf> {
        let p = self.path;
        self.file
            .write_all(bytes)
            .and_then(|_| self.file.sync_all())
            .map_err(|e| Error::io(&p, &e))?;
        Ok(p)
    }

    /// Removes the file, still empty: the approval was not spent.
    fn remove(self) {
        drop(self.file);
        let _ = std::fs::remove_file(&self.path);
    }
}
