//! Monitors: when a recurring todo is due and overdue, and whether a watcher's check may run.
//!
//! Pure rules of a snapshot and a clock. A recurring todo (`every`) is due at `next_due_at`, or,
//! never done, at once (its `created_at`). It is overdue once more than `every` has passed since
//! it was due without a done (or a watcher's run) moving `next_due_at` on.

use serde::Serialize;
use sha2::Digest;

use crate::kernel::authority::to_hex;
use crate::kernel::model::{GoalStatus, Snapshot, Status, Todo};
use crate::kernel::time::{Dur, Ts};

pub use crate::kernel::model::{Check, Purpose};

/// The fewest hex digits of a check's SHA-256 `monitor approve --sha` takes, and the digits
/// shown: 64 bits, so an agent cannot find another text with the same prefix to swap in (8
/// digits take minutes on one core).
pub const SHA_PREFIX_MIN: usize = 16;

/// The most overdue ids should-run lists.
pub const MAX_OVERDUE_LISTED: usize = 3;

/// True for a recurring todo (a monitor).
pub fn is_monitor(t: &Todo) -> bool {
    t.every.is_some()
}

/// When a monitor is due: `next_due_at`, or its `created_at` when it was never done.
pub fn due_at(t: &Todo) -> Option<Ts> {
    t.every?;
    Some(t.next_due_at.unwrap_or(t.created_at))
}

/// True for a monitor that is due at `now` (its due time has come).
pub fn is_due(t: &Todo, now: Ts) -> bool {
    due_at(t).is_some_and(|d| d <= now)
}

/// How long an open monitor has been due, when that is more than its `every`: then it is overdue.
pub fn overdue(t: &Todo, now: Ts) -> Option<Dur> {
    let every = t.every?;
    if t.status != Status::Open {
        return None;
    }
    let late = now.since(due_at(t)?);
    (late > every).then_some(late)
}

/// An overdue monitor, as status and should-run show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overdue {
    /// The todo.
    pub id: String,
    /// Its title.
    pub title: String,
    /// When it was due.
    pub due_at: Ts,
    /// Its cadence.
    pub every: Dur,
    /// Seconds since it was due.
    pub late_s: i64,
}

/// Every overdue monitor, the latest first (then by id).
pub fn overdue_list(snap: &Snapshot, now: Ts) -> Vec<Overdue> {
    let mut v: Vec<Overdue> = snap
        .todos
        .values()
        .filter_map(|t| {
            let late = overdue(t, now)?;
            Some(Overdue {
                id: t.id.clone(),
                title: t.title.clone(),
                due_at: due_at(t)?,
                every: t.every?,
                late_s: late.0 / 1000,
            })
        })
        .collect();
    v.sort_by(|a, b| (a.due_at, &a.id).cmp(&(b.due_at, &b.id)));
    v
}

/// The overdue monitors whose current due time has not been journaled yet (`monitor.overdue`).
pub fn overdue_unnoted(snap: &Snapshot, now: Ts) -> Vec<&Todo> {
    snap.todos
        .values()
        .filter(|t| overdue(t, now).is_some() && t.overdue_noted != due_at(t))
        .collect()
}

/// SHA-256 (hex) of a text: what the owner's seal holds for an approved check command.
pub fn sha256_hex(bytes: &[u8]) -> String {
    to_hex(&sha2::Sha256::digest(bytes))
}

/// The hash of a check's result: its exit code, whether stdout was cut, and stdout.
pub fn result_hash(exit: i32, truncated: bool, stdout: &[u8]) -> String {
    let mut h = sha2::Sha256::new();
    h.update(format!("exit {exit} truncated {truncated}\n").as_bytes());
    h.update(stdout);
    to_hex(&h.finalize())
}

