//! Monitor mutations: proposing a watcher's check (agents), approving and revoking it (the
//! owner), and recording what `monitor poll` saw (a check's result, an overdue monitor).

use serde_json::json;

use super::{Change, Write, next_due, todo};
use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::monitor::{self, Approval};
use crate::kernel::time::{Dur, Ts};

/// Proposes `command` as `id`'s check: a watcher's (`watcher`: only a recurring todo, run by
/// `monitor poll`) or the one that proves a todo done (only a todo that does not recur, run by
/// `todo update --status done`). It replaces any earlier one and runs only once the owner
/// approves this exact text.
pub fn propose_check(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    id: &str,
    command: &str,
    watcher: bool,
) -> Result<(Change, Todo)> {
    let t = proposed_for(snap, id, watcher)?;
    // A done's check is its holder's to propose: another agent's would block the holder's done.
    if let Some(l) = t.live_lease(now).filter(|l| l.holder != agent && !watcher) {
        return Err(Error::new(
            Code::LeaseConflict,
            format!(
                "{id} is leased by {}; only its holder proposes its check",
                l.holder
            ),
        )
        .hint(format!(
            "ask {} to propose it, or claim other work",
            l.holder
        )));
    }
    propose(agent, now, t, command)
}

/// `id`, when it is recurring as a watcher's check needs (or not, as a done's check needs).
fn proposed_for(snap: &Snapshot, id: &str, watcher: bool) -> Result<Todo> {
    let t = todo(snap, id)?;
    match (watcher, t.every.is_some()) {
        (true, false) => Err(Error::usage(format!(
            "{id} is not a recurring todo: only a monitor can carry a watcher's check"
        ))
        .hint("add one with `loopx todo add \"...\" --every 1h`; a check that proves a todo done is `loopx todo check propose`")),
        (false, true) => Err(Error::usage(format!(
            "{id} is a recurring todo: its check is a watcher's"
        ))
        .hint("propose it with `loopx monitor propose`")),
        _ => Ok(t.clone()),
    }
}

fn propose(agent: &str, now: Ts, mut t: Todo, command: &str) -> Result<(Change, Todo)> {
    let id = t.id.clone();
    let id = id.as_str();
    limits::usage(limits::check_command("check command", command))?;
    t.check = Some(Box::new(Check {
        command: command.to_string(),
        proposed_by: agent.to_string(),
        proposed_at: now,
        last_hash: None,
        last_run_at: None,
        last_exit: None,
        extra: Extra::new(),
    }));
    t.updated_at = now;
    limits::usage(limits::check_todo(&t))?;
    let mut c = Change::default();
    let sha = monitor::sha256_hex(command.as_bytes());
    c.event(
        now,
        agent,
        Action::CheckPropose,
        id,
        json!({"command": command, "sha256": sha}),
    );
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t))
}

/// Owner: approves the exact text of `id`'s check for `purpose` (a watcher's, `monitor
/// approve`; proving a done, `todo check approve`); the store seals its SHA-256 and purpose, and
/// only that purpose's runner runs it. Refused when the todo's shape is the other purpose's.
/// With `expect`, the text's SHA-256 must start with it, at least [`monitor::SHA_PREFIX_MIN`]
/// hex digits (the text the owner read is the one approved).
pub fn approve_check(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    id: &str,
    expect: Option<&str>,
    purpose: monitor::Purpose,
) -> Result<(Change, String)> {
    let t = todo(snap, id)?;
    shaped_for(t, purpose)?;
    let Some(check) = &t.check else {
        let group = match purpose {
            monitor::Purpose::Watch => "monitor",
            monitor::Purpose::Done => "todo check",
        };
        return Err(
            Error::new(Code::NotFound, format!("{id} has no check")).hint(format!(
                "an agent proposes one with `loopx {group} propose {id} -- COMMAND`"
            )),
        );
    };
    let sha = monitor::sha256_hex(check.command.as_bytes());
    if let Some(e) = expect
        && (e.len() < monitor::SHA_PREFIX_MIN || !e.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(Error::usage(format!(
            "--sha must be at least {} hex digits of the text's SHA-256, not `{e}`",
            monitor::SHA_PREFIX_MIN
        ))
        .hint(format!("copy it from `loopx {}`", shown_in(t))));
    }
    if let Some(e) = expect
        && !sha.starts_with(&e.to_ascii_lowercase())
    {
        return Err(Error::new(
            Code::LeaseConflict,
            format!("{id}'s check is now sha256 {sha}, not {e}: its text changed"),
        )
        .hint(format!(
            "read it again with `loopx {}`, then approve with its new --sha",
            shown_in(t)
        )));
    }
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        Action::CheckApprove,
        id,
        json!({"sha256": sha, "command": check.command, "proposed_by": check.proposed_by,
            "purpose": purpose.as_str()}),
    );
    Ok((c, sha))
}

