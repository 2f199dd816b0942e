//! Alerts: which committed journal lines are events the owner may hook a command to, the JSON
//! each hook receives, and the `[hooks]` table's rules (names, bounds, the sealed hash).

use std::collections::BTreeMap;

use serde_json::{Value, json};
use sha2::Digest;

use crate::kernel::authority::to_hex;
use crate::kernel::limits::{self, Checked};
use crate::kernel::model::{Event, EventDraft, Seal, Snapshot};
use crate::text::escape;

/// Every event a hook can be set for, with what fires it.
pub const EVENTS: &[(&str, &str)] = &[
    ("gate.opened", "an agent opened a gate (`gate.open`)"),
    (
        "gate.decided",
        "the owner approved, rejected or cancelled a gate",
    ),
    ("lease.expired", "doctor --fix cleared an expired lease"),
    (
        "lease.reclaimed",
        "an agent claimed a todo whose lease had expired",
    ),
    (
        "monitor.overdue",
        "a monitor is overdue (`monitor.overdue`)",
    ),
    (
        "monitor.changed",
        "a monitor's result changed (`monitor.change`)",
    ),
    ("goal.paused", "the owner paused the goal"),
    ("goal.completed", "the owner completed the goal"),
    (
        "budget.spent",
        "a spend went past the slots, tokens or cost of the window",
    ),
];

/// The most hooks `[hooks]` may hold (known events and names a newer loopx may add).
pub const HOOKS_MAX: usize = 32;
/// The most characters of a hook's event name.
pub const HOOK_NAME_MAX: usize = 64;
/// The most characters of a hook's command text.
pub const HOOK_TEXT_MAX: usize = 4_000;
/// The most bytes of a line's `data` passed to a hook; larger data is replaced by a marker.
pub const DATA_MAX: usize = 32_768;

/// True for an event name this loopx fires.
pub fn is_event(name: &str) -> bool {
    EVENTS.iter().any(|(n, _)| *n == name)
}

/// The event names, for messages.
pub fn names() -> String {
    EVENTS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The hash the seal holds for a hook: SHA-256 (hex) of its command text.
pub fn hook_hash(text: &str) -> String {
    to_hex(&sha2::Sha256::digest(text.as_bytes()))
}

/// The hooks a seal holds: those the change wrote (set, or adopted) with their text's hash, and
/// the others as the last seal held them (a hand-edited text keeps the old hash, so never runs).
pub fn hook_facts(
    snap: &Snapshot,
    prev: Option<&Seal>,
    written: &[&str],
) -> BTreeMap<String, String> {
    let plain = |id: &String| !id.is_empty() && !id.contains(char::is_whitespace);
    let mut out = BTreeMap::new();
    for (event, text) in snap.config.hooks.iter().filter(|(e, _)| plain(e)) {
        let hash = if written.contains(&event.as_str()) {
            Some(hook_hash(text))
        } else {
            prev.and_then(|p| p.hooks.get(event)).cloned()
        };
        if let Some(h) = hash {
            out.insert(event.clone(), h);
        }
    }
    out
}

/// The command text of the hook for `event` when the owner's seal holds it as it is now; `None`
/// for a hook that is missing, hand-edited or unsealed (it never runs).
pub fn sealed_hook<'a>(snap: &'a Snapshot, event: &str) -> Option<&'a str> {
    let text = snap.config.hooks.get(event)?;
    let sealed = snap.seal.as_ref()?.hooks.get(event)?;
    (*sealed == hook_hash(text)).then_some(text.as_str())
}

/// The note for a hook the seal does not hold as it is: its text, so the owner can judge it.
pub fn unsealed_note(event: &str, text: &str) -> String {
    format!(
        "loopx.toml's hook for `{}` (`{}`) is not the one the owner sealed: it never runs until the owner runs `loopx hook set` or `loopx owner seal --adopt`",
        escape(event),
        escape(text)
    )
}

/// A note for each hook in `loopx.toml` where there is no valid seal: `owner seal --adopt` then
/// seals every one as it is, so the owner reads their texts first (and in the adopt's answer).
pub fn adopt_notes(snap: &Snapshot) -> Vec<String> {
    snap.config
        .hooks
        .iter()
        .map(|(event, text)| {
            format!(
                "loopx.toml's hook for `{}` runs `{}`: no seal vouches for it, and `loopx owner seal --adopt` seals it as it is",
                escape(event),
                escape(text)
            )
        })
        .collect()
}

