//! The command-line face: clap definitions, dispatch, and the text and JSON output.

mod agent;
mod args;
mod capture;
pub mod complete;
mod ctx;
mod dispatch;
mod doctor;
mod entry;
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
mod setup;
mod state;
mod store;
mod todo;
mod todo_check;
mod todo_claim;
mod todo_edit;
mod turn;
mod turn_step;
mod web;
pub mod web_pair;

use std::io::IsTerminal;

use serde_json::Value;

pub use args::{Cli, Cmd};
pub use ctx::Ctx;
pub use entry::{ParseResult, main, parse, run};
pub use out::{Out, answer_json, emit_error, error_json, usage_error};

use crate::kernel::Ts;

/// Serialises any model value to JSON.
pub fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
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
