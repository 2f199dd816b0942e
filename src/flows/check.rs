//! The check run that a todo's done needs: the lease held long enough, `sh -c` in the work
//! tree, bounded in time and output, whatever it leaves behind killed; what it gave becomes
//! `check` evidence, and a failed run is recorded.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::kernel::proof::{self, Needed};
use crate::kernel::{Code, Dur, Error, Evidence, EvidenceKind, Result, Snapshot, Todo, Ts, ops};
use crate::runtime::git;
use crate::runtime::process::{self, Echo, Limits, Spec};
use crate::store::{Store, StoreExt};

/// The longest a check may run when the caller gives no timeout.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(600);

/// Runs `n` for `t` in `root` (or in `t`'s worktree) and returns its evidence: the command's hash, exit code,
/// duration, output tail, the HEAD it ran at and the uncommitted files of the tree it read
/// (`files`; a note when HEAD moved meanwhile).
pub fn run(
    root: &Path,
    t: &Todo,
    n: &Needed,
    (agent, now): (&str, Ts),
    timeout: Duration,
) -> Result<Evidence> {
    // A todo worked in a worktree of its own is checked there, at that worktree's HEAD.
    let work = crate::runtime::worktree::work_of(root, t);
    let root = work.as_path();
    // The tree the check reads: HEAD, and the changes no commit holds (outside `.loopx/`).
    let facts = git::facts(root);
    let before = facts.as_ref().ok().and_then(|g| g.as_ref()?.head.clone());
    let fin = process::run(&spec(root, t, n, agent), &limits(timeout))?;
    let after = git::head(root).ok().flatten();
    let ms = fin.duration.as_millis().min(u64::MAX as u128) as u64;
    let mut summary = summary(&fin, &where_text(&facts), ms, timeout);
    if before != after {
        let to = after.as_deref().map_or("none", |h| &h[..h.len().min(12)]);
        summary.push_str(&format!("; HEAD moved to {to} while it ran"));
    }
    let mut e = Evidence::new(now, agent, None, EvidenceKind::Check, summary);
    e.command = Some(n.command.clone());
    e.sha256 = Some(n.sha256.clone());
    e.exit_code = Some(fin.exit.code());
    e.duration_ms = Some(ms);
    e.output = Some(fin.tail).filter(|s| !s.is_empty());
    e.commit = before;
    if let Ok(Some(g)) = facts {
        e.files = g.files.into_iter().take(DIRTY_KEPT).collect();
    }
    e.timed_out = fin.timed_out;
    Ok(e)
}

/// How a check's command runs: `sh -c` in `root`, told the todo and the agent.
fn spec(root: &Path, t: &Todo, n: &Needed, agent: &str) -> Spec {
    Spec {
        argv: vec!["sh".into(), "-c".into(), n.command.clone().into()],
        env: vec![
            (OsString::from("LOOPX_TODO_ID"), OsString::from(&t.id)),
            (OsString::from("LOOPX_AGENT"), OsString::from(agent)),
        ],
        cwd: Some(root.to_path_buf()),
        stdin: None,
        echo: Echo::None,
        forward: true,
        end_group: true,
    }
}

/// A check's limits: `timeout`, a short grace, and the tail of its output kept.
fn limits(timeout: Duration) -> Limits {
    Limits {
        timeout,
        grace: Duration::from_secs(2),
        tail_lines: 20,
        tail_bytes: 2_000,
        keep_bytes: 0,
    }
}

/// A check's summary: passed, timed out or failed, where (`at`) and how long.
fn summary(fin: &process::Finished, at: &str, ms: u64, timeout: Duration) -> String {
    match (fin.exit.success() && !fin.timed_out, fin.timed_out) {
        (true, _) => format!("check passed at {at} ({ms} ms)"),
        (false, true) => format!("check timed out at {at} after {} s", timeout.as_secs()),
        (false, false) => format!("check failed at {at}: exit {}", fin.exit.code()),
    }
}

