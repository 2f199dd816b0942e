//! Owner authority: decisions signed, every owner line signed, owner.pub still the owner's,
//! and the goal, quota and gates as the owner's signed journal left them.

use super::is_regular;
use std::collections::{BTreeMap, BTreeSet};

use crate::kernel::authority::{self, OwnerPub};
use crate::kernel::ops::OWNER;
use crate::kernel::{Config, Event, Gate, GoalStatus};
use crate::kernel::{DevicePolicy, device};
use crate::store::core::doctor::{Doc, Finding, State};
use crate::store::fs::FileStore;

/// Every owner check.
pub(super) fn check(store: &FileStore, s: &State, out: &mut Vec<Finding>) {
    let pub_path = store.path("owner.pub");
    if std::fs::symlink_metadata(&pub_path).is_ok() && !is_regular(&pub_path) {
        return;
    }
    let key = match store.owner_pub() {
        Ok(k) => k,
        Err(e) => {
            out.push(Finding::from_error(&e, ".loopx/owner.pub"));
            return;
        }
    };
    check_key_is_yours(store, key.as_ref(), out);
    // The devices that count are the sealed ones; a load applies the seal.
    let (devices, goal) = match (&key, crate::store::Store::load(store)) {
        (Some(_), Ok(snap)) => (snap.config.devices, snap.config.goal.id),
        _ => Default::default(),
    };
    let jp = store.journal_path();
    let bytes = match is_regular(&jp) {
        true => crate::store::parse::read_bytes(&jp).ok().flatten(),
        false => None,
    };
    let Some(mut bytes) = bytes else {
        for g in &s.gates {
            gate_signed(g, key.as_ref(), (&devices, &Default::default(), &goal), out);
        }
        return;
    };
    // A torn last line (a crash mid-append) was never committed, even when it parses.
    bytes.truncate(bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1));
    super::seal::check(store, key.as_ref(), &bytes, out);
    let last = journal_lines(&String::from_utf8_lossy(&bytes), key.as_ref(), &goal, out);
    for g in &s.gates {
        gate_signed(g, key.as_ref(), (&devices, &last.revoked, &goal), out);
    }
    if let Some(c) = &s.config {
        config_as_signed(&c.value, &last, out);
    }
    for (n, id) in &last.opened {
        if !s.gates.iter().any(|g| g.value.id == *id) {
            out.push(Finding::error(
                format!(".loopx/gates/{id}.toml"),
                None,
                format!("gate {id} was opened (journal.jsonl:{n}) but its file is gone: a deleted gate unblocks its todos"),
            ));
        }
    }
}

/// Where the owner's secret is here, owner.pub must be that key.
fn check_key_is_yours(store: &FileStore, key: Option<&OwnerPub>, out: &mut Vec<Finding>) {
    if let (Ok(Some(secret)), Some(k)) = (crate::store::owner::load(&store.env().key), key)
        && secret.public() != *k
    {
        out.push(Finding::error(
            ".loopx/owner.pub",
            None,
            format!(
                "owner.pub holds {}, not your key {}: it was replaced, and decisions signed with it are not yours; \
                 restore it with `loopx owner init --force` and re-decide the gates",
                k.fingerprint(),
                secret.public().fingerprint()
            ),
        ));
    }
}

/// A decided gate must be signed by the owner, or by a device the seal enrolls; one decided by
/// a device the owner revoked counts as pending, which is no tampering.
fn gate_signed(
    g: &Doc<Gate>,
    key: Option<&OwnerPub>,
    (devices, revoked, goal): (&BTreeMap<String, DevicePolicy>, &BTreeSet<String>, &str),
    out: &mut Vec<Finding>,
) {
    let g_ = &g.value;
    if authority::gate_signed(g_, key) || key.is_some() && device::gate_signed(g_, devices, goal) {
        return;
    }
    let by = g_.decided_by.as_deref().and_then(device::of_actor);
    if let Some(name) = by.filter(|n| revoked.contains(*n) && !devices.contains_key(*n)) {
        out.push(Finding::warning(
            g.file(),
            None,
            format!(
                "{} was {} on device {name}, which the owner revoked: it counts as pending until the owner decides it",
                g_.id,
                g_.status.as_str()
            ),
        ));
        return;
    }
    let why = if key.is_none() {
        "there is no owner.pub to prove it"
    } else if g_
        .decided_by
        .as_deref()
        .and_then(device::of_actor)
        .is_some()
    {
        "its device is not enrolled (revoked?) or its signature does not verify"
    } else if g_.signature.is_none() {
        "it has no signature"
    } else {
        "its signature does not verify"
    };
    out.push(Finding::error(
        g.file(),
        None,
        format!(
            "tampered: {} says {} but {why}; it counts as pending until the owner decides it",
            g_.id,
            g_.status.as_str()
        ),
    ));
}

