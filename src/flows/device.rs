//! Devices: the owner's enrollment and revocation, a device's signed decision, a device's session.

use crate::kernel::device::{self, DeviceKey};
use crate::kernel::ops::{self, DeviceDecision};
use crate::kernel::{DevicePolicy, Gate, Result, Snapshot, Ts};
use crate::runtime::pairing;
pub use crate::runtime::pairing::{Pairing, State, dir as pairing_dir};
use crate::store::{Store, StoreExt};

/// The owner enrolls a device (signed with the owner's key, or refused with exit 7).
pub fn enroll(
    store: &dyn Store,
    owner: &str,
    name: &str,
    key_hex: &str,
    label: Option<&str>,
    now: Ts,
) -> Result<DevicePolicy> {
    store.mutate(|s| ops::enroll(s, owner, now, name, key_hex, label))
}

/// The owner revokes a device: from now on its decisions count as pending.
pub fn revoke(store: &dyn Store, owner: &str, name: &str, now: Ts) -> Result<DevicePolicy> {
    store.mutate(|s| ops::revoke(s, owner, now, name))
}

/// A device's signed decision, committed when the kernel verifies it on the fresh state.
pub fn decide(store: &dyn Store, d: &DeviceDecision, now: Ts) -> Result<Gate> {
    store.mutate(|s| ops::decide_by_device(s, now, d))
}

/// The devices the owner's seal enrolls (a loaded snapshot holds only those).
pub fn enrolled(snap: &Snapshot) -> Vec<(String, DevicePolicy)> {
    snap.config
        .devices
        .iter()
        .map(|(n, p)| (n.clone(), p.clone()))
        .collect()
}

/// True when `sig_hex` is enrolled device `name`'s signature over the session's challenge for
/// `origin`.
pub fn session_ok(
    snap: &Snapshot,
    name: &str,
    challenge: &str,
    origin: &str,
    sig_hex: &str,
) -> bool {
    let Some(p) = snap.config.devices.get(name) else {
        return false;
    };
    DeviceKey::parse(&p.key)
        .is_ok_and(|k| k.verify(&device::session_message(challenge, origin, name), sig_hex))
}

/// A pairing the owner started: the URL the phone opens, and the token that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// `BASE/pair#t=TOKEN`: the token rides in the fragment, which no request line carries.
    pub url: String,
    /// The pairing's token.
    pub token: String,
    /// The device's name once enrolled.
    pub name: String,
    /// When the URL stops working.
    pub expires_at: Ts,
}

/// Starts pairing a phone as `name` (default: the first free of `phone`, `phone-2`, ...) with the
/// server at `base` (default: the running `loopx web`'s), for the project of `store`.
pub fn pair_start(
    store: &dyn Store,
    dir: &std::path::Path,
    name: Option<String>,
    base: Option<String>,
    now: Ts,
) -> Result<Started> {
    use crate::kernel::Error;
    let base = match base {
        Some(u) => u,
        None => pairing::announced(dir).map(|s| s.url).ok_or_else(|| {
            Error::usage("no `loopx web` is running for this user")
                .hint("start `loopx web` first, or give the address the phone opens with --url")
        })?,
    };
    let snap = store.load()?;
    let name = name.unwrap_or_else(|| free_name(&snap.config.devices));
    device::check_name(&name)?;
    let project = store
        .local_root()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let (token, p) = pairing::start(dir, &name, &project, now)?;
    Ok(Started {
        url: format!("{}/pair#t={token}", base.trim_end_matches('/')),
        token,
        name,
        expires_at: Ts(p.expires_at),
    })
}

/// `phone`, else `phone-2`, `phone-3` ...: the first name no device has.
fn free_name(devices: &std::collections::BTreeMap<String, DevicePolicy>) -> String {
    (1..)
        .map(|n| match n {
            1 => "phone".to_string(),
            n => format!("phone-{n}"),
        })
        .find(|n| !devices.contains_key(n))
        .unwrap_or_default()
}

/// Where a started pairing stands (the phone's key and fingerprint once it sent them).
pub fn pair_poll(dir: &std::path::Path, s: &Started, now: Ts) -> Result<pairing::Pairing> {
    pairing::status(dir, &s.token, now)
}

/// The owner's answer after comparing fingerprints: yes enrolls the phone's key, signed with the
/// owner's key (exit 7 without it); no ends the pairing.
pub fn pair_answer(
    store: &dyn Store,
    owner: &str,
    dir: &std::path::Path,
    s: &Started,
    yes: bool,
    now: Ts,
) -> Result<Option<DevicePolicy>> {
    use crate::kernel::{Code, Error};
    let p = pairing::status(dir, &s.token, now)?;
    if !yes {
        pairing::finish(dir, &s.token, None)?;
        return Ok(None);
    }
    let key = match (p.state, p.key.as_deref()) {
        (pairing::State::Submitted, Some(k)) => k.to_string(),
        _ => return Err(Error::new(Code::NotReady, "the phone has not sent its key")),
    };
    let enrolled = enroll(store, owner, &s.name, &key, p.label.as_deref(), now);
    pairing::finish(
        dir,
        &s.token,
        enrolled.as_ref().ok().map(|_| s.name.as_str()),
    )?;
    enrolled.map(Some)
}