/// One event to fire: its name and the JSON its hook receives on stdin.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// The event name (`gate.opened`).
    pub event: &'static str,
    /// The JSON the hook receives.
    pub payload: Value,
}

/// The event a committed journal line is, if any. `hook.fail` and every other line are none.
pub fn event_of(e: &Event) -> Option<&'static str> {
    let listed = |k: &str| {
        e.data.get(k).is_some_and(|v| match v {
            Value::Array(a) => !a.is_empty(),
            Value::Null => false,
            _ => true,
        })
    };
    Some(match e.action.as_str() {
        "gate.open" => "gate.opened",
        "gate.approve" | "gate.reject" | "gate.cancel" => "gate.decided",
        "lease.expire" => "lease.expired",
        "todo.claim" if listed("reclaimed_from") => "lease.reclaimed",
        "monitor.overdue" => "monitor.overdue",
        "monitor.change" => "monitor.changed",
        "goal.pause" => "goal.paused",
        "goal.complete" => "goal.completed",
        "quota.spend" if listed("over_limit") => "budget.spent",
        _ => return None,
    })
}

/// The variable a hook's command runs with: the event's name. A change committed where it is
/// set is a hook's doing: its lines say so ([`BY_HOOK`]) and fire no hook, so a hook that causes
/// its own event cannot loop.
pub const EVENT_VAR: &str = "LOOPX_EVENT";

/// The key of a journal line's `data` that names the hook whose command committed the line.
pub const BY_HOOK: &str = "by_hook";

/// Marks each drafted line as a hook's doing: `data.by_hook` is the hook's event (`other` for a
/// name loopx does not fire, so the mark stays bounded).
pub fn mark_by_hook(drafts: &mut [EventDraft], hook: &str) {
    let name = if is_event(hook) { hook } else { "other" };
    for d in drafts {
        if let Value::Object(m) = &mut d.data {
            m.insert(BY_HOOK.into(), Value::String(name.into()));
        }
    }
}

/// True for a line a hook's command committed: it fires no hook.
pub fn by_hook(e: &Event) -> bool {
    e.data.get(BY_HOOK).is_some()
}

/// The alerts of committed lines of goal `goal`, in journal order; a line a hook's command
/// committed is none.
pub fn alerts(goal: &str, events: &[Event]) -> Vec<Alert> {
    events
        .iter()
        .filter(|e| !by_hook(e))
        .filter_map(|e| {
            let name = event_of(e)?;
            Some(Alert {
                event: name,
                payload: payload(name, goal, e),
            })
        })
        .collect()
}

/// The JSON a hook receives: the event's name, the goal, and the journal line's fields (no
/// signature, no file list). `data` larger than [`DATA_MAX`] is replaced by a marker.
pub fn payload(name: &str, goal: &str, e: &Event) -> Value {
    let size = serde_json::to_string(&e.data).map_or(usize::MAX, |s| s.len());
    let data = if size > DATA_MAX {
        json!({"truncated": true, "bytes": size})
    } else {
        e.data.clone()
    };
    json!({
        "event": name,
        "goal": goal,
        "seq": e.seq,
        "at": e.at,
        "actor": e.actor,
        "action": e.action,
        "target": e.target,
        "data": data,
    })
}

