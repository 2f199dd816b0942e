//! A done never loses what the user made in a todo's worktree: it removes the worktree only
//! when every entry is committed on its branch, and keeps (untouched) one that holds ignored
//! files, a mount, a nested repository, a file another process has open, or that is reached
//! through a link, saying why in the answer and the evidence.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::worktrees::*;
use common::*;

/// A project whose first commit ignores `build/`, `vendor/` and `secrets.local`; todo `a`
/// claimed with its worktree, and one commit of work on the branch.
fn claimed(tag: &str) -> (Project, String) {
    let p = repo(tag);
    std::fs::write(
        p.root().join(".gitignore"),
        "build/\nvendor/\nsecrets.local\n",
    )
    .unwrap();
    git(p.root(), &["add", ".gitignore"]);
    git(p.root(), &["commit", "-q", "-m", "ignore"]);
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    let at = tree(&p, &a);
    std::fs::write(at.join("g.txt"), "work\n").unwrap();
    git(&at, &["add", "g.txt"]);
    git(&at, &["commit", "-q", "-m", "work"]);
    (p, a)
}

/// The done (exit 0) and its one warning, which must say the worktree was kept and name it.
fn done_kept(p: &Project, a: &str) -> String {
    let v = p.ok_as("agent-a", &["todo", "update", a, "--status", "done"]);
    let w = v["warnings"][0].as_str().unwrap_or_default().to_string();
    let shown = format!(".loopx/worktrees/{a}");
    assert!(w.contains("kept") && w.contains(&shown), "{v}");
    assert!(w.contains("git worktree remove --force"), "{w}");
    assert!(has_branch(p, &format!("loopx/{a}")));
    w
}

/// The done's evidence says the worktree was kept, and why.
fn evidence_says(p: &Project, a: &str, why: &str) {
    let ev = p
        .evidence(a)
        .into_iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>();
    assert!(
        ev.iter().any(|e| e.contains("kept") && e.contains(why)),
        "no evidence of the kept worktree: {ev:?}"
    );
}

#[test]
fn ignored_files_keep_the_worktree() {
    let (p, a) = claimed("wtk-ignored");
    let at = tree(&p, &a);
    std::fs::create_dir(at.join("build")).unwrap();
    std::fs::write(at.join("build/results.csv"), "3 days of runs\n").unwrap();
    std::fs::write(at.join("secrets.local"), "token\n").unwrap();
    let status = git_out(&at, &["status", "--porcelain"]);
    assert_eq!(status, "", "git calls it clean");
    let w = done_kept(&p, &a);
    assert!(w.contains("build/results.csv"), "{w}");
    evidence_says(&p, &a, "build/results.csv");
    assert_eq!(
        std::fs::read_to_string(at.join("build/results.csv")).unwrap(),
        "3 days of runs\n"
    );
    assert!(at.join("secrets.local").is_file());
    assert!(at.join("g.txt").is_file(), "a tracked file went");
    assert!(git_out(p.root(), &["worktree", "list"]).contains(&a));
}

#[test]
fn a_bind_mount_at_an_ignored_path_is_never_crossed() {
    let (p, a) = claimed("wtk-mount");
    let at = tree(&p, &a);
    let outside = TempDir::new("wtk-mount-data");
    std::fs::write(outside.path.join("data.bin"), "not the project's\n").unwrap();
    std::fs::create_dir(at.join("build")).unwrap();
    let m = Command::new("mount")
        .args(["--bind"])
        .arg(&outside.path)
        .arg(at.join("build"))
        .output();
    if !m.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: mount --bind was refused ({m:?}); this test needs root");
        return;
    }
    let r = p.run_as(
        "agent-a",
        &["--json", "todo", "update", &a, "--status", "done"],
    );
    let _ = Command::new("umount").arg(at.join("build")).status();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("mount"), "{}", r.stdout);
    assert_eq!(
        std::fs::read_to_string(outside.path.join("data.bin")).unwrap(),
        "not the project's\n",
        "the done deleted data outside the project"
    );
    assert!(at.join("g.txt").is_file());
    evidence_says(&p, &a, "mount");
}

