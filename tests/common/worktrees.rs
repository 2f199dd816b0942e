//! Helpers for the worktree tests: a project in a git work tree, git's answers, the paths.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Project, git, parse_json, run_cmd};

/// A project in a git work tree with one commit (`f.txt`).
pub fn repo(tag: &str) -> Project {
    let p = Project::new(tag);
    git(p.root(), &["init", "-q"]);
    std::fs::write(p.root().join("f.txt"), "hello\n").unwrap();
    git(p.root(), &["add", "f.txt"]);
    git(p.root(), &["commit", "-q", "-m", "first"]);
    p
}

/// What git prints.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("run git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `loopx --agent AGENT --json ARGS` (the flags before a `--` the arguments may hold).
pub fn json_first(p: &Project, agent: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let mut a = vec!["--agent", agent, "--json"];
    a.extend_from_slice(args);
    let r = run_cmd(&mut p.cmd(&a));
    let v = parse_json(&r, &args.join(" "));
    (r.code, v)
}

/// True when the project's repository has the local branch `name`.
pub fn has_branch(p: &Project, name: &str) -> bool {
    !git_out(p.root(), &["branch", "--list", name])
        .trim()
        .is_empty()
}

/// Where todo `id`'s worktree is.
pub fn tree(p: &Project, id: &str) -> PathBuf {
    p.root().join(".loopx/worktrees").join(id)
}
