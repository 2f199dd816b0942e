//! Unit tests of device decisions: the signed bytes, the kernel's checks, and the seal's rule.

use std::collections::BTreeMap;

use ed25519_dalek::{Signer, SigningKey};

use super::*;
use crate::kernel::authority::to_hex;
use crate::kernel::model::{Config, Gate, GateStatus, Snapshot};
use crate::kernel::ops::{self, DeviceDecision};
use crate::kernel::seal::{self, Seal};
use crate::kernel::{Code, Ts};

const NOW: Ts = Ts(1_800_000_000_000);

fn phone() -> SigningKey {
    SigningKey::from_bytes(&[9u8; 32])
}

fn policy(k: &SigningKey) -> DevicePolicy {
    DevicePolicy {
        key: to_hex(k.verifying_key().as_bytes()),
        enrolled_at: NOW,
        label: None,
        extra: Default::default(),
    }
}

/// A project whose seal enrolls `phone` and holds gate g-aaaaaa pending.
fn project() -> (Snapshot, Seal) {
    let mut snap = Snapshot::new(Config::new("goal", "ship", NOW));
    let mut g = Gate::pending("g-aaaaaa", "Deploy?".into(), "agent-a", NOW);
    g.options = vec!["now".into(), "later".into()];
    snap.gates.insert(g.id.clone(), g);
    let mut b = Gate::pending("g-bbbbbb", "Deploy?".into(), "agent-a", NOW);
    b.options = vec!["now".into(), "later".into()];
    snap.gates.insert(b.id.clone(), b);
    snap.config.devices.insert("phone".into(), policy(&phone()));
    let mut s = Seal::of(&snap, None, None, &[], &[]);
    s.devices
        .insert("phone".into(), to_hex(phone().verifying_key().as_bytes()));
    (snap, s)
}

fn signed(snap: &Snapshot, gate: &str, k: &SigningKey, at: i64) -> DeviceDecision {
    let digest = gate_digest(&snap.gates[gate]);
    let d = Decided {
        goal: &snap.config.goal.id,
        gate,
        digest: &digest,
        status: GateStatus::Approved,
        option: "now",
        reason: "",
        at_ms: at,
        device: "phone",
    };
    DeviceDecision {
        device: "phone".into(),
        gate: gate.into(),
        status: GateStatus::Approved,
        option: Some("now".into()),
        reason: None,
        digest: digest.clone(),
        at_ms: at,
        signature: to_hex(&k.sign(&d.message()).to_bytes()),
    }
}

/// The snapshot after `d`, loaded again: the gate's `signed` as a load computes it, then the seal.
fn decided_and_loaded(snap: &Snapshot, seal: &Seal, d: &DeviceDecision) -> (Snapshot, Vec<String>) {
    let (c, _) = ops::decide_by_device(snap, NOW, d).expect("decided");
    reload(&snap.after(&c.writes), seal)
}

fn reload(after: &Snapshot, seal: &Seal) -> (Snapshot, Vec<String>) {
    let mut s = after.clone();
    for g in s.gates.values_mut() {
        g.signed = g.status == GateStatus::Pending
            || gate_signed(g, &after.config.devices, &after.config.goal.id);
    }
    let notes = seal::apply(&mut s, &mut seal.clone());
    (s, notes)
}

#[test]
fn the_signed_bytes_are_length_prefixed_fields() {
    assert_eq!(fields(&["ab", ""]), b"\0\0\0\x02ab\0\0\0\0");
    // The same vector the web page's digest must give (tests/web_browser.rs checks it there).
    let g = Gate::pending("g-aaaaaa", "Ship? <b>now</b> ✓".into(), "a", Ts(0));
    assert_eq!(gate_digest(&g).len(), 64);
    let mut h = g.clone();
    h.question.push(' ');
    assert_ne!(gate_digest(&g), gate_digest(&h));
}

#[test]
fn an_enrolled_devices_decision_counts() {
    let (snap, seal) = project();
    let d = signed(&snap, "g-aaaaaa", &phone(), NOW.0);
    let (after, notes) = decided_and_loaded(&snap, &seal, &d);
    let g = &after.gates["g-aaaaaa"];
    assert_eq!(g.effective_status(), GateStatus::Approved, "{notes:?}");
    assert_eq!(g.decided_by.as_deref(), Some("device:phone"));
    assert!(!g.global);
}

