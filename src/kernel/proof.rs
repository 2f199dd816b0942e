//! Proven work: which approved check a todo's done needs, whether evidence proves it, and the
//! tier of a finished todo (self-reported, checked at a commit, owner-accepted).

use serde::Serialize;

use crate::kernel::authority::{OwnerPub, event_signed};
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::model::{Evidence, EvidenceKind, Role, Snapshot, Todo};
use crate::kernel::monitor::{Approval, Purpose, approval_for, sha256_hex};
use crate::kernel::ops::OWNER;

/// The seal's id for the project's default check (`check * SHA256`): no todo id holds `*`.
pub const DEFAULT_ID: &str = "*";

/// The check a todo's done needs: the owner-approved text and its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    /// The command text, run with `sh -c`.
    pub command: String,
    /// Its SHA-256 (hex), as the seal holds it.
    pub sha256: String,
    /// True for the project's default check, false for the todo's own.
    pub default: bool,
}

/// What must prove `t` done: its own approved check, else the project's sealed default, else
/// nothing (a self-reported done). A check the owner approved that is now edited or gone, or
/// approved for a watcher, is refused (exit 7): it never runs, and no done passes without it.
pub fn needed(snap: &Snapshot, t: &Todo) -> Result<Option<Needed>> {
    if t.every.is_some() || t.role == Role::User {
        return Ok(None);
    }
    // Without a seal that holds, an approval cannot be told from its absence (a seal moved
    // aside would make every check vanish): nothing is proven done until the owner seals again.
    if snap.unsealed {
        return Err(Error::new(
            Code::Denied,
            format!("{}: owner.seal does not hold, so whether a check must prove it done cannot be verified", t.id),
        )
        .hint("the owner checks `loopx doctor` and runs `loopx owner seal`; then finish it again"));
    }
    let sealed = snap.seal.as_ref().and_then(|s| s.checks.get(&t.id));
    let Some(c) = &t.check else {
        return match sealed {
            Some(_) => Err(Error::new(
                Code::Denied,
                format!(
                    "{}'s approved check is gone from its file: the todo cannot be done",
                    t.id
                ),
            )
            .hint(format!(
                "put the check back, or the owner revokes it: `loopx todo check revoke {}`",
                t.id
            ))),
            None => default_check(snap),
        };
    };
    own_check(snap, t, c)
}

/// `t`'s own check `c`, when the owner approved its exact text to prove a done; else refused.
fn own_check(snap: &Snapshot, t: &Todo, c: &crate::kernel::model::Check) -> Result<Option<Needed>> {
    let again = format!(
        "the owner reads it with `loopx todo show {}` and approves it again (`loopx todo check approve {} --sha HEX`)",
        t.id, t.id
    );
    let refused = |why: &str| {
        Err(Error::new(
            Code::Denied,
            format!(
                "{}'s check {why}: it does not run, and the todo cannot be done",
                t.id
            ),
        )
        .hint(again.clone()))
    };
    match approval_for(snap, t, Purpose::Done) {
        Approval::Approved => Ok(Some(Needed {
            command: c.command.clone(),
            sha256: sha256_hex(c.command.as_bytes()),
            default: false,
        })),
        Approval::Changed => refused("is not the text the owner approved"),
        Approval::OtherPurpose => refused("was approved as a watcher's check, not to prove a done"),
        Approval::NoPurpose => refused("was approved before approvals named their purpose"),
        Approval::NotApproved | Approval::NoSeal | Approval::NoCheck => Err(Error::new(
            Code::Denied,
            format!("{}'s check waits for the owner's approval: the todo is done only when it passes", t.id),
        )
        .hint(format!("the owner approves it: `loopx todo check approve {} --sha HEX` (`loopx todo show {}` shows it)", t.id, t.id))),
    }
}

