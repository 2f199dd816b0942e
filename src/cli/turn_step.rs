//! `turn start` and `turn end`: the turn runner's two halves, for a host that is itself the turn
//! (an agent session, a hook, the MCP server), with the runner's guarantees: one claim under a
//! turn id, one record and one slot for it, however often either half is called.

use clap::{Args, Subcommand};
use serde_json::json;

use super::{Ctx, Out, quota::answer_out, to_json};
use crate::flows::turn::{self as flow, EndOpts, StartOpts};
use crate::kernel::ops::{Ended, Start, check_ttl};
use crate::kernel::{Code, Dur, Error, Result, limits};
use crate::runtime::turn_id::{check_turn_id, fresh_turn_id};
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
    let o = StartOpts {
        turn: turn.clone(),
        ttl: a.ttl,
        worktree: a.worktree,
        resume: true,
        base: true,
        approved: None,
    };
    let s = flow::start(&*store, &ctx.work_dir(&*store), (&ctx.agent, ctx.now), &o)?;
    let t = match s.start {
        Start::NotNow(answer) => return Ok(answer_out(&answer).with("turn", json!(turn))),
        Start::Replayed => {
            return Ok(Out::new(
                "turn",
                json!(turn),
                format!("turn {} was recorded already; nothing claimed", esc(&turn)),
            )
            .with("replayed", json!(true)));
        }
        Start::Claimed(t) => t,
    };
    let text = format!(
        "turn {}: claimed {} \"{}\" (fence {}); end it with `loopx turn end --turn {}`",
        esc(&turn),
        t.id,
        esc(&t.title),
        t.fence,
        esc(&turn)
    );
    let mut out = Out::new("turn", json!(turn), text)
        .with("fence", json!(t.fence))
        .with("todo", to_json(&t));
    if let Some(p) = s.worktree {
        out.text
            .push_str(&format!("\n  worktree: {}", esc(&p.to_string_lossy())));
        out = out.with("worktree", json!(p.to_string_lossy()));
    }
    if s.resumed {
        out = out.with("resumed", json!(true));
    }
    // A review's turn shows the work it reviews, as its claim does.
    if let Some((j, text)) = super::agent::reviews_evidence(&*store, &t)? {
        out = out.with("reviews_evidence", j);
        out.text.push_str(&text);
    }
    Ok(out.warned(s.warnings))
}

/// `turn end`: the turn's evidence, done or release, and one slot, recorded together.
fn end(ctx: &Ctx, a: EndArgs) -> Result<Out> {
    let turn = check_turn_id(&a.turn)?;
    let summary = a.summary.unwrap_or_else(|| "turn ended".into());
    limits::usage(limits::text("--summary", &summary, limits::TEXT_MAX))?;
    let store = ctx.open()?;
    let o = EndOpts {
        turn: turn.clone(),
        todo: a.todo,
        fence: a.fence,
        done: a.done,
        summary,
        exit_code: a.exit_code,
    };
    let root = ctx.work_dir(&*store);
    let Some(e) = flow::end_step(&*store, &root, (&ctx.agent, ctx.now), &o)? else {
        return Ok(replayed(&turn));
    };
    let (todo, r) = (&e.todo, &e.recorded);
    let word = match &r.ended {
        Ended::Replayed => return Ok(replayed(&turn)),
        Ended::Refused(e) => return Err(e.clone()),
        ended => ended.word(),
    };
    if let Some(c) = e.failed {
        return Err(Error::new(
            Code::CheckFailed,
            format!("{todo} is not done: {}; the turn ended ({word})", c.summary),
        )
        .hint(format!("the run is in `loopx evidence list --todo {todo}`; fix the work, claim it again and end a turn with --done"))
        .details(json!({"evidence": c, "ended": word})));
    }
    let mut out = Out::new(
        "turn",
        json!(turn),
        format!("turn {}: {todo} {word}; one slot spent", esc(&turn)),
    )
    .with("todo", json!({"id": todo}))
    .with("fence", json!(e.fence))
    .with("ended", json!(word));
    if !r.over_limit.is_empty() {
        out.text.push_str(&format!(
            "; it went past the window's {} limit",
            r.over_limit.join(" and ")
        ));
        out = out.with("over_limit", json!(r.over_limit));
    }
    Ok(out.warned(e.recorded.warnings))
}

fn replayed(turn: &str) -> Out {
    Out::new(
        "turn",
        json!(turn),
        format!("turn {} was recorded already", esc(turn)),
    )
    .with("replayed", json!(true))
}
