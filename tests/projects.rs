//! `loopx projects add` and `remove` run many at once through the binary: each change is kept
//! (the list is edited under a lock beside `projects.toml`), and each process says what it did.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{TempDir, bin};

/// Processes racing.
const RACERS: usize = 20;

/// `loopx --json ARGS` with the config directory `cfg`, optionally on the store `url`.
fn lx(cfg: &Path, url: Option<&str>, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.arg("--json");
    if let Some(u) = url {
        c.args(["--store", u]);
    }
    c.args(args)
        .current_dir(cfg)
        .env("XDG_CONFIG_HOME", cfg)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_STORE")
        .env_remove("LOOPX_AGENT")
        .env_remove("LOOPX_LOCK_TIMEOUT");
    c
}

/// Starts every command at once, then waits for each: their outputs, in order.
fn race(cmds: Vec<Command>) -> Vec<Output> {
    let children: Vec<_> = cmds
        .into_iter()
        .map(|mut c| {
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("loopx runs")
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("loopx ends"))
        .collect()
}

/// The names in the list, as `projects list --json` gives them.
fn names(cfg: &Path) -> Vec<String> {
    let out = lx(cfg, None, &["projects", "list"]).output().expect("runs");
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut n: Vec<String> = v["projects"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| e["name"].as_str().expect("a name").to_string())
        .collect();
    n.sort();
    n
}

#[test]
fn twenty_adds_and_twenty_removes_at_once_each_keep_their_change() {
    let cfg = TempDir::new("projects-race");
    let want: Vec<String> = (0..RACERS).map(|i| format!("p{i:02}")).collect();
    let adds = want
        .iter()
        .map(|n| {
            let url = format!("postgres://u@db.invalid/{n}");
            lx(&cfg.path, Some(&url), &["projects", "add", "--name", n])
        })
        .collect();
    for (n, out) in want.iter().zip(race(adds)) {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("add's JSON");
        assert!(out.status.success(), "add {n}: {v}");
        assert_eq!(v["added"]["name"], n.as_str(), "{v}");
    }
    assert_eq!(names(&cfg.path), want, "every add said added");
    // The lock is a file of its own: the list is still replaced whole by a rename.
    assert!(cfg.path.join("loopx/projects.toml.lock").is_file());

    let removes = want
        .iter()
        .map(|n| lx(&cfg.path, None, &["projects", "remove", n]))
        .collect();
    for (n, out) in want.iter().zip(race(removes)) {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("remove's JSON");
        assert!(out.status.success(), "remove {n}: {v}");
        assert_eq!(v["removed"]["name"], n.as_str(), "{v}");
    }
    assert_eq!(
        names(&cfg.path),
        Vec::<String>::new(),
        "every remove said removed"
    );
}
