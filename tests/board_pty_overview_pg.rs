//! `board --all` with a database project in the owner's list, in a real terminal (tmux): its row
//! shows the pending gate, and `N` `a` `y` on the overview approve it in the database. Skips with
//! a message when tmux or PostgreSQL is absent.

mod common;

use std::time::{Duration, Instant};

use common::pg::{self, ok, project_in};
use common::tmux::{BIN, Tmux, skip_without_tmux, temp_dir};

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn a_database_project_is_a_row_whose_gate_is_approved_from_the_overview() {
    if skip_without_tmux() {
        return;
    }
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let p = project_in("overview-pg", &pg::fresh_db(server));
    let cfg = temp_dir("overview-pg-cfg");
    let add = p
        .cmd(&["projects", "add", "--name", "shared"])
        .env("XDG_CONFIG_HOME", &cfg)
        .output()
        .unwrap();
    ok(add, "projects add");
    let cmd = format!(
        "cd '{}' && env -u LOOPX_STORE -u LOOPX_DIR XDG_CONFIG_HOME='{}' LOOPX_OWNER_KEY='{}' '{}' board --all; sleep 5",
        p.cwd.display(),
        cfg.display(),
        p.key.display(),
        BIN
    );
    let t = Tmux::start("overview-pg", &cmd, 120, 30);
    t.wait_for("shared", WAIT).unwrap();
    t.wait_for("Ship it?", WAIT).unwrap();
    t.keys(&["N"]);
    t.keys(&["a"]);
    t.wait_for("Confirm", WAIT).unwrap();
    t.keys(&["y"]);
    let start = Instant::now();
    loop {
        let v = ok(p.lx(&["--json", "gate", "list"]), "gate list");
        let status = v["gates"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| g["id"] == p.gate.as_str())
            .map(|g| g["status"].as_str().unwrap_or_default().to_string());
        if status.as_deref() == Some("approved") {
            break;
        }
        assert!(
            start.elapsed() < WAIT,
            "not approved: {status:?}\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    t.wait_for("shared: approved", WAIT).unwrap();
    t.keys(&["q"]);
    let _ = std::fs::remove_dir_all(&cfg);
}
