//! `todo claim`: the lease, its reservation, and its git worktree (`--worktree`).

use serde_json::json;

use super::todo_edit;
use super::{Ctx, Out, to_json};
use crate::kernel::ops;
use crate::kernel::{Code, Dur, Error, Result, Todo, Ts};
use crate::runtime::worktree;
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// The reservation of a lease, as the claim's answer shows it.
fn reserved_text(l: Option<&crate::kernel::Lease>) -> String {
    match l {
        Some(l) if !l.paths.is_empty() => format!("\n  reserves: {}", esc(&l.paths.join(" "))),
        _ => String::new(),
    }
}

/// `todo claim`: the lease, then the worktree (`--worktree`) or the retirement of the one an
/// expired lease left.
pub(super) fn claim(
    ctx: &Ctx,
    store: &dyn Store,
    id: Option<String>,
    ttl: Option<Dur>,
    paths: Vec<String>,
    want_tree: bool,
) -> Result<Out> {
    let (agent, now) = (ctx.agent.as_str(), ctx.now);
    let paths = (!paths.is_empty())
        .then(|| crate::kernel::reserve::normalise("--paths", &paths))
        .transpose()?;
    let root = ctx.work_dir(store);
    if want_tree {
        worktree::preflight(&root)?;
    }
    // An unnamed claim reserves the todo it will get first (a database locks it).
    let unnamed = id.is_none().then_some((agent, now));
    let claimed = store.mutate_noted_with(unnamed, |snap| {
        let id = id
            .as_deref()
            .map(|i| store.resolve_todo(snap, i))
            .transpose()?;
        let ttl = ttl.unwrap_or(snap.config.lease.ttl);
        let (mut c, mut t) =
            ops::claim_reserving(snap, agent, now, ttl, id.as_deref(), paths.as_deref())?;
        let prior = worktree::claimed(&root, snap, want_tree, &mut c, &mut t)?;
        Ok((c, (t, prior)))
    });
    let ((t, prior), notes) = match (claimed, id.as_deref()) {
        (Err(e), Some(input)) if e.code == Code::NotFound => return Err(archived(store, input, e)),
        (r, _) => r?,
    };
    let (tree, warnings) = match worktree::after_claim(&root, want_tree, prior.as_ref(), &t, now) {
        Ok(x) => x,
        Err(e) => return Err(released(store, e, &t, prior.as_ref(), agent, now)),
    };
    let l = t.lease.as_ref();
    let mut text = format!(
        "{} claimed: {} (fence {}, lease until {}){}{}",
        esc(&t.id),
        esc(&t.title),
        t.fence,
        l.map(|l| l.expires_at.to_string()).unwrap_or_default(),
        reserved_text(l),
        todo_edit::context_text(&t)
    );
    if let Some(p) = &tree {
        text.push_str(&format!(
            "\n  worktree: {} (branch {})",
            esc(&p.to_string_lossy()),
            worktree::branch(&t.id)
        ));
    }
    let mut out = Out::new("todo", to_json(&t), text).noted(notes);
    if let Some(p) = &tree {
        out = out.with("worktree", json!(p.to_string_lossy()));
    }
    if let Some((j, text)) = super::agent::reviews_evidence(store, &t)? {
        out = out.with("reviews_evidence", j);
        out.text.push_str(&text);
    }
    Ok(warned(ctx, out, warnings))
}

/// A claim of a todo that is done (archived) says so, with its status, instead of "no open todo".
fn archived(store: &dyn Store, input: &str, e: Error) -> Error {
    match store.archived_todo(input) {
        Ok(Some(t)) => Error::new(
            Code::NotFound,
            format!(
                "{} is {} and archived: there is nothing to claim",
                esc(&t.id),
                t.status.as_str()
            ),
        )
        .hint(format!(
            "see it with `loopx todo show {}`; ready work is in `loopx todo list --ready`",
            t.id
        )),
        _ => e,
    }
}

/// A claim whose worktree could not be made: a lease it granted is given back (a renewal
/// keeps it); the error, saying which.
pub(super) fn released(
    store: &dyn Store,
    e: Error,
    t: &Todo,
    prior: Option<&crate::kernel::Lease>,
    agent: &str,
    now: Ts,
) -> Error {
    let renewed = prior.is_some_and(|p| p.fence == t.fence && p.is_live(now));
    if renewed {
        return e.hint("your lease stands, without a worktree");
    }
    match store.mutate(|snap| ops::release(snap, agent, Ts::now(), &t.id)) {
        Ok(_) => e.hint(format!("{} was released again; nothing is claimed", t.id)),
        Err(r) => e.hint(format!("{} stays claimed: {}", t.id, r.message)),
    }
}

/// Adds warnings to an answer: JSON `warnings`, and a line each on stderr for people.
pub(super) fn warned(_ctx: &Ctx, out: Out, warnings: Vec<String>) -> Out {
    out.warned(warnings)
}
