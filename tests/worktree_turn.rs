//! Worktrees of turns through the real binary: `turn --worktree`, `heartbeat --worktree` and
//! `turn start --worktree` give the command (or host) its todo's worktree, a done removes it,
//! and no hook, filter or fsmonitor of the repository runs.

mod common;

use std::path::Path;

use common::worktrees::*;
use common::*;

#[test]
fn turn_gives_the_command_its_worktree_and_a_done_removes_it() {
    let p = repo("wt-turn");
    let a = p.add("feature", &[]);
    let out = p.root().join("seen.txt");
    let script = format!(
        "printf '%s\\n%s\\n' \"$LOOPX_WORKTREE\" \"$LOOPX_DIR\" > '{}'; test -f \"$LOOPX_WORKTREE/f.txt\"",
        out.display()
    );
    let (code, v) = json_first(
        &p,
        "agent-a",
        &[
            "turn",
            "--worktree",
            "--complete-on-success",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!((code, &v["ended"]), (0, &serde_json::json!("done")), "{v}");
    let seen = std::fs::read_to_string(&out).unwrap();
    let mut lines = seen.lines();
    let wt = lines.next().unwrap();
    assert_eq!(
        Path::new(wt),
        tree(&p, &a)
            .parent()
            .unwrap()
            .canonicalize()
            .unwrap()
            .join(&a)
    );
    assert_eq!(v["worktree"], wt);
    assert_eq!(
        Path::new(lines.next().unwrap()),
        p.root().canonicalize().unwrap(),
        "LOOPX_DIR stays the project's root"
    );
    assert!(!tree(&p, &a).exists(), "done left the clean worktree");
    assert!(has_branch(&p, &format!("loopx/{a}")));

    // Without --worktree there is no LOOPX_WORKTREE.
    p.add("next", &[]);
    let script = format!(
        "printf '%s' \"${{LOOPX_WORKTREE-unset}}\" > '{}'",
        out.display()
    );
    // One inherited from an outer turn is not passed on.
    let mut c = p.cmd(&[
        "--agent", "agent-a", "--json", "turn", "--", "sh", "-c", &script,
    ]);
    c.env("LOOPX_WORKTREE", "/an/outer/turns");
    let r = run_cmd(&mut c);
    let (code, v) = (r.code, parse_json(&r, "turn"));
    assert_eq!(code, 0, "{v}");
    assert!(v.get("worktree").is_none(), "{v}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "unset");
}

#[test]
fn a_host_turn_ended_done_removes_the_clean_worktree() {
    let p = repo("wt-turn-end");
    let a = p.add("feature", &[]);
    let s = p.ok_as(
        "agent-a",
        &["turn", "start", "--turn", "run-1", "--worktree"],
    );
    assert_eq!(s["todo"]["id"], a.as_str());
    assert_eq!(
        Path::new(s["worktree"].as_str().unwrap()),
        tree(&p, &a).canonicalize().unwrap()
    );
    assert_eq!(
        s["todo"]["lease"]["worktree"],
        format!(".loopx/worktrees/{a}")
    );
    assert_eq!(s["todo"]["lease"]["turn"], "run-1", "{s}");
    // Started again (a lost answer): the same claim and the same worktree.
    let again = p.ok_as(
        "agent-a",
        &["turn", "start", "--turn", "run-1", "--worktree"],
    );
    assert_eq!(again["resumed"], true);
    assert_eq!(again["worktree"], s["worktree"]);
    let v = p.ok_as(
        "agent-a",
        &[
            "turn",
            "end",
            "--turn",
            "run-1",
            "--done",
            "--summary",
            "ok",
        ],
    );
    assert_eq!(v["ended"], "done", "{v}");
    assert!(!tree(&p, &a).exists());
    assert!(has_branch(&p, &format!("loopx/{a}")));
}

#[test]
fn making_and_removing_a_worktree_runs_no_program_the_repository_names() {
    use std::os::unix::fs::PermissionsExt;
    let p = repo("wt-hostile");
    let marker = p.root().join("pwned");
    let script = p.root().join(".git/x.sh");
    let body = format!(
        "#!/bin/sh\necho \"ran $0\" >> '{}'\ncat\n",
        marker.display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let x = script.to_str().unwrap();
    for hook in [
        "post-checkout",
        "reference-transaction",
        "post-index-change",
    ] {
        let h = p.root().join(".git/hooks").join(hook);
        std::fs::create_dir_all(h.parent().unwrap()).unwrap();
        std::fs::copy(&script, &h).unwrap();
    }
    for (k, v) in [
        ("core.fsmonitor", x),
        ("filter.evil.smudge", x),
        ("filter.evil.process", x),
    ] {
        git(p.root(), &["config", k, v]);
    }
    // The attribute is committed, so a checkout of the branch would run the filter.
    std::fs::write(p.root().join(".gitattributes"), "* filter=evil\n").unwrap();
    git(
        p.root(),
        &["-c", "core.fsmonitor=false", "add", ".gitattributes"],
    );
    git(
        p.root(),
        &[
            "-c",
            "core.fsmonitor=false",
            "commit",
            "-q",
            "--no-verify",
            "-m",
            "attrs",
        ],
    );
    let _ = std::fs::remove_file(&marker);
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    assert!(tree(&p, &a).join("f.txt").is_file());
    p.ok_as("agent-a", &["todo", "update", &a, "--status", "done"]);
    assert!(!tree(&p, &a).exists());
    assert!(
        !marker.exists(),
        "a repository program ran: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );
}

#[test]
fn heartbeat_turns_run_in_their_todos_worktrees() {
    let p = repo("wt-heartbeat");
    let a = p.add("first", &["--priority", "P0"]);
    let b = p.add("second", &["--priority", "P1"]);
    let out = p.root().join("seen.txt");
    let script = format!("printf '%s\\n' \"$LOOPX_WORKTREE\" >> '{}'", out.display());
    let r = p.run_as(
        "agent-a",
        &[
            "heartbeat",
            "--worktree",
            "--max-turns",
            "2",
            "--every",
            "1s",
            "--complete-on-success",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let seen = std::fs::read_to_string(&out).unwrap();
    let base = p.root().canonicalize().unwrap().join(".loopx/worktrees");
    let want = format!("{}\n{}\n", base.join(&a).display(), base.join(&b).display());
    assert_eq!(seen, want);
    assert!(
        !tree(&p, &a).exists() && !tree(&p, &b).exists(),
        "done left them"
    );
    assert!(has_branch(&p, &format!("loopx/{a}")) && has_branch(&p, &format!("loopx/{b}")));
}
