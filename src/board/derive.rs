//! What the panes show, derived from a snapshot and a clock: the todo columns, the gate list, quota.

pub mod sort;

use crate::board::data::DoneItem;
use crate::kernel::quota;
use crate::kernel::readiness::{self, Blocker};
use crate::kernel::{Gate, GateStatus, Role, Snapshot, Status, Todo, Ts};

/// A column of the todo board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Column {
    /// Ready for an agent to claim.
    Ready,
    /// Held by an agent (live or expired lease).
    Claimed,
    /// Waiting on a gate, a dependency, a due time or the owner.
    Waiting,
    /// Blocked or deferred, with the reason.
    Blocked,
    /// Recently done or cancelled.
    Done,
}

impl Column {
    /// Every column, left to right.
    pub const ALL: [Column; 5] = [
        Column::Ready,
        Column::Claimed,
        Column::Waiting,
        Column::Blocked,
        Column::Done,
    ];

    /// The heading.
    pub fn title(self) -> &'static str {
        match self {
            Column::Ready => "Ready",
            Column::Claimed => "Claimed",
            Column::Waiting => "Waiting",
            Column::Blocked => "Blocked",
            Column::Done => "Done",
        }
    }

    /// Its place, 0 to 4.
    pub fn index(self) -> usize {
        Column::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }

    /// The symbol that marks a card of this column without color.
    pub fn symbol(self) -> &'static str {
        match self {
            Column::Ready => "○",
            Column::Claimed => "●",
            Column::Waiting => "…",
            Column::Blocked => "■",
            Column::Done => "✓",
        }
    }
}

/// Why a card sits where it does (rendered against the clock at draw time).
#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    /// Nothing: ready.
    None,
    /// A lease: holder, fence, expiry.
    Lease {
        /// The agent.
        holder: String,
        /// The fence.
        fence: u64,
        /// When it lapses.
        expires_at: Ts,
    },
    /// A pending gate.
    Gate(String),
    /// A dependency not done.
    Dep(String, Option<Status>),
    /// Not due yet.
    Due(Ts),
    /// A user todo: the owner does it.
    Owner,
    /// Blocked or deferred, with the reason.
    Stopped(Status, Option<String>),
    /// Done or cancelled, by whom and when, and how a done was proven (for people).
    Finished(Status, String, Ts, Option<String>),
}

/// One todo on the board.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    /// The todo id.
    pub id: String,
    /// The title.
    pub title: String,
    /// Its priority (`P2` for done items, which do not keep it).
    pub priority: crate::kernel::Priority,
    /// When it was created (the pick order's tie-break).
    pub created_at: Ts,
    /// Why it is in its column.
    pub why: Why,
}

impl Card {
    /// True for a claimed card whose lease has lapsed.
    pub fn expired(&self, now: Ts) -> bool {
        matches!(&self.why, Why::Lease { expires_at, .. } if *expires_at <= now)
    }
}

/// The five columns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Columns {
    /// Cards per column, in column order.
    pub cols: [Vec<Card>; 5],
    /// The next time a card may change column by the clock alone (a due time).
    pub next_change: Option<Ts>,
}

/// True when `needle` (lower case) is in any of the texts.
pub fn matches_filter(needle: &str, texts: &[&str]) -> bool {
    needle.is_empty() || texts.iter().any(|t| t.to_lowercase().contains(needle))
}

/// Sorts the working set and the done list into columns, keeping those that match the filter.
pub fn columns(snap: &Snapshot, done: &[DoneItem], now: Ts, filter: &str) -> Columns {
    let needle = filter.to_lowercase();
    let mut out = Columns::default();
    for t in snap.todos.values() {
        let holder = t.lease.as_ref().map(|l| l.holder.as_str()).unwrap_or("");
        if !matches_filter(
            &needle,
            &[&t.id, &t.title, holder, t.reason.as_deref().unwrap_or("")],
        ) {
            continue;
        }
        let (col, why) = place(snap, t, now);
        if let Why::Due(at) = why {
            out.next_change = Some(out.next_change.map_or(at, |n: Ts| n.min(at)));
        }
        out.cols[col.index()].push(Card {
            id: t.id.clone(),
            title: t.title.clone(),
            priority: t.priority,
            created_at: t.created_at,
            why,
        });
    }
    for d in done {
        if !matches_filter(&needle, &[&d.id, &d.title, &d.by]) {
            continue;
        }
        out.cols[Column::Done.index()].push(Card {
            id: d.id.clone(),
            title: d.title.clone(),
            priority: crate::kernel::Priority::P2,
            created_at: d.at,
            why: Why::Finished(
                d.status,
                d.by.clone(),
                d.at,
                d.check.as_ref().map(|(t, s)| board_tier(t, *s)),
            ),
        });
    }
    let by_pick = |a: &Card, b: &Card| (a.priority, &a.id).cmp(&(b.priority, &b.id));
    let [ready, claimed, waiting, blocked, _] = &mut out.cols;
    // The kernel's pick order: priority, then oldest, then id.
    ready.sort_by(|a, b| (a.priority, a.created_at, &a.id).cmp(&(b.priority, b.created_at, &b.id)));
    claimed.sort_by(|a, b| {
        let ea = match &a.why {
            Why::Lease { expires_at, .. } => *expires_at,
            _ => Ts(0),
        };
        let eb = match &b.why {
            Why::Lease { expires_at, .. } => *expires_at,
            _ => Ts(0),
        };
        ea.cmp(&eb).then_with(|| a.id.cmp(&b.id))
    });
    waiting.sort_by(by_pick);
    blocked.sort_by(by_pick);
    out
}

