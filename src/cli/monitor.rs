//! `monitor`: watchers' checks (propose, the owner's approve and revoke), the list of monitors,
//! and `poll`, which runs approved checks that are due without spending an agent's turn.

use std::time::{Duration, Instant};

use clap::Subcommand;
use serde_json::{Value, json};

use super::{Ctx, Out, rel_time};
use crate::kernel::monitor::{self, Approval, Step};
use crate::kernel::ops::{self, Ran, Recorded};
use crate::kernel::{Code, Dur, Error, Result, Snapshot, Todo, Ts, bounds};
use crate::runtime::process::{self, Echo, Limits, Spec};
use crate::store::{FileStore, Store, StoreExt};
use crate::text::escape as esc;

/// `monitor ...`.
#[derive(Debug, Subcommand)]
pub enum MonitorCmd {
    /// Propose a check for a recurring todo: a text run with `sh -c`, once the owner approves it.
    Propose {
        /// The todo's id or a unique prefix.
        id: String,
        /// The command, after `--` (its words are joined with spaces).
        #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Owner: approve the exact text of a todo's check (sealed in owner.seal).
    Approve {
        /// The todo's id or a unique prefix.
        id: String,
        /// Approve only if the text's SHA-256 starts with this (8 or more hex digits).
        #[arg(long, value_name = "HEX")]
        sha: Option<String>,
    },
    /// Owner: withdraw a check's approval; it never runs again until approved again.
    Revoke {
        /// The todo's id or a unique prefix.
        id: String,
    },
    /// Monitors: when each is due, which are overdue, and each check (approved or not).
    List,
    /// Run every approved check that is due; a changed result makes its todo ready now.
    Poll {
        /// How long one check may run before it is stopped (1s to 1h).
        #[arg(long, value_name = "DUR", default_value = "30s")]
        timeout: Dur,
    },
}

/// Runs `monitor ...`.
pub fn run(ctx: &Ctx, c: MonitorCmd) -> Result<Out> {
    let store = ctx.store()?;
    let now = ctx.now;
    let owner = ops::OWNER;
    match c {
        MonitorCmd::Propose { id, command } => {
            let command = command.join(" ");
            let (t, notes) = store.mutate_noted(|snap| {
                let id = store.resolve_todo(snap, &id)?;
                ops::propose_check(snap, &ctx.agent, now, &id, &command)
            })?;
            let sha = monitor::sha256_hex(command.as_bytes());
            let text = format!(
                "{}: check proposed (sha256 {}); it runs once the owner approves it with `loopx monitor approve {} --sha {}`",
                esc(&t.id),
                &sha[..12],
                esc(&t.id),
                &sha[..12]
            );
            let j = json!({"id": t.id, "command": command, "sha256": sha, "approved": false});
            Ok(Out::new("check", j, text).noted(notes))
        }
        MonitorCmd::Approve { id, sha } => {
            let ((id, sha, cmd), notes) = store.mutate_noted(|snap| {
                let id = store.resolve_todo(snap, &id)?;
                let (c, sha) = ops::approve_check(snap, owner, now, &id, sha.as_deref())?;
                let cmd = snap.todos.get(&id).and_then(|t| t.check.clone());
                let cmd = cmd.map(|c| c.command).unwrap_or_default();
                Ok((c, (id, sha, cmd)))
            })?;
            let text = format!(
                "{}: approved `{}` (sha256 {})",
                esc(&id),
                esc(&cmd),
                &sha[..12]
            );
            let j = json!({"id": id, "command": cmd, "sha256": sha, "approved": true});
            Ok(Out::new("check", j, text).noted(notes))
        }
        MonitorCmd::Revoke { id } => {
            let ((id, sha), notes) = store.mutate_noted(|snap| {
                let id = store.resolve_todo(snap, &id)?;
                let (c, sha) = ops::revoke_check(snap, owner, now, &id)?;
                Ok((c, (id, sha)))
            })?;
            let text = format!("{}: approval revoked (was sha256 {})", esc(&id), &sha[..12]);
            let j = json!({"id": id, "sha256": sha, "approved": false});
            Ok(Out::new("check", j, text).noted(notes))
        }
        MonitorCmd::List => list(&store, now),
        MonitorCmd::Poll { timeout } => poll(ctx, &store, timeout),
    }
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
            &sha[..12],
            esc(&c.command)
        ));
        if let (Some(at), Some(x)) = (c.last_run_at, c.last_exit) {
            s.push_str(&format!("\n    last run {} (exit {x})", rel_time(now, at)));
        }
    }
    s
}

