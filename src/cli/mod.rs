//! The command-line face: clap definitions, dispatch, and the text and JSON output.

mod agent;
mod capture;
pub mod complete;
mod ctx;
mod doctor;
mod evidence;
mod gate;
mod goal;
mod hook;
mod identity;
mod man;
mod mcp;
mod monitor;
mod out;
mod owner;
pub mod owner_env;
mod projects;
mod prompt;
mod quota;
mod roster;
mod run_approved;
pub mod serve;
mod setup;
mod state;
mod store;
mod todo;
mod todo_check;
mod todo_claim;
mod todo_edit;
mod turn;
mod turn_step;

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use serde_json::Value;

pub use ctx::Ctx;
pub use out::{Out, answer_json, emit_error, error_json, usage_error};
use out::{emit, render};

use crate::kernel::{Code, Error, Result, Ts};

/// The end of `loopx --help`: an agent's turn and the exit codes.
const AFTER_HELP: &str = "\
An agent's turn, in one command:
  loopx turn --complete-on-success -- CMD ARGS...

An agent's turn, step by step (the breaker counts these turns):
  loopx turn start           should-run, then the claim: exit 3 is not now
  loopx todo update          evidence (git HEAD, changed files) captured for you
  loopx turn end --turn ID   done or released, and one slot spent
  loopx refresh-state        writes .loopx/STATE.md, prints the next turn's packet

Exit codes: 0 ok, 1 I/O, 2 usage, 3 not now or not ready, 4 conflict, 5 not found,
6 invalid state, 7 owner authority needed, 8 busy, 9 check failed.";

/// loopx: durable, auditable state for long-running AI agents, and the owner's decisions.
#[derive(Debug, Parser)]
#[command(
    name = "loopx",
    version,
    about,
    long_about = None,
    propagate_version = true,
    after_help = AFTER_HELP
)]
pub struct Cli {
    /// The project root that holds .loopx/ (default: this directory or the nearest parent with one).
    #[arg(
        long,
        global = true,
        env = "LOOPX_DIR",
        value_name = "DIR",
        help_heading = "Global options"
    )]
    pub dir: Option<PathBuf>,
    /// This agent's id (default: `local`).
    #[arg(
        long,
        visible_alias = "agent-id",
        global = true,
        env = "LOOPX_AGENT",
        value_name = "ID",
        help_heading = "Global options"
    )]
    pub agent: Option<String>,
    /// Print exactly one JSON object on stdout.
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,
    /// The database that keeps the project's state (default: `[store] url` in loopx.toml, else .loopx/).
    #[arg(
        long,
        global = true,
        env = "LOOPX_STORE",
        value_name = "URL",
        hide_env_values = true,
        help_heading = "Global options"
    )]
    pub store: Option<String>,
    /// The command (none: the board on a terminal, status otherwise).
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