/// What the owner's signed lines last said, with their line numbers.
#[derive(Default)]
struct LastSigned {
    goal: Option<(usize, GoalStatus)>,
    quota: Option<(usize, serde_json::Value)>,
    opened: Vec<(usize, String)>,
    /// The owner adopted the files as they were (`owner seal --adopt`): from then on the seal,
    /// which doctor checks on its own, says what the goal and quota must be.
    adopted: bool,
    /// Devices the owner's signed lines revoked.
    revoked: BTreeSet<String>,
}

/// Every line that is an owner action, or says its actor is `owner`, must carry a valid signature:
/// the owner's, or for a gate decision, that of a device the owner's lines enrolled before it.
fn journal_lines(
    text: &str,
    key: Option<&OwnerPub>,
    goal: &str,
    out: &mut Vec<Finding>,
) -> LastSigned {
    let mut last = LastSigned::default();
    let mut devices = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let Ok(ev) = serde_json::from_str::<Event>(line) else {
            continue;
        };
        let n = i + 1;
        if device::of_actor(&ev.actor).is_some() && device::line_signed(&ev, &devices, goal) {
            continue;
        }
        if !authority::OWNER_ACTIONS.contains(&ev.action.as_str()) && ev.actor != OWNER {
            if ev.action == "gate.open" {
                last.opened.push((n, ev.target.clone()));
            }
            continue;
        }
        if !authority::event_signed(&ev, key) {
            let what =
                if ev.actor == OWNER && !authority::OWNER_ACTIONS.contains(&ev.action.as_str()) {
                    "a line attributed to the owner"
                } else {
                    "an owner action"
                };
            out.push(Finding::error(
                ".loopx/journal.jsonl",
                Some(n),
                format!(
                    "{} on {} is {what} without a valid owner signature",
                    ev.action, ev.target
                ),
            ));
            continue;
        }
        last.take(n, &ev, &mut devices);
    }
    last
}

impl LastSigned {
    /// What the owner's signed line `n` says, kept; the devices it enrolls or revokes go in
    /// `devices` (device name to key), which later device-signed lines are checked against.
    fn take(&mut self, n: usize, ev: &Event, devices: &mut BTreeMap<String, String>) {
        match ev.action.as_str() {
            "goal.pause" => self.goal = Some((n, GoalStatus::Paused)),
            "goal.resume" => self.goal = Some((n, GoalStatus::Active)),
            "goal.complete" => self.goal = Some((n, GoalStatus::Complete)),
            "quota.set" => self.quota = Some((n, ev.data.clone())),
            "device.enroll" => {
                let k = ev.data.get("key").and_then(|k| k.as_str()).unwrap_or("");
                devices.insert(ev.target.clone(), k.to_string());
            }
            "device.revoke" => {
                devices.remove(&ev.target);
                self.revoked.insert(ev.target.clone());
            }
            "gate.open" => self.opened.push((n, ev.target.clone())),
            "owner.seal" if ev.data.get("adopt") == Some(&serde_json::json!(true)) => {
                self.goal = None;
                self.quota = None;
                self.adopted = true;
            }
            _ => {}
        }
    }
}

fn goal_word(s: GoalStatus) -> &'static str {
    match s {
        GoalStatus::Active => "active",
        GoalStatus::Paused => "paused",
        GoalStatus::Complete => "complete",
    }
}

/// The goal's status and `[quota]` must be what the owner's last signed lines set.
fn config_as_signed(cfg: &Config, last: &LastSigned, out: &mut Vec<Finding>) {
    let (line, want) = last
        .goal
        .map_or((None, GoalStatus::Active), |(n, s)| (Some(n), s));
    if cfg.goal.status != want && (line.is_some() || !last.adopted) {
        out.push(Finding::error(
            ".loopx/loopx.toml",
            None,
            format!(
                "the goal is {} here, but the owner's last signed decision{} left it {}: it was edited by hand",
                goal_word(cfg.goal.status),
                line.map(|n| format!(" (journal.jsonl:{n})")).unwrap_or_default(),
                goal_word(want)
            ),
        ));
    }
    if let Some((n, data)) = &last.quota {
        let mut now = serde_json::json!({"slots": cfg.quota.slots, "window": cfg.quota.window, "min_interval": cfg.quota.min_interval});
        // Budgets are compared where the owner's line names them (a line before budgets does not).
        if data.get("tokens").is_some() || data.get("cost_usd").is_some() {
            now["tokens"] = serde_json::json!(cfg.quota.tokens);
            now["cost_usd"] = serde_json::json!(cfg.quota.cost_usd);
        }
        // The breaker too, where the owner's line names it.
        if data.get("breaker").is_some() {
            now["breaker"] = serde_json::json!(cfg.breaker.turns());
        }
        if now != *data {
            out.push(Finding::error(
                ".loopx/loopx.toml",
                None,
                format!("[quota] is {now} here, but the owner set {data} (journal.jsonl:{n}): it was edited by hand"),
            ));
        }
    }
}