fn list(store: &FileStore, now: Ts) -> Result<Out> {
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

/// What one poll decided and did.
#[derive(Default)]
struct Report {
    ran: Vec<Value>,
    skipped: Vec<Value>,
    overdue: Vec<String>,
    next_due_at: Option<Ts>,
    text: Vec<String>,
}

impl Report {
    fn skip(&mut self, id: &str, why: &str) {
        self.skipped.push(json!({"id": id, "reason": why}));
        self.text
            .push(format!("{}: skipped: {}", esc(id), esc(why)));
    }
}

/// The checks to run now, and the report of those skipped or not due.
fn plan(snap: &Snapshot, now: Ts, report: &mut Report) -> Vec<String> {
    let mut run = Vec::new();
    for t in snap.todos.values() {
        match monitor::step(snap, t, now) {
            Some(Step::Run) => run.push(t.id.clone()),
            Some(Step::Skip(why)) => report.skip(&t.id, &why),
            Some(Step::Later(at)) => {
                report.next_due_at = Some(report.next_due_at.map_or(at, |n| n.min(at)));
            }
            None => {}
        }
    }
    run
}

/// `monitor poll`: one load when nothing is due; otherwise the poll lock, a fresh load, the
/// overdue notes, and each due check run outside the store's lock and recorded in its own
/// transaction.
fn poll(ctx: &Ctx, store: &FileStore, timeout: Dur) -> Result<Out> {
    if timeout < Dur::from_secs(1) || timeout > Dur::from_secs(bounds::CHECK_TIMEOUT_MAX_S as i64) {
        return Err(Error::usage(format!(
            "--timeout must be 1s to 1h, not {timeout}"
        )));
    }
    let snap = store.load()?;
    let mut report = Report::default();
    let due = plan(&snap, ctx.now, &mut report);
    let unnoted = !monitor::overdue_unnoted(&snap, ctx.now).is_empty();
    if due.is_empty() && !unnoted {
        return Ok(finish(report, snap.owner_notes));
    }
    let Some(_guard) = poll_lock(store)? else {
        for id in &due {
            report.skip(id, "another `monitor poll` is running");
        }
        return Ok(finish(report, snap.owner_notes));
    };
    // Under the poll lock, from a fresh snapshot: a poll that just finished is seen.
    let snap = store.load()?;
    let mut report = Report::default();
    let due = plan(&snap, ctx.now, &mut report);
    let actor = ctx.agent.as_str();
    if !monitor::overdue_unnoted(&snap, ctx.now).is_empty() {
        report.overdue = store.mutate(|s| Ok(ops::note_overdue(s, actor, ctx.now)))?;
        for id in &report.overdue {
            report
                .text
                .push(format!("{}: overdue (journaled)", esc(id)));
        }
    }
    let started = Instant::now();
    for id in due {
        if let Some(t) = snap.todos.get(&id) {
            run_one(ctx, store, t, timeout, started, &mut report);
        }
    }
    Ok(finish(report, snap.owner_notes))
}

/// The poll lock (`.loopx/cache/monitor.lock`), or `None` when another poll holds it.
fn poll_lock(store: &FileStore) -> Result<Option<crate::store::lock::Guard>> {
    let dir = store.path("cache");
    // The cache directory is made when first needed; a link or a file there is refused.
    let _ = std::fs::create_dir(&dir);
    if !std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(Error::new(
            Code::InvalidState,
            ".loopx/cache is not a directory".to_string(),
        )
        .hint("run `loopx doctor`"));
    }
    match crate::store::lock::acquire(&dir.join("monitor.lock"), true, Duration::ZERO) {
        Ok(g) => Ok(Some(g)),
        Err(e) if e.code == Code::Busy => Ok(None),
        Err(e) => Err(e),
    }
}

