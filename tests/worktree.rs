//! Per-lease git worktrees through the real binary: `todo claim --worktree` makes
//! `.loopx/worktrees/ID` on branch `loopx/ID`; done or a reclaim removes a clean one (the branch
//! stays), a dirty one is kept with a warning; links and no git are refused; doctor names orphans.

mod common;

use std::path::Path;

use common::worktrees::*;
use common::*;

#[test]
fn a_claim_makes_the_worktree_on_its_branch_and_done_removes_it_keeping_the_branch() {
    let p = repo("wt-make");
    let a = p.add("feature", &[]);
    let v = p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    let at = tree(&p, &a);
    let shown = v["worktree"].as_str().unwrap();
    assert_eq!(Path::new(shown), at.canonicalize().unwrap());
    assert!(Path::new(shown).is_absolute());
    assert_eq!(
        v["todo"]["lease"]["worktree"],
        format!(".loopx/worktrees/{a}")
    );
    assert_eq!(
        std::fs::read_to_string(at.join("f.txt")).unwrap(),
        "hello\n"
    );
    assert!(has_branch(&p, &format!("loopx/{a}")));
    assert_eq!(
        git_out(&at, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        format!("loopx/{a}")
    );
    assert_eq!(
        std::fs::read_to_string(p.root().join(".loopx/worktrees/.gitignore")).unwrap(),
        "*\n"
    );
    // The claim's journal line names it, and the main tree never lists it.
    let claim = p
        .journal()
        .into_iter()
        .rev()
        .find(|e| e["action"] == "todo.claim");
    assert_eq!(
        claim.unwrap()["data"]["worktree"],
        format!(".loopx/worktrees/{a}")
    );
    let status = git_out(
        p.root(),
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert!(!status.contains("worktrees"), "{status}");
    // The text answer names it too.
    let r = p.run_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("worktree: "), "{}", r.stdout);
    let r = p.run_as("agent-a", &["todo", "show", &a]);
    assert!(
        r.stdout
            .contains(&format!("worktree: .loopx/worktrees/{a}")),
        "{}",
        r.stdout
    );

    // Work committed on the branch, then done: the clean worktree goes, the branch stays.
    std::fs::write(at.join("g.txt"), "work\n").unwrap();
    git(&at, &["add", "g.txt"]);
    git(&at, &["commit", "-q", "-m", "work"]);
    let v = p.ok_as("agent-a", &["todo", "update", &a, "--status", "done"]);
    assert!(v.get("warnings").is_none(), "{v}");
    assert!(!at.exists(), "the clean worktree is still there");
    assert!(has_branch(&p, &format!("loopx/{a}")));
    let log = git_out(p.root(), &["log", "--oneline", &format!("loopx/{a}")]);
    assert!(log.contains("work"), "{log}");
    let list = git_out(p.root(), &["worktree", "list"]);
    assert!(!list.contains(&a), "git still lists it: {list}");
    let d = p.ok(&["doctor"]);
    assert_eq!(d["findings"], serde_json::json!([]), "{d}");
}

#[test]
fn a_dirty_worktree_at_done_is_kept_with_a_warning_and_doctor_names_it() {
    let p = repo("wt-dirty");
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", "--worktree"]);
    let at = tree(&p, &a);
    std::fs::write(at.join("half.txt"), "unfinished\n").unwrap();
    let r = p.run_as("agent-a", &["todo", "update", &a, "--status", "done"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("warning:") && r.stderr.contains(&format!(".loopx/worktrees/{a}")),
        "{}",
        r.stderr
    );
    assert!(
        at.join("half.txt").is_file(),
        "the dirty worktree was removed"
    );
    let d = p.ok(&["doctor"]);
    let f = &d["findings"][0];
    assert_eq!(f["severity"], "warning", "{d}");
    assert_eq!(f["file"], format!(".loopx/worktrees/{a}"));
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("git worktree remove"),
        "{f}"
    );
    assert_eq!(d["ok"], true, "an orphan is a warning, not an error");
}

#[test]
fn done_in_json_names_the_kept_worktree_in_warnings() {
    let p = repo("wt-dirty-json");
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    std::fs::write(tree(&p, &a).join("f.txt"), "changed\n").unwrap();
    let v = p.ok_as("agent-a", &["todo", "update", &a, "--status", "done"]);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(w.contains("kept") && w.contains(&a), "{w}");
    assert!(tree(&p, &a).is_dir());
}

#[test]
fn a_reclaim_after_expiry_reuses_the_worktree_and_its_branch() {
    let p = repo("wt-reclaim");
    let a = p.add("feature", &[]);
    p.ok_as(
        "agent-a",
        &["todo", "claim", &a, "--worktree", "--ttl", "1s"],
    );
    let at = tree(&p, &a);
    std::fs::write(at.join("g.txt"), "agent-a's work\n").unwrap();
    git(&at, &["add", "g.txt"]);
    git(&at, &["commit", "-q", "-m", "a's work"]);
    std::fs::write(at.join("wip.txt"), "not committed\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_300));
    let v = p.ok_as("agent-b", &["todo", "claim", &a, "--worktree"]);
    assert_eq!(v["todo"]["lease"]["holder"], "agent-b");
    assert_eq!(
        Path::new(v["worktree"].as_str().unwrap()),
        at.canonicalize().unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(at.join("g.txt")).unwrap(),
        "agent-a's work\n"
    );
    assert!(
        at.join("wip.txt").is_file(),
        "the earlier holder's work is gone"
    );
}

#[test]
fn a_reclaim_without_worktree_removes_a_clean_one_and_keeps_a_dirty_one() {
    let p = repo("wt-reclaim-bare");
    let a = p.add("clean", &[]);
    let b = p.add("dirty", &[]);
    p.ok_as(
        "agent-a",
        &["todo", "claim", &a, "--worktree", "--ttl", "1s"],
    );
    p.ok_as(
        "agent-a",
        &["todo", "claim", &b, "--worktree", "--ttl", "1s"],
    );
    std::fs::write(tree(&p, &b).join("wip.txt"), "x\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_300));
    let v = p.ok_as("agent-b", &["todo", "claim", &a]);
    assert!(v.get("warnings").is_none(), "{v}");
    assert!(v["todo"]["lease"]["worktree"].is_null());
    assert!(!tree(&p, &a).exists(), "the clean worktree stayed");
    assert!(has_branch(&p, &format!("loopx/{a}")));
    let v = p.ok_as("agent-b", &["todo", "claim", &b]);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(w.contains(&format!(".loopx/worktrees/{b}")), "{w}");
    assert!(tree(&p, &b).join("wip.txt").is_file());
}

#[test]
fn a_symlinked_worktrees_dir_or_target_is_refused_and_nothing_goes_through_it() {
    let p = repo("wt-link");
    let a = p.add("feature", &[]);
    let outside = TempDir::new("wt-link-outside");
    std::os::unix::fs::symlink(&outside.path, p.root().join(".loopx/worktrees")).unwrap();
    let e = p.fails_as(
        "agent-a",
        &["todo", "claim", &a, "--worktree"],
        "invalid_state",
    );
    assert!(
        e["error"]["message"].as_str().unwrap().contains("symlink"),
        "{e}"
    );
    assert_eq!(std::fs::read_dir(&outside.path).unwrap().count(), 0);
    assert!(
        p.show(&a)["lease"].is_null(),
        "the refused claim left a lease"
    );
    assert!(!has_branch(&p, &format!("loopx/{a}")));

    // The target itself a link, in a real worktrees directory: refused, bare claim included.
    std::fs::remove_file(p.root().join(".loopx/worktrees")).unwrap();
    std::fs::create_dir(p.root().join(".loopx/worktrees")).unwrap();
    std::os::unix::fs::symlink(&outside.path, tree(&p, &a)).unwrap();
    p.fails_as("agent-a", &["todo", "claim", "--worktree"], "invalid_state");
    assert!(p.show(&a)["lease"].is_null());
    assert_eq!(std::fs::read_dir(&outside.path).unwrap().count(), 0);
    // A file in its place is refused too.
    std::fs::remove_file(tree(&p, &a)).unwrap();
    std::fs::write(tree(&p, &a), "x").unwrap();
    p.fails_as(
        "agent-a",
        &["todo", "claim", &a, "--worktree"],
        "invalid_state",
    );
}

#[test]
fn outside_git_or_before_the_first_commit_is_refused() {
    let p = Project::new("wt-nogit");
    let a = p.add("feature", &[]);
    let e = p.fails_as("agent-a", &["todo", "claim", &a, "--worktree"], "usage");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("git work tree"),
        "{e}"
    );
    assert!(p.show(&a)["lease"].is_null());
    assert!(!p.root().join(".loopx/worktrees").exists());
    git(p.root(), &["init", "-q"]);
    let e = p.fails_as("agent-a", &["todo", "claim", &a, "--worktree"], "usage");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("first commit"),
        "{e}"
    );
    let (code, e) = json_first(&p, "agent-a", &["turn", "--worktree", "--", "true"]);
    assert_eq!(code, exit_of("usage"), "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("first commit")
    );
    assert!(p.show(&a)["lease"].is_null());
}

#[test]
fn doctor_names_a_git_worktree_on_a_loopx_branch_that_no_lease_names() {
    let p = repo("wt-orphan");
    let elsewhere = TempDir::new("wt-orphan-elsewhere");
    let path = elsewhere.path.join("stray");
    git(
        p.root(),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "loopx/t-stray1",
            path.to_str().unwrap(),
        ],
    );
    let d = p.ok(&["doctor"]);
    let msgs = d["findings"].to_string();
    assert!(
        msgs.contains("loopx/t-stray1") && msgs.contains("no live lease"),
        "{d}"
    );
    // A live lease naming its worktree is no orphan.
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    let d = p.ok(&["doctor"]);
    assert!(!d["findings"].to_string().contains(&a), "{d}");
}

