//! Agent operations: an agent's own declaration (`agent.set`) and the owner's fix (`agent.fix`).

use serde_json::json;

use super::{Change, Write};
use crate::kernel::action::Action;
use crate::kernel::agents::check_capabilities;
use crate::kernel::error::{Error, Result};
use crate::kernel::id;
use crate::kernel::limits;
use crate::kernel::model::{AgentInfo, Config, EventDraft, SCHEMA_VERSION, Snapshot};
use crate::kernel::time::Ts;

/// An agent declares its own capabilities (`agent set`): `agents/ID.toml`, journaled `agent.set`.
pub fn set(
    snap: &Snapshot,
    agent: &str,
    now: Ts,
    caps: Vec<String>,
    clear: bool,
) -> Result<(Change, AgentInfo)> {
    id::check_agent(agent)?;
    let mut all = if clear {
        Vec::new()
    } else {
        snap.agents
            .get(agent)
            .map(|a| a.capabilities.clone())
            .unwrap_or_default()
    };
    all.extend(caps);
    let caps = check_capabilities("--capability", &all)?;
    let info = AgentInfo {
        schema_version: SCHEMA_VERSION,
        id: agent.to_string(),
        capabilities: caps,
        updated_at: now,
        extra: snap
            .agents
            .get(agent)
            .map(|a| a.extra.clone())
            .unwrap_or_default(),
    };
    let mut c = Change::default();
    c.writes.push(Write::Agent(info.clone()));
    c.events.push(EventDraft {
        at: now,
        actor: agent.to_string(),
        action: Action::AgentSet,
        target: agent.to_string(),
        data: json!({"capabilities": info.capabilities}),
    });
    Ok((c, info))
}

/// What `agent fix` changes; `None` keeps a value, `Some(None)` removes it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fix {
    /// Capabilities the owner fixes (`Some(None)`: the agent's own declaration counts again).
    pub capabilities: Option<Option<Vec<String>>>,
    /// The agent's slots per window (`Some(None)`: no cap).
    pub slots: Option<Option<u32>>,
}

/// Owner: fixes an agent's capabilities and slots in `loopx.toml` (`agent.fix`, signed, sealed).
pub fn fix(snap: &Snapshot, owner: &str, now: Ts, agent: &str, f: Fix) -> Result<(Change, Config)> {
    id::check_agent(agent)?;
    if f == Fix::default() {
        return Err(Error::usage("nothing to fix")
            .hint("give --capability CAP, --clear-capabilities, or --slots N|none"));
    }
    let mut cfg = snap.config.clone();
    let p = cfg.agents.entry(agent.to_string()).or_default();
    if let Some(caps) = f.capabilities {
        p.capabilities = caps
            .map(|c| check_capabilities("--capability", &c))
            .transpose()?;
    }
    if let Some(s) = f.slots {
        if s.is_some_and(|n| n == 0 || n > limits::SLOTS_MAX) {
            return Err(Error::usage(format!(
                "--slots is 1 to {} or none",
                limits::SLOTS_MAX
            )));
        }
        p.slots = s;
    }
    let shown = p.clone();
    if p.is_unset() && p.extra.is_empty() {
        cfg.agents.remove(agent);
    }
    limits::usage(limits::check_config(&cfg))?;
    let mut c = Change::by_owner();
    c.events.push(EventDraft {
        at: now,
        actor: owner.to_string(),
        action: Action::AgentFix,
        target: agent.to_string(),
        data: json!({"capabilities": shown.capabilities, "slots": shown.slots}),
    });
    c.writes.push(Write::Config(cfg.clone()));
    Ok((c, cfg))
}
