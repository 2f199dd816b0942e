use proptest::prelude::*;

use super::*;
use crate::kernel::Ts;
use crate::kernel::limits;

fn cmd(args: &[&str]) -> GateAction {
    GateAction::cmd(args.iter().map(|a| a.to_string()).collect()).unwrap()
}

fn approved(a: GateAction) -> Gate {
    let mut g = Gate::pending("g-aaaaaa", "Push?".into(), "agent-a", Ts(0));
    g.action = Some(a);
    g.status = GateStatus::Approved;
    g.signed = true;
    g
}

#[test]
fn digests_are_what_sha256sum_gives() {
    // printf 'echo\0hi\0' | sha256sum
    assert_eq!(
        cmd(&["echo", "hi"]).sha256,
        "f90045af254cd1f6169be8a9e3d16893572fcc2fb9370a57262fbf116da829b4"
    );
    // printf 'hello\n' | sha256sum
    let p = GateAction::payload("hello\n".into()).unwrap();
    assert_eq!(
        p.sha256,
        "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    );
}

#[test]
fn arguments_are_not_joined_ambiguously() {
    assert_ne!(cmd(&["a b"]).sha256, cmd(&["a", "b"]).sha256);
    assert_ne!(cmd(&["ab", ""]).sha256, cmd(&["a", "b"]).sha256);
}

#[test]
fn command_text_is_printable_ascii() {
    for bad in ["a\nb", "x\u{a0}y", "а", "\u{202e}x", "\t"] {
        assert!(
            GateAction::cmd(vec!["echo".into(), bad.into()]).is_err(),
            "{bad:?}"
        );
    }
    assert!(GateAction::cmd(vec![]).is_err());
    assert!(GateAction::cmd(vec!["".into()]).is_err());
    assert!(GateAction::cmd(vec!["x".repeat(limits::ARG_MAX + 1)]).is_err());
    assert!(GateAction::cmd(vec!["a".into(); limits::ARGV_MAX + 1]).is_err());
    assert!(GateAction::payload("x".repeat(PAYLOAD_MAX + 1)).is_err());
}

#[test]
fn a_payload_shows_its_hidden_characters() {
    let p = GateAction::payload("rm -rf /\u{202e}tmp\n\u{1b}[2J".into()).unwrap();
    let shown = p.shown();
    assert!(
        !shown.contains('\u{202e}') && !shown.contains('\u{1b}'),
        "{shown}"
    );
    assert_eq!(p.unusual(), 2);
}

#[test]
fn runs_only_approved_intact_unused() {
    let a = cmd(&["echo", "hi"]);
    let g = approved(a.clone());
    assert!(runnable(&g, false).is_ok());
    assert_eq!(runnable(&g, true).unwrap_err().code, Code::AlreadyUsed);
    let mut used = g.clone();
    used.used = Some(GateUse {
        at: Ts(1),
        by: "agent-a".into(),
        turn: None,
        extra: Extra::new(),
    });
    assert_eq!(runnable(&used, false).unwrap_err().code, Code::AlreadyUsed);
    let mut edited = g.clone();
    edited.action.as_mut().unwrap().argv[1] = "bye".into();
    assert_eq!(runnable(&edited, false).unwrap_err().code, Code::Denied);
    let mut pending = g.clone();
    pending.status = GateStatus::Pending;
    assert_eq!(runnable(&pending, false).unwrap_err().code, Code::NotReady);
    let mut unsigned = g.clone();
    unsigned.signed = false;
    assert_eq!(runnable(&unsigned, false).unwrap_err().code, Code::NotReady);
    let mut rejected = g.clone();
    rejected.status = GateStatus::Rejected;
    assert_eq!(runnable(&rejected, false).unwrap_err().code, Code::Denied);
    let mut none = g;
    none.action = None;
    assert_eq!(runnable(&none, false).unwrap_err().code, Code::Usage);
}

#[test]
fn approval_needs_the_digest_read() {
    let a = cmd(&["echo", "hi"]);
    let mut g = approved(a.clone());
    g.status = GateStatus::Pending;
    assert_eq!(approve_sha(&g, None).unwrap_err().code, Code::Usage);
    assert_eq!(
        approve_sha(&g, Some(&"0".repeat(64))).unwrap_err().code,
        Code::Denied
    );
    assert!(approve_sha(&g, Some(&a.sha256.to_uppercase())).is_ok());
    g.action.as_mut().unwrap().argv.push("x".into());
    assert_eq!(
        approve_sha(&g, Some(&a.sha256)).unwrap_err().code,
        Code::Denied
    );
    let plain = Gate::pending("g-bbbbbb", "Go?".into(), "agent-a", Ts(0));
    assert!(approve_sha(&plain, None).is_ok());
    assert_eq!(
        approve_sha(&plain, Some(&a.sha256)).unwrap_err().code,
        Code::Usage
    );
}

proptest! {
    /// What is shown for a command is what a POSIX shell splits back into the same arguments.
    #[test]
    fn quoting_round_trips(args in proptest::collection::vec("[ -~]{0,12}", 1..6)) {
        let line = quote(&args);
        let back = split(&line);
        prop_assert_eq!(back, args);
    }

    /// Any change to a command changes its digest.
    #[test]
    fn digest_binds_every_argument(args in proptest::collection::vec("[ -~]{0,8}", 1..5), i in 0usize..5, extra in "[ -~]{1,3}") {
        prop_assume!(!args[0].trim().is_empty());
        let a = GateAction::cmd(args.clone()).unwrap();
        let mut changed = args.clone();
        let i = i % changed.len();
        changed[i].push_str(&extra);
        let b = GateAction { argv: changed, ..a.clone() };
        prop_assert_ne!(b.digest(), a.sha256);
    }
}

/// A POSIX shell's split of a line of plain words and single-quoted strings.
fn split(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut word = false;
    let mut quoted = false;
    let mut escaped = false;
    for c in line.chars() {
        if escaped {
            cur.push(c);
            escaped = false;
            continue;
        }
        match (quoted, c) {
            (true, '\'') => quoted = false,
            (true, c) => cur.push(c),
            (false, '\'') => {
                quoted = true;
                word = true;
            }
            (false, ' ') => {
                if word {
                    out.push(std::mem::take(&mut cur));
                }
                word = false;
            }
            (false, '\\') => {
                escaped = true;
                word = true;
            }
            (false, c) => {
                cur.push(c);
                word = true;
            }
        }
    }
    if word {
        out.push(cur);
    }
    out
}