/// Every command.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Create .loopx/ with an objective.
    #[command(
        after_help = "Example:\n  loopx start-goal --goal-text \"Run a multi-day benchmark suite\" --success \"every suite has a baseline\""
    )]
    StartGoal(goal::StartGoal),
    /// Show, pause, resume or complete the goal.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx goal show\n  loopx goal pause --reason \"waiting for the new data set\"\n  loopx goal resume"
    )]
    Goal(goal::GoalCmd),
    /// Check every file, the journal, leases, temp files and the lock.
    #[command(after_help = "Example:\n  loopx doctor --fix")]
    Doctor {
        /// Repair what is safe and say what was done.
        #[arg(long)]
        fix: bool,
    },
    /// The objective, counts, claimed todos, pending gates and quota.
    #[command(after_help = "Example:\n  loopx status --json")]
    Status,
    /// Add, list, claim, update and release todos.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx todo add \"Parse the forecast API response\" --priority P1\n  loopx --agent executor todo claim\n  loopx --agent executor todo update --evidence \"parser done, 12 tests pass\" --status done"
    )]
    Todo(todo::TodoCmd),
    /// Ask the owner questions, and decide them.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx --agent executor gate open \"Which cache store?\" --blocks t-4kq9zx --option sqlite --option postgres\n  loopx gate list\n  loopx gate approve g-7hw2ma --option sqlite --reason \"go ahead\""
    )]
    Gate(gate::GateCmd),
    /// Whether to run a turn, and the spend of turns.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx --agent executor quota should-run\n  loopx --agent executor quota spend-slot --tokens 12000\n  loopx quota set --slots 50 --window 24h"
    )]
    Quota(quota::QuotaCmd),
    /// Run one bounded turn: should-run, claim, the command (lease renewed), evidence, slot.
    Turn(turn::Turn),
    /// Run a gate's approved action once (a command, or a payload handed over).
    RunApproved(run_approved::RunApproved),
    /// Run turns in a loop, sleeping what should-run says, until paused, complete or Ctrl-C.
    Heartbeat(turn::Heartbeat),
    /// Write STATE.md and print what an agent needs for its next turn.
    #[command(after_help = "Example:\n  loopx refresh-state")]
    RefreshState,
    /// The journal, newest last.
    Log(state::LogArgs),
    /// The owner's key: create it, show it, seal the owner's facts.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx owner init\n  loopx owner show\n  loopx owner seal"
    )]
    Owner(owner::OwnerCmd),
    /// Commands the owner runs on events (a gate opened, a budget spent, ...).
    #[command(
        subcommand,
        after_help = "Example:\n  loopx hook set gate.opened -- notify-send loopx \"a gate waits\"\n  loopx hook list\n  loopx hook remove gate.opened"
    )]
    Hook(hook::HookCmd),
    /// Agents' capabilities: declare them, show them; the owner fixes them and per-agent slots.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx --agent executor agent set --capability code --capability code.rust\n  loopx agent show executor\n  loopx agent fix executor --capability code --slots 20"
    )]
    Agent(agent::AgentCmd),
    /// The terminal board: watch .loopx/ live, decide gates, manage leases.
    #[command(
        after_help = "Example:\n  loopx board --readonly --theme high-contrast\n  loopx board --all"
    )]
    Board {
        /// Every project of `loopx projects list` on one screen; Enter opens one's board.
        #[arg(long)]
        all: bool,
        /// Show only: every change is off.
        #[arg(long)]
        readonly: bool,
        /// Poll for changes instead of watching (network file systems).
        #[arg(long)]
        poll: bool,
        /// A theme: dark, light, high-contrast, or a path to a .toml theme file.
        #[arg(long, value_name = "NAME|FILE")]
        theme: Option<String>,
        /// How often at most the board seals new journal lines with the owner's key, in
        /// milliseconds (for tests; a minute otherwise).
        #[arg(long, hide = true, value_name = "MS",
              value_parser = clap::value_parser!(u32).range(100..=3_600_000))]
        seal_every: Option<u32>,
    },
    /// The projects `loopx board --all` shows: add, remove, list.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx projects add ~/work/wx\n  loopx projects add --name api ../api\n  loopx projects list\n  loopx projects remove api\n  loopx board --all"
    )]
    Projects(projects::ProjectsCmd),
    /// A throwaway project with simulated agents, and the board on it.
    #[command(after_help = "Example:\n  loopx demo --keep")]
    Demo {
        /// Keep the demo project instead of removing it on exit.
        #[arg(long)]
        keep: bool,
        /// A theme for the board.
        #[arg(long, value_name = "NAME|FILE")]
        theme: Option<String>,
    },
    /// Monitors: watchers' checks (propose, approve, revoke), the list, and `poll`.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx todo add \"Watch PR 12\" --every 10m\n  loopx monitor propose t-zs7t4k -- gh pr view 12 --json state,reviews\n  loopx monitor approve t-zs7t4k\n  loopx monitor poll"
    )]
    Monitor(monitor::MonitorCmd),
    /// Every agent seen: last seen, leases held, turns and spend in the window, state.
    #[command(after_help = "Example:\n  loopx agents --json")]
    Agents,
    /// Evidence across todos: filter it, and find the best run of a metric.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx evidence list --todo t-4kq9zx\n  loopx evidence list --metric accuracy --best max --json"
    )]
    Evidence(evidence::EvidenceCmd),
    /// The PostgreSQL store: create its schema and roles, import and export a project.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx --store postgres://admin@db/loopx store migrate\n  loopx --store postgres://owner@db/loopx store import --from .\n  loopx --store postgres://owner@db/loopx store export --to backup"
    )]
    Store(store::StoreCmd),
    /// A Model Context Protocol server on stdio: the agent's commands as tools, STATE.md as a resource.
    #[command(after_help = "Example:\n  loopx --agent claude mcp")]
    Mcp,
    /// Keep the project warm: answer `quota should-run` and a quiet `monitor poll` from memory.
    ///
    /// Runs in the foreground until idle for --idle or until .loopx/ is gone. While it runs,
    /// those commands ask it over a local socket (this user's, this binary's) and cost what
    /// changed since the last question, not what exists; without it they load as usual.
    #[command(after_help = "Example:\n  loopx serve --idle 8h")]
    Serve {
        /// Stop after this long without a question (1s to 30d).
        #[arg(long, value_name = "DUR", default_value = "1h")]
        idle: crate::kernel::Dur,
        /// Say on stderr how each question was answered.
        #[arg(long)]
        verbose: bool,
    },
    /// Write the wiring for a host into the project: claude, codex, cron or systemd.
    #[command(
        after_help = "Example:\n  loopx --agent nightly setup cron --every 1h --complete-on-success -- ./agent.sh\n  \
          loopx --store postgres://a1@db.internal/wx --dir /srv/wx setup claude\n\n\
          On a database, the wiring runs `loopx --dir ROOT ...` and reaches the database through\n\
          ROOT's .loopx/loopx.toml ([store] url), never a URL in a crontab, unit or host config.\n\
          ROOT is the project whose pointer names the database, else the work dir (--dir, else\n\
          here), where setup writes the pointer (mode 0600) when the URL holds no password; a URL\n\
          with one is refused: write the pointer yourself. The agent id defaults to the URL's login."
    )]
    Setup(setup::Setup),
    /// Print the short protocol an agent follows each turn, for its runtime.
    #[command(after_help = "Example:\n  loopx agent-prompt --runtime claude >> CLAUDE.md")]
    AgentPrompt(prompt::AgentPrompt),
    /// Shell completions (of commands, flags, and todo and gate ids): the script to source.
    #[command(
        after_help = "Example:\n  loopx completions bash > ~/.local/share/bash-completion/completions/loopx"
    )]
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// The manual pages: loopx.1 on stdout, or every page into a directory.
    #[command(hide = true)]
    Man {
        /// Write loopx.1 and one page per subcommand (loopx-todo-claim.1 ...) into DIR.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// Serialises any model value to JSON.
pub fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Runs the command line; returns the exit code.
pub fn main() -> i32 {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(exit) = serve::client::ask(&args) {
        return exit;
    }
    let json_wanted = args.iter().any(|a| a == "--json");
    let cli = match Cli::try_parse_from(&args) {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return 0;
            }
            if !json_wanted
                && matches!(
                    e.kind(),
                    ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                )
            {
                let _ = e.print();
                return 2;
            }
            if json_wanted {
                emit_error(true, &usage_error(&e));
                return 2;
            }
            let _ = e.print();
            return 2;
        }
    };
    run(cli)
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    let json = cli.json;
    let unnamed = cli.agent.is_none();
    let result = (|| {
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
        let mut ctx = Ctx {
            json,
            agent,
            dir: cli.dir.clone(),
            cwd,
            now,
            lock_wait,
            store_url: None,
            explicit_store: cli.store.as_deref().is_some_and(|u| !u.is_empty()),
            projects: crate::store::projects::path_of(
                std::env::var_os("XDG_CONFIG_HOME"),
                std::env::var_os("HOME"),
            ),
            key: crate::store::owner::KeyAt::resolve(
                owner_env::value(),
                std::env::var_os("XDG_CONFIG_HOME"),
                std::env::var_os("HOME"),
            ),
            by_hook: std::env::var_os(crate::runtime::hooks::EVENT_VAR)
                .map(|v| v.to_string_lossy().into()),
        };
        ctx.store_url = ctx.choose_store(cli.store.as_deref())?;
        let beside = unnamed && identity::writes_as_agent(&cli.cmd);
        let out = dispatch(&ctx, cli.cmd)?;
        if beside {
            identity::warn_beside_others(&ctx);
        }
        Ok(out)
    })();
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

