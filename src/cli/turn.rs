//! `turn` and `heartbeat`: loopx runs an agent's turn itself, once or in a loop.

use std::ffi::OsString;
use std::io::Write as _;

use clap::Args;
use serde_json::{Value, json};

use super::{Ctx, Out, quota::answer_out};
use crate::flows::heartbeat::{self, Beat, HeartbeatOptions, Stopped};
use crate::flows::runner::{self, TurnOptions, TurnOutcome, TurnReport};
use crate::kernel::ops::Ended;
use crate::kernel::{Dur, Error, Result, ops::check_ttl};
use crate::runtime::process::{self, Echo, Exit};
use crate::runtime::program;
use crate::runtime::turn_id::took;
use crate::text::escape as esc;

/// What `turn` and `heartbeat` share.
#[derive(Debug, Args)]
pub struct TurnArgs {
    /// Mark the todo done when the command exits 0.
    #[arg(long)]
    complete_on_success: bool,
    /// Stop the command after this long (SIGTERM, then SIGKILL after --grace).
    #[arg(long, value_name = "DUR", default_value = "1h")]
    timeout: Dur,
    /// The time between SIGTERM and SIGKILL at the timeout.
    #[arg(long, value_name = "DUR", default_value = "10s")]
    grace: Dur,
    /// The lease's length (renewed while the command runs).
    #[arg(long, value_name = "DUR")]
    ttl: Option<Dur>,
    /// Make (or reuse) a git worktree for the todo; the command gets it as `LOOPX_WORKTREE`.
    #[arg(long)]
    worktree: bool,
    /// The command and its arguments, after `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    cmd: Vec<OsString>,
}

/// `turn`.
#[derive(Debug, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Example:\n  loopx turn --complete-on-success --timeout 30m -- sh -c 'codex exec \"Do todo $LOOPX_TODO_ID: $LOOPX_TODO_TITLE\"'\n\n\
        A host that is itself the turn runs its two halves:\n  \
        loopx --agent claude turn start --turn t-42 --json\n  \
        loopx --agent claude turn end --turn t-42 --done --summary \"tests pass\""
)]
pub struct Turn {
    /// `start` or `end`: the two halves, for a host that is itself the turn.
    #[command(subcommand)]
    step: Option<super::turn_step::TurnStep>,
    /// The turn's id (default: a fresh one); this agent's same id twice is recorded once.
    #[arg(long, value_name = "ID")]
    turn: Option<String>,
    /// Run the approved command this gate holds (once) instead of a command after `--`.
    #[arg(long, value_name = "GATE", add = super::complete::gate_id())]
    approved: Option<String>,
    #[command(flatten)]
    args: TurnArgs,
}

/// `heartbeat`.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  loopx heartbeat --every 5m --max-turns 20 -- ./agent-turn.sh")]
pub struct Heartbeat {
    /// The least time between turns, and the wait when should-run names none (default 60s).
    #[arg(long, value_name = "DUR")]
    every: Option<Dur>,
    /// Stop after this many turns.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_turns: Option<u32>,
    #[command(flatten)]
    args: TurnArgs,
}

/// The longest a turn's command may run.
const TIMEOUT_MAX: Dur = Dur(7 * 86_400_000);

fn options(ctx: &Ctx, root: &std::path::Path, a: TurnArgs) -> Result<TurnOptions> {
    check_limits(a.timeout, a.grace)?;
    if let Some(t) = a.ttl {
        check_ttl(t)
            .map_err(|e| e.hint("give it like `--ttl 30m`, or leave it out for the project's"))?;
    }
    let Some(prog) = a.cmd.first() else {
        return Err(Error::usage("give the command to run after `--`")
            .hint("for example: loopx turn -- ./agent-turn.sh"));
    };
    program::check(root, prog)?;
    let root = root
        .canonicalize()
        .or_else(|_| std::path::absolute(root))
        .unwrap_or_else(|_| root.to_path_buf());
    Ok(TurnOptions {
        complete_on_success: a.complete_on_success,
        timeout: a.timeout,
        grace: a.grace,
        ttl: a.ttl,
        echo: if ctx.json {
            Echo::Stderr
        } else {
            Echo::Through
        },
        store_url: ctx.store_url.clone(),
        worktree: a.worktree,
        ..TurnOptions::new(root, &ctx.agent, a.cmd)
    })
}

