//! `agent-prompt`: the short protocol an agent follows each turn, in its runtime's words.

use clap::{Args, ValueEnum};
use serde_json::json;

use super::{Ctx, Out};
use crate::kernel::Result;

/// The runtimes a prompt is written for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Runtime {
    /// Claude Code: the loopx MCP tools and the SessionStart hook.
    Claude,
    /// Codex CLI: an AGENTS.md section; the MCP tools or the shell commands.
    Codex,
    /// Any runtime: the shell commands and their exit codes.
    Generic,
}

impl Runtime {
    /// The runtime's name as given on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::Claude => "claude",
            Runtime::Codex => "codex",
            Runtime::Generic => "generic",
        }
    }
}

/// `agent-prompt`.
#[derive(Debug, Args)]
pub struct AgentPrompt {
    /// The runtime whose words the prompt uses.
    #[arg(long, value_enum, default_value = "generic")]
    runtime: Runtime,
}

/// The exit codes, in one line.
const EXITS: &str = "Exit codes: 0 ok, 2 usage, 3 not now (normal: stop the turn), \
4 conflict (another agent holds it: leave it), 5 not found, 6 invalid state, \
7 owner authority needed, 8 busy (try again), 9 the todo's check failed (not done: read its \
output in the evidence, fix the work, try again).";

/// What the breaker counts, in one line.
const BREAKER: &str = "A turn (from its start to its end, or one `loopx turn`) that leaves no \
evidence, no git change (in its worktree, if it has one) and no better metric makes no \
progress: after 3 such turns in a row the todo is parked and the owner asked; a todo that \
keeps failing waits longer each time. Record what each turn proved or ruled out.";

const CLAUDE: &str = "\
This project's work queue is in .loopx/ (never edit it by hand). Use the MCP server `loopx`.
Each turn:
1. Call mcp__loopx__turn_start. It decides whether to run and claims a todo under a turn id.
   Anything but run: stop and report its reason (not now is normal).
2. Work only on the todo it gave you. Long work: mcp__loopx__todo_renew before the lease ends.
3. A question only the owner can decide: mcp__loopx__gate_open blocking that todo, then
   mcp__loopx__todo_release and mcp__loopx__turn_end, and stop.
4. Call mcp__loopx__turn_end with the turn, todo and fence turn_start gave, a summary of your
   evidence (tests run, files, commits) and done if it is. It records the turn's slot.
The SessionStart hook puts `loopx refresh-state` in your context; mcp__loopx__refresh_state gives
it again, mcp__loopx__status the whole project, mcp__loopx__todo_add records follow-up work.
Without the tools, the shell: `loopx turn start --json`, then
`loopx turn end --turn ID --done --summary TEXT`.";

const CODEX: &str = "\
This project's work queue is in `.loopx/`; never edit it by hand. Your agent id is in
LOOPX_AGENT (or pass `--agent ID`). Each turn, with the `loopx` MCP tools if configured
(turn_start, todo_update, turn_end), else the shell:
1. `loopx turn start`: should-run, then the claim under a turn id; note its turn, todo and
   fence. Exit 3: not now, stop the turn.
2. Work only on that todo. Long work: `loopx todo renew`. A question only the owner can
   decide: `loopx gate open \"QUESTION\" --blocks ID`, then `loopx todo release` and
   `loopx turn end --turn TURN`, and stop.
3. Record what you prove as you go: `loopx todo update --evidence \"WHAT YOU PROVED\"`
   (`--metric NAME=VALUE`, `--artifact PATH` add more).
4. `loopx turn end --turn TURN --done --summary \"WHAT YOU PROVED\"` (leave out `--done`
   when it is not done): it records the turn and its slot.
5. `loopx refresh-state`: the packet for the next turn.
Follow-up work: `loopx todo add \"TITLE\"`. Add `--json` for one JSON object.";

const GENERIC: &str = "\
The work queue is in .loopx/ (never edit it by hand). Name yourself with --agent ID or
LOOPX_AGENT, the project with --dir DIR or LOOPX_DIR. Each turn:
1. loopx turn start             (should-run, then the claim: note its turn, todo and fence;
                                exit 3: not now, stop the turn)
2. Work only on that todo. Long work: loopx todo renew. A question only the owner can
   decide: loopx gate open \"QUESTION\" --blocks ID, then loopx todo release and
   loopx turn end --turn TURN, and stop.
3. loopx todo update --evidence \"WHAT YOU PROVED\"   (as you go; --metric NAME=VALUE and
   --artifact PATH add more)
4. loopx turn end --turn TURN --done --summary \"WHAT YOU PROVED\"
   (without --done when it is not done; it records the turn and its slot)
5. loopx refresh-state          (the packet for the next turn)
Or the whole turn in one command: loopx turn --complete-on-success -- CMD ARGS...
Add --json for one JSON object.";

/// Reservations and action gates, in two lines.
const PROVEN: &str = "Reserve the files a todo changes: `loopx todo claim --paths 'src/x/**'` \
(exit 4 names who holds an overlapping reservation: take other work). To run a command only \
the owner may allow: `loopx gate open \"QUESTION\" --action-cmd -- CMD ARGS...`; once approved, \
`loopx run-approved GATE` runs exactly that, once.";

/// The prompt text for a runtime.
pub fn text(runtime: Runtime) -> String {
    let body = match runtime {
        Runtime::Claude => CLAUDE,
        Runtime::Codex => CODEX,
        Runtime::Generic => GENERIC,
    };
    format!("{body}\n{BREAKER}\n{PROVEN}\n{EXITS}")
}

/// Runs `agent-prompt`: needs no project.
pub fn run(_ctx: &Ctx, a: AgentPrompt) -> Result<Out> {
    let prompt = text(a.runtime);
    Ok(Out::new("runtime", json!(a.runtime.name()), prompt.clone()).with("prompt", json!(prompt)))
}
