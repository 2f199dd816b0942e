//! Records appended and never rewritten: evidence lines and journal events.

use serde::{Deserialize, Serialize};

use crate::kernel::action::Action;
use crate::kernel::time::Ts;

use super::{Extra, TxFile, is_false};

/// What a piece of evidence is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum EvidenceKind {
    /// Free text.
    Note,
    /// A command and its exit code.
    Command,
    /// A file produced.
    Artifact,
    /// A named value.
    Metric,
    /// A commit.
    Git,
    /// Captured by loopx itself.
    Auto,
    /// A run of the owner-approved check that proves a todo done (loopx writes it, never `--kind`).
    Check,
}

impl std::str::FromStr for EvidenceKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "note" => Ok(EvidenceKind::Note),
            "command" => Ok(EvidenceKind::Command),
            "artifact" => Ok(EvidenceKind::Artifact),
            "metric" => Ok(EvidenceKind::Metric),
            "git" => Ok(EvidenceKind::Git),
            "auto" => Ok(EvidenceKind::Auto),
            "check" => Ok(EvidenceKind::Check),
            _ => Err(format!(
                "`{s}` is not an evidence kind; use note, command, artifact, metric, git or auto"
            )),
        }
    }
}

/// True when a metric's name says lower is better: a loss, an error, a latency or a cost.
pub fn lower_is_better(name: &str) -> bool {
    const LOW: [&str; 9] = [
        "loss",
        "error",
        "latency",
        "_ms",
        "rmse",
        "mae",
        "perplexity",
        "duration",
        "cost",
    ];
    let n = name.to_ascii_lowercase();
    LOW.iter().any(|w| n.contains(w))
}

/// One line of `evidence/ID.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Evidence {
    /// When.
    pub at: Ts,
    /// Which agent.
    pub agent: String,
    /// The fence of the lease it was written under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// What kind.
    pub kind: EvidenceKind,
    /// One line for people.
    pub summary: String,
    /// The command run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The file's SHA-256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A metric's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A metric's value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// A git commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Changed files (auto evidence).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The changed files outside the lease's reservation (auto evidence of a lease with paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<String>,
    /// Seconds since the lease was granted (auto evidence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_claim_s: Option<i64>,
    /// The command's arguments, each cut short (command evidence of a turn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// How long the command ran, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The last lines of its output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The turn that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// True when the turn's timeout stopped it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub timed_out: bool,
}

impl Evidence {
    /// A bare entry of this kind.
    pub fn new(
        at: Ts,
        agent: &str,
        fence: Option<u64>,
        kind: EvidenceKind,
        summary: String,
    ) -> Self {
        Evidence {
            at,
            agent: agent.to_string(),
            fence,
            kind,
            summary,
            command: None,
            exit_code: None,
            path: None,
            sha256: None,
            name: None,
            value: None,
            commit: None,
            files: Vec::new(),
            outside: Vec::new(),
            since_claim_s: None,
            argv: Vec::new(),
            duration_ms: None,
            output: None,
            turn: None,
            timed_out: false,
        }
    }
}

/// A journal event before the store gives it a place in the chain.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EventDraft {
    /// When.
    pub at: Ts,
    /// Who.
    pub actor: String,
    /// What (`todo.claim`, `gate.approve`, ...).
    pub action: Action,
    /// On what (an id, or `goal`, `quota`).
    pub target: String,
    /// Details.
    pub data: serde_json::Value,
}

/// One line of `journal.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Event {
    /// 1, 2, ...
    pub seq: u64,
    /// When.
    pub at: Ts,
    /// Who.
    pub actor: String,
    /// What.
    pub action: Action,
    /// On what.
    pub target: String,
    /// Details.
    pub data: serde_json::Value,
    /// SHA-256 (hex) of the previous line's bytes; 64 zeros on line 1.
    pub prev: String,
    /// The transaction this line belongs to: the `seq` of its first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx: Option<u64>,
    /// On a transaction's last line (its commit point): every file it writes or removes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<Vec<TxFile>>,
    /// The owner's signature over this line (owner actions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sig: Option<String>,
}

/// `[done]` in `loopx.toml`: what proves a todo done when it has no check of its own.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DonePolicy {
    /// The project's default check, run with `sh -c`; it counts only as the owner sealed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

impl DonePolicy {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.check.is_none() && self.extra.is_empty()
    }
}
