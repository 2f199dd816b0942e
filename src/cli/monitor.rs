//! `monitor`: watchers' checks (propose, the owner's approve and revoke), the list of monitors,
//! and `poll`, which runs approved checks that are due without spending an agent's turn.

use clap::Subcommand;
use serde_json::{Value, json};

use super::{Ctx, Out, rel_time};
use crate::flows::monitor::{Checked, Poller};
use crate::kernel::monitor::{self, Approval};
use crate::kernel::ops::{self, Recorded};
use crate::kernel::{Dur, Result, Snapshot, Todo, Ts};
use crate::store::{Admin, Store, StoreExt};
use crate::text::escape as esc;

/// `monitor ...`.
#[derive(Debug, Subcommand)]
pub enum MonitorCmd {
    /// Propose a check for a recurring todo: a text run with `sh -c`, once the owner approves it.
    #[command(
        after_help = "Example:\n  loopx monitor propose t-zs7t4k -- gh pr view 12 --json state,reviews"
    )]
    Propose {
        /// The todo's id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
        /// The command, after `--` (its words are joined with spaces).
        #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Owner: approve the exact text of a todo's check (sealed in owner.seal).
    #[command(after_help = "Example:\n  loopx monitor approve t-zs7t4k --sha ba381a64be65f00d")]
    Approve {
        /// The todo's id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
        /// Approve only if the text's SHA-256 starts with this (16 or more hex digits).
        #[arg(long, value_name = "HEX")]
        sha: Option<String>,
    },
    /// Owner: withdraw a check's approval; it never runs again until approved again.
    #[command(after_help = "Example:\n  loopx monitor revoke t-zs7t4k")]
    Revoke {
        /// The todo's id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
    },
    /// Monitors: when each is due, which are overdue, and each check (approved or not).
    #[command(after_help = "Example:\n  loopx monitor list")]
    List,
    /// Run every approved check that is due; a changed result makes its todo ready now.
    ///
    /// Checks run in the project root (on a database: --dir, else here), one poll at a time.
    #[command(after_help = "Example:\n  loopx monitor poll --timeout 1m")]
    Poll {
        /// How long one check may run before it is stopped (1s to 1h).
        #[arg(long, value_name = "DUR", default_value = "30s")]
        timeout: Dur,
    },
}

/// Runs `monitor ...`.
pub fn run(ctx: &Ctx, c: MonitorCmd) -> Result<Out> {
    let store = ctx.open()?;
    let store = store.as_ref();
    let now = ctx.now;
    match c {
        MonitorCmd::Propose { id, command } => propose(ctx, store, &id, &command, Purpose::Watch),
        MonitorCmd::Approve { id, sha } => approve(ctx, store, &id, sha.as_deref(), Purpose::Watch),
        MonitorCmd::Revoke { id } => revoke(ctx, store, &id),
        MonitorCmd::List => list(store, now),
        // Checks run in the work dir: the project root on files, --dir or here on a database.
        MonitorCmd::Poll { timeout } => poll(ctx, store, timeout),
    }
}

/// What a check is for: a watcher's (`monitor poll` runs it) or proving a done.
pub use crate::kernel::monitor::Purpose;

/// Proposes `words` (joined with spaces) as `id`'s check.
pub fn propose(
    ctx: &Ctx,
    store: &dyn Store,
    id: &str,
    words: &[String],
    p: Purpose,
) -> Result<Out> {
    let command = words.join(" ");
    let (t, notes) = store.mutate_noted(|snap| {
        let id = store.resolve_todo(snap, id)?;
        let watcher = p == Purpose::Watch;
        ops::propose_check(snap, &ctx.agent, ctx.now, &id, &command, watcher)
    })?;
    let sha = monitor::sha256_hex(command.as_bytes());
    let group = if p == Purpose::Watch {
        "monitor"
    } else {
        "todo check"
    };
    let short = &sha[..monitor::SHA_PREFIX_MIN];
    let text = format!(
        "{}: check proposed (sha256 {short}); it runs once the owner approves it with `loopx {group} approve {} --sha {short}`",
        esc(&t.id),
        esc(&t.id),
    );
    let j = json!({"id": t.id, "command": command, "sha256": sha, "approved": false});
    Ok(Out::new("check", j, text).noted(notes))
}

