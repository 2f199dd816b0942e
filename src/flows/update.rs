//! `todo update`: evidence and status committed, and a done refused for its check tried again
//! with the check's run (run outside the lock; a failed run recorded), then the worktree of a
//! todo done or cancelled retired.

use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

use super::check;
use crate::kernel::ops::{self, Update};
use crate::kernel::proof::{self, Needed};
use crate::kernel::{Code, Dur, Error, Evidence, EvidenceKind, Result, Snapshot, Status, Todo, Ts};
use crate::runtime::git::{self, GitFacts};
use crate::runtime::{worktree, worktree_retire};
use crate::store::{Store, StoreExt};

/// What `todo update` asks.
#[derive(Debug, Clone)]
pub struct UpdateOpts {
    /// The todo's id or a unique prefix (default: the one the agent holds).
    pub id: Option<String>,
    /// The fence, the evidence given (none: evidence is captured from git), status and reason.
    pub ask: Update,
    /// The longest the todo's check may run.
    pub check_timeout: Duration,
}

/// An update, committed.
#[derive(Debug)]
pub struct Updated {
    /// The todo as it is now.
    pub todo: Todo,
    /// What the store noted.
    pub notes: Vec<String>,
    /// What went wrong without failing the update (changes outside the reservation, a worktree
    /// kept).
    pub warnings: Vec<String>,
}

/// Updates a todo in the project at `root`; everything that reads outside `.loopx/` (git, the
/// check) happens outside the lock.
pub fn update(
    store: &dyn Store,
    root: &Path,
    (agent, now): (&str, Ts),
    o: &UpdateOpts,
) -> Result<Updated> {
    let ask = &o.ask;
    let auto = ask.evidence.is_empty()
        && (ask.status).is_none_or(|s| matches!(s, Status::Done | Status::Open));
    let retired = matches!(ask.status, Some(Status::Done | Status::Cancelled));
    // Only a project with a worktree pays a load: the todo's own worktree is where it is worked.
    let worked = (any_worktree(root) && (auto || retired))
        .then(|| held(store, (agent, now), o.id.as_deref()))
        .flatten();
    let dir = (worked.as_ref()).map_or(root.into(), |t| worktree::work_of(root, t));
    let git = if auto { git::facts(&dir) } else { Ok(None) };
    // A done or cancel that will keep the todo's worktree says so in its evidence; the
    // removal's survey is made before the commit, the removal itself after it.
    let prep = worked
        .filter(|_| retired)
        .and_then(|t| worktree_retire::prepare(root, &t.id));
    let kept = prep.as_ref().and_then(|p| kept_note((agent, now), p));
    let c = Commit {
        store,
        agent,
        o,
        auto,
        git,
        wanted: RefCell::new(None),
        warned: RefCell::new(None),
    };
    let noted = [ask.evidence.as_slice(), kept.as_slice()].concat();
    let first = c.commit(&noted, None, now);
    let (todo, notes) = with_check(&c, root, now, first, kept)?;
    let mut warnings: Vec<String> = c.warned.into_inner().into_iter().collect();
    if retired {
        warnings.extend(worktree_retire::retire_with(root, &todo.id, prep));
    }
    Ok(Updated {
        todo,
        notes,
        warnings,
    })
}

/// The kernel refuses the done of a todo with an approved check: its check runs outside the
/// lock (a todo without one pays nothing for this), then the done is tried again with its run;
/// a failed run is recorded instead.
fn with_check(
    c: &Commit<'_>,
    root: &Path,
    now: Ts,
    done: Result<(Todo, Vec<String>)>,
    kept: Option<Evidence>,
) -> Result<(Todo, Vec<String>)> {
    let refused = c.wanted.borrow_mut().take();
    let (store, agent, o) = (c.store, c.agent, c.o);
    let Some((t, n)) = refused.filter(|_| {
        o.ask.status == Some(Status::Done) && matches!(&done, Err(e) if e.code == Code::CheckFailed)
    }) else {
        return done;
    };
    let e = check::held(store, root, &t, &n, (agent, now), o.check_timeout)?;
    let mut evidence = o.ask.evidence.clone();
    if !proof::passed(&e) {
        return Err(check::failed(
            store,
            (agent, now),
            (&t.id, o.ask.fence),
            evidence,
            &e,
        ));
    }
    evidence.push(e);
    evidence.extend(kept);
    c.commit(&evidence, Some(&t.id), Ts::now())
}

/// The todo named, or the one `agent` holds.
pub fn target(
    store: &dyn Store,
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    id: Option<&str>,
) -> Result<String> {
    match id {
        Some(i) => store.resolve_todo(snap, i),
        None => ops::default_held(snap, agent, now),
    }
}

/// The note for the evidence when the prepared removal will keep the worktree: it and why.
fn kept_note((agent, now): (&str, Ts), prep: &worktree_retire::Prepared) -> Option<Evidence> {
    let why = prep.kept()?;
    let mut text = format!("worktree {} kept: {why}", worktree::rel(prep.id()));
    if let Some((i, _)) = text.char_indices().nth(NOTE_MAX) {
        text.truncate(i);
        text.push('…');
    }
    Some(Evidence::new(now, agent, None, EvidenceKind::Note, text))
}

