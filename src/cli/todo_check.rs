//! `todo check`: the check that proves a todo done (an agent proposes it, the owner approves its
//! exact text or sets the project's default), and what `todo show` and `status` say of it.

use clap::Subcommand;
use serde_json::json;

use super::monitor::{self as mon, Purpose};
use super::{Ctx, Out};
use crate::kernel::monitor::{SHA_PREFIX_MIN, sha256_hex};
use crate::kernel::proof::{self, tier_text};
use crate::kernel::{Evidence, Result, Snapshot, Status, Todo, ops};
use crate::runtime::git;
use crate::store::{Store, StoreExt};
use crate::text::escape as esc;

/// `todo check ...`.
#[derive(Debug, Subcommand)]
pub enum CheckCmd {
    /// Propose the check that proves a todo done: a text run with `sh -c` in the work tree.
    #[command(after_help = "Example:\n  loopx todo check propose t-4kq9zx -- cargo test --quiet")]
    Propose {
        /// The todo's id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
        /// The command, after `--` (its words are joined with spaces).
        #[arg(last = true, required = true, num_args = 1.., value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Owner: approve the exact text of a todo's check (sealed in owner.seal).
    #[command(after_help = "Example:\n  loopx todo check approve t-4kq9zx --sha ba381a64be65f00d")]
    Approve {
        /// The todo's id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
        /// Approve only if the text's SHA-256 starts with this (16 or more hex digits).
        #[arg(long, value_name = "HEX")]
        sha: Option<String>,
    },
    /// Owner: withdraw a check's approval (the todo is then done without a check).
    #[command(after_help = "Example:\n  loopx todo check revoke t-4kq9zx")]
    Revoke {
        /// The todo's id or a unique prefix.
        #[arg(add = super::complete::todo_id())]
        id: String,
    },
    /// Owner: set the check that proves done every todo without one of its own.
    #[command(
        after_help = "Example:\n  loopx todo check default -- cargo test --quiet\n  loopx todo check default --clear"
    )]
    Default {
        /// Remove the default check.
        #[arg(long, conflicts_with = "command")]
        clear: bool,
        /// The command, after `--`.
        #[arg(last = true, num_args = 1.., value_name = "COMMAND", required_unless_present = "clear")]
        command: Vec<String>,
    },
}

/// Runs `todo check ...`.
pub fn run(ctx: &Ctx, store: &dyn Store, c: CheckCmd) -> Result<Out> {
    match c {
        CheckCmd::Propose { id, command } => mon::propose(ctx, store, &id, &command, Purpose::Done),
        CheckCmd::Approve { id, sha } => {
            mon::approve(ctx, store, &id, sha.as_deref(), Purpose::Done)
        }
        CheckCmd::Revoke { id } => mon::revoke(ctx, store, &id),
        CheckCmd::Default { clear, command } => {
            let text = (!clear).then(|| command.join(" "));
            let (cfg, notes) = store.mutate_noted(|snap| {
                ops::set_default_check(snap, ops::OWNER, ctx.now, text.as_deref())
            })?;
            let sha = cfg.done.check.as_deref().map(|c| sha256_hex(c.as_bytes()));
            let line = match (&cfg.done.check, &sha) {
                (Some(c), Some(h)) => format!(
                    "default check set: `{}` (sha256 {})",
                    esc(c),
                    &h[..SHA_PREFIX_MIN]
                ),
                _ => "default check removed".to_string(),
            };
            let j = json!({"command": cfg.done.check, "sha256": sha});
            Ok(Out::new("default_check", j, line).noted(notes))
        }
    }
}

