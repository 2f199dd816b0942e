//! Seal tests of budgets and hooks.

use super::tests::{key, seal};
use super::*;
use crate::kernel::alert::sealed_hook;
use ed25519_dalek::Signer;

#[test]
fn a_seal_from_before_budgets_and_hooks_still_verifies() {
    let (k, p) = key();
    let mut s = seal();
    s.budget = None;
    s.hooks.clear();
    let sig = crate::kernel::authority::to_hex(&k.sign(s.body().as_bytes()).to_bytes());
    let text = s.text(&sig);
    assert!(!text.contains("budget") && !text.contains("hook "));
    let back = Seal::parse(&text, &p).unwrap();
    assert_eq!(back.budget, None);
    // A seal from before budgets leaves a hand-set budget alone (it only lowers the limit).
    let mut snap = Snapshot::new(config_with(Some(10), None));
    let mut back = back;
    let notes = apply(&mut snap, &mut back);
    assert!(notes.iter().all(|n| !n.contains("budget")), "{notes:?}");
    assert_eq!(snap.config.quota.tokens, Some(10));
}

fn config_with(tokens: Option<u64>, cost: Option<f64>) -> crate::kernel::model::Config {
    let mut c: crate::kernel::model::Config = toml::from_str(
        "[goal]\nid = \"goal-abc\"\nobjective = \"o\"\nstatus = \"paused\"\n\
         created_at = \"2020-01-01T00:00:00Z\"\nupdated_at = \"2020-01-01T00:00:00Z\"\n\
         [quota]\nslots = 3\nwindow = \"24h\"\n",
    )
    .unwrap();
    c.quota.tokens = tokens;
    c.quota.cost_usd = cost;
    c
}

#[test]
fn a_budget_raised_or_removed_by_hand_counts_as_sealed() {
    let mut s = seal();
    for (t, c) in [
        (Some(9999), Some(2.5)),
        (None, None),
        (Some(5000), Some(99.0)),
    ] {
        let mut snap = Snapshot::new(config_with(t, c));
        let notes = apply(&mut snap, &mut s);
        assert!(notes.iter().any(|n| n.contains("budgets")), "{notes:?}");
        assert_eq!(snap.config.quota.tokens, Some(5000));
        assert_eq!(snap.config.quota.cost_usd, Some(2.5));
    }
    let mut snap = Snapshot::new(config_with(Some(5000), Some(2.5)));
    let notes = apply(&mut snap, &mut s);
    assert!(notes.iter().all(|n| !n.contains("budgets")), "{notes:?}");
}

#[test]
fn only_a_hook_whose_text_the_seal_holds_runs() {
    let text = "notify-send gate";
    let mut cfg = config_with(Some(5000), Some(2.5));
    cfg.hooks.insert("gate.opened".into(), text.into());
    cfg.hooks.insert("goal.paused".into(), "rm -rf ~".into());
    let mut snap = Snapshot::new(cfg);
    let mut s = seal();
    s.hooks
        .insert("gate.opened".into(), crate::kernel::alert::hook_hash(text));
    let notes: Vec<String> = apply(&mut snap, &mut s)
        .into_iter()
        .filter(|n| n.contains("hook"))
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("goal.paused") && notes[0].contains("never runs"));
    snap.seal = Some(s.clone());
    assert_eq!(sealed_hook(&snap, "gate.opened"), Some(text));
    assert_eq!(sealed_hook(&snap, "goal.paused"), None);
    assert_eq!(sealed_hook(&snap, "gate.decided"), None);
    // The next seal keeps the sealed hash of a hand edit, and seals what the owner wrote.
    let next = Seal::of(&snap, None, Some(&s), &[], &[]);
    assert_eq!(next.hooks.len(), 1);
    let next = Seal::of(&snap, None, Some(&s), &["goal.paused"], &[]);
    assert_eq!(next.hooks.len(), 2);
    // Without a seal nothing runs.
    snap.seal = None;
    assert_eq!(sealed_hook(&snap, "gate.opened"), None);
}
