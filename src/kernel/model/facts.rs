//! Records the rules read: the breaker's policy and a todo's stall, a watcher's check, a gate's
//! action and its use, and the hooks table as `loopx.toml` holds it.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::kernel::model::Extra;
use crate::kernel::time::Ts;

/// Turns without progress in a row that park a todo, unless the owner sets another number.
pub const TURNS_DEFAULT: u32 = 3;
/// The most the owner may set (0 turns the breaker off).
pub const TURNS_MAX: u32 = 1_000;
/// `[breaker]` in `loopx.toml`: an owner fact, sealed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct BreakerPolicy {
    /// Turns without progress in a row that park a todo (0: never; unset: 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<u32>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

impl BreakerPolicy {
    /// True when nothing is set.
    pub fn is_empty(&self) -> bool {
        self.turns.is_none() && self.extra.is_empty()
    }

    /// The number in force: the owner's, else the default.
    pub fn turns(&self) -> u32 {
        self.turns.unwrap_or(TURNS_DEFAULT).min(TURNS_MAX)
    }
}

/// A todo's run of turns that did not progress (`[stall]` in its file; absent after progress).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Stall {
    /// Turns in a row that made no progress.
    #[serde(default)]
    pub turns: u32,
    /// Turns in a row that failed or made no progress: they set the backoff.
    #[serde(default)]
    pub failures: u32,
    /// The todo is not offered before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Ts>,
    /// The gate the breaker opened: the todo is parked until the owner decides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked: Option<String>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// HEAD and a fingerprint of the changed files, as a turn began.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Base {
    /// The commit HEAD named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// SHA-256 over the changed files' names, sizes and times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree: Option<String>,
    /// When the turn began: evidence from then on is the turn's (a kept lease keeps its
    /// `acquired_at` across turns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Ts>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A watcher's check: a text run with `sh -c`, and what its last run gave.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Check {
    /// The command text; runs only while `owner.seal` holds its SHA-256 for this todo.
    pub command: String,
    /// The agent that proposed it.
    pub proposed_by: String,
    /// When it was proposed.
    pub proposed_at: Ts,
    /// SHA-256 (hex) of the last result (exit code and stdout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_hash: Option<String>,
    /// When it last ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_at: Option<Ts>,
    /// Its last exit code (128 plus the signal when a signal or the timeout ended it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<i32>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a gate's action is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    /// A command line, run without a shell.
    Cmd,
    /// Bytes handed over as they are (a diff, a message, a request body).
    Payload,
}

impl ActionKind {
    /// The kind as written.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Cmd => "cmd",
            ActionKind::Payload => "payload",
        }
    }
}

/// The exact action a gate asks the owner to approve, with its SHA-256.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GateAction {
    /// A command or a payload.
    pub kind: ActionKind,
    /// The command's program and arguments (`cmd`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub argv: Vec<String>,
    /// The payload's text (`payload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// SHA-256 of the action: of each argument followed by a NUL byte, or of the payload's bytes.
    pub sha256: String,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The one use of an approved action.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GateUse {
    /// When it was used.
    pub at: Ts,
    /// The agent that used it.
    pub by: String,
    /// The turn that ran it, if a turn did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<String>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Reads `[hooks]`, whether a key is quoted (`"gate.opened" = ...`) or dotted (`gate.opened =
/// ...`, which TOML reads as a table `gate` holding `opened`).
pub fn de_hooks<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let table = toml::Table::deserialize(d)?;
    let mut out = BTreeMap::new();
    flatten("", &table, &mut out).map_err(serde::de::Error::custom)?;
    Ok(out)
}

fn flatten(
    prefix: &str,
    t: &toml::Table,
    out: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    for (k, v) in t {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::String(s) => {
                out.insert(name, s.clone());
            }
            toml::Value::Table(inner) if prefix.is_empty() => flatten(&name, inner, out)?,
            _ => {
                return Err(format!(
                    "hooks.{name} must be a command text, like \"gate.opened\" = \"notify-send 'a gate'\""
                ));
            }
        }
    }
    Ok(())
}
