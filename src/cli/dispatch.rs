//! Which command runs: each parsed command handed to its module.

use std::io::IsTerminal;

use serde_json::Value;

use super::args::{Cmd, WebCmd};
use super::{
    Ctx, Out, agent, complete, doctor, evidence, gate, goal, hook, man, monitor, owner, projects,
    prompt, quota, roster, run_approved, setup, state, store, todo, turn,
};
use crate::kernel::Result;

/// Runs one parsed command (none: the board on a terminal, status otherwise).
pub(super) fn dispatch(ctx: &Ctx, cmd: Option<Cmd>) -> Result<Out> {
    let Some(cmd) = cmd else {
        if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() && !ctx.json {
            crate::board::run(ctx.open()?, crate::board::Options::default())?;
            return Ok(Out::default());
        }
        return state::status(ctx);
    };
    match cmd {
        Cmd::Board {
            all,
            readonly,
            poll,
            theme,
            seal_every,
        } => board(ctx, all, board_options(readonly, poll, theme, seal_every)),
        Cmd::Projects(c) => projects::run(ctx, c),
        Cmd::Demo { keep, theme } => demo(keep, theme),
        Cmd::StartGoal(a) => goal::start(ctx, a),
        Cmd::Goal(c) => goal::run(ctx, c),
        Cmd::Doctor { fix } => doctor::doctor(ctx, fix),
        Cmd::Status => state::status(ctx),
        Cmd::Todo(c) => todo::run(ctx, c),
        Cmd::Gate(c) => gate::run(ctx, c),
        Cmd::Quota(c) => quota::run(ctx, c),
        Cmd::Turn(t) => turn::turn(ctx, t),
        Cmd::RunApproved(a) => run_approved::run(ctx, a),
        Cmd::Heartbeat(h) => turn::heartbeat(ctx, h),
        Cmd::RefreshState => state::refresh(ctx),
        Cmd::Log(a) => state::log(ctx, a),
        Cmd::Owner(c) => owner::run(ctx, c),
        Cmd::Monitor(c) => monitor::run(ctx, c),
        Cmd::Hook(c) => hook::run(ctx, c),
        Cmd::Agent(c) => agent::run(ctx, c),
        Cmd::Agents => roster::run(ctx),
        Cmd::Evidence(c) => evidence::run(ctx, c),
        Cmd::Store(c) => store::run(ctx, c),
        Cmd::Mcp => super::mcp::serve(ctx, dispatch),
        Cmd::Web(w) => match w.cmd {
            Some(WebCmd::Pair { name, url }) => super::web_pair::run(ctx, name, url, ctx.json),
            None => super::web::serve(ctx, w),
        },
        Cmd::Setup(a) => setup::run(ctx, a),
        Cmd::AgentPrompt(a) => prompt::run(ctx, a),
        Cmd::Completions { shell } => completions(shell),
        Cmd::Man { out } => man::run(out),
    }
}

/// The board's options from its flags.
fn board_options(
    readonly: bool,
    poll: bool,
    theme: Option<String>,
    seal_every: Option<u32>,
) -> crate::board::Options {
    crate::board::Options {
        readonly,
        poll,
        theme,
        seal_every: seal_every.map(|ms| crate::kernel::Dur(i64::from(ms))),
    }
}

/// `demo`: the board on a throwaway project.
fn demo(keep: bool, theme: Option<String>) -> Result<Out> {
    let text = crate::board::demo::run(keep, theme)?;
    Ok(Out::new("demo", Value::String(text.clone()), text))
}

/// `completions SHELL`: the script to source.
fn completions(shell: clap_complete::Shell) -> Result<Out> {
    let text = complete::script(shell)?;
    Ok(Out::new(
        "script",
        Value::String(text.clone()),
        text.trim_end(),
    ))
}

/// `board`: the project's, or with `--all` the overview of every project in the owner's list.
fn board(ctx: &Ctx, all: bool, opts: crate::board::Options) -> Result<Out> {
    if all {
        let file = projects::list_path(ctx)?;
        let entries = crate::store::projects::read(&file)?.projects;
        crate::board::overview::run(entries, &ctx.env(), &ctx.cwd, opts)?;
    } else {
        crate::board::run(ctx.open()?, opts)?;
    }
    Ok(Out::default())
}
