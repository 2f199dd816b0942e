//! What the removal does when the worktree changes after its survey (a race no command can
//! time): the new or changed file is kept and the worktree put back where it was.

use super::*;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A repository with one commit and the worktree of todo `t-1` on branch `loopx/t-1`.
fn project(tag: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("loopx-wtr-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(".loopx/worktrees")).unwrap();
    git(&root, &["init", "-q"]);
    std::fs::write(root.join("f.txt"), "hello\n").unwrap();
    git(&root, &["add", "f.txt"]);
    git(&root, &["commit", "-q", "-m", "first"]);
    git(
        &root,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "loopx/t-1",
            ".loopx/worktrees/t-1",
        ],
    );
    root
}

fn kept_after(root: &Path, change: impl FnOnce(&Path)) -> Outcome {
    let Ok(pf) = survey(root, "t-1") else {
        panic!("a clean worktree was not surveyed as clean");
    };
    change(&root.join(".loopx/worktrees/t-1"));
    finish(&pf, "t-1")
}

#[test]
fn a_file_made_after_the_survey_is_kept_and_the_worktree_put_back() {
    let root = project("late");
    let o = kept_after(&root, |at| {
        std::fs::write(at.join("late.txt"), "late\n").unwrap()
    });
    assert!(
        matches!(&o, Outcome::Kept(w) if w.contains("changed")),
        "{o:?}"
    );
    let at = root.join(".loopx/worktrees/t-1");
    assert_eq!(
        std::fs::read_to_string(at.join("late.txt")).unwrap(),
        "late\n"
    );
    assert!(at.join("f.txt").is_file() && at.join(".git").is_file());
    assert!(!root.join(".loopx/worktrees/.t-1.removing").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_file_changed_after_the_survey_is_kept() {
    let root = project("changed");
    let o = kept_after(&root, |at| {
        std::fs::write(at.join("f.txt"), "HELLO\n").unwrap()
    });
    assert!(matches!(&o, Outcome::Kept(_)), "{o:?}");
    let at = root.join(".loopx/worktrees/t-1");
    assert_eq!(
        std::fs::read_to_string(at.join("f.txt")).unwrap(),
        "HELLO\n"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_unchanged_surveyed_worktree_is_removed() {
    let root = project("clean");
    assert_eq!(kept_after(&root, |_| {}), Outcome::Removed);
    assert!(!root.join(".loopx/worktrees/t-1").exists());
    assert!(!root.join(".loopx/worktrees/.t-1.removing").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_worktree_with_refs_of_its_own_is_kept() {
    let root = project("refs");
    let at = root.join(".loopx/worktrees/t-1");
    git(&at, &["update-ref", "refs/worktree/mine", "HEAD"]);
    let o = remove(&root, "t-1");
    assert!(
        matches!(&o, Outcome::Kept(w) if w.contains("refs")),
        "{o:?}"
    );
    assert!(at.join("f.txt").is_file());
    std::fs::remove_dir_all(&root).unwrap();
}
