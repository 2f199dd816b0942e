//! `loopx.toml` and `agents/ID.toml`: the goal, the quota and lease policies, known agents.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{BreakerPolicy, DonePolicy, Extra, SCHEMA_VERSION, schema};
use crate::kernel::time::{Dur, Ts};

/// `loopx.toml`: the goal, the quota policy, lease defaults and known agents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Config {
    /// The file's schema version.
    #[serde(default = "schema")]
    pub schema_version: u32,
    /// The goal.
    pub goal: Goal,
    /// The quota policy.
    #[serde(default)]
    pub quota: QuotaPolicy,
    /// Lease defaults.
    #[serde(default)]
    pub lease: LeasePolicy,
    /// Known agents, by id: the owner's fixed capabilities and slots (sealed), other keys kept.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub agents: BTreeMap<String, AgentPolicy>,
    // budgets and alerts (hooks): owner facts, sealed
    /// Hook commands by event name (`gate.opened`), run with `sh -c`; they run only as sealed.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::kernel::model::de_hooks"
    )]
    pub hooks: BTreeMap<String, String>,
    /// What proves a todo done: the project's default check (an owner fact, sealed).
    #[serde(default, skip_serializing_if = "DonePolicy::is_empty")]
    pub done: DonePolicy,
    /// The no-progress breaker: turns without progress that park a todo (an owner fact, sealed).
    #[serde(default, skip_serializing_if = "BreakerPolicy::is_empty")]
    pub breaker: BreakerPolicy,
    /// Devices the owner enrolled to decide gates (`loopx web pair`), by name (sealed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, DevicePolicy>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Config {
    /// A new active goal `id` with this objective and the default policies.
    pub fn new(id: &str, objective: &str, now: Ts) -> Config {
        Config {
            schema_version: SCHEMA_VERSION,
            goal: Goal {
                id: id.to_string(),
                objective: objective.trim().to_string(),
                success_criteria: Vec::new(),
                status: GoalStatus::Active,
                created_at: now,
                updated_at: now,
                reason: None,
                extra: Extra::new(),
            },
            quota: QuotaPolicy::default(),
            lease: LeasePolicy::default(),
            agents: BTreeMap::new(),
            hooks: BTreeMap::new(),
            done: DonePolicy::default(),
            breaker: BreakerPolicy::default(),
            devices: BTreeMap::new(),
            extra: Extra::new(),
        }
    }
}

/// The goal's state.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum GoalStatus {
    /// Agents work on it.
    Active,
    /// The owner paused it.
    Paused,
    /// The owner marked it complete.
    Complete,
}

/// The objective of a project.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Goal {
    /// The goal's id.
    pub id: String,
    /// What the project is for.
    pub objective: String,
    /// How the owner will know it is done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub success_criteria: Vec<String>,
    /// Active, paused or complete.
    pub status: GoalStatus,
    /// When it was created.
    pub created_at: Ts,
    /// When it last changed.
    pub updated_at: Ts,
    /// Why it was paused or completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// How many turns may run in a window.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QuotaPolicy {
    /// Slots per window.
    #[serde(default = "default_slots")]
    pub slots: u32,
    /// The sliding window.
    #[serde(default = "default_window")]
    pub window: Dur,
    /// The least time between two spends.
    #[serde(default)]
    pub min_interval: Dur,
    /// Tokens per window (none: no token budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// US dollars per window (none: no cost budget).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

fn default_slots() -> u32 {
    100
}

fn default_window() -> Dur {
    Dur::from_hours(24)
}

impl Default for QuotaPolicy {
    fn default() -> Self {
        QuotaPolicy {
            slots: default_slots(),
            window: default_window(),
            min_interval: Dur(0),
            tokens: None,
            cost_usd: None,
            extra: Extra::new(),
        }
    }
}

/// Lease defaults.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LeasePolicy {
    /// How long a lease lasts unless `--ttl` says otherwise.
    #[serde(default = "default_ttl")]
    pub ttl: Dur,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

fn default_ttl() -> Dur {
    Dur::from_mins(30)
}

impl Default for LeasePolicy {
    fn default() -> Self {
        LeasePolicy {
            ttl: default_ttl(),
            extra: Extra::new(),
        }
    }
}

/// The least and most a lease may last.
pub const TTL_MIN: Dur = Dur(1000);
/// The most a lease may last: 7 days.
pub const TTL_MAX: Dur = Dur(7 * 86_400_000);

/// `[agents.ID]` in `loopx.toml`: what the owner fixed for one agent (sealed), other keys kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct AgentPolicy {
    /// Capabilities the owner fixed: they replace the agent's own declaration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<String>>,
    /// The most slots this agent may spend in the quota window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

impl AgentPolicy {
    /// True when the owner fixed nothing here.
    pub fn is_unset(&self) -> bool {
        self.capabilities.is_none() && self.slots.is_none()
    }
}

/// `[devices.NAME]` in `loopx.toml`: a device the owner enrolled (sealed), other keys kept.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DevicePolicy {
    /// Its Ed25519 public key, 64 hex characters.
    pub key: String,
    /// When the owner enrolled it.
    pub enrolled_at: Ts,
    /// What the device said it is (its browser), for the owner's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `agents/ID.toml`: an agent's own declaration of what it can do.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AgentInfo {
    /// The file's schema version.
    #[serde(default = "schema")]
    pub schema_version: u32,
    /// The agent's id (the file's name).
    pub id: String,
    /// What it says it can do.
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// When it last said so.
    pub updated_at: Ts,
    /// Unknown keys.
    #[serde(flatten)]
    pub extra: Extra,
}
