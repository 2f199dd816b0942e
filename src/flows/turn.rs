//! A turn's start (should-run, then the claim under the turn's id, with its worktree) and its
//! end (evidence, done or release, and one slot, recorded together), for `turn start` and
//! `turn end` and for the turn runner alike.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::{check, claim};
use crate::kernel::ops::{self, Change, ClaimOpts, Ended, Start, TurnEnd};
use crate::kernel::{
    Action, Code, Dur, Error, Event, Evidence, EvidenceKind, Result, Snapshot, Todo, Ts, proof,
};
use crate::runtime::{git, process, worktree, worktree_retire};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// How a turn starts.
#[derive(Debug, Clone, Default)]
pub struct StartOpts {
    /// The turn's id.
    pub turn: String,
    /// The lease's length (default: the project's).
    pub ttl: Option<Dur>,
    /// Make (or reuse) a git worktree for the todo.
    pub worktree: bool,
    /// A start of a turn this agent holds already claims nothing again (`turn start`).
    pub resume: bool,
    /// Record the work tree's state as the turn begins in its lease (`turn start`).
    pub base: bool,
    /// The gate whose approved action the turn runs (the command): its use goes with the claim.
    pub approved: Option<(Approved, Vec<OsString>)>,
}

/// A turn that runs a gate's approved action.
#[derive(Debug, Clone)]
pub struct Approved {
    /// The gate's id.
    pub gate: String,
    /// The journal holds a use of it already.
    pub journal_used: bool,
}

/// A turn's start, committed.
#[derive(Debug)]
pub struct Started {
    /// How it went.
    pub start: Start,
    /// The turn was started already by this agent: its claim, again.
    pub resumed: bool,
    /// The todo's worktree, made or reused.
    pub worktree: Option<PathBuf>,
    /// What went wrong without failing the start (an old worktree kept).
    pub warnings: Vec<String>,
    /// The lease's length.
    pub ttl: Dur,
    /// The breaker is on.
    pub breaker: bool,
}

/// Starts a turn of `agent` in the project at `root`: should-run, then the claim, its worktree
/// made after the commit (a worktree that cannot be made gives the lease back).
pub fn start(
    store: &dyn Store,
    root: &Path,
    (agent, now): (&str, Ts),
    o: &StartOpts,
) -> Result<Started> {
    claim::before(root, o.worktree)?;
    // A `--worktree` turn's base is its worktree's, read once the claim names the todo.
    let base = (o.base && !o.worktree).then(|| git::base(root)).flatten();
    let (start, resumed, prior, ttl, breaker) = store.mutate_claim(agent, now, |snap| {
        let ttl = o.ttl.unwrap_or(snap.config.lease.ttl);
        let breaker = snap.config.breaker.turns() > 0;
        let (c, (s, resumed, prior)) = begin(snap, root, (agent, now), o, base.clone())?;
        Ok((c, (s, resumed, prior, ttl, breaker)))
    })?;
    let (worktree, warnings) = match &start {
        Start::Claimed(t) => claim::after(store, root, o.worktree, prior.as_ref(), t, agent, now)?,
        _ => (None, Vec::new()),
    };
    Ok(Started {
        start,
        resumed,
        worktree,
        warnings,
        ttl,
        breaker,
    })
}

/// How the start's transaction went: the start, whether it was resumed, and the lease before.
type Begun = (Start, bool, Option<crate::kernel::Lease>);

