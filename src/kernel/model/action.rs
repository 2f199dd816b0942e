//! Journal actions: one enum, written as the strings the journal has always held (`todo.claim`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::kernel::model::{GateStatus, GoalStatus};

/// Defines `Action`, its strings, and which actions only the owner may take, from one table.
macro_rules! actions {
    ($($(#[doc = $doc:literal])* $v:ident = $s:literal, owner: $owner:literal;)*) => {
        /// What a journal line records.
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum Action {
            $($(#[doc = $doc])* $v,)*
            /// An action this loopx does not know (a newer version's, or a hand edit); never a
            /// known action's string (build it with [`Action::parse`]).
            Other(String),
        }

        impl Action {
            /// Every action this loopx writes, in table order.
            pub const KNOWN: &'static [Action] = &[$(Action::$v,)*];

            /// The journal's string for this action.
            pub const fn as_str(&self) -> &str {
                match self {
                    $(Action::$v => $s,)*
                    Action::Other(s) => s.as_str(),
                }
            }

            /// The action a journal string names; an unknown string becomes `Other`.
            pub fn parse(s: &str) -> Action {
                match s {
                    $($s => Action::$v,)*
                    other => Action::Other(other.to_string()),
                }
            }

            /// True for an action only the owner may take: its line must carry a valid `sig`.
            pub const fn is_owner(&self) -> bool {
                match self {
                    $(Action::$v => $owner,)*
                    Action::Other(_) => false,
                }
            }
        }
    };
}

actions! {
    /// `start-goal`.
    GoalStart = "goal.start", owner: false;
    /// `start-goal --replace` (the old journal's last line).
    GoalReplace = "goal.replace", owner: false;
    /// `goal pause`.
    GoalPause = "goal.pause", owner: true;
    /// `goal resume`.
    GoalResume = "goal.resume", owner: true;
    /// `goal complete`.
    GoalComplete = "goal.complete", owner: true;
    /// A torn last journal line was cut before an append.
    JournalRepair = "journal.repair", owner: false;
    /// `owner init`.
    OwnerInit = "owner.init", owner: true;
    /// `owner seal`, or the board sealing new lines: the owner signs the journal's head.
    OwnerSeal = "owner.seal", owner: true;
    /// `todo add`.
    TodoAdd = "todo.add", owner: false;
    /// `todo claim`: a new lease.
    TodoClaim = "todo.claim", owner: false;
    /// `todo renew`, or a claim of a todo one holds.
    TodoRenew = "todo.renew", owner: false;
    /// `todo update` without a status change (or back to open).
    TodoUpdate = "todo.update", owner: false;
    /// `todo update --status done`.
    TodoDone = "todo.done", owner: false;
    /// `--status done` on a recurring todo.
    TodoDoneRecurring = "todo.done_recurring", owner: false;
    /// `todo update --status cancelled`.
    TodoCancel = "todo.cancel", owner: false;
    /// `--status blocked`, or a rejected gate blocking a todo.
    TodoBlock = "todo.block", owner: false;
    /// `todo update --status deferred`.
    TodoDefer = "todo.defer", owner: false;
    /// `todo release`, or the owner's release.
    TodoRelease = "todo.release", owner: false;
    /// `todo reopen`.
    TodoReopen = "todo.reopen", owner: false;
    /// `todo reassign`.
    TodoReassign = "todo.reassign", owner: true;
    /// `doctor --fix` clearing an expired lease.
    LeaseExpire = "lease.expire", owner: false;
    /// `gate open`.
    GateOpen = "gate.open", owner: false;
    /// `gate approve`.
    GateApprove = "gate.approve", owner: true;
    /// `gate reject`.
    GateReject = "gate.reject", owner: true;
    /// `gate cancel`.
    GateCancel = "gate.cancel", owner: true;
    /// `run-approved` or `turn --approved`: the one use of a gate's approved action.
    GateUse = "gate.use", owner: false;
    /// `quota set`.
    QuotaSet = "quota.set", owner: true;
    /// `quota spend-slot`.
    QuotaSpend = "quota.spend", owner: false;
    /// `monitor propose`: an agent proposes a watcher's check command.
    CheckPropose = "check.propose", owner: false;
    /// `monitor approve`: the owner approves a check's exact text (sealed as `check ID SHA256`).
    CheckApprove = "check.approve", owner: true;
    /// `monitor revoke`: the owner withdraws a check's approval.
    CheckRevoke = "check.revoke", owner: true;
    /// `monitor poll`: a check ran and its result did not change (or it failed to finish).
    MonitorCheck = "monitor.check", owner: false;
    /// `monitor poll`: a check's result changed; the todo is ready for an agent.
    MonitorChange = "monitor.change", owner: false;
    /// `monitor poll`: a monitor is overdue (once per due time).
    MonitorOverdue = "monitor.overdue", owner: false;
    /// `hook set`: the owner approves a hook's command for an event.
    HookSet = "hook.set", owner: true;
    /// `hook remove`.
    HookRemove = "hook.remove", owner: true;
    /// A hook failed (non-zero exit, timeout, or it could not start); written by loopx.
    HookFail = "hook.fail", owner: false;
    /// `agent set`: an agent declares its capabilities (`agents/ID.toml`).
    AgentSet = "agent.set", owner: false;
    /// `agent fix`: the owner fixes an agent's capabilities and slots (`[agents.ID]`, sealed).
    AgentFix = "agent.fix", owner: true;
    /// `web pair`: the owner enrolls a device to decide gates (`[devices.NAME]`, sealed).
    DeviceEnroll = "device.enroll", owner: true;
    /// `owner devices revoke`: the owner ends a device; its decisions count as pending.
    DeviceRevoke = "device.revoke", owner: true;
    /// `todo handoff`: the holder passes its lease to a named agent with a new fence.
    TodoHandoff = "todo.handoff", owner: false;
    /// `todo edit`: title, priority, body, links or dependencies (signed when the owner's).
    TodoEdit = "todo.edit", owner: false;
}

impl Action {
    /// False for `Other`: an action this loopx never writes.
    pub fn is_known(&self) -> bool {
        !matches!(self, Action::Other(_))
    }

    /// True for the `todo.*` actions.
    pub fn is_todo(&self) -> bool {
        self.as_str().starts_with("todo.")
    }

    /// The action of a gate decision (`gate.approve`, `gate.reject`, `gate.cancel`).
    pub fn gate_decision(status: GateStatus) -> Action {
        match status {
            GateStatus::Approved => Action::GateApprove,
            GateStatus::Rejected => Action::GateReject,
            GateStatus::Cancelled | GateStatus::Pending => Action::GateCancel,
        }
    }

    /// The action that sets the goal to `status`.
    pub fn goal_status(status: GoalStatus) -> Action {
        match status {
            GoalStatus::Active => Action::GoalResume,
            GoalStatus::Paused => Action::GoalPause,
            GoalStatus::Complete => Action::GoalComplete,
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Action {
    fn from(s: &str) -> Action {
        Action::parse(s)
    }
}

impl PartialEq<str> for Action {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Action {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for Action {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Action {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Action, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(Action::parse(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_action_round_trips_through_its_string_and_json() {
        for a in Action::KNOWN {
            assert!(a.is_known(), "{a}");
            assert_eq!(&Action::parse(a.as_str()), a);
            let json = serde_json::to_string(a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.as_str()));
            assert_eq!(&serde_json::from_str::<Action>(&json).unwrap(), a);
        }
        let mut names: Vec<&str> = Action::KNOWN.iter().map(Action::as_str).collect();
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            Action::KNOWN.len(),
            "two actions share a string"
        );
    }

    #[test]
    fn an_unknown_action_parses_and_is_written_back_unchanged() {
        let a: Action = serde_json::from_str("\"todo.teleport\"").unwrap();
        assert_eq!(a, Action::Other("todo.teleport".into()));
        assert!(!a.is_known() && !a.is_owner() && a.is_todo());
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"todo.teleport\"");
        assert_eq!(a, "todo.teleport");
    }

    #[test]
    fn owner_actions() {
        let owner: Vec<&str> = Action::KNOWN
            .iter()
            .filter(|a| a.is_owner())
            .map(Action::as_str)
            .collect();
        assert_eq!(
            owner,
            [
                "goal.pause",
                "goal.resume",
                "goal.complete",
                "owner.init",
                "owner.seal",
                "todo.reassign",
                "gate.approve",
                "gate.reject",
                "gate.cancel",
                "quota.set",
                "check.approve",
                "check.revoke",
                "hook.set",
                "hook.remove",
                "agent.fix",
                "device.enroll",
                "device.revoke"
            ]
        );
        let mut listed = crate::kernel::authority::OWNER_ACTIONS.to_vec();
        listed.sort();
        let mut owner = owner;
        owner.sort();
        assert_eq!(listed, owner);
    }
}