/// Refuses to approve `t`'s check for `purpose` when its shape makes it the other purpose's.
fn shaped_for(t: &Todo, purpose: monitor::Purpose) -> Result<()> {
    let id = &t.id;
    match (purpose, monitor::purpose_of(t)) {
        (a, b) if a == b => Ok(()),
        (monitor::Purpose::Watch, _) => Err(Error::usage(format!(
            "{id} is not a recurring todo: its check proves it done, it is no watcher's"
        ))
        .hint(format!("read it with `loopx todo show {id}`, then approve it with `loopx todo check approve {id} --sha HEX`"))),
        (monitor::Purpose::Done, _) => Err(Error::usage(format!(
            "{id} is a recurring todo: its check is a watcher's, run by `monitor poll`"
        ))
        .hint(format!("read it with `loopx monitor list`, then approve it with `loopx monitor approve {id} --sha HEX`"))),
    }
}

/// Owner: withdraws the approval of `id`'s check (the seal drops its line).
pub fn revoke_check(snap: &Snapshot, owner: &str, now: Ts, id: &str) -> Result<(Change, String)> {
    let sealed = snap.seal.as_ref().and_then(|s| s.checks.get(id));
    let Some(sha) = sealed.map(|c| c.sha256.clone()) else {
        return Err(Error::new(
            Code::NotFound,
            format!("{id} has no approved check"),
        ));
    };
    let mut c = Change::by_owner();
    c.event(now, owner, Action::CheckRevoke, id, json!({"sha256": sha}));
    Ok((c, sha))
}

/// Owner: sets the project's default check (or with `None` clears it), the check that proves
/// done every todo without one of its own; the seal holds its hash as `check * SHA256`.
pub fn set_default_check(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    command: Option<&str>,
) -> Result<(Change, Config)> {
    use crate::kernel::proof::DEFAULT_ID;
    let mut cfg = snap.config.clone();
    let sealed = snap
        .seal
        .as_ref()
        .is_some_and(|s| s.checks.contains_key(DEFAULT_ID));
    if command.is_none() && cfg.done.check.is_none() && !sealed {
        return Err(Error::new(
            Code::NotFound,
            "the project has no default check",
        ));
    }
    cfg.done.check = command.map(str::to_string);
    if let Some(cmd) = command {
        limits::usage(limits::check_command("check command", cmd))?;
    }
    limits::usage(limits::check_config(&cfg))?;
    let mut c = Change::by_owner();
    match command {
        Some(cmd) => {
            let sha = monitor::sha256_hex(cmd.as_bytes());
            let data = json!({"sha256": sha, "command": cmd, "default": true,
                "purpose": monitor::Purpose::Done.as_str()});
            c.event(now, owner, Action::CheckApprove, DEFAULT_ID, data);
        }
        None => c.event(
            now,
            owner,
            Action::CheckRevoke,
            DEFAULT_ID,
            json!({"default": true}),
        ),
    }
    c.writes.push(Write::Config(cfg.clone()));
    Ok((c, cfg))
}

/// What one run of a check gave.
#[derive(Debug, Clone)]
pub struct Ran {
    /// SHA-256 of the command text that ran.
    pub command_sha: String,
    /// The check's `last_run_at` when the poll decided to run it.
    pub seen_last_run: Option<Ts>,
    /// The exit code (128 plus the signal for a signal).
    pub exit: i32,
    /// True when the timeout stopped it.
    pub timed_out: bool,
    /// The result's hash (see `monitor::result_hash`).
    pub hash: String,
    /// The last lines of its output.
    pub tail: String,
    /// How long it ran.
    pub duration: Dur,
}

/// What recording a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The result was the same as last time (or the check did not finish): rescheduled.
    Unchanged,
    /// A first or changed result: evidence appended, the todo ready for an agent now.
    Changed,
    /// It timed out: rescheduled, the last result kept.
    TimedOut,
}

