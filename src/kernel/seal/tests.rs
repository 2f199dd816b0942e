//! Unit tests of the seal: its text, its signature, when the board seals.

use super::*;
use crate::kernel::authority::OwnerPub;
use ed25519_dalek::{Signer, SigningKey};

pub(super) fn key() -> (SigningKey, OwnerPub) {
    let k = SigningKey::from_bytes(&[7u8; 32]);
    let p = OwnerPub(k.verifying_key());
    (k, p)
}

pub(super) fn seal() -> Seal {
    let mut s = Seal {
        journal: Some(Mark {
            seq: 4,
            offset: 900,
            hash: "ab".repeat(32),
        }),
        goal: Some(("goal-abc".into(), GoalStatus::Paused)),
        quota: Some((3, 86_400_000, 0)),
        budget: Some((Some(5000), Some(2.5))),
        ..Seal::default()
    };
    s.hooks.insert("gate.opened".into(), "ef".repeat(32));
    s.gates.insert(
        "g-aaaaaa".into(),
        SealedGate {
            hash: "cd".repeat(32),
            blocks: vec!["t-dddddd".into(), "t-eeeeee".into()],
        },
    );
    s.blocked.insert("t-ffffff".into(), "gate:g-aaaaaa".into());
    s.users.insert("t-bbbbbb".into());
    let c = |p| SealedCheck {
        sha256: "0f".repeat(32),
        purpose: p,
    };
    s.checks.insert("t-cccccc".into(), c(Some(Purpose::Watch)));
    s.checks.insert("t-cccccd".into(), c(Some(Purpose::Done)));
    // A line from before purposes keeps its form, so its old signature still verifies.
    s.checks.insert("t-cccccz".into(), c(None));
    s.agents.insert(
        "exec".into(),
        (Some(3), Some(vec!["a".into(), "b.c".into()])),
    );
    s.agents.insert("eval".into(), (None, None));
    s.leases.insert(
        "t-cccccc".into(),
        LeaseFact {
            fence: 2,
            holder: Some("agent-b".into()),
        },
    );
    s
}

#[test]
fn a_seal_round_trips_and_only_the_owners_verifies() {
    let (k, p) = key();
    let s = seal();
    let sig = crate::kernel::authority::to_hex(&k.sign(s.body().as_bytes()).to_bytes());
    let text = s.text(&sig);
    assert_eq!(Seal::parse(&text, &p), Ok(s));
    let edited = text.replace("goal-abc paused", "goal-abc active");
    assert!(Seal::parse(&edited, &p).is_err());
    let other = OwnerPub(SigningKey::from_bytes(&[8u8; 32]).verifying_key());
    assert!(Seal::parse(&text, &other).is_err());
    assert!(
        Seal::parse("seal 1\ngoal x active\n", &p).is_err(),
        "no signature"
    );
    assert!(Seal::parse(&format!("{text}junk line\n"), &p).is_err());
}

#[test]
fn a_check_line_names_its_purpose_and_an_old_one_keeps_its_form() {
    let (k, p) = key();
    let s = seal();
    let sig = crate::kernel::authority::to_hex(&k.sign(s.body().as_bytes()).to_bytes());
    let text = s.text(&sig);
    let h = "0f".repeat(32);
    assert!(
        text.contains(&format!("check t-cccccc {h} watch\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("check t-cccccd {h} done\n")),
        "{text}"
    );
    assert!(text.contains(&format!("check t-cccccz {h}\n")), "{text}");
    let odd = text.replace(&format!("{h} watch"), &format!("{h} run"));
    assert!(
        Seal::parse(&odd, &p)
            .unwrap_err()
            .contains("not a seal line")
    );
}

#[test]
fn the_board_seals_at_most_once_a_minute_and_only_new_lines() {
    let t = Ts(1_800_000_000_000);
    assert!(board_seal_due(5, 4, None, t, BOARD_SEAL_EVERY));
    assert!(!board_seal_due(4, 4, None, t, BOARD_SEAL_EVERY));
    assert!(!board_seal_due(
        9,
        4,
        Some(t),
        t.add(Dur(59_999)),
        BOARD_SEAL_EVERY
    ));
    assert!(board_seal_due(
        9,
        4,
        Some(t),
        t.add(BOARD_SEAL_EVERY),
        BOARD_SEAL_EVERY
    ));
}
