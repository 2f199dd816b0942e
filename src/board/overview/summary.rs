//! What the overview shows of one project: pure functions of its snapshot (the kernel's rules
//! for pending gates, leases, overdue monitors and quota), and the order of the rows.

use std::cmp::Reverse;

use crate::kernel::{GateStatus, GoalStatus, Snapshot, Ts, monitor, quota};

/// A pending gate, as the overview lists it and decides it.
#[derive(Debug, Clone, PartialEq)]
pub struct GateBrief {
    /// Its id.
    pub id: String,
    /// The question.
    pub question: String,
    /// The options it offers (the owner picks one on approve).
    pub options: Vec<String>,
    /// Who asked.
    pub opened_by: String,
    /// When.
    pub opened_at: Ts,
    /// What it blocks, shortly.
    pub blocks: String,
    /// The sha256 of the action it holds, when it holds one (approve names it).
    pub action_sha: Option<String>,
}

/// One project's state, in a few numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The objective.
    pub objective: String,
    /// The goal's state.
    pub goal: GoalStatus,
    /// Pending gates (an unsigned decision counts as pending), oldest first.
    pub gates: Vec<GateBrief>,
    /// Leases held and not expired.
    pub leases: usize,
    /// Leases that lapsed and are still held.
    pub expired: usize,
    /// Open monitors due for longer than their cadence.
    pub overdue: usize,
    /// Turns spent in the quota's window.
    pub used: u64,
    /// The quota's slots.
    pub limit: u32,
    /// A quota limit is spent: no turn runs until it frees.
    pub throttled: bool,
    /// Todos in the working set.
    pub todos: usize,
    /// Quarantined files and places the files disagree with the owner's seal.
    pub problems: usize,
}

/// The summary of a snapshot at `now`.
pub fn summarize(snap: &Snapshot, now: Ts) -> Summary {
    let mut gates: Vec<GateBrief> = snap
        .gates
        .values()
        .filter(|g| g.effective_status() == GateStatus::Pending)
        .map(|g| GateBrief {
            id: g.id.clone(),
            question: g.question.clone(),
            options: g.options.clone(),
            opened_by: g.opened_by.clone(),
            opened_at: g.opened_at,
            blocks: crate::board::panes::gates::blocks_text(g),
            action_sha: g.action.as_ref().map(|a| a.sha256.clone()),
        })
        .collect();
    gates.sort_by(|a, b| (a.opened_at, &a.id).cmp(&(b.opened_at, &b.id)));
    let held = snap.todos.values().filter_map(|t| t.lease.as_ref());
    let (mut leases, mut expired) = (0, 0);
    for l in held {
        if l.expires_at > now {
            leases += 1;
        } else {
            expired += 1;
        }
    }
    let (q, p) = (&snap.quota, &snap.config.quota);
    let usage = quota::usage(q, p, now);
    Summary {
        objective: snap.config.goal.objective.clone(),
        goal: snap.config.goal.status,
        gates,
        leases,
        expired,
        overdue: monitor::overdue_list(snap, now).len(),
        used: usage.used,
        limit: usage.limit,
        throttled: quota::throttled(q, p, now).is_some(),
        todos: snap.todos.len(),
        problems: snap.quarantined.len() + snap.owner_notes.len(),
    }
}

/// What a row says of its project: its summary, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    /// Not loaded yet.
    Loading,
    /// Loaded (a later load that failed keeps it, with the problem).
    Loaded(Summary, Option<String>),
    /// The project cannot be read: why.
    Failed(String),
}

impl State {
    /// The summary, if any.
    pub fn summary(&self) -> Option<&Summary> {
        match self {
            State::Loaded(s, _) => Some(s),
            _ => None,
        }
    }

    /// The problem to show, if any.
    pub fn problem(&self) -> Option<&str> {
        match self {
            State::Loaded(_, p) => p.as_deref(),
            State::Failed(p) => Some(p),
            State::Loading => None,
        }
    }
}

/// The order of the rows, by what needs the owner: pending gates first (most first), then
/// overdue monitors, then a project that cannot be read, then by live leases; then by name.
pub fn order(rows: &[(&str, &State)]) -> Vec<usize> {
    let key = |i: usize| {
        let (name, st) = rows[i];
        let s = st.summary();
        (
            Reverse(s.map_or(0, |s| s.gates.len())),
            Reverse(s.map_or(0, |s| s.overdue)),
            Reverse(st.problem().is_some() || s.is_some_and(|s| s.problems > 0)),
            Reverse(s.map_or(0, |s| s.leases + s.expired)),
            name,
        )
    };
    let mut ix: Vec<usize> = (0..rows.len()).collect();
    ix.sort_by_key(|&i| key(i));
    ix
}
