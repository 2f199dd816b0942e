//! A repository an agent controls: the git evidence `todo update` captures, in a process that
//! holds the owner's key, runs no program the repository names, and a FIFO cannot hang it.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use common::Project;

fn git(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(args)
        .output()
        .expect("run git")
}

/// A project in a git work tree with one commit of `tracked.txt`, and a todo claimed by
/// `agent-a`; returns the project and the todo's id.
fn repo_project(tag: &str) -> (Project, String) {
    let p = Project::new(tag);
    assert!(git(p.root(), &["init", "-q"]).status.success());
    std::fs::write(p.root().join("tracked.txt"), "one\n").unwrap();
    assert!(git(p.root(), &["add", "tracked.txt"]).status.success());
    assert!(
        git(p.root(), &["commit", "-q", "-m", "first"])
            .status
            .success()
    );
    let id = p.add("work", &[]);
    p.ok_as("agent-a", &["todo", "claim", &id]);
    (p, id)
}

/// Plants `x.sh`, which records that it ran and what `LOOPX_OWNER_KEY` it saw; returns its path.
fn plant(p: &Project) -> String {
    let marker = p.root().join("pwned");
    let script = p.root().join(".git").join("x.sh");
    let body = format!(
        "#!/bin/sh\necho \"ran $0 key=$LOOPX_OWNER_KEY\" >> '{}'\ncat\n",
        marker.display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script.display().to_string()
}

fn set(p: &Project, key: &str, value: &str) {
    assert!(git(p.root(), &["config", key, value]).status.success());
}

/// Sets up one route in a project, given the planted program's path.
type Route = fn(&Project, &str);

/// Each way a repository makes git run a program, as an agent would set it up.
fn routes() -> Vec<(&'static str, Route)> {
    vec![
        ("core.fsmonitor", |p, x| set(p, "core.fsmonitor", x)),
        ("filter clean", |p, x| {
            set(p, "filter.evil.clean", x);
            std::fs::write(p.root().join(".gitattributes"), "* filter=evil\n").unwrap();
        }),
        ("filter process", |p, x| {
            set(p, "filter.evil.process", x);
            std::fs::write(p.root().join(".gitattributes"), "* filter=evil\n").unwrap();
        }),
        ("core.hooksPath", |p, x| {
            let dir = p.root().join(".git").join("hk");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(x, dir.join("post-index-change")).unwrap();
            set(p, "core.hooksPath", &dir.display().to_string());
        }),
        ("a hook in .git/hooks", |p, x| {
            let hook = p
                .root()
                .join(".git")
                .join("hooks")
                .join("post-index-change");
            std::fs::copy(x, hook).unwrap();
        }),
        ("core.pager", |p, x| set(p, "core.pager", x)),
        ("pager.status", |p, x| set(p, "pager.status", x)),
        ("diff.external", |p, x| set(p, "diff.external", x)),
        ("diff textconv", |p, x| {
            set(p, "diff.evil.textconv", x);
            std::fs::write(p.root().join(".gitattributes"), "* diff=evil\n").unwrap();
        }),
        ("core.sshCommand", |p, x| set(p, "core.sshCommand", x)),
        ("credential.helper", |p, x| set(p, "credential.helper", x)),
        ("core.askPass", |p, x| set(p, "core.askPass", x)),
        ("core.editor", |p, x| set(p, "core.editor", x)),
        ("gpg.program", |p, x| set(p, "gpg.program", x)),
    ]
}

#[test]
fn git_evidence_runs_no_program_the_repository_names() {
    let mut ran = Vec::new();
    for (name, route) in routes() {
        let (p, id) = repo_project("gitroute");
        let x = plant(&p);
        route(&p, &x);
        // A change git must read to see: a tracked file rewritten at its size, and a new one.
        std::fs::write(p.root().join("tracked.txt"), "two\n").unwrap();
        std::fs::write(p.root().join("new.txt"), "n\n").unwrap();
        // The owner's shell: `LOOPX_OWNER_KEY` is set for every command the project runs.
        let v = p.ok_as("agent-a", &["todo", "update", &id, "--status", "done"]);
        if let Ok(m) = std::fs::read_to_string(p.root().join("pwned")) {
            ran.push(format!("{name}: {}", m.trim()));
        }
        // The evidence is still right: HEAD and the changed files.
        let ev = p.evidence(&id);
        let auto = ev.iter().rev().find(|e| e["kind"] == "auto").expect("auto");
        let files: Vec<&str> = auto["files"]
            .as_array()
            .map(|a| a.iter().filter_map(|f| f.as_str()).collect())
            .unwrap_or_default();
        assert!(files.contains(&"tracked.txt"), "{name}: {auto} {v}");
        assert!(files.contains(&"new.txt"), "{name}: {auto}");
        assert!(
            auto["commit"].as_str().is_some_and(|c| c.len() == 40),
            "{name}: {auto}"
        );
    }
    assert!(
        ran.is_empty(),
        "loopx ran programs the repository named:\n{}",
        ran.join("\n")
    );
}

#[test]
fn the_routes_are_real_git_itself_runs_them() {
    // The same set-up, with git's own `status`: each of these runs the planted program. If git
    // ever stopped, the test above would prove nothing for that route.
    let mut idle = Vec::new();
    for name in [
        "core.fsmonitor",
        "filter clean",
        "core.hooksPath",
        "a hook in .git/hooks",
    ] {
        let (p, _) = repo_project("gitreal");
        let x = plant(&p);
        let route = routes().into_iter().find(|r| r.0 == name).unwrap().1;
        route(&p, &x);
        std::fs::write(p.root().join("tracked.txt"), "two\n").unwrap();
        let _ = git(p.root(), &["status", "--porcelain=v2", "-z"]);
        if !p.root().join("pwned").exists() {
            idle.push(name);
        }
    }
    assert!(idle.is_empty(), "git ran nothing for {idle:?}");
}

#[test]
fn a_fifo_in_the_repository_cannot_hang_the_update() {
    for place in ["gitignore", "excludesFile"] {
        let (p, id) = repo_project("gitfifo");
        let fifo = p.root().join("fifo");
        let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
        assert!(made.success());
        match place {
            "gitignore" => {
                let ign = p.root().join(".gitignore");
                std::fs::rename(&fifo, ign).unwrap();
            }
            _ => set(&p, "core.excludesFile", &fifo.display().to_string()),
        }
        let started = std::time::Instant::now();
        let v = p.ok_as("agent-a", &["todo", "update", &id, "--status", "done"]);
        assert_eq!(v["todo"]["status"], "done", "{place}: {v}");
        // Bounded: the read gives up after 10 s (not a timing assertion on speed).
        assert!(started.elapsed().as_secs() < 60, "{place}: hung");
        let ev = p.evidence(&id);
        let auto = ev.iter().rev().find(|e| e["kind"] == "auto").expect("auto");
        let summary = auto["summary"].as_str().unwrap_or("");
        assert!(summary.contains("no git facts"), "{place}: {auto}");
    }
}
