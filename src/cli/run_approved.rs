//! `run-approved`: the action a gate holds, run (or handed over) once, when the owner approved it.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;

use super::{Ctx, Out};
use crate::flows::approved::{self, RunOpts, Used};
use crate::flows::runner;
use crate::kernel::gate_action::GateAction;
use crate::kernel::{Dur, Error, Result};
use crate::runtime::process::{Echo, Finished};
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
    let o = RunOpts {
        gate: a.gate,
        out: a.out,
        limits: (to_std(a.timeout), to_std(a.grace)),
        echo: if ctx.json {
            Echo::Stderr
        } else {
            Echo::Through
        },
    };
    let root = ctx.work_dir(&*store);
    let (id, action, used) = approved::run(&*store, &root, (&ctx.agent, ctx.now), &o)?;
    Ok(match used {
        Used::Ran(fin) => ran_out(&id, &action, &fin),
        Used::Wrote(p) => answer(
            &id,
            &action,
            format!(
                "wrote the approved payload of {id} to {} ({} bytes)",
                esc(&p.display().to_string()),
                payload(&action).len()
            ),
        )
        .with("out", json!(p.display().to_string())),
        Used::Payload if ctx.json => {
            answer(&id, &action, String::new()).with("payload", json!(action.text))
        }
        Used::Payload => {
            let mut so = std::io::stdout().lock();
            so.write_all(payload(&action))
                .and_then(|_| so.flush())
                .map_err(|e| Error::io(Path::new("stdout"), &e))?;
            answer(&id, &action, String::new())
        }
    })
}

fn to_std(d: Dur) -> std::time::Duration {
    std::time::Duration::from_millis(d.0.unsigned_abs())
}

/// A payload's bytes.
fn payload(action: &GateAction) -> &[u8] {
    action.text.as_deref().unwrap_or("").as_bytes()
}

/// A handed-over payload's answer.
fn answer(id: &str, action: &GateAction, text: String) -> Out {
    Out::new("gate", json!(id), text)
        .with("sha256", json!(action.sha256))
        .with("bytes", json!(payload(action).len()))
}

/// A command's answer: its exit (124 at the timeout) and how long it took.
fn ran_out(id: &str, action: &GateAction, fin: &Finished) -> Out {
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
    out
}