/// The project's default check, when the seal holds its text's hash (an edit is refused; a
/// default added by hand, never sealed, is not the owner's and is not used).
fn default_check(snap: &Snapshot) -> Result<Option<Needed>> {
    let sealed = snap.seal.as_ref().and_then(|s| s.checks.get(DEFAULT_ID));
    let text = snap.config.done.check.as_deref();
    match (text, sealed) {
        (Some(c), Some(h)) if h.approves(c, Purpose::Done) => Ok(Some(Needed {
            command: c.to_string(),
            sha256: h.sha256.clone(),
            default: true,
        })),
        (_, Some(_)) => Err(Error::new(
            Code::Denied,
            "the project's default check is not the text the owner set (loopx.toml `[done] check`): no todo can be done",
        )
        .hint("the owner sets it again: `loopx todo check default -- COMMAND` (or `--clear`)")),
        (_, None) => Ok(None),
    }
}

/// True when `evidence` holds a passing run of exactly `n`'s text.
pub fn proves(n: &Needed, evidence: &[Evidence]) -> bool {
    proof_of(n, evidence).is_some()
}

/// The passing run of exactly `n`'s text in `evidence`, if there is one.
pub fn proof_of<'a>(n: &Needed, evidence: &'a [Evidence]) -> Option<&'a Evidence> {
    evidence
        .iter()
        .find(|e| passed(e) && e.sha256.as_deref() == Some(n.sha256.as_str()))
}

/// True when `e` is a run of a check that passed: exit 0 within its time.
pub fn passed(e: &Evidence) -> bool {
    e.kind == EvidenceKind::Check && e.exit_code == Some(0) && !e.timed_out
}

/// What a `todo.done` line's data says of its proof (`check`: the text's hash, the commit, and
/// `dirty`, the uncommitted files of the tree it read, when there were any).
pub fn done_data(n: &Needed, e: &Evidence) -> serde_json::Value {
    let mut d = serde_json::json!({"sha256": n.sha256, "commit": e.commit, "default": n.default});
    if !e.files.is_empty() {
        d["dirty"] = serde_json::json!(e.files);
    }
    d
}

/// A recently finished todo, as the journal's `todo.done` lines tell it: its tier.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finished {
    /// The todo's id.
    pub id: String,
    /// When it was done.
    pub at: crate::kernel::Ts,
    /// How it was proven.
    #[serde(flatten)]
    pub tier: Tier,
    /// True when its line says the owner did it but no owner signature proves it.
    #[serde(skip)]
    pub forged: bool,
}

/// The last `max` todos done in `events` (oldest first in, newest first out), with their tiers;
/// `key` (`owner.pub`) proves the owner's.
pub fn finished(
    events: &[crate::kernel::Event],
    max: usize,
    key: Option<&OwnerPub>,
) -> Vec<Finished> {
    let mut out: Vec<Finished> = Vec::new();
    for e in events.iter().rev() {
        if out.len() >= max {
            break;
        }
        if e.action != crate::kernel::Action::TodoDone || out.iter().any(|f| f.id == e.target) {
            continue;
        }
        let tier = tier_of(e, key);
        out.push(Finished {
            id: e.target.clone(),
            at: e.at,
            forged: e.actor == OWNER && tier != Tier::OwnerAccepted,
            tier,
        });
    }
    out
}

/// The tier a `todo.done` line gives: the owner's when the owner's signature (checked with
/// `key`, `owner.pub`) proves the line, else a check's (its data holds `check`), else the
/// agent's word. A line that only says `owner` gets the tier it would have without that.
pub fn tier_of(e: &crate::kernel::Event, key: Option<&OwnerPub>) -> Tier {
    match e.data.get("check") {
        _ if e.actor == OWNER && event_signed(e, key) => Tier::OwnerAccepted,
        Some(c) if c.is_object() => {
            let commit = c.get("commit").and_then(|v| v.as_str()).map(str::to_string);
            let dirty: Vec<String> = c
                .get("dirty")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            checked(commit, dirty)
        }
        _ => Tier::SelfReported,
    }
}

/// A check's tier: at a commit, or on a dirty tree at it when files no commit holds were there.
fn checked(commit: Option<String>, dirty: Vec<String>) -> Tier {
    match dirty.is_empty() {
        true => Tier::Checked { commit },
        false => Tier::CheckedDirty { commit, dirty },
    }
}

