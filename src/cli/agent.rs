//! `agent`: an agent declares its capabilities (`set`), anyone shows them (`show`), the owner
//! fixes capabilities and slots (`fix`); and the routing parts of `todo add` and `todo show`.

use clap::Subcommand;
use serde_json::{Value, json};

use super::{Ctx, Out, to_json};
use crate::kernel::agents;
use crate::kernel::ops::agents::Fix;
use crate::kernel::{Error, Result, Snapshot, Status, ops, quota};
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// How many of the reviewed todo's evidence entries a review todo shows.
pub const REVIEWS_EVIDENCE: usize = 5;

/// `agent ...`.
#[derive(Debug, Subcommand)]
pub enum AgentCmd {
    /// Declare what this agent can do (agents/ID.toml); adds to what it said before.
    #[command(
        after_help = "Example:\n  loopx --agent executor agent set --capability code --capability code.rust"
    )]
    Set {
        /// A capability, 1 to 64 of a-z 0-9 _ . - (repeatable).
        #[arg(long, value_name = "CAP")]
        capability: Vec<String>,
        /// Start from no capabilities (with no --capability: declare none).
        #[arg(long)]
        clear: bool,
    },
    /// An agent's capabilities (the owner's fixed ones win) and slot cap; every agent without ID.
    #[command(after_help = "Example:\n  loopx agent show executor")]
    Show {
        /// The agent (default: every agent known).
        id: Option<String>,
    },
    /// Owner: fix an agent's capabilities (they replace its own) and its slots per window.
    #[command(after_help = "Example:\n  loopx agent fix executor --capability code --slots 20")]
    Fix {
        /// The agent.
        id: String,
        /// A capability (repeatable): the whole fixed list.
        #[arg(long, value_name = "CAP")]
        capability: Vec<String>,
        /// Drop the fixed capabilities: the agent's own declaration counts again.
        #[arg(long, conflicts_with = "capability")]
        clear_capabilities: bool,
        /// The most slots this agent spends in the quota window, or `none`.
        #[arg(long, value_name = "N|none", value_parser = parse_slots)]
        slots: Option<Slots>,
    },
}

/// A slot cap as `agent fix` takes it: a number, or `none` to remove it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slots(pub Option<u32>);

fn parse_slots(s: &str) -> std::result::Result<Slots, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(Slots(None));
    }
    match s.parse::<u32>() {
        Ok(n) if (1..=crate::kernel::limits::SLOTS_MAX).contains(&n) => Ok(Slots(Some(n))),
        _ => Err(format!(
            "`{s}` is not a slot cap; use 1 to {} or none",
            crate::kernel::limits::SLOTS_MAX
        )),
    }
}

/// Runs `agent ...`.
pub fn run(ctx: &Ctx, c: AgentCmd) -> Result<Out> {
    let store = ctx.open()?;
    let now = ctx.now;
    match c {
        AgentCmd::Set { capability, clear } => {
            if capability.is_empty() && !clear {
                return Err(Error::usage("nothing to set")
                    .hint("give --capability CAP (repeatable), or --clear"));
            }
            agents::check_capabilities("--capability", &capability)?;
            let info = store.mutate(|snap| {
                ops::agents::set(snap, &ctx.agent, now, capability.clone(), clear)
            })?;
            let snap = store.load()?;
            Ok(Out::new(
                "agent",
                agent_json(&snap, &info.id, now),
                line(&snap, &info.id),
            ))
        }
        AgentCmd::Show { id } => show(&store.load()?, id, now),
        AgentCmd::Fix {
            id,
            capability,
            clear_capabilities,
            slots,
        } => {
            let f = Fix {
                capabilities: if clear_capabilities {
                    Some(None)
                } else if capability.is_empty() {
                    None
                } else {
                    Some(Some(agents::check_capabilities(
                        "--capability",
                        &capability,
                    )?))
                },
                slots: slots.map(|s| s.0),
            };
            store.mutate(|snap| ops::agents::fix(snap, ops::OWNER, now, &id, f.clone()))?;
            let snap = store.load()?;
            Ok(Out::new(
                "agent",
                agent_json(&snap, &id, now),
                line(&snap, &id),
            ))
        }
    }
}

/// `agent show [ID]`: one agent's line, or every known agent's.
fn show(snap: &Snapshot, id: Option<String>, now: crate::kernel::Ts) -> Result<Out> {
    let ids: Vec<String> = match id {
        Some(i) => {
            crate::kernel::id::check_agent(&i)?;
            vec![i]
        }
        None => known(snap),
    };
    let list: Vec<Value> = ids.iter().map(|i| agent_json(snap, i, now)).collect();
    let text: Vec<String> = ids.iter().map(|i| line(snap, i)).collect();
    let text = if text.is_empty() {
        "no agent has declared capabilities".to_string()
    } else {
        text.join("\n")
    };
    Ok(Out::new("agents", json!(list), text).noted(snap.owner_notes.clone()))
}

