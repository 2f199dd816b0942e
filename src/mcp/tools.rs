//! The MCP tools: which CLI command each one is, its JSON schema (read off the clap definition,
//! so the two never drift), and its arguments turned back into a command line.

use std::any::TypeId;

use clap::{Arg, ArgAction};
use serde_json::{Map, Value, json};

use crate::kernel::{Error, Result};

/// One tool: its name, the command it runs, and the arguments it leaves out.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The tool's name.
    pub name: &'static str,
    /// The subcommand path, as typed after `loopx`.
    pub path: &'static [&'static str],
    /// What it does, for the agent.
    pub about: &'static str,
    /// True when it changes nothing.
    pub read_only: bool,
    /// Arguments not offered (a file read from stdin, which is the protocol's; an owner act).
    pub skip: &'static [&'static str],
}

/// Every tool: the agent's side of loopx. Owner acts are not here, and the server refuses them.
pub const TOOLS: &[Spec] = &[
    spec(
        "status",
        &["status"],
        "The objective, counts, claimed todos, pending gates and quota.",
        true,
    ),
    spec(
        "should_run",
        &["quota", "should-run"],
        "Whether this agent should run a turn now, and the todo it would take. decision `run` (exit 0) or another decision with a reason (exit 3).",
        true,
    ),
    Spec {
        skip: &["body_file"],
        ..spec(
            "todo_add",
            &["todo", "add"],
            "Add a todo; answers it with its id.",
            false,
        )
    },
    spec(
        "todo_list",
        &["todo", "list"],
        "List todos (open, blocked and deferred; status done or cancelled for the archive).",
        true,
    ),
    spec(
        "todo_show",
        &["todo", "show"],
        "One todo, why it waits, and its recent evidence.",
        true,
    ),
    spec(
        "todo_claim",
        &["todo", "claim"],
        "Take the best ready todo (or id) with a lease and a fence; `paths` reserves file globs with it (like src/store/**); `worktree`: also a git worktree of its own on branch loopx/ID (its absolute path answered as `worktree`). Nothing ready: exit 3 `nothing_ready`; held by another, or paths overlapping another agent's reservation: exit 4 `lease_conflict`, the holder named.",
        false,
    ),
    spec(
        "todo_renew",
        &["todo", "renew"],
        "Extend your lease.",
        false,
    ),
    spec(
        "todo_update",
        &["todo", "update"],
        "Append evidence (captured from git when none is given) and change status; needs your live lease (exit 4 `stale_fence` or `lease_conflict` otherwise). A done of a todo with an owner-approved check runs that check first: it fails, exit 9 `check_failed` (the todo stays yours, the run is in its evidence); edited or unapproved, exit 7.",
        false,
    ),
    spec(
        "todo_check_propose",
        &["todo", "check", "propose"],
        "Propose the check that proves a todo done (a shell command, printable ASCII); it runs at your done once the owner approves its exact text.",
        false,
    ),
    Spec {
        skip: &["owner"],
        ..spec(
            "todo_release",
            &["todo", "release"],
            "Give your lease back.",
            false,
        )
    },
    spec(
        "gate_open",
        &["gate", "open"],
        "Ask the owner a question; only the owner decides it. With action_cmd and argv (or action_file), the approval is for that exact action.",
        false,
    ),
    spec(
        "gate_list",
        &["gate", "list"],
        "List gates, with their decisions.",
        true,
    ),
    spec(
        "gate_show",
        &["gate", "show"],
        "One gate in full: its decision, and the action it holds with its sha256.",
        true,
    ),
    spec(
        "run_approved",
        &["run-approved"],
        "Run the action an approved gate holds, once (a payload comes back in `payload`).",
        false,
    ),
    spec(
        "quota_spend",
        &["quota", "spend-slot"],
        "Record a spent turn; the same agent's turn id twice in the window is recorded once.",
        false,
    ),
    spec(
        "refresh_state",
        &["refresh-state"],
        "Write STATE.md and answer what this agent needs for its next turn.",
        false,
    ),
    spec(
        "turn_start",
        &["turn", "start"],
        "Begin a turn: should-run, then the claim, under a turn id (calling it again with the same id gives the same claim). Not now: exit 3 with should-run's answer.",
        false,
    ),
    spec(
        "turn_end",
        &["turn", "end"],
        "End the turn: evidence (summary), done or release, and one slot, once per turn id.",
        false,
    ),
];

const fn spec(
    name: &'static str,
    path: &'static [&'static str],
    about: &'static str,
    read_only: bool,
) -> Spec {
    Spec {
        name,
        path,
        about,
        read_only,
        skip: &[],
    }
}

/// The tool named `name`.
pub fn find(name: &str) -> Option<&'static Spec> {
    TOOLS.iter().find(|t| t.name == name)
}

/// Arguments every command has, which the server fixes for the session.
const GLOBAL: &[&str] = &["dir", "agent", "json", "help", "version"];

/// The clap command a tool runs, found in `root` (the definition of `loopx`).
pub fn command<'a>(root: &'a clap::Command, spec: &Spec) -> Option<&'a clap::Command> {
    let mut cmd = root;
    for p in spec.path {
        cmd = cmd.find_subcommand(p)?;
    }
    Some(cmd)
}

/// The clap arguments a tool offers, in definition order.
fn args(root: &clap::Command, spec: &Spec) -> Vec<Arg> {
    let Some(cmd) = command(root, spec) else {
        return Vec::new();
    };
    cmd.get_arguments()
        .filter(|a| {
            let id = a.get_id().as_str();
            !GLOBAL.contains(&id) && !spec.skip.contains(&id) && !a.is_hide_set()
        })
        .cloned()
        .collect()
}