/// Refuses an over-long agent id before it is echoed in a message (`--agent` or `LOOPX_AGENT`).
fn check_agent_len(agent: &str) -> Result<()> {
    let max = crate::kernel::bounds::AGENT_MAX;
    if agent.len() > max {
        return Err(Error::usage(format!(
            "the agent id (--agent or LOOPX_AGENT) is {} bytes long; the most is {max}",
            agent.len()
        )));
    }
    Ok(())
}

/// An environment variable as text; `None` when unset, exit 2 when not UTF-8.
fn env_text(name: &str) -> Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(Error::usage(format!("{name} is not valid UTF-8")))
        }
    }
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

fn dispatch(ctx: &Ctx, cmd: Option<Cmd>) -> Result<Out> {
    match cmd {
        None if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() && !ctx.json => {
            crate::board::run(ctx.open()?, crate::board::Options::default())?;
            Ok(Out::default())
        }
        None => state::status(ctx),
        Some(Cmd::Board {
            all,
            readonly,
            poll,
            theme,
            seal_every,
        }) => {
            let opts = crate::board::Options {
                readonly,
                poll,
                theme,
                seal_every: seal_every.map(|ms| crate::kernel::Dur(i64::from(ms))),
            };
            board(ctx, all, opts)
        }
        Some(Cmd::Projects(c)) => projects::run(ctx, c),
        Some(Cmd::Demo { keep, theme }) => {
            let text = crate::board::demo::run(keep, theme)?;
            Ok(Out::new("demo", Value::String(text.clone()), text))
        }
        Some(Cmd::StartGoal(a)) => goal::start(ctx, a),
        Some(Cmd::Goal(c)) => goal::run(ctx, c),
        Some(Cmd::Doctor { fix }) => doctor::doctor(ctx, fix),
        Some(Cmd::Status) => state::status(ctx),
        Some(Cmd::Todo(c)) => todo::run(ctx, c),
        Some(Cmd::Gate(c)) => gate::run(ctx, c),
        Some(Cmd::Quota(c)) => quota::run(ctx, c),
        Some(Cmd::Turn(t)) => turn::turn(ctx, t),
        Some(Cmd::RunApproved(a)) => run_approved::run(ctx, a),
        Some(Cmd::Heartbeat(h)) => turn::heartbeat(ctx, h),
        Some(Cmd::RefreshState) => state::refresh(ctx),
        Some(Cmd::Log(a)) => state::log(ctx, a),
        Some(Cmd::Owner(c)) => owner::run(ctx, c),
        Some(Cmd::Monitor(c)) => monitor::run(ctx, c),
        Some(Cmd::Hook(c)) => hook::run(ctx, c),
        Some(Cmd::Agent(c)) => agent::run(ctx, c),
        Some(Cmd::Agents) => roster::run(ctx),
        Some(Cmd::Evidence(c)) => evidence::run(ctx, c),
        Some(Cmd::Store(c)) => store::run(ctx, c),
        Some(Cmd::Mcp) => mcp::serve(ctx),
        Some(Cmd::Serve { idle, verbose }) => serve::run(ctx, idle, verbose),
        Some(Cmd::Setup(a)) => setup::run(ctx, a),
        Some(Cmd::AgentPrompt(a)) => prompt::run(ctx, a),
        Some(Cmd::Completions { shell }) => {
            let text = complete::script(shell)?;
            Ok(Out::new(
                "script",
                Value::String(text.clone()),
                text.trim_end(),
            ))
        }
        Some(Cmd::Man { out }) => man::run(out),
    }
}

/// True when standard input is a terminal a person can answer at.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// A short "in 12m" / "3m ago" for people.
pub fn rel_time(now: Ts, at: Ts) -> String {
    let d = at.since(now);
    if d.0 >= 0 {
        format!("in {}", crate::kernel::Dur(d.0 / 1000 * 1000))
    } else {
        format!(
            "{} ago",
            crate::kernel::Dur(d.0.saturating_neg() / 1000 * 1000)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn cli_definition_is_sound() {
        Cli::command().debug_assert();
    }
}