/// The most uncommitted files a check's evidence names (as auto evidence).
const DIRTY_KEPT: usize = 50;

/// Where a check ran, for its summary: `HEAD abc123`, and the uncommitted files when the tree
/// was dirty (`HEAD abc123 on a dirty tree (2 uncommitted files: a.sh, b.txt)`).
fn where_text(facts: &git::GitFacts) -> String {
    let g = match facts {
        Ok(Some(g)) => g,
        Ok(None) => return "no commit (not a git work tree)".into(),
        Err(why) => return format!("no commit (no git facts: {why})"),
    };
    let mut at = match &g.head {
        Some(h) => format!("HEAD {}", &h[..h.len().min(12)]),
        None => "no commit".into(),
    };
    // A path may be long: the summary names the first two, each cut on a character.
    let name = |i: usize| -> String { g.files[i].chars().take(200).collect() };
    if !g.files.is_empty() {
        let (n, first) = (g.files.len(), name(0));
        let more = match n {
            1 => String::new(),
            2 => format!(", {}", name(1)),
            _ => format!(", {} and {} more", name(1), n - 2),
        };
        let s = if n == 1 { "" } else { "s" };
        at.push_str(&format!(
            " on a dirty tree ({n} uncommitted file{s}: {first}{more})"
        ));
    }
    at
}

/// For a done: the approved check todo `id` needs, run now in the work tree, before the lock;
/// `None` when it needs none. A check that cannot run (edited, unapproved) is refused here, and
/// a caller without the live lease (under `fence`, when given) before anything runs.
pub fn before_done(
    store: &dyn Store,
    root: &Path,
    snap: &Snapshot,
    (agent, now): (&str, Ts),
    (id, fence): (&str, Option<u64>),
    timeout: Duration,
) -> Result<Option<Evidence>> {
    let Some(t) = snap.todos.get(id) else {
        return Ok(None);
    };
    let Some(n) = proof::needed(snap, t)? else {
        return Ok(None);
    };
    ops::check_lease(t, agent, now, fence)?;
    held(store, root, t, &n, (agent, now), timeout).map(Some)
}

/// Runs `n`, the check `t`'s done needs, in the work tree for at most `timeout`, the agent's
/// lease on `t` renewed first when it would lapse before the check ends, so a passing check is
/// never thrown away and no one claims the todo while it runs.
pub fn held(
    store: &dyn Store,
    root: &Path,
    t: &Todo,
    n: &Needed,
    (agent, now): (&str, Ts),
    timeout: Duration,
) -> Result<Evidence> {
    let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX / 2);
    let need = Dur(ms.saturating_add(30_000));
    let at = Ts::now();
    let short = t
        .live_lease(at)
        .is_some_and(|l| l.holder == agent && l.expires_at < at.add(need));
    if short {
        store.mutate(|snap| ops::claim(snap, agent, Ts::now(), need, Some(&t.id)))?;
    }
    run(root, t, n, (agent, now), timeout)
}

/// Records a failed check's evidence after `evidence` (the todo stays claimed), and the error
/// to answer: exit 9 `check_failed`.
pub fn failed(
    store: &dyn Store,
    (agent, now): (&str, Ts),
    (id, fence): (&str, Option<u64>),
    mut evidence: Vec<Evidence>,
    e: &Evidence,
) -> Error {
    evidence.push(e.clone());
    let recorded = store.mutate(|snap| {
        let u = ops::Update {
            fence,
            evidence: evidence.clone(),
            status: None,
            reason: None,
        };
        ops::update(snap, agent, now, id, u)
    });
    if let Err(r) = recorded {
        return r;
    }
    Error::new(
        Code::CheckFailed,
        format!("{id} is not done: {}; it stays claimed", e.summary),
    )
    .hint(format!(
        "fix the work and run `loopx todo update {id} --status done` again; the output is in `loopx evidence list --todo {id}`"
    ))
    .details(json!({"evidence": e}))
}
