//! `start-goal` and `goal`: creating, showing, pausing, resuming and completing the objective.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, Out, to_json};
use crate::kernel::id::Kind;
use crate::kernel::limits;
use crate::kernel::ops::{self, NewTodo};
use crate::kernel::{Config, Error, GoalStatus, Priority, Result};
use crate::store::{GoalPlan, StoreExt};
use crate::text::escape as esc;

/// `start-goal`.
#[derive(Debug, Args)]
pub struct StartGoal {
    /// The objective.
    #[arg(long, value_name = "TEXT")]
    goal_text: String,
    /// Where to create .loopx/ (default: --dir, else this directory).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Ask for success criteria, quota and first todos (on a terminal).
    #[arg(long)]
    guided: bool,
    /// A success criterion (repeatable).
    #[arg(long, value_name = "TEXT")]
    success: Vec<String>,
    /// Move an existing goal to history/ (on a database, its history table) and start anew.
    #[arg(long)]
    replace: bool,
}

/// `goal ...`.
#[derive(Debug, Subcommand)]
pub enum GoalCmd {
    /// Show the goal.
    #[command(after_help = "Example:\n  loopx goal show --json")]
    Show,
    /// Pause the goal (owner).
    #[command(
        after_help = "Example:\n  loopx goal pause --reason \"waiting for the new data set\""
    )]
    Pause {
        /// Why.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Resume the goal (owner).
    #[command(after_help = "Example:\n  loopx goal resume")]
    Resume,
    /// Mark the goal complete (owner).
    #[command(
        after_help = "Example:\n  loopx goal complete --reason \"every suite has a baseline\""
    )]
    Complete {
        /// Why.
        #[arg(long)]
        reason: Option<String>,
    },
}

fn goal_id() -> Result<String> {
    let mut r = [0u8; 6];
    getrandom::fill(&mut r)
        .map_err(|e| Error::new(crate::kernel::Code::Io, format!("no randomness: {e}")))?;
    Ok(crate::kernel::id::new_id(Kind::Todo, r).replacen("t-", "goal-", 1))
}