/// A done's tier in a card's few columns: `✓ checked`, `✓ stale check`, `checked dirty`,
/// `self-reported`.
fn board_tier(t: &crate::kernel::proof::Tier, stale: bool) -> String {
    use crate::kernel::proof::Tier;
    match (t, stale) {
        (Tier::Checked { .. }, false) => "✓ checked".into(),
        (Tier::Checked { .. }, true) => "✓ stale check".into(),
        (Tier::CheckedDirty { .. }, false) => "checked dirty".into(),
        (Tier::CheckedDirty { .. }, true) => "stale dirty check".into(),
        (Tier::SelfReported, _) => "self-reported".into(),
        (Tier::OwnerAccepted, _) => "owner-accepted".into(),
    }
}

/// The column of one todo and why.
pub fn place(snap: &Snapshot, t: &Todo, now: Ts) -> (Column, Why) {
    match t.status {
        Status::Blocked | Status::Deferred => {
            return (Column::Blocked, Why::Stopped(t.status, t.reason.clone()));
        }
        Status::Done | Status::Cancelled => {
            return (
                Column::Done,
                Why::Finished(
                    t.status,
                    t.status_by.clone().unwrap_or_default(),
                    t.updated_at,
                    None,
                ),
            );
        }
        Status::Open => {}
    }
    if let Some(l) = &t.lease {
        return (
            Column::Claimed,
            Why::Lease {
                holder: l.holder.clone(),
                fence: l.fence,
                expires_at: l.expires_at,
            },
        );
    }
    if t.role == Role::User {
        return (Column::Waiting, Why::Owner);
    }
    let blockers = readiness::blockers(snap, t, "", now, false);
    for b in &blockers {
        match b {
            Blocker::Gate { id } | Blocker::Parked { gate: id } => {
                return (Column::Waiting, Why::Gate(id.clone()));
            }
            Blocker::Dependency { id, status, .. } => {
                return (Column::Waiting, Why::Dep(id.clone(), *status));
            }
            _ => {}
        }
    }
    for b in &blockers {
        if let Blocker::NotDue { until } | Blocker::Backoff { until } = b {
            return (Column::Waiting, Why::Due(*until));
        }
    }
    (Column::Ready, Why::None)
}

/// The gates in display order: pending oldest first, then decided newest first.
pub fn gates<'a>(snap: &'a Snapshot, filter: &str) -> Vec<&'a Gate> {
    let needle = filter.to_lowercase();
    let keep = |g: &&Gate| matches_filter(&needle, &[&g.id, &g.question, &g.opened_by]);
    let mut pending: Vec<&Gate> = snap
        .gates
        .values()
        .filter(|g| g.effective_status() == GateStatus::Pending)
        .filter(keep)
        .collect();
    pending.sort_by(|a, b| (a.opened_at, &a.id).cmp(&(b.opened_at, &b.id)));
    let mut decided: Vec<&Gate> = snap
        .gates
        .values()
        .filter(|g| g.effective_status() != GateStatus::Pending)
        .filter(keep)
        .collect();
    decided.sort_by(|a, b| (b.decided_at, &b.id).cmp(&(a.decided_at, &a.id)));
    pending.extend(decided);
    pending
}

/// True for a gate whose file says decided but whose decision is not signed.
pub fn tampered(g: &Gate) -> bool {
    g.status != GateStatus::Pending && !g.signed
}

/// The quota pane's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaNow {
    /// Slots spent in the window.
    pub used: u64,
    /// Slots per window.
    pub limit: u32,
    /// The window.
    pub window: crate::kernel::Dur,
    /// When the next slot frees (throttled), or when the oldest spend leaves the window.
    pub next_free: Option<Ts>,
    /// True when the window is spent.
    pub throttled: bool,
    /// Which limit is spent (`slots`, `tokens`, `cost_usd`), when throttled.
    pub spent: Option<&'static str>,
    /// Slots spent per bucket across the window, oldest first.
    pub buckets: Vec<u64>,
}

/// The quota at `now`, with `n` sparkline buckets across the window.
pub fn quota_now(snap: &Snapshot, now: Ts, n: usize) -> QuotaNow {
    let p = &snap.config.quota;
    let u = quota::usage(&snap.quota, p, now);
    let thr = quota::throttled(&snap.quota, p, now);
    let n = n.max(1);
    let mut buckets = vec![0u64; n];
    let win = p.window.0.max(1);
    let start = now.0 - win;
    for s in quota::in_window(&snap.quota, p, now) {
        let off = (s.at.0 - start).clamp(0, win - 1);
        let i = ((off as i128 * n as i128) / win as i128) as usize;
        if let Some(b) = buckets.get_mut(i.min(n - 1)) {
            *b += u64::from(s.slots);
        }
    }
    QuotaNow {
        used: u.used,
        limit: u.limit,
        window: u.window,
        next_free: thr.map(|(_, d)| now.add(d)).or(u.resets_at),
        throttled: thr.is_some(),
        spent: thr.map(|(l, _)| l.as_str()),
        buckets,
    }
}
