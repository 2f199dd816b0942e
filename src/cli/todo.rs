//! `todo`: add (`todo/add.rs`), list, show, claim, renew, update (`todo/update.rs`), release,
//! reopen, reassign (handoff and edit: `todo_edit.rs`).

use clap::{Args, Subcommand};
use serde_json::json;

use super::todo_edit::{self, ContextArgs};
use super::{Ctx, Out, rel_time, to_json};
use crate::flows::update::target;
use crate::kernel::id;
use crate::kernel::ops;
use crate::kernel::readiness;
use crate::kernel::{Dur, Error, EvidenceKind, Priority, Result, Role, Status, Todo, Ts};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

mod add;
mod update;

/// `todo ...`.
#[derive(Debug, Subcommand)]
pub enum TodoCmd {
    /// Add a todo; prints its id.
    #[command(
        after_help = "Example:\n  loopx todo add \"Set up the benchmark harness\" --priority P1 --requires code"
    )]
    Add(AddArgs),
    /// List todos (open, blocked and deferred; --status done or cancelled for the archive).
    #[command(after_help = "Example:\n  loopx todo list --ready --json")]
    List {
        /// Only those ready for this agent.
        #[arg(long)]
        ready: bool,
        /// Only those this agent holds.
        #[arg(long)]
        mine: bool,
        /// Only this status.
        #[arg(long)]
        status: Option<Status>,
    },
    /// Show one todo, why it waits, and its recent evidence.
    #[command(after_help = "Example:\n  loopx todo show t-4kq9zx")]
    Show {
        /// The id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
    },
    /// Take the best ready todo (or ID) with a lease.
    #[command(after_help = "Example:\n  loopx todo claim --ttl 45m")]
    Claim {
        /// The id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: Option<String>,
        /// Lease length (default from loopx.toml, 30m).
        #[arg(long, value_name = "DUR")]
        ttl: Option<Dur>,
        /// Reserve this path glob with the lease instead of the todo's own (repeatable).
        #[arg(long = "paths", value_name = "GLOB")]
        paths: Vec<String>,
        /// Work in a git worktree of the todo's own, `.loopx/worktrees/ID` on branch `loopx/ID`.
        #[arg(long)]
        worktree: bool,
    },
    /// Extend your lease.
    #[command(after_help = "Example:\n  loopx todo renew --ttl 30m")]
    Renew {
        /// The id (default: the one you hold).
        #[arg(add = super::complete::todo_id())]
        id: Option<String>,
        /// New lease length from now.
        #[arg(long, value_name = "DUR")]
        ttl: Option<Dur>,
    },
    /// Append evidence and change status.
    #[command(
        after_help = "Example:\n  loopx todo update --evidence \"unit tests pass (42/42)\" --metric loss=0.31 --status done"
    )]
    Update(UpdateArgs),
    /// Give your lease back (the owner, with --owner: take back anyone's).
    #[command(
        after_help = "Example:\n  loopx todo release t-4kq9zx\n  loopx todo release t-4kq9zx --owner"
    )]
    Release {
        /// The id (default: the one you hold).
        #[arg(add = super::complete::todo_id())]
        id: Option<String>,
        /// Owner: release the lease whoever holds it (signed with the owner's key).
        #[arg(long)]
        owner: bool,
    },
    /// Return a blocked or deferred todo to open.
    #[command(after_help = "Example:\n  loopx todo reopen t-4kq9zx")]
    Reopen {
        /// The id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
    },
    /// Owner: move the lease to another agent with a new fence.
    #[command(after_help = "Example:\n  loopx todo reassign t-4kq9zx --to agent-b --ttl 1h")]
    Reassign {
        /// The id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
        /// The agent to give it to.
        #[arg(long, value_name = "AGENT")]
        to: String,
        /// Lease length.
        #[arg(long, value_name = "DUR")]
        ttl: Option<Dur>,
    },
    /// Pass your lease to a named agent with a new fence; the note becomes evidence.
    #[command(
        after_help = "Example:\n  loopx todo handoff --to agent-b --note \"half done: see src/parse.rs\""
    )]
    Handoff(todo_edit::HandoffArgs),
    /// Change a todo's title, priority, body, links or dependencies (its creator, or the owner).
    #[command(
        after_help = "Example:\n  loopx todo edit t-4kq9zx --priority P1 --link https://github.com/o/r/pull/13"
    )]
    Edit(todo_edit::EditArgs),
    /// The check that proves a todo done: propose, the owner's approve and revoke, the default.
    #[command(
        subcommand,
        after_help = "Example:\n  loopx todo check propose t-4kq9zx -- cargo test --quiet\n  loopx todo check approve t-4kq9zx --sha ba381a64be65f00d"
    )]
    Check(super::todo_check::CheckCmd),
}

