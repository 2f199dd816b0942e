//! `todo claim`: the lease, its reservation, and its git worktree (`--worktree`), shown.

use serde_json::json;

use super::todo_edit;
use super::{Ctx, Out, to_json};
use crate::flows::claim;
use crate::kernel::ops::ClaimOpts;
use crate::kernel::{Dur, Result};
use crate::runtime::worktree;
use crate::store::Store;
use crate::text::escape as esc;

/// The reservation of a lease, as the claim's answer shows it.
fn reserved_text(l: Option<&crate::kernel::Lease>) -> String {
    match l {
        Some(l) if !l.paths.is_empty() => format!("\n  reserves: {}", esc(&l.paths.join(" "))),
        _ => String::new(),
    }
}

/// `todo claim`: the claim flow, shown.
pub(super) fn claim(
    ctx: &Ctx,
    store: &dyn Store,
    id: Option<String>,
    ttl: Option<Dur>,
    paths: Vec<String>,
    want_tree: bool,
) -> Result<Out> {
    let want = ClaimOpts {
        id,
        ttl,
        paths: (!paths.is_empty()).then_some(paths),
        worktree: want_tree,
        turn: None,
    };
    let root = ctx.work_dir(store);
    let c = claim::claim(store, &root, (ctx.agent.as_str(), ctx.now), want)?;
    let t = &c.todo;
    let l = t.lease.as_deref();
    let mut text = format!(
        "{} claimed: {} (fence {}, lease until {}){}{}",
        esc(&t.id),
        esc(&t.title),
        t.fence,
        l.map(|l| l.expires_at.to_string()).unwrap_or_default(),
        reserved_text(l),
        todo_edit::context_text(t)
    );
    if let Some(p) = &c.worktree {
        text.push_str(&format!(
            "\n  worktree: {} (branch {})",
            esc(&p.to_string_lossy()),
            worktree::branch(&t.id)
        ));
    }
    let mut out = Out::new("todo", to_json(t), text).noted(c.notes);
    if let Some(p) = &c.worktree {
        out = out.with("worktree", json!(p.to_string_lossy()));
    }
    if let Some((j, text)) = super::agent::reviews_evidence(store, t)? {
        out = out.with("reviews_evidence", j);
        out.text.push_str(&text);
    }
    Ok(out.warned(c.warnings))
}