/// Checks `[hooks]`: how many, each name and each command text (no control character: the owner
/// reads the text the shell runs).
pub fn check_hooks(hooks: &BTreeMap<String, String>) -> Checked {
    limits::count("hooks", hooks.len(), HOOKS_MAX)?;
    for (name, text) in hooks {
        limits::required_text("hooks", name, HOOK_NAME_MAX)?;
        limits::required_text(&format!("hooks.{name}"), text, HOOK_TEXT_MAX)?;
        limits::plain_command(&format!("hooks.{name}"), text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::action::Action;
    use crate::kernel::time::Ts;

    fn ev(action: &str, data: Value) -> Event {
        Event {
            seq: 7,
            at: Ts(1_800_000_000_000),
            actor: "agent-a".into(),
            action: Action::parse(action),
            target: "g-aaaaaa".into(),
            data,
            prev: "0".repeat(64),
            tx: Some(7),
            files: None,
            sig: Some("ab".into()),
        }
    }

    #[test]
    fn journal_actions_map_to_events() {
        let cases = [
            ("gate.open", json!({}), Some("gate.opened")),
            ("gate.approve", json!({}), Some("gate.decided")),
            ("gate.reject", json!({}), Some("gate.decided")),
            ("gate.cancel", json!({}), Some("gate.decided")),
            ("lease.expire", json!({}), Some("lease.expired")),
            ("todo.claim", json!({"reclaimed_from": null}), None),
            (
                "todo.claim",
                json!({"reclaimed_from": {"holder": "b"}}),
                Some("lease.reclaimed"),
            ),
            ("monitor.overdue", json!({}), Some("monitor.overdue")),
            ("monitor.change", json!({}), Some("monitor.changed")),
            ("goal.pause", json!({}), Some("goal.paused")),
            ("goal.resume", json!({}), None),
            ("goal.complete", json!({}), Some("goal.completed")),
            ("quota.spend", json!({"slots": 1}), None),
            ("quota.spend", json!({"over_limit": []}), None),
            (
                "quota.spend",
                json!({"over_limit": ["tokens"]}),
                Some("budget.spent"),
            ),
            ("hook.fail", json!({"event": "gate.opened"}), None),
            ("todo.add", json!({}), None),
        ];
        for (action, data, want) in cases {
            assert_eq!(event_of(&ev(action, data.clone())), want, "{action} {data}");
            if let Some(w) = want {
                assert!(is_event(w), "{w} is not listed");
            }
        }
    }

    #[test]
    fn the_payload_has_the_line_but_not_its_signature_and_is_bounded() {
        let a = alerts("goal-x", &[ev("gate.open", json!({"question": "ship?"}))]);
        assert_eq!(a.len(), 1);
        let p = &a[0].payload;
        assert_eq!(p["event"], "gate.opened");
        assert_eq!(p["goal"], "goal-x");
        assert_eq!(p["seq"], 7);
        assert_eq!(p["action"], "gate.open");
        assert_eq!(p["data"]["question"], "ship?");
        assert!(p.get("sig").is_none() && p.get("prev").is_none());
        let big = ev("gate.open", json!({"question": "x".repeat(DATA_MAX + 1)}));
        let p = payload("gate.opened", "goal-x", &big);
        assert_eq!(p["data"]["truncated"], true);
        assert!(p.to_string().len() < 1_000);
    }

    #[test]
    fn hooks_read_quoted_or_dotted_and_are_bounded() {
        #[derive(serde::Deserialize)]
        struct H {
            #[serde(deserialize_with = "crate::kernel::model::de_hooks")]
            hooks: BTreeMap<String, String>,
        }
        let h: H = toml::from_str(
            "[hooks]\n\"gate.opened\" = \"a\"\ngoal.paused = \"b\"\n[hooks.lease]\nexpired = \"c\"\n",
        )
        .unwrap();
        let keys: Vec<&str> = h.hooks.keys().map(String::as_str).collect();
        assert_eq!(keys, ["gate.opened", "goal.paused", "lease.expired"]);
        assert!(toml::from_str::<H>("[hooks]\n\"gate.opened\" = 3\n").is_err());
        assert!(toml::from_str::<H>("[hooks.a.b]\nc = \"x\"\n").is_err());
        assert_eq!(check_hooks(&h.hooks), Ok(()));
        let mut long = h.hooks.clone();
        long.insert("gate.decided".into(), "x".repeat(HOOK_TEXT_MAX + 1));
        assert!(check_hooks(&long).is_err());
        let mut empty = h.hooks;
        empty.insert("gate.decided".into(), " ".into());
        assert!(check_hooks(&empty).is_err());
    }

    #[test]
    fn a_line_a_hook_committed_fires_nothing() {
        let mut drafts = vec![EventDraft {
            at: Ts(0),
            actor: "a".into(),
            action: Action::parse("gate.open"),
            target: "g-aaaaaa".into(),
            data: json!({"question": "again?"}),
        }];
        mark_by_hook(&mut drafts, "gate.opened");
        assert_eq!(drafts[0].data[BY_HOOK], "gate.opened");
        let line = ev("gate.open", drafts[0].data.clone());
        assert!(by_hook(&line));
        assert!(alerts("g", &[line]).is_empty());
        assert_eq!(alerts("g", &[ev("gate.open", json!({}))]).len(), 1);
        mark_by_hook(&mut drafts, &"x".repeat(10_000));
        assert_eq!(drafts[0].data[BY_HOOK], "other");
    }

    #[test]
    fn the_hash_is_sha256_of_the_text() {
        assert_eq!(
            hook_hash(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
