//! `todo update`: evidence and status, with the check that proves a todo done run outside
//! the lock.

use std::cell::RefCell;

use serde_json::Value;

use super::{UpdateArgs, target};
use crate::cli::capture::{artifact, auto_evidence, git_facts, outside_warning};
use crate::cli::{Ctx, Out, to_json};
use crate::flows::check;
use crate::kernel::limits;
use crate::kernel::ops::{self, Update};
use crate::kernel::proof::Needed;
use crate::kernel::{Code, Error, Evidence, EvidenceKind, Result, Status, Todo, Ts};
use crate::runtime::git::GitFacts;
use crate::runtime::{worktree, worktree_retire};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `todo update`: appends evidence and changes status; a done that needs a check runs it.
pub(super) fn update(ctx: &Ctx, store: &dyn Store, a: UpdateArgs) -> Result<Out> {
    let now = ctx.now;
    let agent = ctx.agent.as_str();
    check_args(&a)?;
    // Everything that reads outside .loopx/ (files, git, the check) happens before the lock.
    let mut evidence = given_evidence(ctx, &a)?;
    let auto = evidence.is_empty()
        && a.status
            .is_none_or(|s| s == Status::Done || s == Status::Open);
    let git = if auto {
        git_facts(&work_dir(ctx, store, agent, a.id.as_deref()))
    } else {
        Ok(None)
    };
    // A done or cancel that will keep the todo's worktree says so in its evidence.
    let prep = prepare_retire(ctx, store, &a);
    let kept = prep.as_ref().and_then(|p| kept_note(ctx, p));
    let noted = [evidence.as_slice(), kept.as_slice()].concat();
    let c = Commit {
        store,
        agent,
        a: &a,
        auto,
        git,
        wanted: RefCell::new(None),
        warned: RefCell::new(None),
    };
    let mut done = c.commit(&noted, None, now);
    // The kernel refuses the done of a todo with an approved check: run it outside the lock
    // (a todo without one pays nothing for this), then try again with its run.
    let refused = c.wanted.borrow_mut().take();
    if a.status == Some(Status::Done)
        && matches!(&done, Err(e) if e.code == Code::CheckFailed)
        && let Some((t, n)) = refused
    {
        let timeout = std::time::Duration::from_millis(a.check_timeout.0.max(0) as u64);
        let root = ctx.work_dir(store);
        let e = check::held(store, &root, &t, &n, (agent, now), timeout)?;
        if !crate::kernel::proof::passed(&e) {
            return Err(check::failed(
                store,
                (agent, now),
                (&t.id, a.fence),
                evidence,
                &e,
            ));
        }
        evidence.push(e);
        evidence.extend(kept);
        done = c.commit(&evidence, Some(&t.id), Ts::now());
    }
    let (t, notes) = done?;
    let mut warnings: Vec<String> = c.warned.into_inner().into_iter().collect();
    if matches!(a.status, Some(Status::Done | Status::Cancelled)) {
        warnings.extend(worktree_retire::retire_with(
            &ctx.work_dir(store),
            &t.id,
            prep,
        ));
    }
    Ok(Out::new("todo", to_json(&t), updated_text(&t, a.status))
        .noted(notes)
        .warned(warnings))
}

/// For a done or a cancel of a todo with a worktree: its removal's survey, made before the
/// commit (the removal itself runs after it).
fn prepare_retire(
    ctx: &Ctx,
    store: &dyn Store,
    a: &UpdateArgs,
) -> Option<worktree_retire::Prepared> {
    if !matches!(a.status, Some(Status::Done | Status::Cancelled)) {
        return None;
    }
    let root = ctx.work_dir(store);
    if !any_worktree(&root) {
        return None;
    }
    let snap = store.load().ok()?;
    let id = target(store, &snap, &ctx.agent, ctx.now, a.id.as_deref()).ok()?;
    worktree_retire::prepare(&root, &id)
}

/// The note for the evidence when the prepared removal will keep the worktree: it and why.
fn kept_note(ctx: &Ctx, prep: &worktree_retire::Prepared) -> Option<Evidence> {
    let why = prep.kept()?;
    let mut text = format!("worktree {} kept: {why}", worktree::rel(prep.id()));
    if let Some((i, _)) = text.char_indices().nth(NOTE_MAX) {
        text.truncate(i);
        text.push('…');
    }
    Some(Evidence::new(
        ctx.now,
        &ctx.agent,
        None,
        EvidenceKind::Note,
        text,
    ))
}

/// The most characters of a kept worktree's note (an evidence text holds at most 4,000).
const NOTE_MAX: usize = 2_000;

