//! The model: goal and config, todos and leases, gates, quota, evidence, journal events.

use serde::{Deserialize, Serialize};

use crate::kernel::time::{Dur, Ts};

/// The schema version this binary reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// Keys a file carries that this binary does not know; kept across rewrites.
pub type Extra = toml::Table;

fn schema() -> u32 {
    SCHEMA_VERSION
}

fn is_false(b: &bool) -> bool {
    !*b
}

mod config;
pub use config::*;

/// Who works on a todo.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// An agent claims it.
    Agent,
    /// The owner does it.
    User,
}

/// A todo's priority, `P0` highest.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Priority {
    /// Highest.
    P0,
    /// High.
    P1,
    /// Normal (default).
    P2,
    /// Low.
    P3,
    /// Lowest.
    P4,
}

impl std::str::FromStr for Priority {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "P0" | "0" => Ok(Priority::P0),
            "P1" | "1" => Ok(Priority::P1),
            "P2" | "2" => Ok(Priority::P2),
            "P3" | "3" => Ok(Priority::P3),
            "P4" | "4" => Ok(Priority::P4),
            _ => Err(format!("`{s}` is not a priority; use P0 (highest) to P4")),
        }
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// A todo's status.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Waiting to be done.
    Open,
    /// Cannot go on: see the reason.
    Blocked,
    /// Put off for now.
    Deferred,
    /// Finished (archived).
    Done,
    /// Dropped (archived).
    Cancelled,
}

impl Status {
    /// The name as written in files.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Open => "open",
            Status::Blocked => "blocked",
            Status::Deferred => "deferred",
            Status::Done => "done",
            Status::Cancelled => "cancelled",
        }
    }

    /// Done and cancelled todos leave the working set.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Done | Status::Cancelled)
    }
}

impl std::str::FromStr for Status {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "open" => Ok(Status::Open),
            "blocked" => Ok(Status::Blocked),
            "deferred" => Ok(Status::Deferred),
            "done" => Ok(Status::Done),
            "cancelled" | "canceled" => Ok(Status::Cancelled),
            _ => Err(format!(
                "`{s}` is not a status; use open, blocked, deferred, done or cancelled"
            )),
        }
    }
}

/// A lease: one agent's exclusive, expiring claim on a todo.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lease {
    /// The agent holding it.
    pub holder: String,
    /// The fence granted with it.
    pub fence: u64,
    /// When it was granted.
    pub acquired_at: Ts,
    /// When it lapses unless renewed.
    pub expires_at: Ts,
    /// The `loopx turn` running under it, if one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    // hand-off
    /// The agent that handed this lease over (`todo handoff`), until the receiver claims it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff_from: Option<String>,
    /// HEAD and the changed files when the turn began (the breaker compares them at its end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<Base>,
    /// The path globs this lease reserves (`--paths`, or the todo's own); see `kernel::reserve`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The git worktree made for this lease (`--worktree`), relative to the project's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<String>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Lease {
    /// A lease of `holder` at `fence` from `at` until `expires_at`, reserving nothing else.
    pub fn new(holder: String, fence: u64, at: Ts, expires_at: Ts) -> Lease {
        Lease {
            holder,
            fence,
            acquired_at: at,
            expires_at,
            turn: None,
            handoff_from: None,
            base: None,
            paths: Vec::new(),
            worktree: None,
            extra: Default::default(),
        }
    }

    /// True while the lease has not expired.
    pub fn is_live(&self, now: Ts) -> bool {
        now < self.expires_at
    }
}

/// A todo: one node of the work graph.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Todo {
    /// The file's schema version.
    #[serde(default = "schema")]
    pub schema_version: u32,
    /// `t-` and six base32 characters.
    pub id: String,
    /// What to do.
    pub title: String,
    /// Agent or user.
    #[serde(default = "default_role")]
    pub role: Role,
    /// P0 (highest) to P4.
    #[serde(default = "default_priority")]
    pub priority: Priority,
    /// Open, blocked, deferred, done or cancelled.
    pub status: Status,
    /// Todos that must be done first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// A cadence: the todo is a recurring monitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<Dur>,
    /// Not ready before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_due_at: Option<Ts>,
    /// Who added it.
    pub created_by: String,
    /// When it was added.
    pub created_at: Ts,
    /// When it last changed.
    pub updated_at: Ts,
    /// Why it is blocked, deferred, done or cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who last set its status (for reopen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_by: Option<String>,
    /// The last fence granted; kept after the lease ends.
    #[serde(default)]
    pub fence: u64,
    // overdue mark and watcher check
    /// The due time whose overdue period was journaled (`monitor.overdue`), once per due time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overdue_noted: Option<Ts>,
    /// A watcher: a command `monitor poll` runs while the owner's seal approves its text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<Box<Check>>,
    // capabilities and separation of duties
    /// Capabilities an agent needs to be offered it (all of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<String>,
    /// The todo this one reviews: it depends on it, and its finisher may never claim this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviews: Option<String>,
    /// Agents that may never claim it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_agents: Vec<String>,
    // todo context
    /// What the work is, at length (Markdown or plain text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// URLs of an issue, a pull request or a document (`scheme://...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<String>,
    /// Turns in a row without progress or with failure, and the backoff and parking they set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<Box<Stall>>,
    /// The path globs a claim reserves when it names none (`todo add --paths`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// The current lease, if any (boxed: most todos have none, and a load holds every todo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Box<Lease>>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

fn default_role() -> Role {
    Role::Agent
}

fn default_priority() -> Priority {
    Priority::P2
}

impl Todo {
    /// The lease if it is still live.
    pub fn live_lease(&self, now: Ts) -> Option<&Lease> {
        self.lease.as_deref().filter(|l| l.is_live(now))
    }
}

/// One spend of quota.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spend {
    /// When.
    pub at: Ts,
    /// Which agent.
    pub agent: String,
    /// How many slots.
    pub slots: u32,
    /// The turn id, for de-duplication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// Tokens used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Cost in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `quota.toml`: the spends inside the current window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct QuotaFile {
    /// The file's schema version.
    #[serde(default = "schema")]
    pub schema_version: u32,
    /// The spends, oldest first.
    #[serde(default, rename = "spend", skip_serializing_if = "Vec::is_empty")]
    pub spends: Vec<Spend>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

mod gate;
pub use gate::*;
mod records;
pub use records::*;

pub mod action;
mod facts;
pub use facts::*;
mod sealed;
pub use sealed::*;
pub mod snapshot;
pub use snapshot::{Problem, Snapshot, TxFile, TxOp};
mod todo_map;
pub use todo_map::TodoMap;
