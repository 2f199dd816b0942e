//! The owner's seal as data: the signed facts, journal marks, owner-set leases, sealed gates.

use std::collections::{BTreeMap, BTreeSet};

use crate::kernel::model::GoalStatus;

/// The owner's fixed values by agent, as the seal holds them: (slots, capabilities).
pub type AgentFacts = BTreeMap<String, (Option<u32>, Option<Vec<String>>)>;

/// A place in the journal: a line's `seq`, where it starts, and the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The line's `seq`.
    pub seq: u64,
    /// Its byte offset in `journal.jsonl`.
    pub offset: u64,
    /// SHA-256 (hex) of the line without its newline.
    pub hash: String,
}

/// An owner-set lease: the fence it was set at, and its holder (`None`: released).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseFact {
    /// The fence the owner's change left.
    pub fence: u64,
    /// The holder the owner set, or none for a release.
    pub holder: Option<String>,
}

/// The owner's signed facts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Seal {
    /// The journal's last line when sealed (none for an empty journal).
    pub journal: Option<Mark>,
    /// The goal's id and status.
    pub goal: Option<(String, GoalStatus)>,
    /// Slots, window and minimum interval (ms).
    pub quota: Option<(u32, i64, i64)>,
    /// Every gate known when sealed, by id: the hash of its facts and what it blocked.
    pub gates: BTreeMap<String, SealedGate>,
    /// The open `user` todos.
    pub users: BTreeSet<String>,
    /// Todos the owner or a rejected gate blocked, by id: who (`owner`, `gate:ID`).
    pub blocked: BTreeMap<String, String>,
    /// Leases the owner set or released, by todo id.
    pub leases: BTreeMap<String, LeaseFact>,
    /// Approved checks, by todo id (`*`: the project's default check): what the owner approved.
    pub checks: BTreeMap<String, SealedCheck>,
    /// The token and cost budgets (`None` inside: no budget); `None`: a seal from before budgets.
    pub budget: Option<(Option<u64>, Option<f64>)>,
    /// Each hook the owner approved: event name to the SHA-256 of its command text.
    pub hooks: BTreeMap<String, String>,
    /// The owner's fixed values per agent (`agent ID SLOTS|- CAPS|-`).
    pub agents: AgentFacts,
    /// Devices the owner enrolled: name to public key (hex).
    pub devices: BTreeMap<String, String>,
    /// Keys the owner revoked (hex): never enrolled again, so their old decisions stay void.
    pub revoked: BTreeSet<String>,
    /// Turns without progress that park a todo (`None`: a seal from before the breaker).
    pub breaker: Option<u32>,
    /// Every lease the files held when sealed, agents' claims too, by todo id.
    pub held: BTreeMap<String, HeldFact>,
    /// The quota spends of the window when sealed, oldest first.
    pub spends: Vec<crate::kernel::model::Spend>,
    /// Gates whose file disagreed with this seal when it was applied (not part of the text).
    pub mismatched: BTreeSet<String>,
}

/// A lease as sealed (`held ID FENCE HOLDER EXPIRES_MS`): its fence, holder and end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldFact {
    /// The fence it was granted with.
    pub fence: u64,
    /// Its holder.
    pub holder: String,
    /// When it lapses (ms since the epoch).
    pub expires_at: i64,
}

/// A sealed gate: the hash of its facts but `blocks`, and the todos it blocked then. Agents may
/// add todos to a gate (`todo add --blocked-by-gate`), so the sealed blocks are a floor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedGate {
    /// SHA-256 of the gate's facts without `blocks`.
    pub hash: String,
    /// The todos it blocked when sealed.
    pub blocks: Vec<String>,
}

/// What the owner approved a check for: the one runner that may run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    /// Proving a todo done: run by the done (`todo check approve`, `todo check default`).
    Done,
    /// A watcher's recurring check: run by `monitor poll` (`monitor approve`).
    Watch,
}

impl Purpose {
    /// The word the seal line and the journal's `check.approve` line hold.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Done => "done",
            Purpose::Watch => "watch",
        }
    }

    /// The purpose a word names, if any.
    pub fn parse(s: &str) -> Option<Purpose> {
        match s {
            "done" => Some(Purpose::Done),
            "watch" => Some(Purpose::Watch),
            _ => None,
        }
    }
}

/// An approved check as the seal holds it: the SHA-256 of the exact command text, and what it
/// was approved for. `None`: a `check ID SHA` line from before approvals named their purpose,
/// which approves nothing until the owner approves again (the parser reads the default's `*`
/// line as `done`: only the default check ever had that id, and it only proves a done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedCheck {
    /// SHA-256 (hex) of the command text.
    pub sha256: String,
    /// What it was approved for.
    pub purpose: Option<Purpose>,
}

impl SealedCheck {
    /// True when it approves `text` for `purpose`.
    pub fn approves(&self, text: &str, purpose: Purpose) -> bool {
        self.sha256 == crate::kernel::monitor::sha256_hex(text.as_bytes())
            && self.purpose == Some(purpose)
    }
}
