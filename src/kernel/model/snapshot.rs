//! The snapshot every rule reads, the files a transaction records, and quarantined files.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::kernel::model::{Config, Gate, QuotaFile, SCHEMA_VERSION, Status, TodoMap};

/// One file a transaction writes, removes or appends to, as its commit line records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TxFile {
    /// The path inside `.loopx/`.
    pub path: String,
    /// `put` (replaced whole), `remove` or `append`.
    pub op: TxOp,
    /// SHA-256 (hex) of the new content (`put`) or of the appended bytes (`append`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// For `append`: the file's length before the append.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

/// What a transaction does to one file.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TxOp {
    /// Replaced whole (temp file and rename).
    Put,
    /// Removed.
    Remove,
    /// Bytes appended (a log).
    Append,
}

/// A file loopx could not read, quarantined so that the rest of the project goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file, relative to the project.
    pub file: String,
    /// The 1-based line, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// The error code it would have as an error (`invalid_state`, `schema_too_new`).
    #[serde(serialize_with = "code_str")]
    pub code: crate::kernel::Code,
    /// What to do about it.
    #[serde(skip)]
    pub hint: Option<String>,
}

fn code_str<S: serde::Serializer>(c: &crate::kernel::Code, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(c.as_str())
}

impl Problem {
    /// The problem from an error about a file.
    pub fn of(e: &crate::kernel::Error, fallback_file: &str) -> Problem {
        let (file, line, message) = match &e.location {
            Some(l) => (l.file.clone(), l.line, l.what.clone()),
            None => (fallback_file.to_string(), None, e.message.clone()),
        };
        Problem {
            file,
            line,
            message,
            code: e.code,
            hint: e.hint.clone(),
        }
    }

    /// The problem as the error a command returns when it needs this file.
    pub fn to_error(&self) -> crate::kernel::Error {
        let e = crate::kernel::Error::in_file(self.code, &self.file, self.line, &self.message);
        match &self.hint {
            Some(h) => e.hint(h.clone()),
            None => e,
        }
    }

    /// `file:line`, or the file alone.
    pub fn at(&self) -> String {
        match self.line {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.clone(),
        }
    }
}

/// A consistent view of the working state: what every rule reads.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// `loopx.toml`.
    pub config: Config,
    /// The working set: open, blocked and deferred todos, by id.
    pub todos: TodoMap,
    /// Every gate, by id.
    pub gates: BTreeMap<String, Gate>,
    /// `quota.toml`.
    pub quota: QuotaFile,
    /// Status of archived todos that working todos depend on (missing ids are absent).
    pub archived: HashMap<String, Status>,
    /// Todo files that could not be read: never claimable, named wherever state is shown.
    pub quarantined: BTreeMap<String, Problem>,
    /// Where files disagree with the owner's seal, and what loopx acts on instead.
    pub owner_notes: Vec<String>,
    /// The owner's seal this snapshot was checked against, when valid.
    pub seal: Option<crate::kernel::model::Seal>,
    /// True when the project has an owner key and no seal that holds: no owner fact can be
    /// verified, so no done can be proven.
    pub unsealed: bool,
    /// Agents' own declarations (`agents/ID.toml`), by id.
    pub agents: BTreeMap<String, crate::kernel::model::AgentInfo>,
    /// What comparing reservations may still cost the rules read on this snapshot.
    pub reserve_budget: crate::kernel::reserve::Budget,
}

impl Snapshot {
    /// The snapshot of a new goal: its config, and nothing else yet.
    pub fn new(config: Config) -> Snapshot {
        Snapshot {
            config,
            todos: TodoMap::new(),
            gates: BTreeMap::new(),
            quota: QuotaFile {
                schema_version: SCHEMA_VERSION,
                ..Default::default()
            },
            archived: HashMap::new(),
            quarantined: BTreeMap::new(),
            owner_notes: Vec::new(),
            seal: None,
            unsealed: false,
            agents: BTreeMap::new(),
            reserve_budget: Default::default(),
        }
    }

    /// The status of any todo id the snapshot knows (working set or referenced archive).
    pub fn status_of(&self, id: &str) -> Option<Status> {
        self.todos
            .get(id)
            .map(|t| t.status)
            .or_else(|| self.archived.get(id).copied())
    }
}
