//! should-run: whether an agent should run a turn now, and why, in the contract's order.

use serde::Serialize;

use crate::kernel::model::{GateStatus, GoalStatus, Priority, Role, Snapshot, Status};
use crate::kernel::quota::{self, Usage};
use crate::kernel::readiness::{self, Blocker};
use crate::kernel::time::{Dur, Ts};

pub use crate::kernel::limits::cut;

/// The most questions listed.
pub const MAX_QUESTIONS: usize = 5;
/// The most characters of a question listed.
pub const MAX_QUESTION_CHARS: usize = 200;
/// The most characters of the todo's title given.
pub const MAX_TITLE_CHARS: usize = 120;
/// The wait when no time is known.
pub const DEFAULT_RETRY: Dur = Dur(300_000);

/// The decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run a turn.
    Run,
    /// The goal is paused or complete.
    Paused,
    /// No open agent todo at all.
    Idle,
    /// The window's slots, tokens or cost are spent.
    Throttled,
    /// Come back later.
    Wait,
    /// Only the owner can unblock the work.
    Ask,
}

/// The todo to run, in brief.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TodoBrief {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its priority.
    pub priority: Priority,
}

/// A pending gate, in brief.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Question {
    /// The gate.
    pub gate: String,
    /// The question, cut to 200 characters.
    pub question: String,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    /// True only for `run`.
    pub should_run: bool,
    /// The decision.
    pub decision: Decision,
    /// Why, in one word.
    pub reason: &'static str,
    /// The todo to run (only for `run`).
    pub todo: Option<TodoBrief>,
    /// Pending gates, oldest first, at most five.
    pub questions: Vec<Question>,
    /// How many more pending gates there are.
    pub questions_more: usize,
    /// The quota.
    pub quota: Usage,
    /// Seconds until asking again makes sense.
    pub retry_after_s: Option<i64>,
    /// Files loopx cannot read (quarantined: their todos are never offered), at most three,
    /// as `file:line: what`; absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Where files disagree with the owner's seal, and the decision used the seal's value; at
    /// most three, absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub owner_notes: Vec<String>,
    /// Overdue monitors, the latest first: at most three ids, absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overdue: Vec<String>,
    /// Todos the no-progress breaker parked (waiting on the owner's gate), at most three ids;
    /// absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parked: Vec<String>,
    /// This agent's own slots in the window and the owner's cap; absent without a cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_slots: Option<quota::Budget<u64>>,
}

/// The most quarantined files named in an answer.
pub const MAX_PROBLEMS: usize = 3;

/// Quarantined files, in brief: at most three, each cut to 120 characters.
pub fn problems(snap: &Snapshot) -> Vec<String> {
    let n = snap.quarantined.len();
    let mut out: Vec<String> = snap
        .quarantined
        .values()
        .take(MAX_PROBLEMS)
        .map(|p| cut(&format!("{}: {}", p.at(), p.message), MAX_TITLE_CHARS))
        .collect();
    if n > MAX_PROBLEMS {
        out.push(format!("and {} more: run `loopx doctor`", n - MAX_PROBLEMS));
    }
    out
}

/// Decides whether `agent` should run a turn at `now`. Reads only the snapshot.
pub fn decide(snap: &Snapshot, agent: &str, now: Ts) -> Answer {
    let cap = crate::kernel::agents::slots_cap(snap, agent);
    let l = listed(snap, agent, now, cap);
    let (decision, reason, todo, retry) = choose(snap, agent, now, cap);
    Answer {
        should_run: decision == Decision::Run,
        decision,
        reason,
        todo,
        questions: l.questions,
        questions_more: l.questions_more,
        quota: l.quota,
        retry_after_s: retry.map(|d| d.secs_ceil().max(1)),
        problems: l.problems,
        owner_notes: l.owner_notes,
        overdue: l.overdue,
        parked: l.parked,
        agent_slots: l.agent_slots,
    }
}

/// What an answer lists whatever its decision.
struct Listed {
    questions: Vec<Question>,
    questions_more: usize,
    quota: Usage,
    problems: Vec<String>,
    owner_notes: Vec<String>,
    overdue: Vec<String>,
    parked: Vec<String>,
    agent_slots: Option<quota::Budget<u64>>,
}

/// The gates, quota, problems, notes, overdue monitors, parked todos and slots of an answer.
fn listed(snap: &Snapshot, agent: &str, now: Ts, cap: Option<u32>) -> Listed {
    let (questions, questions_more) = pending_questions(snap);
    let owner_notes: Vec<String> = snap
        .owner_notes
        .iter()
        .take(MAX_PROBLEMS)
        .map(|n| cut(n, MAX_QUESTION_CHARS))
        .collect();
    let overdue: Vec<String> = crate::kernel::monitor::overdue_list(snap, now)
        .into_iter()
        .take(crate::kernel::monitor::MAX_OVERDUE_LISTED)
        .map(|o| o.id)
        .collect();
    let parked: Vec<String> = crate::kernel::breaker::held(snap, now)
        .into_iter()
        .filter(|h| h.parked.is_some())
        .take(crate::kernel::breaker::MAX_LISTED)
        .map(|h| h.id)
        .collect();
    let agent_slots = cap.map(|limit| quota::Budget {
        used: quota::agent_used(&snap.quota, &snap.config.quota, agent, now),
        limit: u64::from(limit),
    });
    Listed {
        questions,
        questions_more,
        quota: quota::usage(&snap.quota, &snap.config.quota, now),
        problems: problems(snap),
        owner_notes,
        overdue,
        parked,
        agent_slots,
    }
}

