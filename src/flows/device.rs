//! Devices: the owner's enrollment and revocation, a device's signed decision, a device's session.

use crate::kernel::device::{self, DeviceKey};
use crate::kernel::ops::{self, DeviceDecision};
use crate::kernel::{DevicePolicy, Gate, Result, Snapshot, Ts};
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
