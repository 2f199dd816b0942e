//! File reservations on leases through the real binary: `--paths` on claim and add, overlap
//! refused with the holder named, a bare claim that picks other work, expiry, bad globs.

mod common;

use common::*;

#[test]
fn a_claim_reserves_its_paths_and_an_overlapping_claim_is_refused() {
    let p = Project::new("res-overlap");
    let a = p.add("store work", &[]);
    let b = p.add("more store work", &[]);
    let v = p.ok_as(
        "agent-a",
        &[
            "todo",
            "claim",
            &a,
            "--paths",
            "./src/store/",
            "--paths",
            "docs/*.md",
        ],
    );
    assert_eq!(
        v["todo"]["lease"]["paths"],
        serde_json::json!(["src/store", "docs/*.md"])
    );
    assert_eq!(p.show(&a)["lease"]["paths"][0], "src/store");
    let toml = std::fs::read_to_string(p.lx(&format!("todos/{a}.toml"))).unwrap();
    assert!(toml.contains("paths = ["), "{toml}");

    let e = p.fails_as(
        "agent-b",
        &["todo", "claim", &b, "--paths", "src/**/pg/*.rs"],
        "lease_conflict",
    );
    let r = &e["error"]["details"]["reasons"][0];
    assert_eq!(r["kind"], "reserved");
    assert_eq!(r["holder"], "agent-a");
    assert_eq!(r["todo"], a.as_str());
    assert_eq!(
        r["overlap"][0],
        serde_json::json!(["src/**/pg/*.rs", "src/store"])
    );
    assert!(
        p.show(&b)["lease"].is_null(),
        "the refused claim left a lease"
    );

    // Disjoint globs are fine; the holder's own renewal does not conflict with itself.
    p.ok_as(
        "agent-b",
        &["todo", "claim", &b, "--paths", "src/kernel/**"],
    );
    p.ok_as("agent-a", &["todo", "claim", &a, "--paths", "src/store/**"]);
    // The text answer names the reservation.
    let r = p.run_as("agent-a", &["todo", "claim", &a]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("reserves: src/store/**"), "{}", r.stdout);
}

#[test]
fn a_bare_claim_skips_reserved_work_and_says_so_when_nothing_else_is_ready() {
    let p = Project::new("res-bare");
    let held = p.add("held", &["--priority", "P0"]);
    p.ok_as(
        "agent-a",
        &["todo", "claim", &held, "--paths", "src/store/**"],
    );
    let clash = p.add("clash", &["--priority", "P0", "--paths", "src/store/fs.rs"]);
    assert_eq!(p.show(&clash)["paths"][0], "src/store/fs.rs");
    let other = p.add("other", &["--priority", "P3", "--paths", "src/board"]);
    // The best todo overlaps agent-a's reservation: agent-b gets the lesser one.
    let v = p.ok_as("agent-b", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], other.as_str());
    assert_eq!(v["todo"]["lease"]["paths"][0], "src/board");
    // Nothing else is ready: the refusal says why.
    let e = p.fails_as("agent-c", &["todo", "claim"], "nothing_ready");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(msg.contains("overlap another agent's reservation"), "{msg}");
    // A named claim of the clashing todo is refused with the holder named.
    let e = p.fails_as("agent-c", &["todo", "claim", &clash], "lease_conflict");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("agent-a"),
        "{e}"
    );
    // agent-a's own reservation does not keep it from its own overlapping work.
    let v = p.ok_as("agent-a", &["todo", "claim", &clash]);
    assert_eq!(v["todo"]["lease"]["paths"][0], "src/store/fs.rs");
}

#[test]
fn an_expired_lease_reserves_nothing() {
    let p = Project::new("res-expired");
    let a = p.add("a", &[]);
    let b = p.add("b", &[]);
    p.ok_as(
        "agent-a",
        &["todo", "claim", &a, "--ttl", "1s", "--paths", "src"],
    );
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    p.ok_as("agent-b", &["todo", "claim", &b, "--paths", "src/x.rs"]);
}

#[test]
fn bad_globs_are_refused_with_exit_2_naming_the_glob() {
    let p = Project::new("res-bad");
    let a = p.add("a", &[]);
    for g in [
        "../up",
        "src/../../etc",
        "/etc/passwd",
        "",
        "a\u{1b}[31mb",
        "src/\tx",
        "a**",
        "[ab]",
    ] {
        let e = p.fails_as("agent-a", &["todo", "claim", &a, "--paths", g], "usage");
        let m = e["error"]["message"].as_str().unwrap();
        assert!(m.contains("--paths"), "{g:?}: {m}");
        assert!(
            !m.contains('\u{1b}'),
            "{g:?}: a control character shown raw: {m}"
        );
        p.fails(&["todo", "add", "x", "--paths", g], "usage");
    }
    let many: Vec<String> = (0..40)
        .flat_map(|i| ["--paths".into(), format!("d{i}")])
        .collect();
    let mut args = vec!["todo", "add", "many"];
    args.extend(many.iter().map(String::as_str));
    p.fails(&args, "usage");
    assert!(p.show(&a)["lease"].is_null());
}

#[test]
fn a_hand_edited_reservation_outside_its_bounds_is_quarantined() {
    let p = Project::new("res-file");
    p.write_todo("t-aaaaaa", "paths = [\"../escape\"]\n");
    let v = p.ok(&["status"]);
    assert_eq!(
        v["quarantined"][0]["file"], ".loopx/todos/t-aaaaaa.toml",
        "{v}"
    );
    let e = p.fails_as("agent-a", &["todo", "claim", "t-aaaaaa"], "invalid_state");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("paths"),
        "{e}"
    );
}