/// What JSON type an argument takes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Flag,
    Int,
    Text,
}

fn kind(a: &Arg) -> Kind {
    if matches!(a.get_action(), ArgAction::SetTrue) {
        return Kind::Flag;
    }
    let t = a.get_value_parser().type_id();
    let ints = [
        TypeId::of::<u64>(),
        TypeId::of::<u32>(),
        TypeId::of::<i64>(),
        TypeId::of::<i32>(),
    ];
    if ints.iter().any(|i| t == *i) {
        Kind::Int
    } else {
        Kind::Text
    }
}

/// The property's name: the long flag with `_` for `-` (`depends_on`), or a positional's id.
fn key(a: &Arg) -> String {
    match a.get_long() {
        Some(l) => l.replace('-', "_"),
        None => a.get_id().as_str().to_string(),
    }
}

fn repeats(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Append)
}

/// The tool's input schema: one property per argument, named as the CLI's flag with `_`.
pub fn schema(root: &clap::Command, spec: &Spec) -> Map<String, Value> {
    let mut props = Map::new();
    let mut required = Vec::new();
    for a in args(root, spec) {
        let id = key(&a);
        let mut one = match kind(&a) {
            Kind::Flag => json!({"type": "boolean"}),
            Kind::Int => json!({"type": "integer"}),
            Kind::Text => json!({"type": "string"}),
        };
        let values: Vec<String> = a
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        // A flag's parser offers "true" and "false" as text; a boolean needs no enum.
        if !values.is_empty() && !matches!(kind(&a), Kind::Flag) {
            one["enum"] = json!(values);
        }
        let mut p = if repeats(&a) {
            json!({"type": "array", "items": one})
        } else {
            one
        };
        if let Some(h) = a.get_help() {
            p["description"] = json!(h.to_string());
        }
        if let Some(d) = a.get_default_values().first() {
            p["default"] = json!(d.to_string_lossy());
        }
        if a.is_required_set() {
            required.push(id.clone());
        }
        props.insert(id, p);
    }
    let mut s = Map::new();
    s.insert("type".into(), json!("object"));
    s.insert("properties".into(), Value::Object(props));
    if !required.is_empty() {
        s.insert("required".into(), json!(required));
    }
    s.insert("additionalProperties".into(), json!(false));
    s
}

/// The most arguments one call may give (repeatable ones counted per value).
const ARGS_MAX: usize = 256;

/// The command line a call runs: `loopx --json PATH... --flag=value... -- POSITIONALS...`.
/// Values go as `--flag=value` and positionals after `--`, so no value is ever read as a flag.
pub fn argv(root: &clap::Command, spec: &Spec, given: &Map<String, Value>) -> Result<Vec<String>> {
    let offered = args(root, spec);
    let mut line: Vec<String> = vec!["loopx".into(), "--json".into()];
    line.extend(spec.path.iter().map(|p| p.to_string()));
    // Positionals in the command's order (a question before the command of `--action-cmd`).
    let mut positionals: Vec<(usize, String)> = Vec::new();
    for (key, value) in given {
        let Some((at, a)) = offered
            .iter()
            .enumerate()
            .find(|(_, a)| self::key(a) == *key)
        else {
            let names: Vec<String> = offered.iter().map(self::key).collect();
            return Err(
                Error::usage(format!("{} takes no argument `{key}`", spec.name))
                    .hint(format!("it takes: {}", names.join(", "))),
            );
        };
        for v in values(spec, key, a, value)? {
            match a.get_long() {
                Some(long) if kind(a) == Kind::Flag => line.push(format!("--{long}")),
                Some(long) => line.push(format!("--{long}={v}")),
                None => positionals.push((at, v)),
            }
        }
    }
    if line.len() + positionals.len() > ARGS_MAX {
        return Err(Error::usage(format!(
            "at most {ARGS_MAX} values in one call"
        )));
    }
    positionals.sort_by_key(|(at, _)| *at);
    if !positionals.is_empty() {
        line.push("--".into());
        line.extend(positionals.into_iter().map(|(_, v)| v));
    }
    Ok(line)
}

/// One argument's values as command-line text; a false flag gives none.
fn values(spec: &Spec, key: &str, a: &Arg, v: &Value) -> Result<Vec<String>> {
    let bad = |want: &str| {
        Error::usage(format!("{}: `{key}` must be {want}", spec.name))
            .hint("see the tool's input schema")
    };
    let one = |v: &Value| -> Result<String> {
        match (kind(a), v) {
            (Kind::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(n.to_string()),
            (Kind::Int, _) => Err(bad("an integer")),
            (Kind::Text, Value::String(s)) => Ok(s.clone()),
            (Kind::Text, Value::Number(n)) => Ok(n.to_string()),
            (Kind::Text, _) => Err(bad("a string")),
            (Kind::Flag, _) => Err(bad("true or false")),
        }
    };
    match (kind(a), v) {
        (Kind::Flag, Value::Bool(true)) => Ok(vec![String::new()]),
        (Kind::Flag, Value::Bool(false)) | (_, Value::Null) => Ok(Vec::new()),
        (Kind::Flag, _) => Err(bad("true or false")),
        (_, Value::Array(items)) if repeats(a) => items.iter().map(one).collect(),
        (_, Value::Array(_)) => Err(bad("a single value")),
        _ if repeats(a) => Ok(vec![one(v)?]),
        _ => Ok(vec![one(v)?]),
    }
}