/// Checks `--timeout` (1s to 7d) and `--grace` (1s to 1h).
pub(super) fn check_limits(timeout: Dur, grace: Dur) -> Result<()> {
    for (name, d, max) in [
        ("--timeout", timeout, TIMEOUT_MAX),
        ("--grace", grace, Dur::from_secs(3600)),
    ] {
        if d < Dur::from_secs(1) || d > max {
            return Err(
                Error::usage(format!("{name} must be from 1s to {max}, not {d}"))
                    .hint(format!("give it like `{name} 30m`")),
            );
        }
    }
    Ok(())
}

/// Runs `turn`.
pub fn turn(ctx: &Ctx, t: Turn) -> Result<Out> {
    if let Some(step) = t.step {
        return super::turn_step::run(ctx, step);
    }
    let store = ctx.open()?;
    let mut args = t.args;
    let approved = match t.approved {
        Some(_) if !args.cmd.is_empty() => {
            return Err(Error::usage(
                "give either --approved GATE or a command after `--`, not both",
            ));
        }
        Some(g) => {
            let (gate, argv, journal_used) = crate::flows::approved::approved_argv(&*store, &g)?;
            args.cmd = argv.into_iter().map(OsString::from).collect();
            Some(runner::Approved { gate, journal_used })
        }
        None => None,
    };
    let mut opts = options(ctx, &ctx.work_dir(&*store), args)?;
    opts.turn = t.turn;
    opts.approved = approved;
    process::forward_signals();
    Ok(outcome_out(runner::run_turn(&*store, &opts)?))
}

/// What `turn` answers for each outcome (a refused record and a failed check are told on stderr too).
fn outcome_out(outcome: TurnOutcome) -> Out {
    let r = match outcome {
        TurnOutcome::NotNow(a) => return answer_out(&a),
        TurnOutcome::Replayed(id) => {
            return Out::new(
                "turn",
                json!(id),
                format!("turn {} was recorded already; nothing ran", esc(&id)),
            )
            .with("replayed", json!(true));
        }
        TurnOutcome::Interrupted(id) => return interrupted(&id),
        TurnOutcome::Ran(r) => r,
    };
    let mut err = std::io::stderr().lock();
    if let Ended::Refused(e) = &r.ended {
        let _ = writeln!(
            err,
            "loopx: the turn's evidence was refused: {}",
            esc(&e.message)
        );
        if let Some(h) = &e.hint {
            let _ = writeln!(err, "  hint: {}", esc(h));
        }
    }
    let why = match &r.check {
        Some(Ok(e)) => Some(e.summary.clone()),
        Some(Err(e)) => Some(e.message.clone()),
        None => None,
    };
    if let Some(why) = why {
        let _ = writeln!(err, "loopx: {} is not done: {}", esc(&r.todo.id), esc(&why));
    }
    drop(err);
    report_out(&r).warned(r.warnings.clone())
}

/// A turn a signal stopped before its command started, its lease given back.
fn interrupted(id: &str) -> Out {
    let sig = process::signalled().unwrap_or(libc::SIGINT);
    let mut out = Out::new(
        "interrupted",
        json!(true),
        format!("interrupted before the command started; {id} released"),
    );
    // As a shell reports a command a signal ended: 130 for SIGINT, 143 for SIGTERM.
    out.exit = 128 + sig;
    out.with("ok", json!(false))
        .with("todo", json!(id))
        .with("signal", json!(sig))
}

/// A turn's report: JSON fields, a line for people, and the exit code.
fn report_out(r: &TurnReport) -> Out {
    let ended = r.ended.word();
    // The command's last line of output may have no newline: ours starts a line of its own.
    let nl = if process::take_stdout_mid_line() {
        "\n"
    } else {
        ""
    };
    let mut out = Out::new("turn", json!(r.turn), format!("{nl}{}", line(r, ended)))
        .with("todo", json!({"id": r.todo.id, "title": r.todo.title}))
        .with("fence", json!(r.todo.fence))
        .with("exit_code", json!(r.exit.code()))
        .with("timed_out", json!(r.timed_out))
        .with("duration_ms", json!(r.duration.as_millis() as u64))
        .with("ended", json!(ended));
    match &r.check {
        Some(Ok(e)) => out = out.with("check", json!(e)),
        Some(Err(e)) => {
            out = out.with(
                "check",
                json!({"error": e.code.as_str(), "message": e.message}),
            )
        }
        None => {}
    }
    if let Exit::Signal(s) = r.exit {
        out = out.with("signal", json!(s));
    }
    if let Some(p) = &r.worktree {
        out = out.with("worktree", json!(p.to_string_lossy()));
    }
    if !r.over_limit.is_empty() {
        out = out.with("over_limit", json!(r.over_limit));
        out.text.push_str(&format!(
            "; its slot went past the window's {} limit",
            r.over_limit.join(" and ")
        ));
    }
    if let Ended::Refused(e) = &r.ended {
        out = out.with("ok", json!(false)).with(
            "error",
            json!({"code": e.code.as_str(), "message": e.message, "hint": e.hint}),
        );
    }
    out.exit = r.exit_code();
    out
}

