//! `turn start` and `turn end`: the turn runner's two halves, for a host that is itself the turn
//! (an agent session, a hook, the MCP server), with the runner's guarantees: one claim under a
//! turn id, one record and one slot for it, however often either half is called.

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::{Ctx, Out, quota::answer_out, to_json};
use crate::kernel::action::Action;
use crate::kernel::ops::{self, Ended, Start, TurnEnd, check_ttl};
use crate::kernel::{
    Code, Dur, Error, Event, Evidence, EvidenceKind, Result, Snapshot, Ts, limits,
};
use crate::runtime::turn::{check_turn_id, fresh_turn_id};
use crate::runtime::worktree;
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `turn start` / `turn end`.
#[derive(Debug, Subcommand)]
pub enum TurnStep {
    /// Begin a turn you run yourself: should-run, then the claim, under a turn id.
    #[command(after_help = "Example:\n  loopx --agent claude turn start --turn t-42 --json")]
    Start(StartArgs),
    /// End a turn begun with `turn start`: evidence, done or release, and one slot.
    #[command(
        after_help = "Example:\n  loopx --agent claude turn end --turn t-42 --done --summary \"tests pass\""
    )]
    End(EndArgs),
}

/// `turn start`.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// The turn's id (default: a fresh one); starting it again after its end claims nothing.
    #[arg(long, value_name = "ID")]
    turn: Option<String>,
    /// The lease's length (renew it with `todo renew` while you work).
    #[arg(long, value_name = "DUR")]
    ttl: Option<Dur>,
    /// Make (or reuse) a git worktree for the todo, answered as `worktree`.
    #[arg(long)]
    worktree: bool,
}

/// `turn end`.
#[derive(Debug, Args)]
pub struct EndArgs {
    /// The id `turn start` gave.
    #[arg(long, value_name = "ID")]
    turn: String,
    /// The turn's todo (default: the one whose lease names the turn).
    #[arg(long, value_name = "ID")]
    todo: Option<String>,
    /// The fence `turn start` gave (default: the lease's).
    #[arg(long)]
    fence: Option<u64>,
    /// Mark the todo done; otherwise the lease is given back.
    #[arg(long)]
    done: bool,
    /// What the turn did or proved (the evidence's text).
    #[arg(long, value_name = "TEXT")]
    summary: Option<String>,
    /// The turn's own exit code, if it has one (0 is success).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    exit_code: Option<i32>,
}

/// Runs `turn start` or `turn end`.
pub fn run(ctx: &Ctx, step: TurnStep) -> Result<Out> {
    match step {
        TurnStep::Start(a) => start(ctx, a),
        TurnStep::End(a) => end(ctx, a),
    }
}

fn start(ctx: &Ctx, a: StartArgs) -> Result<Out> {
    let turn = match &a.turn {
        Some(t) => check_turn_id(t)?,
        None => fresh_turn_id()?,
    };
    if let Some(t) = a.ttl {
        check_ttl(t).map_err(|e| e.hint("give it like `--ttl 30m`"))?;
    }
    let store = ctx.open()?;
    let root = ctx.work_dir(&*store);
    if a.worktree {
        worktree::preflight(&root)?;
    }
    // A `--worktree` turn's base is its worktree's, read once the claim names the todo.
    let base = (!a.worktree)
        .then(|| crate::runtime::git::base(&root))
        .flatten();
    let (start, resumed, prior) = store.mutate_claim(&ctx.agent, ctx.now, |snap| {
        // Started already by this agent (a retry after a lost answer): the same claim again.
        if let Some(t) = resumed(snap, &ctx.agent, ctx.now, &turn) {
            let held = t.lease.clone();
            return Ok((
                ops::Change::default(),
                (Start::Claimed(Box::new(t)), true, held),
            ));
        }
        let ttl = a.ttl.unwrap_or(snap.config.lease.ttl);
        let (mut c, mut s) =
            ops::start_turn(snap, &ctx.agent, ctx.now, ttl, (&turn, base.clone()))?;
        let prior = match &mut s {
            Start::Claimed(t) => {
                if a.worktree {
                    worktree_base(&root, t);
                }
                worktree::claimed(&root, snap, a.worktree, &mut c, t)?
            }
            _ => None,
        };
        Ok((c, (s, false, prior)))
    })?;
    Ok(match start {
        Start::NotNow(answer) => answer_out(&answer).with("turn", json!(turn)),
        Start::Replayed => Out::new(
            "turn",
            json!(turn),
            format!("turn {} was recorded already; nothing claimed", esc(&turn)),
        )
        .with("replayed", json!(true)),
        Start::Claimed(t) => {
            let text = format!(
                "turn {}: claimed {} \"{}\" (fence {}); end it with `loopx turn end --turn {}`",
                esc(&turn),
                t.id,
                esc(&t.title),
                t.fence,
                esc(&turn)
            );
            let made = worktree::after_claim(&root, a.worktree, prior.as_ref(), &t, ctx.now);
            let (tree, warnings) = made.map_err(|e| {
                super::todo_claim::released(&*store, e, &t, prior.as_ref(), &ctx.agent, ctx.now)
            })?;
            let mut out = Out::new("turn", json!(turn), text)
                .with("fence", json!(t.fence))
                .with("todo", to_json(&t));
            if let Some(p) = tree {
                out.text
                    .push_str(&format!("\n  worktree: {}", esc(&p.to_string_lossy())));
                out = out.with("worktree", json!(p.to_string_lossy()));
            }
            if resumed {
                out = out.with("resumed", json!(true));
            }
            // A review's turn shows the work it reviews, as its claim does.
            if let Some((j, text)) = super::agent::reviews_evidence(&*store, &t)? {
                out = out.with("reviews_evidence", j);
                out.text.push_str(&text);
            }
            super::todo_claim::warned(ctx, out, warnings)
        }
    })
}

