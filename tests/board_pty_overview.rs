//! `board --all` end to end in a real terminal (tmux): three file projects in the owner's list, a
//! gate opened in one shows on the overview, `N` `a` `y` approve it there and the gate file says
//! approved (signed: doctor is healthy); Enter opens that project's board and Esc comes back.
//! Also `loopx projects add/list/remove` through the binary. Skips when tmux is absent.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod common;
use common::tmux::{BIN, Tmux, skip_without_tmux, temp_dir};

fn lx(home: &Path, key: &Path, dir: Option<&Path>, args: &[&str]) -> Output {
    let mut c = Command::new(BIN);
    if let Some(d) = dir {
        c.arg("--dir").arg(d);
    }
    c.args(args)
        .env("XDG_CONFIG_HOME", home.join("cfg"))
        .env("LOOPX_OWNER_KEY", key)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_STORE")
        .env_remove("LOOPX_AGENT")
        .output()
        .expect("loopx runs")
}

fn ok(o: Output) -> serde_json::Value {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null)
}

/// `start-goal` in `dir`.
fn start_goal(home: &Path, key: &Path, dir: &Path, goal: &str) {
    let d = dir.to_str().unwrap();
    ok(lx(
        home,
        key,
        None,
        &["start-goal", "--goal-text", goal, "--project", d],
    ));
}

/// Three projects with one owner key, all in the list.
fn three(tag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let home = temp_dir(tag);
    let key = home.join("owner.key");
    for p in ["wx", "api", "docs"] {
        let d = home.join(p);
        std::fs::create_dir_all(&d).unwrap();
        let goal = format!("Goal of {p}");
        start_goal(&home, &key, &d, &goal);
        ok(lx(&home, &key, Some(&d), &["owner", "init"]));
        ok(lx(
            &home,
            &key,
            None,
            &["--json", "projects", "add", d.to_str().unwrap()],
        ));
    }
    (home, key)
}

#[test]
fn projects_add_list_remove_through_the_binary() {
    let (home, key) = three("projects-cli");
    let v = ok(lx(&home, &key, None, &["--json", "projects", "list"]));
    let names: Vec<&str> = v["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["wx", "api", "docs"]);
    // The same place or name again, a missing directory: refused, the file unchanged.
    let again = lx(
        &home,
        &key,
        None,
        &[
            "--json",
            "projects",
            "add",
            home.join("wx").to_str().unwrap(),
            "--name",
            "wx2",
        ],
    );
    assert_eq!(again.status.code(), Some(2));
    let missing = lx(
        &home,
        &key,
        None,
        &["projects", "add", home.join("nope").to_str().unwrap()],
    );
    assert_eq!(missing.status.code(), Some(5));
    // A database by URL: listed without its password.
    ok(lx(
        &home,
        &key,
        None,
        &[
            "--store",
            "postgres://owner:s3cret@db.invalid/shared",
            "projects",
            "add",
        ],
    ));
    let text =
        String::from_utf8_lossy(&lx(&home, &key, None, &["projects", "list"]).stdout).to_string();
    assert!(
        text.contains("shared")
            && text.contains("owner:***@db.invalid")
            && !text.contains("s3cret"),
        "{text}"
    );
    let file = home.join("cfg/loopx/projects.toml");
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    ok(lx(&home, &key, None, &["projects", "remove", "shared"]));
    ok(lx(
        &home,
        &key,
        None,
        &["projects", "remove", home.join("api").to_str().unwrap()],
    ));
    assert_eq!(
        lx(&home, &key, None, &["projects", "remove", "api"])
            .status
            .code(),
        Some(5)
    );
    let v = ok(lx(&home, &key, None, &["--json", "projects", "list"]));
    assert_eq!(v["projects"].as_array().unwrap().len(), 2);
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn a_gate_is_approved_from_the_overview() {
    if skip_without_tmux() {
        return;
    }
    let (home, key) = three("overview");
    // A directory that goes away: a row with the problem, not a crash.
    let gone = home.join("gone");
    std::fs::create_dir_all(&gone).unwrap();
    start_goal(&home, &key, &gone, "Gone soon");
    ok(lx(
        &home,
        &key,
        None,
        &["projects", "add", gone.to_str().unwrap()],
    ));
    std::fs::remove_dir_all(&gone).unwrap();

    let cmd = format!(
        "env XDG_CONFIG_HOME='{}' LOOPX_OWNER_KEY='{}' '{}' board --all; sleep 5",
        home.join("cfg").display(),
        key.display(),
        BIN
    );
    let t = Tmux::start("overview", &cmd, 120, 40);
    t.wait_for("nothing waits on the owner", Duration::from_secs(20))
        .unwrap();
    t.wait_for("is not a directory", Duration::from_secs(5))
        .unwrap();
    t.wait_for("owner ✓ in 3 of 4", Duration::from_secs(5))
        .unwrap();

    let api = home.join("api");
    let v = ok(lx(
        &home,
        &key,
        Some(&api),
        &[
            "--agent",
            "agent-x",
            "--json",
            "gate",
            "open",
            "Ship the API?",
        ],
    ));
    let id = v["gate"]["id"].as_str().unwrap().to_string();
    let shown = t.wait_for("Ship the API?", Duration::from_secs(5)).unwrap();
    eprintln!("the gate showed on the overview {shown:?} after `gate open` returned");
    assert!(shown < Duration::from_millis(1500), "{shown:?}");

    t.keys(&["N"]);
    t.keys(&["a"]);
    t.wait_for("Confirm", Duration::from_secs(5)).unwrap();
    t.keys(&["y"]);
    let file = api.join(".loopx").join("gates").join(format!("{id}.toml"));
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("status = \"approved\"") {
            assert!(
                text.contains("decided_by = \"owner\"") && text.contains("signature"),
                "{text}"
            );
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not approved:\n{text}\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    t.wait_for(&format!("api: approved {id}"), Duration::from_secs(5))
        .unwrap();
    let v = ok(lx(
        &home,
        &key,
        Some(&api),
        &["--json", "gate", "show", &id],
    ));
    assert_eq!(v["gate"]["status"], "approved", "{v}");
    ok(lx(&home, &key, Some(&api), &["doctor"]));

    // Enter opens a project's board; Esc comes back to the overview.
    t.keys(&["Enter"]);
    t.wait_for("Esc: back to all projects", Duration::from_secs(5))
        .unwrap();
    t.keys(&["Escape"]);
    t.wait_for("all projects · 4 projects", Duration::from_secs(5))
        .unwrap();
    t.keys(&["q"]);
    let _ = t.wait_gone("all projects", Duration::from_secs(3));
    let _ = std::fs::remove_dir_all(&home);
}