/// Agents with a declaration or an owner's `[agents.ID]`.
fn known(snap: &Snapshot) -> Vec<String> {
    let mut v: Vec<String> = snap
        .agents
        .keys()
        .chain(snap.config.agents.keys())
        .cloned()
        .collect();
    v.sort();
    v.dedup();
    v
}

fn agent_json(snap: &Snapshot, id: &str, now: crate::kernel::Ts) -> Value {
    let fixed = snap.config.agents.get(id);
    json!({
        "id": id,
        "capabilities": agents::capabilities(snap, id),
        "declared": snap.agents.get(id).map(|a| &a.capabilities),
        "fixed": fixed.and_then(|p| p.capabilities.as_ref()),
        "slots": fixed.and_then(|p| p.slots),
        "slots_used": quota::agent_used(&snap.quota, &snap.config.quota, id, now),
    })
}

fn line(snap: &Snapshot, id: &str) -> String {
    let caps = agents::capabilities(snap, id);
    let fixed = snap
        .config
        .agents
        .get(id)
        .is_some_and(|p| p.capabilities.is_some());
    let mut s = format!(
        "{}: {}{}",
        esc(id),
        if caps.is_empty() {
            "no capabilities".to_string()
        } else {
            esc(&caps.join(", ")).into_owned()
        },
        if fixed { " (fixed by the owner)" } else { "" }
    );
    if let Some(n) = agents::slots_cap(snap, id) {
        let slots = crate::text::count(n as usize, "slot", "slots");
        s.push_str(&format!("; at most {slots} per window"));
    }
    s
}

/// Checks `--exclude-agent` ids (exit 2 naming the bad one); sorted, without repeats.
pub fn check_excluded(ids: &[String]) -> Result<Vec<String>> {
    for i in ids {
        crate::kernel::id::check_agent(i)?;
    }
    let mut v = ids.to_vec();
    v.sort();
    v.dedup();
    crate::kernel::limits::usage(crate::kernel::limits::count(
        "--exclude-agent",
        v.len(),
        agents::EXCLUDE_MAX,
    ))?;
    Ok(v)
}

/// Resolves `--reviews`: the reviewed todo's id, and the exclusions with its finisher added
/// when it is done already (archived).
pub fn review_of(
    store: &dyn Store,
    snap: &Snapshot,
    reviews: Option<&str>,
    mut exclude: Vec<String>,
) -> Result<(Option<String>, Vec<String>)> {
    let Some(r) = reviews else {
        return Ok((None, exclude));
    };
    let id = store.resolve_todo(snap, r)?;
    if !snap.todos.contains_key(&id)
        && let Some(t) = store.archived_todo(&id)?
        && t.status == Status::Done
        && let Some(by) = t
            .status_by
            .filter(|b| crate::kernel::id::check_agent(b).is_ok())
        && !exclude.contains(&by)
    {
        exclude.push(by);
    }
    Ok((Some(id), exclude))
}

/// For a review todo: the last entries of the reviewed todo's evidence, as JSON and text lines.
pub fn reviews_evidence(
    store: &dyn Store,
    t: &crate::kernel::Todo,
) -> Result<Option<(Value, String)>> {
    let Some(r) = &t.reviews else {
        return Ok(None);
    };
    let ev = store.evidence_tail(r, REVIEWS_EVIDENCE)?;
    let mut text = format!("\n  reviews {}:", esc(r));
    if ev.is_empty() {
        text.push_str(" no evidence yet");
    }
    for e in ev.iter().rev() {
        text.push_str(&format!(
            "\n    {} {}: {}",
            e.at,
            esc(&e.agent),
            esc(&e.summary)
        ));
    }
    Ok(Some((to_json(&ev), text)))
}

/// STATE.md's section for the review todos an agent holds: the reviewed todo's last evidence.
pub fn reviews_md(store: &dyn Store, held: &[&crate::kernel::Todo]) -> Result<String> {
    let mut md = String::new();
    for t in held {
        let Some(r) = &t.reviews else { continue };
        md.push_str(&format!("\n## Reviewing {} for {}\n\n", esc(r), esc(&t.id)));
        let ev = store.evidence_tail(r, REVIEWS_EVIDENCE)?;
        if ev.is_empty() {
            md.push_str("no evidence\n");
        }
        for e in ev.iter().rev() {
            let s = crate::kernel::should_run::cut(&e.summary, 120);
            md.push_str(&format!("- {} {}: {}\n", e.at, esc(&e.agent), esc(&s)));
        }
    }
    Ok(md)
}

/// A todo's routing in one text line (requires, excluded agents), empty when it has none.
pub fn routing_text(t: &crate::kernel::Todo) -> String {
    let mut s = String::new();
    if !t.requires.is_empty() {
        s.push_str(&format!("\n  requires: {}", esc(&t.requires.join(", "))));
    }
    if !t.exclude_agents.is_empty() {
        s.push_str(&format!(
            "\n  excluded: {}",
            esc(&t.exclude_agents.join(", "))
        ));
    }
    s
}