/// The start's change: the same claim again for a turn this agent started already (`resume`),
/// else should-run and the claim (with the approved gate's use), its worktree's path checked.
fn begin(
    snap: &Snapshot,
    root: &Path,
    (agent, now): (&str, Ts),
    o: &StartOpts,
    base: Option<crate::kernel::Base>,
) -> Result<(Change, Begun)> {
    // Started already by this agent (a retry after a lost answer): the same claim again.
    if let Some(t) = o
        .resume
        .then(|| resumed(snap, agent, now, &o.turn))
        .flatten()
    {
        let held = t.lease.as_deref().cloned();
        return Ok((Change::default(), (Start::Claimed(Box::new(t)), true, held)));
    }
    let id = match ops::turn_todo(snap, agent, now, &o.turn)? {
        Ok(id) => id,
        Err(s) => return Ok((Change::default(), (s, false, None))),
    };
    let base = match o.base && o.worktree {
        true => git::worktree_base(root, &id),
        false => base,
    };
    let want = ClaimOpts {
        id: Some(id),
        ttl: o.ttl,
        worktree: o.worktree,
        turn: Some((o.turn.clone(), base)),
        paths: None,
    };
    let (mut c, t) = ops::claim_with(snap, agent, now, &want)?;
    if let Some((a, argv)) = &o.approved {
        use_approval(snap, (agent, now), (a, argv), &o.turn, &mut c)?;
    }
    let prior = claim::checked(root, snap, o.worktree, &t)?;
    Ok((c, (Start::Claimed(Box::new(t)), false, prior)))
}

/// The todo `agent`'s live lease for `turn` holds, if it has one.
fn resumed(snap: &Snapshot, agent: &str, now: Ts, turn: &str) -> Option<Todo> {
    snap.todos
        .values()
        .find(|t| {
            t.live_lease(now)
                .is_some_and(|l| l.turn.as_deref() == Some(turn) && l.holder == agent)
        })
        .cloned()
}

/// Adds the one use of the gate's approved action to the turn's claim: the same transaction, so
/// the action runs at most once, and only under the lease. The action must be `argv`.
fn use_approval(
    snap: &Snapshot,
    (agent, now): (&str, Ts),
    (a, argv): (&Approved, &[OsString]),
    turn: &str,
    c: &mut Change,
) -> Result<()> {
    let (used, g) = ops::use_gate(snap, agent, now, &a.gate, Some(turn), a.journal_used)?;
    let same = g.action.as_ref().is_some_and(|x| {
        x.kind == crate::kernel::gate_action::ActionKind::Cmd
            && x.argv.iter().map(OsString::from).eq(argv.iter().cloned())
    });
    if !same {
        return Err(Error::new(
            Code::Denied,
            format!(
                "gate {}'s action is not the command this turn was given",
                a.gate
            ),
        ));
    }
    c.writes.extend(used.writes);
    c.events.extend(used.events);
    Ok(())
}

/// A turn's end, recorded.
#[derive(Debug)]
pub struct Recorded {
    /// What was recorded.
    pub ended: Ended,
    /// The limits (`slots`, `tokens`, `cost_usd`) the turn's spend went past.
    pub over_limit: Vec<String>,
    /// What went wrong without failing the end (the worktree kept or not removed).
    pub warnings: Vec<String>,
}

/// Records a turn's end: whether the turn's command closed its todo itself, `end_turn`, and the
/// worktree of a todo done retired, at `now`. With `signals` (the runner's signal count when its
/// command ended), a busy store is tried again for a while, each try at its own time: the
/// command ran, and its record is what frees the lease; a signal since stops that.
pub fn end(
    store: &dyn Store,
    root: &Path,
    (agent, now): (&str, Ts),
    mut end: TurnEnd,
    signals: Option<usize>,
) -> Result<Recorded> {
    end.closed_fence = match store.archived_todo(&end.todo) {
        Ok(Some(t)) => Some(t.fence),
        _ => None,
    };
    let id = end.todo.clone();
    let record = || {
        store.mutate(|snap| {
            let at = signals.map_or(now, |_| Ts::now());
            let (c, ended) = ops::end_turn(snap, agent, at, end.clone())?;
            let over = ops::spend_over_limit(&c);
            Ok((c, (ended, over)))
        })
    };
    let (ended, over_limit) = match signals {
        // The command ran: its record, not the lease's expiry, should free the lease.
        Some(n) => retrying(n, record).map_err(|e| Error {
            message: format!(
                "the turn ran, but its record was not written: {}",
                e.message
            ),
            hint: Some(format!(
                "its lease on {id} lapses at its expiry; `loopx todo release {id}` frees it now"
            )),
            ..e
        })?,
        None => record()?,
    };
    let warnings = match ended {
        Ended::Done => worktree_retire::retire(root, &id).into_iter().collect(),
        _ => Vec::new(),
    };
    Ok(Recorded {
        ended,
        over_limit,
        warnings,
    })
}

