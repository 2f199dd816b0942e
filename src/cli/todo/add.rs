//! `todo add`.

use super::AddArgs;
use crate::cli::{Ctx, Out, to_json};
use crate::kernel::id::Kind;
use crate::kernel::limits;
use crate::kernel::ops::{self, NewTodo};
use crate::kernel::{Result, Snapshot};
use crate::store::{Store, StoreExt};

/// `todo add`: a new todo; prints its id.
pub(super) fn add(ctx: &Ctx, store: &dyn Store, a: AddArgs) -> Result<Out> {
    let AddArgs {
        title,
        priority,
        role,
        depends_on,
        every,
        blocked_by_gate,
        requires,
        reviews,
        exclude_agent,
        paths,
        context,
    } = a;
    let paths = crate::kernel::reserve::normalise("--paths", &paths)?;
    let (body, links) = context.read(ctx)?;
    limits::usage(limits::count(
        "--depends-on",
        depends_on.len(),
        limits::DEPENDS_MAX,
    ))?;
    let requires = crate::kernel::agents::check_capabilities("--requires", &requires)?;
    let exclude_agents = crate::cli::agent::check_excluded(&exclude_agent)?;
    let new_id = store.fresh_id(Kind::Todo)?;
    let (reviews, exclude_agents, depends_on) =
        references(store, reviews.as_deref(), &depends_on, exclude_agents)?;
    let new = NewTodo {
        id: new_id,
        title,
        role,
        priority,
        depends_on,
        every,
        blocked_by_gate: None,
        requires,
        reviews,
        exclude_agents,
        body,
        links,
        paths,
    };
    let t = store.mutate(|snap| {
        let gate = blocked_by_gate
            .as_deref()
            .map(|g| store.resolve_gate(snap, g))
            .transpose()?;
        let id = if snap.todos.contains_key(&new.id) {
            store.fresh_id(Kind::Todo)?
        } else {
            new.id.clone()
        };
        let new = NewTodo {
            id,
            blocked_by_gate: gate,
            ..new.clone()
        };
        ops::add_todo(snap, &ctx.agent, ctx.now, new)
    })?;
    Ok(Out::new("todo", to_json(&t), t.id.clone()))
}

/// Resolves `--reviews` and `--depends-on`: the reviewed todo, the exclusions with its
/// finisher added, and the dependencies' ids.
///
/// Archived references are looked up before the transaction: a database store's lookup of
/// the archive would wait for the connection the transaction holds.
fn references(
    store: &dyn Store,
    reviews: Option<&str>,
    depends_on: &[String],
    exclude_agents: Vec<String>,
) -> Result<(Option<String>, Vec<String>, Vec<String>)> {
    if reviews.is_none() && depends_on.is_empty() {
        return Ok((None, exclude_agents, Vec::new()));
    }
    let snap: Snapshot = store.load()?;
    let (reviews, exclude_agents) =
        crate::cli::agent::review_of(store, &snap, reviews, exclude_agents)?;
    let deps = depends_on
        .iter()
        .map(|d| store.resolve_todo(&snap, d))
        .collect::<Result<Vec<_>>>()?;
    Ok((reviews, exclude_agents, deps))
}
