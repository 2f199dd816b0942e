//! Mutations as pure functions: each takes a snapshot and a clock and returns the change to store.

use crate::kernel::action::Action;
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::model::*;
use crate::kernel::time::{Dur, Ts};

/// One file to write.
#[derive(Debug, Clone)]
pub enum Write {
    /// Write `todos/ID.toml`.
    Todo(Todo),
    /// Move a todo to `archive/ID.toml`.
    Archive(Todo),
    /// Write `gates/ID.toml`.
    Gate(Gate),
    /// Write `loopx.toml`.
    Config(Config),
    /// Write `quota.toml`.
    Quota(QuotaFile),
    /// Append to `evidence/ID.jsonl`.
    Evidence(String, Evidence),
    /// Write `agents/ID.toml`.
    Agent(AgentInfo),
}

/// What a mutation changes: files to write and journal events, applied together under the lock.
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// Files to write, in order.
    pub writes: Vec<Write>,
    /// Journal events, in order.
    pub events: Vec<EventDraft>,
    /// An owner action: the store signs it, and refuses it without the owner's key.
    pub owner: bool,
    /// The owner seals the files as they are, even where they differ from the last seal.
    pub adopt_files: bool,
}

impl Change {
    /// An empty change that is the owner's: the store signs it, or refuses it without the key.
    pub fn by_owner() -> Change {
        Change {
            owner: true,
            ..Change::default()
        }
    }

    /// Adds a journal event; an event whose actor is the owner makes the whole change the owner's.
    fn event(
        &mut self,
        now: Ts,
        actor: &str,
        action: Action,
        target: &str,
        data: serde_json::Value,
    ) {
        self.owner |= actor.eq_ignore_ascii_case(OWNER);
        self.events.push(EventDraft {
            at: now,
            actor: actor.to_string(),
            action,
            target: target.to_string(),
            data,
        });
    }
}

/// The actor recorded for the owner's actions.
pub const OWNER: &str = "owner";

fn todo<'a>(snap: &'a Snapshot, id: &str) -> Result<&'a Todo> {
    if let Some(p) = snap.quarantined.get(id) {
        return Err(p.to_error());
    }
    snap.todos.get(id).ok_or_else(|| {
        let msg = match snap.archived.get(id) {
            Some(s) => format!("todo {id} is {} and archived", s.as_str()),
            None => format!("no open todo {id}"),
        };
        Error::new(Code::NotFound, msg).hint("list open todos with `loopx todo list`")
    })
}

fn gate<'a>(snap: &'a Snapshot, id: &str) -> Result<&'a Gate> {
    if let Some(p) = snap.quarantined.get(id) {
        return Err(p.to_error());
    }
    snap.gates.get(id).ok_or_else(|| {
        Error::new(Code::NotFound, format!("no gate {id}"))
            .hint("list gates with `loopx gate list`")
    })
}

/// Checks a lease length is within 1 s and 7 days.
pub fn check_ttl(ttl: Dur) -> Result<Dur> {
    if ttl < TTL_MIN || ttl > TTL_MAX {
        return Err(Error::usage(format!(
            "a lease lasts from 1s to 7d, not {ttl}"
        )));
    }
    Ok(ttl)
}

/// When a recurring todo done at `now` is due again; an error past the latest time loopx keeps.
fn next_due(now: Ts, every: Dur) -> Result<Ts> {
    now.checked_add(every).ok_or_else(|| {
        Error::usage(format!(
            "the next due time, now plus {every}, is past {}, the latest time loopx keeps",
            Ts::MAX
        ))
        .hint("lower the todo's `every`, or check the system clock")
    })
}

impl Snapshot {
    /// The snapshot after `writes` (what a change will leave on disk).
    pub fn after(&self, writes: &[Write]) -> Snapshot {
        let mut s = self.clone();
        for w in writes {
            match w {
                Write::Todo(t) => {
                    s.todos.insert(t.id.clone(), t.clone());
                }
                Write::Archive(t) => {
                    s.todos.remove(&t.id);
                    s.archived.insert(t.id.clone(), t.status);
                }
                Write::Gate(g) => {
                    s.gates.insert(g.id.clone(), g.clone());
                }
                Write::Config(c) => s.config = c.clone(),
                Write::Quota(q) => s.quota = q.clone(),
                Write::Evidence(..) => {}
                Write::Agent(a) => {
                    s.agents.insert(a.id.clone(), a.clone());
                }
            }
        }
        s
    }
}

pub mod agents;
mod devices;
pub use devices::*;
mod breaker;
mod claim;
use claim::grant;
pub use claim::*;
mod todos;
pub use todos::*;
mod gates;
pub use gates::*;
mod hooks;
mod owner;
// hand-off and edit
mod team;
pub use team::*;
mod spend;
mod turn;
pub use breaker::Progress;
pub use hooks::*;
pub use owner::*;
pub use spend::*;
pub use turn::*;

mod monitor;
pub use monitor::*;
