//! The command line's definition: the global options and every command, as clap derives them.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::{
    agent, evidence, gate, goal, hook, monitor, owner, projects, prompt, quota, run_approved,
    setup, state, store, todo, turn,
};

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

/// `web`: the server's options, or `web pair`.
#[derive(Debug, clap::Args)]
pub struct WebArgs {
    /// `pair`: enroll a phone (run where the owner's key is, while `loopx web` runs).
    #[command(subcommand)]
    pub cmd: Option<WebCmd>,
    /// Serve every project in projects.toml.
    #[arg(long)]
    pub all: bool,
    /// The address to listen on; any but a loopback address needs --tls-cert and --tls-key.
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// The TLS certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The TLS private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The URL a phone opens, when it is not the listen address (a tunnel, a tailnet, a proxy).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
}

/// `web ...`.
#[derive(Debug, Subcommand)]
pub enum WebCmd {
    /// Enroll a phone: a one-time URL and its QR code, then your yes here signs its key.
    #[command(after_help = "Example:\n  loopx web pair --name phone")]
    Pair {
        /// The device's name (a-z, 0-9, -); default `phone`, `phone-2`, ...
        #[arg(long)]
        name: Option<String>,
        /// The base URL the phone opens (default: the running `loopx web`'s).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
    },
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
    /// A web face for the owner's phone: gates to decide, live; devices enrolled with `web pair`.
    #[command(
        after_help = "Examples:\n  loopx web\n  loopx web pair\n  loopx web --all --listen 0.0.0.0:7878 --tls-cert cert.pem --tls-key key.pem"
    )]
    Web(WebArgs),
    /// A Model Context Protocol server on stdio: the agent's commands as tools, STATE.md as a resource.
    #[command(after_help = "Example:\n  loopx --agent claude mcp")]
    Mcp,
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