/// What `todo show` says of a todo's proof: its check and whether the owner approved it, and
/// for a done todo its tier (`stale` once HEAD moved past a checked commit); and a note when
/// the todo says the owner finished it but no owner signature proves it.
pub fn shown(
    ctx: &Ctx,
    store: &dyn Store,
    snap: &Snapshot,
    t: &Todo,
    evidence: &[Evidence],
) -> Result<(serde_json::Value, String, Vec<String>)> {
    let mut notes = Vec::new();
    let mut text = String::new();
    let mut j = json!({});
    // A finished todo's check is history: its approval leaves the seal with it.
    if let Some(c) = t
        .check
        .as_ref()
        .filter(|_| t.every.is_none() && !t.status.is_final())
    {
        let a = crate::kernel::monitor::approval(snap, t);
        let sha = sha256_hex(c.command.as_bytes());
        text.push_str(&format!(
            "\n  check ({}, sha256 {}): {}",
            a.describe(),
            &sha[..SHA_PREFIX_MIN],
            esc(&c.command)
        ));
        j["check"] = json!({"command": c.command, "sha256": sha, "approval": a});
    }
    if t.status == Status::Done {
        let signed = proof::says_owner(t) && owner_done_signed(store, &t.id)?;
        let tier = proof::tier(t, evidence, signed);
        if proof::says_owner(t) && !signed {
            notes.push(proof::forged_note(&t.id, &tier));
        }
        let head = match tier.commit() {
            Some(_) => git::head(&ctx.work_dir(store)).ok().flatten(),
            None => None,
        };
        let stale = proof::stale(&tier, head.as_deref());
        text.push_str(&format!("\n  proof: {}", tier_text(&tier, stale)));
        if let serde_json::Value::Object(m) = json!(tier) {
            m.into_iter().for_each(|(k, v)| j[k] = v);
        }
        j["stale"] = json!(stale);
    }
    Ok((j, text, notes))
}

/// True when the owner's signature proves that the owner finished `id`: its last `todo.done`
/// line is the owner's and verifies with `owner.pub`. The journal's tail is read first; the
/// whole journal only when the line is older than that.
fn owner_done_signed(store: &dyn Store, id: &str) -> Result<bool> {
    use crate::kernel::{Action, Event};
    let Some(key) = store.owner_pub()? else {
        return Ok(false);
    };
    let last = |events: Vec<Event>| {
        events
            .into_iter()
            .rev()
            .find(|e| e.action == Action::TodoDone && e.target == id)
    };
    let tail = store.journal_tail(crate::store::JOURNAL_SCAN)?;
    let whole = tail.len() < crate::store::JOURNAL_SCAN;
    let mut line = last(tail);
    if line.is_none() && !whole {
        let mut pos = 0;
        loop {
            let (events, next) = store.journal_after(pos)?;
            line = last(events).or(line);
            if next <= pos {
                break;
            }
            pos = next;
        }
    }
    Ok(line.is_some_and(|e| {
        e.actor == ops::OWNER && crate::kernel::authority::event_signed(&e, Some(&key))
    }))
}

/// The todos done lately, as `status` and STATE.md show them.
pub struct DoneLately {
    /// Each with its tier and `stale`.
    pub json: serde_json::Value,
    /// A line for each, for people.
    pub lines: Vec<String>,
    /// A note for each line that says the owner did it without the owner's signature.
    pub notes: Vec<String>,
}

/// The last todos done, from the journal's tail, each with its tier (the owner's only where the
/// owner's signature proves it) and whether a checked result is stale (HEAD is read once).
pub fn done_lately(ctx: &Ctx, store: &dyn Store) -> Result<DoneLately> {
    let key = store.owner_pub()?;
    let tail = store.journal_tail(DONE_SCAN)?;
    let done = proof::finished(&tail, DONE_SHOWN, key.as_ref());
    let checked = done.iter().any(|f| f.tier.commit().is_some());
    let head = match checked {
        true => git::head(&ctx.work_dir(store)).ok().flatten(),
        false => None,
    };
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    let mut notes = Vec::new();
    for f in &done {
        let stale = proof::stale(&f.tier, head.as_deref());
        let mut j = json!(f);
        j["stale"] = json!(stale);
        rows.push(j);
        lines.push(format!("{} {}", esc(&f.id), tier_text(&f.tier, stale)));
        if f.forged {
            notes.push(proof::forged_note(&f.id, &f.tier));
        }
    }
    Ok(DoneLately {
        json: json!(rows),
        lines,
        notes,
    })
}

/// How many journal lines `done_lately` reads, and how many done todos it shows.
const DONE_SCAN: usize = 200;
const DONE_SHOWN: usize = 5;
