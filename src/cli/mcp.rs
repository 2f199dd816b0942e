//! The CLI's side of `loopx mcp`: the commands the MCP server is a transport of, handed to it
//! when it starts.

use std::sync::Arc;

use clap::{CommandFactory as _, Parser as _};
use serde_json::Value;

use super::{Cli, Cmd, Ctx, Out, answer_json, error_json, usage_error};
use crate::kernel::{Error, Result, Ts};

/// What runs one parsed command: the CLI's dispatch, handed in when the server starts.
pub type Run = fn(&Ctx, Option<Cmd>) -> Result<Out>;

/// The commands of one session: its agent and project, fixed when it starts, and their runner.
struct Session(Ctx, Run);

impl crate::mcp::Commands for Session {
    fn agent(&self) -> &str {
        &self.0.agent
    }

    fn command(&self) -> clap::Command {
        Cli::command()
    }

    fn call(&self, now: Ts, argv: &[String]) -> (Value, i32) {
        let ctx = Ctx {
            now,
            ..self.0.clone()
        };
        call(&ctx, self.1, argv)
    }

    fn state_md(&self, now: Ts) -> Result<String> {
        super::state::refresh(&Ctx {
            now,
            ..self.0.clone()
        })
        .map(|o| o.text)
    }

    fn error_json(&self, e: &Error) -> Value {
        error_json(e)
    }
}

/// `loopx mcp`: serves the agent's commands over MCP on stdio until the client goes.
pub fn serve(ctx: &Ctx, run: Run) -> Result<Out> {
    // No owner change is signed in this process, whatever key the environment points at.
    let ctx = Ctx {
        key: crate::store::owner::KeyAt::Forbidden,
        ..ctx.clone()
    };
    // Found now, so a session started outside a project (or on a store it cannot reach) says so at once.
    ctx.open()?.journal_end()?;
    crate::mcp::serve(Arc::new(Session(ctx, run)))?;
    Ok(Out::default())
}

/// Runs one command line inside this process, as `--json` would answer it: the JSON answer and
/// the exit code.
fn call(ctx: &Ctx, run: Run, argv: &[String]) -> (Value, i32) {
    let parsed = Cli::try_parse_from(argv).map_err(|e| usage_error(&e));
    match parsed.and_then(|cli| run(ctx, cli.cmd)) {
        Ok(out) => (answer_json(out.json), out.exit),
        Err(e) => (error_json(&e), e.code.exit_code()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tools::{TOOLS, argv, command, find, schema};
    use serde_json::{Map, json};

    fn root() -> clap::Command {
        Cli::command()
    }

    #[test]
    fn every_tool_names_a_command() {
        for t in TOOLS {
            let root = root();
            let c = command(&root, t).unwrap_or_else(|| panic!("{}: no such command", t.name));
            assert!(
                c.get_subcommands().next().is_none(),
                "{} is not a leaf",
                t.name
            );
        }
    }

    #[test]
    fn values_never_become_flags() {
        let t = find("todo_add").unwrap();
        let mut m = Map::new();
        m.insert("title".into(), json!("--json"));
        m.insert("depends_on".into(), json!(["a", "b"]));
        let line = argv(&root(), t, &m).unwrap();
        assert_eq!(line[line.len() - 2..], ["--".to_string(), "--json".into()]);
        assert!(line.contains(&"--depends-on=a".to_string()));
        let mut bad = Map::new();
        bad.insert("body_file".into(), json!("-"));
        assert!(argv(&root(), t, &bad).is_err(), "stdin is the protocol's");
    }

    #[test]
    fn schemas_type_their_arguments() {
        let s = schema(&root(), find("todo_update").unwrap());
        assert_eq!(s["properties"]["fence"]["type"], "integer");
        assert_eq!(s["properties"]["evidence"]["type"], "array");
        let c = schema(&root(), find("todo_claim").unwrap());
        assert_eq!(c["properties"]["id"]["type"], "string");
        assert_eq!(c["properties"]["worktree"]["type"], "boolean");
        assert!(c["properties"]["worktree"].get("enum").is_none(), "{c:?}");
        let g = schema(&root(), find("gate_open").unwrap());
        assert_eq!(g["required"], json!(["question"]));
        assert_eq!(
            g["properties"]["option"]["type"], "array",
            "named as the flag"
        );
    }
}
