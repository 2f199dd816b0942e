//! Blockers: each reason a todo is not ready for an agent, and how it reads.

use serde::Serialize;

use crate::kernel::model::{Role, Status};
use crate::kernel::time::Ts;

/// The most overlapping glob pairs a reservation's message names.
const PAIRS_SHOWN: usize = 3;

/// One reason a todo is not ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Blocker {
    /// The goal is paused or complete.
    GoalPaused,
    /// A `user` todo: the owner does it.
    UserRole,
    /// Its status is not `open`.
    Status {
        /// The status.
        status: Status,
    },
    /// A dependency is not done.
    Dependency {
        /// The dependency.
        id: String,
        /// Its status, or None when it does not exist.
        status: Option<Status>,
        /// Who does it.
        role: Option<Role>,
    },
    /// A pending gate blocks it.
    Gate {
        /// The gate.
        id: String,
    },
    /// Not due yet.
    NotDue {
        /// When it becomes due.
        until: Ts,
    },
    /// The agent lacks capabilities the todo requires: not this agent's work.
    Capability {
        /// The capabilities it lacks.
        missing: Vec<String>,
    },
    /// The agent may never claim it (it finished the todo this one reviews, or is named).
    Excluded {
        /// The agent.
        agent: String,
    },
    /// The agent's own slot cap (`agent fix --slots`) is spent in the window.
    SlotsSpent {
        /// The agent.
        agent: String,
        /// Its cap.
        limit: u32,
        /// When a slot frees.
        until: Ts,
    },
    /// The breaker parked it: it made no progress N turns in a row; its gate asks the owner.
    Parked {
        /// The gate.
        gate: String,
    },
    /// Its last turns failed: it is offered again at `until` (per-todo backoff).
    Backoff {
        /// When.
        until: Ts,
    },
    /// Its reservation (`todo add --paths`) may overlap the live reservation of another
    /// agent's lease.
    Reserved {
        /// Who holds the other lease.
        holder: String,
        /// The todo it holds.
        todo: String,
        /// When that lease lapses.
        until: Ts,
        /// The pairs `[mine, theirs]` of globs that may overlap.
        overlap: Vec<(String, String)>,
    },
    /// Another live lease.
    Leased {
        /// Who holds it.
        holder: String,
        /// When it lapses.
        until: Ts,
    },
}

impl Blocker {
    /// True when only the owner can clear it (a gate, a user todo, a dead dependency).
    pub fn needs_owner(&self) -> bool {
        match self {
            Blocker::GoalPaused | Blocker::UserRole | Blocker::Gate { .. } => true,
            Blocker::Parked { .. } => true,
            Blocker::Status { .. } => true,
            Blocker::Dependency { status, role, .. } => {
                !matches!((status, role), (Some(Status::Open), Some(Role::Agent)))
            }
            Blocker::NotDue { .. } | Blocker::Leased { .. } | Blocker::SlotsSpent { .. } => false,
            Blocker::Reserved { .. } => false,
            Blocker::Backoff { .. } => false,
            // Never cleared for this agent, by anyone: should-run skips such todos instead.
            Blocker::Capability { .. } | Blocker::Excluded { .. } => false,
        }
    }

    /// True when the todo is not this agent's work at all (capabilities, exclusion).
    pub fn not_yours(&self) -> bool {
        matches!(self, Blocker::Capability { .. } | Blocker::Excluded { .. })
    }

    /// When it clears by itself, if known.
    pub fn clears_at(&self) -> Option<Ts> {
        match self {
            Blocker::NotDue { until }
            | Blocker::Backoff { until }
            | Blocker::Leased { until, .. }
            | Blocker::Reserved { until, .. }
            | Blocker::SlotsSpent { until, .. } => Some(*until),
            _ => None,
        }
    }

    /// A short phrase for people.
    pub fn describe(&self) -> String {
        match self {
            Blocker::GoalPaused => "the goal is not active".into(),
            Blocker::UserRole => "a user todo: the owner does it".into(),
            Blocker::Status { status } => format!("status is {}", status.as_str()),
            Blocker::Dependency { id, status, .. } => match status {
                Some(s) => format!("depends on {id} ({})", s.as_str()),
                None => format!("depends on {id}, which does not exist"),
            },
            Blocker::Gate { id } => format!("gate {id} is pending"),
            Blocker::NotDue { until } => format!("not due until {until}"),
            Blocker::Parked { gate } => {
                format!("parked after turns without progress: gate {gate} asks the owner")
            }
            Blocker::Backoff { until } => {
                format!("its last turns failed: backed off until {until}")
            }
            Blocker::Leased { holder, until } => format!("leased by {holder} until {until}"),
            Blocker::Reserved {
                holder,
                todo,
                until,
                overlap,
            } => {
                // A few pairs: 32 globs a side could make a thousand.
                let mut pairs: Vec<String> = overlap
                    .iter()
                    .take(PAIRS_SHOWN)
                    .map(|(a, b)| format!("{a} ~ {b}"))
                    .collect();
                if overlap.len() > PAIRS_SHOWN {
                    pairs.push(format!("and {} more", overlap.len() - PAIRS_SHOWN));
                }
                format!(
                    "its paths overlap {todo}'s reservation, held by {holder} until {until}: {}",
                    pairs.join(", ")
                )
            }
            Blocker::Capability { missing } => {
                format!("needs capabilities you lack: {}", missing.join(", "))
            }
            Blocker::Excluded { agent } => {
                format!("{agent} may not claim it (separation of duties)")
            }
            Blocker::SlotsSpent {
                agent,
                limit,
                until,
            } => format!(
                "{agent} has spent its {} in the window (agent fix --slots) until {until}",
                crate::text::count(*limit as usize, "slot", "slots")
            ),
        }
    }

    /// The phrase for a todo offered to `agent` by someone else (a hand-off).
    pub fn describe_for(&self, agent: &str) -> String {
        match self {
            Blocker::Capability { missing } => {
                format!(
                    "{agent} lacks capabilities it needs: {}",
                    missing.join(", ")
                )
            }
            b => b.describe(),
        }
    }
}