#[test]
fn replays_and_forgeries_are_refused() {
    let (snap, _) = project();
    let d = signed(&snap, "g-aaaaaa", &phone(), NOW.0);
    // The same decision twice: the gate is decided.
    let (c, _) = ops::decide_by_device(&snap, NOW, &d).unwrap();
    let e = ops::decide_by_device(&snap.after(&c.writes), NOW, &d).unwrap_err();
    assert_eq!(e.code, Code::AlreadyDecided);
    // Signed for another gate with the same question: its digest names the gate, and with the
    // other gate's digest the signature does not verify.
    let other = DeviceDecision {
        gate: "g-bbbbbb".into(),
        ..d.clone()
    };
    assert_eq!(
        ops::decide_by_device(&snap, NOW, &other).unwrap_err().code,
        Code::Changed
    );
    let other = DeviceDecision {
        digest: gate_digest(&snap.gates["g-bbbbbb"]),
        ..other
    };
    assert_eq!(
        ops::decide_by_device(&snap, NOW, &other).unwrap_err().code,
        Code::Denied
    );
    // The question changed after signing.
    let mut edited = snap.clone();
    edited.gates.get_mut("g-aaaaaa").unwrap().question = "Delete prod?".into();
    assert_eq!(
        ops::decide_by_device(&edited, NOW, &d).unwrap_err().code,
        Code::Changed
    );
    // Another key, and a device not enrolled.
    let stranger = signed(
        &snap,
        "g-aaaaaa",
        &SigningKey::from_bytes(&[3u8; 32]),
        NOW.0,
    );
    assert_eq!(
        ops::decide_by_device(&snap, NOW, &stranger)
            .unwrap_err()
            .code,
        Code::Denied
    );
    let unknown = DeviceDecision {
        device: "tablet".into(),
        ..d.clone()
    };
    assert_eq!(
        ops::decide_by_device(&snap, NOW, &unknown)
            .unwrap_err()
            .code,
        Code::Denied
    );
    // Signed an hour ago.
    let old = signed(&snap, "g-aaaaaa", &phone(), NOW.0 - 3_600_000);
    assert_eq!(
        ops::decide_by_device(&snap, NOW, &old).unwrap_err().code,
        Code::Denied
    );
}

#[test]
fn a_revoked_or_hand_added_device_decides_nothing() {
    let (snap, seal) = project();
    let d = signed(&snap, "g-aaaaaa", &phone(), NOW.0);
    let (c, _) = ops::decide_by_device(&snap, NOW, &d).unwrap();
    let after = snap.after(&c.writes);
    // Revoked: the seal no longer holds the device, whatever loopx.toml says.
    let mut revoked = seal.clone();
    revoked.devices.clear();
    let (s, notes) = reload(&after, &revoked);
    let g = &s.gates["g-aaaaaa"];
    assert_eq!(g.effective_status(), GateStatus::Pending, "{notes:?}");
    assert!(!s.config.devices.contains_key("phone"));
    // Sealed after the decision, then revoked: still pending.
    let mut sealed = Seal::of(&reload(&after, &seal).0, None, Some(&seal), &[], &[]);
    sealed.devices.clear();
    let (s, _) = reload(&after, &sealed);
    assert_eq!(s.gates["g-aaaaaa"].effective_status(), GateStatus::Pending);
    // Unsealed (no valid seal): no device counts.
    let mut s = after.clone();
    for g in s.gates.values_mut() {
        g.signed = g.status == GateStatus::Pending
            || gate_signed(g, &after.config.devices, &after.config.goal.id);
    }
    seal::unsealed(&mut s, "is missing");
    assert_eq!(s.gates["g-aaaaaa"].effective_status(), GateStatus::Pending);
}

#[test]
fn a_decided_gate_edited_after_the_decision_fails_closed() {
    let (snap, seal) = project();
    let d = signed(&snap, "g-aaaaaa", &phone(), NOW.0);
    let (c, _) = ops::decide_by_device(&snap, NOW, &d).unwrap();
    let mut after = snap.after(&c.writes);
    after.gates.get_mut("g-aaaaaa").unwrap().question = "Delete prod?".into();
    let (s, _) = reload(&after, &seal);
    let g = &s.gates["g-aaaaaa"];
    assert_eq!(g.effective_status(), GateStatus::Pending);
    assert!(g.global, "an edited sealed gate blocks every todo");
}

#[test]
fn a_forged_device_decision_on_a_gate_opened_after_the_seal_counts_as_pending() {
    let (mut snap, seal) = project();
    let mut g = Gate::pending("g-cccccc", "New?".into(), "agent-a", NOW);
    g.status = GateStatus::Approved;
    g.decided_by = Some("device:phone".into());
    g.decided_at = Some(NOW);
    g.signature = Some("00".repeat(64));
    snap.gates.insert(g.id.clone(), g);
    let (s, _) = reload(&snap, &seal);
    assert_eq!(s.gates["g-cccccc"].effective_status(), GateStatus::Pending);
}

#[test]
fn names_and_keys_are_checked() {
    assert!(check_name("phone-2").is_ok());
    for bad in ["", "Phone", "-x", "a:b", &"x".repeat(33), "ph one"] {
        assert!(check_name(bad).is_err(), "{bad}");
    }
    assert!(DeviceKey::parse("zz").is_err());
    let mut devices = BTreeMap::new();
    devices.insert("phone".to_string(), policy(&phone()));
    let g = Gate::pending("g-aaaaaa", "q".into(), "a", NOW);
    assert!(
        !gate_signed(&g, &devices, "goal"),
        "a pending gate holds no device decision"
    );
}

#[test]
fn a_decision_copied_into_another_project_does_not_verify_there() {
    let (snap, _) = project();
    let d = signed(&snap, "g-aaaaaa", &phone(), NOW.0);
    let (c, g) = ops::decide_by_device(&snap, NOW, &d).unwrap();
    let after = snap.after(&c.writes);
    let devices = &after.config.devices;
    assert!(gate_signed(&g, devices, &after.config.goal.id));
    // The same key enrolled in another project (another goal): the copied gate file is not its.
    assert!(!gate_signed(&g, devices, "goal-other"));
}
