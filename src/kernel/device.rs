//! Devices the owner enrolled: the exact bytes a device signs, and checking its signatures.
//!
//! Every signed text is a list of fields, each written as its UTF-8 length (4 bytes, big endian)
//! and its bytes, so no field's content can move text into another field. The web page builds
//! the same bytes in JavaScript (`src/web/assets/app.js`); the test vectors below pin both.

use std::collections::BTreeMap;

use ed25519_dalek::{Signature, VerifyingKey};
use sha2::Digest;

use crate::kernel::authority::{from_hex, to_hex};
use crate::kernel::error::{Error, Result};
use crate::kernel::model::{DevicePolicy, Gate, GateStatus};

/// The prefix of a device's actor name in the journal and in a gate's `decided_by`.
pub const ACTOR_PREFIX: &str = "device:";

/// How far a decision's time may be from the clock of the process that commits it.
pub const SKEW_MS: i64 = 5 * 60_000;

/// The most devices a project may enroll.
pub const MAX_DEVICES: usize = 64;

/// The actor name of device `name`.
pub fn actor(name: &str) -> String {
    format!("{ACTOR_PREFIX}{name}")
}

/// The device an actor name stands for, if it is a device's.
pub fn of_actor(actor: &str) -> Option<&str> {
    actor.strip_prefix(ACTOR_PREFIX).filter(|n| !n.is_empty())
}

/// Checks a device name: 1 to 32 of `a-z`, `0-9` and `-`, starting with a letter or digit.
pub fn check_name(name: &str) -> Result<()> {
    let ok = (1..=32).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "`{}` is not a device name: use 1 to 32 of a-z, 0-9 and -",
            crate::text::escape(name)
        ))
        .hint("for example: --name phone"))
    }
}

/// The fields `fields` as one signed text: each field's length (u32, big endian), then its bytes.
pub fn fields(fields: &[&str]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.len() + 4).sum());
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_be_bytes());
        out.extend_from_slice(f.as_bytes());
    }
    out
}

/// The digest of a gate as the owner reads it: its id, question, options, blocks, whether it
/// is global, and its action's kind and SHA-256 (SHA-256, hex).
pub fn gate_digest(g: &Gate) -> String {
    let options = g.options.len().to_string();
    let blocks = g.blocks.len().to_string();
    let mut f: Vec<&str> = vec!["loopx-gate-digest-v1", &g.id, &g.question, &options];
    f.extend(g.options.iter().map(String::as_str));
    f.push(&blocks);
    f.extend(g.blocks.iter().map(String::as_str));
    f.push(if g.global { "1" } else { "0" });
    match &g.action {
        Some(a) => f.extend([a.kind.as_str(), a.sha256.as_str()]),
        None => f.extend(["", ""]),
    }
    to_hex(&sha2::Sha256::digest(fields(&f)))
}

/// What a device signs to decide a gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decided<'a> {
    /// The project's goal id: a decision of one project's gate is none of another's.
    pub goal: &'a str,
    /// The gate.
    pub gate: &'a str,
    /// [`gate_digest`] of the gate as shown.
    pub digest: &'a str,
    /// `approved` or `rejected`.
    pub status: GateStatus,
    /// The option chosen, or "".
    pub option: &'a str,
    /// The reason, or "".
    pub reason: &'a str,
    /// When, in ms since the epoch.
    pub at_ms: i64,
    /// The device's name.
    pub device: &'a str,
}

impl Decided<'_> {
    /// The bytes signed.
    pub fn message(&self) -> Vec<u8> {
        let at = self.at_ms.to_string();
        fields(&[
            "loopx-device-decision-v1",
            self.goal,
            self.gate,
            self.digest,
            self.status.as_str(),
            self.option,
            self.reason,
            &at,
            self.device,
        ])
    }
}

/// The bytes a device signs to open a session on the web face.
pub fn session_message(challenge: &str, origin: &str, device: &str) -> Vec<u8> {
    fields(&["loopx-web-session-v1", challenge, origin, device])
}