#[test]
fn a_branch_whose_worktree_is_gone_is_checked_out_again_as_it_is() {
    let p = repo("wt-resume");
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    let at = tree(&p, &a);
    std::fs::write(at.join("g.txt"), "on the branch\n").unwrap();
    git(&at, &["add", "g.txt"]);
    git(&at, &["commit", "-q", "-m", "work"]);
    // A release keeps the worktree (the work is there for the next claim).
    p.ok_as("agent-a", &["todo", "release", &a]);
    assert!(at.join("g.txt").is_file());
    // Its directory removed by hand; git still knows the worktree: loopx prunes it and adds
    // the branch again, with its commit, not a fresh one at HEAD.
    std::fs::remove_dir_all(&at).unwrap();
    let v = p.ok_as("agent-b", &["todo", "claim", &a, "--worktree"]);
    assert!(v["worktree"].is_string(), "{v}");
    assert_eq!(
        std::fs::read_to_string(at.join("g.txt")).unwrap(),
        "on the branch\n"
    );
    assert!(!p.root().join("g.txt").exists(), "the main tree moved");
}

/// The same worktree life on the files and on a database (LOOPX_TEST_PG, else skipped): the
/// lease lives in the store, the worktree beside the work dir.
fn on_store(backend: common::backend::Backend) {
    use common::backend::{Lab, Who};
    let Some(lab) = Lab::new(backend, "wt-store", 2, 2) else {
        return;
    };
    let root = lab.p.root();
    git(root, &["init", "-q"]);
    std::fs::write(root.join("f.txt"), "hello\n").unwrap();
    git(root, &["add", "f.txt"]);
    git(root, &["commit", "-q", "-m", "first"]);
    let id = lab.todos[0].clone();
    let (a1, a2) = (lab.agent(1).to_string(), lab.agent(2).to_string());
    let v = lab.ok(
        Who::Agent(&a1),
        &["todo", "claim", &id, "--worktree", "--ttl", "1s"],
    );
    assert_eq!(
        v["todo"]["lease"]["worktree"],
        format!(".loopx/worktrees/{id}")
    );
    let other = lab.todos[1].clone();
    lab.ok(
        Who::Agent(&a1),
        &["todo", "claim", &other, "--worktree", "--ttl", "1s"],
    );
    let d = lab.ok(Who::Owner, &["doctor"]);
    assert!(!d["findings"].to_string().contains("no live lease"), "{d}");
    let at = root.join(".loopx/worktrees").join(&id);
    std::fs::write(at.join("wip.txt"), "a1's work\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_300));
    let v = lab.ok(Who::Agent(&a2), &["todo", "claim", &id, "--worktree"]);
    assert_eq!(
        Path::new(v["worktree"].as_str().unwrap()),
        at.canonicalize().unwrap()
    );
    assert!(
        at.join("wip.txt").is_file(),
        "the earlier holder's work is gone"
    );
    git(&at, &["add", "wip.txt"]);
    git(&at, &["commit", "-q", "-m", "work"]);
    let v = lab.ok(
        Who::Agent(&a2),
        &["todo", "update", &id, "--status", "done"],
    );
    assert!(v.get("warnings").is_none(), "{v}");
    assert!(!at.exists(), "done left the clean worktree");
    let log = git_out(root, &["log", "--oneline", &format!("loopx/{id}")]);
    assert!(log.contains("work"), "{log}");
    // The other's lease expired: its worktree is an orphan doctor names.
    let d = lab.ok(Who::Owner, &["doctor"]);
    let f = d["findings"].to_string();
    assert!(
        f.contains(&format!(".loopx/worktrees/{other}")) && f.contains("no live lease"),
        "{d}"
    );
    assert!(!f.contains(&format!(".loopx/worktrees/{id}")), "{d}");
}

#[test]
fn the_worktree_life_on_the_files() {
    on_store(common::backend::Backend::Files);
}

#[test]
fn the_worktree_life_on_a_database() {
    on_store(common::backend::Backend::Db);
}

#[test]
fn a_directory_in_the_way_that_is_no_worktree_of_its_branch_is_refused_untouched() {
    let p = repo("wt-in-the-way");
    let a = p.add("feature", &[]);
    std::fs::create_dir_all(tree(&p, &a)).unwrap();
    std::fs::write(tree(&p, &a).join("mine.txt"), "someone's\n").unwrap();
    let e = p.fails_as(
        "agent-a",
        &["todo", "claim", &a, "--worktree"],
        "invalid_state",
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not a worktree"),
        "{e}"
    );
    assert!(p.show(&a)["lease"].is_null(), "the claim stayed");
    assert!(!has_branch(&p, &format!("loopx/{a}")));
    assert_eq!(
        std::fs::read_to_string(tree(&p, &a).join("mine.txt")).unwrap(),
        "someone's\n",
        "loopx touched the directory in the way"
    );
    // The holder's own renewal is refused whole: its lease names no worktree.
    p.ok_as("agent-a", &["todo", "claim", &a]);
    p.fails_as(
        "agent-a",
        &["todo", "claim", &a, "--worktree"],
        "invalid_state",
    );
    let l = &p.show(&a)["lease"];
    assert_eq!(l["holder"], "agent-a");
    assert!(l["worktree"].is_null(), "{l}");
}

#[test]
fn a_worktree_todo_is_proven_and_measured_in_its_worktree() {
    let p = repo("wt-proof");
    let a = p.add("feature", &[]);
    p.ok_as(
        "agent-a",
        &["todo", "claim", &a, "--worktree", "--paths", "src/**"],
    );
    let at = tree(&p, &a);
    let r = p.run_as(
        "agent-a",
        &[
            "todo",
            "check",
            "propose",
            &a,
            "--",
            "test",
            "-f",
            "built.txt",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    p.ok(&["todo", "check", "approve", &a]);
    // The work is in the worktree: the main tree's changes are not this lease's.
    std::fs::write(p.root().join("main-only.txt"), "x").unwrap();
    std::fs::write(at.join("README.md"), "changed in the worktree").unwrap();
    let v = p.ok_as("agent-a", &["todo", "update", &a]);
    let w = v["warnings"][0].as_str().expect("a warning");
    assert!(w.contains("README.md") && !w.contains("main-only"), "{w}");
    // The check runs there too: the file made in the main tree does not prove it.
    std::fs::write(p.root().join("built.txt"), "x").unwrap();
    p.fails_as(
        "agent-a",
        &["todo", "update", &a, "--status", "done"],
        "check_failed",
    );
    std::fs::write(at.join("built.txt"), "x").unwrap();
    p.ok_as("agent-a", &["todo", "update", &a, "--status", "done"]);
}

#[test]
fn a_cancel_removes_a_clean_worktree_too() {
    let p = repo("wt-cancel");
    let a = p.add("dropped", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    let at = tree(&p, &a);
    assert!(at.is_dir());
    let v = p.ok_as(
        "agent-a",
        &[
            "todo",
            "update",
            &a,
            "--status",
            "cancelled",
            "--reason",
            "not needed",
        ],
    );
    assert!(v.get("warnings").is_none(), "{v}");
    assert!(!at.exists(), "the clean worktree is still there");
    assert!(has_branch(&p, &format!("loopx/{a}")));
}