/// The most characters of a kept worktree's note (an evidence text holds at most 4,000).
const NOTE_MAX: usize = 2_000;

/// True when `.loopx/worktrees/` holds a worktree (it stays once made, with its `.gitignore`).
fn any_worktree(root: &Path) -> bool {
    std::fs::read_dir(root.join(worktree::DIR))
        .map(|d| d.flatten().any(|e| e.file_name() != ".gitignore"))
        .unwrap_or(false)
}

/// One update's transaction, and what its tries saw.
struct Commit<'a> {
    store: &'a dyn Store,
    agent: &'a str,
    o: &'a UpdateOpts,
    /// Whether evidence is captured from git.
    auto: bool,
    git: GitFacts,
    /// What a refused done needs: its todo and approved check, as the transaction saw them.
    wanted: RefCell<Option<(Todo, Needed)>>,
    /// Changed files outside the lease's reservation, as the last try saw them.
    warned: RefCell<Option<String>>,
}

impl Commit<'_> {
    /// Commits the update with `evidence`. The retry names the todo the first try chose (the
    /// agent's claim may have moved meanwhile) and reads the clock again (the check took its
    /// time).
    fn commit(
        &self,
        evidence: &[Evidence],
        pinned: Option<&str>,
        now: Ts,
    ) -> Result<(Todo, Vec<String>)> {
        let (store, agent, o) = (self.store, self.agent, self.o);
        store.mutate_noted(|snap| {
            let id = match pinned {
                Some(p) => p.to_string(),
                None => target(store, snap, agent, now, o.id.as_deref())?,
            };
            // A todo whose file is quarantined says so (exit 6, file and fix), not "archived".
            if let Some(q) = snap.quarantined.get(&id) {
                return Err(q.to_error());
            }
            let cur = snap.todos.get(&id).ok_or_else(|| {
                Error::new(
                    Code::NotFound,
                    format!("{id} is archived; it cannot change"),
                )
            })?;
            let mut ev = evidence.to_vec();
            if self.auto {
                let e = auto_evidence(now, agent, cur, self.git.clone());
                *self.warned.borrow_mut() = outside_warning(&id, cur, &e);
                ev.push(e);
            }
            let u = Update {
                evidence: ev,
                ..o.ask.clone()
            };
            let r = ops::update(snap, agent, now, &id, u);
            if matches!(&r, Err(e) if e.code == Code::CheckFailed)
                && let Ok(Some(n)) = proof::needed(snap, cur)
            {
                *self.wanted.borrow_mut() = Some((cur.clone(), n));
            }
            r
        })
    }
}

/// The todo `update` names (or the agent's), as a fresh load shows it.
fn held(store: &dyn Store, (agent, now): (&str, Ts), id: Option<&str>) -> Option<Todo> {
    let mut snap = store.load().ok()?;
    let id = target(store, &snap, agent, now, id).ok()?;
    snap.todos.remove(&id)
}

/// The evidence `todo update` captures when none is given.
fn auto_evidence(now: Ts, agent: &str, t: &Todo, git: GitFacts) -> Evidence {
    let since = t.lease.as_ref().map(|l| now.since(l.acquired_at));
    let mut parts = Vec::new();
    let mut e = Evidence::new(now, agent, None, EvidenceKind::Auto, String::new());
    match &git {
        Ok(Some(g)) => {
            match &g.head {
                Some(h) => parts.push(format!("HEAD {}", &h[..h.len().min(12)])),
                None => parts.push("no commits yet".into()),
            }
            parts.push(format!(
                "{} changed file{}",
                g.files.len(),
                if g.files.len() == 1 { "" } else { "s" }
            ));
        }
        Ok(None) => parts.push("not a git work tree".into()),
        Err(why) => parts.push(format!("no git facts: {why}")),
    }
    if let Some(s) = since {
        parts.push(format!("{} since the claim", Dur(s.0 / 1000 * 1000)));
        e.since_claim_s = Some(s.0 / 1000);
    }
    if let Ok(Some(g)) = git {
        // Outside the reservation: of every changed file, not only the 50 recorded.
        if let Some(l) = t.lease.as_ref() {
            e.outside = crate::kernel::reserve::outside(&l.paths, &g.files);
        }
        if !e.outside.is_empty() {
            parts.push(format!("{} outside the reservation", e.outside.len()));
        }
        e.commit = g.head;
        e.files = g.files.into_iter().take(50).collect();
    }
    e.summary = parts.join(", ");
    e
}

/// The warning for auto evidence that names changed files outside the lease's reservation.
fn outside_warning(id: &str, t: &Todo, e: &Evidence) -> Option<String> {
    let l = t.lease.as_ref()?;
    let first = e.outside.first()?;
    let more = match e.outside.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    Some(format!(
        "{id}: changed outside its reservation ({}): {first}{more}",
        l.paths.join(" ")
    ))
}