/// A device's public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceKey(pub VerifyingKey);

impl DeviceKey {
    /// Parses 64 hex characters.
    pub fn parse(hex: &str) -> Result<DeviceKey> {
        let bytes: [u8; 32] = from_hex(hex)
            .and_then(|v| v.try_into().ok())
            .ok_or_else(|| Error::usage("a device key is 64 hex characters (32 bytes)"))?;
        VerifyingKey::from_bytes(&bytes)
            .map(DeviceKey)
            .map_err(|_| Error::usage("not a valid ed25519 public key"))
    }

    /// The key as 64 hex characters.
    pub fn hex(&self) -> String {
        to_hex(self.0.as_bytes())
    }

    /// `SHA256:` and 16 hex characters of the key's hash, as both screens show it.
    pub fn fingerprint(&self) -> String {
        let d = sha2::Sha256::digest(self.0.as_bytes());
        format!("SHA256:{}", &to_hex(&d)[..16])
    }

    /// True when `sig_hex` is this key's signature over `msg` (strict: no malleable forms).
    pub fn verify(&self, msg: &[u8], sig_hex: &str) -> bool {
        let Some(bytes) = from_hex(sig_hex).and_then(|v| <[u8; 64]>::try_from(v).ok()) else {
            return false;
        };
        self.0
            .verify_strict(msg, &Signature::from_bytes(&bytes))
            .is_ok()
    }
}

/// True when gate `g` of goal `goal` holds a decision signed by one of `devices` over the gate
/// as it is now.
pub fn gate_signed(g: &Gate, devices: &BTreeMap<String, DevicePolicy>, goal: &str) -> bool {
    let Some(name) = g.decided_by.as_deref().and_then(of_actor) else {
        return false;
    };
    let (Some(p), Some(sig), Some(at)) = (devices.get(name), &g.signature, g.decided_at) else {
        return false;
    };
    if !matches!(g.status, GateStatus::Approved | GateStatus::Rejected) || g.journal_head.is_some()
    {
        return false;
    }
    let Ok(key) = DeviceKey::parse(&p.key) else {
        return false;
    };
    let digest = gate_digest(g);
    let d = Decided {
        goal,
        gate: &g.id,
        digest: &digest,
        status: g.status,
        option: g.option.as_deref().unwrap_or(""),
        reason: g.reason.as_deref().unwrap_or(""),
        at_ms: at.0,
        device: name,
    };
    key.verify(&d.message(), sig)
}

/// True when journal line `e` of goal `goal` is a gate decision of device `NAME` (its actor
/// `device:NAME`) whose `signature` in its data verifies with the key `keys` holds for that name.
pub fn line_signed(e: &crate::kernel::Event, keys: &BTreeMap<String, String>, goal: &str) -> bool {
    let Some(name) = of_actor(&e.actor) else {
        return false;
    };
    let status = match e.action.as_str() {
        "gate.approve" => GateStatus::Approved,
        "gate.reject" => GateStatus::Rejected,
        _ => return false,
    };
    // Only the fields loopx writes: a copy of a signed line with keys added signs nothing.
    const KEYS: &[&str] = &[
        "option",
        "reason",
        "digest",
        "decided_at",
        "signature",
        "sha256",
    ];
    let known = e
        .data
        .as_object()
        .is_some_and(|m| m.keys().all(|k| KEYS.contains(&k.as_str())));
    if !known {
        return false;
    }
    let s = |k: &str| e.data.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let (Some(key), Some(at)) = (
        keys.get(name),
        e.data.get("decided_at").and_then(|v| v.as_i64()),
    ) else {
        return false;
    };
    let d = Decided {
        goal,
        gate: &e.target,
        digest: s("digest"),
        status,
        option: s("option"),
        reason: s("reason"),
        at_ms: at,
        device: name,
    };
    DeviceKey::parse(key).is_ok_and(|k| k.verify(&d.message(), s("signature")))
}

#[cfg(test)]
#[path = "device_tests.rs"]
mod tests;