#[test]
fn a_nested_repository_keeps_the_worktree_and_its_history() {
    let (p, a) = claimed("wtk-nested");
    let at = tree(&p, &a);
    let lib = at.join("vendor/lib");
    std::fs::create_dir_all(&lib).unwrap();
    git(&lib, &["init", "-q"]);
    std::fs::write(lib.join("x.c"), "int x;\n").unwrap();
    git(&lib, &["add", "x.c"]);
    git(&lib, &["commit", "-q", "-m", "only copy"]);
    assert_eq!(git_out(&at, &["status", "--porcelain"]), "");
    let w = done_kept(&p, &a);
    assert!(w.contains("nested repository"), "{w}");
    evidence_says(&p, &a, "nested repository");
    assert!(git_out(&lib, &["log", "--oneline"]).contains("only copy"));
}

#[test]
fn a_linked_worktrees_dir_is_never_gone_through() {
    let (p, a) = claimed("wtk-link");
    let elsewhere = TempDir::new("wtk-link-elsewhere");
    let moved = elsewhere.path.join("worktrees");
    std::fs::rename(p.root().join(".loopx/worktrees"), &moved).unwrap();
    std::os::unix::fs::symlink(&moved, p.root().join(".loopx/worktrees")).unwrap();
    let w = done_kept(&p, &a);
    assert!(w.contains("symlink"), "{w}");
    assert!(
        moved.join(&a).join("g.txt").is_file(),
        "removed through the link"
    );
    assert!(moved.join(&a).join(".git").is_file());
}

/// `sleep` started with `stdin` (or its working directory) in the worktree.
fn holder(cwd: &Path, stdin: Option<&Path>) -> Child {
    let input = match stdin {
        Some(f) => Stdio::from(std::fs::File::open(f).unwrap()),
        None => Stdio::null(),
    };
    Command::new("sleep")
        .arg("60")
        .current_dir(cwd)
        .stdin(input)
        .spawn()
        .expect("start sleep")
}

#[test]
fn a_file_open_in_another_process_keeps_the_worktree() {
    let (p, a) = claimed("wtk-open");
    let at = tree(&p, &a);
    let mut child = holder(p.root(), Some(&at.join("g.txt")));
    let w = done_kept(&p, &a);
    let _ = child.kill();
    let _ = child.wait();
    assert!(w.contains(&format!("process {}", child.id())), "{w}");
    evidence_says(&p, &a, "open");
    assert!(at.join("g.txt").is_file());
    assert!(
        !p.root()
            .join(format!(".loopx/worktrees/.{a}.removing"))
            .exists()
    );
}

#[test]
fn a_process_working_in_the_worktree_keeps_it() {
    let p = repo("wtk-cwd");
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    let at = tree(&p, &a);
    let mut child = holder(&at, None);
    let v = p.ok_as("agent-a", &["todo", "update", &a, "--status", "cancelled"]);
    let _ = child.kill();
    let _ = child.wait();
    let w = v["warnings"][0].as_str().unwrap_or_default();
    assert!(w.contains(&format!("process {}", child.id())), "{v}");
    assert!(at.join("f.txt").is_file());
}