/// How long the end of a turn is tried again while the store is busy.
const END_RETRY: Duration = Duration::from_secs(300);

/// Runs `f` again while the store is busy, for five minutes, unless a signal came since the
/// count was `signals`.
pub fn retrying<T>(signals: usize, f: impl Fn() -> Result<T>) -> Result<T> {
    let until = std::time::Instant::now() + END_RETRY;
    loop {
        match f() {
            Err(e)
                if e.code.is_busy()
                    && std::time::Instant::now() < until
                    && process::signal_count() == signals =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            r => return r,
        }
    }
}

/// What `turn end` asks.
#[derive(Debug, Clone)]
pub struct EndOpts {
    /// The id `turn start` gave.
    pub turn: String,
    /// The turn's todo (default: the one whose lease names the turn).
    pub todo: Option<String>,
    /// The fence `turn start` gave (default: the lease's).
    pub fence: Option<u64>,
    /// Mark the todo done; otherwise the lease is given back.
    pub done: bool,
    /// The evidence's text.
    pub summary: String,
    /// The turn's own exit code, if it has one (0 is success).
    pub exit_code: Option<i32>,
}

/// How `turn end` went, when the turn was not recorded already.
#[derive(Debug)]
pub struct Ending {
    /// The turn's todo.
    pub todo: String,
    /// Its fence.
    pub fence: u64,
    /// What was recorded.
    pub recorded: Recorded,
    /// The check's failed run, when a done was asked and its check failed.
    pub failed: Option<Evidence>,
}

/// `turn end`: finds the turn's todo, runs its check before the lock when a done is asked, and
/// records the end. `None` when the turn was recorded already and nothing names it any more.
pub fn end_step(
    store: &dyn Store,
    root: &Path,
    (agent, now): (&str, Ts),
    o: &EndOpts,
) -> Result<Option<Ending>> {
    let snap = store.load()?;
    let Some((todo, fence, since)) = target(store, &snap, (agent, now), o)? else {
        return Ok(None);
    };
    let done = o.done && o.exit_code.is_none_or(|c| c == 0);
    // A todo with an approved check is done only when it passes: run before the lock.
    let check = match done {
        true => {
            let timeout = check::TIMEOUT_DEFAULT;
            check::before_done(
                store,
                root,
                &snap,
                (agent, now),
                (&todo, Some(fence)),
                timeout,
            )?
        }
        false => None,
    };
    let failed = check.as_ref().filter(|c| !proof::passed(c)).cloned();
    let done = done && failed.is_none();
    let bad = o.exit_code.is_some_and(|c| c != 0);
    let mut evidence = Evidence::new(
        now,
        agent,
        Some(fence),
        EvidenceKind::Note,
        o.summary.clone(),
    );
    evidence.turn = Some(o.turn.clone());
    evidence.exit_code = o.exit_code;
    evidence.duration_ms = since.map(|s| u64::try_from(now.since(s).0).unwrap_or(0));
    let end_of = TurnEnd {
        todo: todo.clone(),
        fence,
        turn: o.turn.clone(),
        evidence,
        done,
        check,
        closed_fence: None,
        progress: progress_of(store, root, &snap, &todo, done, bad),
    };
    let recorded = end(store, root, (agent, now), end_of, None)?;
    Ok(Some(Ending {
        todo,
        fence,
        recorded,
        failed,
    }))
}

