//! The board on the database store in a real terminal (tmux): a claim another process makes
//! shows through `LISTEN`/`NOTIFY`, a gate approved with the board's keys is approved in the
//! database, and a server restart shows as "reconnecting" and then live again. Skips with a
//! message when tmux or PostgreSQL is absent.

mod common;

use std::time::Duration;

use common::pg::{self, DbProject, ok, project_in};
use common::tmux::{BIN, Tmux, loopx, skip_without_tmux};

const WAIT: Duration = Duration::from_secs(10);
/// A server stopping or starting may take a while on a loaded machine.
const RESTART_WAIT: Duration = Duration::from_secs(60);

/// The board on the project's database, 120x30, in its own tmux server.
fn board(tag: &str, p: &DbProject) -> Tmux {
    let cmd = format!(
        "cd '{}' && env -u LOOPX_STORE -u LOOPX_DIR LOOPX_OWNER_KEY='{}' '{}' --store '{}' board; sleep 5",
        p.cwd.display(),
        p.key.display(),
        BIN,
        p.url
    );
    Tmux::start(&format!("pg-{tag}"), &cmd, 120, 30)
}

/// The gate's status as `gate list --json` gives it.
fn gate_status(p: &DbProject) -> String {
    let v = ok(p.lx(&["--json", "gate", "list"]), "gate list");
    v["gates"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|g| g["id"] == p.gate.as_str())
        .map(|g| g["status"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default()
}

/// Claims the project's todo as `agent` from another process.
fn claim(p: &DbProject, agent: &str) {
    let args = ["--json", "--agent", agent, "todo", "claim", &p.todo];
    ok(p.lx(&args), "todo claim");
}

#[test]
fn a_claim_shows_live_and_a_gate_approved_on_the_board_is_approved_in_the_database() {
    if skip_without_tmux() {
        return;
    }
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let p = project_in("pg-live", &pg::fresh_db(server));
    let t = board("live", &p);
    t.wait_for("Claim me", WAIT).unwrap();
    t.wait_for("1 pending", WAIT).unwrap();
    assert!(!t.screen().contains("agent-claimer"), "{}", t.screen());

    // An agent claims in another process: the board hears the database's notification.
    claim(&p, "agent-claimer");
    t.wait_for("agent-claimer", WAIT).unwrap();

    // The owner approves the gate with the board's keys, through the store, signed.
    t.keys(&["Tab", "N", "a"]);
    t.wait_for("“Ship it?”", WAIT).unwrap();
    t.keys(&["y"]);
    t.wait_gone(" pending", WAIT).unwrap();
    assert_eq!(gate_status(&p), "approved", "{}", t.screen());
    // Signed by the owner: the exported project's doctor checks the decision's signature.
    let back = p.cwd.join("back");
    let to = back.to_str().unwrap();
    ok(p.lx(&["store", "export", "--to", to]), "store export");
    ok(
        loopx(&back, &p.key, &["--json", "doctor"]),
        "doctor on the export",
    );
    t.keys(&["q"]);
}

#[test]
fn a_server_restart_shows_as_reconnecting_and_the_board_is_live_again() {
    if skip_without_tmux() {
        return;
    }
    let Some(server) = pg::private_or_skip("board-restart") else {
        return;
    };
    let p = project_in("pg-restart", &pg::fresh_db(&server));
    let t = board("restart", &p);
    t.wait_for("Claim me", WAIT).unwrap();
    t.wait_for("● live", WAIT).unwrap();

    server.halt();
    t.wait_for("reconnecting", RESTART_WAIT).unwrap();
    server.resume();
    // Back: said, and everything read again on a fresh connection in the same round.
    t.wait_for("reconnected to the database", RESTART_WAIT)
        .unwrap();
    let s = t.screen();
    assert!(s.contains("● live"), "{s}");
    assert!(
        !s.contains("agents refused"),
        "the reload after reconnecting failed:\n{s}"
    );

    // And live: a claim made now shows.
    claim(&p, "agent-after");
    t.wait_for("agent-after", WAIT).unwrap();
    t.keys(&["q"]);
}