/// Whether a todo's check may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Approval {
    /// The seal holds this command's SHA-256 for this todo, approved for this purpose.
    Approved,
    /// The todo has no check.
    NoCheck,
    /// There is no valid owner seal (no owner key, or the seal is missing, stale or edited).
    NoSeal,
    /// The owner never approved a check on this todo, or revoked it.
    NotApproved,
    /// The command text differs from the one the owner approved.
    Changed,
    /// The owner approved this text for the other purpose (a done's check, a watcher's).
    OtherPurpose,
    /// The owner approved this text before approvals named their purpose.
    NoPurpose,
}

impl Approval {
    /// A short phrase for people.
    pub fn describe(&self) -> &'static str {
        match self {
            Approval::Approved => "approved",
            Approval::NoCheck => "no check",
            Approval::NoSeal => "unapproved: no valid owner seal",
            Approval::NotApproved => "unapproved: waiting for the owner's approval",
            Approval::Changed => "unapproved: the command changed since the owner approved it",
            Approval::OtherPurpose => {
                "unapproved: the owner approved it for the other purpose (proving a done, or a watcher's); the owner approves it again for this one"
            }
            Approval::NoPurpose => {
                "unapproved: approved before approvals named their purpose; the owner approves it again"
            }
        }
    }
}

/// What `t`'s check is for by its shape: a recurring todo's is a watcher's, any other todo's
/// proves it done.
pub fn purpose_of(t: &Todo) -> Purpose {
    match t.every {
        Some(_) => Purpose::Watch,
        None => Purpose::Done,
    }
}

/// Whether `t`'s check is approved for what its shape makes it ([`purpose_of`]).
pub fn approval(snap: &Snapshot, t: &Todo) -> Approval {
    approval_for(snap, t, purpose_of(t))
}

/// Whether `t`'s check is approved for `purpose`: the SHA-256 of its current text equals the
/// sealed one, and the owner approved it for that purpose.
pub fn approval_for(snap: &Snapshot, t: &Todo, purpose: Purpose) -> Approval {
    let Some(c) = &t.check else {
        return Approval::NoCheck;
    };
    let Some(seal) = &snap.seal else {
        return Approval::NoSeal;
    };
    match seal.checks.get(&t.id) {
        None => Approval::NotApproved,
        Some(h) if h.sha256 != sha256_hex(c.command.as_bytes()) => Approval::Changed,
        Some(h) => match h.purpose {
            Some(p) if p == purpose => Approval::Approved,
            Some(_) => Approval::OtherPurpose,
            None => Approval::NoPurpose,
        },
    }
}

/// What `monitor poll` does with one todo's check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run it now.
    Run,
    /// Leave it; why.
    Skip(String),
    /// Not due yet (not listed).
    Later(Ts),
}

/// The step for `t`'s check at `now`: run an approved check of an open monitor that is due, not
/// leased, and not waiting for an agent after a changed result.
pub fn step(snap: &Snapshot, t: &Todo, now: Ts) -> Option<Step> {
    let c = t.check.as_ref()?;
    if t.every.is_none() {
        return Some(Step::Skip("not a recurring todo (no `every`)".into()));
    }
    if t.status != Status::Open {
        return Some(Step::Skip(format!("status is {}", t.status.as_str())));
    }
    let a = approval_for(snap, t, Purpose::Watch);
    if a != Approval::Approved {
        return Some(Step::Skip(a.describe().into()));
    }
    if snap.config.goal.status != GoalStatus::Active {
        return Some(Step::Skip("the goal is not active".into()));
    }
    if let Some(l) = t.live_lease(now) {
        return Some(Step::Skip(format!("leased by {}", l.holder)));
    }
    match (t.next_due_at, c.last_run_at) {
        (Some(due), _) if now < due => Some(Step::Later(due)),
        // It ran at or after the due time it set itself: its change waits for an agent.
        (Some(due), Some(ran)) if ran >= due => Some(Step::Skip(
            "its last result changed: waiting for an agent to mark it done".into(),
        )),
        _ => Some(Step::Run),
    }
}

#[cfg(test)]
mod tests;