/// True when `.loopx/worktrees/` holds a worktree (it stays once made, with its `.gitignore`).
fn any_worktree(root: &std::path::Path) -> bool {
    std::fs::read_dir(root.join(worktree::DIR))
        .map(|d| d.flatten().any(|e| e.file_name() != ".gitignore"))
        .unwrap_or(false)
}

/// Refuses too many entries, a check timeout out of range, and `--kind check`.
fn check_args(a: &UpdateArgs) -> Result<()> {
    let entries = a.evidence.len() + a.artifact.len() + a.metric.len();
    limits::usage(limits::count(
        "--evidence/--artifact/--metric",
        entries,
        limits::EVIDENCE_MAX,
    ))?;
    if !(1_000..=86_400_000).contains(&a.check_timeout.0) {
        return Err(Error::usage("--check-timeout must be 1s to 24h"));
    }
    if a.kind == EvidenceKind::Check {
        return Err(Error::usage(
            "`--kind check` is loopx's own: it writes it when a todo's check runs",
        )
        .hint("use note, command, artifact, metric, git or auto"));
    }
    Ok(())
}

/// The evidence given: texts, then artifacts (hashed), then metrics.
fn given_evidence(ctx: &Ctx, a: &UpdateArgs) -> Result<Vec<Evidence>> {
    let (now, agent) = (ctx.now, ctx.agent.as_str());
    let mut evidence = Vec::new();
    for text in &a.evidence {
        evidence.push(Evidence::new(now, agent, None, a.kind, text.clone()));
    }
    for path in &a.artifact {
        evidence.push(artifact(ctx, now, agent, path)?);
    }
    for m in &a.metric {
        evidence.push(metric(now, agent, m)?);
    }
    Ok(evidence)
}

/// `--metric NAME=VALUE` as evidence: the value a number when it reads as one.
fn metric(now: Ts, agent: &str, m: &str) -> Result<Evidence> {
    let (name, value) = m
        .split_once('=')
        .filter(|(n, _)| !n.trim().is_empty())
        .ok_or_else(|| Error::usage(format!("`{m}` is not NAME=VALUE")))?;
    let v: Value = value
        .trim()
        .parse::<f64>()
        .ok()
        .and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
        .unwrap_or_else(|| Value::String(value.to_string()));
    let mut e = Evidence::new(
        now,
        agent,
        None,
        EvidenceKind::Metric,
        format!("{}={}", name.trim(), value.trim()),
    );
    e.name = Some(name.trim().to_string());
    e.value = Some(v);
    Ok(e)
}

/// One update's transaction, and what its tries saw.
struct Commit<'a> {
    store: &'a dyn Store,
    agent: &'a str,
    a: &'a UpdateArgs,
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
        let (store, agent, a) = (self.store, self.agent, self.a);
        store.mutate_noted(|snap| {
            let id = match pinned {
                Some(p) => p.to_string(),
                None => target(store, snap, agent, now, a.id.as_deref())?,
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
                fence: a.fence,
                evidence: ev,
                status: a.status,
                reason: a.reason.clone(),
            };
            let r = ops::update(snap, agent, now, &id, u);
            if matches!(&r, Err(e) if e.code == Code::CheckFailed)
                && let Ok(Some(n)) = crate::kernel::proof::needed(snap, cur)
            {
                *self.wanted.borrow_mut() = Some((cur.clone(), n));
            }
            r
        })
    }
}

/// What `todo update` says of the todo `t` it changed.
fn updated_text(t: &Todo, status: Option<Status>) -> String {
    match t.status {
        Status::Done | Status::Cancelled => {
            format!("{} {} (archived)", esc(&t.id), t.status.as_str())
        }
        _ if t.every.is_some() && status == Some(Status::Done) => format!(
            "{} done; next due {}",
            esc(&t.id),
            t.next_due_at.map(|d| d.to_string()).unwrap_or_default()
        ),
        s => format!("{} updated ({})", esc(&t.id), s.as_str()),
    }
}

/// Where the todo `update` names (or the agent's) is worked: its lease's worktree, if any,
/// else the project's work tree. Only a project with a worktree now pays the load.
fn work_dir(ctx: &Ctx, store: &dyn Store, agent: &str, id: Option<&str>) -> std::path::PathBuf {
    let root = ctx.work_dir(store);
    if !any_worktree(&root) {
        return root;
    }
    let Ok(snap) = store.load() else {
        return root;
    };
    match target(store, &snap, agent, ctx.now, id)
        .ok()
        .and_then(|id| snap.todos.get(&id))
    {
        Some(t) => worktree::work_of(&root, t),
        None => root,
    }
}
