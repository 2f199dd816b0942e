//! Unit tests of proven work: which check a done needs, what proves it, and the tier.

use super::*;
use crate::kernel::model::{Config, Status};
use crate::kernel::seal::Seal;
use crate::kernel::time::Ts;

const T0: Ts = Ts(1_800_000_000_000);

fn todo(check: Option<&str>) -> Todo {
    let (_, mut t) = crate::kernel::ops::add_todo(
        &Snapshot::new(Config::new("g", "o", T0)),
        "a",
        T0,
        crate::kernel::ops::NewTodo::new("t-aaaaaa", "t"),
    )
    .expect("add");
    t.check = check.map(|c| {
        Box::new(crate::kernel::monitor::Check {
            command: c.into(),
            proposed_by: "a".into(),
            proposed_at: T0,
            last_hash: None,
            last_run_at: None,
            last_exit: None,
            extra: Default::default(),
        })
    });
    t
}

/// A snapshot with `t`, a default check text, and a seal approving `sealed` (id, text).
fn snap(t: &Todo, default: Option<&str>, sealed: &[(&str, &str)]) -> Snapshot {
    let mut s = Snapshot::new(Config::new("g", "o", T0));
    s.config.done.check = default.map(str::to_string);
    s.todos.insert(t.id.clone(), t.clone());
    let mut seal = Seal::default();
    for (id, text) in sealed {
        let c = crate::kernel::model::SealedCheck {
            sha256: sha256_hex(text.as_bytes()),
            purpose: Some(crate::kernel::model::Purpose::Done),
        };
        seal.checks.insert(id.to_string(), c);
    }
    s.seal = Some(seal);
    s
}

fn run(sha: &str, exit: i32) -> Evidence {
    let mut e = Evidence::new(T0, "a", None, EvidenceKind::Check, "ran".into());
    e.sha256 = Some(sha.into());
    e.exit_code = Some(exit);
    e
}

#[test]
fn a_todo_needs_its_own_approved_check_else_the_sealed_default() {
    let t = todo(Some("make test"));
    let n = needed(&snap(&t, None, &[("t-aaaaaa", "make test")]), &t)
        .unwrap()
        .unwrap();
    assert_eq!((n.command.as_str(), n.default), ("make test", false));
    // Edited after approval, never approved, removed: refused.
    let e = needed(&snap(&t, None, &[("t-aaaaaa", "true")]), &t).unwrap_err();
    assert_eq!(e.code, Code::Denied);
    assert_eq!(
        needed(&snap(&t, None, &[]), &t).unwrap_err().code,
        Code::Denied
    );
    let bare = todo(None);
    let e = needed(&snap(&bare, None, &[("t-aaaaaa", "make test")]), &bare).unwrap_err();
    assert_eq!(e.code, Code::Denied);
    // No check of its own: the default counts only as sealed.
    assert_eq!(
        needed(&snap(&bare, Some("cargo test"), &[]), &bare).unwrap(),
        None
    );
    let s = snap(&bare, Some("cargo test"), &[(DEFAULT_ID, "cargo test")]);
    assert!(needed(&s, &bare).unwrap().unwrap().default);
    let s = snap(&bare, Some("true"), &[(DEFAULT_ID, "cargo test")]);
    assert_eq!(needed(&s, &bare).unwrap_err().code, Code::Denied);
    // A recurring todo's check is a watcher's; a user todo is the owner's to finish.
    let mut every = t.clone();
    every.every = Some(crate::kernel::Dur::from_hours(1));
    assert_eq!(
        needed(&snap(&every, None, &[("t-aaaaaa", "make test")]), &every).unwrap(),
        None
    );
}

#[test]
fn only_a_passing_run_of_the_exact_text_proves_it() {
    let n = Needed {
        command: "make test".into(),
        sha256: sha256_hex(b"make test"),
        default: false,
    };
    assert!(proves(&n, &[run(&n.sha256, 0)]));
    assert!(!proves(&n, &[run(&n.sha256, 1)]));
    assert!(!proves(&n, &[run(&sha256_hex(b"true"), 0)]));
    let mut timed = run(&n.sha256, 0);
    timed.timed_out = true;
    assert!(!proves(&n, &[timed]));
    let mut note = run(&n.sha256, 0);
    note.kind = EvidenceKind::Note;
    assert!(!proves(&n, &[note]));
}

#[test]
fn the_tier_says_how_the_done_was_proven_and_stale_once_head_moves() {
    let mut t = todo(None);
    t.status = Status::Done;
    assert_eq!(tier(&t, &[], false), Tier::SelfReported);
    let mut e = run("x", 0);
    e.commit = Some("abc".into());
    let checked = tier(&t, &[e.clone()], false);
    assert_eq!(
        checked,
        Tier::Checked {
            commit: Some("abc".into())
        }
    );
    assert!(!stale(&checked, Some("abc")));
    assert!(stale(&checked, Some("def")));
    assert!(!stale(&checked, None));
    // A pass under an older fence is not this done's.
    e.fence = Some(t.fence + 1);
    assert_eq!(tier(&t, &[e.clone()], false), Tier::SelfReported);
    // On a dirty tree it speaks for the commit plus files no commit holds.
    e.fence = None;
    e.files = vec!["check.sh".into()];
    let dirty = tier(&t, &[e.clone()], false);
    assert_eq!(
        dirty,
        Tier::CheckedDirty {
            commit: Some("abc".into()),
            dirty: vec!["check.sh".into()]
        }
    );
    assert!(stale(&dirty, Some("def")));
    assert_eq!(
        tier_text(&dirty, false),
        "checked on a dirty tree at abc (uncommitted: check.sh)"
    );
    // The owner's done only when the owner's signature proves it.
    t.status_by = Some("owner".into());
    assert_eq!(tier(&t, &[], true), Tier::OwnerAccepted);
    assert_eq!(tier(&t, &[e], false), dirty);
}

#[test]
fn a_commit_read_from_a_file_is_cut_on_a_character() {
    let t = Tier::Checked {
        commit: Some("abcdefghijké-not-hex".into()),
    };
    assert_eq!(tier_text(&t, false), "✓ checked at abcdefghijké");
}