/// A `--worktree` turn's base is its worktree's, where its work is (the claim's change is written
/// with it by [`worktree::claimed`]).
fn worktree_base(root: &std::path::Path, t: &mut crate::kernel::Todo) {
    let b = crate::runtime::git::worktree_base(root, &t.id);
    if let Some(l) = t.lease.as_mut() {
        let at = l.base.as_ref().and_then(|b| b.at);
        l.base = Some(crate::kernel::Base {
            at,
            ..b.unwrap_or_default()
        });
    }
}

/// `turn end`: the turn's evidence, done or release, and one slot, recorded together.
fn end(ctx: &Ctx, a: EndArgs) -> Result<Out> {
    let turn = check_turn_id(&a.turn)?;
    let summary = a.summary.clone().unwrap_or_else(|| "turn ended".into());
    limits::usage(limits::text("--summary", &summary, limits::TEXT_MAX))?;
    let store = ctx.open()?;
    let snap = store.load()?;
    let Some((todo, fence, since)) = target(&*store, &snap, (&ctx.agent, ctx.now), &turn, &a)?
    else {
        return Ok(replayed(&turn));
    };
    let closed_fence = match store.archived_todo(&todo) {
        Ok(Some(t)) => Some(t.fence),
        _ => None,
    };
    let e = note(ctx, (&turn, fence), summary, &a, since);
    let done = a.done && a.exit_code.is_none_or(|c| c == 0);
    // A todo with an approved check is done only when it passes: run before the lock.
    let timeout = crate::runtime::proof::TIMEOUT_DEFAULT;
    let check = match done {
        true => super::todo_check::prove(ctx, &*store, &snap, &todo, Some(fence), timeout)?,
        false => None,
    };
    let failed = check
        .as_ref()
        .filter(|c| !crate::kernel::proof::passed(c))
        .cloned();
    let done = done && failed.is_none();
    let bad = a.exit_code.is_some_and(|c| c != 0);
    let progress = progress_of(ctx, &*store, &snap, &todo, done, bad);
    let end = TurnEnd {
        todo: todo.clone(),
        fence,
        turn: turn.clone(),
        evidence: e,
        done,
        check,
        closed_fence,
        progress,
    };
    let (ended, over) = store.mutate(|snap| {
        let (c, ended) = ops::end_turn(snap, &ctx.agent, ctx.now, end.clone())?;
        let over = ops::spend_over_limit(&c);
        Ok((c, (ended, over)))
    })?;
    let word = match &ended {
        Ended::Done => "done",
        Ended::Released => "released",
        Ended::Kept => "kept",
        Ended::Closed => "closed",
        Ended::Replayed => return Ok(replayed(&turn)),
        Ended::Refused(e) => return Err(e.clone()),
    };
    if let Some(c) = failed {
        return Err(crate::kernel::Error::new(
            crate::kernel::Code::CheckFailed,
            format!("{todo} is not done: {}; the turn ended ({word})", c.summary),
        )
        .hint(format!("the run is in `loopx evidence list --todo {todo}`; fix the work, claim it again and end a turn with --done"))
        .details(json!({"evidence": c, "ended": word})));
    }
    let retire = matches!(ended, Ended::Done);
    Ok(ended_out(
        ctx,
        &*store,
        (&turn, &todo, fence),
        word,
        over,
        retire,
    ))
}

