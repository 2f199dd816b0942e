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

#[test]
fn an_update_names_the_files_changed_outside_the_reservation() {
    let p = Project::new("res-outside");
    git(p.root(), &["init", "-q"]);
    std::fs::create_dir_all(p.root().join("src/store")).unwrap();
    std::fs::write(p.root().join("src/store/fs.rs"), "a").unwrap();
    std::fs::write(p.root().join("README.md"), "a").unwrap();
    git(p.root(), &["add", "."]);
    git(p.root(), &["commit", "-q", "-m", "first"]);
    let a = p.add("store work", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--paths", "src/store/**"]);
    // Inside the reservation: no warning.
    std::fs::write(p.root().join("src/store/fs.rs"), "b").unwrap();
    let v = p.ok_as("agent-a", &["todo", "update", &a]);
    assert!(v.get("warnings").is_none(), "{v}");
    let ev = p.ok_as("agent-a", &["evidence", "list", "--todo", &a]);
    assert!(ev.to_string().contains("src/store/fs.rs"), "{ev}");
    assert!(!ev.to_string().contains("outside"), "{ev}");
    // Outside it: warned in JSON, on stderr as text, and recorded in the evidence.
    std::fs::write(p.root().join("README.md"), "b").unwrap();
    std::fs::create_dir_all(p.root().join("src/kernel")).unwrap();
    std::fs::write(p.root().join("src/kernel/x.rs"), "new").unwrap();
    let v = p.ok_as("agent-a", &["todo", "update", &a]);
    let w = v["warnings"][0].as_str().expect("a warning");
    assert!(w.contains(&a) && w.contains("src/store/**"), "{w}");
    assert!(w.contains("README.md") && w.contains("1 more"), "{w}");
    let r = p.run_as("agent-a", &["todo", "update", &a]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("warning:") && r.stderr.contains("outside its reservation"),
        "{r:?}"
    );
    let ev = p.ok_as("agent-a", &["evidence", "list", "--todo", &a]);
    let last = ev["entries"]
        .as_array()
        .and_then(|e| e.first())
        .cloned()
        .unwrap();
    let out: Vec<&str> = last["outside"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(out.len(), 2, "{last}");
    assert!(
        out.contains(&"README.md") && out.iter().any(|f| f.starts_with("src/kernel")),
        "{last}"
    );
    assert!(
        last["summary"]
            .as_str()
            .unwrap()
            .contains("2 outside the reservation"),
        "{last}"
    );
    // A lease that reserves nothing is never warned.
    let b = p.add("free work", &[]);
    p.ok_as("agent-b", &["todo", "claim", &b]);
    let v = p.ok_as("agent-b", &["todo", "update", &b]);
    assert!(v.get("warnings").is_none(), "{v}");
}

#[test]
fn a_handoff_or_reassign_carries_the_reservation_and_never_makes_a_clash() {
    let p = Project::new("res-handoff");
    let wide = p.add("wide", &[]);
    let narrow = p.add("narrow", &[]);
    p.ok_as("agent-a", &["todo", "claim", &wide, "--paths", "src/**"]);
    // agent-a's own leases may overlap each other.
    p.ok_as(
        "agent-a",
        &["todo", "claim", &narrow, "--paths", "src/x.rs"],
    );
    // Handed to agent-b, src/x.rs would overlap agent-a's src/**: refused, nothing moves.
    let e = p.fails_as(
        "agent-a",
        &["todo", "handoff", &narrow, "--to", "agent-b"],
        "lease_conflict",
    );
    let r = &e["error"]["details"]["reasons"][0];
    assert_eq!(r["holder"], "agent-a", "{e}");
    assert_eq!(r["todo"], wide.as_str(), "{e}");
    assert_eq!(p.show(&narrow)["lease"]["holder"], "agent-a");
    // The owner's reassign is held to the same rule.
    p.fails(
        &["todo", "reassign", &narrow, "--to", "agent-b"],
        "lease_conflict",
    );
    // Once agent-a lets the wide one go, the hand-off moves the reservation with the lease.
    p.ok_as("agent-a", &["todo", "release", &wide]);
    p.ok_as("agent-a", &["todo", "handoff", &narrow, "--to", "agent-b"]);
    let l = &p.show(&narrow)["lease"];
    assert_eq!(l["holder"], "agent-b");
    assert_eq!(l["paths"], serde_json::json!(["src/x.rs"]), "{l}");
    // agent-b now holds src/x.rs: agent-a cannot reserve over it again.
    p.fails_as(
        "agent-a",
        &["todo", "claim", &wide, "--paths", "src/**"],
        "lease_conflict",
    );
    p.ok(&["todo", "reassign", &narrow, "--to", "agent-c"]);
    assert_eq!(p.show(&narrow)["lease"]["paths"][0], "src/x.rs");
}

#[test]
fn status_and_state_md_show_whose_files_are_reserved() {
    let p = Project::new("res-state");
    let a = p.add("store work", &[]);
    let b = p.add("board work", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--paths", "src/store/**"]);
    p.ok_as("agent-b", &["todo", "claim", &b, "--paths", "src/board/**"]);
    let v = p.ok(&["status"]);
    let claimed = v["claimed"].as_array().unwrap();
    assert!(
        claimed.iter().any(|c| c["paths"][0] == "src/store/**"),
        "{v}"
    );
    let r = p.run(&["status"]);
    assert!(r.stdout.contains("[reserves src/store/**]"), "{}", r.stdout);
    // agent-a's packet: its own globs under its lease, agent-b's as someone else's.
    let s = p.ok_as("agent-a", &["refresh-state"]);
    assert_eq!(s["leases"][0]["paths"][0], "src/store/**", "{s}");
    let md = std::fs::read_to_string(p.lx("STATE.md")).unwrap();
    assert!(md.contains("reserves: `src/store/**`"), "{md}");
    let others = md.split("## Reserved by others").nth(1).expect("a section");
    assert!(
        others.contains("agent-b") && others.contains("`src/board/**`"),
        "{md}"
    );
    assert!(
        !others.split("\n## ").next().unwrap().contains("src/store"),
        "{md}"
    );
}

#[test]
fn doctor_warns_of_two_agents_holding_overlapping_reservations() {
    let p = Project::new("res-doctor");
    let a = p.add("a", &[]);
    let b = p.add("b", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--paths", "src/**"]);
    p.ok_as("agent-b", &["todo", "claim", &b, "--paths", "docs"]);
    assert_eq!(p.ok(&["doctor"])["findings"], serde_json::json!([]));
    // A hand edit makes agent-b's reservation overlap agent-a's: no claim would have allowed it.
    let path = p.lx(&format!("todos/{b}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"docs\"", "\"src/x.rs\"")).unwrap();
    let d = p.ok(&["doctor"]);
    let f = &d["findings"][0];
    assert_eq!(f["severity"], "warning", "{d}");
    assert_eq!(f["file"], format!(".loopx/todos/{b}.toml"), "{d}");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains(&a) && m.contains("agent-a") && m.contains("src/x.rs"),
        "{m}"
    );
    assert!(f["line"].as_u64().is_some(), "{f}");
}

#[test]
fn an_update_of_a_quarantined_todo_names_its_file() {
    let p = Project::new("res-quarantine");
    let a = p.add("a", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--paths", "src"]);
    let path = p.lx(&format!("todos/{a}.toml"));
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("\"src\"", "\"src/\"")).unwrap();
    let e = p.fails_as(
        "agent-a",
        &["todo", "update", &a, "--evidence", "x"],
        "invalid_state",
    );
    let m = e["error"]["message"].as_str().unwrap();
    assert!(
        m.contains(&format!("todos/{a}.toml")) && !m.contains("archived"),
        "{m}"
    );
}

/// `cmd` run to its end within `limit`, else killed: a guard against a command that takes
/// minutes, not a speed figure (docs/benchmarks.md has those).
fn finishes_within(mut cmd: std::process::Command, limit: std::time::Duration) -> Run {
    use std::process::Stdio;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn loopx");
    let pid = child.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let Ok(out) = rx.recv_timeout(limit) else {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid])
            .status();
        panic!("{cmd:?} ran past {limit:?}");
    };
    let out = out.expect("output");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn hostile_globs_on_many_leases_cost_one_command_a_bounded_time() {
    // 300 live leases and 1,000 open todos, each holding a 140-character glob whose every
    // comparison with another is a full table (they differ only in the last letter): before
    // the bound was per command, `todo list --ready` took minutes here (300,000 comparisons of
    // 20,000 steps each).
    let p = Project::new("res-hostile");
    let h = "*a".repeat(68);
    let until = "2999-01-01T00:00:00.000Z";
    for i in 0..300 {
        p.write_todo(
            &format!("t-lease{i:03}"),
            &format!(
                "paths = [\"d{i}/{h}b\"]\n[lease]\nholder = \"a{i}\"\nfence = 1\n\
                 acquired_at = \"2020-01-01T00:00:00.000Z\"\nexpires_at = \"{until}\"\n\
                 paths = [\"d{i}/{h}b\"]\n"
            ),
        );
    }
    for i in 0..1000 {
        p.write_todo(
            &format!("t-open{i:04}"),
            &format!("paths = [\"*/{h}c{i}\"]\n"),
        );
    }
    let limit = std::time::Duration::from_secs(60);
    for args in [
        &["status"][..],
        &["quota", "should-run"],
        &["todo", "claim"],
        &["todo", "list", "--ready"],
    ] {
        let mut cmd = p.cmd(args);
        cmd.args(["--agent", "newcomer", "--json"]);
        let r = finishes_within(cmd, limit);
        // Out of steps, a pair counts as overlapping: nothing is claimed past a reservation.
        assert!(matches!(r.code, 0 | 3), "{args:?}: {r:?}");
    }
    // Still a fair answer where prefixes tell reservations apart.
    let free = p.add("free work", &["--priority", "P0", "--paths", "free/**"]);
    let v = p.ok_as("latecomer", &["todo", "claim"]);
    assert_eq!(v["todo"]["id"], free.as_str(), "{v}");
}

#[test]
fn a_conflict_with_many_overlapping_globs_names_a_few() {
    let p = Project::new("res-many");
    let a = p.add("a", &[]);
    let b = p.add("b", &[]);
    let globs = |tag: &str| -> Vec<String> {
        (0..32)
            .map(|i| format!("*{tag}{i}{}", "*x".repeat(80)))
            .collect()
    };
    let claim = |agent: &str, id: &str, gs: &[String]| {
        let mut args = vec!["--json", "--agent", agent, "todo", "claim", id];
        for g in gs {
            args.extend(["--paths", g.as_str()]);
        }
        run_cmd(&mut p.cmd(&args))
    };
    assert_eq!(claim("agent-a", &a, &globs("a")).code, 0);
    let r = claim("agent-b", &b, &globs("b"));
    assert_eq!(r.code, 4, "{}", r.stdout);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("and 1021 more"), "{msg}");
    assert!(msg.len() < 2_000, "a message of {} bytes", msg.len());
}