/// `todo add` arguments.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// What to do.
    title: String,
    /// P0 (highest) to P4.
    #[arg(long, short, default_value = "P2")]
    priority: Priority,
    /// agent or user.
    #[arg(long, default_value = "agent", value_parser = parse_role)]
    role: Role,
    /// A todo that must be done first (repeatable).
    #[arg(long, value_name = "ID", add = super::complete::todo_id())]
    depends_on: Vec<String>,
    /// Make it a recurring monitor with this cadence (like 1h).
    #[arg(long, value_name = "DUR")]
    every: Option<Dur>,
    /// A pending gate that blocks it.
    #[arg(long, value_name = "ID", add = super::complete::gate_id())]
    blocked_by_gate: Option<String>,
    /// A capability an agent needs to be offered it (repeatable; all are needed).
    #[arg(long, value_name = "CAP")]
    requires: Vec<String>,
    /// Make it the review of todo ID: ready when ID is done; ID's finisher never claims it.
    #[arg(long, value_name = "ID", add = super::complete::todo_id())]
    reviews: Option<String>,
    /// An agent that may never claim it (repeatable).
    #[arg(long, value_name = "AGENT")]
    exclude_agent: Vec<String>,
    /// A path glob a claim of it reserves by default, like `src/store/**` (repeatable).
    #[arg(long = "paths", value_name = "GLOB")]
    paths: Vec<String>,
    /// Body and links.
    #[command(flatten)]
    context: ContextArgs,
}

/// `todo update` arguments.
#[derive(Debug, Args)]
pub struct UpdateArgs {
    /// The id (default: the one you hold).
    #[arg(add = super::complete::todo_id())]
    id: Option<String>,
    /// The fence you were granted; a stale one is refused.
    #[arg(long)]
    fence: Option<u64>,
    /// Evidence text (repeatable).
    #[arg(long, value_name = "TEXT")]
    evidence: Vec<String>,
    /// The kind of the --evidence entries.
    #[arg(long, value_name = "K", default_value = "note")]
    kind: EvidenceKind,
    /// A file produced (repeatable); its SHA-256 is recorded.
    #[arg(long, value_name = "PATH")]
    artifact: Vec<String>,
    /// A metric NAME=VALUE (repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    metric: Vec<String>,
    /// New status: open, blocked, deferred, done or cancelled.
    #[arg(long)]
    status: Option<Status>,
    /// Why.
    #[arg(long)]
    reason: Option<String>,
    /// How long the check that proves done may run (1s to 24h).
    #[arg(long, value_name = "DUR", default_value = "10m")]
    check_timeout: Dur,
}

fn parse_role(s: &str) -> std::result::Result<Role, String> {
    match s {
        "agent" => Ok(Role::Agent),
        "user" => Ok(Role::User),
        _ => Err(format!("`{s}` is not a role; use agent or user")),
    }
}

/// Runs `todo ...`.
pub fn run(ctx: &Ctx, c: TodoCmd) -> Result<Out> {
    // The owner's acts (release --owner, reassign) need the owner's key, and on a database the
    // owner's login (the database checks it).
    let opened = ctx.open()?;
    let store: &dyn Store = &*opened;
    match c {
        TodoCmd::Add(a) => add::add(ctx, store, a),
        TodoCmd::List {
            ready,
            mine,
            status,
        } => list(ctx, store, ready, mine, status),
        TodoCmd::Show { id } => show(ctx, store, &id),
        TodoCmd::Claim {
            id,
            ttl,
            paths,
            worktree,
        } => super::todo_claim::claim(ctx, store, id, ttl, paths, worktree),
        TodoCmd::Renew { id, ttl } => renew(ctx, store, id, ttl),
        TodoCmd::Update(a) => update::update(ctx, store, a),
        TodoCmd::Release { id, owner: true } => todo_edit::release_by_owner(ctx, store, id),
        TodoCmd::Release { id, owner: false } => release(ctx, store, id),
        TodoCmd::Reopen { id } => reopen(ctx, store, &id),
        TodoCmd::Handoff(a) => todo_edit::handoff(ctx, store, a),
        TodoCmd::Edit(a) => todo_edit::edit(ctx, store, a),
        TodoCmd::Check(c) => super::todo_check::run(ctx, store, c),
        TodoCmd::Reassign { id, to, ttl } => reassign(ctx, store, &id, &to, ttl),
    }
}