/// Records a check's run in one change: the check's last run, and the next due time. A changed
/// result (or the first) appends evidence and makes the todo due now; the same result puts it
/// off by `every`. Refused (`lease_conflict`) when another poll recorded first, the command
/// changed, or its approval went while it ran.
pub fn record_check(
    snap: &Snapshot,
    actor: &str,
    now: Ts,
    id: &str,
    ran: &Ran,
) -> Result<(Change, Todo, Recorded)> {
    let mut t = todo(snap, id)?.clone();
    let (Some(every), Some(check)) = (t.every, t.check.as_deref().cloned()) else {
        return Err(raced(id, "it is no longer a monitor with a check"));
    };
    if monitor::sha256_hex(check.command.as_bytes()) != ran.command_sha
        || monitor::approval(snap, &t) != Approval::Approved
    {
        return Err(raced(
            id,
            "its command or its approval changed while it ran",
        ));
    }
    if check.last_run_at != ran.seen_last_run {
        return Err(raced(id, "another poll recorded it first"));
    }
    let recorded = if ran.timed_out {
        Recorded::TimedOut
    } else if check.last_hash.as_deref() == Some(ran.hash.as_str()) {
        Recorded::Unchanged
    } else {
        Recorded::Changed
    };
    let mut c = Change::default();
    let mut check = check;
    check.last_run_at = Some(now);
    check.last_exit = Some(ran.exit);
    if recorded != Recorded::TimedOut {
        check.last_hash = Some(ran.hash.clone());
    }
    t.next_due_at = Some(match recorded {
        Recorded::Changed => now,
        _ => next_due(now, every)?,
    });
    t.check = Some(Box::new(check.clone()));
    t.updated_at = now;
    limits::usage(limits::check_todo(&t))?;
    let data = json!({"exit": ran.exit, "timed_out": ran.timed_out, "sha256": ran.hash,
        "changed": recorded == Recorded::Changed, "duration_ms": ran.duration.0,
        "next_due_at": t.next_due_at});
    if recorded == Recorded::Changed {
        let e = changed_evidence(now, actor, &check.command, ran)?;
        c.writes.push(Write::Evidence(t.id.clone(), e));
        c.event(now, actor, Action::MonitorChange, id, data);
    } else {
        c.event(now, actor, Action::MonitorCheck, id, data);
    }
    c.writes.push(Write::Todo(t.clone()));
    Ok((c, t, recorded))
}

/// The evidence a changed check result appends.
fn changed_evidence(now: Ts, actor: &str, command: &str, ran: &Ran) -> Result<Evidence> {
    let what = format!("check result changed (exit {})", ran.exit);
    let mut e = Evidence::new(now, actor, None, EvidenceKind::Command, what);
    e.command = Some(command.to_string());
    e.exit_code = Some(ran.exit);
    e.sha256 = Some(ran.hash.clone());
    e.output = (!ran.tail.is_empty()).then(|| ran.tail.clone());
    e.duration_ms = Some(ran.duration.0.max(0) as u64);
    limits::usage(limits::check_evidence(&e))?;
    Ok(e)
}

fn raced(id: &str, why: &str) -> Error {
    Error::new(
        Code::LeaseConflict,
        format!("{id}'s check run was not recorded: {why}"),
    )
}

/// Journals `monitor.overdue` once per due time for each overdue monitor not noted yet, and
/// marks it (`overdue_noted`); the ids noted. An empty change when there is none.
pub fn note_overdue(snap: &Snapshot, actor: &str, now: Ts) -> (Change, Vec<String>) {
    let mut c = Change::default();
    let mut ids = Vec::new();
    for t in monitor::overdue_unnoted(snap, now) {
        let (Some(due), Some(late)) = (monitor::due_at(t), monitor::overdue(t, now)) else {
            continue;
        };
        let mut t = t.clone();
        t.overdue_noted = Some(due);
        c.event(
            now,
            actor,
            Action::MonitorOverdue,
            &t.id,
            json!({"due_at": due, "every": t.every, "late_s": late.0 / 1000}),
        );
        ids.push(t.id.clone());
        c.writes.push(Write::Todo(t));
    }
    (c, ids)
}

/// The command that shows `t`'s check: a watcher's in `monitor list`, a done's in `todo show`.
fn shown_in(t: &Todo) -> String {
    match t.every {
        Some(_) => "monitor list".into(),
        None => format!("todo show {}", t.id),
    }
}
