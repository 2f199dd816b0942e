//! `setup`: writes a host's wiring (Claude Code, Codex CLI, cron, systemd) into the project.

mod db;
mod dirfd;
mod files;
mod hosts;
mod json;
mod sched;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use super::{Ctx, Out};
use crate::kernel::{Code, Dur, Error, Result};
use crate::text::escape as esc;

pub use files::Step;

/// The hosts `setup` wires loopx into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Host {
    /// Claude Code: .mcp.json; a SessionStart hook, the server enabled and its tools allowed in
    /// .claude/settings.json.
    Claude,
    /// Codex CLI: an AGENTS.md section and .codex/config.toml.
    Codex,
    /// cron: a crontab line in loopx-AGENT.crontab, to install yourself.
    Cron,
    /// systemd: a user service and timer under systemd/.
    Systemd,
}

impl Host {
    /// The host's name, also the default agent id.
    pub fn name(self) -> &'static str {
        match self {
            Host::Claude => "claude",
            Host::Codex => "codex",
            Host::Cron => "cron",
            Host::Systemd => "systemd",
        }
    }

    fn scheduled(self) -> bool {
        matches!(self, Host::Cron | Host::Systemd)
    }
}

/// `setup`.
#[derive(Debug, Args)]
pub struct Setup {
    /// The host: claude, codex, cron or systemd.
    #[arg(value_enum)]
    host: Host,
    /// Print what would change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// The loopx binary the wiring runs (default: `loopx` for claude and codex, this binary's
    /// absolute path for cron and systemd).
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// cron, systemd: the time between turns (default 30m).
    #[arg(long, value_name = "DUR")]
    every: Option<Dur>,
    /// cron, systemd: stop a turn's command after this long (default: --every).
    #[arg(long, value_name = "DUR")]
    timeout: Option<Dur>,
    /// cron, systemd: mark the todo done when the command exits 0.
    #[arg(long)]
    complete_on_success: bool,
    /// cron, systemd: the agent's command and its arguments, after `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    cmd: Vec<OsString>,
}

/// What a host's wiring is made from.
#[derive(Debug)]
pub struct Plan {
    /// The project root, absolute.
    pub root: PathBuf,
    /// The agent id the wiring runs as.
    pub agent: String,
    /// The loopx binary, as it is to be written.
    pub bin: String,
}

/// One file a host's wiring writes.
#[derive(Debug)]
pub struct Change {
    /// The path relative to the project root.
    pub rel: String,
    /// The new content (the old one when unchanged).
    pub bytes: Vec<u8>,
    /// Created, updated or unchanged.
    pub step: Step,
    /// Readable and writable by its owner only (0600).
    pub private: bool,
}

/// What a host's setup gives: files, what to do next, and extra JSON fields.
#[derive(Debug, Default)]
pub struct Wiring {
    /// The files.
    pub changes: Vec<Change>,
    /// What the user does next (one or more lines).
    pub next: String,
    /// Extra JSON fields (the crontab line, the units' names).
    pub extra: serde_json::Map<String, Value>,
}

/// An error about a file `setup` will not touch (exit 6), naming it and the line.
pub fn refuse(rel: &str, line: Option<usize>, what: impl Into<String>) -> Error {
    Error::in_file(Code::InvalidState, rel, line, what).hint(format!(
        "fix or move {rel} by hand, then run setup again; nothing was written"
    ))
}

/// The default time between scheduled turns.
const EVERY_DEFAULT: Dur = Dur(30 * 60_000);

/// Runs `setup`.
pub fn run(ctx: &Ctx, a: Setup) -> Result<Out> {
    check_flags(&a)?;
    let (root, pointer, login) = match &ctx.store_url {
        None => (absolute(ctx.files()?.root()), None, None),
        Some(url) => {
            let d = db::root(ctx, url)?;
            (d.root, Some(d.pointer), d.login)
        }
    };
    // On a database the login is the agent: its changes are taken from that login only.
    let agent = match (ctx.agent.as_str(), &login) {
        ("local", Some(l)) => l.clone(),
        ("local", None) => a.host.name().to_string(),
        (given, _) => given.to_string(),
    };
    crate::kernel::id::check_agent(&agent)?;
    let bin = bin_text(a.host, a.bin.as_deref(), &ctx.cwd)?;
    let plan = Plan { root, agent, bin };
    let mut wiring = match a.host {
        Host::Claude => hosts::claude(&plan)?,
        Host::Codex => hosts::codex(&plan)?,
        Host::Cron | Host::Systemd => {
            let s = sched::Sched::new(&plan, &a)?;
            if a.host == Host::Cron {
                sched::cron(&plan, &s)?
            } else {
                sched::systemd(&plan, &s)?
            }
        }
    };
    if let Some(p) = pointer {
        wiring.changes.insert(0, p);
    }
    if let Some(l) = login.filter(|l| *l != plan.agent) {
        let w = format!(
            "the database takes agent {}'s changes only from its own login, and this URL logs in as {}",
            plan.agent, l
        );
        wiring.extra.insert("warning".into(), json!(w));
    }
    if !a.dry_run {
        for c in &wiring.changes {
            files::apply(&plan.root, c)?;
        }
    }
    Ok(report(a.host, a.dry_run, wiring))
}