/// Owner: approves `id`'s check as it is now for `p` (with `sha`, only if its hash starts so).
pub fn approve(
    ctx: &Ctx,
    store: &dyn Store,
    id: &str,
    sha: Option<&str>,
    p: Purpose,
) -> Result<Out> {
    let ((id, sha, cmd), notes) = store.mutate_noted(|snap| {
        let id = store.resolve_todo(snap, id)?;
        let (c, sha) = ops::approve_check(snap, ops::OWNER, ctx.now, &id, sha, p)?;
        let cmd = snap.todos.get(&id).and_then(|t| t.check.clone());
        let cmd = cmd.map(|c| c.command).unwrap_or_default();
        Ok((c, (id, sha, cmd)))
    })?;
    let what = match p {
        Purpose::Watch => "as a watcher's check",
        Purpose::Done => "to prove it done",
    };
    let text = format!(
        "{}: approved `{}` {what} (sha256 {})",
        esc(&id),
        esc(&cmd),
        &sha[..monitor::SHA_PREFIX_MIN]
    );
    let j = json!({"id": id, "command": cmd, "sha256": sha, "approved": true,
        "purpose": p.as_str()});
    Ok(Out::new("check", j, text).noted(notes))
}

/// Owner: withdraws the approval of `id`'s check.
pub fn revoke(ctx: &Ctx, store: &dyn Store, id: &str) -> Result<Out> {
    let ((id, sha), notes) = store.mutate_noted(|snap| {
        let id = store.resolve_todo(snap, id)?;
        let (c, sha) = ops::revoke_check(snap, ops::OWNER, ctx.now, &id)?;
        Ok((c, (id, sha)))
    })?;
    let text = format!(
        "{}: approval revoked (was sha256 {})",
        esc(&id),
        &sha[..monitor::SHA_PREFIX_MIN]
    );
    let j = json!({"id": id, "sha256": sha, "approved": false});
    Ok(Out::new("check", j, text).noted(notes))
}

/// One monitor as `monitor list` shows it.
fn entry(snap: &Snapshot, t: &Todo, now: Ts) -> Value {
    let check = t.check.as_ref().map(|c| {
        let a = monitor::approval(snap, t);
        json!({"command": c.command, "sha256": monitor::sha256_hex(c.command.as_bytes()),
            "approved": a == Approval::Approved, "approval": a, "proposed_by": c.proposed_by,
            "last_run_at": c.last_run_at, "last_exit": c.last_exit, "last_hash": c.last_hash})
    });
    json!({"id": t.id, "title": t.title, "status": t.status, "every": t.every,
        "due_at": monitor::due_at(t), "due": monitor::is_due(t, now),
        "overdue_s": monitor::overdue(t, now).map(|d| d.0 / 1000), "check": check})
}

fn list_line(snap: &Snapshot, t: &Todo, now: Ts) -> String {
    let due = match (monitor::overdue(t, now), monitor::due_at(t)) {
        (Some(late), _) => format!("OVERDUE by {}", Dur(late.0 / 1000 * 1000)),
        (None, Some(d)) if d <= now => "due".into(),
        (None, Some(d)) => format!("due {}", rel_time(now, d)),
        (None, None) => String::new(),
    };
    let every = t.every.map(|e| e.to_string()).unwrap_or_default();
    let mut s = format!("{}  every {every}  {due}  {}", esc(&t.id), esc(&t.title));
    if let Some(c) = &t.check {
        let a = monitor::approval(snap, t);
        let sha = monitor::sha256_hex(c.command.as_bytes());
        s.push_str(&format!(
            "\n    check ({}, sha256 {}): {}",
            a.describe(),
            &sha[..monitor::SHA_PREFIX_MIN],
            esc(&c.command)
        ));
        if let (Some(at), Some(x)) = (c.last_run_at, c.last_exit) {
            s.push_str(&format!("\n    last run {} (exit {x})", rel_time(now, at)));
        }
    }
    s
}