/// Runs one check with `sh -c` in the project root, bounded, and records what it gave.
fn run_one(ctx: &Ctx, store: &FileStore, t: &Todo, timeout: Dur, started: Instant, r: &mut Report) {
    let Some(check) = &t.check else {
        return;
    };
    let spec = Spec {
        argv: vec!["sh".into(), "-c".into(), check.command.clone().into()],
        cwd: Some(store.root().to_path_buf()),
        echo: Echo::None,
        ..Spec::default()
    };
    let limits = Limits {
        timeout: Duration::from_millis(timeout.0.max(0) as u64),
        grace: Duration::from_secs(2),
        tail_lines: 20,
        tail_bytes: 2_000,
        keep_bytes: bounds::CHECK_OUTPUT_MAX,
    };
    let fin = match process::run(&spec, &limits) {
        Ok(f) => f,
        Err(e) => return r.skip(&t.id, &format!("could not start: {}", e.message)),
    };
    let exit = fin.exit.code();
    let ran = Ran {
        command_sha: monitor::sha256_hex(check.command.as_bytes()),
        seen_last_run: check.last_run_at,
        exit,
        timed_out: fin.timed_out,
        hash: monitor::result_hash(exit, fin.stdout_truncated, &fin.stdout),
        tail: fin.tail.clone(),
        duration: Dur(fin.duration.as_millis().min(i64::MAX as u128) as i64),
    };
    // The clock read once when the poll began, moved on by the time the checks took.
    let elapsed = Dur(started.elapsed().as_millis().min(i64::MAX as u128) as i64);
    let at = ctx.now.add(elapsed);
    let id = t.id.clone();
    let res = store.mutate(|s| {
        let (c, t, rec) = ops::record_check(s, &ctx.agent, at, &id, &ran)?;
        Ok((c, (t, rec)))
    });
    let mut item = json!({"id": id, "exit": exit, "timed_out": fin.timed_out,
        "duration_ms": ran.duration.0, "stdout_truncated": fin.stdout_truncated});
    let text = match res {
        Ok((t, rec)) => {
            let word = match rec {
                Recorded::Changed => "changed",
                Recorded::Unchanged => "unchanged",
                Recorded::TimedOut => "timed_out",
            };
            item["result"] = json!(word);
            item["next_due_at"] = json!(t.next_due_at);
            let when = t.next_due_at.map(|d| rel_time(at, d)).unwrap_or_default();
            match rec {
                Recorded::Changed => format!(
                    "{}: changed (exit {exit}): ready for an agent now",
                    esc(&id)
                ),
                Recorded::Unchanged => {
                    format!("{}: unchanged (exit {exit}); next {when}", esc(&id))
                }
                Recorded::TimedOut => {
                    format!("{}: timed out after {timeout}; next {when}", esc(&id))
                }
            }
        }
        Err(e) => {
            item["result"] = json!("not_recorded");
            item["error"] = json!(e.message);
            format!(
                "{}: ran (exit {exit}), not recorded: {}",
                esc(&id),
                esc(&e.message)
            )
        }
    };
    r.text.push(text);
    r.ran.push(item);
}

fn finish(r: Report, notes: Vec<String>) -> Out {
    let mut text = r.text;
    if r.ran.is_empty() && r.overdue.is_empty() {
        let next = r
            .next_due_at
            .map(|d| format!("; next due at {d}"))
            .unwrap_or_default();
        text.insert(0, format!("no check due{next}"));
    }
    let j = json!({"ran": r.ran, "skipped": r.skipped, "overdue_noted": r.overdue,
        "next_due_at": r.next_due_at});
    let mut out = Out::new("poll", j, text.join("\n"));
    if let Some(Value::Object(m)) = out.json.remove("poll") {
        out.json = m;
    }
    out.noted(notes)
}
