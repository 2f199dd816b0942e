//! Devices: the owner enrolls and revokes them; an enrolled device decides a gate with its own
//! signature over the gate as it showed it.

use serde_json::json;

use super::{Change, Write, gate};
use crate::kernel::action::Action;
use crate::kernel::device::{self, Decided, DeviceKey};
use crate::kernel::error::{Code, Error, Result};
use crate::kernel::limits;
use crate::kernel::model::*;
use crate::kernel::time::Ts;

/// Owner: enrolls device `name` with its public key (`device.enroll`, signed, sealed).
pub fn enroll(
    snap: &Snapshot,
    owner: &str,
    now: Ts,
    name: &str,
    key_hex: &str,
    label: Option<&str>,
) -> Result<(Change, DevicePolicy)> {
    device::check_name(name)?;
    let key = DeviceKey::parse(key_hex)?;
    may_enroll(snap, name, &key)?;
    let label = label.map(clip_label);
    let p = DevicePolicy {
        key: key.hex(),
        enrolled_at: now,
        label: label.clone(),
        extra: Extra::new(),
    };
    let mut cfg = snap.config.clone();
    cfg.devices.insert(name.to_string(), p.clone());
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        Action::DeviceEnroll,
        name,
        json!({"key": p.key, "fingerprint": key.fingerprint(), "label": label}),
    );
    c.writes.push(Write::Config(cfg));
    Ok((c, p))
}

/// Refuses enrolling `name` with `key` when the name or the key is enrolled already, the owner
/// revoked the key, or the project has its most devices.
fn may_enroll(snap: &Snapshot, name: &str, key: &DeviceKey) -> Result<()> {
    if snap.config.devices.contains_key(name) {
        return Err(Error::new(
            Code::KeyExists,
            format!("a device named {name} is enrolled already"),
        )
        .hint(format!(
            "choose another --name, or `loopx owner devices revoke {name}` first"
        )));
    }
    if let Some((other, _)) = snap.config.devices.iter().find(|(_, p)| p.key == key.hex()) {
        return Err(Error::new(
            Code::KeyExists,
            format!("this key is enrolled already, as {other}"),
        ));
    }
    if snap
        .seal
        .as_ref()
        .is_some_and(|s| s.revoked.contains(&key.hex()))
    {
        return Err(Error::new(
            Code::Denied,
            "the owner revoked this key: it is never enrolled again",
        )
        .hint("pair with a new key: in the phone's page, forget this browser's key"));
    }
    if snap.config.devices.len() >= device::MAX_DEVICES {
        return Err(Error::usage(format!(
            "a project enrolls at most {} devices; revoke one first",
            device::MAX_DEVICES
        )));
    }
    Ok(())
}

/// Owner: revokes device `name` (`device.revoke`, signed): its decisions count as pending.
pub fn revoke(snap: &Snapshot, owner: &str, now: Ts, name: &str) -> Result<(Change, DevicePolicy)> {
    let mut cfg = snap.config.clone();
    let Some(p) = cfg.devices.remove(name) else {
        return Err(
            Error::new(Code::NotFound, format!("no device named {name}"))
                .hint("`loopx owner devices` lists them"),
        );
    };
    let mut c = Change::by_owner();
    c.event(
        now,
        owner,
        Action::DeviceRevoke,
        name,
        json!({"key": p.key}),
    );
    c.writes.push(Write::Config(cfg));
    Ok((c, p))
}

/// A decision a device signed, as the web face received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceDecision {
    /// The device's name.
    pub device: String,
    /// The gate.
    pub gate: String,
    /// Approved or rejected.
    pub status: GateStatus,
    /// The option chosen.
    pub option: Option<String>,
    /// Why.
    pub reason: Option<String>,
    /// The digest of the gate as the device showed it ([`device::gate_digest`]).
    pub digest: String,
    /// When the device signed, in ms since the epoch.
    pub at_ms: i64,
    /// The device's signature (hex) over [`Decided::message`].
    pub signature: String,
}

