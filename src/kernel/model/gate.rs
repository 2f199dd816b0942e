//! Gates as `gates/ID.toml` holds them: the owner's question, its options and decision.

use serde::{Deserialize, Serialize};

use super::{Extra, GateAction, GateUse, Role, SCHEMA_VERSION, Todo, is_false, schema};
use crate::kernel::time::Ts;

/// A gate's state.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum GateStatus {
    /// Waiting for the owner.
    Pending,
    /// The owner said yes.
    Approved,
    /// The owner said no.
    Rejected,
    /// Withdrawn.
    Cancelled,
}

impl GateStatus {
    /// The name as written in files.
    pub fn as_str(self) -> &'static str {
        match self {
            GateStatus::Pending => "pending",
            GateStatus::Approved => "approved",
            GateStatus::Rejected => "rejected",
            GateStatus::Cancelled => "cancelled",
        }
    }
}

/// A gate: a question only the owner may decide.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Gate {
    /// The file's schema version.
    #[serde(default = "schema")]
    pub schema_version: u32,
    /// `g-` and six base32 characters.
    pub id: String,
    /// What the owner is asked.
    pub question: String,
    /// The answers offered, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    /// Todos it blocks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<String>,
    /// Blocks every agent todo.
    #[serde(default, skip_serializing_if = "is_false")]
    pub global: bool,
    /// Who asked.
    pub opened_by: String,
    /// When.
    pub opened_at: Ts,
    /// Pending, approved, rejected or cancelled.
    pub status: GateStatus,
    /// Who decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// When.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<Ts>,
    /// The option chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub option: Option<String>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The journal's head when the decision was made (bound by the signature).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_head: Option<String>,
    /// The owner's signature over the decision (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The exact action the owner is asked to approve, with its SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<GateAction>,
    /// The one use of the approved action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<GateUse>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
    /// Set by the store: the decision is signed (always true for pending gates).
    #[serde(skip)]
    pub signed: bool,
}

impl Gate {
    /// A new pending gate asking `question`, blocking nothing yet.
    pub fn pending(id: &str, question: String, opened_by: &str, opened_at: Ts) -> Gate {
        Gate {
            schema_version: SCHEMA_VERSION,
            id: id.to_string(),
            question,
            options: Vec::new(),
            blocks: Vec::new(),
            global: false,
            opened_by: opened_by.to_string(),
            opened_at,
            status: GateStatus::Pending,
            decided_by: None,
            decided_at: None,
            option: None,
            reason: None,
            journal_head: None,
            signature: None,
            action: None,
            used: None,
            extra: Extra::new(),
            signed: true,
        }
    }

    /// The status that counts: a decision that is not signed counts as pending.
    pub fn effective_status(&self) -> GateStatus {
        if self.status != GateStatus::Pending && !self.signed {
            GateStatus::Pending
        } else {
            self.status
        }
    }

    /// True when the gate blocks this todo (by list or globally).
    pub fn blocks_todo(&self, todo: &Todo) -> bool {
        (self.global && todo.role == Role::Agent) || self.blocks.contains(&todo.id)
    }
}