fn line(r: &TurnReport, ended: &str) -> String {
    let t = took(r.duration);
    let how = match (r.timed_out, r.exit) {
        (true, _) => format!("timed out after {t}"),
        (false, Exit::Code(c)) => format!("exited {c} in {t}"),
        (false, Exit::Signal(s)) => format!("killed by signal {s} after {t}"),
    };
    let what = match &r.ended {
        Ended::Refused(e) => format!("evidence refused: {}", esc(&e.message)),
        Ended::Replayed => "recorded already".to_string(),
        _ => format!("{} {ended}", esc(&r.todo.id)),
    };
    format!(
        "turn {}: {} ({how}); {what}",
        esc(&r.turn),
        esc(&r.todo.title)
    )
}

/// A heartbeat's line for one step, for people and as JSON; `None` for a wait said already.
fn beat_line(b: Beat<'_>, last_wait: &mut Option<String>) -> Option<(String, Value)> {
    Some(match b {
        Beat::Ran(r, d) => {
            *last_wait = None;
            let mut o = report_out(r).warned(r.warnings.clone());
            // As `turn --json` prints it.
            o.json.entry("ok").or_insert(json!(true));
            if !d.is_zero() {
                o.text.push_str(&format!("; next turn in {d}"));
                o.json.insert("sleep".into(), json!(d));
            }
            (o.text, Value::Object(o.json))
        }
        Beat::Waits(a, d) => {
            let said = format!("{:?}:{}", a.decision, a.reason);
            if last_wait.as_deref() == Some(said.as_str()) {
                return None;
            }
            *last_wait = Some(said);
            let o = answer_out(a);
            let first = o.text.lines().next().unwrap_or("").to_string();
            (
                format!("{first}; sleeping {d}"),
                json!({"wait": o.json, "sleep": d}),
            )
        }
        Beat::Error(e, d) => (
            format!("{}; trying again in {d}", esc(&e.message)),
            json!({"error": e.code.as_str(), "sleep": d}),
        ),
    })
}

/// Runs `heartbeat`: one line per turn (and per new wait) on stdout as it goes.
pub fn heartbeat(ctx: &Ctx, h: Heartbeat) -> Result<Out> {
    let store = ctx.open()?;
    if h.every.is_some_and(|d| d > Dur::from_secs(86_400)) {
        return Err(Error::usage("--every must be at most 1d").hint("give it like `--every 10m`"));
    }
    let opts = HeartbeatOptions {
        turn: options(ctx, &ctx.work_dir(&*store), h.args)?,
        every: h.every,
        max_turns: h.max_turns,
    };
    process::forward_signals();
    let json = ctx.json;
    let mut last_wait: Option<String> = None;
    let (stopped, ran) = heartbeat::heartbeat(&*store, &opts, |b| {
        let Some((text, value)) = beat_line(b, &mut last_wait) else {
            return;
        };
        let mut out = std::io::stdout().lock();
        let _ = if json {
            writeln!(out, "{value}")
        } else {
            writeln!(out, "{text}")
        };
    })?;
    let why = match &stopped {
        Stopped::Goal(r) => format!("the goal is {r}"),
        Stopped::MaxTurns => format!("{} ran", crate::text::count(ran as usize, "turn", "turns")),
        Stopped::Signal(_) => "interrupted; no lease is held".to_string(),
    };
    Ok(Out::new(
        "stopped",
        json!(match stopped {
            Stopped::Goal(r) => r,
            Stopped::MaxTurns => "max_turns",
            Stopped::Signal(_) => "signal",
        }),
        format!("heartbeat stopped: {why}"),
    )
    .with("turns", json!(ran)))
}
