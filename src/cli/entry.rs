//! The one entry point: the command line parsed once, the environment resolved once into a
//! `Ctx`, the command run, its answer or error printed.

use std::ffi::OsString;

use clap::Parser as _;
use clap::error::ErrorKind;

use super::args::Cli;
use super::ctx::env_text;
use super::out::emit;
use super::{Ctx, dispatch, emit_error, identity, owner_env, usage_error};
use crate::kernel::{Code, Error, Result, Ts};

/// What parsing the command line gave.
#[derive(Debug)]
pub enum ParseResult {
    /// Help or the version was asked for: printed as clap words it, exit 0.
    Special(clap::Error),
    /// The command line is wrong: exit 2, as JSON when `--json` is among the words.
    Err { error: clap::Error, json: bool },
    /// A command to run.
    Ok(Box<Cli>),
}

/// Parses the words once.
pub fn parse(args: Vec<OsString>) -> ParseResult {
    match Cli::try_parse_from(&args) {
        Ok(cli) => ParseResult::Ok(Box::new(cli)),
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            ParseResult::Special(e)
        }
        Err(error) => ParseResult::Err {
            json: args.iter().any(|a| a == "--json"),
            error,
        },
    }
}

/// Runs the process's command line; returns the exit code.
pub fn main() -> i32 {
    match parse(std::env::args_os().collect()) {
        ParseResult::Special(e) => {
            let _ = e.print();
            0
        }
        ParseResult::Err { error, json: true } => {
            emit_error(true, &usage_error(&error));
            2
        }
        ParseResult::Err { error, json: false } => {
            let _ = error.print();
            2
        }
        ParseResult::Ok(cli) => run(*cli),
    }
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    let json = cli.json;
    let unnamed = cli.agent.is_none();
    let result = resolve(&cli).and_then(|ctx| {
        let beside = unnamed && identity::writes_as_agent(&cli.cmd);
        let out = dispatch::dispatch(&ctx, cli.cmd)?;
        if beside {
            identity::warn_beside_others(&ctx);
        }
        Ok(out)
    });
    match result {
        Ok(out) => {
            emit(json, out.json, &out.text);
            out.exit
        }
        Err(e) => {
            let e = if unnamed { identity::who_am_i(e) } else { e };
            emit_error(json, &e);
            e.code.exit_code()
        }
    }
}

/// The environment a command runs in, read once: the agent, the lock wait, the clock, the
/// working directory, the owner's list and key, the hook that runs us, and the store chosen.
fn resolve(cli: &Cli) -> Result<Ctx> {
    let agent = cli.agent.clone().unwrap_or_else(|| "local".to_string());
    check_agent_len(&agent)?;
    crate::kernel::id::check_agent(&agent)?;
    let lock_wait =
        crate::store::lock::lock_timeout_from(env_text("LOOPX_LOCK_TIMEOUT")?.as_deref())?;
    let now = Ts::checked_now().map_err(|m| {
        Error::new(Code::Io, m).hint("set the system clock to the right time, then try again")
    })?;
    let cwd = std::env::current_dir()
        .map_err(|e| Error::new(Code::Io, format!("no working directory: {e}")))?;
    let (config_home, home) = (
        std::env::var_os("XDG_CONFIG_HOME"),
        std::env::var_os("HOME"),
    );
    let mut ctx = Ctx {
        json: cli.json,
        agent,
        dir: cli.dir.clone(),
        cwd,
        now,
        lock_wait,
        store_url: None,
        explicit_store: cli.store.as_deref().is_some_and(|u| !u.is_empty()),
        projects: crate::store::projects::path_of(config_home.clone(), home.clone()),
        key: crate::store::owner::KeyAt::resolve(owner_env::value(), config_home, home),
        by_hook: std::env::var_os(crate::runtime::hooks::EVENT_VAR)
            .map(|v| v.to_string_lossy().into()),
    };
    ctx.store_url = ctx.choose_store(cli.store.as_deref())?;
    Ok(ctx)
}

/// Refuses an over-long agent id before it is echoed in a message (`--agent` or `LOOPX_AGENT`).
fn check_agent_len(agent: &str) -> Result<()> {
    let max = crate::kernel::limits::AGENT_MAX;
    if agent.len() > max {
        return Err(Error::usage(format!(
            "the agent id (--agent or LOOPX_AGENT) is {} bytes long; the most is {max}",
            agent.len()
        )));
    }
    Ok(())
}