/// The tier for people: `✓ checked at abc123`, `checked on a dirty tree at abc123 (uncommitted:
/// a.sh)`, `self-reported`, `owner-accepted`.
pub fn tier_text(t: &Tier, stale: bool) -> String {
    // A commit read from a file may be anything: cut on a character, never inside one.
    let at = |commit: &Option<String>| -> String {
        commit
            .as_deref()
            .map_or("no commit".into(), |c| c.chars().take(12).collect())
    };
    let stale = if stale {
        " (stale: HEAD moved since)"
    } else {
        ""
    };
    match t {
        Tier::SelfReported => "self-reported".into(),
        Tier::OwnerAccepted => "owner-accepted".into(),
        Tier::Checked { commit } => format!("✓ checked at {}{stale}", at(commit)),
        Tier::CheckedDirty { commit, dirty } => {
            let first: String = dirty.first().map_or("", |f| f).chars().take(80).collect();
            let more = match dirty.len() {
                0 | 1 => String::new(),
                n => format!(" and {} more", n - 1),
            };
            format!(
                "checked on a dirty tree at {} (uncommitted: {first}{more}){stale}",
                at(commit)
            )
        }
    }
}

/// The refusal of a done that no passing check proves.
pub fn unproven(id: &str, n: &Needed) -> Error {
    Error::new(
        Code::CheckFailed,
        format!(
            "{id} is done only when its check passes (sha256 {})",
            &n.sha256[..16]
        ),
    )
    .hint("`loopx todo update --status done` runs it")
}

/// How a finished todo's done was proven.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "tier", rename_all = "kebab-case")]
pub enum Tier {
    /// The agent said so.
    SelfReported,
    /// An approved check passed at this commit on a clean tree (none: outside a git work tree).
    Checked {
        /// HEAD when the check ran.
        commit: Option<String>,
    },
    /// An approved check passed on a tree with uncommitted changes: it speaks for this commit
    /// plus those files, which no commit holds, so it does not prove the commit.
    CheckedDirty {
        /// HEAD when the check ran.
        commit: Option<String>,
        /// The uncommitted files (changed or untracked, outside `.loopx/`) when it started.
        dirty: Vec<String>,
    },
    /// The owner finished it.
    OwnerAccepted,
}

/// The note for a done that says the owner accepted it without the owner's signature.
pub fn forged_note(id: &str, tier: &Tier) -> String {
    format!(
        "todo {id} says the owner finished it, but no owner signature proves it: shown as {}",
        tier_text(tier, false)
    )
}

/// True when `t` says the owner finished it (`status_by = "owner"`): only the owner's signed
/// `todo.done` line proves it ([`tier`]'s `owner_signed`).
pub fn says_owner(t: &Todo) -> bool {
    t.status_by.as_deref() == Some(OWNER)
}

/// The tier of `t` from its evidence: the owner's done when `owner_signed` (the owner's
/// signature proves its last `todo.done` line), else a passing check written at its last
/// fence, else self-reported.
pub fn tier(t: &Todo, evidence: &[Evidence], owner_signed: bool) -> Tier {
    if says_owner(t) && owner_signed {
        return Tier::OwnerAccepted;
    }
    let run = evidence
        .iter()
        .rev()
        .find(|e| passed(e) && e.fence.is_none_or(|f| f == t.fence));
    match run {
        Some(e) => checked(e.commit.clone(), e.files.clone()),
        None => Tier::SelfReported,
    }
}

impl Tier {
    /// The commit a check ran at, for a checked tier that has one.
    pub fn commit(&self) -> Option<&str> {
        match self {
            Tier::Checked { commit } | Tier::CheckedDirty { commit, .. } => commit.as_deref(),
            _ => None,
        }
    }
}

/// True when a checked result no longer speaks for the code: HEAD is not the commit it ran at.
pub fn stale(tier: &Tier, head: Option<&str>) -> bool {
    tier.commit().is_some_and(|c| head.is_some_and(|h| h != c))
}

#[cfg(test)]
mod tests;