/// A decision, its reason, the todo to run and how long to wait.
type Choice = (Decision, &'static str, Option<TodoBrief>, Option<Dur>);

/// The decision, in the contract's order: goal, open work, quota, the todo to run, the wait.
fn choose(snap: &Snapshot, agent: &str, now: Ts, cap: Option<u32>) -> Choice {
    match snap.config.goal.status {
        GoalStatus::Paused => return (Decision::Paused, "paused", None, None),
        GoalStatus::Complete => return (Decision::Paused, "complete", None, None),
        GoalStatus::Active => {}
    }
    let open: Vec<_> = snap
        .todos
        .values()
        .filter(|t| t.role == Role::Agent && t.status == Status::Open)
        .collect();
    if open.is_empty() {
        return (Decision::Idle, "no_open_todos", None, None);
    }
    // Only this agent's kind of work counts: a todo needing capabilities it lacks, or one it is
    // excluded from, never clears for it (no `wait` or `ask` on other agents' work).
    let have = crate::kernel::agents::capabilities(snap, agent);
    let open: Vec<_> = open
        .into_iter()
        .filter(|t| readiness::yours(t, agent, have))
        .collect();
    if open.is_empty() {
        return (Decision::Idle, "no_work_for_you", None, None);
    }
    if let Some(c) = throttle(snap, agent, now, cap) {
        return c;
    }
    if let Some(t) = readiness::held(snap, agent, now)
        .into_iter()
        .find(|t| readiness::blockers(snap, t, agent, now, true).is_empty())
    {
        return (Decision::Run, "held_lease", Some(brief(t)), None);
    }
    if let Some(t) = readiness::best(snap, agent, now) {
        return (Decision::Run, "ready_todo", Some(brief(t)), None);
    }
    match wait_for(snap, &open, agent, now) {
        Some(retry) => (Decision::Wait, "waiting", None, Some(retry)),
        None => (Decision::Ask, "pending_gates", None, None),
    }
}

/// Slots, then tokens, then cost: the reason names the first spent, the wait is until all free.
/// Then this agent's own slots, then the minimum interval.
fn throttle(snap: &Snapshot, agent: &str, now: Ts, cap: Option<u32>) -> Option<Choice> {
    if let Some((limit, d)) = quota::throttled(&snap.quota, &snap.config.quota, now) {
        return Some((Decision::Throttled, limit.reason(), None, Some(d)));
    }
    if let Some(d) =
        cap.and_then(|c| quota::agent_throttled(&snap.quota, &snap.config.quota, agent, c, now))
    {
        return Some((Decision::Throttled, "agent_slots_spent", None, Some(d)));
    }
    if let Some(d) = quota::interval_wait(&snap.quota, &snap.config.quota, now) {
        return Some((Decision::Wait, "min_interval", None, Some(d)));
    }
    None
}

/// The todo `t`, in brief.
fn brief(t: &crate::kernel::Todo) -> TodoBrief {
    TodoBrief {
        id: t.id.clone(),
        title: cut(&t.title, MAX_TITLE_CHARS),
        priority: t.priority,
    }
}

/// Nothing ready: does the open work clear by itself, or only by the owner? The wait until
/// the earliest todo clears (the default when no time is known), or none when only the owner
/// can clear it.
fn wait_for(snap: &Snapshot, open: &[&crate::kernel::Todo], agent: &str, now: Ts) -> Option<Dur> {
    let mut waits = false;
    let mut earliest: Option<Ts> = None;
    for t in open {
        let b: Vec<Blocker> = readiness::blockers(snap, t, agent, now, false);
        if b.iter().any(Blocker::needs_owner) {
            continue;
        }
        waits = true;
        // This todo's wait is known only when every blocker clears at a known time.
        let times: Option<Vec<Ts>> = b.iter().map(Blocker::clears_at).collect();
        if let Some(at) = times.and_then(|v| v.into_iter().max()) {
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
        }
    }
    waits.then(|| earliest.map_or(DEFAULT_RETRY, |at| at.since(now)))
}

/// Pending gates, oldest first: at most five, each cut to 200 characters, and how many more.
pub fn pending_questions(snap: &Snapshot) -> (Vec<Question>, usize) {
    let mut pending: Vec<_> = snap
        .gates
        .values()
        .filter(|g| g.effective_status() == GateStatus::Pending)
        .collect();
    pending.sort_by(|a, b| (a.opened_at, &a.id).cmp(&(b.opened_at, &b.id)));
    let more = pending.len().saturating_sub(MAX_QUESTIONS);
    let list = pending
        .into_iter()
        .take(MAX_QUESTIONS)
        .map(|g| Question {
            gate: g.id.clone(),
            question: cut(&g.question, MAX_QUESTION_CHARS),
        })
        .collect();
    (list, more)
}