/// An enrolled device decides a pending gate: its signature must verify over this gate as it is
/// now, signed within [`device::SKEW_MS`] of `now`. The gate keeps the device's signature, so
/// every later load checks it again against the owner's seal.
pub fn decide_by_device(snap: &Snapshot, now: Ts, d: &DeviceDecision) -> Result<(Change, Gate)> {
    let cur = verified(snap, now, d)?;
    let actor = device::actor(&d.device);
    let mut g = cur.clone();
    g.status = d.status;
    g.decided_by = Some(actor.clone());
    g.decided_at = Some(Ts(d.at_ms));
    g.option = d.option.clone();
    g.reason = d.reason.clone();
    g.journal_head = None;
    g.signature = Some(d.signature.clone());
    g.signed = true;
    limits::usage(limits::check_gate(&g))?;
    let mut c = Change::default();
    let mut data = json!({
        "option": g.option, "reason": g.reason, "digest": d.digest,
        "decided_at": d.at_ms, "signature": d.signature,
    });
    if let (Some(a), GateStatus::Approved) = (&g.action, d.status) {
        data["sha256"] = json!(a.sha256);
    }
    c.event(now, &actor, Action::gate_decision(d.status), &d.gate, data);
    c.writes.push(Write::Gate(g.clone()));
    super::breaker::on_decision(snap, (&actor, now), &g, &mut c);
    if d.status == GateStatus::Rejected {
        super::owner::block_rejected(snap, &actor, now, &d.gate, &g, &mut c);
    }
    Ok((c, g))
}

/// The gate `d` decides, once every check of the decision passed: the device enrolled, the
/// decision one the gate can take, the digest the gate's now, the time near `now`, the signature.
fn verified<'a>(snap: &'a Snapshot, now: Ts, d: &DeviceDecision) -> Result<&'a Gate> {
    let denied = |why: &str| Error::new(Code::Denied, why.to_string());
    let p = snap
        .config
        .devices
        .get(&d.device)
        .ok_or_else(|| denied("this device is not enrolled (or was revoked)"))?;
    if !matches!(d.status, GateStatus::Approved | GateStatus::Rejected) {
        return Err(Error::usage("a device approves or rejects"));
    }
    let cur = gate(snap, &d.gate)?;
    let sha = cur.action.as_ref().map(|a| a.sha256.clone());
    let decision = super::Decision {
        status: d.status,
        option: d.option.clone(),
        reason: d.reason.clone(),
        sha: sha.filter(|_| d.status == GateStatus::Approved),
    };
    super::owner::check_decision(cur, &d.gate, &decision)?;
    if device::gate_digest(cur) != d.digest {
        return Err(Error::new(
            Code::Changed,
            format!("gate {} changed after it was shown; look again", d.gate),
        ));
    }
    if (now.0 - d.at_ms).abs() > device::SKEW_MS {
        return Err(denied(
            "the decision was signed more than 5 minutes from now; check the phone's clock and decide again",
        ));
    }
    let signed = Decided {
        goal: &snap.config.goal.id,
        gate: &d.gate,
        digest: &d.digest,
        status: d.status,
        option: d.option.as_deref().unwrap_or(""),
        reason: d.reason.as_deref().unwrap_or(""),
        at_ms: d.at_ms,
        device: &d.device,
    };
    if !DeviceKey::parse(&p.key)?.verify(&signed.message(), &d.signature) {
        return Err(denied(
            "the signature is not this device's over this decision",
        ));
    }
    Ok(cur)
}

/// A device's own words about itself, kept short and printable for the owner's list.
fn clip_label(l: &str) -> String {
    l.chars()
        .filter(|c| !c.is_control() && !crate::text::is_unsafe(*c))
        .take(64)
        .collect::<String>()
        .trim()
        .to_string()
}
