//! Agent rules: capabilities, who may be offered a todo, the owner's sealed per-agent values, and
//! separation of duties for review todos.

use crate::kernel::error::{Error, Result};
use crate::kernel::model::{AgentPolicy, Config, Extra, Snapshot, Todo};
use crate::kernel::time::Ts;

pub use crate::kernel::model::AgentFacts;

/// The most capabilities an agent declares or a todo requires.
pub const CAPS_MAX: usize = 32;
/// The longest capability name.
pub const CAP_LEN_MAX: usize = 64;
/// The most agents a todo excludes.
pub const EXCLUDE_MAX: usize = 100;

/// True for a capability name: 1 to 64 of `[a-z0-9_.-]`.
pub fn is_capability(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= CAP_LEN_MAX
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b))
}

/// Checks capability names from a command (exit 2 naming the bad one); sorted, without repeats.
pub fn check_capabilities(flag: &str, caps: &[String]) -> Result<Vec<String>> {
    for c in caps {
        if !is_capability(c) {
            return Err(Error::usage(format!(
                "`{}` is not a capability: use 1 to {CAP_LEN_MAX} of a-z 0-9 _ . -",
                crate::text::escape(c)
            ))
            .hint(format!("for example `{flag} code.rust`")));
        }
    }
    let mut v = caps.to_vec();
    v.sort();
    v.dedup();
    if v.len() > CAPS_MAX {
        return Err(Error::usage(format!(
            "{} capabilities given; the most is {CAPS_MAX}",
            v.len()
        )));
    }
    Ok(v)
}

/// A list of capabilities as a file holds it: at most 32 valid names (for the bounds checks).
pub fn caps_in_bounds(caps: &[String]) -> bool {
    caps.len() <= CAPS_MAX && caps.iter().all(|c| is_capability(c))
}

/// The capabilities `agent` has: the owner's fixed ones, else its own declaration, else none.
pub fn capabilities<'a>(snap: &'a Snapshot, agent: &str) -> &'a [String] {
    if let Some(c) = snap
        .config
        .agents
        .get(agent)
        .and_then(|p| p.capabilities.as_ref())
    {
        return c;
    }
    snap.agents
        .get(agent)
        .map_or(&[], |a| a.capabilities.as_slice())
}

/// The capabilities `todo` requires that `agent` lacks.
pub fn missing(snap: &Snapshot, todo: &Todo, agent: &str) -> Vec<String> {
    if todo.requires.is_empty() {
        return Vec::new();
    }
    let have = capabilities(snap, agent);
    todo.requires
        .iter()
        .filter(|r| !have.contains(r))
        .cloned()
        .collect()
}

/// True when `agent` may never claim `todo` (named in `exclude_agents`).
pub fn excluded(todo: &Todo, agent: &str) -> bool {
    todo.exclude_agents.iter().any(|a| a == agent)
}

/// The owner's slot cap for `agent`, if the owner fixed one.
pub fn slots_cap(snap: &Snapshot, agent: &str) -> Option<u32> {
    snap.config.agents.get(agent).and_then(|p| p.slots)
}

/// Review todos of `done` still open, with `finisher` added to their `exclude_agents`: the
/// writes `update` adds when `done` is finished, in the same transaction.
pub fn exclude_finisher(snap: &Snapshot, done: &str, finisher: &str, now: Ts) -> Vec<Todo> {
    if crate::kernel::id::is_reserved_actor(finisher) {
        // The owner (a `user` todo) or loopx itself: no agent to keep off the review.
        return Vec::new();
    }
    snap.todos
        .values()
        .filter(|t| t.reviews.as_deref() == Some(done) && !t.status.is_final())
        .filter(|t| !excluded(t, finisher) && t.exclude_agents.len() < EXCLUDE_MAX)
        .map(|t| {
            let mut t = t.clone();
            t.exclude_agents.push(finisher.to_string());
            t.updated_at = now;
            t
        })
        .collect()
}

/// The agent facts of a config: every `[agents.ID]` that fixes something, with a plain id.
pub fn facts(cfg: &Config) -> AgentFacts {
    cfg.agents
        .iter()
        .filter(|(id, p)| !p.is_unset() && crate::kernel::id::check_agent(id).is_ok())
        .map(|(id, p)| (id.clone(), (p.slots, p.capabilities.clone())))
        .collect()
}

/// A seal line's fields: `SLOTS|-` and `CAPS|-` (comma-joined).
pub fn fact_fields(f: &(Option<u32>, Option<Vec<String>>)) -> (String, String) {
    let slots = f.0.map_or("-".to_string(), |s| s.to_string());
    let caps = match &f.1 {
        None => "-".to_string(),
        Some(c) if c.is_empty() => ",".to_string(),
        Some(c) => c.join(","),
    };
    (slots, caps)
}

/// Parses a seal line's fields back; `None` when they are not the seal's.
pub fn parse_fields(slots: &str, caps: &str) -> Option<(Option<u32>, Option<Vec<String>>)> {
    let slots = match slots {
        "-" => None,
        s => Some(s.parse().ok()?),
    };
    let caps = match caps {
        "-" => None,
        "," => Some(Vec::new()),
        c => Some(c.split(',').map(str::to_string).collect()),
    };
    Some((slots, caps))
}

/// Acts on the sealed agent facts where `loopx.toml`'s `[agents.ID]` disagrees, with a note each.
/// `sealed` is `None` for a seal from before agent lines: then no `[agents.ID]` value counts.
pub fn apply_sealed(snap: &mut Snapshot, sealed: &AgentFacts, notes: &mut Vec<String>) {
    let agents = &mut snap.config.agents;
    for (id, p) in agents.iter_mut() {
        if p.is_unset() || sealed.contains_key(id) {
            continue;
        }
        notes.push(format!(
            "loopx.toml's [agents.{}] is not in the owner's seal: ignored (the owner sets it with `loopx agent fix`)",
            crate::text::escape(id)
        ));
        p.capabilities = None;
        p.slots = None;
    }
    for (id, (slots, caps)) in sealed {
        let p = agents.entry(id.clone()).or_insert_with(|| AgentPolicy {
            extra: Extra::new(),
            ..AgentPolicy::default()
        });
        if (&p.slots, &p.capabilities) != (slots, caps) {
            notes.push(format!(
                "loopx.toml's [agents.{}] differs from the owner's seal: acting on the seal",
                crate::text::escape(id)
            ));
            p.slots = *slots;
            p.capabilities = caps.clone();
        }
    }
}

#[cfg(test)]
#[path = "agents_tests.rs"]
mod tests;