/// Refuses flags that do not fit the host.
fn check_flags(a: &Setup) -> Result<()> {
    if a.host.scheduled() {
        if a.cmd.is_empty() {
            return Err(Error::usage(format!(
                "setup {} needs the agent's command after `--`",
                a.host.name()
            ))
            .hint(format!(
                "for example `loopx setup {} --every 30m -- codex exec \"do the todo\"`",
                a.host.name()
            )));
        }
        return Ok(());
    }
    let stray = [
        ("--every", a.every.is_some()),
        ("--timeout", a.timeout.is_some()),
        ("--complete-on-success", a.complete_on_success),
        ("a command after `--`", !a.cmd.is_empty()),
    ];
    match stray.iter().find(|(_, given)| *given) {
        Some((name, _)) => Err(Error::usage(format!(
            "{name} is for cron and systemd, not {}",
            a.host.name()
        ))
        .hint(format!(
            "leave it out: {} runs its own turns",
            a.host.name()
        ))),
        None => Ok(()),
    }
}

/// The binary as written: `--bin`, else `loopx` (hosts with a PATH) or this binary (cron, systemd).
fn bin_text(host: Host, given: Option<&Path>, cwd: &Path) -> Result<String> {
    let path = match given {
        Some(p) if host.scheduled() => cwd.join(p),
        Some(p) => p.to_path_buf(),
        None if host.scheduled() => std::env::current_exe().map_err(|e| {
            Error::new(
                crate::kernel::Code::Io,
                format!("cannot find this binary's path: {e}"),
            )
            .hint("give it with `--bin /path/to/loopx`")
        })?,
        None => PathBuf::from("loopx"),
    };
    let text = path.to_str().ok_or_else(|| {
        Error::usage("the loopx binary's path is not valid UTF-8").hint("give another with --bin")
    })?;
    sched::check_word(text, "--bin")?;
    Ok(text.to_string())
}

/// The project root as an absolute path with no symlinks where it can be resolved.
fn absolute(root: &Path) -> PathBuf {
    root.canonicalize()
        .or_else(|_| std::path::absolute(root))
        .unwrap_or_else(|_| root.to_path_buf())
}

/// The answer: file by file, then what to do next.
fn report(host: Host, dry_run: bool, w: Wiring) -> Out {
    let mut text = String::new();
    for c in &w.changes {
        let verb = match (dry_run, c.step) {
            (_, Step::Unchanged) => "unchanged".to_string(),
            (true, act) => format!("would {}", act.verb()),
            (false, act) => act.as_str().to_string(),
        };
        text.push_str(&format!("{verb:<16} {}\n", esc(&c.rel)));
        if dry_run && c.step != Step::Unchanged {
            for line in String::from_utf8_lossy(&c.bytes).lines() {
                text.push_str(&format!("    {line}\n"));
            }
        }
    }
    if w.changes.iter().all(|c| c.step == Step::Unchanged) {
        text.push_str("nothing to change: already set up\n");
    } else if dry_run {
        text.push_str("dry run: nothing was written\n");
    }
    if let Some(Value::String(warn)) = w.extra.get("warning") {
        text.push_str(&format!("warning: {}\n", esc(warn)));
    }
    text.push_str(&format!("next: {}", w.next));
    let files: Vec<Value> = w
        .changes
        .iter()
        .map(|c| json!({"path": c.rel, "action": c.step.as_str()}))
        .collect();
    let mut out = Out::new("host", json!(host.name()), text)
        .with("files", json!(files))
        .with("next", json!(w.next))
        .with("dry_run", json!(dry_run));
    for (k, v) in w.extra {
        out = out.with(&k, v);
    }
    out
}
