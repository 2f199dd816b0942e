//! `run-approved`: the action a gate holds, run (or handed over) once, when the owner approved it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::{Ctx, Out};
use crate::kernel::gate_action::{ActionKind, GateAction};
use crate::kernel::{Action, Dur, Error, Result, ops};
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
    let snap = store.load()?;
    let id = store.resolve_gate(&snap, input)?;
    let used = journal_used(store, &id)?;
    let g = snap
        .gates
        .get(&id)
        .ok_or_else(|| Error::new(crate::kernel::Code::NotFound, format!("no gate {id}")))?;
    let a = crate::kernel::gate_action::runnable(g, used)?;
    if a.kind != ActionKind::Cmd {
        return Err(Error::usage(format!(
            "gate {id} holds a payload, not a command: a turn cannot run it"
        ))
        .hint(format!(
            "hand it over with `loopx run-approved {id} --out FILE`"
        )));
    }
    Ok((id, a.argv.clone(), used))
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
    // What would fail once the action runs is refused before the use spends the approval.
    if let Some(p) = &a.out {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        let dir = dir.unwrap_or(Path::new("."));
        if !std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
            return Err(Error::usage(format!(
                "--out {}: its directory does not exist",
                p.display()
            ))
            .hint("give a new file in a directory that exists"));
        }
    }
    if let Some(act) = snap.gates.get(&id).and_then(|g| g.action.as_ref())
        && act.kind == ActionKind::Cmd
        && let Some(prog) = act.argv.first()
    {
        super::turn::check_program(&std::ffi::OsString::from(prog))?;
    }
    let used = journal_used(&*store, &id)?;
    // The use is committed before anything runs: a crash after it spends the approval, never
    // runs it twice.
    let g = store.mutate(|snap| ops::use_gate(snap, &ctx.agent, ctx.now, &id, None, used))?;
    let Some(action) = g.action.clone() else {
        return Err(Error::new(
            crate::kernel::Code::Internal,
            "a used gate without an action",
        ));
    };
    match action.kind {
        ActionKind::Cmd => run_cmd(ctx, &*store, &g.id, &action, &a),
        ActionKind::Payload => hand_over(ctx, &g.id, &action, a.out.as_deref()),
    }
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
        true => crate::runtime::turn::EXIT_TIMED_OUT,
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

fn hand_over(ctx: &Ctx, id: &str, action: &GateAction, out: Option<&Path>) -> Result<Out> {
    let bytes = action.text.as_deref().unwrap_or("").as_bytes();
    let answer = |text: String| {
        Out::new("gate", json!(id), text)
            .with("sha256", json!(action.sha256))
            .with("bytes", json!(bytes.len()))
    };
    match out {
        Some(p) => {
            write_new(p, bytes)?;
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

/// Writes a new file, never through a link or over an existing file.
fn write_new(p: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
        .map_err(|e| Error::io(p, &e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| Error::io(p, &e))
}