#[test]
fn a_clean_worktree_is_removed_links_inside_and_all() {
    let p = repo("wtk-clean");
    let a = p.add("feature", &[]);
    p.ok_as("agent-a", &["todo", "claim", &a, "--worktree"]);
    let at = tree(&p, &a);
    let outside = TempDir::new("wtk-clean-target");
    std::fs::write(outside.path.join("keep.txt"), "outside\n").unwrap();
    std::fs::create_dir_all(at.join("src/deep")).unwrap();
    std::fs::write(at.join("src/deep/run.sh"), "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let exec = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(at.join("src/deep/run.sh"), exec).unwrap();
    std::os::unix::fs::symlink(&outside.path, at.join("out")).unwrap();
    git(&at, &["add", "src", "out"]);
    git(&at, &["commit", "-q", "-m", "work"]);
    assert_eq!(git_out(&at, &["status", "--porcelain", "--ignored"]), "");
    let v = p.ok_as("agent-a", &["todo", "update", &a, "--status", "done"]);
    assert!(v.get("warnings").is_none(), "{v}");
    assert!(!at.exists(), "the clean worktree stayed");
    let left: Vec<_> = std::fs::read_dir(p.root().join(".loopx/worktrees"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from(".gitignore")]);
    assert!(
        outside.path.join("keep.txt").is_file(),
        "a link was followed"
    );
    assert!(!git_out(p.root(), &["worktree", "list"]).contains(&a));
    let log = git_out(p.root(), &["log", "--oneline", &format!("loopx/{a}")]);
    assert!(log.contains("work"), "{log}");
}

#[test]
fn doctor_says_how_to_put_back_a_worktree_left_moved_aside() {
    let (p, a) = claimed("wtk-aside");
    let aside = p.root().join(format!(".loopx/worktrees/.{a}.removing"));
    std::fs::rename(tree(&p, &a), &aside).unwrap();
    let d = p.ok(&["doctor"]);
    let f = d["findings"].to_string();
    let fix = format!("mv .loopx/worktrees/.{a}.removing .loopx/worktrees/{a}");
    assert!(f.contains(&fix), "{d}");
}

#[test]
fn what_the_done_check_makes_after_the_proof_is_kept() {
    let (p, a) = claimed("wtk-check");
    let propose = [
        "todo",
        "check",
        "propose",
        &a,
        "--",
        "touch",
        "secrets.local",
    ];
    let r = p.run_as("agent-a", &propose);
    assert_eq!(r.code, 0, "{r:?}");
    p.ok(&["todo", "check", "approve", &a]);
    let w = done_kept(&p, &a);
    assert!(w.contains("secrets.local"), "{w}");
    assert!(tree(&p, &a).join("secrets.local").is_file());
}

#[test]
fn a_huge_file_at_a_committed_path_keeps_the_worktree_at_once() {
    let (p, a) = claimed("wtk-huge");
    let at = tree(&p, &a);
    // A sparse TiB where the commit has 5 bytes: hashing it would take hours.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(at.join("g.txt"))
        .unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    let mut c = p.cmd(&[
        "--json", "--agent", "agent-a", "todo", "update", &a, "--status", "done",
    ]);
    let mut child = c.stdout(Stdio::piped()).spawn().unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("the done was still proving the worktree after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["warnings"][0].to_string().contains("g.txt differs"),
        "{v}"
    );
    assert_eq!(std::fs::metadata(at.join("g.txt")).unwrap().len(), 1 << 40);
}

#[test]
fn a_process_in_the_worktree_by_another_path_keeps_it() {
    let (p, a) = claimed("wtk-otherpath");
    // The project seen through a bind mount elsewhere, as a container that mounts it sees it.
    let other = TempDir::new("wtk-otherpath-mnt");
    let m = Command::new("mount")
        .arg("--bind")
        .arg(p.root())
        .arg(&other.path)
        .output();
    if !m.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: mount --bind was refused ({m:?}); this test needs root");
        return;
    }
    let mut child = holder(&other.path.join(format!(".loopx/worktrees/{a}")), None);
    let r = p.run_as(
        "agent-a",
        &["--json", "todo", "update", &a, "--status", "done"],
    );
    let _ = child.kill();
    let _ = child.wait();
    // Lazily, so the temporary directory's removal never goes through the mount.
    let _ = Command::new("umount").arg("-l").arg(&other.path).status();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(&format!("process {}", child.id())),
        "a shell in the worktree by another path did not keep it: {}",
        r.stdout
    );
    assert!(tree(&p, &a).join("g.txt").is_file());
}
