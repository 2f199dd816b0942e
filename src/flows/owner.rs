//! The owner's acts: approve, reject, reassign, release, pause, resume, add; one place for every face.

use crate::kernel::id::Kind;
use crate::kernel::ops;
use crate::kernel::{GateStatus, GoalStatus, Priority, Result, Ts};
use crate::store::{Store, StoreExt};

/// Something the owner asks for on the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerAct {
    /// Approve a pending gate, with the option chosen (if the gate offers options).
    Approve {
        /// The gate.
        gate: String,
        /// The option chosen.
        option: Option<String>,
        /// Why (optional, as `gate approve --reason`).
        reason: Option<String>,
        /// The sha256 of the action the dialog showed, when the gate holds one.
        sha: Option<String>,
    },
    /// Reject a pending gate: the todos it blocks become blocked.
    Reject {
        /// The gate.
        gate: String,
        /// Why (required).
        reason: String,
    },
    /// Move a todo's lease to another agent with a new fence.
    Reassign {
        /// The todo.
        todo: String,
        /// The agent.
        to: String,
    },
    /// Take a lease back from its holder.
    Release {
        /// The todo.
        todo: String,
        /// Who holds it now (named in the confirmation).
        holder: String,
    },
    /// Pause the goal.
    Pause,
    /// Resume the goal.
    Resume,
    /// Add an agent todo.
    AddTodo {
        /// Its title.
        title: String,
        /// Its priority.
        priority: Priority,
    },
}

impl OwnerAct {
    /// The gate a decision is about, if it is one.
    pub fn gate(&self) -> Option<&str> {
        match self {
            OwnerAct::Approve { gate, .. } | OwnerAct::Reject { gate, .. } => Some(gate),
            _ => None,
        }
    }

    /// The reason a decision carries, if any.
    pub fn reason(&self) -> Option<&str> {
        match self {
            OwnerAct::Approve { reason, .. } => reason.as_deref(),
            OwnerAct::Reject { reason, .. } => Some(reason),
            _ => None,
        }
    }

    /// Exactly what will happen, for the confirm dialog.
    pub fn describe(&self) -> String {
        match self {
            OwnerAct::Approve {
                gate,
                option: Some(o),
                ..
            } => format!("Approve gate {gate} with option \"{o}\"."),
            OwnerAct::Approve {
                gate, option: None, ..
            } => {
                format!("Approve gate {gate}: the todos it blocks may run.")
            }
            OwnerAct::Reject { gate, .. } => {
                format!("Reject gate {gate}: the todos it blocks become blocked.")
            }
            OwnerAct::Reassign { todo, to } => {
                format!(
                    "Reassign {todo} to {to} with a new fence: the old holder's writes will fail."
                )
            }
            OwnerAct::Release { todo, holder } => {
                format!("Release {holder}'s lease on {todo}: it becomes ready for any agent.")
            }
            OwnerAct::Pause => "Pause the goal: agents are told not to run turns.".into(),
            OwnerAct::Resume => "Resume the goal: agents may run turns again.".into(),
            OwnerAct::AddTodo { title, priority } => {
                format!("Add the {priority} agent todo \"{title}\".")
            }
        }
    }
}

/// Who acts, and whether the owner's key is here to prove it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The actor written in the journal.
    pub actor: String,
    /// True when the owner's secret key is here and matches the project's `owner.pub`.
    pub verified: bool,
    /// A few words for the status bar: the key's fingerprint, or why authority is unverified.
    pub note: String,
}

impl Owner {
    /// An owner whose authority is not proven (the store will refuse its changes).
    pub fn unverified() -> Owner {
        Owner {
            actor: ops::OWNER.into(),
            verified: false,
            note: "owner: unverified".into(),
        }
    }

    fn unverified_because(why: &str) -> Owner {
        Owner {
            note: format!("owner: unverified ({why})"),
            ..Owner::unverified()
        }
    }