/// Asks one question on the terminal; empty answer is None.
fn ask(prompt: &str) -> Option<String> {
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    let t = line.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// Starts the goal: `.loopx/`, or the database chosen (`--replace`: the old goal to history).
pub fn start(ctx: &Ctx, a: StartGoal) -> Result<Out> {
    check_start(&a)?;
    let store = ctx.open_new(a.project.as_deref())?;
    let plan = store.plan_goal(a.replace)?;
    // A store with a first step of its own (a database's owner key) asks no questions.
    let guided_tty = a.guided && plan.first.is_none() && super::interactive() && !ctx.json;
    let mut config = Config::new(&goal_id()?, &a.goal_text, ctx.now);
    config.goal.success_criteria = a.success.clone();
    let first = if guided_tty {
        ask_guided(&mut config)?
    } else {
        Vec::new()
    };
    limits::usage(limits::check_config(&config))?;
    let replaced = store.start_goal(&config, &ctx.agent, plan.replacing)?;
    let mut added = Vec::new();
    for (priority, title) in first {
        let id = store.fresh_id(Kind::Todo)?;
        let new = NewTodo {
            priority,
            ..NewTodo::new(id, title)
        };
        let t = store.mutate(|snap| ops::add_todo(snap, &ctx.agent, ctx.now, new.clone()))?;
        added.push(t.id);
    }
    let next_steps = a.guided && !guided_tty;
    Ok(started(&config, &plan, replaced, added, next_steps))
}

/// Refuses an empty or too long objective or success criterion (exit 2).
fn check_start(a: &StartGoal) -> Result<()> {
    if a.goal_text.trim().is_empty() {
        return Err(Error::usage("--goal-text cannot be empty"));
    }
    limits::usage(limits::text("--goal-text", &a.goal_text, limits::TEXT_MAX))?;
    limits::usage(limits::count(
        "--success",
        a.success.len(),
        limits::CRITERIA_MAX,
    ))?;
    for s in &a.success {
        limits::usage(limits::text("--success", s, limits::TITLE_MAX))?;
    }
    Ok(())
}

/// `start-goal --guided` on a terminal: more success criteria, the quota's turns and the first
/// todos, asked one a line.
fn ask_guided(config: &mut Config) -> Result<Vec<(Priority, String)>> {
    eprintln!("Objective: {}", config.goal.objective);
    eprintln!("Success criteria, one a line (empty line to finish):");
    while let Some(s) = ask("  - ") {
        config.goal.success_criteria.push(s);
    }
    let quota = &mut config.quota;
    if let Some(s) = ask(&format!(
        "Turns per {} window [{}]: ",
        quota.window, quota.slots
    )) {
        quota.slots = s
            .parse()
            .map_err(|_| Error::usage(format!("`{s}` is not a number of turns")))?;
    }
    eprintln!("First todos, one a line, a priority first if you like (P1 Write the harness);");
    eprintln!("an empty line to finish:");
    let mut first = Vec::new();
    while let Some(s) = ask("  - ") {
        first.push(todo_line(&s));
    }
    Ok(first)
}

/// What `start-goal` answers: where the goal started, where the old one went, and what comes
/// next (the store's own first step, else the agent's commands when `next_steps`).
fn started(
    config: &Config,
    plan: &GoalPlan,
    replaced: Option<String>,
    added: Vec<String>,
    next_steps: bool,
) -> Out {
    let (field, at) = &plan.at;
    let mut text = format!(
        "started {} in {at}\n  objective: {}",
        config.goal.id,
        esc(&config.goal.objective)
    );
    match (&replaced, plan.first) {
        (Some(h), _) => text.push_str(&format!("\n  the old goal moved to {h}")),
        (None, Some(step)) => text.push_str(&format!("\nnext: {step}")),
        (None, None) => {}
    }
    let next = [
        "loopx todo add \"first step\" --priority P1",
        "loopx quota should-run",
        "loopx todo claim",
        "loopx todo update --evidence \"what this turn proved\"",
        "loopx quota spend-slot",
        "loopx refresh-state",
    ];
    if next_steps && plan.first.is_none() {
        text.push_str("\nnext, run:");
        for n in next {
            text.push_str(&format!("\n  {n}"));
        }
    } else if !added.is_empty() {
        text.push_str(&format!("\n  added {}", added.join(", ")));
    }
    let out = Out::new("goal", to_json(&config.goal), text)
        .with(field, json!(at))
        .with("todos", json!(added))
        .with("replaced", json!(replaced));
    match plan.first {
        None => out.with("next", json!(next)),
        Some(_) => out,
    }
}

/// A first todo typed at the guided prompt: `P1 Write the harness` is a P1 todo titled `Write the
/// harness`; a line without a leading `P0`-`P4` is a P2 todo titled as typed.
fn todo_line(line: &str) -> (Priority, String) {
    let line = line.trim();
    if let Some((word, rest)) = line.split_once(char::is_whitespace)
        && word.len() == 2
        && word.starts_with(['P', 'p'])
        && let Ok(p) = word.parse::<Priority>()
        && !rest.trim().is_empty()
    {
        return (p, rest.trim().to_string());
    }
    (Priority::P2, line.to_string())
}

/// Runs `goal ...`.
pub fn run(ctx: &Ctx, c: GoalCmd) -> Result<Out> {
    // Pausing, resuming and completing are the owner's acts: the owner's key, and on a database
    // the owner's login (the database checks it).
    let store = ctx.open()?;
    let (status, reason) = match c {
        GoalCmd::Show => {
            let snap = store.load()?;
            let g = &snap.config.goal;
            let mut text = format!(
                "{} ({})\n  {}",
                esc(&g.id),
                status_word(g.status),
                esc(&g.objective)
            );
            for s in &g.success_criteria {
                text.push_str(&format!("\n  - {}", esc(s)));
            }
            if let Some(r) = &g.reason {
                text.push_str(&format!("\n  reason: {}", esc(r)));
            }
            return Ok(Out::new("goal", to_json(g), text));
        }
        GoalCmd::Pause { reason } => (GoalStatus::Paused, reason),
        GoalCmd::Resume => (GoalStatus::Active, None),
        GoalCmd::Complete { reason } => (GoalStatus::Complete, reason),
    };
    let owner = crate::kernel::ops::OWNER;
    let cfg =
        store.mutate(|snap| ops::set_goal_status(snap, owner, ctx.now, status, reason.clone()))?;
    let text = format!(
        "goal {} is {}",
        esc(&cfg.goal.id),
        status_word(cfg.goal.status)
    );
    Ok(Out::new("goal", to_json(&cfg.goal), text))
}

/// The goal status as a word.
pub fn status_word(s: GoalStatus) -> &'static str {
    match s {
        GoalStatus::Active => "active",
        GoalStatus::Paused => "paused",
        GoalStatus::Complete => "complete",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guided_todo_line_may_start_with_its_priority() {
        let l = |s: &str| todo_line(s);
        assert_eq!(
            l("P1 Write the harness"),
            (Priority::P1, "Write the harness".into())
        );
        assert_eq!(l(" p0  Fix it "), (Priority::P0, "Fix it".into()));
        assert_eq!(
            l("Write the harness"),
            (Priority::P2, "Write the harness".into())
        );
        assert_eq!(l("3 more tests"), (Priority::P2, "3 more tests".into()));
        assert_eq!(l("P9 plan"), (Priority::P2, "P9 plan".into()));
        assert_eq!(l("P1"), (Priority::P2, "P1".into()));
        assert_eq!(l("PR review"), (Priority::P2, "PR review".into()));
    }
}