/// `todo renew`: extends the lease on the todo named, or the one this agent holds.
fn renew(ctx: &Ctx, store: &dyn Store, id: Option<String>, ttl: Option<Dur>) -> Result<Out> {
    let (now, agent) = (ctx.now, ctx.agent.as_str());
    let t = store.mutate(|snap| {
        let id = target(store, snap, agent, now, id.as_deref())?;
        let ttl = ttl.unwrap_or(snap.config.lease.ttl);
        ops::renew(snap, agent, now, ttl, &id)
    })?;
    let until = t
        .lease
        .as_ref()
        .map(|l| l.expires_at.to_string())
        .unwrap_or_default();
    Ok(Out::new(
        "todo",
        to_json(&t),
        format!("{} renewed until {until}", esc(&t.id)),
    ))
}

/// `todo release`: gives this agent's lease back.
fn release(ctx: &Ctx, store: &dyn Store, id: Option<String>) -> Result<Out> {
    let (now, agent) = (ctx.now, ctx.agent.as_str());
    let t = store.mutate(|snap| {
        let id = target(store, snap, agent, now, id.as_deref())?;
        ops::release(snap, agent, now, &id)
    })?;
    Ok(Out::new(
        "todo",
        to_json(&t),
        format!("{} released", esc(&t.id)),
    ))
}

/// `todo reopen`: a blocked or deferred todo is open again.
fn reopen(ctx: &Ctx, store: &dyn Store, id: &str) -> Result<Out> {
    let (now, agent) = (ctx.now, ctx.agent.as_str());
    let t = store.mutate(|snap| {
        let id = store.resolve_todo(snap, id)?;
        ops::reopen(snap, agent, now, &id)
    })?;
    Ok(Out::new(
        "todo",
        to_json(&t),
        format!("{} is open again", esc(&t.id)),
    ))
}

/// `todo reassign`: the owner moves the lease to `to` with a new fence.
fn reassign(ctx: &Ctx, store: &dyn Store, id: &str, to: &str, ttl: Option<Dur>) -> Result<Out> {
    id::check_agent(to)?;
    let owner = crate::kernel::ops::OWNER;
    let t = store.mutate(|snap| {
        let id = store.resolve_todo(snap, id)?;
        let ttl = ttl.unwrap_or(snap.config.lease.ttl);
        ops::reassign(snap, owner, ctx.now, ttl, &id, to)
    })?;
    Ok(Out::new(
        "todo",
        to_json(&t),
        format!("{} reassigned to {to} (fence {})", esc(&t.id), t.fence),
    ))
}

fn line(t: &Todo, now: Ts) -> String {
    let lease = match &t.lease {
        Some(l) if l.is_live(now) => format!(
            "  [{} fence {}, {} left]",
            esc(&l.holder),
            l.fence,
            crate::kernel::Dur(l.expires_at.since(now).0 / 1000 * 1000)
        ),
        Some(l) => format!(
            "  [{} fence {}, expired {}]",
            esc(&l.holder),
            l.fence,
            rel_time(now, l.expires_at)
        ),
        None => String::new(),
    };
    let role = if t.role == Role::User { " (user)" } else { "" };
    format!(
        "{}  {}  {:<9} {}{role}{lease}",
        esc(&t.id),
        t.priority,
        t.status.as_str(),
        esc(&t.title)
    )
}

/// What an empty list says: which todos it looked at, and where the archived ones are.
fn empty_text(
    store: &dyn Store,
    ready: bool,
    mine: bool,
    status: Option<Status>,
) -> Result<String> {
    let what = match (ready, mine, status) {
        (true, _, _) => "no ready todos".to_string(),
        (_, true, _) => "you hold no todos".to_string(),
        (_, _, Some(s)) => format!("no {} todos", s.as_str()),
        _ => "no open todos".to_string(),
    };
    let archived = store.archived_count()?;
    Ok(if archived == 0 || status.is_some_and(Status::is_final) {
        what
    } else {
        format!("{what} ({archived} archived: `loopx todo list --status done`)")
    })
}

