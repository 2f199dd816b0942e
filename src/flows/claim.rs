//! A claim with its reservation, its git worktree and its undo: git is read before the commit,
//! the kernel decides the whole change, and the worktree is made (or an old one retired) after.

use std::path::{Path, PathBuf};

use crate::kernel::ops::{self, ClaimOpts};
use crate::kernel::{Code, Error, Lease, Result, Snapshot, Todo, Ts};
use crate::runtime::{worktree, worktree_retire};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// A claim committed, with what happened to its worktree.
#[derive(Debug)]
pub struct Claimed {
    /// The todo, with its lease.
    pub todo: Todo,
    /// The owner's notes the snapshot carried.
    pub notes: Vec<String>,
    /// The worktree made or reused (`--worktree`).
    pub worktree: Option<PathBuf>,
    /// What went wrong without failing the claim (an old worktree kept).
    pub warnings: Vec<String>,
}

/// `todo claim`: claims `want.id` (an id or a unique prefix) or the best ready todo, as `want`
/// asks, in the project at `root`.
pub fn claim(
    store: &dyn Store,
    root: &Path,
    (agent, now): (&str, Ts),
    want: ClaimOpts,
) -> Result<Claimed> {
    before(root, want.worktree)?;
    let input = want.id.clone();
    // An unnamed claim reserves the todo it will get first (a database locks it).
    let unnamed = input.is_none().then_some((agent, now));
    let claimed = store.mutate_noted_with(unnamed, |snap| {
        let id = input.as_deref().map(|i| store.resolve_todo(snap, i));
        let want = ClaimOpts {
            id: id.transpose()?,
            ..want.clone()
        };
        let (c, t) = ops::claim_with(snap, agent, now, &want)?;
        let prior = checked(root, snap, want.worktree, &t)?;
        Ok((c, (t, prior)))
    });
    let ((todo, prior), notes) = match (claimed, input.as_deref()) {
        (Err(e), Some(input)) if e.code == Code::NotFound => return Err(archived(store, input, e)),
        (r, _) => r?,
    };
    let (tree, warnings) = after(
        store,
        root,
        want.worktree,
        prior.as_ref(),
        &todo,
        agent,
        now,
    )?;
    Ok(Claimed {
        todo,
        notes,
        worktree: tree,
        warnings,
    })
}

/// Before a claim: refuses a `--worktree` claim (`tree`) where no worktree can be made.
pub fn before(root: &Path, tree: bool) -> Result<()> {
    match tree {
        true => worktree::preflight(root),
        false => Ok(()),
    }
}

/// In the claim's transaction, once the kernel named the todo: refuses a worktree path that is
/// not the todo's (`tree`), and gives the lease the claim replaces, for [`after`].
pub fn checked(root: &Path, snap: &Snapshot, tree: bool, t: &Todo) -> Result<Option<Lease>> {
    if tree {
        worktree::check_target(root, &t.id)?;
    }
    Ok(snap
        .todos
        .get(&t.id)
        .and_then(|x| x.lease.as_deref().cloned()))
}

/// After the claim committed: the worktree made or reused (`tree`), else the warning of the
/// retirement of the one an expired lease left. A worktree that cannot be made gives a lease
/// the claim granted back (a renewal keeps it); the error says which.
pub fn after(
    store: &dyn Store,
    root: &Path,
    tree: bool,
    prior: Option<&Lease>,
    t: &Todo,
    agent: &str,
    now: Ts,
) -> Result<(Option<PathBuf>, Vec<String>)> {
    if !tree {
        let retired = worktree_retire::retire_replaced(root, prior, t, now);
        return Ok((None, retired.into_iter().collect()));
    }
    match worktree::ensure(root, &t.id) {
        Ok(p) => Ok((Some(p), Vec::new())),
        Err(e) => Err(released(store, e, t, prior, agent, now)),
    }
}

/// The undo of a claim whose worktree could not be made: its lease given back, unless it was a
/// renewal; the error, saying which.
fn released(
    store: &dyn Store,
    e: Error,
    t: &Todo,
    prior: Option<&Lease>,
    agent: &str,
    now: Ts,
) -> Error {
    let renewed = prior.is_some_and(|p| p.fence == t.fence && p.is_live(now));
    if renewed {
        return e.hint("your lease stands, without a worktree");
    }
    match release(store, agent, &t.id) {
        Ok(()) => e.hint(format!("{} was released again; nothing is claimed", t.id)),
        Err(r) => e.hint(format!("{} stays claimed: {}", t.id, r.message)),
    }
}

/// Gives `agent`'s lease on `id` back (a claim undone, or a turn whose command did not run).
pub fn release(store: &dyn Store, agent: &str, id: &str) -> Result<()> {
    store.mutate(|snap| ops::release(snap, agent, Ts::now(), id).map(|(c, _)| (c, ())))
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
