//! `run-approved`: the action a gate holds, run (or handed over) once, when the owner approved it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::{Ctx, Out};
use crate::flows::runner;
use crate::kernel::gate_action::{ActionKind, GateAction};
use crate::kernel::{Dur, Error, Result, ops};
use crate::runtime::process::{self, Echo, Limits, Spec};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `run-approved GATE`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  loopx run-approved g-3pqx7d\n  loopx run-approved g-8kd2rw --out release.patch && git apply release.patch"
)]
pub struct RunApproved {
    /// The gate's id or a unique prefix.
    #[arg(add = super::complete::gate_id())]
    gate: String,
    /// Stop the command after this long (SIGTERM, then SIGKILL after --grace).
    #[arg(long, value_name = "DUR", default_value = "1h")]
    timeout: Dur,
    /// The time between SIGTERM and SIGKILL at the timeout.
    #[arg(long, value_name = "DUR", default_value = "10s")]
    grace: Dur,
    /// A payload's bytes go to this new file (not stdout); it must not exist.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs `run-approved`.
pub fn run(ctx: &Ctx, a: RunApproved) -> Result<Out> {
    super::turn::check_limits(a.timeout, a.grace)?;
    if let Some(p) = &a.out
        && std::fs::symlink_metadata(p).is_ok()
    {
        return Err(Error::usage(format!(
            "--out {}: exists already; give a new file",
            p.display()
        )));
    }
    let store = ctx.open()?;
    let snap = store.load()?;
    let id = store.resolve_gate(&snap, &a.gate)?;
    let used = runner::journal_used(&*store, &id)?;
    // What would fail once the action runs is refused before the use spends the approval: the
    // gate's state, the program, the work tree, and the output file, made now.
    let g = snap
        .gates
        .get(&id)
        .ok_or_else(|| Error::new(crate::kernel::Code::NotFound, format!("no gate {id}")))?;
    let act = crate::kernel::gate_action::runnable(g, used)?;
    let root = ctx.work_dir(&*store);
    let mut file = match act.kind {
        ActionKind::Cmd => {
            startable(&root, act)?;
            None
        }
        ActionKind::Payload => a.out.as_deref().map(NewFile::create).transpose()?,
    };
    // The use is committed before anything runs: a crash after it spends the approval, never
    // runs it twice.
    let g = match store.mutate(|snap| ops::use_gate(snap, &ctx.agent, ctx.now, &id, None, used)) {
        Ok(g) => g,
        Err(e) => {
            if let Some(f) = file.take() {
                f.remove();
            }
            return Err(e);
        }
    };
    let Some(action) = g.action.clone() else {
        return Err(Error::new(
            crate::kernel::Code::Internal,
            "a used gate without an action",
        ));
    };
    match action.kind {
        ActionKind::Cmd => run_cmd(ctx, &*store, &g.id, &action, &a),
        ActionKind::Payload => hand_over(ctx, &g.id, &action, file),
    }
}

/// Refuses a command that cannot start: its program (found, runnable, its `#!` interpreter
/// too) and the work tree it runs in.
fn startable(root: &Path, act: &GateAction) -> Result<()> {
    if let Some(prog) = act.argv.first() {
        super::turn::check_program(root, &std::ffi::OsString::from(prog))?;
    }
    if !std::fs::metadata(root).is_ok_and(|m| m.is_dir()) {
        return Err(Error::new(
            crate::kernel::Code::Io,
            format!("the work tree {} is not a directory", root.display()),
        )
        .hint("run it where the project is"));
    }
    Ok(())
}

fn run_cmd(
    ctx: &Ctx,
    store: &dyn Store,
    id: &str,
    action: &GateAction,
    a: &RunApproved,
) -> Result<Out> {
    let root = ctx.work_dir(store);
    let spec = Spec {
        argv: action.argv.iter().map(Into::into).collect(),
        env: vec![
            ("LOOPX_GATE".into(), id.into()),
            ("LOOPX_DIR".into(), root.clone().into_os_string()),
        ],
        cwd: Some(root),
        echo: if ctx.json {
            Echo::Stderr
        } else {
            Echo::Through
        },
        forward: true,
        end_group: true,
        ..Spec::default()
    };
    let limits = Limits {
        timeout: std::time::Duration::from_millis(a.timeout.0.unsigned_abs()),
        grace: std::time::Duration::from_millis(a.grace.0.unsigned_abs()),
        ..Limits::default()
    };
    process::forward_signals();
    let fin = process::run(&spec, &limits).map_err(|e| {
        e.hint(format!(
            "the approval of {id} is used; open a new gate for a command that runs here"
        ))
    })?;
    let code = match fin.timed_out {
        true => runner::EXIT_TIMED_OUT,
        false => fin.exit.code(),
    };
    let text = format!(
        "ran the approved action of {id}: {} (exit {code}{})",
        esc(&action.shown()),
        if fin.timed_out { ", timed out" } else { "" }
    );
    let mut out = Out::new("gate", json!(id), text)
        .with("sha256", json!(action.sha256))
        .with("exit_code", json!(code))
        .with("timed_out", json!(fin.timed_out))
        .with("duration_ms", json!(fin.duration.as_millis() as u64));
    out.exit = code;
    Ok(out)
}

fn hand_over(ctx: &Ctx, id: &str, action: &GateAction, out: Option<NewFile>) -> Result<Out> {
    let bytes = action.text.as_deref().unwrap_or("").as_bytes();
    let answer = |text: String| {
        Out::new("gate", json!(id), text)
            .with("sha256", json!(action.sha256))
            .with("bytes", json!(bytes.len()))
    };
    match out {
        Some(f) => {
            let p = f.write(bytes)?;
            Ok(answer(format!(
                "wrote the approved payload of {id} to {} ({} bytes)",
                esc(&p.display().to_string()),
                bytes.len()
            ))
            .with("out", json!(p.display().to_string())))
        }
        None if ctx.json => Ok(answer(String::new()).with("payload", json!(action.text))),
        None => {
            let mut so = std::io::stdout().lock();
            so.write_all(bytes)
                .and_then(|_| so.flush())
                .map_err(|e| Error::io(Path::new("stdout"), &e))?;
            Ok(answer(String::new()))
        }
    }
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