fn list(
    ctx: &Ctx,
    store: &dyn Store,
    ready: bool,
    mine: bool,
    status: Option<Status>,
) -> Result<Out> {
    let now = ctx.now;
    let snap = store.load()?;
    let todos: Vec<Todo> = if status.is_some_and(Status::is_final) {
        let mut v = Vec::new();
        for id in store.archived_ids()? {
            if let Some(t) = store
                .archived_todo(&id)?
                .filter(|t| Some(t.status) == status)
            {
                v.push(t);
            }
        }
        v.sort_by_key(|t| std::cmp::Reverse(t.updated_at));
        v
    } else if ready {
        readiness::ready(&snap, &ctx.agent, now)
            .into_iter()
            .cloned()
            .collect()
    } else {
        let mut v: Vec<Todo> = snap
            .todos
            .values()
            .filter(|t| status.is_none_or(|s| t.status == s))
            .filter(|t| !mine || t.live_lease(now).is_some_and(|l| l.holder == ctx.agent))
            .cloned()
            .collect();
        v.sort_by(|a, b| readiness::pick_key(a, now).cmp(&readiness::pick_key(b, now)));
        v
    };
    let todos: Vec<Todo> = todos
        .into_iter()
        .filter(|t| !mine || t.live_lease(now).is_some_and(|l| l.holder == ctx.agent))
        .collect();
    let text = if todos.is_empty() {
        empty_text(store, ready, mine, status)?
    } else {
        todos
            .iter()
            .map(|t| line(t, now))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(Out::new("todos", to_json(&todos), text))
}

fn show(ctx: &Ctx, store: &dyn Store, input: &str) -> Result<Out> {
    let snap = store.load()?;
    let id = store.resolve_todo(&snap, input)?;
    if let Some(p) = snap.quarantined.get(&id) {
        return Err(p.to_error());
    }
    let t = match snap.todos.get(&id) {
        Some(t) => t.clone(),
        None => store
            .archived_todo(&id)?
            .ok_or_else(|| Error::new(crate::kernel::Code::NotFound, format!("no todo {id}")))?,
    };
    let blockers = if t.status.is_final() {
        Vec::new()
    } else {
        readiness::blockers(&snap, &t, &ctx.agent, ctx.now, true)
    };
    let evidence = store.evidence_tail(&id, 10)?;
    let mut text = line(&t, ctx.now) + &todo_edit::context_text(&t);
    if !t.depends_on.is_empty() {
        text.push_str(&format!(
            "\n  depends on: {}",
            esc(&t.depends_on.join(", "))
        ));
    }
    if let Some(r) = &t.reason {
        text.push_str(&format!("\n  reason: {}", esc(r)));
    }
    if let Some(w) = t.live_lease(ctx.now).and_then(|l| l.worktree.as_deref()) {
        text.push_str(&format!("\n  worktree: {}", esc(w)));
    }
    for b in &blockers {
        text.push_str(&format!("\n  waits: {}", esc(&b.describe())));
    }
    for e in evidence.iter().rev() {
        let kind = to_json(&e.kind);
        text.push_str(&format!(
            "\n  {} {} {}: {}",
            e.at,
            esc(&e.agent),
            kind.as_str().unwrap_or("note"),
            esc(&e.summary)
        ));
    }
    let (proof, proof_text, notes) = super::todo_check::shown(ctx, store, &snap, &t, &evidence)?;
    text.push_str(&proof_text);
    let mut j = to_json(&t);
    j["blockers"] = json!(blockers.iter().map(|b| b.describe()).collect::<Vec<_>>());
    j["evidence"] = to_json(&evidence);
    j["proof"] = proof;
    text.push_str(&super::agent::routing_text(&t));
    let mut out = Out::new("todo", j, text);
    if let Some((j, text)) = super::agent::reviews_evidence(store, &t)? {
        out = out.with("reviews_evidence", j);
        out.text.push_str(&text);
    }
    Ok(out.noted(notes))
}