fn list(store: &dyn Store, now: Ts) -> Result<Out> {
    let snap = store.load()?;
    let mons: Vec<&Todo> = snap
        .todos
        .values()
        .filter(|t| monitor::is_monitor(t) || t.check.is_some())
        .collect();
    let text = if mons.is_empty() {
        "no monitors".to_string()
    } else {
        let lines: Vec<String> = mons.iter().map(|t| list_line(&snap, t, now)).collect();
        lines.join("\n")
    };
    let j: Vec<Value> = mons.iter().map(|t| entry(&snap, t, now)).collect();
    Ok(Out::new("monitors", json!(j), text).noted(snap.owner_notes.clone()))
}

/// `monitor poll`, as text and JSON.
fn poll(ctx: &Ctx, store: &dyn Admin, timeout: Dur) -> Result<Out> {
    let dir = ctx.work_dir(store);
    let who = Poller {
        agent: &ctx.agent,
        dir: &dir,
        timeout,
    };
    let p = crate::flows::monitor::poll(store, who, ctx.now)?;
    Ok(poll_out(p, timeout))
}

/// A poll's report, as text and JSON.
pub(super) fn poll_out(p: crate::flows::monitor::Poll, timeout: Dur) -> Out {
    let mut text = Vec::new();
    let mut skipped = Vec::new();
    for (id, why) in &p.skipped {
        skipped.push(json!({"id": id, "reason": why}));
        text.push(format!("{}: skipped: {}", esc(id), esc(why)));
    }
    for id in &p.overdue_noted {
        text.push(format!("{}: overdue (journaled)", esc(id)));
    }
    let ran: Vec<Value> = p
        .ran
        .iter()
        .map(|c| {
            let (item, line) = checked(c, timeout);
            text.push(line);
            item
        })
        .collect();
    if p.ran.is_empty() && p.overdue_noted.is_empty() {
        let next = p
            .next_due_at
            .map(|d| format!("; next due at {d}"))
            .unwrap_or_default();
        text.insert(0, format!("no check due{next}"));
    }
    let j = json!({"ran": ran, "skipped": skipped, "overdue_noted": p.overdue_noted,
        "next_due_at": p.next_due_at});
    let mut out = Out::new("poll", j, text.join("\n"));
    if let Some(Value::Object(m)) = out.json.remove("poll") {
        out.json = m;
    }
    out.noted(p.owner_notes)
}

/// One check that ran: its JSON and its line.
fn checked(c: &Checked, timeout: Dur) -> (Value, String) {
    let (id, exit) = (&c.id, c.exit);
    let mut item = json!({"id": id, "exit": exit, "timed_out": c.timed_out,
        "duration_ms": c.duration.0, "stdout_truncated": c.stdout_truncated});
    let text = match &c.recorded {
        Ok((rec, next)) => {
            let word = match rec {
                Recorded::Changed => "changed",
                Recorded::Unchanged => "unchanged",
                Recorded::TimedOut => "timed_out",
            };
            item["result"] = json!(word);
            item["next_due_at"] = json!(next);
            let when = next.map(|d| rel_time(c.at, d)).unwrap_or_default();
            match rec {
                Recorded::Changed => {
                    format!("{}: changed (exit {exit}): ready for an agent now", esc(id))
                }
                Recorded::Unchanged => {
                    format!("{}: unchanged (exit {exit}); next {when}", esc(id))
                }
                Recorded::TimedOut => {
                    format!("{}: timed out after {timeout}; next {when}", esc(id))
                }
            }
        }
        Err(e) => {
            item["result"] = json!("not_recorded");
            item["error"] = json!(e.message);
            format!(
                "{}: ran (exit {exit}), not recorded: {}",
                esc(id),
                esc(&e.message)
            )
        }
    };
    (item, text)
}
