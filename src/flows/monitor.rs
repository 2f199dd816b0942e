//! `monitor poll`: runs the approved checks that are due, bounded, outside the store's lock, and
//! records each result in its own transaction; never spends quota. The same on every store.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::kernel::monitor::{self, Step};
use crate::kernel::ops::{self, Ran, Recorded};
use crate::kernel::{Code, Dur, Error, Result, Snapshot, Todo, Ts, limits};
use crate::runtime::process::{self, Echo, Limits, Spec};
use crate::store::{Admin, Store, StoreExt};

/// A check's time limit within its bounds (1 s to 1 h), or exit 2.
pub fn check_timeout(timeout: Dur) -> Result<()> {
    if timeout < Dur::from_secs(1) || timeout > Dur::from_secs(limits::CHECK_TIMEOUT_MAX_S as i64) {
        return Err(Error::usage(format!(
            "--timeout must be 1s to 1h, not {timeout}"
        )));
    }
    Ok(())
}

/// The poll's report when nothing is due and no overdue mark waits to be journaled: a poll
/// that would write nothing. `None` otherwise.
pub fn quiet(snap: &Snapshot, now: Ts) -> Option<Poll> {
    let mut report = Poll::default();
    let due = plan(snap, now, &mut report);
    if !due.is_empty() || !monitor::overdue_unnoted(snap, now).is_empty() {
        return None;
    }
    report.owner_notes = snap.owner_notes.clone();
    Some(report)
}

/// One check that ran.
#[derive(Debug)]
pub struct Checked {
    /// The todo.
    pub id: String,
    /// Its exit code (128 plus a signal).
    pub exit: i32,
    /// True when the timeout stopped it.
    pub timed_out: bool,
    /// How long it ran.
    pub duration: Dur,
    /// True when its stdout was longer than what is hashed.
    pub stdout_truncated: bool,
    /// When it was recorded.
    pub at: Ts,
    /// What was recorded (and when the todo is due next), or why nothing was.
    pub recorded: std::result::Result<(Recorded, Option<Ts>), Error>,
}

/// What one poll decided and did.
#[derive(Debug, Default)]
pub struct Poll {
    /// The checks that ran, in order.
    pub ran: Vec<Checked>,
    /// Checks not run: the todo and why.
    pub skipped: Vec<(String, String)>,
    /// Monitors journaled as overdue by this poll.
    pub overdue_noted: Vec<String>,
    /// When the next check is due, if none is now.
    pub next_due_at: Option<Ts>,
    /// Where files disagree with the owner's seal.
    pub owner_notes: Vec<String>,
}

impl Poll {
    fn skip(&mut self, id: &str, why: &str) {
        self.skipped.push((id.to_string(), why.to_string()));
    }
}

/// The checks to run now, and the report of those skipped or not due.
fn plan(snap: &Snapshot, now: Ts, report: &mut Poll) -> Vec<String> {
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

/// Where and as whom a poll runs its checks.
#[derive(Debug, Clone, Copy)]
pub struct Poller<'a> {
    /// The agent that records the results.
    pub agent: &'a str,
    /// The directory the checks run in (the project root, or the work dir on a database).
    pub dir: &'a Path,
    /// How long one check may run.
    pub timeout: Dur,
}

/// One load when nothing is due; otherwise the poll lock, a fresh load, the overdue notes, and
/// each due check run outside the store's lock and recorded in its own transaction, as the
/// poller's agent, unless the owner's history here was cut. Only one poll of a project runs checks at a time (the store's poll lock).
pub fn poll(store: &dyn Admin, who: Poller<'_>, now: Ts) -> Result<Poll> {
    let agent = who.agent;
    history_kept(store)?;
    check_timeout(who.timeout)?;
    let snap = store.load()?;
    if let Some(report) = quiet(&snap, now) {
        return Ok(report);
    }
    let Some(mut lock) = store.poll_lock()? else {
        let mut report = Poll {
            owner_notes: snap.owner_notes.clone(),
            ..Poll::default()
        };
        for id in plan(&snap, now, &mut report) {
            report.skip(&id, "another `monitor poll` is running");
        }
        return Ok(report);
    };
    // Under the poll lock, from a fresh snapshot: a poll that just finished is seen.
    let snap = store.load()?;
    let mut report = Poll {
        owner_notes: snap.owner_notes.clone(),
        ..Poll::default()
    };
    let due = plan(&snap, now, &mut report);
    if !monitor::overdue_unnoted(&snap, now).is_empty() {
        report.overdue_noted = store.mutate(|s| Ok(ops::note_overdue(s, agent, now)))?;
    }
    let started = Instant::now();
    let mut snap = Some(snap);
    for id in due {
        if !lock.held() {
            report.skip(
                &id,
                "the poll lock was lost (the store's connection dropped)",
            );
            continue;
        }
        // Decided again on a fresh load just before it runs: while the checks before it ran,
        // the owner may have revoked it, or an agent leased it.
        let fresh = match snap.take().map_or_else(|| store.load(), Ok) {
            Ok(s) => s,
            Err(e) => {
                report.skip(&id, &format!("could not load the project: {}", e.message));
                continue;
            }
        };
        let Some(t) = fresh.todos.get(&id) else {
            continue;
        };
        match monitor::step(&fresh, t, now.add(elapsed(started))) {
            Some(Step::Run) => run_one(store, who, now, t, started, &mut report),
            Some(Step::Skip(why)) => report.skip(&id, &why),
            _ => {}
        }
    }
    Ok(report)
}

/// Where the owner's key is, a poll runs nothing when the last line the owner signed here is
/// gone from the journal (history cut, or an older `owner.seal` put back with it): the seal it
/// would trust may hold an approval the owner revoked since (exit 7).
fn history_kept(store: &dyn Admin) -> Result<()> {
    let Some(fs) = store.files() else {
        return Ok(());
    };
    match crate::store::files::doctor::owner_history_cut(fs) {
        None => Ok(()),
        Some(why) => Err(Error::new(
            Code::Denied,
            format!("no check runs: .loopx/journal.jsonl: {why}"),
        )
        .hint("run `loopx doctor`; once the history is as you left it, `loopx owner seal`")),
    }
}

/// The time since `started`, as a duration of the kernel's clock.
fn elapsed(started: Instant) -> Dur {
    Dur(started.elapsed().as_millis().min(i64::MAX as u128) as i64)
}

/// Runs one check with `sh -c` in the poller's directory, bounded, and records what it gave.
fn run_one(store: &dyn Store, who: Poller<'_>, now: Ts, t: &Todo, started: Instant, r: &mut Poll) {
    let (agent, timeout) = (who.agent, who.timeout);
    let Some(check) = &t.check else {
        return;
    };
    let spec = Spec {
        argv: vec!["sh".into(), "-c".into(), check.command.clone().into()],
        cwd: Some(who.dir.to_path_buf()),
        echo: Echo::None,
        ..Spec::default()
    };
    let limits = Limits {
        timeout: Duration::from_millis(timeout.0.max(0) as u64),
        grace: Duration::from_secs(2),
        tail_lines: 20,
        tail_bytes: 2_000,
        keep_bytes: limits::CHECK_OUTPUT_MAX,
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
    let at = now.add(elapsed(started));
    let id = t.id.clone();
    let recorded = store.mutate(|s| {
        let (c, t, rec) = ops::record_check(s, agent, at, &id, &ran)?;
        Ok((c, (rec, t.next_due_at)))
    });
    r.ran.push(Checked {
        id,
        exit,
        timed_out: fin.timed_out,
        duration: ran.duration,
        stdout_truncated: fin.stdout_truncated,
        at,
        recorded,
    });
}