/// The breaker's facts about the turn on `todo`: measured when the breaker is on and the todo
/// is not done, else only whether the turn failed (`bad`).
fn progress_of(
    store: &dyn Store,
    root: &Path,
    snap: &Snapshot,
    todo: &str,
    done: bool,
    bad: bool,
) -> ops::Progress {
    let on = snap.config.breaker.turns() > 0;
    let Some(t) = snap.todos.get(todo).filter(|_| !done && on) else {
        return ops::Progress {
            failed: bad,
            ..ops::Progress::default()
        };
    };
    let base = t.lease.as_ref().and_then(|l| l.base.clone());
    let since = base
        .as_ref()
        .and_then(|b| b.at)
        .or(t.lease.as_ref().map(|l| l.acquired_at))
        .unwrap_or(Ts::MAX);
    // Where the turn worked: the todo's worktree when its lease names one.
    let dir = worktree::work_of(root, t);
    super::progress::measure(store, &dir, t, (base, since), bad)
}

/// The todo, fence and start time of `o.turn`: the lease naming it, or what `o.todo` and
/// `o.fence` say. `None` when the turn was recorded already and nothing names it any more.
fn target(
    store: &dyn Store,
    snap: &Snapshot,
    (agent, now): (&str, Ts),
    o: &EndOpts,
) -> Result<Option<(String, u64, Option<Ts>)>> {
    let turn = o.turn.as_str();
    let todo = o.todo.as_deref();
    let todo = todo.map(|id| store.resolve_todo(snap, id)).transpose()?;
    let held = snap.todos.values().find_map(|t| {
        let l = t.lease.as_ref()?;
        (l.turn.as_deref() == Some(turn) && l.holder == agent).then_some((t, l))
    });
    if let Some((t, l)) = held
        && todo.as_deref().is_none_or(|id| id == t.id)
    {
        let fence = o.fence.unwrap_or(l.fence);
        return Ok(Some((t.id.clone(), fence, Some(l.acquired_at))));
    }
    match (todo, o.fence) {
        (Some(id), Some(f)) => {
            let granted = claim_line(store, |e| {
                e.target == id && e.data.get("fence").and_then(Value::as_u64) == Some(f)
            })?;
            match granted {
                Some(e) if e.actor != agent => Err(not_yours(&id, f, &e.actor)),
                _ => Ok(Some((id, f, None))),
            }
        }
        _ if crate::kernel::quota::has_turn(&snap.quota, &snap.config.quota, now, agent, turn) => {
            Ok(None)
        }
        _ => match claim_line(store, |e| {
            e.actor == agent && e.data.get("turn").and_then(Value::as_str) == Some(turn)
        })? {
            Some(e) => Ok(e.data["fence"].as_u64().map(|f| (e.target, f, None))),
            None => Err(Error::new(
                Code::NotFound,
                format!("no lease of {agent} names turn {}", esc(turn)),
            )
            .hint("give the --todo and --fence that `turn start` printed")),
        },
    }
}

fn not_yours(id: &str, fence: u64, holder: &str) -> Error {
    Error::new(
        Code::LeaseConflict,
        format!("fence {fence} of {id} was granted to {}", esc(holder)),
    )
    .hint("end only your own turn, with the --todo and --fence your `turn start` gave")
}

/// How far back the journal is searched for a claim.
const CLAIM_SCAN: usize = 10_000;

/// The newest claim in the journal that `pick` accepts. A turn's claim names the turn, so its
/// todo is found after the lease stops naming it (taken over, or given up by its own commands).
fn claim_line(store: &dyn Store, pick: impl Fn(&Event) -> bool) -> Result<Option<Event>> {
    Ok(store
        .journal_tail(CLAIM_SCAN)?
        .into_iter()
        .rev()
        .find(|e| e.action == Action::TodoClaim && pick(e)))
}
