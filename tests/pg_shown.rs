//! A password in a store URL is never shown, whether in its userinfo, as a `password=` query
//! parameter or in a `key=value` connection string: not by `projects add/list`, `board --all`,
//! `status`, `doctor`, `store migrate`, `start-goal` or `setup`, nor in an error. Through the
//! binary, on a real database (the server ignores the password: it trusts local logins).

mod common;

use std::time::Duration;

use common::pg::{self, DbProject, project_in};
use common::tmux::{BIN, Tmux, skip_without_tmux, temp_dir};

/// The password every URL here carries.
const SECRET: &str = "Sekr1tPw";

/// `loopx --store URL ARGS` as the project's owner, with the config directory `cfg`: its
/// exit code and everything it printed.
fn run(p: &DbProject, cfg: &std::path::Path, url: &str, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(BIN)
        .args(["--store", url])
        .args(args)
        .current_dir(&p.cwd)
        .env("LOOPX_OWNER_KEY", &p.key)
        .env("XDG_CONFIG_HOME", cfg)
        .env_remove("LOOPX_DIR")
        .env_remove("LOOPX_AGENT")
        .env_remove("LOOPX_STORE")
        .output()
        .expect("loopx runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Asserts `text` (what `what` printed) does not hold the password.
#[track_caller]
fn hidden(what: &str, text: &str) {
    assert!(
        !text.contains(SECRET),
        "{what} showed the password:\n{text}"
    );
}

#[test]
fn a_password_in_a_store_url_is_never_shown() {
    let Some(server) = pg::server_or_skip() else {
        return;
    };
    let p = project_in("shown", &pg::fresh_db(server));
    let cfg = temp_dir("shown-cfg");
    let in_query = format!("{}?sslmode=disable&password={SECRET}", p.url);
    // Each command on the database, with the password as a query parameter.
    for args in [
        &["status"][..],
        &["--json", "status"],
        &["doctor"],
        &["--json", "doctor"],
        &["store", "migrate"],
        &["--json", "store", "migrate"],
        &["start-goal", "--goal-text", "Another"],
        &["setup", "claude", "--dry-run"],
        &["projects", "add", "--name", "shared"],
        &["projects", "list"],
        &["--json", "projects", "list"],
    ] {
        let (_, text) = run(&p, &cfg, &in_query, args);
        hidden(&format!("{args:?}"), &text);
    }
    // Where the URL is shown, its password is `***`.
    let (code, text) = run(&p, &cfg, &in_query, &["projects", "list"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("password=***"), "{text}");
    let (_, text) = run(&p, &cfg, &in_query, &["store", "migrate"]);
    assert!(text.contains("password=***"), "{text}");

    // Errors: a server that does not answer, and a URL of the wrong form.
    let down = format!("postgres://u@127.0.0.1:1/db?password={SECRET}");
    let with_userinfo = format!("postgres://u:{SECRET}@127.0.0.1:1/db");
    let key_values = format!("host=127.0.0.1 password={SECRET}");
    let ssl = format!("postgres://u@127.0.0.1:1/db?sslpassword={SECRET}");
    for url in [&down, &with_userinfo, &key_values, &ssl] {
        for args in [
            &["status"][..],
            &["--json", "doctor"],
            &["store", "migrate"],
        ] {
            let (code, text) = run(&p, &cfg, url, args);
            assert_ne!(code, 0, "{args:?} on a server that is not there: {text}");
            hidden(&format!("{args:?} on {}", url.len()), &text);
        }
    }
    let (_, text) = run(&p, &cfg, &down, &["status"]);
    assert!(text.contains("password=***"), "{text}");
    let (code, text) = run(&p, &cfg, &down, &["projects", "add", "--name", "down"]);
    assert_eq!(code, 0, "{text}");
    hidden("projects add", &text);

    // The overview: both rows, the one that answers and the one that does not.
    if skip_without_tmux() {
        return;
    }
    let cmd = format!(
        "cd '{}' && env -u LOOPX_STORE -u LOOPX_DIR XDG_CONFIG_HOME='{}' LOOPX_OWNER_KEY='{}' '{}' board --all; sleep 5",
        p.cwd.display(),
        cfg.display(),
        p.key.display(),
        BIN
    );
    let t = Tmux::start("shown", &cmd, 160, 30);
    t.wait_for("Ship it?", Duration::from_secs(20)).unwrap();
    t.wait_for("password=***", Duration::from_secs(20)).unwrap();
    hidden("board --all", &t.screen());
}