    /// Checks for the owner's key against the project's public key, as the store will when it
    /// signs a change.
    pub fn detect(store: &dyn crate::store::Store) -> Owner {
        let Ok(project) = store.owner_pub() else {
            return Owner::unverified_because("owner.pub unreadable");
        };
        match crate::store::owner::signer_for(&store.env().key, project.as_ref()) {
            Ok(k) => Owner {
                actor: ops::OWNER.into(),
                verified: true,
                note: format!("owner ✓ {}", k.public().fingerprint()),
            },
            Err(_) if project.is_none() => {
                Owner::unverified_because("no owner.pub: `loopx owner init`")
            }
            Err(_) => Owner::unverified_because("no matching owner key here"),
        }
    }
}

/// Performs an owner action for a face that stays open: the owner's key is looked for again
/// when it was missing (it may have been made since), and an error becomes one line for people.
pub fn act(
    store: &dyn Store,
    owner: &mut Owner,
    action: &OwnerAct,
    now: Ts,
) -> Result<String, String> {
    if !owner.verified {
        *owner = Owner::detect(store);
    }
    perform(store, owner, action, now).map_err(line_of)
}

/// An error in one line for a status bar: the message, then the hint in parentheses.
pub fn line_of(e: crate::kernel::Error) -> String {
    match e.hint {
        Some(h) => format!("{} ({h})", e.message),
        None => e.message,
    }
}

/// Performs an owner action through the store and the kernel; returns a line for the status bar.
///
/// This is the only function of the faces that changes state for the owner. Owner signatures
/// plug in here.
pub fn perform(store: &dyn Store, owner: &Owner, action: &OwnerAct, now: Ts) -> Result<String> {
    let who = owner.actor.as_str();
    match action {
        OwnerAct::Approve {
            gate,
            option,
            reason,
            sha,
        } => {
            let d = ops::Decision {
                option: option.clone(),
                reason: reason.clone(),
                sha: sha.clone(),
                ..ops::Decision::new(GateStatus::Approved)
            };
            decide(store, (who, now), gate, d, "approved")
        }
        OwnerAct::Reject { gate, reason } => {
            let d = ops::Decision {
                reason: Some(reason.clone()),
                ..ops::Decision::new(GateStatus::Rejected)
            };
            decide(store, (who, now), gate, d, "rejected")
        }
        OwnerAct::Reassign { todo, to } => {
            crate::kernel::id::check_agent(to)?;
            let t = store.mutate(|s| {
                let ttl = s.config.lease.ttl;
                ops::reassign(s, who, now, ttl, todo, to)
            })?;
            Ok(format!("reassigned {} to {to} (fence {})", t.id, t.fence))
        }
        OwnerAct::Release { todo, holder } => {
            let t = store.mutate(|s| ops::release_by_owner(s, who, now, todo, holder))?;
            Ok(format!("released {}", t.id))
        }
        OwnerAct::Pause => {
            store.mutate(|s| ops::set_goal_status(s, who, now, GoalStatus::Paused, None))?;
            Ok("goal paused".into())
        }
        OwnerAct::Resume => {
            store.mutate(|s| ops::set_goal_status(s, who, now, GoalStatus::Active, None))?;
            Ok("goal resumed".into())
        }
        OwnerAct::AddTodo { title, priority } => {
            let id = store.fresh_id(Kind::Todo)?;
            // The actor is the owner, so the change is the owner's: signed, or refused (exit 7).
            let t = store.mutate(|s| {
                let new = ops::NewTodo {
                    priority: *priority,
                    ..ops::NewTodo::new(id.clone(), title.clone())
                };
                ops::add_todo(s, who, now, new)
            })?;
            Ok(format!("added {}", t.id))
        }
    }
}

/// A gate's decision, approve or reject; `done` says which in the line returned.
fn decide(
    store: &dyn Store,
    (who, now): (&str, Ts),
    gate: &str,
    d: ops::Decision,
    done: &str,
) -> Result<String> {
    let g = store.mutate(|s| ops::decide_gate(s, who, now, gate, d.clone()))?;
    Ok(format!("{done} {}", g.id))
}