/// The turn's note: its summary, exit code and how long it took since `since`.
fn note(
    ctx: &Ctx,
    (turn, fence): (&str, u64),
    summary: String,
    a: &EndArgs,
    since: Option<Ts>,
) -> Evidence {
    let mut e = Evidence::new(
        ctx.now,
        &ctx.agent,
        Some(fence),
        EvidenceKind::Note,
        summary,
    );
    e.turn = Some(turn.to_string());
    e.exit_code = a.exit_code;
    e.duration_ms = since.map(|s| u64::try_from(ctx.now.since(s).0).unwrap_or(0));
    e
}

/// The breaker's facts about the turn on `todo`: measured when the breaker is on and the todo
/// is not done, else only whether the turn failed (`bad`).
fn progress_of(
    ctx: &Ctx,
    store: &dyn Store,
    snap: &Snapshot,
    todo: &str,
    done: bool,
    bad: bool,
) -> ops::Progress {
    let on = snap.config.breaker.turns() > 0;
    match snap.todos.get(todo).filter(|_| !done && on) {
        Some(t) => {
            let base = t.lease.as_ref().and_then(|l| l.base.clone());
            let since = base
                .as_ref()
                .and_then(|b| b.at)
                .or(t.lease.as_ref().map(|l| l.acquired_at))
                .unwrap_or(Ts::MAX);
            // Where the turn worked: the todo's worktree when its lease names one.
            let dir = worktree::work_of(&ctx.work_dir(store), t);
            crate::runtime::progress::measure(store, &dir, t, (base, since), bad)
        }
        None => ops::Progress {
            failed: bad,
            ..ops::Progress::default()
        },
    }
}

/// What `turn end` prints: how the turn ended, the limits its slot went past, and (`retire`,
/// when done) the worktree's removal warning.
fn ended_out(
    ctx: &Ctx,
    store: &dyn Store,
    (turn, todo, fence): (&str, &str, u64),
    word: &str,
    over: Vec<String>,
    retire: bool,
) -> Out {
    let mut out = Out::new(
        "turn",
        json!(turn),
        format!("turn {}: {todo} {word}; one slot spent", esc(turn)),
    )
    .with("todo", json!({"id": todo}))
    .with("fence", json!(fence))
    .with("ended", json!(word));
    if !over.is_empty() {
        out.text.push_str(&format!(
            "; it went past the window's {} limit",
            over.join(" and ")
        ));
        out = out.with("over_limit", json!(over));
    }
    let warnings = match retire {
        true => crate::runtime::worktree::retire(&ctx.work_dir(store), todo),
        false => None,
    };
    super::todo_claim::warned(ctx, out, warnings.into_iter().collect())
}

/// The todo `agent`'s live lease for `turn` holds, if it has one.
fn resumed(snap: &Snapshot, agent: &str, now: Ts, turn: &str) -> Option<crate::kernel::Todo> {
    snap.todos
        .values()
        .find(|t| {
            t.live_lease(now)
                .is_some_and(|l| l.turn.as_deref() == Some(turn) && l.holder == agent)
        })
        .cloned()
}

fn replayed(turn: &str) -> Out {
    Out::new(
        "turn",
        json!(turn),
        format!("turn {} was recorded already", esc(turn)),
    )
    .with("replayed", json!(true))
}

/// The todo, fence and start time of `turn`: the lease naming it, or what `--todo`/`--fence`
/// say. `None` when the turn was recorded already and nothing names it any more.
fn target(
    store: &dyn Store,
    snap: &Snapshot,
    (agent, now): (&str, Ts),
    turn: &str,
    a: &EndArgs,
) -> Result<Option<(String, u64, Option<Ts>)>> {
    let todo = a
        .todo
        .as_deref()
        .map(|id| store.resolve_todo(snap, id))
        .transpose()?;
    let held = snap.todos.values().find_map(|t| {
        let l = t.lease.as_ref()?;
        (l.turn.as_deref() == Some(turn) && l.holder == agent).then_some((t, l))
    });
    if let Some((t, l)) = held
        && todo.as_deref().is_none_or(|id| id == t.id)
    {
        let fence = a.fence.unwrap_or(l.fence);
        return Ok(Some((t.id.clone(), fence, Some(l.acquired_at))));
    }
    match (todo, a.fence) {
        (Some(id), Some(f)) => {
            let granted = claim(store, |e| {
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
        _ => match claim(store, |e| {
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
fn claim(store: &dyn Store, pick: impl Fn(&Event) -> bool) -> Result<Option<Event>> {
    Ok(store
        .journal_tail(CLAIM_SCAN)?
        .into_iter()
        .rev()
        .find(|e| e.action == Action::TodoClaim && pick(e)))
}
